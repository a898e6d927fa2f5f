//! QueueDO behaviour with an injected clock, a simulated alarm and a scripted target
//! (the reference's `test/queue-do.test.ts` checklist, spec tests.md).

use super::delivery::{build_request, claim, classify, settle, Action, Body, Claimed, OutboundRequest, Outcome, Rearm, Settled};
use super::*;
use crate::config::Config;
use crate::store::alarm::AlarmChange;
use crate::store::{MemoryStore, Store};
use crate::wire::Value;

const T0: i64 = 1_800_000_000_000;

struct Sim {
    store: MemoryStore,
    alarm: Option<i64>,
    now: i64,
    config: Config,
    /// Every delivery request made, with the time it was made.
    sent: Vec<(i64, OutboundRequest)>,
}

fn ok() -> Outcome {
    Outcome::Response { status: 200, body: None }
}
fn status(s: u16) -> Outcome {
    Outcome::Response { status: s, body: None }
}
fn busy(body: &str) -> Outcome {
    Outcome::Response { status: 503, body: Some(body.as_bytes().to_vec()) }
}

fn request(id: &str) -> Value {
    Value::object([
        ("messageId", Value::str(id)),
        ("queueName", Value::str("__wkf_workflow_x")),
        ("pathname", Value::str("flow")),
        ("body", Value::str(format!("{{\"id\":\"{id}\"}}"))),
        ("config", Value::object([("targetBaseUrl", Value::str("http://app.internal:3000")), ("queueShards", Value::num(1.0))])),
    ])
}

fn with(mut v: Value, key: &str, member: Value) -> Value {
    if let Value::Object(m) = &mut v {
        m.insert(key.into(), member);
    }
    v
}

fn header<'a>(r: &'a OutboundRequest, name: &str) -> Option<&'a str> {
    r.headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str())
}

impl Sim {
    fn new() -> Sim {
        Sim { store: MemoryStore::new(), alarm: None, now: T0, config: Config::default(), sent: Vec::new() }
    }

    fn apply(&mut self, alarm: &Alarm) {
        match alarm.change() {
            Some(AlarmChange::Set(t)) => self.alarm = Some(t),
            Some(AlarmChange::Delete) => self.alarm = None,
            None => {}
        }
    }

    fn rpc(&mut self, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        let mut alarm = Alarm::new(self.alarm);
        let config = self.config.clone();
        let ctx = Ctx { now: self.now, name: "q:0", config: &config };
        let r = self.store.transaction(|s| call(s, &ctx, &mut alarm, method, Args(&args)));
        if r.is_ok() {
            self.apply(&alarm);
        }
        r
    }

    fn ok_rpc(&mut self, method: &str, args: Vec<Value>) -> Value {
        self.rpc(method, args).expect("rpc")
    }

    fn enqueue(&mut self, req: Value) -> Value {
        self.ok_rpc("enqueue", vec![req])
    }

    fn stats(&mut self) -> (f64, f64, f64, Option<i64>) {
        let s = self.ok_rpc("stats", vec![]);
        let n = |k: &str| s.get(k).and_then(Value::as_f64).unwrap();
        (n("pending"), n("inflight"), n("deadLetters"), s.get("alarmAt").and_then(Value::as_f64).map(|t| t as i64))
    }

    /// Claim (as the alarm handler does) without delivering.
    fn claim_only(&mut self) -> Vec<Claimed> {
        let mut alarm = Alarm::unknown();
        let config = self.config.clone();
        let now = self.now;
        let rows = self.store.transaction(|s| claim(s, now, &config, &mut alarm, &|_| true)).unwrap();
        self.apply(&alarm);
        rows
    }

    fn settle_row(&mut self, claimed: &Claimed, outcome: &Outcome) -> Settled {
        self.settle_checked(claimed, outcome, &Lifecycle::unknown())
    }

