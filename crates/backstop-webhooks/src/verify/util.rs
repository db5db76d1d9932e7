//! Small helpers shared by the schemes: header reading, hex, the timestamp window.

use super::Rejection;
use http::HeaderMap;
use subtle::ConstantTimeEq;

/// The header's first value as text; `Ok(None)` when absent, a rejection when it is not
/// visible ASCII.
pub(super) fn header<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, Rejection> {
    match headers.get(name) {
        None => Ok(None),
        Some(value) => value
            .to_str()
            .map(Some)
            .map_err(|_| Rejection::MalformedHeader {
                header: name.to_string(),
                reason: "not visible ASCII",
            }),
    }
}

/// The header's first value as text; a missing header is a rejection that names it.
pub(super) fn required_header<'a>(
    headers: &'a HeaderMap,
    name: &str,
) -> Result<&'a str, Rejection> {
    header(headers, name)?.ok_or_else(|| Rejection::MissingHeader(name.to_string()))
}

/// At most 64 characters of a value the caller sent, for a rejection message (which may be
/// logged and is sent back).
pub(super) fn clip(value: &str) -> String {
    value.chars().take(64).collect()
}

/// Parses a signed Unix timestamp in seconds (an optional leading `+`/`-` and digits only).
pub(super) fn parse_timestamp(value: &str, header: &'static str) -> Result<i64, Rejection> {
    value
        .parse::<i64>()
        .map_err(|_| Rejection::BadTimestamp { header })
}

/// `|now − ts|` in seconds.
pub(super) fn skew(now: jiff::Timestamp, ts: i64) -> u64 {
    now.as_second().abs_diff(ts)
}

/// Rejects when `|now − ts| > tolerance` (the boundary itself is accepted).
pub(super) fn within_inclusive(
    now: jiff::Timestamp,
    ts: i64,
    tolerance_secs: u64,
) -> Result<(), Rejection> {
    let skew_secs = skew(now, ts);
    if skew_secs > tolerance_secs {
        Err(Rejection::OutsideTolerance {
            skew_secs,
            tolerance_secs,
        })
    } else {
        Ok(())
    }
}

/// Decodes hex (either case); `None` on an odd length or a non-hex character.
pub(super) fn decode_hex(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    bytes
        .chunks_exact(2)
        .map(|pair| Some(hex_digit(pair[0])? << 4 | hex_digit(pair[1])?))
        .collect()
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Upper-case hex, as WeChat Pay writes certificate serials.
pub(super) fn encode_hex_upper(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// Constant-time comparison; a length mismatch is not secret (MACs have a fixed length).
pub(super) fn tags_equal(expected: &[u8], candidate: &[u8]) -> bool {
    expected.len() == candidate.len() && bool::from(expected.ct_eq(candidate))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_rejects() {
        assert_eq!(decode_hex("00ffA0"), Some(vec![0, 0xff, 0xa0]));
        assert_eq!(decode_hex("0"), None);
        assert_eq!(decode_hex("zz"), None);
        assert_eq!(decode_hex(""), Some(vec![]));
        assert_eq!(encode_hex_upper(&[0xd7, 0x01, 0x0a]), "D7010A");
    }

    #[test]
    fn tolerance_boundary_is_inclusive() {
        let now = jiff::Timestamp::from_second(1_000).unwrap();
        assert_eq!(within_inclusive(now, 700, 300), Ok(()));
        assert_eq!(within_inclusive(now, 1_300, 300), Ok(()));
        assert_eq!(
            within_inclusive(now, 699, 300),
            Err(Rejection::OutsideTolerance {
                skew_secs: 301,
                tolerance_secs: 300
            })
        );
        assert!(within_inclusive(now, i64::MIN, 300).is_err());
    }
}
