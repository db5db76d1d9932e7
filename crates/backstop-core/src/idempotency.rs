//! When a second enqueue of the same `(kind, key)` is the same operation.

/// Byte-identical payloads, or the same JSON value written differently (key order, spacing):
/// the same operation. Anything else under the same business id is a conflict.
pub fn same_payload(a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    match (
        serde_json::from_slice::<serde_json::Value>(a),
        serde_json::from_slice::<serde_json::Value>(b),
    ) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::same_payload;

    #[test]
    fn the_same_json_written_differently_is_the_same_payload() {
        assert!(same_payload(
            br#"{"a":1,"b":[2]}"#,
            br#"{ "b": [2], "a": 1 }"#
        ));
        assert!(!same_payload(br#"{"a":1}"#, br#"{"a":2}"#));
        assert!(same_payload(b"\xff", b"\xff"));
        assert!(!same_payload(b"\xff", b"\xfe"));
    }
}
