//! QueueDO 0.4 behaviour (spec-0.4 `queue.md`, `tests.md` "test/queue-do.test.ts"): lease
//! keys, legacy claim conversion, authoritative expiry checks through a fake run DO,
//! paged `expireRun` + receipts, fence compaction, bounded purge, config bounds. In-memory
//! store, injected clock, simulated alarm.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use super::delivery::{claim, claim_at_most, classify, drop_expired, settle, ClaimMemo, Claimed, MemoWatch, Outcome, Rearm, Settled};
use super::driver::{self, LifecycleCache, QueueHost};
use super::state::{self, Lifecycle, FENCE_COMPACTION_GRACE_MS};
use super::*;
use crate::config::Config;
use crate::store::alarm::AlarmChange;
use crate::store::{ListOptions, MemoryStore, Store, StoreResult, Stored};
use crate::testing::block_on;
use crate::wire::Value;

const T0: i64 = 1_800_000_000_000;
const DEADLINE: i64 = 330_000;

/// A fake run DO fleet: runId → lifecycle status (unlisted: `missing`), with a call log.
#[derive(Default)]
struct Runs {
    status: RefCell<BTreeMap<String, String>>,
    calls: RefCell<Vec<String>>,
    failing: RefCell<bool>,
    /// When set, the fleet grants leases of this length to runs that are not expired or
    /// missing (as `leaseLifecycle` does); else this holder cannot lease.
    lease_ms: Cell<Option<i64>>,
    now: Cell<i64>,
}

impl Runs {
    fn set(&self, run: &str, status: &str) {
        self.status.borrow_mut().insert(run.into(), status.into());
    }
    fn calls(&self) -> usize {
        self.calls.borrow().len()
    }
}

impl QueueHost for Runs {
    async fn lifecycle_status(&self, run_id: &str) -> Result<Value, RpcError> {
        self.calls.borrow_mut().push(run_id.to_string());
        if *self.failing.borrow() {
            return Err(RpcError::error(driver::MISSING_RUNS_BINDING));
        }
        Ok(Value::str(self.status.borrow().get(run_id).map_or("missing", String::as_str)))
    }

    async fn lifecycle_lease(&self, run_id: &str) -> Result<Option<Value>, RpcError> {
        let Some(ms) = self.lease_ms.get() else { return Ok(None) };
        let status = self.lifecycle_status(run_id).await?;
        let until = match status.as_str() {
            Some("active" | "terminal") => Value::num((self.now.get() + ms) as f64),
            _ => Value::Null,
        };
        Ok(Some(Value::object([("status", status), ("leaseUntil", until)])))
    }

    fn now(&self) -> i64 {
        self.now.get()
    }
}

struct Sim {
    store: MemoryStore,
    alarm: Option<i64>,
    now: i64,
    config: Config,
    runs: Runs,
    cache: LifecycleCache,
    /// As the shell keeps it (`Sim::with_memo`): every store goes through a [`MemoWatch`]
    /// and claims skip what the memo knows. `None`: the core alone, listing everything.
    memo: Option<RefCell<ClaimMemo>>,
}

fn request(id: &str, run: Option<&str>) -> Value {
    let mut m = crate::wire::Map::new();
    m.insert("messageId".into(), Value::str(id));
    m.insert("queueName".into(), Value::str("__wkf_workflow_x"));
    m.insert("pathname".into(), Value::str("flow"));
    m.insert("body".into(), Value::str("{}"));
    if let Some(r) = run {
        m.insert("runId".into(), Value::str(r));
    }
    m.insert("config".into(), Value::object([("targetBaseUrl", Value::str("http://app")), ("queueShards", Value::num(1.0))]));
    Value::Object(m)
}

fn delayed(mut v: Value, seconds: f64) -> Value {
    if let Value::Object(m) = &mut v {
        m.insert("delaySeconds".into(), Value::num(seconds));
    }
    v
}

fn keyed(mut v: Value, key: &str) -> Value {
    if let Value::Object(m) = &mut v {
        m.insert("idempotencyKey".into(), Value::str(key));
    }
    v
}

/// `{}`: the paged call with default options.
fn no_options() -> Value {
    Value::Object(crate::wire::Map::new())
}

fn json(v: &Value) -> String {
    v.to_json().unwrap()
}

impl Sim {
    fn new() -> Sim {
        Sim {
            store: MemoryStore::new(),
            alarm: None,
            now: T0,
            config: Config::default(),
            runs: Runs::default(),
            cache: LifecycleCache::default(),
            memo: None,
        }
    }

    fn with_memo() -> Sim {
        Sim { memo: Some(RefCell::new(ClaimMemo::default())), ..Sim::new() }
    }

