//! Times on the wire: RFC 3339 UTC with exactly three fraction digits
//! (`2026-11-29T11:14:25.639Z`). The ledger keeps milliseconds, and a fixed width parses with
//! the strictest client formats (PHP's `DATE_RFC3339_EXTENDED`, for one).

use jiff::Timestamp;
use serde::{Deserialize, Deserializer, Serializer};

/// The wire text of `t`.
pub fn format(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// `#[serde(with = "wire_time")]` for a `Timestamp`.
pub fn serialize<S: Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format(*t))
}

/// Reads any RFC 3339 timestamp.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
    Timestamp::deserialize(d)
}

/// `#[serde(with = "wire_time::option")]` for an `Option<Timestamp>`.
pub mod option {
    use super::*;

    pub fn serialize<S: Serializer>(t: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_str(&format(*t)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
        Option::<Timestamp>::deserialize(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn always_three_fraction_digits() {
        for (ms, want) in [
            (1_790_000_000_000, "2026-09-21T14:13:20.000Z"),
            (1_790_000_000_980, "2026-09-21T14:13:20.980Z"),
            (1_790_000_000_007, "2026-09-21T14:13:20.007Z"),
        ] {
            assert_eq!(format(Timestamp::from_millisecond(ms).unwrap()), want);
        }
    }
}
