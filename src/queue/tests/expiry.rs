//! Run expiry: `expireRun` (paged, with receipts, atomic), `acknowledgeExpireRun` and the
//! fences' compaction, and the run DO's answer before an enqueue, a delivery, a retry or a
//! redrive (spec-0.4 `queue.md` §3).

use super::run_sim::*;
use super::sim::*;
use super::T0;
use crate::queue::delivery::{classify, settle, Outcome, Rearm, Settled};
use crate::queue::driver;
use crate::queue::state::{self, Lifecycle, FENCE_COMPACTION_GRACE_MS};
use crate::queue::*;
use crate::store::{ListOptions, Store, StoreResult, Stored};
use crate::testing::block_on;
use crate::wire::Value;

fn fill(sim: &mut RunSim, run: &str, n: usize) {
    for i in 0..n {
        sim.ok("enqueue", vec![keyed(delayed(message(&format!("{run}-{i:03}"), Some(run)), 3600.0), &format!("{run}-k{i}"))]);
    }
}

/// A store that fails every operation after `budget` writes (a crash mid-transaction).
struct CrashAfter<'a> {
    inner: &'a mut dyn Store,
    budget: usize,
}

impl CrashAfter<'_> {
    fn spend(&mut self) -> StoreResult<()> {
        if self.budget == 0 {
            return Err(RpcError::error("injected crash"));
        }
        self.budget -= 1;
        Ok(())
    }
}

impl Store for CrashAfter<'_> {
    fn get_value(&mut self, key: &str) -> StoreResult<Option<Stored>> {
        self.inner.get_value(key)
    }
    fn put(&mut self, key: &str, value: &str) -> StoreResult<()> {
        self.spend()?;
        self.inner.put(key, value)
    }
    fn put_bytes(&mut self, key: &str, value: &[u8]) -> StoreResult<()> {
        self.spend()?;
        self.inner.put_bytes(key, value)
    }
    fn delete(&mut self, key: &str) -> StoreResult<bool> {
        self.spend()?;
        self.inner.delete(key)
    }
    fn list_values(&mut self, options: &ListOptions) -> StoreResult<Vec<(String, Stored)>> {
        self.inner.list_values(options)
    }
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

