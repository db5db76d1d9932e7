//! Cases of guarded state transitions: callbacks that arrive twice, late and out of order
//! must never move an entity backwards, and requests about one entity are decided one at a
//! time however many arrive at once.

use crate::fixtures::*;
use backstop_core::entity::{Answer, EntityDecision, Guard};
use backstop_core::machine::Machine;
use backstop_core::store::*;
use jiff::Timestamp;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

type S = Arc<dyn Store>;

/// The machine of the issue: an order that is paid, maybe refunded, or closed unpaid.
pub fn order_machine() -> Machine {
    Machine::new(
        "order",
        "pending",
        [
            ("pending", vec!["paid", "closed"]),
            ("paid", vec!["refunding", "refunded"]),
            ("refunding", vec!["refunded"]),
        ],
    )
    .expect("a valid machine")
}

/// The parameters of a request that entity `id` of `m` move to `to`.
pub fn request(
    m: &Machine,
    id: &str,
    to: &str,
    event_id: &str,
    version: Option<i64>,
    now: Timestamp,
) -> TransitionParams {
    TransitionParams {
        machine: m.name().into(),
        entity_id: id.into(),
        to: to.into(),
        event_id: event_id.into(),
        version,
        allowed_from: m.sources_of(to),
        initial: m.initial().into(),
        now,
    }
}

async fn send(
    store: &dyn Store,
    m: &Machine,
    id: &str,
    to: &str,
    event_id: &str,
    version: Option<i64>,
    now: Timestamp,
) -> TransitionOutcome {
    store
        .transition_entity(request(m, id, to, event_id, version, now))
        .await
        .expect("transition")
}

async fn history(store: &dyn Store, m: &Machine, id: &str) -> EntityHistory {
    store
        .entity(EntityParams {
            machine: m.name().into(),
            id: id.into(),
        })
        .await
        .expect("read entity")
        .expect("the entity exists")
}

/// Replays a history from the initial state through the guard, checking that every recorded
/// decision is the one the guard makes from the decisions before it; returns the state and
/// version it ends with.
pub fn replay(m: &Machine, decisions: &[EntityDecision]) -> (String, Option<i64>) {
    let mut state = m.initial().to_string();
    let mut version = None;
    let mut applied = HashSet::new();
    for (i, d) in decisions.iter().enumerate() {
        assert_eq!(
            d.from, state,
            "decision {i} ({d:?}) starts where the last left"
        );
        let allowed = m.sources_of(&d.to);
        let guard = Guard {
            state: &state,
            version,
            event_applied: applied.contains(&d.event_id),
            allowed_from: &allowed,
            to: &d.to,
            requested_version: d.version,
        };
        assert_eq!(guard.answer(), d.answer, "decision {i}: {d:?}");
        let next = (
            guard.state_after(d.answer).to_string(),
            guard.version_after(d.answer),
        );
        if d.answer == Answer::Applied {
            applied.insert(d.event_id.clone());
        }
        (state, version) = next;
    }
    (state, version)
}

