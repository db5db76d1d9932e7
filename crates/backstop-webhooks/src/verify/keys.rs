//! Provider public keys from PEM: certificates (their SubjectPublicKeyInfo and serial), `PUBLIC
//! KEY` sections, or the bare base64 that Alipay's console shows.

use super::ConfigError;
use super::hex::encode_hex_upper;
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::{PublicEncryptingKey, PublicKey as RsaPublicKey};
use aws_lc_rs::signature::{self, ParsedPublicKey};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::{PemObject, SectionKind};
use std::convert::Infallible;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// A file (or inline text) holding a provider's public key(s) or certificate(s) in PEM.
///
/// `id` names the key for schemes that pick a key by id: WeChat Pay picks by
/// `Wechatpay-Serial`, which for a platform *certificate* is read from the certificate itself
/// (upper-case hex serial) and for a platform *public key* must be given (`PUB_KEY_ID_…`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFile {
    /// The key's id; overrides a certificate's serial.
    pub id: Option<String>,
    /// Where the PEM is.
    pub source: KeySource,
}

/// Where a [`KeyFile`]'s PEM text is.
#[derive(Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A file, read when the verifier is built.
    Path(PathBuf),
    /// The PEM text itself.
    Pem(String),
}

impl fmt::Debug for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySource::Path(path) => f.debug_tuple("Path").field(path).finish(),
            KeySource::Pem(text) => write!(f, "Pem(<{} bytes>)", text.len()),
        }
    }
}

impl KeyFile {
    /// A PEM file, without an id.
    pub fn path(path: impl Into<PathBuf>) -> Self {
        KeyFile {
            id: None,
            source: KeySource::Path(path.into()),
        }
    }

    /// PEM text given inline, without an id.
    pub fn pem(text: impl Into<String>) -> Self {
        KeyFile {
            id: None,
            source: KeySource::Pem(text.into()),
        }
    }

    /// The same key with an id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// How the key is named in error messages.
    pub(super) fn label(&self) -> String {
        match &self.source {
            KeySource::Path(path) => path.display().to_string(),
            KeySource::Pem(_) => "inline PEM".to_string(),
        }
    }
}

/// Parses the configuration form `PATH` or `ID=PATH` (e.g.
/// `PUB_KEY_ID_0114232134912410000000000000=/etc/backstop/wechatpay_pub_key.pem`). The text
/// before the first `=` is an id only when it is non-empty and holds no `/` or `\`.
impl FromStr for KeyFile {
    type Err = Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.split_once('=') {
            Some((id, path)) if !id.is_empty() && !id.contains(['/', '\\']) => {
                KeyFile::path(path).with_id(id)
            }
            _ => KeyFile::path(s),
        })
    }
}

/// One RSA public key, ready to verify, with the id it is picked by (if any).
pub(super) struct PublicKey {
    pub(super) id: Option<String>,
    pub(super) key: ParsedPublicKey,
}

/// Reads and parses a key file.
pub(super) fn load(file: &KeyFile) -> Result<Vec<PublicKey>, ConfigError> {
    let label = file.label();
    match &file.source {
        KeySource::Path(path) => {
            let text = std::fs::read(path).map_err(|source| ConfigError::ReadKeyFile {
                path: path.clone(),
                source,
            })?;
            parse(&text, &label, file.id.as_deref())
        }
        KeySource::Pem(text) => parse(text.as_bytes(), &label, file.id.as_deref()),
    }
}

/// Parses PEM `CERTIFICATE` / `PUBLIC KEY` sections, or else one bare base64 DER key.
pub(super) fn parse(
    text: &[u8],
    label: &str,
    id: Option<&str>,
) -> Result<Vec<PublicKey>, ConfigError> {
    let bad = |reason: String| ConfigError::BadKey {
        key: label.to_string(),
        reason,
    };
    let mut keys = Vec::new();
    if !text.windows(10).any(|w| w == b"-----BEGIN") {
        let compact: Vec<u8> = text
            .iter()
            .copied()
            .filter(|b| !b.is_ascii_whitespace())
            .collect();
        let der = STANDARD
            .decode(&compact)
            .map_err(|_| bad("neither PEM nor a base64 public key".to_string()))?;
        keys.push(PublicKey {
            id: id.map(str::to_string),
            key: rsa_key(&der).map_err(bad)?,
        });
        return Ok(keys);
    }
    for section in <(SectionKind, Vec<u8>)>::pem_slice_iter(text) {
        let (kind, der) = section.map_err(|e| bad(format!("unreadable PEM: {e}")))?;
        let key = match kind {
            SectionKind::Certificate => certificate_key(&der, id).map_err(&bad)?,
            SectionKind::PublicKey => PublicKey {
                id: id.map(str::to_string),
                key: rsa_key(&der).map_err(&bad)?,
            },
            SectionKind::RsaPrivateKey | SectionKind::PrivateKey | SectionKind::EcPrivateKey => {
                return Err(bad(
                    "holds a private key: configure only the provider's public key or \
                     certificate"
                        .to_string(),
                ));
            }
            _ => continue,
        };
        keys.push(key);
    }
    if keys.is_empty() {
        let hint = if text.windows(14).any(|w| w == b"RSA PUBLIC KEY") {
            "PKCS#1 `RSA PUBLIC KEY` PEM is not read: convert it with \
             `openssl rsa -RSAPublicKey_in -pubout`"
        } else {
            "holds no CERTIFICATE or PUBLIC KEY section"
        };
        return Err(bad(hint.to_string()));
    }
    if id.is_some() && keys.len() > 1 {
        return Err(bad(
            "an id names one key, but the PEM holds several: give each its own file".to_string(),
        ));
    }
    Ok(keys)
}

