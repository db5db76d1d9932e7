//! Signed timestamps: parsing them and the tolerance window around now.

use super::Rejection;

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

#[cfg(test)]
mod tests {
    use super::*;

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
