//! Enqueue: the stored message and its dedup, delays, the shard's pinned configuration
//! and its bounds.

use super::run_sim::*;
use super::sim::*;
use super::T0;
use crate::queue::delivery::Body;

use crate::queue::state;
use crate::queue::*;
use crate::wire::Value;

#[test]
fn enqueue_deliver_ack_leaves_only_cfg() {
    let mut sim = Sim::new();
    sim.config.callback_secret = Some("cb".into());
    let out = sim.enqueue(request("m1"));
    assert_eq!(out.to_json().unwrap(), r#"{"deduped":false,"messageId":"m1","ok":true}"#);
    assert_eq!(sim.stats(), (1.0, 0.0, 0.0, Some(T0 + 1)));
    sim.run_until(T0 + 10, &mut |_| ok());
    assert_eq!(sim.sent.len(), 1);
    let (_, req) = &sim.sent[0];
    assert_eq!(req.url, "http://app.internal:3000/.well-known/workflow/v1/flow");
    assert_eq!(
        req.headers,
        vec![
            ("content-type", "application/json".to_string()),
            ("x-vqs-queue-name", "__wkf_workflow_x".to_string()),
            ("x-vqs-message-id", "m1".to_string()),
            ("x-vqs-message-attempt", "1".to_string()),
            ("x-workflow-callback-secret", "cb".to_string()),
        ]
    );
    assert_eq!(req.body, Body::Text("{\"id\":\"m1\"}".into()));
    assert_eq!(sim.keys(), ["cfg"]);
    assert_eq!(sim.stats(), (0.0, 0.0, 0.0, None));
}

#[test]
fn dedup_while_active_then_free_after_ack() {
    let mut sim = Sim::new();
    let r1 = sim.enqueue(with(request("m1"), "idempotencyKey", Value::str("k")));
    assert_eq!(r1.get("deduped"), Some(&Value::Bool(false)));
    let r2 = sim.enqueue(with(request("m2"), "idempotencyKey", Value::str("k")));
    assert_eq!(r2.to_json().unwrap(), r#"{"deduped":true,"messageId":"m1","ok":true}"#);
    sim.run_until(T0 + 10, &mut |_| ok());
    assert_eq!(ids(&sim), ["m1"]);
    let r3 = sim.enqueue(with(request("m3"), "idempotencyKey", Value::str("k")));
    assert_eq!(r3.get("messageId"), Some(&Value::str("m3")));
    assert_eq!(r3.get("deduped"), Some(&Value::Bool(false)));
    sim.run_until(T0 + 20, &mut |_| ok());
    assert_eq!(ids(&sim), ["m1", "m3"]);
    assert_eq!(sim.keys(), ["cfg"]);
}

#[test]
fn failed_enqueue_commits_nothing() {
    let mut sim = Sim::new();
    sim.enqueue(request("m0"));
    let before = sim.store.data.clone();
    let alarm_before = sim.alarm;
    // No config → TypeError inside the transaction after the cfg read.
    let bad = Value::object([("messageId", Value::str("m1")), ("idempotencyKey", Value::str("k"))]);
    let err = sim.rpc("enqueue", vec![bad]).unwrap_err();
    assert_eq!(err, RpcError::type_error("Cannot read properties of undefined (reading 'queueShards')"));
    assert_eq!(sim.store.data, before);
    assert_eq!(sim.alarm, alarm_before);
    let err = sim.rpc("enqueue", vec![]).unwrap_err();
    assert_eq!(err, RpcError::type_error("Cannot read properties of undefined (reading 'runId')"));
    let err = sim.rpc("enqueue", vec![Value::Null]).unwrap_err();
    assert_eq!(err, RpcError::type_error("Cannot read properties of null (reading 'runId')"));
    // Storage failure midway: rolled back.
    sim.store.fail_with = Some("disk".into());
    assert!(sim.rpc("enqueue", vec![request("m2")]).is_err());
    sim.store.fail_with = None;
    assert_eq!(sim.store.data, before);
    sim.enqueue(request("m2"));
    sim.run_until(T0 + 10, &mut |_| ok());
    assert_eq!(ids(&sim), ["m0", "m2"]);
}

#[test]
fn delay_seconds_is_honoured() {
    let mut sim = Sim::new();
    sim.enqueue(with(request("m1"), "delaySeconds", Value::num(42.0)));
    assert_eq!(sim.stats().3, Some(T0 + 42_000));
    sim.run_until(T0 + 41_000, &mut |_| ok());
    assert!(sim.sent.is_empty());
    // An alarm that fires early (platform jitter) must not deliver it either.
    sim.alarm = Some(T0 + 41_500);
    sim.run_until(T0 + 41_999, &mut |_| ok());
    assert!(sim.sent.is_empty());
    assert_eq!(sim.alarm, Some(T0 + 42_000));
    sim.run_until(T0 + 42_500, &mut |_| ok());
    assert_eq!(sim.sent.len(), 1);
    assert_eq!(sim.sent[0].0, T0 + 42_000);
}

#[test]
fn negative_string_and_garbage_delays() {
    let mut sim = Sim::new();
    sim.enqueue(with(request("a"), "delaySeconds", Value::num(-5.0)));
    sim.enqueue(with(request("b"), "delaySeconds", Value::str("2")));
    sim.enqueue(with(request("c"), "delaySeconds", Value::str("soon")));
    sim.enqueue(with(request("d"), "delaySeconds", Value::num(1e300)));
    sim.run_until(T0 + 1_000, &mut |_| ok());
    assert_eq!(ids(&sim), ["a", "c"]);
    sim.run_until(T0 + 2_000, &mut |_| ok());
    assert_eq!(ids(&sim), ["a", "c", "b"]);
    assert_eq!(sim.stats(), (1.0, 0.0, 0.0, Some(state::MAX_TIME_MS)));
}

/// `delaySeconds: 1e12` (and any time past 2262) is scheduled at the latest time the
/// platform's alarm API accepts, instead of asking it for one it refuses after the
/// message was stored.
#[test]
fn far_delays_are_scheduled_at_an_alarm_the_platform_accepts() {
    let platform_limit = 9_223_372_036_854; // i64::MAX nanoseconds, in ms
    for delay in [1e12, 7.45e9, 1e300, f64::INFINITY] {
        let mut sim = Sim::new();
        sim.enqueue(with(request("far"), "delaySeconds", Value::num(delay)));
        let (pending, _, _, alarm_at) = sim.stats();
        assert_eq!(pending, 1.0);
        let alarm_at = alarm_at.expect("armed");
        assert!(alarm_at < platform_limit, "{delay}: {alarm_at}");
        // rearmAlarm arms the same, acceptable time.
        sim.alarm = None;
        let rearmed = sim.ok_rpc("rearmAlarm", vec![]);
        assert_eq!(rearmed.get("alarmAt"), Some(&Value::num(alarm_at as f64)));
        assert_eq!(sim.alarm, Some(alarm_at));
    }
    // A 503 asking for an absurd pause is rescheduled inside the limit too.
    let mut sim = Sim::new();
    sim.enqueue(request("m"));
    sim.now += 1;
    let rows = sim.claim_only();
    let row = rows.first().expect("claimed");
    sim.settle_row(row, &busy(r#"{"timeoutSeconds":1e300}"#));
    assert!(sim.alarm.is_some_and(|t| t < platform_limit), "{:?}", sim.alarm);
}

#[test]
fn config_mismatch_after_pinning() {
    let mut sim = Sim::new();
    sim.enqueue(request("m1"));
    let cfg2 = Value::object([("targetBaseUrl", Value::str("http://other")), ("queueShards", Value::num(2.0))]);
    let out = sim.enqueue(with(request("m2"), "config", cfg2));
    assert_eq!(
        out.to_json().unwrap(),
        "{\"code\":\"CONFIG_MISMATCH\",\"message\":\"queue cell shard-count mismatch: pinned 1, got 2 \u{2014} changing queueShards requires draining the fleet\",\"ok\":false}"
    );
    assert_eq!(sim.stats().0, 1.0);
    // The target URL is not pinned.
    let cfg3 = Value::object([("targetBaseUrl", Value::str("http://other")), ("queueShards", Value::num(1.0))]);
    sim.enqueue(with(request("m3"), "config", cfg3));
    sim.run_until(T0 + 10, &mut |_| ok());
    let urls: Vec<&str> = sim.sent.iter().map(|(_, r)| r.url.as_str()).collect();
    assert_eq!(urls, ["http://app.internal:3000/.well-known/workflow/v1/flow", "http://other/.well-known/workflow/v1/flow"]);
}

#[test]
fn enqueue_moves_an_overdue_alarm() {
    let mut sim = Sim::new();
    sim.enqueue(with(request("m1"), "delaySeconds", Value::num(60.0)));
    sim.alarm = Some(T0 - 5);
    sim.enqueue(with(request("m2"), "delaySeconds", Value::num(60.0)));
    assert_eq!(sim.alarm, Some(T0 + 1));
}

#[test]
fn config_bounds_fail_enqueue_and_the_claim_phase() {
    let mut sim = RunSim::new();
    sim.ok("enqueue", vec![message("m1", Some("wrun_a"))]);
    sim.config.queue_max_inflight = 129;
    let e = sim.rpc("enqueue", vec![message("m2", Some("wrun_a"))]).unwrap_err();
    assert_eq!((e.name.as_str(), e.message.as_str()), ("Error", "QUEUE_MAX_INFLIGHT must be at most 128"));
    assert_eq!(sim.runs.calls(), 1); // no lifecycle hop for a call that fails its config check
    assert_eq!(sim.claim(&|_| true).unwrap_err().message, "QUEUE_MAX_INFLIGHT must be at most 128");
    sim.config.queue_max_inflight = 5;
    sim.config.queue_delivery_timeout_ms = 300_001;
    assert_eq!(sim.rpc("enqueue", vec![message("m2", None)]).unwrap_err().message, "QUEUE_DELIVERY_TIMEOUT_MS must be at most 300000");
    sim.now += 1;
    assert_eq!(sim.claim(&|_| true).unwrap_err().message, "QUEUE_DELIVERY_TIMEOUT_MS must be at most 300000");
    assert!(sim.keys_with("msg:").len() == 1 && sim.keys_with("due:").len() == 1);
}
