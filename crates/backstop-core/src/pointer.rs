//! A business key read from a payload at a JSON pointer (`/order_id`, `/tenant/id`): an
//! ordering group, the id of a guarded entity. A string is taken as it is, an integer in
//! decimal (order numbers are often numbers); anything else, a missing value included, is an
//! error naming what was found, never a silent default.

/// What a pointer found instead of a key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the payload's {pointer} is {found}, not a string or an integer")]
pub struct NotAKey {
    /// The pointer.
    pub pointer: String,
    /// What was there (`missing`, `an object` …).
    pub found: &'static str,
}

/// The key `payload` holds at `pointer`.
pub fn key_at(payload: &serde_json::Value, pointer: &str) -> Result<String, NotAKey> {
    let found = match payload.pointer(pointer) {
        Some(serde_json::Value::String(s)) => return Ok(s.clone()),
        Some(serde_json::Value::Number(n)) if n.is_i64() || n.is_u64() => return Ok(n.to_string()),
        None => "missing",
        Some(serde_json::Value::Null) => "null",
        Some(serde_json::Value::Bool(_)) => "a boolean",
        Some(serde_json::Value::Number(_)) => "a fractional number",
        Some(serde_json::Value::Array(_)) => "an array",
        Some(serde_json::Value::Object(_)) => "an object",
    };
    Err(NotAKey {
        pointer: pointer.to_string(),
        found,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_and_integers_are_keys_and_nothing_else_is() {
        let p = json!({"a": "x", "n": 1001, "f": 1.5, "o": {}, "z": null});
        assert_eq!(key_at(&p, "/a").unwrap(), "x");
        assert_eq!(key_at(&p, "/n").unwrap(), "1001");
        for (ptr, found) in [
            ("/f", "a fractional number"),
            ("/o", "an object"),
            ("/z", "null"),
            ("/q", "missing"),
        ] {
            assert_eq!(key_at(&p, ptr).unwrap_err().found, found, "{ptr}");
        }
    }
}
