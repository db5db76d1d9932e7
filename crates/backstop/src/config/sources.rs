//! `[sources.NAME]`: inbound callback sources, each served at `POST /v1/hooks/NAME`.
//!
//! ```toml
//! [sources.wechatpay]
//! scheme = "wechatpay-v3"     # standard-webhooks | stripe | hmac-sha256 | wechatpay-v3 | alipay-rsa2
//! keys = ["<APIv3 key>"]      # secrets; several during a rotation
//! key_files = ["PUB_KEY_ID_0114...=wechatpay_pub_key.pem"]  # certificates / public keys
//! tolerance = "5m"
//! kind = "payment.notified"   # a configured kind: each accepted callback becomes one task
//! key = "/id"                 # the provider's event id: JSON pointer, header:NAME or form:FIELD
//! ```
//!
//! Key files are read relative to the configuration file's directory, and every source's
//! verifier is built here, so a key that could never verify anything stops the start.

use super::{ConfigError, Invalid};
use backstop_core::KindConfig;
use backstop_core::duration::parse_duration;
use backstop_engine::callbacks::{CallbackSource, DEFAULT_MAX_CALLBACK_BODY};
use backstop_webhooks::verify::{KeyFile, KeyLocator, Scheme, Verifier, VerifierConfig};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSource {
    scheme: String,
    kind: Option<String>,
    #[serde(default)]
    keys: Vec<String>,
    #[serde(default)]
    key_files: Vec<String>,
    tolerance: Option<String>,
    key: Option<String>,
    signature_header: Option<String>,
    max_body: Option<usize>,
}

/// One checked `[sources.NAME]`.
#[derive(Clone, Debug)]
pub struct SourceConfig {
    /// The `{source}` of `POST /v1/hooks/{source}`.
    pub name: String,
    /// The kind of the tasks it creates.
    pub kind: String,
    /// What its verifier is built from (key files already resolved to absolute paths).
    pub verifier: VerifierConfig,
    /// Largest accepted body, in bytes.
    pub max_body: usize,
}

impl SourceConfig {
    /// The engine's source: builds the verifier (reading the key files again).
    pub fn build(&self) -> Result<CallbackSource, String> {
        let verifier = Verifier::new(&self.verifier).map_err(|e| e.to_string())?;
        let mut s = CallbackSource::new(&self.name, &self.kind, verifier);
        s.max_body = self.max_body;
        Ok(s)
    }
}

/// Reads every `[sources.NAME]`; `kinds` are the configured kinds, `base` the directory key
/// files are relative to.
pub(super) fn sources(
    raw: BTreeMap<String, RawSource>,
    kinds: &[KindConfig],
    base: &Path,
    invalid: Invalid,
) -> Result<Vec<SourceConfig>, ConfigError> {
    let mut out = Vec::new();
    for (name, s) in raw {
        let at = |field: &str| format!("sources.{name:?}.{field}");
        if name.is_empty()
            || name.len() > 64
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            return Err(invalid(
                format!("sources.{name:?}"),
                "a source name is its URL's last segment: use 1 to 64 letters, digits, '.', '-' \
                 and '_'"
                    .into(),
            ));
        }
        let scheme: Scheme =
            s.scheme
                .parse()
                .map_err(|e: backstop_webhooks::verify::UnknownScheme| {
                    invalid(at("scheme"), e.to_string())
                })?;
        let kind = s.kind.ok_or_else(|| {
            invalid(
                at("kind"),
                "missing: the kind of the task each accepted callback becomes".into(),
            )
        })?;
        if !kinds.iter().any(|k| k.name == kind) {
            let mut names: Vec<&str> = kinds.iter().map(|k| k.name.as_str()).collect();
            names.sort_unstable();
            return Err(invalid(
                at("kind"),
                format!(
                    "{kind:?} is not a configured kind (add [kinds.\"{kind}\"]; configured: {})",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ),
            ));
        }
        let mut config = VerifierConfig::new(scheme);
        config.keys = s.keys;
        config.key_files = s
            .key_files
            .iter()
            .map(|f| {
                let file: KeyFile = f.parse().expect("infallible");
                resolve(file, base)
            })
            .collect();
        if let Some(t) = &s.tolerance {
            config.tolerance =
                parse_duration(t).map_err(|e| invalid(at("tolerance"), e.to_string()))?;
            if config.tolerance.as_secs() == 0 {
                return Err(invalid(
                    at("tolerance"),
                    "must be at least 1s: every signed timestamp would be refused".into(),
                ));
            }
        }
        if let Some(k) = &s.key {
            config.key_locator = Some(
                k.parse::<KeyLocator>()
                    .map_err(|e| invalid(at("key"), e.to_string()))?,
            );
        } else if scheme == Scheme::HmacSha256 {
            return Err(invalid(
                at("key"),
                "missing: hmac-sha256 has no event id of its own; say where the provider's is \
                 (\"/id\", \"header:X-GitHub-Delivery\", \"form:id\")"
                    .into(),
            ));
        }
        config.signature_header = s.signature_header;
        let max_body = match s.max_body {
            None => DEFAULT_MAX_CALLBACK_BODY,
            Some(0) => return Err(invalid(at("max_body"), "must be at least 1".into())),
            Some(n) => n,
        };
        if let Err(e) = Verifier::new(&config) {
            let field = match &e {
                backstop_webhooks::verify::ConfigError::ReadKeyFile { .. }
                | backstop_webhooks::verify::ConfigError::DuplicateSerial(_) => "key_files",
                backstop_webhooks::verify::ConfigError::BadKey { key, .. }
                    if !key.starts_with("keys[") && key != "inline PEM" =>
                {
                    "key_files"
                }
                backstop_webhooks::verify::ConfigError::InvalidHeaderName(_) => "signature_header",
                backstop_webhooks::verify::ConfigError::LocatorNotApplicable { .. } => "key",
                backstop_webhooks::verify::ConfigError::UnusedOption { option, .. } => option,
                _ => "keys",
            };
            return Err(invalid(at(field), e.to_string()));
        }
        out.push(SourceConfig {
            name,
            kind,
            verifier: config,
            max_body,
        });
    }
    Ok(out)
}

