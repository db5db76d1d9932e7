use super::*;
use jiff::Timestamp;

fn task(status: Status, attempts: u32) -> Task {
    let t = Timestamp::from_second(1_700_000_000).unwrap();
    Task {
        id: TaskId::new(),
        kind: "sms.send".into(),
        key: "k".into(),
        payload: b"{}".to_vec(),
        status,
        attempts,
        max_attempts: 5,
        run_at: t,
        expires_at: None,
        lease_owner: None,
        lease_until: None,
        epoch: attempts.into(),
        traceparent: None,
        last_error: None,
        reason: None,
        created_at: t,
        updated_at: t,
        group: None,
        group_seq: None,
        parked: false,
    }
}

fn at() -> Timestamp {
    Timestamp::from_second(1_700_000_000).unwrap()
}

fn attempt(o: Option<AttemptOutcome>) -> Event {
    Event {
        outcome: o,
        ..Event::new(EventType::Attempt, at())
    }
}

fn rules(t: &Task, tl: &[Event]) -> Vec<DriftRule> {
    audit(t, tl).into_iter().map(|d| d.rule).collect()
}

#[test]
fn a_clean_success_has_no_drift() {
    let tl = [
        Event::new(EventType::Created, at()),
        attempt(Some(AttemptOutcome::Retry)),
        attempt(Some(AttemptOutcome::Succeeded)),
    ];
    assert!(rules(&task(Status::Succeeded, 2), &tl).is_empty());
}

#[test]
fn succeeded_needs_a_successful_last_attempt() {
    let tl = [
        Event::new(EventType::Created, at()),
        attempt(Some(AttemptOutcome::Failed)),
    ];
    assert_eq!(
        rules(&task(Status::Succeeded, 1), &tl),
        [DriftRule::SucceededWithoutSuccess]
    );
}

#[test]
fn failed_needs_a_failing_attempt_or_a_reason() {
    let tl = [
        Event::new(EventType::Created, at()),
        attempt(Some(AttemptOutcome::Retry)),
    ];
    assert_eq!(
        rules(&task(Status::Failed, 1), &tl),
        [DriftRule::FailedWithoutCause]
    );
    let mut with_reason = task(Status::Failed, 1);
    with_reason.reason = Some("attempts exhausted".into());
    assert!(rules(&with_reason, &tl).is_empty());
}

#[test]
fn compensated_needs_a_reason() {
    let tl = [Event::new(EventType::Created, at())];
    assert_eq!(
        rules(&task(Status::Compensated, 0), &tl),
        [DriftRule::CompensatedWithoutReason]
    );
}

#[test]
fn leases_belong_to_running_tasks_only() {
    let tl = [Event::new(EventType::Created, at()), attempt(None)];
    assert_eq!(
        rules(&task(Status::Running, 1), &tl),
        [DriftRule::RunningWithoutLease]
    );
    let mut idle = task(Status::Succeeded, 0);
    idle.lease_owner = Some("w1".into());
    let done = [
        Event::new(EventType::Created, at()),
        attempt(Some(AttemptOutcome::Succeeded)),
    ];
    idle.attempts = 1;
    assert_eq!(rules(&idle, &done), [DriftRule::LeaseOnIdleTask]);
}

#[test]
fn a_held_task_is_pending_with_a_lease_and_no_attempt() {
    let tl = [Event::new(EventType::Created, at())];
    let mut held = task(Status::Pending, 0);
    held.lease_owner = Some("w1".into());
    held.lease_until = Some(at());
    assert!(held.is_held());
    assert_eq!(rules(&held, &tl), []);
    held.lease_until = None;
    assert_eq!(rules(&held, &tl), [DriftRule::HeldWithoutExpiry]);
}

#[test]
fn attempts_never_exceed_the_budget() {
    let tl = [
        Event::new(EventType::Created, at()),
        attempt(Some(AttemptOutcome::Retry)),
        attempt(Some(AttemptOutcome::Retry)),
    ];
    let mut t = task(Status::Pending, 2);
    t.max_attempts = 1;
    assert_eq!(rules(&t, &tl), [DriftRule::AttemptsOverBudget]);
    t.max_attempts = 2;
    assert_eq!(rules(&t, &tl), []);
}

#[test]
fn the_attempt_counter_must_match_the_timeline() {
    let tl = [Event::new(EventType::Created, at())];
    assert_eq!(
        rules(&task(Status::Pending, 2), &tl),
        [DriftRule::AttemptsMismatch]
    );
}

#[test]
fn a_timeline_without_creation_is_drift() {
    assert_eq!(
        rules(&task(Status::Pending, 0), &[]),
        [DriftRule::MissingCreation]
    );
}

#[test]
fn a_task_taken_in_as_a_dead_letter_audits_clean() {
    // Intake::Failed: failed at once with its reason, no attempt, maybe redelivered since.
    let mut dead = task(Status::Failed, 0);
    dead.reason = Some("payload is not JSON".into());
    dead.last_error = dead.reason.clone();
    let origin = serde_json::json!({"queue": "orders"});
    let tl = [
        Event {
            origin: Some(origin.clone()),
            ..Event::new(EventType::Created, at())
        },
        Event {
            origin: Some(origin),
            ..Event::new(EventType::Redelivered, at())
        },
    ];
    assert_eq!(rules(&dead, &tl), []);
    // Without its reason it would be a failure nobody can explain.
    dead.reason = None;
    assert_eq!(rules(&dead, &tl), [DriftRule::FailedWithoutCause]);
}
