//! The retention lifecycle against the real Index, Stream and Queue cores on in-memory
//! stores, with an injected clock and failure injection.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use super::driver::{cleanup_now, run_and_record, CleanupHost};
use super::CleanupArgs;
use crate::config::Config;
use crate::facade::Target;
use crate::hook_shard::Family;
use crate::hop::{Args, Ctx};
use crate::store::alarm::{Alarm, AlarmChange};
use crate::store::{MemoryStore, Store};
use crate::wire::router::Binding;
use crate::wire::{RpcError, Value};

const T0: i64 = 1_767_323_045_000;
const RUN: &str = "wrun_R";

/// Every future here completes without waiting (the fake peers answer at once).
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

fn v(text: &str) -> Value {
    Value::parse(text).unwrap_or_else(|e| panic!("bad JSON {text}: {e:?}"))
}

/// One run DO plus every other instance it talks to.
struct World {
    now: Cell<i64>,
    config: Config,
    run: RefCell<MemoryStore>,
    run_alarm: Cell<Option<i64>>,
    peers: RefCell<BTreeMap<(String, String), MemoryStore>>,
    /// Calls to instances whose name starts with this fail.
    failing: RefCell<Option<String>>,
    calls: RefCell<Vec<String>>,
}

impl World {
    fn new() -> World {
        World {
            now: Cell::new(T0),
            config: Config::default(),
            run: RefCell::new(MemoryStore::new()),
            run_alarm: Cell::new(None),
            peers: RefCell::new(BTreeMap::new()),
            failing: RefCell::new(None),
            calls: RefCell::new(Vec::new()),
        }
    }

    fn tick(&self, ms: i64) -> i64 {
        self.now.set(self.now.get() + ms);
        self.now.get()
    }

    fn apply_change(&self, change: Option<AlarmChange>) {
        match change {
            Some(AlarmChange::Set(at)) => self.run_alarm.set(Some(at)),
            Some(AlarmChange::Delete) => self.run_alarm.set(None),
            None => {}
        }
    }

    /// An RPC on the run DO.
    fn run_call(&self, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        let now = self.tick(1);
        if method == "cleanupNow" {
            return block_on(cleanup_now(self, CleanupArgs::parse(Args(&args))?));
        }
        let ctx = Ctx { now, name: RUN, config: &self.config };
        let mut alarm = Alarm::unknown();
        let out = self.run.borrow_mut().transaction(|s| crate::run::call(s, &ctx, &mut alarm, method, Args(&args)));
        if out.is_ok() {
            self.apply_change(alarm.change());
        }
        out
    }

