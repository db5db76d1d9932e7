//! Limits on what callers may put in the ledger.

/// Longest accepted kind name, in bytes.
pub const MAX_KIND_LEN: usize = 128;
/// Longest accepted business key, in bytes.
pub const MAX_KEY_LEN: usize = 512;
/// Default payload limit (1 MiB); configurable.
pub const DEFAULT_MAX_PAYLOAD: usize = 1024 * 1024;
/// Longest accepted entity id (the business id of a state machine's entity), in bytes.
pub const MAX_ENTITY_ID_LEN: usize = 512;
/// Longest accepted event id (the id a callback's sender gives its event), in bytes.
pub const MAX_EVENT_ID_LEN: usize = 255;

/// Input that the ledger refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidInput {
    #[error("kind must not be empty")]
    EmptyKind,
    #[error("kind is {0} bytes; the limit is {MAX_KIND_LEN}")]
    KindTooLong(usize),
    #[error("kind {0:?} may contain only letters, digits, '.', '_' and '-'")]
    KindChars(String),
    #[error("key must not be empty")]
    EmptyKey,
    #[error("key is {0} bytes; the limit is {MAX_KEY_LEN}")]
    KeyTooLong(usize),
    #[error("key must not contain control characters")]
    KeyChars,
    #[error("payload is {size} bytes; the limit is {limit}")]
    PayloadTooLarge { size: usize, limit: usize },
    #[error("payload is not valid JSON: {0}")]
    PayloadNotJson(String),
    #[error("max_attempts must be between 1 and 1000, got {0}")]
    MaxAttempts(u32),
    #[error("{field} must not be empty")]
    Empty { field: &'static str },
    #[error("{field} is {len} bytes; the limit is {limit}")]
    TooLong {
        field: &'static str,
        len: usize,
        limit: usize,
    },
    #[error("{field} must not contain control characters")]
    ControlChars { field: &'static str },
}

/// Checks a kind name.
pub fn kind(kind: &str) -> Result<(), InvalidInput> {
    if kind.is_empty() {
        return Err(InvalidInput::EmptyKind);
    }
    if kind.len() > MAX_KIND_LEN {
        return Err(InvalidInput::KindTooLong(kind.len()));
    }
    if !kind
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(InvalidInput::KindChars(kind.to_string()));
    }
    Ok(())
}

/// Checks a business key.
pub fn key(key: &str) -> Result<(), InvalidInput> {
    if key.is_empty() {
        return Err(InvalidInput::EmptyKey);
    }
    if key.len() > MAX_KEY_LEN {
        return Err(InvalidInput::KeyTooLong(key.len()));
    }
    if key.chars().any(char::is_control) {
        return Err(InvalidInput::KeyChars);
    }
    Ok(())
}

/// Checks an entity id: like a business key, 1 to 512 bytes without control characters.
pub fn entity_id(id: &str) -> Result<(), InvalidInput> {
    bounded_text("id", id, MAX_ENTITY_ID_LEN)
}

/// Checks an event id: 1 to 255 bytes without control characters.
pub fn event_id(id: &str) -> Result<(), InvalidInput> {
    bounded_text("event_id", id, MAX_EVENT_ID_LEN)
}

fn bounded_text(field: &'static str, s: &str, limit: usize) -> Result<(), InvalidInput> {
    if s.is_empty() {
        return Err(InvalidInput::Empty { field });
    }
    if s.len() > limit {
        return Err(InvalidInput::TooLong {
            field,
            len: s.len(),
            limit,
        });
    }
    if s.chars().any(char::is_control) {
        return Err(InvalidInput::ControlChars { field });
    }
    Ok(())
}

/// Checks a JSON payload against the size limit and for well-formedness.
pub fn json_payload(payload: &[u8], limit: usize) -> Result<(), InvalidInput> {
    if payload.len() > limit {
        return Err(InvalidInput::PayloadTooLarge {
            size: payload.len(),
            limit,
        });
    }
    serde_json::from_slice::<serde::de::IgnoredAny>(payload)
        .map_err(|e| InvalidInput::PayloadNotJson(e.to_string()))?;
    Ok(())
}

/// Checks an attempt budget.
pub fn max_attempts(n: u32) -> Result<(), InvalidInput> {
    if (1..=1000).contains(&n) {
        Ok(())
    } else {
        Err(InvalidInput::MaxAttempts(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_empty_long_and_odd_names() {
        assert_eq!(kind(""), Err(InvalidInput::EmptyKind));
        assert!(kind(&"a".repeat(129)).is_err());
        assert!(kind("sms send").is_err());
        assert!(kind("sms.send").is_ok());
        assert_eq!(key(""), Err(InvalidInput::EmptyKey));
        assert!(key(&"k".repeat(513)).is_err());
        assert!(key("a\nb").is_err());
        assert!(key("order-123").is_ok());
    }

    #[test]
    fn entity_and_event_ids_are_bounded_text() {
        assert!(entity_id("order-1001").is_ok());
        assert_eq!(entity_id(""), Err(InvalidInput::Empty { field: "id" }));
        assert!(entity_id(&"i".repeat(512)).is_ok());
        assert!(entity_id(&"i".repeat(513)).is_err());
        assert!(event_id("evt_1 é").is_ok());
        assert!(event_id(&"e".repeat(256)).is_err());
        assert_eq!(
            event_id("a\tb"),
            Err(InvalidInput::ControlChars { field: "event_id" })
        );
    }

    #[test]
    fn payload_must_be_json_and_small_enough() {
        assert!(json_payload(br#"{"a":1}"#, 100).is_ok());
        assert!(matches!(
            json_payload(b"{nope", 100),
            Err(InvalidInput::PayloadNotJson(_))
        ));
        assert!(matches!(
            json_payload(&[b' '; 101], 100),
            Err(InvalidInput::PayloadTooLarge { .. })
        ));
    }
}