pub async fn transitions_answer_applied_duplicate_rejected_and_stale(store: S) {
    let m = order_machine();
    let s = &*store;
    let paid = send(s, &m, "1001", "paid", "evt-1", Some(1), at(1)).await;
    assert_eq!(paid.answer, Answer::Applied);
    assert_eq!(paid.entity.state, "paid");
    assert_eq!(paid.entity.version, Some(1));
    assert_eq!(paid.entity.created_at, at(1));
    assert_eq!(paid.entity.updated_at, at(1));
    assert_eq!(
        paid.decision.from, "pending",
        "a new entity starts in the initial state"
    );

    let again = send(s, &m, "1001", "paid", "evt-1", Some(1), at(2)).await;
    assert_eq!(again.answer, Answer::Duplicate);
    assert_eq!(again.entity.state, "paid");

    let closed = send(s, &m, "1001", "closed", "evt-2", Some(2), at(3)).await;
    assert_eq!(
        closed.answer,
        Answer::Rejected,
        "closed does not follow paid"
    );
    assert_eq!(closed.entity.state, "paid", "the current state is returned");
    assert_eq!(closed.entity.version, Some(1));

    let refunding = send(s, &m, "1001", "refunding", "evt-3", Some(3), at(4)).await;
    assert_eq!(refunding.answer, Answer::Applied);
    assert_eq!(refunding.entity.version, Some(3));

    let late = send(s, &m, "1001", "refunded", "evt-4", Some(3), at(5)).await;
    assert_eq!(late.answer, Answer::Stale, "version 3 was already applied");
    assert_eq!(late.entity.state, "refunding");
    let older = send(s, &m, "1001", "refunded", "evt-5", Some(2), at(6)).await;
    assert_eq!(older.answer, Answer::Stale);

    let done = send(s, &m, "1001", "refunded", "evt-6", None, at(7)).await;
    assert_eq!(
        done.answer,
        Answer::Applied,
        "no version: only the state guards it"
    );
    assert_eq!(done.entity.version, Some(3), "the version is kept");
    assert_eq!(done.entity.updated_at, at(7));
    assert_eq!(done.entity.created_at, at(1));
    assert_eq!(done.entity.decisions, 7);

    let h = history(s, &m, "1001").await;
    assert_eq!(h.entity, done.entity);
    let answers: Vec<_> = h.decisions.iter().map(|d| d.answer).collect();
    use Answer::*;
    assert_eq!(
        answers,
        [Applied, Duplicate, Rejected, Applied, Stale, Stale, Applied]
    );
    assert_eq!(h.decisions[2], closed.decision, "recorded as answered");
    assert_eq!(
        h.decisions[2],
        EntityDecision {
            event_id: "evt-2".into(),
            from: "paid".into(),
            to: "closed".into(),
            answer: Rejected,
            version: Some(2),
            at: at(3),
        }
    );
    assert_eq!(replay(&m, &h.decisions), ("refunded".into(), Some(3)));
}

pub async fn a_repeated_paid_never_undoes_refunding(store: S) {
    let m = order_machine();
    let s = &*store;
    send(s, &m, "77", "paid", "pay-1", None, at(1)).await;
    send(s, &m, "77", "refunding", "refund-1", None, at(2)).await;
    // The gateway sends its "paid" callback again: with the same event id, and as a new event.
    let dup = send(s, &m, "77", "paid", "pay-1", None, at(3)).await;
    assert_eq!(dup.answer, Answer::Duplicate);
    assert_eq!(dup.entity.state, "refunding");
    let repeat = send(s, &m, "77", "paid", "pay-2", None, at(4)).await;
    assert_eq!(repeat.answer, Answer::Rejected);
    assert_eq!(repeat.entity.state, "refunding", "the state is unchanged");
    assert_eq!(repeat.decision.from, "refunding");
    let h = history(s, &m, "77").await;
    assert_eq!(h.entity.state, "refunding");
    assert_eq!(
        h.entity.updated_at,
        at(2),
        "only applied requests change it"
    );
    assert_eq!(h.decisions.len(), 4);
    assert_eq!(replay(&m, &h.decisions), ("refunding".into(), None));
}

pub async fn rejected_and_stale_events_may_apply_when_sent_again(store: S) {
    let m = order_machine();
    let s = &*store;
    // "refunded" arrives before "paid": rejected, and its event id is not used up.
    let early = send(s, &m, "5", "refunded", "refund-done", None, at(1)).await;
    assert_eq!(early.answer, Answer::Rejected);
    assert_eq!(
        early.entity.state, "pending",
        "a first rejected request creates it"
    );
    send(s, &m, "5", "paid", "pay", None, at(2)).await;
    let resent = send(s, &m, "5", "refunded", "refund-done", None, at(3)).await;
    assert_eq!(resent.answer, Answer::Applied);
    let again = send(s, &m, "5", "refunded", "refund-done", None, at(4)).await;
    assert_eq!(again.answer, Answer::Duplicate);
    let h = history(s, &m, "5").await;
    assert_eq!(h.decisions.len(), 4);
    assert_eq!(replay(&m, &h.decisions), ("refunded".into(), None));
}

