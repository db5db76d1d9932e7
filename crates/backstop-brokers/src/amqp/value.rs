//! AMQP field values as JSON and as header text, for a task's origin and its key.

use lapin::types::{AMQPValue, FieldTable};
use serde_json::{Map, Value, json};

/// A field value as JSON: tables as objects, arrays as arrays, byte strings as text when they
/// are UTF-8 (as every header a producer sets as a string is) and as a list of bytes when not.
pub(crate) fn to_json(v: &AMQPValue) -> Value {
    match v {
        AMQPValue::Boolean(b) => json!(b),
        AMQPValue::ShortShortInt(n) => json!(n),
        AMQPValue::ShortShortUInt(n) => json!(n),
        AMQPValue::ShortInt(n) => json!(n),
        AMQPValue::ShortUInt(n) => json!(n),
        AMQPValue::LongInt(n) => json!(n),
        AMQPValue::LongUInt(n) => json!(n),
        AMQPValue::LongLongInt(n) => json!(n),
        AMQPValue::Float(n) => json!(n),
        AMQPValue::Double(n) => json!(n),
        AMQPValue::DecimalValue(d) => json!({"scale": d.scale, "value": d.value}),
        AMQPValue::ShortString(s) => json!(s.as_str()),
        AMQPValue::LongString(s) => bytes(s.as_bytes()),
        AMQPValue::ByteArray(b) => bytes(b.as_slice()),
        AMQPValue::FieldArray(a) => Value::Array(a.as_slice().iter().map(to_json).collect()),
        AMQPValue::Timestamp(t) => json!(t),
        AMQPValue::FieldTable(t) => Value::Object(table(t)),
        AMQPValue::Void => Value::Null,
    }
}

/// A table as a JSON object.
pub(crate) fn table(t: &FieldTable) -> Map<String, Value> {
    t.inner()
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), to_json(v)))
        .collect()
}

/// A header's value as the text a key is made of: strings as they are, numbers in decimal,
/// anything else as its JSON.
pub(crate) fn text(v: &AMQPValue) -> String {
    match to_json(v) {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

fn bytes(b: &[u8]) -> Value {
    match std::str::from_utf8(b) {
        Ok(s) => json!(s),
        Err(_) => json!(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::{FieldArray, LongString, ShortString};

    #[test]
    fn an_x_death_record_reads_as_json() {
        let mut death = FieldTable::default();
        death.insert(
            ShortString::from("queue"),
            AMQPValue::LongString(LongString::from("sms")),
        );
        death.insert(
            ShortString::from("reason"),
            AMQPValue::LongString(LongString::from("rejected")),
        );
        death.insert(ShortString::from("count"), AMQPValue::LongLongInt(3));
        let mut a = FieldArray::default();
        a.push(AMQPValue::FieldTable(death));
        let v = to_json(&AMQPValue::FieldArray(a));
        assert_eq!(
            v,
            json!([{"count": 3, "queue": "sms", "reason": "rejected"}])
        );
        assert_eq!(text(&AMQPValue::LongLongInt(42)), "42");
        assert_eq!(text(&AMQPValue::LongString(LongString::from("A-1"))), "A-1");
    }
}
