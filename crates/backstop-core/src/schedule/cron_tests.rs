use super::*;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn all(expr: &str, zone: &str, after: &str, until: &str) -> Vec<Instant> {
    let t = CronTimes::parse(expr, false, zone).unwrap();
    let (v, more) = t.between(ts(after), ts(until), 10_000);
    assert!(!more);
    v
}

fn at(v: &[Instant]) -> Vec<String> {
    v.iter().map(|i| i.at.to_string()).collect()
}

#[test]
fn spring_forward_gap_fires_a_fixed_time_once_shifted() {
    // Europe/Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
    let v = all(
        "30 2 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00:00Z",
        "2026-03-30T12:00:00Z",
    );
    assert_eq!(at(&v), ["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"]);
    assert!(v[0].shifted, "the gap's instant is marked shifted");
    assert!(!v[1].shifted);
}

#[test]
fn fall_back_fires_a_fixed_time_once() {
    // Europe/Berlin, 2026-10-25: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice.
    let v = all(
        "30 2 * * *",
        "Europe/Berlin",
        "2026-10-24T12:00:00Z",
        "2026-10-25T12:00:00Z",
    );
    assert_eq!(at(&v), ["2026-10-25T00:30:00Z"]);
    assert!(!v[0].shifted);
}

#[test]
fn hourly_has_23_instants_on_spring_forward_and_25_on_fall_back() {
    // Local midnight to local midnight (exclusive of the start, inclusive of the end).
    let spring = all(
        "0 * * * *",
        "Europe/Berlin",
        "2026-03-28T23:00:00Z",
        "2026-03-29T22:00:00Z",
    );
    assert_eq!(spring.len(), 23, "{:?}", at(&spring));
    assert!(spring.iter().all(|i| !i.shifted));
    let fall = all(
        "0 * * * *",
        "Europe/Berlin",
        "2026-10-24T22:00:00Z",
        "2026-10-25T23:00:00Z",
    );
    assert_eq!(fall.len(), 25, "{:?}", at(&fall));
    // Both 02:00s, an hour apart in real time.
    assert!(at(&fall).contains(&"2026-10-25T00:00:00Z".to_string()));
    assert!(at(&fall).contains(&"2026-10-25T01:00:00Z".to_string()));
}

#[test]
fn leap_days_and_month_ends() {
    let v = all(
        "0 0 29 2 *",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2032-12-31T00:00:00Z",
    );
    assert_eq!(
        at(&v),
        ["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"],
        "only leap years have the 29th"
    );
    let v = all(
        "0 0 31 * *",
        "UTC",
        "2026-01-01T00:00:00Z",
        "2026-06-30T00:00:00Z",
    );
    assert_eq!(
        at(&v),
        [
            "2026-01-31T00:00:00Z",
            "2026-03-31T00:00:00Z",
            "2026-05-31T00:00:00Z"
        ],
        "months without a 31st are skipped, not moved"
    );
    let v = all(
        "0 0 L * *",
        "UTC",
        "2026-01-15T00:00:00Z",
        "2026-03-15T00:00:00Z",
    );
    assert_eq!(at(&v), ["2026-01-31T00:00:00Z", "2026-02-28T00:00:00Z"]);
}

#[test]
fn a_zone_moves_the_instants() {
    let v = all(
        "0 2 * * *",
        "Asia/Shanghai",
        "2026-12-01T00:00:00Z",
        "2026-12-02T00:00:00Z",
    );
    assert_eq!(at(&v), ["2026-12-01T18:00:00Z"]);
}

#[test]
fn seconds_only_when_asked() {
    assert!(CronTimes::parse("*/5 * * * * *", false, "UTC").is_err());
    let t = CronTimes::parse("*/5 * * * * *", true, "UTC").unwrap();
    let (v, _) = t.between(ts("2026-01-01T00:00:00Z"), ts("2026-01-01T00:00:20Z"), 100);
    assert_eq!(v.len(), 4);
    assert!(CronTimes::parse("0 2 * * *", true, "UTC").is_err());
}

#[test]
fn aliases() {
    for (alias, first) in [
        ("@hourly", "2026-01-01T01:00:00Z"),
        ("@daily", "2026-01-02T00:00:00Z"),
        ("@weekly", "2026-01-04T00:00:00Z"),
        ("@monthly", "2026-02-01T00:00:00Z"),
        ("@yearly", "2027-01-01T00:00:00Z"),
        ("@annually", "2027-01-01T00:00:00Z"),
    ] {
        let t = CronTimes::parse(alias, false, "UTC").unwrap();
        assert_eq!(
            t.next_after(ts("2026-01-01T00:00:00Z"))
                .unwrap()
                .at
                .to_string(),
            first,
            "{alias}"
        );
        CronTimes::parse(alias, true, "UTC").unwrap();
    }
}

#[test]
fn bad_expressions_and_zones_say_what_was_expected() {
    for expr in [
        "61 * * * *",
        "* * * *",
        "@fortnightly",
        "0 0 30 2 *",
        "",
        "0 25 * * *",
    ] {
        let e = CronTimes::parse(expr, false, "UTC")
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected 5 fields"), "{expr}: {e}");
        assert!(e.contains(&format!("{expr:?}")), "{expr}: {e}");
    }
    let e = CronTimes::parse("0 2 * * *", false, "Mars/Olympus")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("\"Mars/Olympus\" is not an IANA time zone"),
        "{e}"
    );
}

#[test]
fn the_range_is_capped_and_says_so() {
    let t = CronTimes::parse("* * * * *", false, "UTC").unwrap();
    let (v, more) = t.between(ts("2026-01-01T00:00:00Z"), ts("2026-01-01T01:00:00Z"), 10);
    assert_eq!(v.len(), 10);
    assert!(more);
    let (v, more) = t.between(ts("2026-01-01T00:00:00Z"), ts("2026-01-01T01:00:00Z"), 60);
    assert_eq!(v.len(), 60);
    assert!(!more, "exactly the limit and nothing after");
}
