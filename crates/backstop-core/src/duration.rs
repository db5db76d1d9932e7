//! Human durations as written in config and on the command line: `250ms`, `30s`, `5m`, `48h`,
//! `7d`, and combinations such as `1h30m`.

use std::time::Duration;

/// A duration that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {why} (use e.g. 250ms, 30s, 5m, 48h, 7d)")]
pub struct BadDuration {
    pub input: String,
    pub why: &'static str,
}

/// Parses `250ms`, `30s`, `5m`, `48h`, `7d` or a sequence of them (`1h30m`).
pub fn parse_duration(input: &str) -> Result<Duration, BadDuration> {
    let bad = |why| BadDuration {
        input: input.to_string(),
        why,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(bad("empty"));
    }
    let mut total: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad("expected a number"));
        }
        let n: u128 = rest[..digits]
            .parse()
            .map_err(|_| bad("number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit_ms: u128 = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "" => return Err(bad("missing unit")),
            _ => return Err(bad("unknown unit")),
        };
        rest = &rest[unit_len..];
        total = n
            .checked_mul(unit_ms)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| bad("too large"))?;
    }
    // Bound to a century: anything larger is a mistake, and it keeps timestamps in range.
    if total > 100 * 366 * 86_400_000 {
        return Err(bad("too large"));
    }
    Ok(Duration::from_millis(total as u64))
}

/// Formats a duration the way [`parse_duration`] reads it, in its largest exact unit.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms >= size && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_combinations() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("48h").unwrap(), Duration::from_secs(172_800));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("2d").unwrap(), Duration::from_secs(172_800));
    }

    #[test]
    fn rejects_bad_input_with_a_reason() {
        for bad in [
            "",
            "10",
            "s",
            "10x",
            "-5s",
            "1.5s",
            "99999999999999999999999d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert!(
            parse_duration("10x")
                .unwrap_err()
                .to_string()
                .contains("unknown unit")
        );
    }

    #[test]
    fn formats_round_trip() {
        for s in ["250ms", "30s", "5m", "36h", "2d", "1500ms"] {
            assert_eq!(format_duration(parse_duration(s).unwrap()), s);
        }
    }
}
