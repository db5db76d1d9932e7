//! `backstop why`: one task explained in plain words — its state, what happened, what will
//! happen next and when.

use crate::reconciler::PassReport;
use backstop_core::pause::{Gate, PauseCause};
use backstop_core::{AttemptOutcome, Event, EventType, KindConfig, Status, Task};
use jiff::{SpanRound, Timestamp, Unit};

/// A duration in words, rounded to the second, in hours at most ("3h 2m 5s").
fn span(from: Timestamp, to: Timestamp) -> String {
    let d = (to - from).abs().round(Unit::Second).unwrap_or_default();
    match d.round(SpanRound::new().largest(Unit::Hour)) {
        Ok(s) => format!("{s:#}"),
        Err(_) => format!("{d:#}"),
    }
}

/// The explanation, one sentence per line. `group_head` is the first open task of `t`'s
/// group ([`backstop_core::store::Tasks::group_head`]), for a task in a group; `gate` is its
/// kind's dispatch as the ledger's pauses say ([`Gate::of`]).
pub fn explain(
    t: &Task,
    timeline: &[Event],
    now: Timestamp,
    kind: Option<&KindConfig>,
    last_pass: Option<&PassReport>,
    group_head: Option<&Task>,
    gate: &Gate,
) -> Vec<String> {
    let mut out = Vec::new();
    let attempts: Vec<&Event> = timeline
        .iter()
        .filter(|e| e.kind == EventType::Attempt)
        .collect();
    let fmt = backstop_core::wire_time::format;
    out.push(format!(
        "{}/{} is {} after {} of {} attempts (created {} ago).",
        t.kind,
        t.key,
        t.status,
        t.attempts,
        t.max_attempts,
        span(t.created_at, now)
    ));
    if !attempts.is_empty() {
        let count = |o: AttemptOutcome| attempts.iter().filter(|e| e.outcome == Some(o)).count();
        let mut parts = Vec::new();
        for o in [
            AttemptOutcome::Succeeded,
            AttemptOutcome::Retry,
            AttemptOutcome::Failed,
            AttemptOutcome::Skipped,
            AttemptOutcome::Expired,
            AttemptOutcome::LeaseExpired,
            AttemptOutcome::Interrupted,
        ] {
            let n = count(o);
            if n > 0 {
                parts.push(format!("{n} {o}"));
            }
        }
        if !parts.is_empty() {
            out.push(format!("Attempts so far: {}.", parts.join(", ")));
        }
    }
    let count = |k: EventType| timeline.iter().filter(|e| e.kind == k).count();
    let suspended = count(EventType::Suspended);
    if suspended > 0 {
        out.push(format!(
            "It was suspended {suspended} time(s) by a worker stopping, each time with its checkpoint and not counted as an attempt; it resumes from its last checkpoint."
        ));
    }
    let refused = count(EventType::CheckpointRejected);
    if refused > 0 {
        out.push(format!(
            "{refused} checkpoint(s) from workers whose lease was lost were refused; the cursor is the current attempt's."
        ));
    }
    let throttled = count(EventType::RateLimited);
    if throttled > 0 {
        let last = timeline
            .iter()
            .rev()
            .find(|e| e.kind == EventType::RateLimited)
            .and_then(|e| e.reason.as_deref())
            .unwrap_or("its rate limit");
        out.push(format!(
            "Its kind's rate limit held it back {throttled} time(s), spending no attempt; the last time: {last}."
        ));
    }
    if let Some(e) = &t.last_error {
        out.push(format!("The last error was: {e}."));
    }
    for e in timeline.iter().filter(|e| {
        matches!(
            e.kind,
            EventType::Retried | EventType::Resolved | EventType::Canceled
        )
    }) {
        out.push(format!(
            "{} by {} at {}{}.",
            e.kind.as_str(),
            e.actor.as_deref().unwrap_or("someone"),
            fmt(e.at),
            e.reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ));
    }
    if t.parked {
        parked(t, now, group_head, &mut out);
        return out;
    }
    match t.status {
        Status::Pending => {
            paused(gate, now, &mut out);
            pending(t, now, kind, last_pass, &mut out)
        }
        Status::Running => {
            let until = t.lease_until.unwrap_or(now);
            out.push(format!(
                "Attempt {} is running on {}; its lease runs until {} ({} {}).",
                t.attempts,
                t.lease_owner.as_deref().unwrap_or("an unknown worker"),
                fmt(until),
                if until >= now { "in" } else { "expired" },
                span(now, until)
            ));
            out.push("If that worker dies, the reconciler rescues the task once the lease has expired, and it runs again.".into());
        }
        Status::Succeeded => out.push(format!(
            "It succeeded at {}. Nothing more will happen.",
            fmt(t.updated_at)
        )),
        Status::Failed => {
            out.push(format!(
                "It is a dead letter since {}: {}.",
                fmt(t.updated_at),
                t.reason.as_deref().unwrap_or("failed")
            ));
            out.push(format!(
                "Nothing more happens until a person acts: `backstop dead retry {}` runs it again with a fresh attempt budget; `backstop dead resolve {} --reason ...` closes it as compensated.",
                t.id, t.id
            ));
            if let (Some(g), Some(h)) = (&t.group, group_head)
                && h.id == t.id
            {
                out.push(format!(
                    "It holds group {g:?}: the group's later tasks wait until it is retried and succeeds, or is resolved."
                ));
            }
        }
        Status::Compensated => out.push(format!(
            "It was compensated at {}: {}. Nothing more will happen unless someone retries it.",
            fmt(t.updated_at),
            t.reason.as_deref().unwrap_or("no reason recorded")
        )),
    }
    out
}