/// The certificate's public key, named by `id` or else by its upper-case hex serial.
fn certificate_key(der: &[u8], id: Option<&str>) -> Result<PublicKey, String> {
    let der = CertificateDer::from(der);
    let cert = webpki::EndEntityCert::try_from(&der)
        .map_err(|e| format!("not a readable X.509 v3 certificate: {e}"))?;
    let spki = cert.subject_public_key_info();
    let id = match id {
        Some(id) => id.to_string(),
        None => serial_hex(cert.serial()),
    };
    Ok(PublicKey {
        id: Some(id),
        key: rsa_key(spki.as_ref())?,
    })
}

/// A DER INTEGER's content as WeChat Pay prints serials: upper-case hex without the sign byte.
fn serial_hex(serial: &[u8]) -> String {
    let mut bytes = serial;
    while bytes.len() > 1 && bytes[0] == 0 {
        bytes = &bytes[1..];
    }
    encode_hex_upper(bytes)
}

/// An RSA public key for SHA256withRSA (PKCS#1 v1.5) from SubjectPublicKeyInfo or PKCS#1 DER,
/// of 2048 to 8192 bits (checked here: a smaller key would otherwise only fail every
/// verification).
fn rsa_key(der: &[u8]) -> Result<ParsedPublicKey, String> {
    let rsa = RsaPublicKey::from_der(der).map_err(|e| format!("not an RSA public key ({e})"))?;
    let spki = rsa
        .as_der()
        .map_err(|_| "the RSA public key cannot be re-encoded".to_string())?;
    let size_error = "SHA256withRSA here needs an RSA key of 2048 to 8192 bits";
    let bits = PublicEncryptingKey::from_der(spki.as_ref())
        .map_err(|e| match e.to_string().as_str() {
            "TooSmall" | "TooLarge" => format!("{size_error}; this one is {e}"),
            _ => format!("not an RSA public key ({e})"),
        })?
        .key_size_bits();
    if !(2048..=8192).contains(&bits) {
        return Err(format!("{size_error}; this one has {bits}"));
    }
    ParsedPublicKey::new(&signature::RSA_PKCS1_2048_8192_SHA256, spki.as_ref())
        .map_err(|e| format!("not an RSA public key ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_file_strings() {
        assert_eq!(
            "/etc/k.pem".parse::<KeyFile>().unwrap(),
            KeyFile::path("/etc/k.pem")
        );
        assert_eq!(
            "PUB_KEY_ID_01=/etc/k.pem".parse::<KeyFile>().unwrap(),
            KeyFile::path("/etc/k.pem").with_id("PUB_KEY_ID_01")
        );
        assert_eq!(
            "/etc/a=b.pem".parse::<KeyFile>().unwrap(),
            KeyFile::path("/etc/a=b.pem")
        );
        assert_eq!("=x".parse::<KeyFile>().unwrap(), KeyFile::path("=x"));
    }

    #[test]
    fn serials_drop_the_sign_byte() {
        assert_eq!(serial_hex(&[0x00, 0xd7, 0xce]), "D7CE");
        assert_eq!(serial_hex(&[0x51, 0x57]), "5157");
        assert_eq!(serial_hex(&[0x00]), "00");
    }

    #[test]
    fn rejects_useless_pem() {
        let private = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        assert!(parse(private.as_bytes(), "t", None).is_err());
        let pkcs1 = "-----BEGIN RSA PUBLIC KEY-----\nAAAA\n-----END RSA PUBLIC KEY-----\n";
        let err = parse(pkcs1.as_bytes(), "t", None).err().unwrap();
        assert!(err.to_string().contains("RSAPublicKey_in"), "{err}");
        assert!(parse(b"not base64 !!", "t", None).is_err());
        assert!(parse(b"AAAA", "t", None).is_err());
    }
}