#[test]
fn enqueue_asks_the_run_do_and_refuses_an_expired_run_before_any_fence() {
    let mut sim = RunSim::new();
    sim.runs.set("wrun_old", "expired");
    sim.runs.set("wrun_live", "active");
    let refused = sim.ok("enqueue", vec![message("m1", Some("wrun_old"))]);
    assert_eq!(refused, r#"{"code":"RUN_EXPIRED","message":"Workflow run \"wrun_old\" has expired","ok":false}"#);
    assert!(sim.keys().is_empty());
    assert_eq!(sim.ok("enqueue", vec![message("m2", Some("wrun_live"))]), r#"{"deduped":false,"messageId":"m2","ok":true}"#);
    // Unknown runs are accepted; messages without a run ask nobody.
    assert!(sim.ok("enqueue", vec![message("m3", Some("wrun_unknown"))]).contains(r#""ok":true"#));
    sim.ok("enqueue", vec![message("m4", None)]);
    assert_eq!(*sim.runs.calls.borrow(), ["wrun_old", "wrun_live", "wrun_unknown"]);
    // An expired answer is remembered: no second hop.
    sim.ok("enqueue", vec![message("m5", Some("wrun_old"))]);
    assert_eq!(sim.runs.calls(), 3);
    // Behind a queue fence no hop is needed either.
    sim.ok("expireRun", vec![Value::str("wrun_f"), Value::num(1.0), no_options()]);
    assert!(sim.ok("enqueue", vec![message("m6", Some("wrun_f"))]).contains("RUN_EXPIRED"));
    assert_eq!(sim.runs.calls(), 3);
}

#[test]
fn a_failed_lifecycle_call_fails_the_enqueue() {
    let mut sim = RunSim::new();
    *sim.runs.failing.borrow_mut() = true;
    let e = sim.rpc("enqueue", vec![message("m1", Some("wrun_a"))]).unwrap_err();
    assert_eq!(e.message, "world-celld queue missing WORKFLOW_DB binding");
    assert!(sim.keys().is_empty());
}

#[test]
fn a_message_whose_run_expired_is_dropped_before_delivery() {
    let mut sim = RunSim::new();
    sim.ok("enqueue", vec![keyed(delayed(message("m1", Some("wrun_a")), 60.0), "k")]);
    sim.runs.set("wrun_a", "expired");
    sim.now += 60_000;
    let claimed = sim.claim(&|_| true).unwrap();
    assert_eq!(sim.deliver(&claimed[0], None), Settled::Purged);
    assert!(sim.keys() == ["cfg"], "{:?}", sim.keys());
    assert_eq!(sim.alarm, None);
}

#[test]
fn retry_and_reschedule_of_an_expired_run_drop_the_message() {
    for answer in
        [Outcome::Response { status: 500, body: None }, Outcome::Response { status: 503, body: Some(br#"{"timeoutSeconds":1}"#.to_vec()) }]
    {
        let mut sim = RunSim::new();
        sim.config.queue_max_attempts = 1; // a 500 would dead-letter
        sim.ok("enqueue", vec![keyed(message("m1", Some("wrun_a")), "k")]);
        sim.now += 1;
        let claimed = sim.claim(&|_| true).unwrap();
        // The run expires while the delivery runs (no queue fence yet).
        let before = block_on(driver::check_row(&sim.runs, &sim.cache, &claimed[0].row)).unwrap();
        assert_eq!(before, Lifecycle::unknown());
        sim.runs.set("wrun_a", "expired");
        let lifecycle = block_on(driver::check_row(&sim.runs, &sim.cache, &claimed[0].row)).unwrap();
        let (now, config) = (sim.now, sim.config.clone());
        let mut alarm = Alarm::unknown();
        let action = classify(&answer);
        let settled =
            sim.store.transaction(|s| settle(s, now, &config, &claimed[0], &action, &lifecycle, Rearm::Exact, &mut alarm)).unwrap();
        assert_eq!(settled, Settled::Purged);
        assert_eq!(sim.keys(), ["cfg"]);
    }
}

#[test]
fn expire_run_pages_64_references_with_a_cumulative_count_and_a_receipt() {
    let mut sim = RunSim::new();
    fill(&mut sim, "wrun_x", 130);
    fill(&mut sim, "wrun_y", 1);
    let page = |sim: &mut RunSim| {
        sim.ok("expireRun", vec![Value::str("wrun_x"), Value::num(946_684_800_000.0), Value::object([("limit", Value::num(64.0))])])
    };
    assert_eq!(page(&mut sim), r#"{"deleted":64,"done":false}"#);
    assert_eq!(page(&mut sim), r#"{"deleted":128,"done":false}"#);
    // Refused as soon as the fence exists.
    assert!(sim.ok("enqueue", vec![message("late", Some("wrun_x"))]).contains("RUN_EXPIRED"));
    assert_eq!(page(&mut sim), r#"{"deleted":130,"done":true,"receipt":{"deleted":130,"expiredAt":946684800000}}"#);
    // Idempotent afterwards; a later expiredAt does not replace the first.
    assert_eq!(
        sim.ok("expireRun", vec![Value::str("wrun_x"), Value::num(5.0)]),
        r#"{"deleted":130,"done":true,"receipt":{"deleted":130,"expiredAt":946684800000}}"#
    );
    assert!(!sim.keys().iter().any(|k| k.contains("wrun_x-")), "{:?}", sim.keys());
    assert_eq!(sim.keys_with("msg:").len(), 1);
    assert_eq!(sim.store.text("expired-run:wrun_x"), Some(r#"{"compactAt":null,"deleted":130,"expiredAt":946684800000}"#));
}

#[test]
fn expire_run_limits_are_clamped() {
    let mut sim = RunSim::new();
    fill(&mut sim, "wrun_x", 70);
    let call = |sim: &mut RunSim, limit: Value| {
        sim.ok("expireRun", vec![Value::str("wrun_x"), Value::num(1.0), Value::object([("limit", limit)])])
    };
    assert_eq!(call(&mut sim, Value::num(0.0)), r#"{"deleted":1,"done":false}"#);
    assert_eq!(call(&mut sim, Value::num(-3.0)), r#"{"deleted":2,"done":false}"#);
    assert_eq!(call(&mut sim, Value::num(2.5)), r#"{"deleted":4,"done":false}"#);
    assert_eq!(call(&mut sim, Value::str("x")), r#"{"deleted":68,"done":false}"#);
    assert_eq!(call(&mut sim, Value::num(1e9)), r#"{"deleted":70,"done":true,"receipt":{"deleted":70,"expiredAt":1}}"#);
}

#[test]
fn expire_run_without_options_keeps_the_0_3_contract() {
    let mut sim = RunSim::new();
    fill(&mut sim, "wrun_x", 70);
    // 0.3: everything in one call, `{deleted}`, a fence without compactAt.
    assert_eq!(sim.ok("expireRun", vec![Value::str("wrun_x"), Value::num(1.0)]), r#"{"deleted":70}"#);
    assert_eq!(sim.ok("expireRun", vec![Value::str("wrun_x"), Value::num(1.0)]), r#"{"deleted":70}"#);
    assert_eq!(sim.store.text("expired-run:wrun_x"), Some(r#"{"deleted":70,"expiredAt":1}"#));
    // A paged call on a 0.3 fence answers the paged shape from then on.
    let paged = r#"{"deleted":70,"done":true,"receipt":{"deleted":70,"expiredAt":1}}"#;
    assert_eq!(sim.ok("expireRun", vec![Value::str("wrun_x"), Value::num(1.0), no_options()]), paged);
    assert_eq!(sim.ok("expireRun", vec![Value::str("wrun_x"), Value::num(1.0)]), paged);
}

#[test]
fn expire_run_is_atomic_under_a_crash() {
    let mut sim = RunSim::new();
    fill(&mut sim, "wrun_x", 3);
    let before = sim.store.data.clone();
    let args = vec![Value::str("wrun_x"), Value::num(1.0), no_options()];
    let config = sim.config.clone();
    for budget in [0, 1, 5, 11] {
        let ctx = Ctx { now: sim.now, name: "q:0", config: &config };
        let mut alarm = Alarm::unknown();
        let r = sim.store.transaction(|s| call(&mut CrashAfter { inner: s, budget }, &ctx, &mut alarm, "expireRun", Args(&args)));
        assert!(r.is_err(), "budget {budget}");
        assert_eq!(sim.store.data, before, "budget {budget}");
    }
    assert!(sim.ok("expireRun", args).contains(r#""deleted":3,"done":true"#));
}

#[test]
fn acknowledged_fences_are_compacted_after_the_grace_period() {
    let mut sim = RunSim::new();
    fill(&mut sim, "wrun_x", 2);
    let done = sim.ok("expireRun", vec![Value::str("wrun_x"), Value::num(946_684_800_000.0), no_options()]);
    assert!(done.contains(r#""done":true"#));
    let ack = |sim: &mut RunSim, at: f64, deleted: f64| {
        sim.ok(
            "acknowledgeExpireRun",
            vec![Value::str("wrun_x"), Value::object([("expiredAt", Value::num(at)), ("deleted", Value::num(deleted))])],
        )
    };
    assert_eq!(ack(&mut sim, 946_684_800_000.0, 9.0), r#"{"acknowledged":false}"#);
    assert_eq!(ack(&mut sim, 946_684_800_001.0, 2.0), r#"{"acknowledged":false}"#);
    assert!(sim.store.text("expired-run:wrun_x").unwrap().contains(r#""compactAt":null"#));
    assert_eq!(sim.alarm, None);
    assert_eq!(ack(&mut sim, 946_684_800_000.0, 2.0), r#"{"acknowledged":true}"#);
    let compact_at = T0 + FENCE_COMPACTION_GRACE_MS;
    assert!(sim.store.text("expired-run:wrun_x").unwrap().contains(&format!(r#""compactAt":{compact_at}"#)));
    let gc = format!("expired-run-gc:{}:wrun_x", state::pad(compact_at));
    assert_eq!(sim.store.text(&gc), Some(format!(r#"{{"compactAt":{compact_at},"runId":"wrun_x"}}"#).as_str()));
    assert_eq!(sim.alarm, Some(compact_at));
    // A second acknowledgement keeps the first compactAt.
    sim.now += 1000;
    assert_eq!(ack(&mut sim, 946_684_800_000.0, 2.0), r#"{"acknowledged":true}"#);
    assert_eq!(sim.keys_with("expired-run-gc:"), std::slice::from_ref(&gc));
    // Still fenced before the grace period ends.
    assert!(sim.ok("enqueue", vec![message("m1", Some("wrun_x"))]).contains("RUN_EXPIRED"));
    sim.now = compact_at;
    sim.claim(&|_| true).unwrap();
    assert!(sim.keys_with("expired-run").is_empty(), "{:?}", sim.keys());
    assert_eq!(sim.alarm, None);
    // Without the fence only the run DO's answer refuses the run.
    sim.runs.set("wrun_x", "expired");
    assert!(sim.ok("enqueue", vec![message("m2", Some("wrun_x"))]).contains("RUN_EXPIRED"));
    // No fence: acknowledged (already compacted).
    assert_eq!(ack(&mut sim, 1.0, 1.0), r#"{"acknowledged":true}"#);
}

#[test]
fn a_0_3_fence_reads_compact_at_as_null_and_can_be_acknowledged() {
    let mut sim = RunSim::new();
    sim.store.data.insert("expired-run:wrun_o".into(), Stored::Text(r#"{"expiredAt":7,"deleted":3}"#.into()));
    let ack = sim.ok(
        "acknowledgeExpireRun",
        vec![Value::str("wrun_o"), Value::object([("expiredAt", Value::num(7.0)), ("deleted", Value::num(3.0))])],
    );
    assert_eq!(ack, r#"{"acknowledged":true}"#);
    assert_eq!(
        sim.store.text("expired-run:wrun_o"),
        Some(format!(r#"{{"compactAt":{},"deleted":3,"expiredAt":7}}"#, T0 + FENCE_COMPACTION_GRACE_MS).as_str())
    );
}

#[test]
fn fence_compaction_is_paged() {
    let mut sim = RunSim::new();
    for i in 0..130 {
        let run = format!("wrun_{i:03}");
        sim.ok("expireRun", vec![Value::str(run.as_str()), Value::num(1.0), no_options()]);
        sim.ok(
            "acknowledgeExpireRun",
            vec![Value::str(run.as_str()), Value::object([("expiredAt", Value::num(1.0)), ("deleted", Value::num(0.0))])],
        );
    }
    // A fence re-expired after acknowledgement keeps its compactAt; a gc entry whose
    // compactAt no longer matches its fence leaves that fence alone.
    sim.store.data.insert(
        format!("expired-run-gc:{}:wrun_000", state::pad(T0 - 1)),
        Stored::Text(format!(r#"{{"runId":"wrun_000","compactAt":{}}}"#, T0 - 1)),
    );
    sim.now = T0 + FENCE_COMPACTION_GRACE_MS;
    sim.claim(&|_| true).unwrap();
    assert_eq!(sim.alarm, Some(sim.now + 1));
    assert_eq!(sim.keys_with("expired-run-gc:").len(), 3);
    assert_eq!(sim.keys_with("expired-run:").len(), 3);
    sim.claim(&|_| true).unwrap();
    assert!(sim.keys_with("expired-run").is_empty(), "{:?}", sim.keys_with("expired-run"));
    assert_eq!(sim.alarm, None);
}

#[test]
fn methods_list_is_the_queue_whitelist() {
    let methods = crate::wire::router::Binding::Queue.methods();
    assert!(methods.contains(&"acknowledgeExpireRun"));
    assert_eq!(methods.len(), 8);
    let mut sim = RunSim::new();
    assert_eq!(
        sim.ok(
            "acknowledgeExpireRun",
            vec![Value::str("wrun_none"), Value::object([("expiredAt", Value::num(1.0)), ("deleted", Value::num(0.0))])]
        ),
        r#"{"acknowledged":true}"#
    );
    // Hostile arguments never panic.
    for args in [vec![], vec![Value::Null], vec![Value::num(1.0), Value::str("x")], vec![Value::str("r"), Value::Null, Value::num(3.0)]] {
        for m in ["expireRun", "acknowledgeExpireRun", "purgeDeadLetters", "redriveDeadLetter", "enqueue"] {
            let _ = sim.rpc(m, args.clone());
        }
    }
}
