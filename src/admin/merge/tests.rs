//! Merging partitions' admin answers into one client shard's.

use super::*;

fn health(pending: f64, dead: f64, pace: f64, p50: f64, p95: f64, count: f64, minute_at: f64) -> Value {
    Value::object([
        ("shard", Value::str("x")),
        ("since", Value::num(100.0 + pending)),
        (
            "messages",
            Value::object([
                ("pending", Value::num(pending)),
                ("due", Value::num(pending)),
                ("inflight", Value::num(1.0)),
                ("deadLetters", Value::num(dead)),
                ("capped", Value::Bool(false)),
            ]),
        ),
        ("oldestDueAgeMs", if pending > 0.0 { Value::num(pending * 10.0) } else { Value::Null }),
        ("alarmAt", Value::num(1000.0 + pending)),
        ("running", Value::num(1.0)),
        ("pace", Value::object([("now", Value::num(pace)), ("floor", Value::num(1.0)), ("ceiling", Value::num(8.0))])),
        ("couriersAwake", Value::num(0.0)),
        (
            "deliveries",
            Value::object([
                ("since", Value::num(50.0)),
                (
                    "minutes",
                    Value::Array(vec![Value::object([
                        ("at", Value::num(minute_at)),
                        ("delivered", Value::num(count)),
                        ("failed", Value::num(dead)),
                        ("refused", Value::num(0.0)),
                        ("deadLettered", Value::num(dead)),
                    ])]),
                ),
                ("refused", Value::num(1.0)),
                ("deadLettered", Value::num(dead)),
                ("failuresByStatus", Value::object([("500", Value::num(dead))])),
                (
                    "kinds",
                    Value::Array(vec![Value::object([
                        ("kind", Value::str("__wkf_step_x flow")),
                        ("count", Value::num(count)),
                        ("p50Ms", Value::num(p50)),
                        ("p95Ms", Value::num(p95)),
                    ])]),
                ),
            ]),
        ),
    ])
}

fn n(v: &Value, path: &[&str]) -> f64 {
    at(v, path).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

#[test]
fn a_client_shard_reads_as_one_row_with_its_partitions_beside() {
    let parts = vec![
        ("q:0".to_string(), Ok(health(3.0, 1.0, 4.0, 100.0, 400.0, 10.0, 60_000.0))),
        ("q:0~1".to_string(), Ok(health(0.0, 0.0, 2.0, 900.0, 950.0, 2.0, 60_000.0))),
        ("q:0~2".to_string(), Ok(health(5.0, 2.0, 1.0, 300.0, 500.0, 30.0, 120_000.0))),
    ];
    let row = merge_health("q:0", &parts);
    assert_eq!(row.get("shard"), Some(&Value::str("q:0")));
    assert_eq!(
        (n(&row, &["messages", "pending"]), n(&row, &["messages", "deadLetters"]), n(&row, &["messages", "inflight"])),
        (8.0, 3.0, 3.0)
    );
    assert_eq!(n(&row, &["oldestDueAgeMs"]), 50.0, "the oldest of all");
    assert_eq!(n(&row, &["alarmAt"]), 1000.0, "the earliest");
    assert_eq!(n(&row, &["since"]), 100.0);
    assert_eq!((n(&row, &["pace", "now"]), n(&row, &["pace", "ceiling"])), (7.0, 24.0));
    assert_eq!(n(&row, &["deliveries", "failuresByStatus", "500"]), 3.0);
    let minutes = at(&row, &["deliveries", "minutes"]).and_then(Value::as_array).unwrap();
    assert_eq!(minutes.len(), 1, "as many minutes as one partition reports, the latest");
    assert_eq!((n(&minutes[0], &["at"]), n(&minutes[0], &["delivered"])), (120_000.0, 30.0));
    let kind = &at(&row, &["deliveries", "kinds"]).and_then(Value::as_array).unwrap()[0];
    assert_eq!(n(kind, &["count"]), 42.0);
    assert_eq!(n(kind, &["p50Ms"]), 300.0, "weighted by count: 30 of 42 answered around 300 ms");
    assert_eq!(n(kind, &["p95Ms"]), 950.0, "the highest partition's");
    let each = row.get("partitions").and_then(Value::as_array).unwrap();
    assert_eq!(each.iter().map(|p| p.get("shard").and_then(Value::as_str).unwrap()).collect::<Vec<_>>(), ["q:0", "q:0~1", "q:0~2"]);
    assert_eq!(each.iter().map(|p| n(p, &["delivered"])).collect::<Vec<_>>(), [10.0, 2.0, 30.0]);
    assert!(row.get("unreachable").is_none());
}

#[test]
fn an_unreachable_partition_is_named_and_the_rest_counted() {
    let parts =
        vec![("q:0".to_string(), Ok(health(3.0, 0.0, 4.0, 1.0, 1.0, 1.0, 0.0))), ("q:0~1".to_string(), Err("Error: down".to_string()))];
    let row = merge_health("q:0", &parts);
    assert_eq!(n(&row, &["messages", "pending"]), 3.0);
    assert_eq!(n(&row, &["unreachable"]), 1.0);
    let each = row.get("partitions").and_then(Value::as_array).unwrap();
    assert_eq!(each[1].get("error"), Some(&Value::str("Error: down")));
    let none = merge_health("q:0", &[("q:0".to_string(), Err("Error: down".to_string()))]);
    assert_eq!(none.get("error"), Some(&Value::str("Error: down")));
    assert!(none.get("messages").is_none());
}

fn dead(id: &str, at: f64) -> Value {
    Value::object([("messageId", Value::str(id)), ("failedAt", Value::num(at)), ("attempts", Value::num(2.0))])
}

#[test]
fn dead_letter_pages_merge_in_one_order_with_a_stable_cursor() {
    let pages = vec![
        (
            "q:0".to_string(),
            Value::object([
                ("data", Value::Array(vec![dead("a", 1.0), dead("d", 4.0)])),
                ("cursor", Value::Null),
                ("hasMore", Value::Bool(false)),
            ]),
        ),
        (
            "q:0~1".to_string(),
            Value::object([
                ("data", Value::Array(vec![dead("b", 2.0), dead("c", 3.0)])),
                ("cursor", Value::str("x")),
                ("hasMore", Value::Bool(true)),
            ]),
        ),
    ];
    let page = merge_pages(3, &pages);
    let rows = page.get("data").and_then(Value::as_array).unwrap();
    let ids: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.get("messageId").and_then(Value::as_str).unwrap(), r.get("partition").and_then(Value::as_str).unwrap()))
        .collect();
    assert_eq!(ids, [("a", "q:0"), ("b", "q:0~1"), ("c", "q:0~1")]);
    assert_eq!(page.get("hasMore"), Some(&Value::Bool(true)));
    assert_eq!(page.get("cursor"), Some(&Value::str("dlq:0000000000003:c")));
    let last = merge_pages(
        10,
        &[("q:0".to_string(), Value::object([("data", Value::Array(vec![])), ("cursor", Value::Null), ("hasMore", Value::Bool(false))]))],
    );
    assert_eq!(last, Value::object([("data", Value::Array(vec![])), ("cursor", Value::Null), ("hasMore", Value::Bool(false))]));
}
