//! The planner's decisions, without I/O: which instants of a schedule become rows now, and
//! whether each runs or is compensated (missed, overlapping, paused) with its reason.
//!
//! Every instant in `(planned_until, now]` becomes exactly one row; the store's unique
//! `(kind, key)` makes a second planner's row for the same instant a repeat. An instant more
//! than [`ON_TIME`] old when planned was missed: no planner ran at it.

use super::cron::Instant;
use super::spec::{CatchUp, Overlap, Schedule};
use super::tick::{rfc3339_seconds, tick_key};
use crate::task::{Status, TaskId};
use jiff::{SignedDuration, Timestamp};
use std::time::Duration;

/// An instant planned within this of it runs as usual (late, but run); an older one was
/// missed and the schedule's `catch_up` decides.
pub const ON_TIME: Duration = Duration::from_secs(60);

/// Rows one pass writes at most; a longer range is planned over several passes.
pub const ROWS_PER_PASS: usize = 1_000;

/// The schedule's stored progress, as the planner reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Every instant up to here has its row. `None`: never planned (instants before the
    /// schedule was first seen are not missed).
    pub planned_until: Option<Timestamp>,
    /// An outage being caught up over several passes: `(from, to)`, when no planner ran.
    pub outage: Option<(Timestamp, Timestamp)>,
    /// The last tick that was to run.
    pub last_tick: Option<TaskId>,
    /// `overlap = "queue_one"`: the instant waiting for the last tick to finish (no row yet).
    pub waiting: Option<Timestamp>,
    /// Paused by hand.
    pub paused: bool,
}

/// What one pass decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The rows to write, oldest instant first.
    pub ticks: Vec<PlannedTick>,
    /// The progress to store once the rows are written.
    pub progress: Progress,
    /// A new outage found by this pass (one alert each): from, to, and how many instants.
    pub new_outage: Option<(Timestamp, Timestamp)>,
    /// More instants are due than one pass writes: plan again at once.
    pub more: bool,
}

/// One row to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedTick {
    pub instant: Instant,
    /// Its task key.
    pub key: String,
    /// When it may start (its instant plus the schedule's jitter).
    pub run_at: Timestamp,
    /// `None`: it runs. `Some(reason)`: it is `compensated` with this reason.
    pub compensated: Option<String>,
}

/// The state of the last tick that was to run, as the store has it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastTick {
    pub id: TaskId,
    pub status: Status,
}