/// A task parked in its group: what it waits for.
fn parked(t: &Task, now: Timestamp, head: Option<&Task>, out: &mut Vec<String>) {
    let group = t.group.as_deref().unwrap_or_default();
    let Some(h) = head else {
        out.push(format!(
            "It waits in group {group:?}, whose earlier tasks have all ended: it is unparked by the next end in the group."
        ));
        return;
    };
    let what = match h.status {
        Status::Failed => format!(
            "failed {} ago: {}",
            span(h.updated_at, now),
            h.last_error
                .as_deref()
                .or(h.reason.as_deref())
                .unwrap_or("no error recorded")
        ),
        Status::Running => format!(
            "running attempt {} on {}",
            h.attempts,
            h.lease_owner.as_deref().unwrap_or("an unknown worker")
        ),
        Status::Pending if h.attempts > 0 => format!(
            "pending its retry at {} after {} attempt(s)",
            backstop_core::wire_time::format(h.run_at),
            h.attempts
        ),
        _ => format!(
            "{}, due at {}",
            h.status,
            backstop_core::wire_time::format(h.run_at)
        ),
    };
    let verb = if h.status == Status::Failed {
        "blocked by"
    } else {
        "waiting for"
    };
    out.push(format!(
        "It is {verb} task {} ({}/{}, {what}): group {group:?} runs one task at a time, in order.",
        h.id, h.kind, h.key
    ));
    out.push(format!(
        "Once that task ends, the group's next task is due{}.",
        if t.run_at > now {
            format!(
                ", this one no earlier than {}",
                backstop_core::wire_time::format(t.run_at)
            )
        } else {
            String::new()
        }
    ));
}

/// What a pause of the task's kind means for it.
fn paused(gate: &Gate, now: Timestamp, out: &mut Vec<String>) {
    let fmt = backstop_core::wire_time::format;
    match gate {
        Gate::Open => {}
        Gate::Closed {
            cause,
            reason,
            until,
            by,
            since,
        } => {
            let what = match cause {
                PauseCause::Manual => "paused by hand",
                PauseCause::Breaker => "paused by its circuit breaker",
                PauseCause::RetryAfter => "paused because its target asked to wait",
            };
            let end = match until {
                Some(u) => format!("until {} (in {})", fmt(*u), span(now, *u)),
                None => "until someone resumes it".to_string(),
            };
            out.push(format!(
                "Its kind is {what} ({reason}; by {by} at {}): nothing of it starts {end}, and waiting spends no attempt.",
                fmt(*since)
            ));
        }
        Gate::Probing { reason, .. } => out.push(format!(
            "Its kind's circuit breaker is probing the target ({reason}): one task at a time is sent until a probe succeeds."
        )),
    }
}