    fn settle_checked(&mut self, claimed: &Claimed, outcome: &Outcome, lifecycle: &Lifecycle) -> Settled {
        let mut alarm = Alarm::unknown();
        let config = self.config.clone();
        let now = self.now;
        let action = classify(outcome);
        let r = self.store.transaction(|s| settle(s, now, &config, claimed, &action, lifecycle, Rearm::Exact, &mut alarm)).unwrap();
        self.apply(&alarm);
        r
    }

    /// Fire the alarm if it is due: claim, deliver each claimed row, settle.
    fn fire(&mut self, respond: &mut dyn FnMut(&OutboundRequest) -> Outcome) -> usize {
        match self.alarm {
            Some(t) if t <= self.now => {}
            _ => return 0,
        }
        self.alarm = None; // the platform consumes the alarm when it runs the handler
        let rows = self.claim_only();
        for row in &rows {
            let req = build_request(&row.row, &self.config);
            let outcome = respond(&req);
            self.sent.push((self.now, req));
            self.settle_row(row, &outcome);
        }
        rows.len()
    }

    /// Advance the clock to `until`, firing every alarm on the way at its time.
    fn run_until(&mut self, until: i64, respond: &mut dyn FnMut(&OutboundRequest) -> Outcome) {
        loop {
            match self.alarm {
                Some(t) if t <= until => {
                    self.now = self.now.max(t);
                    self.fire(respond);
                }
                _ => break,
            }
        }
        self.now = self.now.max(until);
    }

    fn keys(&self) -> Vec<String> {
        self.store.keys().into_iter().map(str::to_string).collect()
    }
}