pub async fn entities_are_separate_per_machine_and_id(store: S) {
    let order = order_machine();
    let refund = Machine::new("refund", "pending", [("pending", vec!["paid"])]).unwrap();
    let s = &*store;
    let unseen = s
        .entity(EntityParams {
            machine: "order".into(),
            id: "1".into(),
        })
        .await
        .unwrap();
    assert_eq!(unseen, None, "never seen");
    send(s, &order, "1", "paid", "e", Some(5), at(1)).await;
    let other_id = send(s, &order, "2", "paid", "e", Some(1), at(1)).await;
    assert_eq!(other_id.answer, Answer::Applied, "event ids are per entity");
    let other_machine = send(s, &refund, "1", "paid", "e", Some(1), at(1)).await;
    assert_eq!(other_machine.answer, Answer::Applied, "and per machine");
    assert_eq!(history(s, &order, "1").await.entity.version, Some(5));
    assert_eq!(history(s, &refund, "1").await.decisions.len(), 1);
    let spaced = s
        .entity(EntityParams {
            machine: "order".into(),
            id: "1 ".into(),
        })
        .await
        .unwrap();
    assert_eq!(spaced, None, "ids compare byte for byte");
}

/// Sends every request at once, each from its own task; returns the outcomes in request
/// order.
async fn race(store: &S, requests: Vec<TransitionParams>) -> Vec<TransitionOutcome> {
    let start = Arc::new(tokio::sync::Barrier::new(requests.len()));
    let tasks: Vec<_> = requests
        .into_iter()
        .map(|r| {
            let (store, start) = (store.clone(), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                store.transition_entity(r).await.expect("transition")
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.expect("writer"));
    }
    out
}

/// 50 writers at once on one entity: 25 events, each sent twice. Exactly one of each pair
/// applies; the history holds all 50 decisions, in an order the guard explains.
pub async fn concurrent_transitions_on_one_entity_apply_each_event_once(store: S) {
    const WRITERS: usize = 50;
    let m = Machine::new("ticket", "open", [("open", vec!["open", "closed"])]).unwrap();
    let requests = (0..WRITERS)
        .map(|i| request(&m, "t-1", "open", &format!("evt-{}", i / 2), None, at(1)))
        .collect();
    let outcomes = race(&store, requests).await;
    let mut per_event: HashMap<&str, Vec<Answer>> = HashMap::new();
    for o in &outcomes {
        per_event
            .entry(o.decision.event_id.as_str())
            .or_default()
            .push(o.answer);
    }
    assert_eq!(per_event.len(), WRITERS / 2);
    for (event, answers) in &per_event {
        let applied = answers.iter().filter(|a| **a == Answer::Applied).count();
        assert_eq!(applied, 1, "{event}: exactly one applied: {answers:?}");
        assert!(answers.contains(&Answer::Duplicate), "{event}: {answers:?}");
    }
    let mut counts: Vec<u64> = outcomes.iter().map(|o| o.entity.decisions).collect();
    counts.sort();
    assert_eq!(
        counts,
        (1..=WRITERS as u64).collect::<Vec<_>>(),
        "each writer decided after the one before"
    );
    let h = history(&*store, &m, "t-1").await;
    assert_eq!(h.decisions.len(), WRITERS);
    assert_eq!(h.entity.decisions, WRITERS as u64);
    assert_eq!(replay(&m, &h.decisions), ("open".into(), None));
}

/// 50 writers at once on one entity with versions 1 to 50: whatever order they are decided
/// in, versions only grow, the newest applies, and each older one is applied or stale.
pub async fn concurrent_versions_on_one_entity_only_move_forward(store: S) {
    const WRITERS: i64 = 50;
    let m = Machine::new("ticket", "open", [("open", vec!["open", "closed"])]).unwrap();
    let requests = (1..=WRITERS)
        .map(|v| request(&m, "t-2", "open", &format!("v{v}"), Some(v), at(1)))
        .collect();
    let outcomes = race(&store, requests).await;
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o.answer, Answer::Applied | Answer::Stale)),
        "{outcomes:?}"
    );
    assert_eq!(outcomes.last().unwrap().answer, Answer::Applied, "v50");
    let h = history(&*store, &m, "t-2").await;
    assert_eq!(h.decisions.len(), WRITERS as usize);
    assert_eq!(h.entity.version, Some(WRITERS));
    let applied: Vec<i64> = h
        .decisions
        .iter()
        .filter(|d| d.answer == Answer::Applied)
        .filter_map(|d| d.version)
        .collect();
    assert!(applied.windows(2).all(|w| w[0] < w[1]), "{applied:?}");
    assert_eq!(replay(&m, &h.decisions), ("open".into(), Some(WRITERS)));
}

