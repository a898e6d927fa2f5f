//! The queue's operator log lines (docs/operations.md, "Delivery logs"): one JSON object per
//! line for each event an operator would alert on. Every line has `msg` ("world-celld
//! queue"), `level` (`warn` or `info`), `event`, `shard` (the client's queue shard, `q:0`)
//! and `partition` (which of its partitions, 0 to `QUEUE_PARTITIONS` - 1); a message's lines add its
//! `queueName`, `messageId`, `runId` (null without one) and `attempt` (the delivery attempt,
//! as sent in `x-vqs-message-attempt`).
//!
//! | event | level | when | more members |
//! | --- | --- | --- | --- |
//! | `delivery.failed` | warn | a delivery failed (not 2xx, 429, permanent or the runtime's 503 wait) | `status` (number, or null for a transport error), `error`, `willRetry`, `retryAt` (ms, null when not retried) |
//! | `message.dead_lettered` | warn | its last attempt failed: moved to the dead letters | `attempts`, `error` |
//! | `delivery.refused` | info | the app answered 429 | `retryAfterMs` |
//! | `courier.lost` | warn | a courier woken or busy went silent past its stale time | `courier`, `silentMs` |
//! | `claims.recovered` | warn | a claim pass put back deliveries a previous instance left (a restart) | `count` |
//! | `pace.cut` | info | overload cut the shard's concurrency | `from`, `to`, `reason` |
//!
//! Never a payload, a header or a secret: a line names the message, never its body.
//!
//! Knows nothing of the platform: the shell prints the lines.

use serde_json::{json, Map, Value as Json};

use super::delivery::{Action, Settled};
use super::state::{backoff_seconds, clamp_time, Row};
use crate::protocol::partition::split_partition;
use crate::wire::js::to_js_string;

/// The common members of a line: `shard` the client's queue shard and `partition` the
/// instance's partition of it (`crate::protocol::partition`; 0 for `q:<k>` itself).
fn line(level: &str, event: &str, instance: &str, more: Json) -> String {
    let (shard, partition) = split_partition(instance);
    let mut m = Map::new();
    m.insert("msg".into(), json!("world-celld queue"));
    m.insert("level".into(), json!(level));
    m.insert("event".into(), json!(event));
    m.insert("shard".into(), json!(shard));
    m.insert("partition".into(), json!(partition));
    if let Json::Object(more) = more {
        m.extend(more);
    }
    Json::Object(m).to_string()
}

/// A message's members: queue name, message id, run id, and the attempt as delivered.
fn message(row: &Row, attempt: f64) -> Map<String, Json> {
    let mut m = Map::new();
    m.insert("queueName".into(), json!(to_js_string(row.member("queueName"))));
    m.insert("messageId".into(), json!(row.id()));
    m.insert("runId".into(), row.run_id().map_or(Json::Null, Json::String));
    m.insert("attempt".into(), count(attempt));
    m
}

fn with(mut base: Map<String, Json>, more: Json) -> Json {
    if let Json::Object(more) = more {
        base.extend(more);
    }
    Json::Object(base)
}

/// A count as an integer where it is one (`2`, not `2.0`).
fn count(n: f64) -> Json {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        json!(n as i64)
    } else {
        json!(n)
    }
}

/// The status of a failure's reason (`HTTP 500` → 500), null for a transport error.
fn status_of(reason: &str) -> Json {
    reason.strip_prefix("HTTP ").and_then(|s| s.parse::<u16>().ok()).map_or(Json::Null, |s| json!(s))
}

/// The lines for one settled delivery of `row` (as claimed) at `now`: a failure (and its
/// dead letter), a refusal; nothing for a success, a redelivery wait, a purge or a stale
/// settle.
pub fn settled(shard: &str, row: &Row, action: &Action, settled: Settled, now: i64) -> Vec<String> {
    let delivered_as = row.next_delivery_attempt();
    match (action, settled) {
        (Action::Retry { reason, .. }, Settled::Retrying) => {
            let attempt = row.attempt() + 1.0;
            let retry_at = clamp_time(now as f64 + backoff_seconds(attempt) * 1000.0);
            let more = json!({"status": status_of(reason), "error": reason, "willRetry": true, "retryAt": retry_at});
            vec![line("warn", "delivery.failed", shard, with(message(row, delivered_as), more))]
        }
        (Action::Retry { reason, .. }, Settled::DeadLettered) => {
            let failed = json!({"status": status_of(reason), "error": reason, "willRetry": false, "retryAt": null});
            let dead = json!({"attempts": count(row.attempt() + 1.0), "error": reason});
            vec![
                line("warn", "delivery.failed", shard, with(message(row, delivered_as), failed)),
                line("warn", "message.dead_lettered", shard, with(message(row, delivered_as), dead)),
            ]
        }
        (Action::Refused { delay_ms }, Settled::Redelivering) => {
            vec![line("info", "delivery.refused", shard, with(message(row, delivered_as), json!({"retryAfterMs": delay_ms})))]
        }
        _ => Vec::new(),
    }
}

