//! When a schedule fires: a cron expression read in an IANA time zone, turned into instants.
//!
//! DST follows croner's OCPS/Vixie rules: a fixed time inside a spring-forward gap (02:30 on
//! the day 02:00 jumps to 03:00) fires once, at the first valid time after the gap, and is
//! marked [`Instant::shifted`]; a fixed time in a repeated hour fires once (the first
//! pass); an expression with a wildcard or step in its time fields fires at every real
//! instant that matches, so `0 * * * *` has 23 instants on a spring-forward day and 25 on a
//! fall-back day.

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// What a cron expression or a time zone got wrong, in words for the config error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    /// The expression did not parse.
    #[error("{expr:?} is not a cron expression ({why}); expected {expected}")]
    Expression {
        expr: String,
        why: String,
        expected: &'static str,
    },
    /// The time zone is not in the IANA database.
    #[error("{zone:?} is not an IANA time zone (e.g. UTC, Europe/Berlin, Asia/Shanghai)")]
    TimeZone { zone: String },
}

const FIVE_FIELDS: &str = "5 fields (minute hour day-of-month month day-of-week, e.g. \
                           \"0 2 * * *\") or an alias (@yearly, @annually, @monthly, @weekly, \
                           @daily, @hourly)";
const SIX_FIELDS: &str = "6 fields with seconds = true (second minute hour day-of-month month \
                          day-of-week, e.g. \"*/5 * * * * *\") or an alias (@yearly, \
                          @annually, @monthly, @weekly, @daily, @hourly)";

/// One instant a schedule names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Instant {
    /// The instant, whole seconds.
    pub at: Timestamp,
    /// The expression's wall-clock time did not exist that day (a spring-forward gap): this is
    /// the first valid time after it.
    pub shifted: bool,
}

/// A parsed expression with its time zone.
#[derive(Debug, Clone)]
pub struct CronTimes {
    cron: Cron,
    expr: String,
    zone_name: String,
    zone: TimeZone,
}

impl CronTimes {
    /// Reads `expr` (5 fields, or 6 with a leading seconds field when `seconds`; `@hourly`
    /// style aliases either way) in the IANA zone `zone`.
    pub fn parse(expr: &str, seconds: bool, zone: &str) -> Result<Self, CronError> {
        let expected = if seconds { SIX_FIELDS } else { FIVE_FIELDS };
        let bad = |why: String| CronError::Expression {
            expr: expr.to_string(),
            why,
            expected,
        };
        let trimmed = expr.trim();
        if trimmed.starts_with('@') {
            let known = [
                "@yearly",
                "@annually",
                "@monthly",
                "@weekly",
                "@daily",
                "@hourly",
            ];
            if !known.iter().any(|a| a.eq_ignore_ascii_case(trimmed)) {
                return Err(bad(format!("unknown alias {trimmed}")));
            }
        } else {
            // croner counts fields too, but its message speaks of its own options.
            let fields = trimmed.split_whitespace().count();
            let want = if seconds { 6 } else { 5 };
            if fields != want {
                return Err(bad(format!("{fields} fields")));
            }
        }
        let parser = CronParser::builder()
            .seconds(if seconds {
                Seconds::Required
            } else {
                Seconds::Disallowed
            })
            .year(Year::Disallowed)
            .build();
        let cron = parser.parse(trimmed).map_err(|e| bad(e.to_string()))?;
        let tz = TimeZone::get(zone).map_err(|_| CronError::TimeZone {
            zone: zone.to_string(),
        })?;
        // An expression that never matches (`0 0 30 2 *`) is a mistake worth refusing.
        let probe = Timestamp::UNIX_EPOCH.to_zoned(tz.clone());
        cron.find_next_occurrence(&probe, false)
            .map_err(|_| bad("it names no instant".into()))?;
        Ok(CronTimes {
            cron,
            expr: trimmed.to_string(),
            zone_name: zone.to_string(),
            zone: tz,
        })
    }

    /// The expression as written (trimmed).
    pub fn expr(&self) -> &str {
        &self.expr
    }

    /// The time zone's IANA name.
    pub fn zone_name(&self) -> &str {
        &self.zone_name
    }

    /// The first instant strictly after `after`, if any before the year 5000.
    pub fn next_after(&self, after: Timestamp) -> Option<Instant> {
        let from = after.to_zoned(self.zone.clone());
        let next = self.cron.find_next_occurrence(&from, false).ok()?;
        Some(Instant {
            at: next.timestamp(),
            shifted: !self.cron.is_time_matching(&next).unwrap_or(true),
        })
    }

    /// The last instant at or before `until`, if any since the year 1.
    pub fn last_at_or_before(&self, until: Timestamp) -> Option<Instant> {
        let from = until.to_zoned(self.zone.clone());
        let prev = self.cron.find_previous_occurrence(&from, true).ok()?;
        Some(Instant {
            at: prev.timestamp(),
            shifted: !self.cron.is_time_matching(&prev).unwrap_or(true),
        })
    }

    /// The instants in `(after, until]`, oldest first, at most `limit` of them; the second
    /// value says whether more remain in the range.
    pub fn between(
        &self,
        after: Timestamp,
        until: Timestamp,
        limit: usize,
    ) -> (Vec<Instant>, bool) {
        let mut out = Vec::new();
        let mut cursor = after;
        while let Some(next) = self.next_after(cursor) {
            if next.at > until {
                return (out, false);
            }
            if out.len() == limit {
                return (out, true);
            }
            cursor = next.at;
            out.push(next);
        }
        (out, false)
    }
}

#[cfg(test)]
#[path = "cron_tests.rs"]
mod tests;