/// A relative key file path made relative to the configuration's directory.
fn resolve(file: KeyFile, base: &Path) -> KeyFile {
    use backstop_webhooks::verify::KeySource;
    match &file.source {
        KeySource::Path(p) if p.is_relative() => {
            let path = base.join(p);
            match &file.id {
                Some(id) => KeyFile::path(path).with_id(id.clone()),
                None => KeyFile::path(path),
            }
        }
        _ => file,
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const KIND: &str = "[kinds.\"payment.notified\"]\ntarget = \"pull\"\n";

    #[test]
    fn reads_a_source() {
        let c = Config::parse(
            &format!(
                "{KIND}[sources.stripe]\nscheme = \"stripe\"\nkeys = [\"whsec_a\", \"whsec_b\"]\n\
                 tolerance = \"2m\"\nkind = \"payment.notified\"\nkey = \"/id\"\nmax_body = 4096\n"
            ),
            "t.toml",
        )
        .unwrap();
        let s = &c.sources[0];
        assert_eq!(
            (s.name.as_str(), s.kind.as_str()),
            ("stripe", "payment.notified")
        );
        assert_eq!(s.verifier.keys.len(), 2);
        assert_eq!(s.verifier.tolerance.as_secs(), 120);
        assert_eq!(s.max_body, 4096);
        assert!(s.build().is_ok());
    }

    #[test]
    fn key_files_are_relative_to_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let vectors = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../backstop-webhooks/tests/vectors/wechatpay-v3-platform-pubkey.pem"
        );
        std::fs::copy(vectors, dir.path().join("pub.pem")).unwrap();
        let file = dir.path().join("backstop.toml");
        std::fs::write(
            &file,
            format!(
                "{KIND}[sources.wechatpay]\nscheme = \"wechatpay-v3\"\n\
                 keys = [\"0123456789abcdef0123456789abcdef\"]\n\
                 key_files = [\"PUB_KEY_ID_01=pub.pem\"]\nkind = \"payment.notified\"\n"
            ),
        )
        .unwrap();
        let c = Config::load(&file).unwrap();
        assert_eq!(c.sources.len(), 1);
        assert!(c.sources[0].build().is_ok());
    }

    #[test]
    fn errors_name_the_source_and_the_field() {
        let cases = [
            (
                "[sources.a]\nscheme = \"github\"\nkind = \"payment.notified\"",
                "sources.\"a\".scheme: unknown callback scheme `github`",
            ),
            (
                "[sources.a]\nscheme = \"stripe\"\nkeys = [\"whsec_x\"]\nkind = \"nope\"",
                "sources.\"a\".kind: \"nope\" is not a configured kind",
            ),
            (
                "[sources.a]\nscheme = \"stripe\"\nkeys = [\"whsec_x\"]",
                "sources.\"a\".kind: missing",
            ),
            (
                "[sources.a]\nscheme = \"stripe\"\nkind = \"payment.notified\"",
                "sources.\"a\".keys",
            ),
            (
                "[sources.a]\nscheme = \"hmac-sha256\"\nkeys = [\"s\"]\nkind = \"payment.notified\"",
                "sources.\"a\".key: missing",
            ),
            (
                "[sources.a]\nscheme = \"stripe\"\nkeys = [\"whsec_x\"]\nkind = \"payment.notified\"\nkey = \"id\"",
                "sources.\"a\".key",
            ),
            (
                "[sources.a]\nscheme = \"alipay-rsa2\"\nkey_files = [\"missing.pem\"]\nkind = \"payment.notified\"",
                "sources.\"a\".key_files: cannot read key file",
            ),
            (
                "[sources.a]\nscheme = \"stripe\"\nkeys = [\"whsec_x\"]\nkind = \"payment.notified\"\ntolerance = \"soon\"",
                "sources.\"a\".tolerance",
            ),
            (
                "[sources.\"a/b\"]\nscheme = \"stripe\"\nkeys = [\"whsec_x\"]\nkind = \"payment.notified\"",
                "URL's last segment",
            ),
            (
                "[sources.a]\nscheme = \"stripe\"\nkeys = [\"whsec_x\"]\nkind = \"payment.notified\"\nsecret = \"x\"",
                "unknown field `secret`",
            ),
        ];
        for (text, want) in cases {
            let err = Config::parse(&format!("{KIND}{text}"), "t.toml")
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err:?} should contain {want:?}");
        }
    }
}