/// 50 writers at once drive an order through the real machine with callbacks in every
/// order, each sent twice: every decision is the one the guard makes after those before it.
pub async fn concurrent_callbacks_through_the_order_machine_stay_consistent(store: S) {
    let m = order_machine();
    let targets = ["paid", "closed", "refunding", "refunded", "paid"];
    let requests = (0..50)
        .map(|i| {
            let event = i / 2;
            let to = targets[event % targets.len()];
            request(&m, "o-9", to, &format!("cb-{event}"), None, at(1))
        })
        .collect();
    let outcomes = race(&store, requests).await;
    let h = history(&*store, &m, "o-9").await;
    assert_eq!(h.decisions.len(), 50);
    let (state, _) = replay(&m, &h.decisions);
    assert_eq!(state, h.entity.state);
    for o in &outcomes {
        let recorded = h.decisions.iter().filter(|d| **d == o.decision).count();
        assert!(recorded >= 1, "every answer is in the history: {o:?}");
    }
    let mut applied = HashSet::new();
    for d in h.decisions.iter().filter(|d| d.answer == Answer::Applied) {
        assert!(applied.insert(&d.event_id), "{} applied twice", d.event_id);
    }
}

/// Several stores on one database (as several processes would be) send 50 requests at once
/// about one new entity, round after round: 25 events, each sent twice through different
/// stores. Each event applies exactly once and each history explains itself, also while the
/// entity's row is being created by many transactions at once.
pub async fn racing_stores_apply_each_event_once(stores: Vec<S>, rounds: usize) {
    const WRITERS: usize = 50;
    let m = Machine::new("ticket", "open", [("open", vec!["open", "closed"])]).unwrap();
    for round in 0..rounds {
        let id = format!("race-{round}");
        let start = Arc::new(tokio::sync::Barrier::new(WRITERS));
        let tasks: Vec<_> = (0..WRITERS)
            .map(|i| {
                let store = stores[i % stores.len()].clone();
                let r = request(&m, &id, "open", &format!("e{}", i / 2), None, at(1));
                let start = start.clone();
                tokio::spawn(async move {
                    start.wait().await;
                    store.transition_entity(r).await.expect("transition")
                })
            })
            .collect();
        let mut applied: HashMap<String, usize> = HashMap::new();
        for t in tasks {
            let o = t.await.expect("writer");
            if o.answer == Answer::Applied {
                *applied.entry(o.decision.event_id).or_default() += 1;
            }
        }
        assert_eq!(applied.len(), WRITERS / 2, "{id}: {applied:?}");
        assert!(applied.values().all(|n| *n == 1), "{id}: {applied:?}");
        let h = history(&*stores[0], &m, &id).await;
        assert_eq!(h.decisions.len(), WRITERS, "{id}");
        assert_eq!(replay(&m, &h.decisions), ("open".into(), None), "{id}");
    }
}
