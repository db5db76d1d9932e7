use super::*;
use crate::reconciler::nodes::ServedKind;

fn backlog(kind: &str, running: u64) -> KindBacklog {
    KindBacklog {
        kind: kind.into(),
        pending: 10,
        due: 10,
        overdue: 4,
        oldest_run_at: Some(Timestamp::UNIX_EPOCH),
        running,
        overdue_sample: vec![],
    }
}

fn node(kind: &str, concurrency: usize, paused: bool, pull: bool) -> NodeBeat {
    NodeBeat {
        owner: "n1".into(),
        at: Timestamp::UNIX_EPOCH,
        kinds: [(
            kind.to_string(),
            ServedKind {
                concurrency,
                paused,
                pull,
            },
        )]
        .into(),
        pulled: HashMap::new(),
    }
}

fn push(name: &str) -> (String, KindConfig) {
    let t = Target::HttpPush {
        url: "http://127.0.0.1:1/".into(),
        secret: None,
    };
    (name.into(), KindConfig::new(name, t))
}

fn judge1(b: KindBacklog, nodes: &[NodeBeat], configs: &[(String, KindConfig)]) -> Why {
    let configs: HashMap<_, _> = configs.iter().cloned().collect();
    judge(&[b], nodes, &configs, Timestamp::UNIX_EPOCH)
        .remove(0)
        .why
}

#[test]
fn a_kind_nobody_configures_is_unknown() {
    assert_eq!(judge1(backlog("typo", 0), &[], &[]), Why::UnknownKind);
}

#[test]
fn a_configured_kind_without_live_processes_has_no_dispatcher() {
    assert_eq!(
        judge1(backlog("sms", 0), &[], &[push("sms")]),
        Why::NoDispatcher
    );
}

#[test]
fn paused_kinds_say_so() {
    assert_eq!(
        judge1(backlog("sms", 0), &[node("sms", 8, true, false)], &[]),
        Why::Paused
    );
}

#[test]
fn full_slots_and_lagging_dispatchers_are_told_apart() {
    let nodes = [node("sms", 4, false, false), node("sms", 4, false, false)];
    assert_eq!(
        judge1(backlog("sms", 8), &nodes, &[]),
        Why::ConcurrencyFull {
            running: 8,
            capacity: 8
        }
    );
    assert_eq!(
        judge1(backlog("sms", 3), &nodes, &[]),
        Why::Behind {
            running: 3,
            capacity: 8
        }
    );
}

#[test]
fn pull_kinds_need_a_recent_worker() {
    let mut n = node("jobs", 0, false, true);
    assert_eq!(
        judge1(backlog("jobs", 0), &[n.clone()], &[]),
        Why::NoPullWorker
    );
    n.pulled.insert("jobs".into(), Timestamp::UNIX_EPOCH);
    assert!(matches!(
        judge1(backlog("jobs", 0), &[n], &[]),
        Why::Behind { .. }
    ));
}

#[test]
fn kinds_without_overdue_work_are_not_judged() {
    let mut b = backlog("sms", 0);
    b.overdue = 0;
    assert!(judge(&[b], &[], &HashMap::new(), Timestamp::UNIX_EPOCH).is_empty());
}