    /// One transaction on the store, through the memo's watch when there is one.
    fn tx<T>(&mut self, mut f: impl FnMut(&mut dyn Store) -> Result<T, RpcError>) -> Result<T, RpcError> {
        let Sim { store, memo, .. } = self;
        match memo {
            Some(memo) => store.transaction(|s| f(&mut MemoWatch::new(s, memo))),
            None => store.transaction(f),
        }
    }

    fn apply(&mut self, change: Option<AlarmChange>) {
        match change {
            Some(AlarmChange::Set(t)) => self.alarm = Some(t),
            Some(AlarmChange::Delete) => self.alarm = None,
            None => {}
        }
    }

    /// An RPC as the shell serves it: the lifecycle checks, then one transaction.
    fn rpc(&mut self, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        let config = self.config.clone();
        let runs = driver::runs_to_check(&mut self.store, &config, method, Args(&args))?;
        self.runs.now.set(self.now);
        let lifecycle = block_on(driver::ask(&self.runs, &self.cache, &runs))?;
        let mut alarm = Alarm::new(self.alarm);
        let ctx = Ctx { now: self.now, name: "q:0", config: &config };
        let r = self.tx(|s| call_checked(s, &ctx, &mut alarm, method, Args(&args), &lifecycle));
        if r.is_ok() {
            self.apply(alarm.change());
        }
        r
    }

    fn ok(&mut self, method: &str, args: Vec<Value>) -> String {
        json(&self.rpc(method, args).expect(method))
    }

    /// [`Sim::rpc`] as the shell's synchronous path serves it: steps of
    /// `driver::known_lifecycle`, the run DO asked between them (as the JavaScript class
    /// does) and each answer taken by `LifecycleCache::answered` with the epoch of its ask.
    fn rpc_steps(&mut self, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        let config = self.config.clone();
        self.runs.now.set(self.now);
        let mut answered: Option<(String, bool)> = None;
        for _ in 0..3 {
            let known = answered.as_ref().map(|(run, expired)| (run.as_str(), *expired));
            match driver::known_lifecycle(&mut self.store, &config, &self.cache, method, Args(&args), self.now, known)? {
                Ok(lifecycle) => {
                    let mut alarm = Alarm::new(self.alarm);
                    let ctx = Ctx { now: self.now, name: "q:0", config: &config };
                    let r = self.tx(|s| call_checked(s, &ctx, &mut alarm, method, Args(&args), &lifecycle));
                    if r.is_ok() {
                        self.apply(alarm.change());
                    }
                    return r;
                }
                Err(run_id) => {
                    let epoch = self.cache.epoch();
                    let (lease, answer) = match block_on(self.runs.lifecycle_lease(&run_id))? {
                        Some(answer) => (true, answer),
                        None => (false, block_on(self.runs.lifecycle_status(&run_id))?),
                    };
                    let expired = self.cache.answered(&run_id, epoch, lease, &answer, self.now);
                    answered = Some((run_id, expired));
                }
            }
        }
        panic!("{method}: still asking after three answers");
    }

    fn claim(&mut self, live: &dyn Fn(&str) -> bool) -> Result<Vec<Claimed>, RpcError> {
        let mut alarm = Alarm::unknown();
        let (now, config) = (self.now, self.config.clone());
        let r = match &self.memo {
            None => self.store.transaction(|s| claim(s, now, &config, &mut alarm, live)),
            Some(cell) => {
                let mut memo = cell.borrow().clone();
                let Sim { store, memo: watched, .. } = self;
                let watched = watched.as_ref().expect("a memo");
                let r = store
                    .transaction(|s| claim_at_most(&mut MemoWatch::new(s, watched), now, &config, &mut alarm, live, usize::MAX, &mut memo));
                *watched.borrow_mut() = memo;
                r
            }
        };
        if r.is_ok() {
            self.apply(alarm.change());
        }
        r
    }

    /// A delivery as the shell runs it: the pre-delivery check, then the answer, the
    /// check before a retry / reschedule, and the settlement.
    fn deliver(&mut self, claimed: &Claimed, outcome: Option<Outcome>) -> Settled {
        self.runs.now.set(self.now);
        let before = block_on(driver::check_row(&self.runs, &self.cache, &claimed.row)).unwrap();
        let now = self.now;
        let mut alarm = Alarm::unknown();
        let settled = if claimed.row.run_id().is_some_and(|r| before.reports_expired(&r)) {
            self.tx(|s| drop_expired(s, now, claimed, Rearm::Exact, &mut alarm)).unwrap()
        } else {
            let action = classify(&outcome.expect("an answer"));
            let lifecycle = block_on(driver::check_row(&self.runs, &self.cache, &claimed.row)).unwrap();
            let config = self.config.clone();
            self.tx(|s| settle(s, now, &config, claimed, &action, &lifecycle, Rearm::Exact, &mut alarm)).unwrap()
        };
        self.apply(alarm.change());
        settled
    }