fn ids(sim: &Sim) -> Vec<String> {
    sim.sent.iter().map(|(_, r)| header(r, "x-vqs-message-id").unwrap().to_string()).collect()
}

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
    let retry = |r: &str| Action::Retry { reason: r.into() };
    assert_eq!(classify(&ok()), Action::Ack);
    assert_eq!(classify(&status(204)), Action::Ack);
    assert_eq!(classify(&status(299)), Action::Ack);
    for s in [404, 409, 410, 422] {
        assert_eq!(classify(&status(s)), Action::Ack);
    }
    assert_eq!(classify(&status(500)), retry("HTTP 500"));
    assert_eq!(classify(&status(400)), retry("HTTP 400"));
    assert_eq!(classify(&status(301)), retry("HTTP 301"));
    assert_eq!(classify(&status(429)), retry("HTTP 429"));
    assert_eq!(classify(&busy(r#"{"timeoutSeconds":1}"#)), Action::Redeliver { timeout_seconds: 1.0 });
    assert_eq!(classify(&busy(r#"{"timeoutSeconds":0}"#)), Action::Redeliver { timeout_seconds: 0.0 });
    assert_eq!(classify(&busy(r#"{"timeoutSeconds":-3.5}"#)), Action::Redeliver { timeout_seconds: -3.5 });
    assert_eq!(classify(&busy("\u{FEFF}{\"timeoutSeconds\":2}")), Action::Redeliver { timeout_seconds: 2.0 });
    assert_eq!(classify(&busy(r#"{"timeoutSeconds":"1"}"#)), retry("HTTP 503"));
    assert_eq!(classify(&busy(r#"{"retryAfter":1}"#)), retry("HTTP 503"));
    assert_eq!(classify(&busy("busy")), retry("HTTP 503"));
    assert_eq!(classify(&busy("null")), retry("HTTP 503"));
    assert_eq!(classify(&busy("[1]")), retry("HTTP 503"));
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
fn lost_inflight_claim_is_swept_and_reclaimed_in_one_pass() {
    let mut sim = Sim::new();
    sim.enqueue(request("m1"));
    sim.now += 1;
    sim.alarm = None;
    assert_eq!(sim.claim_only().len(), 1); // the delivery "dies" with the isolate
    assert_eq!(sim.stats(), (0.0, 1.0, 0.0, Some(T0 + 1 + 330_000)));
    sim.now = T0 + 1 + 330_000;
    let delivered = sim.fire(&mut |_| ok());
    assert_eq!(delivered, 1);
    assert_eq!(sim.fire(&mut |_| ok()), 0);
    assert_eq!(sim.keys(), ["cfg"]);
}

#[test]
fn orphaned_inflight_entries_of_a_dead_instance_are_recovered_at_once() {
    let mut sim = Sim::new();
    sim.enqueue(with(request("m1"), "runId", Value::str("wrun_1")));
    sim.now += 1;
    assert_eq!(sim.claim_only().len(), 1);
    // A fresh instance: no delivery of m1 runs here.
    let mut alarm = Alarm::unknown();
    let config = sim.config.clone();
    let now = sim.now + 5;
    let rows = sim.store.transaction(|s| claim(s, now, &config, &mut alarm, &|_| false)).unwrap();
    assert_eq!(rows.len(), 1);
    // Recovered and claimed again in the same pass, under a new lease.
    let reference = state::get_value(&mut sim.store, "run:wrun_1:m1").unwrap().unwrap();
    assert_eq!(rows[0].lease, format!("inflight-deadline:{}:m1", now + 330_000));
    assert_eq!(reference.get("inflightKey"), Some(&Value::str(rows[0].lease.as_str())));
    assert_eq!(reference.get("dueKey"), None);
    // ... while a live delivery's entry is kept.
    let rows = sim.store.transaction(|s| claim(s, now, &config, &mut alarm, &|_| true)).unwrap();
    assert!(rows.is_empty());
    assert_eq!(sim.stats().1, 1.0);
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
fn redrive_and_purge() {
    let mut sim = Sim::new();
    sim.config.queue_max_attempts = 1;
    sim.enqueue(with(with(request("m1"), "idempotencyKey", Value::str("k")), "runId", Value::str("wrun_1")));
    sim.run_until(T0 + 10, &mut |_| status(500));
    assert_eq!(sim.stats(), (0.0, 0.0, 1.0, None));
    let r = sim.ok_rpc("redriveDeadLetter", vec![Value::str("m1")]);
    assert_eq!(r.to_json().unwrap(), r#"{"ok":true}"#);
    assert_eq!(sim.stats(), (1.0, 0.0, 0.0, Some(sim.now + 1)));
    let row = state::get_row(&mut sim.store, "m1").unwrap().unwrap();
    assert_eq!(row.member("lastError"), None);
    assert_eq!(row.member("failedAt"), None);
    assert_eq!(row.attempt(), 0.0);
    sim.run_until(T0 + 100, &mut |_| ok());
    assert_eq!(header(&sim.sent[1].1, "x-vqs-message-attempt"), Some("1"));
    assert_eq!(sim.keys(), ["cfg"]);
    assert_eq!(sim.ok_rpc("redriveDeadLetter", vec![Value::str("m1")]).to_json().unwrap(), r#"{"ok":false}"#);

    // Purge.
    sim.enqueue(with(request("m2"), "runId", Value::str("wrun_2")));
    sim.run_until(T0 + 200, &mut |_| status(500));
    assert_eq!(sim.ok_rpc("purgeDeadLetters", vec![]).to_json().unwrap(), r#"{"hasMore":false,"purged":1}"#);
    assert_eq!(sim.ok_rpc("purgeDeadLetters", vec![]).to_json().unwrap(), r#"{"hasMore":false,"purged":0}"#);
    assert_eq!(sim.keys(), ["cfg"]);
}

#[test]
fn redrive_refused_while_a_newer_message_holds_the_key() {
    let mut sim = Sim::new();
    sim.config.queue_max_attempts = 1;
    sim.enqueue(with(request("m1"), "idempotencyKey", Value::str("k")));
    sim.run_until(T0 + 10, &mut |_| status(500));
    sim.enqueue(with(with(request("m2"), "idempotencyKey", Value::str("k")), "delaySeconds", Value::num(3600.0)));
    let before = sim.store.data.clone();
    assert_eq!(sim.ok_rpc("redriveDeadLetter", vec![Value::str("m1")]).to_json().unwrap(), r#"{"ok":false}"#);
    assert_eq!(sim.store.data, before);
    assert_eq!(state::get_value(&mut sim.store, "key:k").unwrap(), Some(Value::str("m2")));
    let (p, i, d, _) = sim.stats();
    assert_eq!((p, i, d), (1.0, 0.0, 1.0));
    assert_eq!(sim.ok_rpc("redriveDeadLetter", vec![Value::str("nope")]).to_json().unwrap(), r#"{"ok":false}"#);
    assert_eq!(sim.ok_rpc("redriveDeadLetter", vec![]).to_json().unwrap(), r#"{"ok":false}"#);
}

#[test]
fn redrive_steals_a_stale_claim() {
    let mut sim = Sim::new();
    sim.config.queue_max_attempts = 1;
    sim.enqueue(with(request("m1"), "idempotencyKey", Value::str("k")));
    sim.run_until(T0 + 10, &mut |_| status(500));
    sim.store.put("key:k", "\"ghost\"").unwrap();
    assert_eq!(sim.ok_rpc("redriveDeadLetter", vec![Value::str("m1")]).to_json().unwrap(), r#"{"ok":true}"#);
    assert_eq!(state::get_value(&mut sim.store, "key:k").unwrap(), Some(Value::str("m1")));
}

fn page(sim: &mut Sim, params: Value) -> (Vec<String>, Option<Value>, bool) {
    let r = sim.ok_rpc("listDeadLetters", vec![params]);
    let ids =
        r.get("data").unwrap().as_array().unwrap().iter().map(|d| d.get("messageId").unwrap().as_str().unwrap().to_string()).collect();
    (ids, r.get("cursor").cloned(), r.get("hasMore").unwrap().as_bool().unwrap())
}

#[test]
fn list_dead_letters_paging() {
    let mut sim = Sim::new();
    sim.config.queue_max_attempts = 1;
    for (i, id) in ["a", "b", "c"].iter().enumerate() {
        sim.now = T0 + (i as i64) * 10;
        sim.enqueue(request(id));
        sim.run_until(sim.now + 5, &mut |_| status(500));
    }
    let (ids, cursor, more) = page(&mut sim, Value::object([("limit", Value::num(2.0))]));
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(cursor, Some(Value::str(format!("dlq:{}:b", T0 + 11))));
    assert!(more);
    let (ids, cursor, more) = page(&mut sim, Value::object([("limit", Value::num(2.0)), ("cursor", cursor.unwrap())]));
    assert_eq!((ids, cursor, more), (vec!["c".to_string()], Some(Value::Null), false));
    // A null cursor is the string "null": past every dlq: key.
    let (ids, cursor, more) = page(&mut sim, Value::object([("limit", Value::num(1.0)), ("cursor", Value::Null)]));
    assert_eq!((ids.len(), cursor, more), (0, Some(Value::Null), false));
    let (ids, _, _) = page(&mut sim, Value::object([("limit", Value::Null)]));
    assert_eq!(ids.len(), 3);
    // limit 0: empty page, hasMore, no cursor member at all.
    let r = sim.ok_rpc("listDeadLetters", vec![Value::object([("limit", Value::num(0.0))])]);
    assert_eq!(r.to_json().unwrap(), r#"{"data":[],"hasMore":true}"#);
    let err = sim.rpc("listDeadLetters", vec![Value::object([("limit", Value::num(-1.0))])]).unwrap_err();
    assert_eq!(err, RpcError::list_limit());
    let (ids, _, _) = page(&mut sim, Value::str("nonsense"));
    assert_eq!(ids.len(), 3);
}

#[test]
fn expire_run_purges_pending_inflight_and_dead() {
    let mut sim = Sim::new();
    sim.config.queue_max_attempts = 1;
    let run = |r: Value| with(r, "runId", Value::str("wrun_x"));
    // Dead.
    sim.enqueue(run(with(request("dead"), "idempotencyKey", Value::str("k1"))));
    sim.run_until(T0 + 10, &mut |_| status(500));
    // In flight.
    sim.enqueue(run(with(request("flying"), "idempotencyKey", Value::str("k2"))));
    sim.now += 1;
    sim.alarm = None;
    let flying = sim.claim_only();
    assert_eq!(flying.len(), 1);
    // Pending.
    sim.enqueue(run(with(with(request("later"), "idempotencyKey", Value::str("k3")), "delaySeconds", Value::num(60.0))));
    // Another run's message stays.
    sim.enqueue(with(with(request("other"), "runId", Value::str("wrun_y")), "delaySeconds", Value::num(60.0)));
    assert_eq!(sim.stats().0, 2.0);

    let r = sim.ok_rpc("expireRun", vec![Value::str("wrun_x"), Value::num(946_684_800_000.0)]);
    assert_eq!(r.to_json().unwrap(), r#"{"deleted":3}"#);
    let r = sim.ok_rpc("expireRun", vec![Value::str("wrun_x"), Value::num(946_684_800_000.0)]);
    assert_eq!(r.to_json().unwrap(), r#"{"deleted":3}"#);
    assert_eq!(sim.stats(), (1.0, 0.0, 0.0, Some(T0 + 11 + 60_000)));
    let keys = sim.keys();
    assert!(!keys.iter().any(|k| k.starts_with("run:wrun_x:") || k.starts_with("key:")), "{keys:?}");
    assert!(keys.contains(&"expired-run:wrun_x".to_string()));
    assert_eq!(
        state::get_value(&mut sim.store, "expired-run:wrun_x").unwrap().unwrap().to_json().unwrap(),
        r#"{"deleted":3,"expiredAt":946684800000}"#
    );

    // The in-flight delivery answers 500 afterwards: no resurrection.
    sim.settle_row(&flying[0], &status(500));
    let keys = sim.keys();
    assert!(!keys.iter().any(|k| k.contains("flying")), "{keys:?}");
    // ... nor with a 503 timeoutSeconds.
    sim.settle_row(&flying[0], &busy(r#"{"timeoutSeconds":1}"#));
    assert!(!sim.keys().iter().any(|k| k.contains("flying")));

    let out = sim.enqueue(run(request("again")));
    assert_eq!(out.to_json().unwrap(), r#"{"code":"RUN_EXPIRED","message":"Workflow run \"wrun_x\" has expired","ok":false}"#);
    assert_eq!(sim.ok_rpc("expireRun", vec![Value::str("wrun_none"), Value::num(1.0)]).to_json().unwrap(), r#"{"deleted":0}"#);
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
fn enqueue_moves_an_overdue_alarm() {
    let mut sim = Sim::new();
    sim.enqueue(with(request("m1"), "delaySeconds", Value::num(60.0)));
    sim.alarm = Some(T0 - 5);
    sim.enqueue(with(request("m2"), "delaySeconds", Value::num(60.0)));
    assert_eq!(sim.alarm, Some(T0 + 1));
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

#[test]
fn hostile_rows_do_not_panic() {
    let mut sim = Sim::new();
    let weird = Value::object([
        ("messageId", Value::num(5.0)),
        ("queueName", Value::Array(vec![Value::num(1.0), Value::Null])),
        ("body", Value::Bytes(vec![0, 255])),
        ("runId", Value::object([("a", Value::Null)])),
        ("idempotencyKey", Value::num(7.0)),
        ("delaySeconds", Value::Bool(true)),
        ("config", Value::object([("queueShards", Value::str("1"))])),
    ]);
    let out = sim.enqueue(weird.clone());
    assert_eq!(out.get("messageId"), Some(&Value::num(5.0)));
    assert_eq!(sim.enqueue(weird).get("deduped"), Some(&Value::Bool(true)));
    sim.run_until(T0 + 5_000, &mut |_| ok());
    let req = &sim.sent[0].1;
    assert_eq!(req.url, "undefined/.well-known/workflow/v1/undefined");
    assert_eq!(header(req, "x-vqs-queue-name"), Some("1,"));
    assert_eq!(header(req, "x-vqs-message-id"), Some("5"));
    assert_eq!(req.body, Body::Bytes(vec![0, 255]));
    assert_eq!(sim.keys(), ["cfg"]);
    // Unknown method and odd admin arguments.
    assert!(sim.rpc("alarm", vec![]).is_err());
    assert_eq!(sim.ok_rpc("expireRun", vec![]).to_json().unwrap(), r#"{"deleted":0}"#);
    assert!(sim.rpc("listDeadLetters", vec![Value::object([("limit", Value::num(1e300))])]).is_ok());
    assert!(sim.rpc("listDeadLetters", vec![Value::object([("limit", Value::num(0.5))])]).is_ok());
    assert!(sim.rpc("listDeadLetters", vec![Value::object([("limit", Value::str("x"))])]).is_err());
}

#[test]
fn huge_timeouts_do_not_overflow() {
    let mut sim = Sim::new();
    sim.enqueue(request("m1"));
    sim.now += 1;
    sim.alarm = None;
    let rows = sim.claim_only();
    assert_eq!(rows.len(), 1);
    sim.settle_row(&rows[0], &busy(r#"{"timeoutSeconds":1e300}"#));
    assert_eq!(sim.alarm, Some(state::MAX_TIME_MS));
    let mut sim = Sim::new();
    sim.config.queue_max_attempts = u32::MAX;
    sim.enqueue(request("m1"));
    sim.run_until(T0 + 3_600_000, &mut |_| status(500));
    // 2, 4, 8, 16, 32, then 60 s apart.
    let gaps: Vec<i64> = sim.sent.windows(2).map(|w| w[1].0 - w[0].0).take(7).collect();
    assert_eq!(gaps, [2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]);
}

/// Deterministic hostile inputs: every method with every combination of odd arguments,
/// and odd delivery outcomes, must answer (Ok or a thrown error), never panic, and keep
/// storage decodable.
#[test]
fn hostile_arguments_never_panic() {
    let odd = || {
        vec![
            Value::Null,
            Value::Bool(true),
            Value::num(-1.0),
            Value::num(0.5),
            Value::num(1e308),
            Value::num(-1e308),
            Value::str(""),
            Value::str("due:"),
            Value::str("\u{0}\u{FFFF}"),
            Value::Array(vec![Value::Null, Value::Array(vec![])]),
            Value::Date(None),
            Value::Date(Some(-8_640_000_000_000_000)),
            Value::Bytes(vec![]),
            Value::object([("limit", Value::num(-0.5)), ("cursor", Value::num(3.0))]),
            Value::object([("limit", Value::Bool(true)), ("cursor", Value::Array(vec![]))]),
            Value::object([("limit", Value::num(f64::MAX))]),
        ]
    };
    let mut requests = vec![request("ok")];
    for (i, v) in odd().into_iter().enumerate() {
        for member in ["messageId", "queueName", "pathname", "body", "runId", "idempotencyKey", "delaySeconds", "config"] {
            requests.push(with(request(&format!("m{i}")), member, v.clone()));
        }
        let cfg = Value::object([("targetBaseUrl", v.clone()), ("queueShards", Value::num(1.0))]);
        requests.push(with(request(&format!("c{i}")), "config", cfg));
    }
    requests.extend(odd());
    let methods =
        ["enqueue", "stats", "listDeadLetters", "redriveDeadLetter", "purgeDeadLetters", "rearmAlarm", "expireRun", "constructor", ""];
    let outcomes = [
        ok(),
        status(0),
        status(u16::MAX),
        busy(""),
        busy("{\"timeoutSeconds\":1e308}"),
        busy("{\"timeoutSeconds\":-1e308}"),
        busy(&"[".repeat(10_000)),
        Outcome::Transport(String::new()),
    ];
    let mut sim = Sim::new();
    sim.config.queue_max_attempts = 2;
    for (n, req) in requests.iter().enumerate() {
        let _ = sim.rpc("enqueue", vec![req.clone()]);
        for m in methods {
            for a in odd() {
                let _ = sim.rpc(m, vec![a.clone(), a]);
            }
        }
        sim.now += 1;
        sim.alarm = Some(sim.now);
        let mut k = n;
        sim.run_until(sim.now + 120_000, &mut |_| {
            k += 1;
            outcomes[k % outcomes.len()].clone()
        });
    }
    // Everything stored still decodes.
    for (key, value) in sim.store.data.clone() {
        assert!(value.as_text().is_some_and(|text| Value::parse(text).is_ok()), "{key}");
    }
}

/// Dead letters of 2 MB payloads: a page carries at most the response budget however large
/// the limit (1e15 used to list everything), and paging by cursor yields each once.
#[test]
fn dead_letter_pages_stay_within_the_response_budget() {
    use crate::store::page::{encoded_len, RESPONSE_BUDGET_BYTES};
    let mut sim = Sim::new();
    for i in 0..6 {
        let row = Value::object([("messageId", Value::str(format!("m{i}"))), ("payload", Value::Bytes(vec![1; 2_000_000]))]);
        state::put_value(&mut sim.store, &state::dlq_key(T0 + i, &format!("m{i}")), &row).unwrap();
    }
    for limit in [Value::num(1e15), Value::num(1e300), Value::num(100.0)] {
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let mut params = vec![("limit", limit.clone())];
            params.extend(cursor.clone().map(|c| ("cursor", c)));
            let r = sim.ok_rpc("listDeadLetters", vec![Value::object(params)]);
            assert!(encoded_len(&r) <= RESPONSE_BUDGET_BYTES + 256);
            let data = r.get("data").and_then(Value::as_array).unwrap();
            assert!(!data.is_empty() && data.len() < 6);
            seen.extend(data.iter().map(|d| d.get("messageId").and_then(Value::as_str).unwrap().to_string()));
            if r.get("hasMore") != Some(&Value::Bool(true)) {
                break;
            }
            cursor = r.get("cursor").cloned();
        }
        assert_eq!(seen, ["m0", "m1", "m2", "m3", "m4", "m5"]);
    }
}

/// `expireRun` with an invalid Date `expiredAt` answers `{deleted: n}` like the reference
/// (which stores it as `null`, what `JSON.stringify` makes of it) instead of a 500.
#[test]
fn expire_run_with_an_invalid_date_answers_like_the_reference() {
    let mut sim = Sim::new();
    assert_eq!(sim.ok_rpc("expireRun", vec![Value::str("wrun_q"), Value::Date(None)]).to_json().unwrap(), r#"{"deleted":0}"#);
    sim.enqueue(with(with(request("m"), "runId", Value::str("wrun_r")), "delaySeconds", Value::num(60.0)));
    let nested = Value::object([("at", Value::Date(None))]);
    assert_eq!(sim.ok_rpc("expireRun", vec![Value::str("wrun_r"), nested]).to_json().unwrap(), r#"{"deleted":1}"#);
    assert_eq!(
        state::get_value(&mut sim.store, "expired-run:wrun_q").unwrap().unwrap().to_json().unwrap(),
        r#"{"deleted":0,"expiredAt":null}"#
    );
    assert_eq!(
        state::get_value(&mut sim.store, "expired-run:wrun_r").unwrap().unwrap().to_json().unwrap(),
        r#"{"deleted":1,"expiredAt":{"at":null}}"#
    );
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