fn pending(
    t: &Task,
    now: Timestamp,
    kind: Option<&KindConfig>,
    last_pass: Option<&PassReport>,
    out: &mut Vec<String>,
) {
    let fmt = backstop_core::wire_time::format;
    if let Some(exp) = t.expires_at {
        out.push(format!(
            "Its business deadline is {}: if it has not run by then it is compensated with reason `expired`, never run.",
            fmt(exp)
        ));
    }
    if t.run_at > now {
        let next = if t.attempts == 0 {
            "Its first attempt"
        } else {
            "Its next attempt"
        };
        out.push(format!(
            "{next} is due at {} (in {}).",
            fmt(t.run_at),
            span(now, t.run_at)
        ));
    } else {
        out.push(format!(
            "It has been due since {} ({} ago) and waits for a free slot.",
            fmt(t.run_at),
            span(t.run_at, now)
        ));
        if let Some(l) = kind.and_then(|k| k.concurrency_limit.as_ref()) {
            let key = serde_json::from_slice::<serde_json::Value>(&t.payload)
                .ok()
                .and_then(|v| l.check(&v).ok())
                .unwrap_or_default();
            let key = match key.as_str() {
                backstop_core::limit::SHARED_KEY => "the shared key".to_string(),
                k => format!("{k:?}"),
            };
            out.push(format!(
                "Its kind runs at most {} at once per {} (this task's: {key}), counted over every process: while {} of its key run, it waits for one of them to end.",
                l.max, l.key, l.max
            ));
        }
        if let Some(h) = kind.and_then(|k| k.host_limit.as_ref()) {
            out.push(format!(
                "Its target host {} takes at most {} at once across its kinds ({}), counted over every process: while {} run, it waits for one of them to end.",
                h.host,
                h.max,
                h.kinds.join(", "),
                h.max
            ));
        }
        match last_pass.and_then(|p| p.overdue.iter().find(|o| o.kind == t.kind)) {
            Some(o) => out.push(format!(
                "The reconciler finds this kind overdue: {}.",
                o.why.explain()
            )),
            None if kind.is_some_and(|k| k.paused) => out.push(
                "Its kind is paused in the configuration: nothing starts until it is resumed."
                    .into(),
            ),
            None if kind.is_none() => out.push(
                "Its kind is not in this configuration: check that a backstop process serves it."
                    .into(),
            ),
            None => {}
        }
    }
    let left = t.max_attempts.saturating_sub(t.attempts);
    out.push(format!(
        "{left} attempt{} left; transient failures are retried with backoff, a permanent failure makes it a dead letter.",
        if left == 1 { "" } else { "s" }
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use backstop_core::TaskId;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_900_000_000 + s).unwrap()
    }

    fn task(status: Status) -> Task {
        Task {
            id: TaskId::new(),
            kind: "sms.send".into(),
            key: "order-1".into(),
            payload: vec![],
            status,
            attempts: 1,
            max_attempts: 5,
            run_at: at(100),
            expires_at: None,
            lease_owner: None,
            lease_until: None,
            epoch: 1,
            traceparent: None,
            last_error: Some("HTTP 503".into()),
            reason: None,
            created_at: at(0),
            updated_at: at(10),
            group: None,
            group_seq: None,
            parked: false,
        }
    }

    #[test]
    fn a_retry_says_when_it_runs_next_and_how_many_attempts_are_left() {
        let tl = [Event {
            outcome: Some(AttemptOutcome::Retry),
            ..Event::new(EventType::Attempt, at(10))
        }];
        let text = explain(
            &task(Status::Pending),
            &tl,
            at(40),
            None,
            None,
            None,
            &Gate::Open,
        )
        .join("\n");
        assert!(text.contains("is pending after 1 of 5 attempts"), "{text}");
        assert!(text.contains("1 retry"), "{text}");
        assert!(text.contains("HTTP 503"), "{text}");
        assert!(text.contains("(in 1m)"), "{text}");
        assert!(text.contains("4 attempts left"), "{text}");
    }

    #[test]
    fn a_rate_limited_task_says_how_often_and_the_last_reason() {
        let said = |r: &str| Event {
            reason: Some(r.into()),
            ..Event::new(EventType::RateLimited, at(10))
        };
        let tl = [
            said("first"),
            said("rate limit of key \"a\": may start at X"),
        ];
        let text = explain(
            &task(Status::Pending),
            &tl,
            at(40),
            None,
            None,
            None,
            &Gate::Open,
        )
        .join("\n");
        assert!(
            text.contains("rate limit held it back 2 time(s), spending no attempt; the last time: rate limit of key \"a\": may start at X."),
            "{text}"
        );
    }

    #[test]
    fn suspensions_and_refused_checkpoints_are_told() {
        let tl = [
            Event::new(EventType::Suspended, at(10)),
            Event::new(EventType::Suspended, at(20)),
            Event::new(EventType::CheckpointRejected, at(30)),
        ];
        let text = explain(
            &task(Status::Pending),
            &tl,
            at(40),
            None,
            None,
            None,
            &Gate::Open,
        )
        .join("\n");
        assert!(text.contains("suspended 2 time(s)"), "{text}");
        assert!(text.contains("1 checkpoint(s) from workers"), "{text}");
        let quiet = explain(
            &task(Status::Pending),
            &[],
            at(40),
            None,
            None,
            None,
            &Gate::Open,
        )
        .join("\n");
        assert!(!quiet.contains("suspended"), "{quiet}");
    }

    #[test]
    fn a_dead_letter_says_what_a_person_can_do() {
        let mut t = task(Status::Failed);
        t.reason = Some("permanent error".into());
        let text = explain(&t, &[], at(40), None, None, None, &Gate::Open).join("\n");
        assert!(text.contains("dead letter"), "{text}");
        assert!(text.contains("backstop dead retry"), "{text}");
    }

    #[test]
    fn a_due_task_of_a_host_limited_kind_names_the_host() {
        let mut k = KindConfig::new("stock.sync", backstop_core::Target::Pull);
        k.host_limit = Some(backstop_core::limit::HostMax {
            host: "warehouse.internal".into(),
            kinds: vec!["order.ship".into(), "stock.sync".into()],
            max: 8,
        });
        let t = task(Status::Pending);
        let text = explain(&t, &[], at(400), Some(&k), None, None, &Gate::Open).join("\n");
        assert!(
            text.contains("host warehouse.internal takes at most 8 at once across its kinds (order.ship, stock.sync)"),
            "{text}"
        );
        let text = explain(&t, &[], at(400), None, None, None, &Gate::Open).join("\n");
        assert!(!text.contains("warehouse"), "{text}");
    }

    #[test]
    fn a_due_task_of_a_limited_kind_names_its_key_and_the_limit() {
        let mut k = KindConfig::new("sms.send", backstop_core::Target::Pull);
        k.concurrency_limit = Some(backstop_core::limit::ConcurrencyLimit {
            key: "/tenant_id".into(),
            max: 5,
            missing_key: backstop_core::limit::MissingKey::Shared,
        });
        let mut t = task(Status::Pending);
        t.payload = br#"{"tenant_id":"acme"}"#.to_vec();
        let text = explain(&t, &[], at(400), Some(&k), None, None, &Gate::Open).join("\n");
        assert!(
            text.contains("at most 5 at once per /tenant_id (this task's: \"acme\")"),
            "{text}"
        );
        t.payload = b"{}".to_vec();
        let text = explain(&t, &[], at(400), Some(&k), None, None, &Gate::Open).join("\n");
        assert!(text.contains("(this task's: the shared key)"), "{text}");
        let text = explain(&t, &[], at(400), None, None, None, &Gate::Open).join("\n");
        assert!(!text.contains("at most"), "{text}");
    }

    #[test]
    fn an_overdue_task_carries_the_reconcilers_reason() {
        let report = PassReport {
            overdue: vec![crate::reconciler::overdue::Overdue {
                kind: "sms.send".into(),
                count: 3,
                oldest_run_at: Some(at(0)),
                why: crate::reconciler::overdue::Why::NoDispatcher,
                sample: vec![],
            }],
            ..Default::default()
        };
        let text = explain(
            &task(Status::Pending),
            &[],
            at(400),
            None,
            Some(&report),
            None,
            &Gate::Open,
        )
        .join("\n");
        assert!(text.contains("due since"), "{text}");
        assert!(
            text.contains("no live backstop process dispatches this kind"),
            "{text}"
        );
    }

    #[test]
    fn a_pending_task_of_a_paused_kind_names_the_pause() {
        let gate = Gate::Closed {
            cause: PauseCause::Breaker,
            reason: "20 transient failures in a row".into(),
            until: Some(at(100)),
            by: "host-1".into(),
            since: at(10),
        };
        let text = explain(&task(Status::Pending), &[], at(40), None, None, None, &gate).join("\n");
        assert!(
            text.contains(
                "paused by its circuit breaker (20 transient failures in a row; by host-1"
            ),
            "{text}"
        );
        assert!(text.contains("(in 1m)"), "{text}");
        let manual = Gate::Closed {
            cause: PauseCause::Manual,
            reason: "warehouse maintenance".into(),
            until: None,
            by: "ops".into(),
            since: at(10),
        };
        let text = explain(
            &task(Status::Pending),
            &[],
            at(40),
            None,
            None,
            None,
            &manual,
        )
        .join("\n");
        assert!(
            text.contains("paused by hand (warehouse maintenance; by ops"),
            "{text}"
        );
        assert!(text.contains("until someone resumes it"), "{text}");
        let open = explain(
            &task(Status::Pending),
            &[],
            at(40),
            None,
            None,
            None,
            &Gate::Open,
        )
        .join("\n");
        assert!(!open.contains("paused"), "{open}");
    }

    #[test]
    fn a_parked_task_names_the_failed_task_that_blocks_its_group() {
        let mut head = task(Status::Failed);
        head.group = Some("order-1001".into());
        head.last_error = Some("HTTP 400: no such order".into());
        head.updated_at = at(0);
        let mut t = task(Status::Pending);
        t.group = Some("order-1001".into());
        t.parked = true;
        t.attempts = 0;
        let text = explain(&t, &[], at(3 * 3600), None, None, Some(&head), &Gate::Open).join("\n");
        assert!(
            text.contains(&format!(
                "blocked by task {} (sms.send/order-1, failed 3h ago: HTTP 400: no such order)",
                head.id
            )),
            "{text}"
        );
        assert!(!text.contains("waits for a free slot"), "{text}");
        let own = explain(
            &head,
            &[],
            at(3 * 3600),
            None,
            None,
            Some(&head),
            &Gate::Open,
        )
        .join("\n");
        assert!(own.contains("It holds group \"order-1001\""), "{own}");
    }

    #[test]
    fn a_parked_task_behind_a_running_one_waits_for_it() {
        let mut head = task(Status::Running);
        head.lease_owner = Some("host-a".into());
        let mut t = task(Status::Pending);
        t.group = Some("g".into());
        t.parked = true;
        let text = explain(&t, &[], at(40), None, None, Some(&head), &Gate::Open).join("\n");
        assert!(text.contains("waiting for task"), "{text}");
        assert!(text.contains("running attempt 1 on host-a"), "{text}");
    }
}
