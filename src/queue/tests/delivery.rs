//! Delivery: the alarm's claim → deliver → settle loop, the outbound request, the answer's
//! classification, retries with backoff, timeouts, dead-lettering, the per-pass budgets and
//! the alarm a pass leaves.

use super::sim::*;
use super::T0;
use crate::queue::delivery::{classify, needs_body, settle, Action, OutboundRequest, Outcome, Rearm};
use crate::queue::*;
use crate::wire::Value;

#[test]
fn no_secret_header_without_secret_and_trailing_slash_removed_once() {
    let mut sim = Sim::new();
    let cfg = Value::object([("targetBaseUrl", Value::str("http://h//")), ("queueShards", Value::num(1.0))]);
    sim.enqueue(with(with(request("m1"), "config", cfg), "pathname", Value::str("step")));
    sim.run_until(T0 + 10, &mut |_| ok());
    let req = &sim.sent[0].1;
    assert_eq!(req.url, "http://h//.well-known/workflow/v1/step");
    assert_eq!(header(req, "x-workflow-callback-secret"), None);
}

#[test]
fn timeout_seconds_redelivers_without_an_attempt() {
    let mut sim = Sim::new();
    sim.enqueue(with(request("m1"), "idempotencyKey", Value::str("k")));
    let mut first = true;
    let mut respond = |_: &OutboundRequest| {
        if std::mem::take(&mut first) {
            busy(r#"{"timeoutSeconds":30}"#)
        } else {
            ok()
        }
    };
    sim.run_until(T0 + 1, &mut respond);
    assert_eq!(sim.stats(), (1.0, 0.0, 0.0, Some(T0 + 1 + 30_000)));
    let dup = sim.enqueue(with(request("m2"), "idempotencyKey", Value::str("k")));
    assert_eq!(dup.get("deduped"), Some(&Value::Bool(true)));
    sim.run_until(T0 + 30_000, &mut respond);
    assert_eq!(sim.sent.len(), 1);
    sim.run_until(T0 + 31_001, &mut respond);
    assert_eq!(sim.sent.len(), 2);
    assert_eq!(header(&sim.sent[1].1, "x-vqs-message-attempt"), Some("1"));
    assert_eq!(sim.keys(), ["cfg"]);
}

#[test]
fn classification_table() {
    let retry = |r: &str| Action::Retry { reason: r.into(), answer: None };
    let retry_with = |r: &str, a: &str| Action::Retry { reason: r.into(), answer: Some(a.into()) };
    assert_eq!(classify(&ok()), Action::Ack);
    assert_eq!(classify(&status(204)), Action::Ack);
    assert_eq!(classify(&status(299)), Action::Ack);
    for s in [404, 409, 410, 422] {
        assert_eq!(classify(&status(s)), Action::Ack);
    }
    assert_eq!(classify(&status(500)), retry("HTTP 500"));
    assert_eq!(classify(&status(400)), retry("HTTP 400"));
    assert_eq!(classify(&status(301)), retry("HTTP 301"));
    // 429: refused unseen, due again after its Retry-After, no attempt consumed (ours).
    assert_eq!(classify(&status(429)), Action::Refused { delay_ms: 1_000 });
    assert_eq!(classify(&Outcome::Refused { retry_after: Some("4".into()) }), Action::Refused { delay_ms: 4_000 });
    assert_eq!(classify(&busy(r#"{"timeoutSeconds":1}"#)), Action::Redeliver { timeout_seconds: 1.0 });
    assert_eq!(classify(&busy(r#"{"timeoutSeconds":0}"#)), Action::Redeliver { timeout_seconds: 0.0 });
    assert_eq!(classify(&busy(r#"{"timeoutSeconds":-3.5}"#)), Action::Redeliver { timeout_seconds: -3.5 });
    assert_eq!(classify(&busy("\u{FEFF}{\"timeoutSeconds\":2}")), Action::Redeliver { timeout_seconds: 2.0 });
    assert_eq!(classify(&busy(r#"{"timeoutSeconds":"1"}"#)), retry_with("HTTP 503", r#"{"timeoutSeconds":"1"}"#));
    assert_eq!(classify(&busy(r#"{"retryAfter":1}"#)), retry_with("HTTP 503", r#"{"retryAfter":1}"#));
    assert_eq!(classify(&busy("busy")), retry_with("HTTP 503", "busy"));
    assert_eq!(classify(&busy("null")), retry_with("HTTP 503", "null"));
    assert_eq!(classify(&busy("[1]")), retry_with("HTTP 503", "[1]"));
    // A failed answer's excerpt: its start, one line, at most 200 characters.
    let long = format!("  boom\n{}", "x".repeat(500));
    let excerpt = format!("boom {}", "x".repeat(195));
    assert_eq!(classify(&Outcome::Response { status: 500, body: Some(long.into_bytes()) }), retry_with("HTTP 500", &excerpt));
    assert_eq!(classify(&Outcome::Response { status: 500, body: Some(b"  ".to_vec()) }), retry("HTTP 500"));
    assert!(needs_body(500) && needs_body(503) && needs_body(400));
    assert!(!needs_body(200) && !needs_body(404) && !needs_body(429));
    assert_eq!(classify(&Outcome::Response { status: 503, body: None }), retry("HTTP 503"));
    assert_eq!(
        classify(&Outcome::Transport("Error: Network connection lost.".into())),
        retry("transport error: Error: Network connection lost.")
    );
}

#[test]
fn permanent_failures_drop() {
    for s in [404, 409, 410, 422] {
        let mut sim = Sim::new();
        sim.enqueue(with(with(request("m1"), "idempotencyKey", Value::str("k")), "runId", Value::str("wrun_1")));
        sim.run_until(T0 + 100_000, &mut |_| status(s));
        assert_eq!(sim.sent.len(), 1, "status {s}");
        assert_eq!(sim.keys(), ["cfg"]);
        assert_eq!(sim.stats(), (0.0, 0.0, 0.0, None));
    }
}

#[test]
fn retries_back_off_then_dead_letter() {
    let mut sim = Sim::new();
    sim.enqueue(with(with(request("m1"), "idempotencyKey", Value::str("k")), "runId", Value::str("wrun_1")));
    sim.run_until(T0 + 200_000, &mut |_| status(500));
    let times: Vec<i64> = sim.sent.iter().map(|(t, _)| t - T0).collect();
    assert_eq!(times, [1, 2_001, 6_001, 14_001, 30_001]);
    let attempts: Vec<&str> = sim.sent.iter().map(|(_, r)| header(r, "x-vqs-message-attempt").unwrap()).collect();
    assert_eq!(attempts, ["1", "2", "3", "4", "5"]);
    assert_eq!(sim.stats(), (0.0, 0.0, 1.0, None));
    let list = sim.ok_rpc("listDeadLetters", vec![]);
    let dead = &list.get("data").unwrap().as_array().unwrap()[0];
    assert_eq!(dead.get("attempt"), Some(&Value::num(5.0)));
    assert_eq!(dead.get("lastError"), Some(&Value::str("HTTP 500")));
    assert_eq!(dead.get("failedAt"), Some(&Value::num((T0 + 30_001) as f64)));
    assert_eq!(dead.get("enqueuedAt"), Some(&Value::num(T0 as f64)));
    assert_eq!(list.get("cursor"), Some(&Value::Null));
    // Key released; the run reference points at the dead letter.
    let keys = sim.keys();
    assert!(!keys.iter().any(|k| k.starts_with("key:")), "{keys:?}");
    let reference = state::get_value(&mut sim.store, "run:wrun_1:m1").unwrap().unwrap();
    assert_eq!(reference.get("dlqKey"), Some(&Value::str(format!("dlq:{}:m1", T0 + 30_001))));
    assert_eq!(reference.get("dueKey"), None);
}

#[test]
fn max_attempts_two_and_transport_errors() {
    let mut sim = Sim::new();
    sim.config.queue_max_attempts = 2;
    sim.enqueue(request("m1"));
    let mut n = 0;
    sim.run_until(T0 + 100_000, &mut |_| {
        n += 1;
        Outcome::Transport("Error: Network connection lost.".into())
    });
    assert_eq!(n, 2);
    let list = sim.ok_rpc("listDeadLetters", vec![]);
    let dead = &list.get("data").unwrap().as_array().unwrap()[0];
    assert_eq!(dead.get("lastError"), Some(&Value::str("transport error: Error: Network connection lost.")));
    assert_eq!(dead.get("attempt"), Some(&Value::num(2.0)));
}

#[test]
fn thrown_fetch_retried_after_two_seconds_then_acked() {
    let mut sim = Sim::new();
    sim.enqueue(request("m1"));
    let mut first = true;
    sim.run_until(T0 + 100_000, &mut |_| {
        if std::mem::take(&mut first) {
            Outcome::Transport("TypeError: fetch failed".into())
        } else {
            ok()
        }
    });
    let times: Vec<i64> = sim.sent.iter().map(|(t, _)| t - T0).collect();
    assert_eq!(times, [1, 2_001]);
    assert_eq!(sim.keys(), ["cfg"]);
}

#[test]
fn failed_settle_transactions_leave_the_message_recoverable() {
    let mut sim = Sim::new();
    sim.config.queue_max_attempts = 1;
    sim.enqueue(with(request("m1"), "idempotencyKey", Value::str("k")));
    sim.now += 1;
    let rows = sim.claim_only();
    assert_eq!(rows.len(), 1);
    let config = sim.config.clone();
    for outcome in [ok(), status(500), busy(r#"{"timeoutSeconds":1}"#)] {
        let mut alarm = Alarm::unknown();
        sim.store.fail_with = Some("disk".into());
        let action = classify(&outcome);
        let now = sim.now;
        assert!(sim
            .store
            .transaction(|s| settle(s, now, &config, &rows[0], &action, &Lifecycle::unknown(), Rearm::Exact, &mut alarm))
            .is_err());
        sim.store.fail_with = None;
        // Still in flight, message and key intact, alarm armed at the deadline.
        assert_eq!(sim.stats(), (0.0, 1.0, 0.0, sim.alarm));
        assert!(sim.keys().contains(&"msg:m1".to_string()));
        assert!(sim.keys().contains(&"key:k".to_string()));
    }
    assert_eq!(sim.alarm, Some(T0 + 1 + 300_000 + 30_000));
    // The deadline sweep redelivers it.
    sim.run_until(T0 + 400_000, &mut |_| ok());
    assert_eq!(sim.sent.len(), 1);
    assert_eq!(sim.sent[0].0, T0 + 1 + 330_000);
    assert_eq!(sim.keys(), ["cfg"]);
}

#[test]
fn rearm_alarm() {
    let mut sim = Sim::new();
    assert_eq!(sim.ok_rpc("rearmAlarm", vec![]).to_json().unwrap(), r#"{"alarmAt":null}"#);
    sim.enqueue(with(request("m1"), "delaySeconds", Value::num(60.0)));
    sim.alarm = None; // lost
    let r = sim.ok_rpc("rearmAlarm", vec![]);
    assert_eq!(r.get("alarmAt"), Some(&Value::num((T0 + 60_000) as f64)));
    // Overdue alarm: moved to now + 1, then delivered and cleared.
    sim.now = T0 + 70_000;
    sim.alarm = Some(T0 + 60_000);
    let r = sim.ok_rpc("rearmAlarm", vec![]);
    assert_eq!(r.get("alarmAt"), Some(&Value::num((T0 + 70_001) as f64)));
    sim.run_until(T0 + 70_001, &mut |_| ok());
    assert_eq!(sim.sent.len(), 1);
    assert_eq!(sim.ok_rpc("rearmAlarm", vec![]).to_json().unwrap(), r#"{"alarmAt":null}"#);
}

#[test]
fn at_most_max_inflight_per_pass() {
    let mut sim = Sim::new();
    for i in 0..8 {
        sim.enqueue(request(&format!("m{i}")));
    }
    sim.now += 1;
    sim.alarm = None;
    assert_eq!(sim.claim_only().len(), 5);
    assert_eq!(sim.stats().0, 3.0);
    assert_eq!(sim.claim_only().len(), 0); // all five slots still busy
    sim.config.queue_max_inflight = 7;
    assert_eq!(sim.claim_only().len(), 2);
}

#[test]
fn claim_budget_limits_a_pass() {
    let mut sim = Sim::new();
    for i in 0..4 {
        sim.enqueue(request(&format!("m{i}")));
    }
    sim.now += 1;
    let config = sim.config.clone();
    let now = sim.now;
    let mut alarm = Alarm::unknown();
    let rows =
        sim.store.transaction(|s| delivery::claim_at_most(s, now, &config, &mut alarm, &|_| true, 3, &mut Default::default())).unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(alarm.get(), Some(now + 1)); // the fourth is still due
    let rows =
        sim.store.transaction(|s| delivery::claim_at_most(s, now, &config, &mut alarm, &|_| true, 0, &mut Default::default())).unwrap();
    assert!(rows.is_empty());
    assert_eq!(sim.stats().0, 1.0);
}

#[test]
fn settle_of_a_message_claimed_twice_is_harmless() {
    // Replay of an enqueue without key: two due entries, both claimed.
    let mut sim = Sim::new();
    sim.enqueue(request("m1"));
    sim.now += 1;
    sim.enqueue(request("m1"));
    sim.now += 1;
    let rows = sim.claim_only();
    assert_eq!(rows.len(), 2);
    sim.settle_row(&rows[0], &ok());
    sim.settle_row(&rows[1], &ok());
    assert_eq!(sim.keys(), ["cfg"]);
}

/// A claim sets the alarm from what it listed (`WakeHints`) instead of listing every
/// family again: it must come out exactly as a full `schedule_next` would, with several
/// live leases of different deadlines, delayed messages, and nothing due.
#[test]
fn a_claims_alarm_equals_a_full_schedule() {
    let mut sim = Sim::new();
    let full = |sim: &mut Sim| {
        let mut exact = Alarm::unknown();
        crate::queue::state::schedule_next(&mut sim.store, sim.now, &mut exact).unwrap();
        exact.get()
    };
    // Three claims 10 s apart: three live leases, the earliest first.
    for i in 0..3 {
        sim.enqueue(request(&format!("live{i}")));
        sim.now += 1;
        assert_eq!(sim.claim_only().len(), 1);
        let want = full(&mut sim);
        assert_eq!(sim.alarm, want, "claim {i}");
        sim.now += 10_000;
    }
    let first_deadline = sim.alarm.unwrap();
    // A message due an hour from now: the earliest lease deadline still comes first.
    sim.enqueue(with(request("later"), "delaySeconds", Value::num(3600)));
    assert!(sim.claim_only().is_empty());
    assert_eq!(sim.alarm, Some(first_deadline));
    let want = full(&mut sim);
    assert_eq!(sim.alarm, want);
    // A message due sooner than any deadline: claimed once due, then the deadlines again.
    sim.enqueue(with(request("soon"), "delaySeconds", Value::num(5)));
    assert!(sim.claim_only().is_empty());
    let want = full(&mut sim);
    assert_eq!(sim.alarm, want);
    sim.now += 5_000;
    assert_eq!(sim.claim_only().len(), 1);
    assert_eq!(sim.alarm, Some(first_deadline));
    let want = full(&mut sim);
    assert_eq!(sim.alarm, want);
}

#[test]
fn refusal_delays_follow_retry_after() {
    use crate::queue::delivery::refusal_delay_ms;
    assert_eq!(refusal_delay_ms(None), 1_000);
    assert_eq!(refusal_delay_ms(Some("0")), 1_000);
    assert_eq!(refusal_delay_ms(Some(" 3 ")), 3_000);
    assert_eq!(refusal_delay_ms(Some("2.5")), 2_500);
    assert_eq!(refusal_delay_ms(Some("86400")), 300_000);
    assert_eq!(refusal_delay_ms(Some("Wed, 21 Oct 2015 07:28:00 GMT")), 1_000);
    assert_eq!(refusal_delay_ms(Some("-1")), 1_000);
    assert_eq!(refusal_delay_ms(Some("NaN")), 1_000);
}

#[test]
fn the_alarm_beats_while_deliveries_run() {
    use crate::queue::delivery::{with_heartbeat, HEARTBEAT_MS};
    let deadline = T0 + 300_000;
    // Deliveries in flight with nothing else due: the alarm is not their lease deadline,
    // 5 minutes away, but the heartbeat, so a successor recovers them within seconds.
    assert_eq!(with_heartbeat(Some(deadline), T0, true), Some(T0 + HEARTBEAT_MS));
    assert_eq!(with_heartbeat(None, T0, true), Some(T0 + HEARTBEAT_MS));
    // Work due sooner keeps its time.
    assert_eq!(with_heartbeat(Some(T0 + 10), T0, true), Some(T0 + 10));
    // Nothing running: the alarm is what the queue holds.
    assert_eq!(with_heartbeat(Some(deadline), T0, false), Some(deadline));
    assert_eq!(with_heartbeat(None, T0, false), None);
}

#[test]
fn a_call_moves_the_alarm_no_later_than_the_beat_or_a_pending_recovery() {
    use crate::queue::delivery::{call_alarm_change, HEARTBEAT_MS};
    use crate::store::alarm::AlarmChange::{Delete, Set};
    let deadline = T0 + 330_000;
    // A deduplicated enqueue (say) schedules the first lease's deadline: capped to the beat.
    assert_eq!(call_alarm_change(Some(Set(deadline)), T0, true, None), Some(Set(T0 + HEARTBEAT_MS)));
    assert_eq!(call_alarm_change(Some(Delete), T0, true, None), Some(Set(T0 + HEARTBEAT_MS)));
    assert_eq!(call_alarm_change(Some(Set(T0 + 1)), T0, true, None), Some(Set(T0 + 1)));
    // A fresh instance found claims of a dead one and armed their recovery: kept.
    assert_eq!(call_alarm_change(Some(Set(deadline)), T0, false, Some(T0 + 1)), Some(Set(T0 + 1)));
    assert_eq!(call_alarm_change(Some(Delete), T0, false, Some(T0 + 1)), Some(Set(T0 + 1)));
    assert_eq!(call_alarm_change(Some(Set(T0 - 5)), T0, true, Some(T0 + 1)), Some(Set(T0 - 5)));
    // No change, or nothing running nor to recover: the call's own.
    assert_eq!(call_alarm_change(None, T0, true, Some(T0 + 1)), None);
    assert_eq!(call_alarm_change(Some(Set(deadline)), T0, false, None), Some(Set(deadline)));
    assert_eq!(call_alarm_change(Some(Delete), T0, false, None), Some(Delete));
}
