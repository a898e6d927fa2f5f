//! The retention lifecycle against the real Index, Stream and Queue cores on in-memory
//! stores, with an injected clock and failure injection.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use super::driver::{cleanup_now, enforce_retention, run_page, CleanupHost};
use super::CleanupArgs;
use crate::config::Config;
use crate::protocol::calls::Target;
use crate::protocol::hooks::Family;
use crate::protocol::hop::{Args, Ctx};
use crate::store::alarm::{Alarm, AlarmChange};
use crate::store::{MemoryStore, Store};
use crate::testing::block_on;
use crate::wire::router::Binding;
use crate::wire::{RpcError, Value};

const T0: i64 = 1_767_323_045_000;
const RUN: &str = "wrun_R";

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
    /// Answer queue expiry in the 0.4 shapes (`done`, `receipt`, `acknowledgeExpireRun`),
    /// acknowledging receipts as this says.
    queue_v04: Cell<Option<bool>>,
    /// Answer stream expiry in the 0.4 shapes; the first this-many `expireStream` calls
    /// answer `done: false` (a stream bigger than a page).
    stream_v04: Cell<Option<u32>>,
    registered: Cell<usize>,
    /// Lease revocations the shell would send after each commit (see `crate::run::lease`).
    revoked: RefCell<Vec<crate::run::lease::Revocation>>,
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
            queue_v04: Cell::new(None),
            stream_v04: Cell::new(None),
            registered: Cell::new(0),
            revoked: RefCell::new(Vec::new()),
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
        let out = self.run.borrow_mut().transaction(|s| crate::run::call_watched(s, &ctx, &mut alarm, method, Args(&args)));
        let (value, owed) = out?;
        self.apply_change(alarm.change());
        self.revoked.borrow_mut().extend(owed);
        Ok(crate::wire::value::expand_stored(value))
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
        if let (Binding::Queue, Some(ack)) = (binding, self.queue_v04.get()) {
            if method == "acknowledgeExpireRun" {
                return Ok(Value::object([("acknowledged", Value::Bool(ack))]));
            }
        }
        let v04_expiry = binding == Binding::Queue && method == "expireRun" && self.queue_v04.get().is_some();
        if binding == Binding::Streams && method == "finalizeRegistry" && self.stream_v04.get().is_some() {
            // 0.4: only the completed names are dropped; nothing completed, nothing done.
            let completed = args.get(1).and_then(Value::as_array).map_or(0, Vec::len);
            if completed < self.registered.get() {
                return Ok(Value::object([("deleted", Value::num(0)), ("done", Value::Bool(false))]));
            }
        }
        let ctx = Ctx { now: self.now.get(), name, config: &self.config };
        let mut peers = self.peers.borrow_mut();
        let store = peers.entry((binding.key().to_string(), name.to_string())).or_default();
        let out = store.transaction(|s| match binding {
            Binding::Index => crate::index::call(s, &ctx, method, Args(&args)),
            Binding::Streams => crate::stream::call(s, &ctx, method, Args(&args)),
            Binding::Queue => crate::queue::call(s, &ctx, &mut Alarm::unknown(), method, Args(&args)),
            Binding::Runs | Binding::HookTokens | Binding::HookIds => Err(RpcError::error("not a peer here")),
        })?;
        if let (Binding::Streams, Some(pending)) = (binding, self.stream_v04.get()) {
            match method {
                "expireRegistry" => self.registered.set(out.get("streams").and_then(Value::as_array).map_or(0, Vec::len)),
                "expireStream" => {
                    self.stream_v04.set(Some(pending.saturating_sub(1)));
                    let chunks = out.get("chunks").cloned().unwrap_or(Value::num(0));
                    let fields = [
                        ("deleted", Value::Bool(pending == 0)),
                        ("chunks", chunks),
                        ("bytes", Value::num(1)),
                        ("done", Value::Bool(pending == 0)),
                    ];
                    return Ok(Value::object(fields));
                }
                "finalizeRegistry" => {
                    let completed = args.get(1).and_then(Value::as_array).map_or(0, Vec::len);
                    return Ok(Value::object([("deleted", Value::num(completed as f64)), ("done", Value::Bool(true))]));
                }
                _ => {}
            }
        }
        if v04_expiry {
            let deleted = out.get("deleted").cloned().unwrap_or(Value::Null);
            let receipt = Value::object([("expiredAt", args[1].clone()), ("deleted", deleted.clone())]);
            return Ok(Value::object([("deleted", deleted), ("done", Value::Bool(true)), ("receipt", receipt)]));
        }
        Ok(out)
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
        block_on(run_page(self)).expect("the alarm never fails");
        true
    }

    /// Fire alarms until `stop` holds for the cleanup status (at most `max` alarms).
    fn fire_until(&self, max: usize, stop: impl Fn(&Value) -> bool) {
        for _ in 0..max {
            if stop(&self.status()) {
                return;
            }
            assert!(self.fire_alarm(), "no alarm left: {}", self.status().to_json().unwrap());
        }
        panic!("not reached after {max} alarms: {}", self.status().to_json().unwrap());
    }

    /// Fire alarms while the terminal cleanup is pending.
    fn finish_terminal_cleanup(&self) {
        let mut n = 0;
        while self.run.borrow().data.contains_key(crate::run::keys::TERMINAL_CLEANUP) {
            assert!(self.fire_alarm());
            n += 1;
            assert!(n < 20);
        }
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
        let done = self.apply(
            r#"{"eventType":"run_completed","specVersion":6,"eventData":{"output":{"__type":"Uint8Array","data":"Aw=="}}}"#,
            retention_ms,
        );
        // The 0.3 client releases what the terminal transition reports.
        assert_eq!(done.get("releasedHooks"), Some(&v(r#"[{"hookId":"h1","token":"tok"}]"#)));
        let owner = v(&format!(r#"{{"runId":"{RUN}","hookId":"h1"}}"#));
        self.peer(Binding::Index, "index", "deleteHookIndexes", vec![Value::str("tok"), Value::str("h1"), owner]).unwrap();
    }
}

impl CleanupHost for World {
    async fn transact<T>(&self, f: impl FnOnce(&mut dyn Store, i64, &mut Alarm) -> Result<T, RpcError>) -> Result<T, RpcError> {
        let now = self.tick(1);
        let mut alarm = Alarm::unknown();
        // As the shell's host: the transaction runs under a lease watch.
        let (out, owed) = self.run.borrow_mut().in_transaction(|s| {
            let mut watch = crate::run::lease::Watch::new(s, now);
            let out = f(&mut watch, now, &mut alarm)?;
            Ok::<_, RpcError>((out, watch.finish()?))
        })?;
        self.apply_change(alarm.change());
        self.revoked.borrow_mut().extend(owed);
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

fn date(v: &Value, key: &str) -> i64 {
    match member(v, key) {
        Some(Value::Date(Some(ms))) => *ms,
        other => panic!("no date {key}: {other:?}"),
    }
}

fn hook_created(w: &World, hook_id: &str, token: &str, claim: Option<&str>) -> Value {
    let claim = claim.map(|c| format!(r#","hookClaimId":"{c}""#)).unwrap_or_default();
    let req = format!(
        r#"{{"runId":"{RUN}","data":{{"eventType":"hook_created","specVersion":6,"correlationId":"{hook_id}","eventData":{{"token":"{token}"}}}},"tokenHolder":null{claim},"cleanup":{{"retentionMs":0,"queueShards":1}}}}"#
    );
    w.run_call("applyEvent", vec![v(&req)]).unwrap()
}

fn raw_apply(w: &World, data: &str, retention_ms: i64) -> Value {
    let req = format!(r#"{{"runId":"{RUN}","data":{data},"cleanup":{{"retentionMs":{retention_ms},"queueShards":1}}}}"#);
    w.run_call("applyEvent", vec![v(&req)]).unwrap()
}

const CREATED: &str = r#"{"eventType":"run_created","specVersion":6,"eventData":{"deploymentId":"dep","workflowName":"wf","input":null}}"#;
const STARTED: &str = r#"{"eventType":"run_started","specVersion":6}"#;
const COMPLETED: &str = r#"{"eventType":"run_completed","specVersion":6,"eventData":{"output":null}}"#;
const FAILED: &str = r#"{"eventType":"run_failed","specVersion":6,"eventData":{"error":"boom"}}"#;

#[test]
fn terminal_run_is_retained_then_cleaned_everywhere() {
    let w = World::new();
    w.populate(1000);
    let record = w.status();
    assert_eq!(phase(&record), "retained");
    assert_eq!(member(&record, "reason"), Some(&Value::str("terminal-retention")));
    assert_eq!(member(&record, "status"), Some(&Value::str("completed")));
    assert_eq!(num(&record, "generation"), 0.0);
    // The terminal cleanup runs first (now + 1), then re-arms the retention deadline.
    assert!(w.run_alarm.get().is_some_and(|at| at < w.now.get() + 1));
    w.finish_terminal_cleanup();
    let due = date(&record, "dueAt");
    assert_eq!(w.run_alarm.get(), Some(due));
    // Readable until due.
    assert_eq!(member(&w.run_call("getRun", vec![]).unwrap(), "ok"), Some(&Value::Bool(true)));

    // One page per alarm.
    let mut alarms = 0;
    while w.fire_alarm() {
        alarms += 1;
        assert!(alarms < 20, "cleanup does not finish");
    }
    let record = w.status();
    assert_eq!(phase(&record), "tombstoned", "{}", record.to_json().unwrap());
    // retained→index, index→streams, streams→queues, 2 × (expire, ack), →payload, payload, tombstoned.
    assert_eq!(num(&record, "generation"), 10.0);
    assert_eq!(num(&record, "deletedStreams"), 1.0);
    assert_eq!(num(&record, "deletedQueueMessages"), 1.0);
    assert!(num(&record, "deletedPayloadKeys") > 10.0);
    assert_eq!(num(&record, "attempts"), 0.0);
    assert!(member(&record, "tombstonedAt").is_some());
    assert_eq!(w.run_alarm.get(), None);

    // Nothing of the run is left but the record and the tombstone (which embeds it).
    assert_eq!(w.run_keys(), ["retention:cleanup", "retention:tombstone"]);
    assert_eq!(w.peer_keys(Binding::Index, "index"), [format!("expired:{RUN}")]);
    assert_eq!(w.peer_keys(Binding::Streams, &format!("run-streams:{RUN}")), ["registry:expired", "registry:owner"]);
    assert_eq!(w.peer_keys(Binding::Streams, "stream:out"), ["meta"]);
    for shard in ["q:0", "q:1"] {
        let stats = w.peer(Binding::Queue, shard, "stats", vec![]).unwrap();
        assert_eq!((num(&stats, "pending"), num(&stats, "inflight"), num(&stats, "deadLetters")), (0.0, 0.0, 0.0), "{shard}");
    }

    // Reads and writes are fenced; the tombstone carries `status` and the final record.
    let read = w.run_call("getRun", vec![]).unwrap();
    assert_eq!(member(&read, "code"), Some(&Value::str("RUN_EXPIRED")));
    let tombstone = member(&read, "tombstone").unwrap();
    assert_eq!(member(tombstone, "status"), Some(&Value::str("completed")));
    assert_eq!(member(tombstone, "cleanup"), Some(&record));
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
    let tombstone = w.run.borrow().text("retention:tombstone").unwrap().to_string();
    assert!(!tombstone.contains("AQID") && !tombstone.contains("Aw=="), "{tombstone}");
    // The admin methods answer with the kept record (0.3's answers).
    assert_eq!(w.run_call("scheduleCleanup", vec![v(r#"{"retentionMs":5,"queueShards":1}"#)]).unwrap(), record);
    assert_eq!(w.run_call("rearmCleanup", vec![]).unwrap(), record);
    assert_eq!(w.run_alarm.get(), None);
}

#[test]
fn reads_are_fenced_once_due_even_before_the_alarm() {
    let w = World::new();
    w.populate(1000);
    w.tick(2000);
    let read = w.run_call("getRun", vec![]).unwrap();
    assert_eq!(member(&read, "code"), Some(&Value::str("RUN_EXPIRED")));
    // The synthesized tombstone: tombstoned at the due time, with the record.
    let tombstone = member(&read, "tombstone").unwrap();
    assert_eq!(member(tombstone, "tombstonedAt"), member(tombstone, "expiredAt"));
    assert_eq!(member(tombstone, "cleanup").map(phase), Some("tombstoned"));
    // The record has not moved: only time fenced it.
    assert_eq!(phase(&w.status()), "retained");
}

#[test]
fn payload_is_deleted_in_pages_of_128_one_alarm_each() {
    let w = World::new();
    w.populate(1000);
    w.finish_terminal_cleanup();
    w.fire_until(20, |r| phase(r) == "payload");
    for i in 0..300 {
        w.run.borrow_mut().put(&format!("event:bulk{i:04}"), "{}").unwrap();
    }
    let total_before = w.run_keys().len() - 1; // all but retention:cleanup
    let mut pages = 0;
    while w.fire_alarm() {
        pages += 1;
        let record = w.status();
        if phase(&record) == "payload" {
            assert_eq!(num(&record, "deletedPayloadKeys"), (128 * pages).min(total_before) as f64);
            assert!(w.run_alarm.get().is_some_and(|at| at <= w.now.get() + 1));
        }
        assert!(pages < 10);
    }
    let record = w.status();
    assert_eq!(phase(&record), "tombstoned");
    assert_eq!(num(&record, "deletedPayloadKeys"), total_before as f64);
    assert_eq!(pages, total_before.div_ceil(128) + 1, "one more page finds nothing and tombstones");
}

#[test]
fn failed_page_is_recorded_with_backoff_and_resumed() {
    let w = World::new();
    w.populate(1000);
    w.finish_terminal_cleanup();
    *w.failing.borrow_mut() = Some("q:".into());
    w.fire_until(10, |r| member(r, "lastError").is_some());
    let mut delays = Vec::new();
    for i in 0..3 {
        if i > 0 {
            w.fire_alarm();
        }
        let record = w.status();
        assert_eq!(phase(&record), "queues");
        assert_eq!(member(&record, "lastError"), Some(&Value::str("injected failure at q:0")));
        delays.push(w.run_alarm.get().unwrap() - date(&record, "lastAttemptAt"));
    }
    assert_eq!(delays, [1000, 2000, 4000]);
    assert_eq!(num(&w.status(), "attempts"), 3.0);
    // Index and streams were not redone: each page persisted before the next.
    let index_calls = w.calls.borrow().iter().filter(|c| c.ends_with("index.expireRun")).count();
    assert_eq!(index_calls, 1);
    // A late failure report for a generation that moved on is ignored.
    let stale = super::phases::Expect { phase: super::Phase::Queues, generation: 0.0 };
    let before = w.status();
    block_on(w.transact(|s, now, alarm| super::phases::record_failure(s, now, &stale, "late", alarm))).unwrap();
    assert_eq!(w.status(), before);

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
    w.finish_terminal_cleanup();
    *w.failing.borrow_mut() = Some("index".into());
    w.fire_until(30, |r| num(r, "attempts") == 15.0);
    let record = w.status();
    assert_eq!(w.run_alarm.get().unwrap() - date(&record, "lastAttemptAt"), 3_600_000);
}

#[test]
fn a_stream_owned_by_another_run_blocks_the_streams_phase() {
    let w = World::new();
    w.populate(1000);
    w.peer(Binding::Streams, "stream:shared", "writeChunk", vec![Value::str("wrun_other"), Value::Bytes(vec![1])]).unwrap();
    w.peer(Binding::Streams, &format!("run-streams:{RUN}"), "registerStream", vec![Value::str(RUN), Value::str("shared")]).unwrap();
    w.finish_terminal_cleanup();
    w.fire_until(10, |r| member(r, "lastError").is_some());
    let record = w.status();
    assert_eq!(phase(&record), "streams");
    assert_eq!(member(&record, "lastError"), Some(&Value::str("Stream is owned by workflow run \"wrun_other\"")));
    assert_eq!(member(&w.run_call("getRun", vec![]).unwrap(), "code"), Some(&Value::str("RUN_EXPIRED")));
}

#[test]
fn schedule_cleanup_edge_cases() {
    let args = |ms: &str| vec![v(&format!(r#"{{"retentionMs":{ms},"queueShards":3}}"#))];
    let w = World::new();
    assert_eq!(w.run_call("scheduleCleanup", args("1000")).unwrap(), Value::Null);
    w.apply(CREATED, 0);
    assert_eq!(w.run_call("scheduleCleanup", args("1000")).unwrap(), Value::Null);
    w.apply(r#"{"eventType":"run_cancelled","specVersion":6}"#, 0);
    assert_eq!(w.status(), Value::Null, "retention disabled: no record");
    // No terminal cleanup is pending (nothing to page): a new schedule arms its due time.
    let record = w.run_call("scheduleCleanup", args("1000")).unwrap();
    assert_eq!(w.run_alarm.get(), Some(date(&record, "dueAt")));
    assert_eq!(member(&record, "reason"), Some(&Value::str("manual")));
    assert_eq!(member(&record, "status"), Some(&Value::str("cancelled")));
    assert_eq!(phase(&record), "retained");
    assert_eq!(num(&record, "queueShards"), 3.0);
    w.finish_terminal_cleanup();
    let due = date(&record, "dueAt");
    assert_eq!(w.run_alarm.get(), Some(due));
    let run = w.run_call("getRun", vec![]).unwrap();
    assert_eq!(run.get("value").and_then(|r| r.get("expiredAt")), Some(&Value::date(due)));
    assert_eq!(w.run_call("scheduleCleanup", args("5")).unwrap(), record);
    assert_eq!(w.run_call("scheduleCleanup", args("0")).unwrap(), record);
    assert_eq!(w.run_call("rearmCleanup", vec![]).unwrap(), record);
    assert_eq!(w.run_alarm.get(), Some(due));
    w.tick(5000);
    w.run_call("rearmCleanup", vec![]).unwrap();
    assert_eq!(w.run_alarm.get(), Some(w.now.get() + 1));
    assert_eq!(
        w.run_call("scheduleCleanup", vec![]).unwrap_err(),
        RpcError::type_error("Cannot read properties of undefined (reading 'retentionMs')")
    );
}

#[test]
fn schedule_with_a_past_due_time_arms_now_plus_one() {
    let w = World::new();
    w.apply(CREATED, 0);
    w.apply(r#"{"eventType":"run_cancelled","specVersion":6}"#, 0);
    w.finish_terminal_cleanup();
    w.tick(10_000);
    let record = w.run_call("scheduleCleanup", vec![v(r#"{"retentionMs":5}"#)]).unwrap();
    assert!(member(&record, "queueShards").is_none(), "no default queueShards here");
    assert_eq!(w.run_alarm.get(), Some(w.now.get() + 1));
}

#[test]
fn cleanup_now_on_a_scheduled_run_runs_one_page() {
    let w = World::new();
    w.populate(3_600_000);
    w.finish_terminal_cleanup();
    let record = w.run_call("cleanupNow", vec![v(r#"{"retentionMs":1,"queueShards":2}"#)]).unwrap();
    // Scheduled by applyEvent (generation 0), expedited (1), one page: retained → index (2).
    assert_eq!(phase(&record), "index", "{}", record.to_json().unwrap());
    assert_eq!(num(&record, "generation"), 2.0);
    assert_eq!(member(&record, "reason"), Some(&Value::str("terminal-retention")));
    assert_eq!(member(&w.run_call("getRun", vec![]).unwrap(), "code"), Some(&Value::str("RUN_EXPIRED")));
    let next = w.run_call("cleanupNow", vec![v(r#"{"retentionMs":1,"queueShards":2}"#)]).unwrap();
    assert_eq!(phase(&next), "streams", "each further call advances one page");
    while w.fire_alarm() {}
    assert_eq!(phase(&w.status()), "tombstoned");
}

#[test]
fn cleanup_now_on_an_unscheduled_run_runs_to_the_first_payload_page() {
    let w = World::new();
    w.populate(0);
    assert_eq!(w.status(), Value::Null);
    let record = w.run_call("cleanupNow", vec![v(r#"{"retentionMs":1,"queueShards":2}"#)]).unwrap();
    // 0.3's answer: everything but the rest of the payload is done, the tombstone written.
    assert_eq!(phase(&record), "payload", "{}", record.to_json().unwrap());
    assert!(num(&record, "deletedPayloadKeys") > 0.0);
    assert_eq!(num(&record, "deletedStreams"), 1.0);
    assert_eq!(num(&record, "deletedQueueMessages"), 1.0);
    assert_eq!(member(&record, "reason"), Some(&Value::str("manual")));
    assert!(w.run.borrow().data.contains_key("retention:tombstone"));
    while w.fire_alarm() {}
    let done = w.status();
    assert_eq!(phase(&done), "tombstoned");
    assert_eq!(num(&done, "deletedStreams"), 1.0);
    assert_eq!(num(&done, "deletedQueueMessages"), 1.0);
    assert_eq!(w.run_call("cleanupNow", vec![v(r#"{"retentionMs":1,"queueShards":2}"#)]).unwrap(), done);
    assert_eq!(w.run_call("rearmCleanup", vec![]).unwrap(), done);
    assert_eq!(w.run_alarm.get(), None);
}

#[test]
fn cleanup_now_moves_a_future_due_time_to_now() {
    let w = World::new();
    w.populate(3_600_000);
    let record = w.run_call("cleanupNow", vec![v(r#"{"retentionMs":3600000,"queueShards":2}"#)]).unwrap();
    assert_eq!(phase(&record), "index");
    assert!(date(&record, "dueAt") < T0 + 3_600_000);
}

#[test]
fn cleanup_now_on_a_live_run_does_nothing() {
    let w = World::new();
    w.apply(CREATED, 0);
    assert_eq!(w.run_call("cleanupNow", vec![v(r#"{"retentionMs":2000,"queueShards":1}"#)]).unwrap(), Value::Null);
    assert_eq!(w.status(), Value::Null);
    assert_eq!(w.run_call("rearmCleanup", vec![]).unwrap(), Value::Null);
    assert_eq!(w.run_alarm.get(), None);
}

/// `queueShards: 1e9` is capped at 1024 shards, one `expireRun` per page.
#[test]
fn queue_shards_are_visited_one_page_each() {
    use super::phases::MAX_QUEUE_SHARDS;
    let queue_calls = |w: &World| w.calls.borrow().iter().filter(|c| c.contains(".expireRun") && c.contains("/q:")).count();
    let w = World::new();
    w.populate(0);
    let far = v(&format!(
        r#"{{"messageId":"msg_far","queueName":"q","pathname":"flow","body":"{{}}","runId":"{RUN}","delaySeconds":60,"config":{{"targetBaseUrl":"http://127.0.0.1:1","queueShards":1024}}}}"#
    ));
    w.peer(Binding::Queue, "q:700", "enqueue", vec![far]).unwrap();
    w.calls.borrow_mut().clear();
    w.run_call("cleanupNow", vec![v(r#"{"retentionMs":1,"queueShards":1e9}"#)]).unwrap();
    let in_call = queue_calls(&w);
    assert!(in_call <= super::driver::FRESH_CLEANUP_PAGES, "{in_call}");
    let mut pages = 0;
    while w.fire_alarm() {
        pages += 1;
        assert!(queue_calls(&w) <= in_call + pages);
        assert!(pages < 3000);
    }
    assert!(!w.run_keys().iter().any(|k| k.as_str() == crate::run::keys::RETENTION_PROGRESS));
    assert_eq!(queue_calls(&w), MAX_QUEUE_SHARDS as usize);
    let done = w.status();
    assert_eq!(phase(&done), "tombstoned");
    assert_eq!(num(&done, "deletedQueueMessages"), 2.0);
}

#[test]
fn index_phase_expires_the_shards_and_the_archive() {
    let w = World::new();
    w.populate(1000);
    let record = w.status();
    let created = date(&record, "createdAt");
    let catalog = Target::Catalog(crate::protocol::shard::run_catalog(RUN));
    let meta = Value::str(format!(r#"{{"runId":"{RUN}"}}"#));
    for key in [format!("run:wf:{created:013}:{RUN}"), format!("runall:{created:013}:{RUN}")] {
        w.index_peer(&catalog, "upsertKey", vec![Value::str(RUN), Value::str(key), meta.clone()]).unwrap();
    }
    assert_eq!(w.index_keys(&catalog).len(), 2);
    while w.fire_alarm() {}
    assert_eq!(phase(&w.status()), "tombstoned");
    let left = w.index_keys(&catalog);
    assert!(left.contains(&format!("expired:{RUN}")), "{left:?}");
    assert!(!left.iter().any(|k| k.starts_with("run:") || k.starts_with("runall:")), "{left:?}");
    assert_eq!(w.peer_keys(Binding::Index, "index"), [format!("expired:{RUN}")], "the archive too");
    let late = w.index_peer(&catalog, "upsertKey", vec![Value::str(RUN), Value::str("runall:1:x"), meta]).unwrap();
    assert_eq!(member(&late, "stored"), Some(&Value::Bool(false)));
}

/// Hooks by admission: a 0.3 hook is released by the client (`releasedHooks`), a 0.4 hook
/// (admitted with a `hookClaimId`) by the terminal cleanup; both hook entities are gone at
/// once, and the alarm releases every marker's shard entries.
#[test]
fn terminal_cleanup_releases_hooks_by_admission() {
    let w = World::new();
    raw_apply(&w, CREATED, 0);
    raw_apply(&w, STARTED, 0);
    let tokens = |t: &str| Target::HookTokens(crate::protocol::shard::hook_token(t));
    for (hook_id, token, claim) in [("h03", "tok-03", None), ("h04", "tok-04", Some("c-04"))] {
        let owner = v(&format!(r#"{{"runId":"{RUN}","hookId":"{hook_id}"}}"#));
        let out = w.index_peer(&tokens(token), "reserve", vec![Value::str(token), owner, Value::str("claim")]).unwrap();
        assert_eq!(member(&out, "claimed"), Some(&Value::Bool(true)));
        let created = hook_created(&w, hook_id, token, claim);
        assert!(created.get("hook").is_some(), "{}", created.to_json().unwrap());
    }
    raw_apply(
        &w,
        r#"{"eventType":"wait_created","specVersion":6,"correlationId":"w1","eventData":{"resumeAt":{"__type":"Date","iso":"2099-01-01T00:00:00.000Z"}}}"#,
        0,
    );
    let done = raw_apply(&w, COMPLETED, 0);
    assert_eq!(done.get("releasedHooks"), Some(&v(r#"[{"hookId":"h03","token":"tok-03"}]"#)));
    let listed = w.run_call("listHooks", vec![v(r#"{"limit":100}"#)]).unwrap();
    assert_eq!(listed.get("value").and_then(|p| p.get("data")), Some(&Value::Array(vec![])));
    assert!(!w.run_keys().iter().any(|k| k.starts_with("wait:")));
    assert!(w.run_alarm.get().is_some_and(|at| at <= w.now.get()));
    let lifecycle = w.run_call("getLifecycleStatus", vec![]).unwrap();
    assert_eq!(lifecycle, Value::str("terminal"));
    for token in ["tok-03", "tok-04"] {
        assert!(!w.index_keys(&tokens(token)).is_empty(), "{token} still claimed");
    }
    w.finish_terminal_cleanup();
    for token in ["tok-03", "tok-04"] {
        assert_eq!(w.index_keys(&tokens(token)), Vec::<String>::new(), "{token} released by the alarm");
    }
    assert!(!w.run_keys().iter().any(|k| k.starts_with("retention:hook:")), "markers consumed");
    assert_eq!(w.run_alarm.get(), None, "no retention record: the alarm is cleared");
    assert_eq!(w.run_call("getLifecycleStatus", vec![]).unwrap(), Value::str("terminal"));
    // A replayed terminal event restarts it (idempotent).
    let again = raw_apply(&w, r#"{"eventType":"run_cancelled","specVersion":6}"#, 0);
    assert_eq!(member(&again, "code"), Some(&Value::str("ENTITY_CONFLICT")));
}

/// A run that never had a hook or a wait has nothing for a terminal cleanup to page: the
/// terminal transition writes no `terminal:cleanup` record and arms no alarm (or leaves
/// the retention deadline as the alarm); one with a hook's marker gets the record, and its
/// now + 1 alarm, ahead of the retention deadline, and is done in one alarm.
#[test]
fn terminal_cleanup_starts_only_with_something_to_page() {
    let w = World::new();
    raw_apply(&w, CREATED, 0);
    raw_apply(&w, STARTED, 0);
    raw_apply(
        &w,
        r#"{"eventType":"wait_created","specVersion":6,"correlationId":"w1","eventData":{"resumeAt":{"__type":"Date","iso":"2099-01-01T00:00:00.000Z"}}}"#,
        0,
    );
    raw_apply(&w, COMPLETED, 0);
    assert!(!w.run_keys().iter().any(|k| k == "terminal:cleanup" || k.starts_with("wait:")), "{:?}", w.run_keys());
    assert_eq!(w.run_alarm.get(), None, "retention off: no alarm at all");
    assert_eq!(w.run_call("getLifecycleStatus", vec![]).unwrap(), Value::str("terminal"));

    let w = World::new();
    raw_apply(&w, CREATED, 0);
    let done = raw_apply(&w, COMPLETED, 60_000);
    let due = date(done.get("run").unwrap(), "expiredAt");
    assert!(!w.run_keys().contains(&"terminal:cleanup".to_string()));
    assert_eq!(w.run_alarm.get(), Some(due), "the retention deadline");

    let w = World::new();
    raw_apply(&w, CREATED, 0);
    let tokens = Target::HookTokens(crate::protocol::shard::hook_token("tok"));
    let owner = v(&format!(r#"{{"runId":"{RUN}","hookId":"h1"}}"#));
    w.index_peer(&tokens, "reserve", vec![Value::str("tok"), owner, Value::str("claim")]).unwrap();
    hook_created(&w, "h1", "tok", Some("c1"));
    raw_apply(&w, COMPLETED, 60_000);
    assert!(!w.index_keys(&tokens).is_empty(), "claimed until the alarm");
    assert!(w.run_keys().contains(&"terminal:cleanup".to_string()));
    assert_eq!(w.run_alarm.get(), Some(w.now.get() + 1), "the marker's release comes first");
    // One alarm: the empty hooks phase, the marker's page, and the empty waits phase.
    assert!(w.fire_alarm());
    assert!(!w.run_keys().contains(&"terminal:cleanup".to_string()), "{:?}", w.run_keys());
    assert_eq!(w.index_keys(&tokens), Vec::<String>::new(), "released");
    assert!(!w.run_keys().iter().any(|k| k.starts_with("retention:hook:")), "marker consumed");
    assert_eq!(w.run_alarm.get(), Some(date(&w.status(), "dueAt")), "then the retention deadline");
}

/// The terminal cleanup pages hooks 64 at a time and waits 128 at a time (hooks an older
/// release left in place).
#[test]
fn terminal_cleanup_pages_leftover_hooks_and_waits() {
    let w = World::new();
    raw_apply(&w, CREATED, 0);
    // A hook: its marker is what makes the terminal transition start the cleanup.
    hook_created(&w, "h1", "tok", None);
    raw_apply(&w, COMPLETED, 0);
    {
        let mut run = w.run.borrow_mut();
        for i in 0..86 {
            run.put(&format!("hook:h{i:03}"), &format!(r#"{{"hookId":"h{i:03}","token":"t{i:03}","runId":"{RUN}"}}"#)).unwrap();
        }
        for i in 0..300 {
            run.put(&format!("wait:w{i:03}"), "{}").unwrap();
        }
    }
    let count = |prefix: &str| w.run_keys().iter().filter(|k| k.starts_with(prefix)).count();
    let mut seen = Vec::new();
    while w.run.borrow().data.contains_key(crate::run::keys::TERMINAL_CLEANUP) {
        w.fire_alarm();
        seen.push((count("hook:"), count("wait:")));
    }
    // Hooks 64 + 22; the marker's page runs the first waits page in its commit; 128 + 44.
    assert_eq!(seen, [(22, 300), (0, 300), (0, 172), (0, 44), (0, 0)]);
    let releases = w.calls.borrow().iter().filter(|c| c.ends_with(".releaseBatch")).count();
    assert!(releases >= 2, "{releases}");
}

#[test]
fn a_failed_terminal_page_keeps_its_position() {
    let w = World::new();
    raw_apply(&w, CREATED, 0);
    hook_created(&w, "h1", "tok", Some("c1"));
    raw_apply(&w, COMPLETED, 0);
    *w.failing.borrow_mut() = Some("hook-token".into());
    // One alarm: the hooks phase lists nothing (the transition deleted the hook inline), so
    // the markers phase runs at once, and its release fails.
    w.fire_alarm();
    let record: super::terminal::TerminalRecord =
        crate::store::get_json(&mut *w.run.borrow_mut(), crate::run::keys::TERMINAL_CLEANUP).unwrap().unwrap();
    assert_eq!(record.phase, super::terminal::TerminalPhase::Markers);
    assert_eq!(record.attempts, 1);
    assert_eq!(w.run_alarm.get(), Some(record.last_attempt_at.unwrap() + 1000));
    *w.failing.borrow_mut() = None;
    w.finish_terminal_cleanup();
    assert_eq!(w.index_keys(&Target::HookTokens(crate::protocol::shard::hook_token("tok"))), Vec::<String>::new());
}

/// The generation counts and payload counts of the 0.4 golden `retention-040` runs: a
/// terminal run with a 0.4 hook and a stream (T: 8 keys, generation 8), and `cleanupNow`
/// one page after a terminal-retention record (N: phase `index` generation 2, then 9).
#[test]
fn generations_follow_the_pages() {
    let w = World::new();
    raw_apply(&w, CREATED, 1500);
    raw_apply(&w, STARTED, 1500);
    hook_created(&w, "ht1", "tok-t", Some("claim-t"));
    w.peer(Binding::Streams, &format!("run-streams:{RUN}"), "registerStream", vec![Value::str(RUN), Value::str("t-out")]).unwrap();
    w.peer(Binding::Streams, "stream:t-out", "writeChunk", vec![Value::str(RUN), Value::Bytes(vec![1])]).unwrap();
    raw_apply(&w, COMPLETED, 1500);
    w.finish_terminal_cleanup();
    while w.fire_alarm() {}
    let t = w.status();
    assert_eq!(phase(&t), "tombstoned");
    // run, event_sequence, 4 events, retention:queue-shards, hookevent:ht1.
    assert_eq!((num(&t, "generation"), num(&t, "deletedPayloadKeys"), num(&t, "deletedStreams")), (8.0, 8.0, 1.0));

    let n = World::new();
    raw_apply(&n, CREATED, 1500);
    raw_apply(&n, FAILED, 1500);
    n.finish_terminal_cleanup();
    let first = n.run_call("cleanupNow", vec![v(r#"{"retentionMs":1500,"queueShards":1}"#)]).unwrap();
    // (A record existed: one page.)
    assert_eq!((phase(&first), num(&first, "generation")), ("index", 2.0));
    while n.fire_alarm() {}
    let done = n.status();
    assert_eq!((phase(&done), num(&done, "generation"), num(&done, "deletedPayloadKeys")), ("tombstoned", 9.0, 5.0));
}

fn enforce(w: &World, retention_ms: i64, scheduled: i64) -> Value {
    let request = v(&format!(r#"{{"retentionMs":{retention_ms},"queueShards":1,"scheduledTime":{scheduled}}}"#));
    block_on(enforce_retention(w, Some(&request))).unwrap()
}

#[test]
fn enforce_retention_expires_old_runs_of_any_status() {
    let w = World::new();
    raw_apply(&w, CREATED, 1500);
    raw_apply(&w, STARTED, 1500);
    hook_created(&w, "ho1", "tok-old", Some("claim-o"));
    raw_apply(
        &w,
        r#"{"eventType":"wait_created","specVersion":6,"correlationId":"wo1","eventData":{"resumeAt":{"__type":"Date","iso":"2099-01-01T00:00:00.000Z"}}}"#,
        0,
    );
    let created = date(&w.run_call("getRun", vec![]).unwrap().get("value").cloned().unwrap(), "createdAt");
    // Not due at the deadline minus one.
    let early = enforce(&w, 5000, created + 4999);
    assert_eq!(early, v(r#"{"state":"not-due","cleanup":null}"#));
    w.tick(6000);
    let out = enforce(&w, 5000, w.now.get());
    assert_eq!(member(&out, "state"), Some(&Value::str("expired")));
    let cleanup = member(&out, "cleanup").unwrap();
    // Two inline pages: retained → index → streams.
    assert_eq!((phase(cleanup), num(cleanup, "generation")), ("streams", 2.0));
    assert_eq!(member(cleanup, "reason"), Some(&Value::str("maximum-age")));
    assert_eq!(member(cleanup, "status"), Some(&Value::str("running")));
    assert!(member(cleanup, "completedAt").is_none() && member(cleanup, "terminalStatus").is_none());
    assert_eq!(date(cleanup, "dueAt"), created + 5000);
    assert_eq!(num(cleanup, "queueShards"), 1.0, "the stored queue-shards of the run");
    assert_eq!(w.run_call("getLifecycleStatus", vec![]).unwrap(), Value::str("expired"));
    while w.fire_alarm() {}
    let done = w.status();
    // run, event_sequence, 4 events, queue-shards, hookevent, hook, hookcreated, wait.
    assert_eq!((phase(&done), num(&done, "generation"), num(&done, "deletedPayloadKeys")), ("tombstoned", 8.0, 11.0));
    let read = w.run_call("getRun", vec![]).unwrap();
    let tombstone = member(&read, "tombstone").unwrap();
    assert_eq!(member(tombstone, "status"), Some(&Value::str("running")));
    assert!(member(tombstone, "completedAt").is_none());
    // Enforcing again: expired with the tombstone's record.
    let again = enforce(&w, 5000, w.now.get());
    assert_eq!(member(&again, "state"), Some(&Value::str("expired")));
    assert_eq!(member(&again, "cleanup"), Some(&done));
    // A missing run.
    let empty = World::new();
    assert_eq!(enforce(&empty, 5000, T0), v(r#"{"state":"missing","cleanup":null}"#));
}

#[test]
fn the_earlier_deadline_wins() {
    let w = World::new();
    raw_apply(&w, CREATED, 0);
    let created = date(&w.run_call("getRun", vec![]).unwrap().get("value").cloned().unwrap(), "createdAt");
    raw_apply(&w, COMPLETED, 3_600_000);
    w.finish_terminal_cleanup();
    let terminal_due = date(&w.status(), "dueAt");
    w.tick(10);
    let out = enforce(&w, 10, w.now.get());
    let cleanup = member(&out, "cleanup").unwrap();
    assert_eq!(member(cleanup, "reason"), Some(&Value::str("maximum-age")));
    assert_eq!(member(cleanup, "status"), Some(&Value::str("completed")));
    assert!(member(cleanup, "completedAt").is_some());
    assert_eq!(date(cleanup, "dueAt"), created + 10);
    assert!(created + 10 < terminal_due);
    // An earlier terminal deadline is kept.
    let w2 = World::new();
    raw_apply(&w2, CREATED, 0);
    raw_apply(&w2, COMPLETED, 1);
    w2.finish_terminal_cleanup();
    let record = w2.status();
    let out = enforce(&w2, 3_600_000, w2.now.get() + 3_600_000);
    assert_eq!(member(member(&out, "cleanup").unwrap(), "reason"), Some(&Value::str("terminal-retention")));
    assert_eq!(member(member(&out, "cleanup").unwrap(), "dueAt"), member(&record, "dueAt"));
}

#[test]
fn enforce_retention_validates_its_arguments() {
    let w = World::new();
    for (body, message) in [
        (r#"{"retentionMs":0,"queueShards":1,"scheduledTime":1}"#, "world-celld retentionMs must be a positive safe integer"),
        (r#"{"retentionMs":1.5,"queueShards":1,"scheduledTime":1}"#, "world-celld retentionMs must be a positive safe integer"),
        (r#"{"retentionMs":1,"queueShards":0,"scheduledTime":1}"#, "world-celld retention queueShards must be a positive safe integer"),
        (
            r#"{"retentionMs":1,"queueShards":1,"scheduledTime":-1}"#,
            "world-celld retention scheduledTime must be a non-negative safe integer",
        ),
    ] {
        let err = block_on(enforce_retention(&w, Some(&v(body)))).unwrap_err();
        assert_eq!(err.message, message);
    }
}

/// The payload counts of the 0.3 golden `retention` runs, with the same code and the
/// 0.3.0 reference's correlation index (`WORKFLOW_CORRELATION_INDEX=on`, as the golden
/// files are replayed): a run created with retention off and scheduled later (R4: 4 keys),
/// and `cleanupNow` on an unscheduled run with a correlated step (R2: 8 keys, answered in
/// phase `payload`; 7 by default, without the step's correlation marker).
#[test]
fn payload_counts_of_a_03_client() {
    let mut d = World::new();
    d.config.correlation_index = Some("on".into());
    raw_apply(&d, CREATED, 0);
    raw_apply(&d, COMPLETED, 0);
    d.finish_terminal_cleanup();
    d.run_call("scheduleCleanup", vec![v(r#"{"retentionMs":2000,"queueShards":1}"#)]).unwrap();
    while d.fire_alarm() {}
    assert_eq!(num(&d.status(), "deletedPayloadKeys"), 4.0);

    for (setting, keys) in [(Some("on"), 8.0), (None, 7.0)] {
        let mut b = World::new();
        b.config.correlation_index = setting.map(String::from);
        raw_apply(&b, CREATED, 0);
        raw_apply(&b, r#"{"eventType":"step_created","specVersion":6,"correlationId":"s1","eventData":{"stepName":"st","input":null}}"#, 0);
        raw_apply(&b, FAILED, 0);
        b.finish_terminal_cleanup();
        let record = b.run_call("cleanupNow", vec![v(r#"{"retentionMs":1,"queueShards":1}"#)]).unwrap();
        assert_eq!((phase(&record), num(&record, "deletedPayloadKeys")), ("payload", keys), "{setting:?}");
    }
    // A run known to be 0.4-driven (it admitted a claimed hook) gets no correlation markers.
    let mut c = World::new();
    c.config.correlation_index = Some("on".into());
    raw_apply(&c, CREATED, 0);
    hook_created(&c, "h1", "t1", Some("claim"));
    raw_apply(&c, r#"{"eventType":"wait_created","specVersion":6,"correlationId":"w1","eventData":{"resumeAt":null}}"#, 0);
    assert!(!c.run_keys().iter().any(|k| k.starts_with("retention:index:")));
    assert!(c.run_keys().iter().any(|k| k == "retention:claims"));
}

/// Against a 0.4 QueueDO: the receipt of a finished `expireRun` is acknowledged on the next
/// page; a refused receipt fails the page (recorded) and is retried.
#[test]
fn queue_receipts_are_acknowledged() {
    let w = World::new();
    w.queue_v04.set(Some(false));
    w.populate(0);
    w.finish_terminal_cleanup();
    w.run_call("cleanupNow", vec![v(r#"{"retentionMs":1,"queueShards":2}"#)]).unwrap();
    let record = w.status();
    assert_eq!(phase(&record), "queues", "{}", record.to_json().unwrap());
    assert_eq!(member(&record, "lastError"), Some(&Value::str(format!("queue shard 0 rejected expiry receipt for {RUN}"))));
    let progress: super::phases::Progress =
        crate::store::get_json(&mut *w.run.borrow_mut(), crate::run::keys::RETENTION_PROGRESS).unwrap().unwrap();
    assert_eq!(progress.pending_ack.as_ref().map(|p| p.queue_shard), Some(0), "the receipt is kept");
    w.queue_v04.set(Some(true));
    while w.fire_alarm() {}
    let done = w.status();
    assert_eq!(phase(&done), "tombstoned");
    assert_eq!(num(&done, "deletedQueueMessages"), 1.0);
    let acks = w.calls.borrow().iter().filter(|c| c.ends_with(".acknowledgeExpireRun")).count();
    assert_eq!(acks, 3, "one refused, then one per shard");
}

/// Against a 0.4 StreamDO: a stream that needs more than one page keeps the phase at
/// `streams` (one page per alarm) until `finalizeRegistry` says done; its cumulative count
/// is stored.
#[test]
fn paged_stream_expiry() {
    let w = World::new();
    w.stream_v04.set(Some(2));
    w.populate(0);
    w.finish_terminal_cleanup();
    w.run_call("scheduleCleanup", vec![v(r#"{"retentionMs":1,"queueShards":2}"#)]).unwrap();
    w.fire_until(10, |r| phase(r) == "streams");
    let start = num(&w.status(), "generation");
    w.fire_alarm();
    assert_eq!((phase(&w.status()), num(&w.status(), "generation")), ("streams", start + 1.0));
    w.fire_alarm();
    assert_eq!(phase(&w.status()), "streams");
    w.fire_alarm();
    let record = w.status();
    assert_eq!((phase(&record), num(&record, "deletedStreams")), ("queues", 1.0));
    let calls = w.calls.borrow().iter().filter(|c| c.ends_with("stream:out.expireStream")).count();
    assert_eq!(calls, 3);
    while w.fire_alarm() {}
    assert_eq!(phase(&w.status()), "tombstoned");
}

/// A shard answering a smaller cumulative count than already recorded fails the page
/// (spec-0.4 `retention.md` §2); a late answer for a shard the progress has left is ignored.
#[test]
fn queue_progress_never_regresses() {
    let w = World::new();
    raw_apply(&w, CREATED, 0);
    raw_apply(&w, COMPLETED, 0);
    w.finish_terminal_cleanup();
    w.run_call("scheduleCleanup", vec![v(r#"{"retentionMs":1,"queueShards":2}"#)]).unwrap();
    w.fire_until(10, |r| phase(r) == "queues");
    let expect = super::phases::Expect { phase: super::Phase::Queues, generation: num(&w.status(), "generation") };
    let answer = |deleted: f64, done: bool| super::phases::QueueAnswer { deleted, done, receipt: Value::Null };
    block_on(w.transact(|s, now, alarm| super::phases::commit_queue_expire(s, now, alarm, &expect, 0, answer(64.0, false)))).unwrap();
    let next = super::phases::Expect { generation: expect.generation + 1.0, ..expect };
    let err =
        block_on(w.transact(|s, now, alarm| super::phases::commit_queue_expire(s, now, alarm, &next, 0, answer(10.0, false)))).unwrap_err();
    assert_eq!(err.message, format!("queue shard 0 regressed expiry receipt for {RUN}"));
    assert_eq!(num(&w.status(), "deletedQueueMessages"), 64.0);
    // An answer for shard 1 while the progress is at shard 0 changes nothing.
    let before = w.status();
    block_on(w.transact(|s, now, alarm| super::phases::commit_queue_expire(s, now, alarm, &next, 1, answer(5.0, true)))).unwrap();
    assert_eq!(w.status(), before);
}

// ---- lifecycle leases (`crate::run::lease`) ----

fn lease(w: &World, holder: &str) -> Value {
    w.run_call(crate::protocol::leases::LEASE_METHOD, vec![Value::str(holder)]).unwrap()
}

/// The queue shards' revocations owed so far (the catalog shard's: [`catalog_revocations`]).
fn revoked(w: &World) -> Vec<(String, String)> {
    let all: Vec<_> = w.revoked.borrow_mut().drain(..).collect();
    all.into_iter().filter(|r| r.kind == crate::protocol::leases::HolderKind::Queue).map(|r| (r.holder, r.run_id)).collect()
}

fn lease_keys(w: &World) -> Vec<String> {
    w.run_keys().into_iter().filter(|k| crate::run::lease::is_lease_key(k)).collect()
}

#[test]
fn cleanup_now_revokes_the_leases_it_breaks() {
    let w = World::new();
    w.populate(3_600_000);
    let granted = lease(&w, "q:0");
    assert_eq!(granted.get("status"), Some(&Value::str("terminal")));
    let until = num(&granted, "leaseUntil");
    assert_eq!(until, (w.now.get() + crate::protocol::leases::LEASE_MS) as f64, "an hour's retention: a full lease");
    lease(&w, "q:1");
    assert!(revoked(&w).is_empty());
    w.run_call("cleanupNow", vec![v(r#"{"retentionMs":3600000,"queueShards":2}"#)]).unwrap();
    let mut got = revoked(&w);
    got.sort();
    assert_eq!(got, vec![("q:0".to_string(), RUN.to_string()), ("q:1".to_string(), RUN.to_string())]);
    assert!(lease_keys(&w).is_empty());
    let after = lease(&w, "q:0");
    assert_eq!(after.get("status"), Some(&Value::str("expired")));
    assert_eq!(after.get("leaseUntil"), Some(&Value::Null));
    assert!(lease_keys(&w).is_empty(), "an expired run grants nothing");
    // The remaining pages revoke nothing more and count no lease as payload.
    while w.fire_alarm() {}
    assert!(revoked(&w).is_empty());
    assert_eq!(phase(&w.status()), "tombstoned");
}

#[test]
fn a_terminal_retention_shorter_than_a_lease_revokes_it() {
    let w = World::new();
    w.apply(CREATED, 5_000);
    let granted = lease(&w, "q:0");
    assert_eq!(granted.get("status"), Some(&Value::str("active")));
    w.apply(COMPLETED, 5_000);
    assert_eq!(revoked(&w), vec![("q:0".to_string(), RUN.to_string())]);
    // The next grant runs to the due time, not past it.
    let again = lease(&w, "q:0");
    let due = date(&w.status(), "dueAt");
    assert_eq!(num(&again, "leaseUntil"), due as f64);
    w.tick(5_000);
    assert_eq!(lease(&w, "q:0").get("status"), Some(&Value::str("expired")));
}

#[test]
fn a_long_retention_keeps_the_lease_and_payload_counts_ignore_it() {
    let w = World::new();
    w.apply(CREATED, 86_400_000);
    lease(&w, "q:0");
    w.apply(COMPLETED, 86_400_000);
    assert!(revoked(&w).is_empty(), "the run expires long after the lease ends");
    assert_eq!(lease_keys(&w).len(), 1);
    // Expiry by time writes nothing: the lease (long over) is deleted by the payload
    // phase without being counted.
    w.tick(86_400_000);
    let before = w.run_keys().len();
    while w.fire_alarm() {}
    let done = w.status();
    assert_eq!(phase(&done), "tombstoned");
    assert!(lease_keys(&w).is_empty());
    assert!(num(&done, "deletedPayloadKeys") < before as f64);
}

#[test]
fn maximum_age_enforcement_revokes_leases() {
    let w = World::new();
    w.apply(CREATED, 0);
    lease(&w, "q:3");
    w.tick(10_000);
    let request = v(&format!(r#"{{"retentionMs":1000,"queueShards":1,"scheduledTime":{}}}"#, w.now.get()));
    block_on(enforce_retention(&w, Some(&request))).unwrap();
    assert_eq!(revoked(&w), vec![("q:3".to_string(), RUN.to_string())]);
}

#[test]
fn lease_grants_are_bounded_and_checked() {
    let w = World::new();
    // A missing run: no lease, nothing written.
    let missing = lease(&w, "q:0");
    assert_eq!(missing.get("status"), Some(&Value::str("missing")));
    assert_eq!(missing.get("leaseUntil"), Some(&Value::Null));
    assert!(w.run_keys().is_empty());
    for bad in [Value::str(""), Value::num(1.0), Value::str("x".repeat(513))] {
        assert!(w.run_call(crate::protocol::leases::LEASE_METHOD, vec![bad]).is_err());
    }
    w.apply(CREATED, 0);
    for i in 0..crate::run::lease::MAX_LEASES {
        assert!(num(&lease(&w, &format!("q:{i}")), "leaseUntil").is_finite());
    }
    let refused = lease(&w, "q:extra");
    assert_eq!(refused.get("status"), Some(&Value::str("active")));
    assert_eq!(refused.get("leaseUntil"), Some(&Value::Null), "past the bound a holder just asks every time");
    // A renewal by a known holder still works, and extends the stored lease.
    w.tick(30_000);
    let renewed = num(&lease(&w, "q:0"), "leaseUntil");
    assert_eq!(renewed, (w.now.get() + crate::protocol::leases::LEASE_MS) as f64);
}

fn catalog_lease(w: &World, holder: &str) -> Value {
    w.run_call(crate::protocol::leases::LEASE_METHOD, vec![Value::str(holder), Value::str(crate::protocol::leases::CATALOG_KIND)]).unwrap()
}

fn catalog_revocations(w: &World) -> Vec<crate::run::lease::Revocation> {
    let all: Vec<_> = w.revoked.borrow_mut().drain(..).collect();
    all.into_iter().filter(|r| r.kind == crate::protocol::leases::HolderKind::Catalog).collect()
}

#[test]
fn the_run_catalog_shard_gets_an_unrecorded_lease() {
    use crate::protocol::leases::HolderKind;
    use crate::run::lease::Revocation;
    let home = crate::protocol::shard::run_catalog(RUN);
    let w = World::new();
    assert_eq!(catalog_lease(&w, &home).get("leaseUntil"), Some(&Value::Null), "a missing run: no lease");
    w.apply(CREATED, 3_600_000);
    let granted = catalog_lease(&w, &home);
    assert_eq!(granted.get("status"), Some(&Value::str("active")));
    assert_eq!(num(&granted, "leaseUntil"), (w.now.get() + crate::protocol::leases::CATALOG_LEASE_MS) as f64);
    assert!(w.run_keys().iter().all(|k| !k.contains(&home)), "nothing recorded");
    // Another shard is not the run's: no lease for it.
    let other = if home.ends_with("00") { "run-catalog:v1:01" } else { "run-catalog:v1:00" };
    let refused = catalog_lease(&w, other);
    assert_eq!((refused.get("status"), refused.get("leaseUntil")), (Some(&Value::str("active")), Some(&Value::Null)));
    for bad in [Value::str("queue"), Value::num(1.0), Value::Bool(true)] {
        let err = w.run_call(crate::protocol::leases::LEASE_METHOD, vec![Value::str(&home), bad]).unwrap_err();
        assert!(err.message.contains("kind"), "{}", err.message);
    }
    // An explicit null kind is a queue shard's grant, recorded as before.
    assert!(
        num(&w.run_call(crate::protocol::leases::LEASE_METHOD, vec![Value::str("q:9"), Value::Null]).unwrap(), "leaseUntil").is_finite()
    );
    assert_eq!(lease_keys(&w), vec!["lifecycle-lease:q:9".to_string()]);
    // An hour's retention outlasts any lease: completing revokes nothing.
    w.apply(COMPLETED, 3_600_000);
    assert!(w.revoked.borrow().is_empty());
    // cleanupNow expires the run now: both kinds are revoked, each on its own namespace.
    w.run_call("cleanupNow", vec![v(r#"{"retentionMs":3600000,"queueShards":1}"#)]).unwrap();
    let mut got: Vec<Revocation> = w.revoked.borrow_mut().drain(..).collect();
    got.sort_by_key(|r| r.kind as u8);
    let want = |kind, holder: &str| Revocation { kind, holder: holder.to_string(), run_id: RUN.to_string() };
    assert_eq!(got, vec![want(HolderKind::Queue, "q:9"), want(HolderKind::Catalog, &home)]);
    assert_eq!(HolderKind::Catalog.env_binding(), "WORKFLOW_RUN_CATALOG");
    assert_eq!(HolderKind::Queue.env_binding(), "WORKFLOW_QUEUE");
    // The remaining pages owe nothing: the run was already expired.
    while w.fire_alarm() {}
    assert!(w.revoked.borrow().is_empty());
    assert_eq!(catalog_lease(&w, &home).get("leaseUntil"), Some(&Value::Null), "an expired run grants nothing");
}

#[test]
fn the_catalog_shard_is_revoked_only_when_the_expiry_moves_within_a_lease() {
    let home = crate::protocol::shard::run_catalog(RUN);
    // A terminal retention shorter than a lease: revoked by the completing event.
    let w = World::new();
    w.apply(CREATED, 5_000);
    catalog_lease(&w, &home);
    w.apply(COMPLETED, 5_000);
    let got = catalog_revocations(&w);
    assert_eq!(got.iter().map(|r| (r.holder.as_str(), r.run_id.as_str())).collect::<Vec<_>>(), vec![(home.as_str(), RUN)]);
    // Leased again only up to the due time; a later move to a later instant owes nothing,
    // expiry by time writes nothing, and the pages after it owe nothing.
    assert_eq!(num(&catalog_lease(&w, &home), "leaseUntil"), date(&w.status(), "dueAt") as f64);
    w.tick(5_000);
    while w.fire_alarm() {}
    assert!(catalog_revocations(&w).is_empty());
    assert_eq!(phase(&w.status()), "tombstoned");

    // Two minutes' retention: past a queue lease, within a catalog lease.
    let w = World::new();
    w.apply(CREATED, 120_000);
    lease(&w, "q:0");
    catalog_lease(&w, &home);
    w.apply(COMPLETED, 120_000);
    let all: Vec<_> = w.revoked.borrow_mut().drain(..).collect();
    assert_eq!(all.iter().map(|r| r.kind).collect::<Vec<_>>(), vec![crate::protocol::leases::HolderKind::Catalog]);
    // An hour's: neither.
    let w = World::new();
    w.apply(CREATED, 3_600_000);
    catalog_lease(&w, &home);
    w.apply(COMPLETED, 3_600_000);
    assert!(w.revoked.borrow().is_empty());

    // Maximum-age enforcement of a run without a cleanup record: revoked.
    let w = World::new();
    w.apply(CREATED, 0);
    w.tick(10_000);
    let request = v(&format!(r#"{{"retentionMs":1000,"queueShards":1,"scheduledTime":{}}}"#, w.now.get()));
    block_on(enforce_retention(&w, Some(&request))).unwrap();
    assert_eq!(catalog_revocations(&w).len(), 1);
}