    fn keys(&self) -> Vec<String> {
        self.store.data.keys().cloned().collect()
    }

    fn keys_with(&self, prefix: &str) -> Vec<String> {
        self.keys().into_iter().filter(|k| k.starts_with(prefix)).collect()
    }
}

fn ok200() -> Option<Outcome> {
    Some(Outcome::Response { status: 200, body: None })
}

// ---- leases ------------------------------------------------------------------------

#[test]
fn claim_keys_are_deadline_ordered_leases() {
    let mut sim = Sim::new();
    sim.ok("enqueue", vec![request("m1", Some("wrun_a"))]);
    sim.ok("enqueue", vec![request("m2", None)]);
    sim.now += 1;
    let claimed = sim.claim(&|_| true).unwrap();
    let deadline = state::pad(T0 + 1 + DEADLINE);
    assert_eq!(
        claimed.iter().map(|c| c.lease.clone()).collect::<Vec<_>>(),
        [format!("inflight-deadline:{deadline}:m1"), format!("inflight-deadline:{deadline}:m2")]
    );
    assert_eq!(sim.alarm, Some(T0 + 1 + DEADLINE));
    assert_eq!(sim.store.text(&claimed[0].lease), Some(r#""m1""#));
    let reference = state::get_value(&mut sim.store, "run:wrun_a:m1").unwrap().unwrap();
    assert_eq!(json(&reference), format!(r#"{{"inflightKey":"inflight-deadline:{deadline}:m1","messageId":"m1"}}"#));
    assert!(sim.ok("stats", vec![]).contains(r#""inflight":2"#));
    // Acks leave only cfg.
    for c in &claimed {
        assert_eq!(sim.deliver(c, ok200()), Settled::Acked);
    }
    assert_eq!(sim.keys(), ["cfg"]);
    assert_eq!(sim.alarm, None);
}

#[test]
fn a_late_answer_for_a_recovered_claim_changes_nothing() {
    let mut sim = Sim::new();
    sim.ok("enqueue", vec![keyed(request("m1", Some("wrun_a")), "k")]);
    sim.now += 1;
    let first = sim.claim(&|_| true).unwrap().remove(0);
    // Lost: after its deadline the claim is recovered and claimed again (a new lease).
    sim.now = T0 + 1 + DEADLINE;
    let second = sim.claim(&|_| true).unwrap().remove(0);
    assert_ne!(first.lease, second.lease);
    // The first delivery answers late (500): stale, nothing changes.
    let before = sim.keys();
    assert_eq!(sim.deliver(&first, Some(Outcome::Response { status: 500, body: None })), Settled::Stale);
    assert_eq!(sim.keys(), before);
    assert_eq!(sim.deliver(&second, ok200()), Settled::Acked);
    assert_eq!(sim.keys(), ["cfg"]);
}

#[test]
fn recovery_is_paged() {
    let mut sim = Sim::new();
    sim.config.queue_max_inflight = 128;
    for i in 0..130 {
        sim.ok("enqueue", vec![request(&format!("m{i:03}"), None)]);
    }
    sim.now += 1;
    assert_eq!(sim.claim(&|_| true).unwrap().len(), 128);
    assert_eq!(sim.claim(&|_| true).unwrap().len(), 0);
    sim.now += 1;
    assert_eq!(sim.claim(&|_| true).unwrap().len(), 0); // still full
                                                        // A fresh instance: none of the 128 is live; one page recovers (and re-claims) them.
    let claimed = sim.claim(&|_| false).unwrap();
    assert_eq!(claimed.len(), 128);
    assert!(claimed.iter().all(|c| c.lease.contains(&state::pad(sim.now + DEADLINE))));
}

// ---- legacy claims -------------------------------------------------------------------

/// A 0.3 in-flight claim as 0.3 stored it: `inflight:<id>` = deadline, the row, and a run
/// reference still pointing at the deleted schedule entry.
fn legacy_claim(sim: &mut Sim, id: &str, run: &str, deadline: i64) {
    let row = format!(
        r#"{{"messageId":"{id}","queueName":"q","pathname":"flow","body":"{{}}","runId":"{run}","targetBaseUrl":"http://app","attempt":0,"enqueuedAt":1}}"#
    );
    sim.store.data.insert(format!("msg:{id}"), Stored::Text(row));
    sim.store.data.insert(format!("inflight:{id}"), Stored::Text(deadline.to_string()));
    sim.store.data.insert(format!("run:{run}:{id}"), Stored::Text(format!(r#"{{"messageId":"{id}","dueKey":"due:0000000000001:{id}"}}"#)));
}

#[test]
fn legacy_claims_are_converted_and_recovered() {
    let mut sim = Sim::new();
    legacy_claim(&mut sim, "old1", "wrun_a", T0 + 50_000);
    legacy_claim(&mut sim, "old2", "wrun_a", T0 - 5);
    assert!(sim.ok("stats", vec![]).contains(r#""inflight":2"#));
    assert_eq!(sim.ok("rearmAlarm", vec![]), format!(r#"{{"alarmAt":{}}}"#, T0 + 1));
    // The reference's deadline-only recovery: old2's deadline passed, old1's did not.
    let claimed = sim.claim(&|_| true).unwrap();
    assert_eq!(claimed.iter().map(|c| c.row.id()).collect::<Vec<_>>(), ["old2"]);
    assert!(sim.keys_with("inflight:").is_empty());
    let old1 = format!("inflight-deadline:{}:old1", state::pad(T0 + 50_000));
    assert!(sim.keys().contains(&old1));
    let reference = state::get_value(&mut sim.store, "run:wrun_a:old1").unwrap().unwrap();
    assert_eq!(reference.get("inflightKey"), Some(&Value::str(old1.as_str())));
    assert_eq!(sim.alarm, Some(T0 + 50_000));
    sim.now = T0 + 50_000;
    assert_eq!(sim.claim(&|_| true).unwrap().len(), 1);
}

#[test]
fn legacy_conversion_is_one_page_per_alarm() {
    let mut sim = Sim::new();
    for i in 0..130 {
        legacy_claim(&mut sim, &format!("old{i:03}"), "wrun_a", T0 + 99_000);
    }
    assert!(sim.claim(&|_| true).unwrap().is_empty());
    assert_eq!(sim.keys_with("inflight:").len(), 2);
    assert_eq!(sim.alarm, Some(T0 + 1));
    sim.claim(&|_| true).unwrap();
    assert!(sim.keys_with("inflight:").is_empty());
    assert_eq!(sim.keys_with("inflight-deadline:").len(), 130);
    // expireRun also finds converted and unconverted claims.
    legacy_claim(&mut sim, "late", "wrun_a", T0);
    assert_eq!(sim.ok("expireRun", vec![Value::str("wrun_a"), Value::num(1.0), no_options()]), r#"{"deleted":64,"done":false}"#);
    sim.ok("expireRun", vec![Value::str("wrun_a"), Value::num(1.0)]);
    sim.ok("expireRun", vec![Value::str("wrun_a"), Value::num(1.0)]);
    assert_eq!(sim.keys(), ["expired-run:wrun_a"]);
}

// ---- configuration bounds ------------------------------------------------------------

#[test]
fn config_bounds_fail_enqueue_and_the_claim_phase() {
    let mut sim = Sim::new();
    sim.ok("enqueue", vec![request("m1", Some("wrun_a"))]);
    sim.config.queue_max_inflight = 129;
    let e = sim.rpc("enqueue", vec![request("m2", Some("wrun_a"))]).unwrap_err();
    assert_eq!((e.name.as_str(), e.message.as_str()), ("Error", "QUEUE_MAX_INFLIGHT must be at most 128"));
    assert_eq!(sim.runs.calls(), 1); // no lifecycle hop for a call that fails its config check
    assert_eq!(sim.claim(&|_| true).unwrap_err().message, "QUEUE_MAX_INFLIGHT must be at most 128");
    sim.config.queue_max_inflight = 5;
    sim.config.queue_delivery_timeout_ms = 300_001;
    assert_eq!(sim.rpc("enqueue", vec![request("m2", None)]).unwrap_err().message, "QUEUE_DELIVERY_TIMEOUT_MS must be at most 300000");
    sim.now += 1;
    assert_eq!(sim.claim(&|_| true).unwrap_err().message, "QUEUE_DELIVERY_TIMEOUT_MS must be at most 300000");
    assert!(sim.keys_with("msg:").len() == 1 && sim.keys_with("due:").len() == 1);
}

// ---- authoritative expiry ------------------------------------------------------------

#[test]
fn enqueue_asks_the_run_do_and_refuses_an_expired_run_before_any_fence() {
    let mut sim = Sim::new();
    sim.runs.set("wrun_old", "expired");
    sim.runs.set("wrun_live", "active");
    let refused = sim.ok("enqueue", vec![request("m1", Some("wrun_old"))]);
    assert_eq!(refused, r#"{"code":"RUN_EXPIRED","message":"Workflow run \"wrun_old\" has expired","ok":false}"#);
    assert!(sim.keys().is_empty());
    assert_eq!(sim.ok("enqueue", vec![request("m2", Some("wrun_live"))]), r#"{"deduped":false,"messageId":"m2","ok":true}"#);
    // Unknown runs are accepted; messages without a run ask nobody.
    assert!(sim.ok("enqueue", vec![request("m3", Some("wrun_unknown"))]).contains(r#""ok":true"#));
    sim.ok("enqueue", vec![request("m4", None)]);
    assert_eq!(*sim.runs.calls.borrow(), ["wrun_old", "wrun_live", "wrun_unknown"]);
    // An expired answer is remembered: no second hop.
    sim.ok("enqueue", vec![request("m5", Some("wrun_old"))]);
    assert_eq!(sim.runs.calls(), 3);
    // Behind a queue fence no hop is needed either.
    sim.ok("expireRun", vec![Value::str("wrun_f"), Value::num(1.0), no_options()]);
    assert!(sim.ok("enqueue", vec![request("m6", Some("wrun_f"))]).contains("RUN_EXPIRED"));
    assert_eq!(sim.runs.calls(), 3);
}

#[test]
fn a_failed_lifecycle_call_fails_the_enqueue() {
    let mut sim = Sim::new();
    *sim.runs.failing.borrow_mut() = true;
    let e = sim.rpc("enqueue", vec![request("m1", Some("wrun_a"))]).unwrap_err();
    assert_eq!(e.message, "world-celld queue missing WORKFLOW_DB binding");
    assert!(sim.keys().is_empty());
}

#[test]
fn a_message_whose_run_expired_is_dropped_before_delivery() {
    let mut sim = Sim::new();
    sim.ok("enqueue", vec![keyed(delayed(request("m1", Some("wrun_a")), 60.0), "k")]);
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
        let mut sim = Sim::new();
        sim.config.queue_max_attempts = 1; // a 500 would dead-letter
        sim.ok("enqueue", vec![keyed(request("m1", Some("wrun_a")), "k")]);
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
fn redrive_drops_dead_letters_of_expired_runs() {
    let mut sim = Sim::new();
    sim.config.queue_max_attempts = 1;
    sim.ok("enqueue", vec![keyed(request("m1", Some("wrun_a")), "k")]);
    sim.ok("enqueue", vec![request("m2", Some("wrun_b"))]);
    sim.now += 1;
    for c in sim.claim(&|_| true).unwrap() {
        assert_eq!(sim.deliver(&c, Some(Outcome::Response { status: 500, body: None })), Settled::DeadLettered);
    }
    assert_eq!(sim.keys_with("run:").len(), 2);
    sim.runs.calls.borrow_mut().clear();
    sim.runs.set("wrun_a", "expired");
    sim.runs.set("wrun_b", "terminal");
    assert_eq!(sim.ok("redriveDeadLetter", vec![Value::str("m1")]), r#"{"ok":false}"#);
    assert!(sim.keys_with("dlq:").len() == 1 && !sim.keys().contains(&"run:wrun_a:m1".to_string()));
    assert_eq!(sim.ok("redriveDeadLetter", vec![Value::str("m2")]), r#"{"ok":true}"#);
    assert_eq!(*sim.runs.calls.borrow(), ["wrun_a", "wrun_b"]);
    // Unknown ids ask nobody.
    assert_eq!(sim.ok("redriveDeadLetter", vec![Value::str("nope")]), r#"{"ok":false}"#);
    assert_eq!(sim.runs.calls(), 2);
}

// ---- paged expiry, receipts, compaction ------------------------------------------------

fn fill(sim: &mut Sim, run: &str, n: usize) {
    for i in 0..n {
        sim.ok("enqueue", vec![keyed(delayed(request(&format!("{run}-{i:03}"), Some(run)), 3600.0), &format!("{run}-k{i}"))]);
    }
}

#[test]
fn expire_run_pages_64_references_with_a_cumulative_count_and_a_receipt() {
    let mut sim = Sim::new();
    fill(&mut sim, "wrun_x", 130);
    fill(&mut sim, "wrun_y", 1);
    let page = |sim: &mut Sim| {
        sim.ok("expireRun", vec![Value::str("wrun_x"), Value::num(946_684_800_000.0), Value::object([("limit", Value::num(64.0))])])
    };
    assert_eq!(page(&mut sim), r#"{"deleted":64,"done":false}"#);
    assert_eq!(page(&mut sim), r#"{"deleted":128,"done":false}"#);
    // Refused as soon as the fence exists.
    assert!(sim.ok("enqueue", vec![request("late", Some("wrun_x"))]).contains("RUN_EXPIRED"));
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
    let mut sim = Sim::new();
    fill(&mut sim, "wrun_x", 70);
    let call =
        |sim: &mut Sim, limit: Value| sim.ok("expireRun", vec![Value::str("wrun_x"), Value::num(1.0), Value::object([("limit", limit)])]);
    assert_eq!(call(&mut sim, Value::num(0.0)), r#"{"deleted":1,"done":false}"#);
    assert_eq!(call(&mut sim, Value::num(-3.0)), r#"{"deleted":2,"done":false}"#);
    assert_eq!(call(&mut sim, Value::num(2.5)), r#"{"deleted":4,"done":false}"#);
    assert_eq!(call(&mut sim, Value::str("x")), r#"{"deleted":68,"done":false}"#);
    assert_eq!(call(&mut sim, Value::num(1e9)), r#"{"deleted":70,"done":true,"receipt":{"deleted":70,"expiredAt":1}}"#);
}

#[test]
fn expire_run_without_options_keeps_the_0_3_contract() {
    let mut sim = Sim::new();
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
fn expire_run_is_atomic_under_a_crash() {
    let mut sim = Sim::new();
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
    let mut sim = Sim::new();
    fill(&mut sim, "wrun_x", 2);
    let done = sim.ok("expireRun", vec![Value::str("wrun_x"), Value::num(946_684_800_000.0), no_options()]);
    assert!(done.contains(r#""done":true"#));
    let ack = |sim: &mut Sim, at: f64, deleted: f64| {
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
    assert!(sim.ok("enqueue", vec![request("m1", Some("wrun_x"))]).contains("RUN_EXPIRED"));
    sim.now = compact_at;
    sim.claim(&|_| true).unwrap();
    assert!(sim.keys_with("expired-run").is_empty(), "{:?}", sim.keys());
    assert_eq!(sim.alarm, None);
    // Without the fence only the run DO's answer refuses the run.
    sim.runs.set("wrun_x", "expired");
    assert!(sim.ok("enqueue", vec![request("m2", Some("wrun_x"))]).contains("RUN_EXPIRED"));
    // No fence: acknowledged (already compacted).
    assert_eq!(ack(&mut sim, 1.0, 1.0), r#"{"acknowledged":true}"#);
}

#[test]
fn a_0_3_fence_reads_compact_at_as_null_and_can_be_acknowledged() {
    let mut sim = Sim::new();
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
    let mut sim = Sim::new();
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

// ---- purge -----------------------------------------------------------------------------

#[test]
fn purge_is_bounded_to_128_per_call() {
    let mut sim = Sim::new();
    sim.config.queue_max_inflight = 128;
    sim.config.queue_max_attempts = 1;
    for i in 0..130 {
        sim.ok("enqueue", vec![request(&format!("m{i:03}"), Some("wrun_a"))]);
    }
    sim.now += 1;
    for _ in 0..2 {
        for c in sim.claim(&|_| true).unwrap() {
            sim.deliver(&c, Some(Outcome::Response { status: 500, body: None }));
        }
    }
    assert_eq!(sim.keys_with("dlq:").len(), 130);
    assert_eq!(sim.ok("purgeDeadLetters", vec![Value::object([("limit", Value::num(1.0))])]), r#"{"hasMore":true,"purged":128}"#);
    assert_eq!(sim.ok("purgeDeadLetters", vec![]), r#"{"hasMore":false,"purged":2}"#);
    assert_eq!(sim.ok("purgeDeadLetters", vec![]), r#"{"hasMore":false,"purged":0}"#);
    assert_eq!(sim.keys(), ["cfg"]);
}

#[test]
fn methods_list_is_the_queue_whitelist() {
    let methods = crate::wire::router::Binding::Queue.methods();
    assert!(methods.contains(&"acknowledgeExpireRun"));
    assert_eq!(methods.len(), 8);
    let mut sim = Sim::new();
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

// ---- lifecycle leases (ours; `crate::run::lease`) ----

fn enqueue_for(sim: &mut Sim, id: &str, run: &str) -> String {
    sim.ok("enqueue", vec![delayed(request(id, Some(run)), 3600.0)])
}

#[test]
fn a_lease_saves_the_hop_until_it_runs_out() {
    let mut sim = Sim::new();
    sim.runs.lease_ms.set(Some(60_000));
    sim.runs.set("wrun_a", "active");
    assert!(enqueue_for(&mut sim, "m1", "wrun_a").contains("\"ok\":true"));
    assert_eq!(sim.runs.calls(), 1);
    for i in 0..5 {
        sim.now += 10_000;
        assert!(enqueue_for(&mut sim, &format!("m{}", i + 2), "wrun_a").contains("\"ok\":true"));
    }
    assert_eq!(sim.runs.calls(), 1, "five enqueues under the lease asked nobody");
    // The synchronous path sees the lease too: nothing left to ask.
    let (expired, unknown) = driver::from_cache(&sim.cache, vec!["wrun_a".into()], sim.now);
    assert!(expired.is_empty() && unknown.is_empty());
    sim.now = T0 + 60_000;
    assert!(enqueue_for(&mut sim, "m9", "wrun_a").contains("\"ok\":true"));
    assert_eq!(sim.runs.calls(), 2, "a lease that ran out is asked for again");
}

#[test]
fn a_revoked_lease_asks_again_and_sees_the_expiry() {
    let mut sim = Sim::new();
    sim.runs.lease_ms.set(Some(60_000));
    sim.runs.set("wrun_a", "active");
    enqueue_for(&mut sim, "m1", "wrun_a");
    // The run DO expires the run, then revokes before answering its caller.
    sim.runs.set("wrun_a", "expired");
    assert!(sim.cache.revoke("wrun_a"));
    assert!(!sim.cache.revoke("wrun_a"), "a second revocation finds no lease");
    let out = enqueue_for(&mut sim, "m2", "wrun_a");
    assert!(out.contains("RUN_EXPIRED"), "{out}");
    assert_eq!(sim.runs.calls(), 2);
    // Expired is final: no lease, no further hop.
    assert!(enqueue_for(&mut sim, "m3", "wrun_a").contains("RUN_EXPIRED"));
    assert_eq!(sim.runs.calls(), 2);
}

#[test]
fn missing_runs_and_holders_without_a_name_get_no_lease() {
    let mut sim = Sim::new();
    sim.runs.lease_ms.set(Some(60_000));
    enqueue_for(&mut sim, "m1", "wrun_missing");
    enqueue_for(&mut sim, "m2", "wrun_missing");
    assert_eq!(sim.runs.calls(), 2, "a missing run is asked every time");
    sim.runs.lease_ms.set(None);
    sim.runs.set("wrun_b", "active");
    enqueue_for(&mut sim, "m3", "wrun_b");
    enqueue_for(&mut sim, "m4", "wrun_b");
    assert_eq!(sim.runs.calls(), 4, "without leases every enqueue asks");
}

/// The shell's synchronous path (`driver::known_lifecycle`, the run DO asked by the class
/// between two calls) answers, stores and asks exactly what the asynchronous path
/// (`driver::ask`, then the transaction) does: enqueues naming active, terminal, expired
/// and missing runs, with and without leases, across lease expiries, a run expiring with
/// its revocation, and the queue's own expiry fence.
#[test]
fn enqueue_in_steps_is_enqueue_after_the_ask() {
    for leases in [None, Some(60_000)] {
        let (mut asked, mut steps) = (Sim::new(), Sim::new());
        for sim in [&mut asked, &mut steps] {
            sim.runs.lease_ms.set(leases);
            sim.runs.set("wrun_a", "active");
            sim.runs.set("wrun_t", "terminal");
            sim.runs.set("wrun_x", "expired");
        }
        let runs = ["wrun_a", "wrun_t", "wrun_x", "wrun_missing", "wrun_f"];
        for i in 0..60 {
            if i % 7 == 6 {
                asked.now += 25_000;
                steps.now += 25_000;
            }
            if i == 30 {
                // The run DO expires wrun_a and revokes the leases it granted.
                for sim in [&mut asked, &mut steps] {
                    sim.runs.set("wrun_a", "expired");
                    sim.cache.revoke("wrun_a");
                }
            }
            if i == 40 {
                // The queue's own fence for wrun_f (a retention cleanup's expireRun).
                for sim in [&mut asked, &mut steps] {
                    sim.rpc("expireRun", vec![Value::str("wrun_f")]).expect("expireRun");
                }
            }
            let run = runs[i % runs.len()];
            let args = vec![delayed(request(&format!("m{i}"), Some(run)), 3600.0)];
            let (a, b) = (asked.rpc("enqueue", args.clone()), steps.rpc_steps("enqueue", args));
            assert_eq!(a, b, "enqueue {i} naming {run} (leases {leases:?})");
        }
        assert_eq!(asked.store.data, steps.store.data, "leases {leases:?}");
        assert_eq!(asked.alarm, steps.alarm);
        assert_eq!(*asked.runs.calls.borrow(), *steps.runs.calls.borrow(), "the same asks (leases {leases:?})");
        assert_eq!(asked.cache.held(asked.now), steps.cache.held(steps.now));
    }
}

/// A revocation that reaches the holder while its grant is still on the way back (two
/// connections, no order between them): the grant must not be kept.
#[test]
fn a_revocation_overtaking_the_grant_wins() {
    struct Racing<'a> {
        cache: &'a LifecycleCache,
    }
    impl QueueHost for Racing<'_> {
        async fn lifecycle_status(&self, _run_id: &str) -> Result<Value, RpcError> {
            unreachable!("leases are supported")
        }
        async fn lifecycle_lease(&self, run_id: &str) -> Result<Option<Value>, RpcError> {
            // Granted as active, but the run DO expires the run and its revocation is
            // handled here before this answer arrives.
            assert!(!self.cache.revoke(run_id));
            Ok(Some(Value::object([("status", Value::str("active")), ("leaseUntil", Value::num((T0 + 60_000) as f64))])))
        }
        fn now(&self) -> i64 {
            T0
        }
    }
    let cache = LifecycleCache::default();
    let host = Racing { cache: &cache };
    assert!(!block_on(driver::run_is_expired(&host, &cache, "wrun_r")).unwrap());
    assert!(!cache.leased("wrun_r", T0), "the overtaken grant was dropped");
}

// ---- the claims' memo ----------------------------------------------------------------

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// The shell's claims remember the fence-compaction and 0.3 claim families between them
/// (`ClaimMemo`, every write watched by `MemoWatch`): over random sequences of enqueues,
/// expiries and their acknowledgements, clock steps past the fences' grace, claims,
/// deliveries and restarts, a queue with the memo answers, stores and arms exactly what the
/// core alone does, and most of its claims start knowing both families.
#[test]
fn claims_with_the_memo_are_the_claims_without_it() {
    const RUNS: [&str; 3] = ["wrun_a", "wrun_b", "wrun_c"];
    let (mut claims, mut known) = (0, 0);
    for seed in 1..=150u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let (mut plain, mut memo) = (Sim::new(), Sim::with_memo());
        // Now and then more than one conversion page (128) of them.
        let legacy = if seed % 10 == 0 { 130 } else { rng.below(3) };
        for sim in [&mut plain, &mut memo] {
            for run in RUNS {
                sim.runs.set(run, "active");
            }
            // Pre-upgrade data: 0.3 claims (nothing writes them any more).
            for i in 0..legacy {
                legacy_claim(sim, &format!("old{i}"), RUNS[i as usize % 3], T0 + 40_000 * (i % 3) as i64);
            }
        }
        for step in 0..120 {
            let op = rng.below(11);
            let outcomes: Vec<u64> = (0..8).map(|_| rng.below(3)).collect();
            let (id, run, delay) = (format!("m{}", rng.below(8)), RUNS[rng.below(3) as usize], [0.0, 0.0, 1.0, 5.0][rng.below(4) as usize]);
            let advance = [1, 1000, 30_000, FENCE_COMPACTION_GRACE_MS + 1][rng.below(4) as usize];
            let mut answers = Vec::new();
            for sim in [&mut plain, &mut memo] {
                let answer = match op {
                    0..=3 => format!("{:?}", sim.rpc("enqueue", vec![delayed(request(&id, Some(run)), delay)])),
                    4 => {
                        let expired = sim.rpc("expireRun", vec![Value::str(run), Value::num(1.0), no_options()]);
                        let receipt = expired.as_ref().ok().and_then(|v| v.get("receipt")).cloned();
                        let acked = receipt.map(|r| sim.rpc("acknowledgeExpireRun", vec![Value::str(run), r]));
                        format!("{expired:?} {acked:?}")
                    }
                    5 => {
                        sim.now += advance;
                        String::new()
                    }
                    6..=8 => {
                        sim.now = sim.now.max(sim.alarm.unwrap_or(sim.now));
                        if let Some(memo) = &sim.memo {
                            let m = memo.borrow();
                            claims += 1;
                            known += usize::from(m.legacy_empty && m.fence_first.is_some());
                        }
                        let claimed = sim.claim(&|_| true);
                        let settled: Vec<String> = claimed
                            .iter()
                            .flatten()
                            .zip(&outcomes)
                            .map(|(c, o)| {
                                let outcome = [
                                    ok200(),
                                    Some(Outcome::Response { status: 503, body: None }),
                                    Some(Outcome::Response { status: 500, body: None }),
                                ];
                                format!("{:?}", sim.deliver(c, outcome[*o as usize].clone()))
                            })
                            .collect();
                        format!("{claimed:?} {settled:?}")
                    }
                    9 => {
                        if let Some(m) = &sim.memo {
                            *m.borrow_mut() = ClaimMemo::default();
                        }
                        String::new()
                    }
                    _ => format!("{:?}", sim.rpc("stats", vec![])),
                };
                answers.push((answer, sim.alarm, sim.store.data.clone()));
            }
            assert_eq!(answers[0], answers[1], "seed {seed}, step {step}, op {op}");
        }
    }
    assert!(known * 2 > claims, "the memo answered {known} of {claims} claims");
}