/// Decides the rows for `(progress.planned_until, now]`. `last` is the state of
/// `progress.last_tick`, read just before.
pub fn plan(s: &Schedule, progress: &Progress, last: Option<LastTick>, now: Timestamp) -> Plan {
    let mut next = progress.clone();
    let Some(from) = progress.planned_until else {
        next.planned_until = Some(now);
        return Plan {
            ticks: Vec::new(),
            progress: next,
            new_outage: None,
            more: false,
        };
    };
    let mut ticks = Vec::new();
    let mut new_outage = None;
    let missed_before = sub(now, ON_TIME);
    // A tick created in this pass counts as unfinished for the next one.
    let mut busy: Option<(TaskId, Status)> = last
        .filter(|l| !l.status.is_final())
        .map(|l| (l.id, l.status));
    let mut just_ran: Option<String> = None;

    // queue_one: the waiting instant runs once the last tick has finished.
    if let Some(w) = progress.waiting
        && busy.is_none()
    {
        ticks.push(PlannedTick {
            instant: Instant {
                at: w,
                shifted: false,
            },
            key: tick_key(&s.name, w),
            run_at: now,
            compensated: None,
        });
        next.waiting = None;
        just_ran = Some(tick_key(&s.name, w));
    }

    let (instants, more) = s.times.between(from, now, ROWS_PER_PASS);
    // An outage is known once, with its bounds, and caught up over as many passes as it takes.
    let outage = match progress.outage {
        Some(o) if o.1 > from => Some(o),
        _ => match instants.first() {
            Some(first) if first.at < missed_before => {
                let o = (from, now);
                new_outage = Some(o);
                Some(o)
            }
            _ => None,
        },
    };
    // `latest`: the most recent instant runs — an on-time one when there is one, else the
    // last missed one (strictly before the on-time edge, like `in_outage` below).
    let latest_missed = outage.and_then(|(_, to)| {
        let edge = sub(sub(to, ON_TIME), Duration::from_nanos(1));
        let on_time = s.times.next_after(edge).is_some_and(|i| i.at <= to);
        (!on_time)
            .then(|| s.times.last_at_or_before(edge))
            .flatten()
    });
    let mut ran_in_outage = 0u32;
    for i in &instants {
        let key = tick_key(&s.name, i.at);
        let run_at = i.at + jitter_for(&key, s.jitter);
        let mut t = PlannedTick {
            instant: *i,
            key,
            run_at,
            compensated: None,
        };
        let in_outage = outage.filter(|&(_, to)| i.at < sub(to, ON_TIME));
        if progress.paused || s.paused {
            t.compensated = Some("paused: the schedule was paused at its instant".into());
        } else if let Some((ofrom, oto)) = in_outage {
            let window = format!(
                "missed: no scheduler ran {}–{}",
                rfc3339_seconds(ofrom),
                rfc3339_seconds(oto)
            );
            let too_old = s.catchup_window.is_some_and(|w| i.at < sub(oto, w));
            t.compensated = match s.catch_up {
                _ if too_old => Some(format!("{window} (older than catchup_window)")),
                CatchUp::Skip => Some(window),
                CatchUp::Latest if Some(*i) == latest_missed => None,
                CatchUp::Latest => Some(format!("{window} (catch_up = latest runs only the last)")),
                CatchUp::All if ran_in_outage < s.catchup_max && progress.outage.is_none() => {
                    ran_in_outage += 1;
                    None
                }
                CatchUp::All => Some(format!("{window} (beyond catchup_max = {})", s.catchup_max)),
            };
            if t.compensated.is_none() {
                // Caught-up runs are what was asked for: no overlap among them.
                t.run_at = now.max(t.run_at);
                busy = Some((TaskId::default(), Status::Pending));
                just_ran = Some(t.key.clone());
                next.last_tick = None;
            }
        } else {
            match (s.overlap, busy) {
                (Overlap::Allow, _) | (_, None) => {}
                (Overlap::Skip, Some(_)) => {
                    t.compensated = Some(overlap_reason(busy, just_ran.as_deref()));
                }
                (Overlap::QueueOne, Some(_)) => {
                    if next.waiting.is_none() {
                        // No row yet: it is written when the running tick finishes.
                        next.waiting = Some(i.at);
                        continue;
                    }
                    t.compensated = Some(format!(
                        "{}, and the instant {} already waits",
                        overlap_reason(busy, just_ran.as_deref()),
                        rfc3339_seconds(next.waiting.expect("checked"))
                    ));
                }
            }
            if t.compensated.is_none() {
                busy = Some((TaskId::default(), Status::Pending));
                just_ran = Some(t.key.clone());
                next.last_tick = None;
            }
        }
        ticks.push(t);
    }
    next.planned_until = Some(match (more, instants.last()) {
        (true, Some(last)) => last.at,
        _ => now,
    });
    next.outage =
        outage.filter(|&(_, to)| next.planned_until.is_some_and(|p| p < sub(to, ON_TIME)));
    Plan {
        ticks,
        progress: next,
        new_outage,
        more,
    }
}

/// `overlap: <id> still running` for a tick of an earlier pass, or naming the key of a tick
/// this pass wrote (whose id the store assigns).
fn overlap_reason(busy: Option<(TaskId, Status)>, just_ran: Option<&str>) -> String {
    match (just_ran, busy) {
        (Some(key), _) => format!("overlap: {key} still pending"),
        (None, Some((id, Status::Running))) => format!("overlap: {id} still running"),
        (None, Some((id, status))) => format!("overlap: {id} still {}", status.as_str()),
        (None, None) => "overlap".into(),
    }
}

/// The same delay in `[0, jitter)` for a key, whoever plans it.
fn jitter_for(key: &str, jitter: Duration) -> SignedDuration {
    let ms = jitter.as_millis() as u64;
    if ms == 0 {
        return SignedDuration::ZERO;
    }
    // FNV-1a: stable across processes and releases, unlike std's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    SignedDuration::from_millis((h % ms) as i64)
}

fn sub(t: Timestamp, d: Duration) -> Timestamp {
    t.checked_sub(SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX))
        .unwrap_or(Timestamp::MIN)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