/// A courier the shard took for lost (silent past its stale time).
pub fn courier_lost(shard: &str, courier: usize, silent_ms: i64) -> String {
    line("warn", "courier.lost", shard, json!({"courier": courier, "silentMs": silent_ms}))
}

/// Deliveries a previous instance left, put back on the schedule by a claim.
pub fn claims_recovered(shard: &str, count: usize) -> String {
    line("warn", "claims.recovered", shard, json!({"count": count}))
}

/// The pace cut from `from` to `to` deliveries at once, for `reason`.
pub fn pace_cut(shard: &str, from: usize, to: usize, reason: &str) -> String {
    line("info", "pace.cut", shard, json!({"from": from, "to": to, "reason": reason}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Value;

    fn row(attempt: f64) -> Row {
        let v = Value::object([
            ("messageId", Value::str("msg_1")),
            ("queueName", Value::str("__wkf_step_x")),
            ("runId", Value::str("wrun_1")),
            ("attempt", Value::num(attempt)),
            ("body", Value::str("SECRET-PAYLOAD")),
            ("targetBaseUrl", Value::str("http://app")),
        ]);
        Row::from_value("msg:msg_1", v).unwrap()
    }

    fn parse(l: &str) -> Json {
        serde_json::from_str(l).unwrap()
    }

    #[test]
    fn a_retried_failure_says_when() {
        let lines = settled("q:0", &row(0.0), &Action::Retry { reason: "HTTP 500".into(), answer: None }, Settled::Retrying, 1_000);
        assert_eq!(lines.len(), 1);
        let l = parse(&lines[0]);
        assert_eq!(l["event"], "delivery.failed");
        assert_eq!(l["level"], "warn");
        assert_eq!(l["shard"], "q:0");
        assert_eq!(
            (l["queueName"].as_str(), l["messageId"].as_str(), l["runId"].as_str()),
            (Some("__wkf_step_x"), Some("msg_1"), Some("wrun_1"))
        );
        assert_eq!((l["attempt"].as_f64(), l["status"].as_u64(), l["willRetry"].as_bool()), (Some(1.0), Some(500), Some(true)));
        assert!(lines[0].contains(r#""attempt":1,"#), "{}", lines[0]);
        assert_eq!(l["retryAt"].as_f64(), Some(1_000.0 + backoff_seconds(1.0) * 1000.0));
        assert!(!lines[0].contains("SECRET-PAYLOAD") && !lines[0].contains("http://app"));
    }

    #[test]
    fn the_last_attempt_is_dead_lettered() {
        let lines =
            settled("q:0", &row(4.0), &Action::Retry { reason: "transport error: boom".into(), answer: None }, Settled::DeadLettered, 1);
        let events: Vec<Json> = lines.iter().map(|l| parse(l)).collect();
        assert_eq!(events[0]["event"], "delivery.failed");
        assert_eq!(events[0]["status"], Json::Null);
        assert_eq!(events[0]["willRetry"], false);
        assert_eq!(events[1]["event"], "message.dead_lettered");
        assert_eq!(events[1]["attempts"].as_f64(), Some(5.0));
        assert_eq!(events[1]["attempt"].as_f64(), Some(5.0));
        assert!(lines.iter().all(|l| !l.contains("SECRET-PAYLOAD")));
    }

    #[test]
    fn refusals_and_the_rest() {
        let l = settled("q:1", &row(0.0), &Action::Refused { delay_ms: 2000 }, Settled::Redelivering, 1);
        assert_eq!(parse(&l[0])["event"], "delivery.refused");
        assert_eq!(parse(&l[0])["retryAfterMs"], 2000);
        assert!(settled("q:1", &row(0.0), &Action::Ack, Settled::Acked, 1).is_empty());
        assert!(settled("q:1", &row(0.0), &Action::Retry { reason: "HTTP 500".into(), answer: None }, Settled::Stale, 1).is_empty());
        assert_eq!(parse(&courier_lost("q:0", 3, 31_000))["courier"], 3);
        assert_eq!(parse(&claims_recovered("q:0", 7))["count"], 7);
        let cut = parse(&pace_cut("q:0", 64, 32, "HTTP 500"));
        assert_eq!((cut["from"].as_u64(), cut["to"].as_u64()), (Some(64), Some(32)));
    }
}