    fn apply(&self, data: &str, retention_ms: i64) -> Value {
        let req = format!(r#"{{"runId":"{RUN}","data":{data},"cleanup":{{"retentionMs":{retention_ms},"queueShards":2}}}}"#);
        let out = self.run_call("applyEvent", vec![v(&req)]).expect("applyEvent");
        assert_eq!(out.get("ok"), Some(&Value::Bool(true)), "{}", out.to_json().unwrap());
        out
    }

    /// An RPC on another DO.
    fn peer(&self, binding: Binding, name: &str, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        self.calls.borrow_mut().push(format!("{}/{name}.{method}", binding.key()));
        if self.failing.borrow().as_deref().is_some_and(|p| name.starts_with(p)) {
            return Err(RpcError::error(format!("injected failure at {name}")));
        }
        let ctx = Ctx { now: self.now.get(), name, config: &self.config };
        let mut peers = self.peers.borrow_mut();
        let store = peers.entry((binding.key().to_string(), name.to_string())).or_default();
        store.transaction(|s| match binding {
            Binding::Index => crate::index::call(s, &ctx, method, Args(&args)),
            Binding::Streams => crate::stream::call(s, &ctx, method, Args(&args)),
            Binding::Queue => crate::queue::call(s, &ctx, &mut Alarm::unknown(), method, Args(&args)),
            Binding::Runs | Binding::HookTokens | Binding::HookIds => Err(RpcError::error("not a peer here")),
        })
    }

    /// An RPC on an index instance: the archive is the `index` peer, the shards run their
    /// transactional methods on their own stores (keyed by env binding and name).
    fn index_peer(&self, target: &Target, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        if *target == Target::Archive {
            return self.peer(Binding::Index, "index", method, args);
        }
        let name = target.instance().to_string();
        self.calls.borrow_mut().push(format!("{}/{name}.{method}", target.env_binding()));
        if self.failing.borrow().as_deref().is_some_and(|p| name.starts_with(p)) {
            return Err(RpcError::error(format!("injected failure at {name}")));
        }
        let now = self.now.get();
        let ctx = Ctx { now, name: &name, config: &self.config };
        let mut peers = self.peers.borrow_mut();
        let store = peers.entry((target.env_binding().to_string(), name.clone())).or_default();
        store.transaction(|s| match target {
            Target::Catalog(_) => crate::catalog::call(s, &ctx, &mut Alarm::new(None), method, Args(&args)),
            Target::HookTokens(_) => crate::hook_shard::call(s, Family::Token, now, &mut Alarm::new(None), method, Args(&args)),
            Target::HookIds(_) => crate::hook_shard::call(s, Family::Id, now, &mut Alarm::new(None), method, Args(&args)),
            Target::Archive => Err(RpcError::error("unreachable")),
        })
    }

    fn index_keys(&self, target: &Target) -> Vec<String> {
        let peers = self.peers.borrow();
        peers
            .get(&(target.env_binding().to_string(), target.instance().to_string()))
            .map(|s| s.data.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn peer_keys(&self, binding: Binding, name: &str) -> Vec<String> {
        let peers = self.peers.borrow();
        peers.get(&(binding.key().to_string(), name.to_string())).map(|s| s.data.keys().cloned().collect()).unwrap_or_default()
    }

    fn run_keys(&self) -> Vec<String> {
        self.run.borrow().data.keys().cloned().collect()
    }

    fn status(&self) -> Value {
        self.run_call("getCleanupStatus", vec![]).unwrap()
    }

    /// Fire the run DO's alarm if it is due (advancing the clock to it).
    fn fire_alarm(&self) -> bool {
        let Some(at) = self.run_alarm.get() else { return false };
        if at > self.now.get() {
            self.now.set(at);
        }
        self.run_alarm.set(None);
        block_on(run_and_record(self)).expect("the alarm never fails");
        true
    }

    /// A terminal run that left a hook, a stream, a delayed queue message and index keys
    /// behind, as the client's call sequences would.
    fn populate(&self, retention_ms: i64) {
        let created = self.apply(r#"{"eventType":"run_created","specVersion":6,"eventData":{"deploymentId":"dep","workflowName":"wf","input":{"__type":"Uint8Array","data":"AQID"}}}"#, retention_ms);
        let created_ms = match created.get("run").and_then(|r| r.get("createdAt")) {
            Some(Value::Date(Some(ms))) => *ms,
            _ => panic!("no createdAt"),
        };
        let meta = Value::str(format!(r#"{{"runId":"{RUN}"}}"#));
        for key in [format!("run:wf:{created_ms:013}:{RUN}"), format!("runall:{created_ms:013}:{RUN}")] {
            self.peer(Binding::Index, "index", "putOwned", vec![Value::str(RUN), Value::str(key), meta.clone()]).unwrap();
        }
        self.apply(r#"{"eventType":"run_started","specVersion":6}"#, retention_ms);
        let owner = v(&format!(r#"{{"runId":"{RUN}","hookId":"h1"}}"#));
        self.peer(Binding::Index, "index", "reserveHookToken", vec![Value::str("tok"), owner.clone()]).unwrap();
        let hook = self.run_call("applyEvent", vec![v(&format!(r#"{{"runId":"{RUN}","data":{{"eventType":"hook_created","specVersion":6,"correlationId":"h1","eventData":{{"token":"tok"}}}},"tokenHolder":null,"cleanup":{{"retentionMs":{retention_ms},"queueShards":2}}}}"#))]).unwrap();
        assert!(hook.get("hookToIndex").is_some(), "{}", hook.to_json().unwrap());
        let serialized = Value::str(format!(r#"{{"runId":"{RUN}","hookId":"h1","token":"tok"}}"#));
        self.peer(Binding::Index, "index", "finalizeHookIndexes", vec![Value::str("tok"), Value::str("h1"), serialized, owner]).unwrap();
        self.apply(r#"{"eventType":"step_created","specVersion":6,"correlationId":"s1","eventData":{"stepName":"st","input":{"__type":"Uint8Array","data":"AQ=="}}}"#, retention_ms);
        self.peer(Binding::Streams, &format!("run-streams:{RUN}"), "registerStream", vec![Value::str(RUN), Value::str("out")]).unwrap();
        self.peer(Binding::Streams, "stream:out", "writeChunk", vec![Value::str(RUN), Value::Bytes(vec![1, 2, 3])]).unwrap();
        let enqueue = v(&format!(
            r#"{{"messageId":"msg_1","queueName":"__wkf_workflow_wf","pathname":"flow","body":"{{}}","runId":"{RUN}","delaySeconds":3600,"config":{{"targetBaseUrl":"http://127.0.0.1:1","queueShards":2}}}}"#
        ));
        let queued = self.peer(Binding::Queue, "q:1", "enqueue", vec![enqueue]).unwrap();
        assert_eq!(queued.get("ok"), Some(&Value::Bool(true)), "{}", queued.to_json().unwrap());
        self.apply(
            r#"{"eventType":"run_completed","specVersion":6,"eventData":{"output":{"__type":"Uint8Array","data":"Aw=="}}}"#,
            retention_ms,
        );
    }
}

impl CleanupHost for World {
    async fn transact<T>(&self, f: impl FnOnce(&mut dyn Store, i64, &mut Alarm) -> Result<T, RpcError>) -> Result<T, RpcError> {
        let now = self.tick(1);
        let mut alarm = Alarm::unknown();
        let out = self.run.borrow_mut().transaction(|s| f(s, now, &mut alarm))?;
        self.apply_change(alarm.change());
        Ok(out)
    }

    async fn call(&self, binding: Binding, name: &str, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        self.peer(binding, name, method, args)
    }

    async fn call_index(&self, target: &Target, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        self.index_peer(target, method, args)
    }
}

fn member<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key)
}

fn num(v: &Value, key: &str) -> f64 {
    member(v, key).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

fn phase(v: &Value) -> &str {
    member(v, "phase").and_then(Value::as_str).unwrap_or("")
}

#[test]
fn terminal_run_is_retained_then_cleaned_everywhere() {
    let w = World::new();
    w.populate(1000);
    let record = w.status();
    assert_eq!(phase(&record), "retained");
    let due = match member(&record, "dueAt") {
        Some(Value::Date(Some(ms))) => *ms,
        _ => panic!(),
    };
    assert_eq!(w.run_alarm.get(), Some(due));
    // Readable until due.
    assert_eq!(member(&w.run_call("getRun", vec![]).unwrap(), "ok"), Some(&Value::Bool(true)));

    // The alarm runs the phases; a payload batch at a time.
    let mut alarms = 0;
    while w.fire_alarm() {
        alarms += 1;
        assert!(alarms < 10, "cleanup does not finish");
    }
    let record = w.status();
    assert_eq!(phase(&record), "tombstoned", "{}", record.to_json().unwrap());
    assert_eq!(num(&record, "deletedStreams"), 1.0);
    assert_eq!(num(&record, "deletedQueueMessages"), 1.0);
    assert!(num(&record, "deletedPayloadKeys") > 10.0);
    assert_eq!(num(&record, "attempts"), 0.0);
    assert!(member(&record, "tombstonedAt").is_some());
    assert_eq!(w.run_alarm.get(), None);

    // Nothing of the run is left but the two retention keys.
    assert_eq!(w.run_keys(), ["retention:cleanup", "retention:tombstone"]);
    assert_eq!(w.peer_keys(Binding::Index, "index"), [format!("expired:{RUN}")]);
    assert_eq!(w.peer_keys(Binding::Streams, &format!("run-streams:{RUN}")), ["registry:expired", "registry:owner"]);
    assert_eq!(w.peer_keys(Binding::Streams, "stream:out"), ["meta"]);
    for shard in ["q:0", "q:1"] {
        let stats = w.peer(Binding::Queue, shard, "stats", vec![]).unwrap();
        assert_eq!((num(&stats, "pending"), num(&stats, "inflight"), num(&stats, "deadLetters")), (0.0, 0.0, 0.0), "{shard}");
    }

    // Reads and writes are fenced; late writes elsewhere cannot resurrect anything.
    let read = w.run_call("getRun", vec![]).unwrap();
    assert_eq!(member(&read, "code"), Some(&Value::str("RUN_EXPIRED")));
    assert!(member(&read, "tombstone").is_some());
    let write =
        w.run_call("applyEvent", vec![v(&format!(r#"{{"runId":"{RUN}","data":{{"eventType":"run_started","specVersion":6}}}}"#))]).unwrap();
    assert_eq!(member(&write, "code"), Some(&Value::str("RUN_EXPIRED")));
    let stored = w.peer(Binding::Index, "index", "putOwned", vec![Value::str(RUN), Value::str("run:wf:0:x"), Value::str("{}")]).unwrap();
    assert_eq!(member(&stored, "stored"), Some(&Value::Bool(false)));
    let enqueue = v(&format!(
        r#"{{"messageId":"msg_2","queueName":"q","pathname":"flow","body":"{{}}","runId":"{RUN}","config":{{"targetBaseUrl":"http://127.0.0.1:1","queueShards":2}}}}"#
    ));
    let refused = w.peer(Binding::Queue, "q:0", "enqueue", vec![enqueue]).unwrap();
    assert_eq!(member(&refused, "code"), Some(&Value::str("RUN_EXPIRED")));
    assert!(w.peer(Binding::Streams, "stream:out", "writeChunk", vec![Value::str(RUN), Value::Bytes(vec![9])]).is_err());

    // The tombstone holds no payload.
    let tombstone = w.run.borrow().text("retention:tombstone").unwrap().to_string();
    assert!(!tombstone.contains("AQID") && !tombstone.contains("Aw=="), "{tombstone}");
}

#[test]
fn reads_are_fenced_once_due_even_before_the_alarm() {
    let w = World::new();
    w.populate(1000);
    w.tick(2000);
    let read = w.run_call("getRun", vec![]).unwrap();
    assert_eq!(member(&read, "code"), Some(&Value::str("RUN_EXPIRED")));
    // The record has not moved: only time fenced it.
    assert_eq!(phase(&w.status()), "retained");
}

#[test]
fn payload_is_deleted_in_batches_of_256_one_alarm_each() {
    let w = World::new();
    w.populate(1000);
    // Bulk up the payload: 600 extra keys (as if many events had been written).
    for i in 0..600 {
        w.run.borrow_mut().put(&format!("event:bulk{i:04}"), "{}").unwrap();
    }
    let total_before = w.run_keys().len() - 1; // all but retention:cleanup
    let mut payload_alarms = 0;
    while w.fire_alarm() {
        let record = w.status();
        if phase(&record) == "payload" {
            payload_alarms += 1;
            assert_eq!(num(&record, "deletedPayloadKeys"), (256 * payload_alarms).min(total_before) as f64);
            // The next batch is one millisecond away.
            assert!(w.run_alarm.get().is_some_and(|at| at <= w.now.get() + 1));
        }
        assert!(payload_alarms < 10);
    }
    let record = w.status();
    assert_eq!(phase(&record), "tombstoned");
    assert_eq!(num(&record, "deletedPayloadKeys"), total_before as f64);
    assert_eq!(payload_alarms, total_before.div_ceil(256));
}

#[test]
fn failed_phase_is_recorded_with_backoff_and_resumed() {
    let w = World::new();
    w.populate(1000);
    *w.failing.borrow_mut() = Some("q:".into());
    let mut delays = Vec::new();
    for _ in 0..3 {
        w.fire_alarm();
        let record = w.status();
        assert_eq!(phase(&record), "queues");
        assert_eq!(member(&record, "lastError"), Some(&Value::str("injected failure at q:0")));
        let last = match member(&record, "lastAttemptAt") {
            Some(Value::Date(Some(ms))) => *ms,
            _ => panic!(),
        };
        delays.push(w.run_alarm.get().unwrap() - last);
    }
    assert_eq!(delays, [1000, 2000, 4000]);
    assert_eq!(num(&w.status(), "attempts"), 3.0);
    // Index and streams were not redone: each phase persisted before the next.
    let index_calls = w.calls.borrow().iter().filter(|c| c.ends_with("index.expireRun")).count();
    assert_eq!(index_calls, 1);

    *w.failing.borrow_mut() = None;
    while w.fire_alarm() {}
    let record = w.status();
    assert_eq!(phase(&record), "tombstoned");
    assert_eq!(num(&record, "attempts"), 0.0);
    assert!(member(&record, "lastError").is_none());
    assert_eq!(num(&record, "deletedQueueMessages"), 1.0);
}

#[test]
fn backoff_is_capped_at_an_hour() {
    let w = World::new();
    w.populate(1000);
    *w.failing.borrow_mut() = Some("index".into());
    for _ in 0..15 {
        w.fire_alarm();
    }
    let record = w.status();
    let last = match member(&record, "lastAttemptAt") {
        Some(Value::Date(Some(ms))) => *ms,
        _ => panic!(),
    };
    assert_eq!(num(&record, "attempts"), 15.0);
    assert_eq!(w.run_alarm.get().unwrap() - last, 3_600_000);
}

#[test]
fn a_stream_owned_by_another_run_blocks_the_streams_phase() {
    let w = World::new();
    w.populate(1000);
    // Another run owns "shared"; this run's registry lists it anyway.
    w.peer(Binding::Streams, "stream:shared", "writeChunk", vec![Value::str("wrun_other"), Value::Bytes(vec![1])]).unwrap();
    w.peer(Binding::Streams, &format!("run-streams:{RUN}"), "registerStream", vec![Value::str(RUN), Value::str("shared")]).unwrap();
    w.fire_alarm();
    let record = w.status();
    assert_eq!(phase(&record), "streams");
    assert_eq!(member(&record, "lastError"), Some(&Value::str("Stream is owned by workflow run \"wrun_other\"")));
    // Reads are fenced by time all the same.
    assert_eq!(member(&w.run_call("getRun", vec![]).unwrap(), "code"), Some(&Value::str("RUN_EXPIRED")));
}

#[test]
fn schedule_cleanup_edge_cases() {
    let args = |ms: &str| vec![v(&format!(r#"{{"retentionMs":{ms},"queueShards":3}}"#))];
    let w = World::new();
    // No run at all.
    assert_eq!(w.run_call("scheduleCleanup", args("1000")).unwrap(), Value::Null);
    w.apply(r#"{"eventType":"run_created","specVersion":6,"eventData":{"deploymentId":"dep","workflowName":"wf","input":null}}"#, 0);
    // Not terminal.
    assert_eq!(w.run_call("scheduleCleanup", args("1000")).unwrap(), Value::Null);
    w.apply(r#"{"eventType":"run_cancelled","specVersion":6}"#, 0);
    assert_eq!(w.status(), Value::Null, "retention disabled: no record");
    // retentionMs 0: the current record (none).
    assert_eq!(w.run_call("scheduleCleanup", args("0")).unwrap(), Value::Null);
    let record = w.run_call("scheduleCleanup", args("1000")).unwrap();
    assert_eq!(phase(&record), "retained");
    assert_eq!(num(&record, "queueShards"), 3.0);
    let due = match member(&record, "dueAt") {
        Some(Value::Date(Some(ms))) => *ms,
        _ => panic!(),
    };
    assert_eq!(w.run_alarm.get(), Some(due));
    let run = w.run_call("getRun", vec![]).unwrap();
    assert_eq!(run.get("value").and_then(|r| r.get("expiredAt")), Some(&Value::date(due)));
    // Existing record: unchanged, whatever the arguments.
    assert_eq!(w.run_call("scheduleCleanup", args("5")).unwrap(), record);
    assert_eq!(w.run_call("scheduleCleanup", args("0")).unwrap(), record);
    // rearm: max(now + 1, dueAt).
    assert_eq!(w.run_call("rearmCleanup", vec![]).unwrap(), record);
    assert_eq!(w.run_alarm.get(), Some(due));
    w.tick(5000);
    w.run_call("rearmCleanup", vec![]).unwrap();
    assert_eq!(w.run_alarm.get(), Some(w.now.get() + 1));
    // A missing argument fails like the reference's member read.
    assert_eq!(
        w.run_call("scheduleCleanup", vec![]).unwrap_err(),
        RpcError::type_error("Cannot read properties of undefined (reading 'retentionMs')")
    );
}

#[test]
fn schedule_with_a_past_due_time_arms_now_plus_one() {
    let w = World::new();
    w.apply(r#"{"eventType":"run_created","specVersion":6,"eventData":{"deploymentId":"dep","workflowName":"wf","input":null}}"#, 0);
    w.apply(r#"{"eventType":"run_cancelled","specVersion":6}"#, 0);
    w.tick(10_000);
    let record = w.run_call("scheduleCleanup", vec![v(r#"{"retentionMs":5}"#)]).unwrap();
    assert!(member(&record, "queueShards").is_none(), "no default queueShards here");
    assert_eq!(w.run_alarm.get(), Some(w.now.get() + 1));
}

#[test]
fn cleanup_now_runs_the_loop_before_answering() {
    let w = World::new();
    w.populate(0);
    assert_eq!(w.status(), Value::Null);
    let record = w.run_call("cleanupNow", vec![v(r#"{"retentionMs":1,"queueShards":2}"#)]).unwrap();
    // The first payload batch ran; the alarm finishes.
    assert_eq!(phase(&record), "payload", "{}", record.to_json().unwrap());
    assert!(num(&record, "deletedPayloadKeys") > 0.0);
    assert_eq!(num(&record, "deletedStreams"), 1.0);
    assert_eq!(num(&record, "deletedQueueMessages"), 1.0);
    while w.fire_alarm() {}
    let done = w.status();
    assert_eq!(phase(&done), "tombstoned");
    // On a tombstoned record: unchanged.
    assert_eq!(w.run_call("cleanupNow", vec![v(r#"{"retentionMs":1,"queueShards":2}"#)]).unwrap(), done);
    assert_eq!(w.run_call("rearmCleanup", vec![]).unwrap(), done);
    assert_eq!(w.run_alarm.get(), None);
}

#[test]
fn cleanup_now_moves_a_future_due_time_to_now() {
    let w = World::new();
    w.populate(3_600_000);
    let record = w.run_call("cleanupNow", vec![v(r#"{"retentionMs":3600000,"queueShards":2}"#)]).unwrap();
    assert_eq!(phase(&record), "payload");
    let due = match member(&record, "dueAt") {
        Some(Value::Date(Some(ms))) => *ms,
        _ => panic!(),
    };
    assert!(due < T0 + 3_600_000);
}

#[test]
fn cleanup_now_on_a_live_run_does_nothing() {
    let w = World::new();
    w.apply(r#"{"eventType":"run_created","specVersion":6,"eventData":{"deploymentId":"dep","workflowName":"wf","input":null}}"#, 0);
    assert_eq!(w.run_call("cleanupNow", vec![v(r#"{"retentionMs":2000,"queueShards":1}"#)]).unwrap(), Value::Null);
    assert_eq!(w.status(), Value::Null);
    assert_eq!(w.run_call("rearmCleanup", vec![]).unwrap(), Value::Null);
    assert_eq!(w.run_alarm.get(), None);
}

/// `cleanupNow` with `queueShards: 1e9` (capped at 1024 shards) visits at most
/// QUEUE_SHARDS_PER_STEP shards in the call itself; the alarm continues in steps of the
/// same size, and the finished record is the one an unpaged run gives.
#[test]
fn cleanup_now_visits_queue_shards_in_bounded_steps() {
    use super::phases::{MAX_QUEUE_SHARDS, QUEUE_SHARDS_PER_STEP};
    let queue_calls = |w: &World| w.calls.borrow().iter().filter(|c| c.contains(".expireRun") && c.contains("/q:")).count();
    let finished = |shards: &str| {
        let w = World::new();
        w.populate(0);
        let far = v(&format!(
            r#"{{"messageId":"msg_far","queueName":"q","pathname":"flow","body":"{{}}","runId":"{RUN}","delaySeconds":60,"config":{{"targetBaseUrl":"http://127.0.0.1:1","queueShards":1024}}}}"#
        ));
        w.peer(Binding::Queue, "q:700", "enqueue", vec![far]).unwrap();
        w.calls.borrow_mut().clear();
        let record = w.run_call("cleanupNow", vec![v(&format!(r#"{{"retentionMs":1,"queueShards":{shards}}}"#))]).unwrap();
        let first_call = queue_calls(&w);
        let mut steps = 1;
        while w.fire_alarm() {
            steps += 1;
            assert!(queue_calls(&w) <= steps * QUEUE_SHARDS_PER_STEP as usize);
            assert!(steps < 200);
        }
        assert!(!w.run_keys().iter().any(|k| k.as_str() == crate::run::keys::RETENTION_QUEUES_PROGRESS));
        (record, first_call, queue_calls(&w), w.status())
    };
    let (record, first_call, total, done) = finished("1e9");
    assert_eq!(first_call, QUEUE_SHARDS_PER_STEP as usize);
    assert_eq!(phase(&record), "queues", "{}", record.to_json().unwrap());
    assert_eq!(total, MAX_QUEUE_SHARDS as usize);
    assert_eq!(phase(&done), "tombstoned");
    assert_eq!(num(&done, "deletedQueueMessages"), 2.0);
    // The same run cleaned with a shard count that fits one step.
    let (_, first_call, total, small) = finished("2");
    assert_eq!((first_call, total), (2, 2));
    assert_eq!(num(&small, "deletedQueueMessages"), 1.0);
    assert_eq!(num(&done, "deletedPayloadKeys"), num(&small, "deletedPayloadKeys"));
    assert_eq!(num(&done, "deletedStreams"), num(&small, "deletedStreams"));
}

#[test]
fn index_phase_expires_the_shards_and_the_archive() {
    let w = World::new();
    w.populate(1000);
    // The same run as the facade would have indexed it after the upgrade: its catalog keys
    // and its hook claims on the shards.
    let record = w.status();
    let created = match member(&record, "createdAt") {
        Some(Value::Date(Some(ms))) => *ms,
        _ => panic!("no createdAt"),
    };
    let catalog = Target::Catalog(crate::shard::run_catalog(RUN));
    let meta = Value::str(format!(r#"{{"runId":"{RUN}"}}"#));
    for key in [format!("run:wf:{created:013}:{RUN}"), format!("runall:{created:013}:{RUN}")] {
        w.index_peer(&catalog, "upsertKey", vec![Value::str(RUN), Value::str(key), meta.clone()]).unwrap();
    }
    let owner = v(&format!(r#"{{"runId":"{RUN}","hookId":"h1"}}"#));
    let tokens = Target::HookTokens(crate::shard::hook_token("tok"));
    let ids = Target::HookIds(crate::shard::hook_id("h1"));
    for (target, key) in [(&tokens, "tok"), (&ids, "h1")] {
        let out = w.index_peer(target, "reserve", vec![Value::str(key), owner.clone(), Value::str("c1")]).unwrap();
        assert_eq!(member(&out, "claimed"), Some(&Value::Bool(true)));
        assert!(!w.index_keys(target).is_empty());
    }
    assert_eq!(w.index_keys(&catalog).len(), 2);
    while w.fire_alarm() {}
    assert_eq!(phase(&w.status()), "tombstoned");
    let left = w.index_keys(&catalog);
    assert!(left.contains(&format!("expired:{RUN}")), "{left:?}");
    assert!(!left.iter().any(|k| k.starts_with("run:") || k.starts_with("runall:")), "{left:?}");
    assert_eq!(w.index_keys(&tokens), Vec::<String>::new());
    assert_eq!(w.index_keys(&ids), Vec::<String>::new());
    assert_eq!(w.peer_keys(Binding::Index, "index"), [format!("expired:{RUN}")], "the archive too");
    // A late facade upsert is refused behind the catalog fence.
    let late = w.index_peer(&catalog, "upsertKey", vec![Value::str(RUN), Value::str("runall:1:x"), meta]).unwrap();
    assert_eq!(member(&late, "stored"), Some(&Value::Bool(false)));
}
