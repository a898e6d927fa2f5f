//! RunCatalogDO behaviour with an injected clock and a simulated alarm (spec-0.4
//! `tests.md`, catalog items of `test/index-do.test.ts`).

use std::collections::BTreeMap;

use super::{alarm, call, keys, reads_alarm};
use crate::config::Config;
use crate::protocol::hop::{Args, Ctx};
use crate::protocol::lifecycle::{compaction_retry, pad13, CATALOG_FENCE_GRACE_MS, MAX_RUN_INDEX_PUBLICATION_LIFETIME_MS};
use crate::protocol::shard;
use crate::store::alarm::{Alarm, AlarmChange};
use crate::store::MemoryStore;
use crate::wire::{RpcError, Value};

const T0: i64 = 1_767_323_045_000;

struct Shard {
    store: MemoryStore,
    alarm: Option<i64>,
    now: i64,
    config: Config,
}

fn s(v: &str) -> Value {
    Value::str(v)
}
fn n(v: i64) -> Value {
    Value::num(v as f64)
}
fn meta(run_id: &str, status: &str) -> String {
    format!(r#"{{"runId":"{run_id}","createdAt":"2026-01-02T03:04:05.000Z","status":"{status}"}}"#)
}
fn run_keys(run_id: &str, created: i64) -> Value {
    Value::Array(vec![s(&keys::run("wf", created, run_id)), s(&keys::runall(created, run_id))])
}
fn stored(yes: bool) -> Value {
    Value::object([("stored", Value::Bool(yes))])
}
fn names(page: &Value) -> Vec<String> {
    let keys = page.get("keys").and_then(Value::as_array).cloned().unwrap_or_default();
    keys.iter().map(|k| k.get("name").and_then(Value::as_str).unwrap_or("?").to_string()).collect()
}

impl Shard {
    fn new() -> Shard {
        Shard { store: MemoryStore::new(), alarm: None, now: T0, config: Config::default() }
    }

    fn call(&mut self, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        let ctx = Ctx { now: self.now, name: "run-catalog:v1:00", config: &self.config };
        let mut alarm = if reads_alarm(method) { Alarm::new(self.alarm) } else { Alarm::unknown() };
        let out = self.store.transaction(|st| call(st, &ctx, &mut alarm, method, Args(&args)));
        if out.is_ok() {
            self.apply(&alarm);
        }
        out
    }

    fn ok(&mut self, method: &str, args: Vec<Value>) -> Value {
        self.call(method, args).unwrap_or_else(|e| panic!("{method}: {e:?}"))
    }

    fn apply(&mut self, alarm: &Alarm) {
        match alarm.change() {
            Some(AlarmChange::Set(at)) => self.alarm = Some(at),
            Some(AlarmChange::Delete) => self.alarm = None,
            None => {}
        }
    }

    /// Advance the clock to the alarm and run it as the shell would; `false` when none is set.
    fn fire(&mut self) -> bool {
        let Some(at) = self.alarm.take() else { return false };
        self.now = self.now.max(at);
        let mut alarm = Alarm::unknown();
        let now = self.now;
        match self.store.transaction(|st| alarm_pass(st, now, &mut alarm)) {
            Ok(()) => self.apply(&alarm),
            Err(_) => {
                let mut retry = Alarm::unknown();
                compaction_retry(now, &mut retry);
                self.apply(&retry);
            }
        }
        true
    }

    fn upsert(&mut self, run_id: &str, created: i64, status: &str, lease: i64) -> Value {
        self.ok("upsertRun", vec![s(run_id), run_keys(run_id, created), s(&meta(run_id, status)), n(lease)])
    }

    fn lease(&self) -> i64 {
        self.now + MAX_RUN_INDEX_PUBLICATION_LIFETIME_MS
    }

    fn count(&self, prefix: &str) -> usize {
        self.store.keys().iter().filter(|k| k.starts_with(prefix)).count()
    }
}

fn alarm_pass(store: &mut dyn crate::store::Store, now: i64, a: &mut Alarm) -> Result<(), RpcError> {
    alarm(store, now, a).map(|_| ())
}

#[test]
fn upsert_writes_both_keys_and_later_status_wins() {
    let mut c = Shard::new();
    let lease = c.lease();
    assert_eq!(c.upsert("wrun_1", 1000, "pending", lease), stored(true));
    assert_eq!(c.store.keys(), ["run:wf:0000000001000:wrun_1", "runall:0000000001000:wrun_1"]);
    assert_eq!(c.upsert("wrun_1", 1000, "completed", lease), stored(true));
    assert_eq!(c.store.text("runall:0000000001000:wrun_1"), Some(meta("wrun_1", "completed").as_str()));
}

#[test]
fn publication_lease_bounds() {
    let mut c = Shard::new();
    let max = c.lease();
    assert_eq!(c.upsert("wrun_1", 1, "pending", max + 1), stored(false), "beyond now + 1200900");
    assert_eq!(c.upsert("wrun_1", 1, "pending", c.now), stored(false), "not after now");
    let args = |lease: Value| vec![s("wrun_1"), run_keys("wrun_1", 1), s(&meta("wrun_1", "pending")), lease];
    assert_eq!(c.ok("upsertRun", args(Value::num(c.now as f64 + 0.5))), stored(false), "not an integer");
    assert_eq!(c.ok("upsertRun", args(s("9999999999999"))), stored(false), "not a number");
    assert_eq!(c.ok("upsertRun", args(Value::Null)), stored(false));
    assert!(c.store.keys().is_empty());
    assert_eq!(c.upsert("wrun_1", 1, "pending", c.now + 1), stored(true));
    assert_eq!(c.upsert("wrun_1", 1, "pending", max), stored(true));
}

#[test]
fn upsert_and_expire_need_exactly_two_keys() {
    let mut c = Shard::new();
    let one = Value::Array(vec![s("runall:1:wrun_1")]);
    let lease = n(c.lease());
    let err = c.call("upsertRun", vec![s("wrun_1"), one.clone(), s("{}"), lease.clone()]).unwrap_err();
    assert_eq!(err, RpcError::error("Run catalog commit requires exactly two keys"));
    let err = c.call("expireRun", vec![s("wrun_1"), one, n(c.now)]).unwrap_err();
    assert_eq!(err, RpcError::error("Run catalog expiry requires exactly two keys"));
    assert_eq!(c.call("upsertRun", vec![s("wrun_1")]).unwrap_err().message, "Cannot read properties of undefined (reading 'length')");
    let err = c.call("upsertRun", vec![s("wrun_1"), run_keys("wrun_1", 1), n(5), lease]).unwrap_err();
    assert_eq!(err.name, "TypeError");
    assert!(c.store.keys().is_empty() && c.alarm.is_none());
}

#[test]
fn expiry_fences_commits_then_compacts_and_stale_leases_stay_refused() {
    let mut c = Shard::new();
    let lease = c.lease();
    assert_eq!(c.upsert("wrun_1", 1000, "completed", lease), stored(true));
    let expired_at = c.now;
    assert_eq!(c.ok("expireRun", vec![s("wrun_1"), run_keys("wrun_1", 1000), n(expired_at)]), Value::object([("deleted", n(2))]));
    let compact_at = T0 + CATALOG_FENCE_GRACE_MS;
    assert_eq!(c.alarm, Some(compact_at));
    assert_eq!(c.store.keys(), ["expired:wrun_1".to_string(), format!("expiry-gc:{}:wrun_1", pad13(compact_at))]);
    assert_eq!(c.store.text("expired:wrun_1"), Some(format!(r#"{{"expiredAt":{expired_at}.0,"compactAt":{compact_at}}}"#).as_str()));

    // A delayed commit (its lease still valid) is refused behind the fence.
    c.now += 1000;
    assert_eq!(c.upsert("wrun_1", 1000, "completed", lease), stored(false));
    // A repeated expiry keeps the first compactAt and deletes nothing more.
    assert_eq!(c.ok("expireRun", vec![s("wrun_1"), run_keys("wrun_1", 1000), n(c.now)]), Value::object([("deleted", n(0))]));
    assert_eq!(c.count("expiry-gc:"), 1);
    assert_eq!(c.alarm, Some(compact_at));

    // After the grace period the fence is compacted; the stale lease has lapsed.
    assert!(c.fire());
    assert!(c.store.keys().is_empty(), "{:?}", c.store.keys());
    assert_eq!(c.alarm, None);
    assert_eq!(c.upsert("wrun_1", 1000, "completed", lease), stored(false));
    let page = c.ok("list", vec![Value::object([("prefix", s("run"))])]);
    assert_eq!(page, Value::object([("keys", Value::Array(vec![])), ("list_complete", Value::Bool(true))]));
}

#[test]
fn expire_arms_at_most_and_keeps_an_earlier_alarm() {
    let mut c = Shard::new();
    c.alarm = Some(T0 + 10);
    c.ok("expireRun", vec![s("wrun_1"), run_keys("wrun_1", 1), n(T0)]);
    assert_eq!(c.alarm, Some(T0 + 10));
    c.alarm = Some(T0 + 10 * CATALOG_FENCE_GRACE_MS);
    c.ok("expireRun", vec![s("wrun_2"), run_keys("wrun_2", 1), n(T0)]);
    assert_eq!(c.alarm, Some(T0 + CATALOG_FENCE_GRACE_MS));
}

#[test]
fn an_early_alarm_compacts_nothing_and_rearms_at_the_next_fence() {
    let mut c = Shard::new();
    c.ok("expireRun", vec![s("wrun_1"), run_keys("wrun_1", 1), n(T0)]);
    c.alarm = Some(T0 + 5);
    assert!(c.fire());
    assert_eq!(c.count("expired:"), 1);
    assert_eq!(c.alarm, Some(T0 + CATALOG_FENCE_GRACE_MS));
}

#[test]
fn three_hundred_expiries_compact_within_three_passes() {
    let mut c = Shard::new();
    for i in 0..300 {
        let run = format!("wrun_{i:03}");
        c.now = T0 + i;
        c.ok("expireRun", vec![s(&run), run_keys(&run, 1), n(c.now)]);
    }
    assert_eq!((c.count("expired:"), c.count("expiry-gc:")), (300, 300));
    c.now = T0 + 300 + CATALOG_FENCE_GRACE_MS;
    let mut passes = 0;
    while c.count("expiry-gc:") > 0 {
        c.alarm = c.alarm.map(|at| at.max(c.now));
        assert!(c.fire(), "an alarm stays armed while entries remain");
        passes += 1;
    }
    assert_eq!(passes, 3);
    assert_eq!(c.count("expired:"), 0);
    assert_eq!(c.alarm, None);
}

#[test]
fn a_failed_compaction_retries_in_a_second() {
    let mut c = Shard::new();
    c.ok("expireRun", vec![s("wrun_1"), run_keys("wrun_1", 1), n(T0)]);
    c.store.fail_with = Some("storage down".into());
    c.now = T0 + CATALOG_FENCE_GRACE_MS;
    assert!(c.fire());
    assert_eq!(c.alarm, Some(c.now + 1000));
    c.store.fail_with = None;
    assert!(c.fire());
    assert!(c.store.keys().is_empty());
}

#[test]
fn a_refreshed_fence_outlives_the_old_gc_entry() {
    // The fence's compactAt is kept by a second expiry, so an entry only removes a fence
    // carrying its own compactAt; simulate a fence rewritten with a later compactAt.
    let mut c = Shard::new();
    c.ok("expireRun", vec![s("wrun_1"), run_keys("wrun_1", 1), n(T0)]);
    let later = T0 + 2 * CATALOG_FENCE_GRACE_MS;
    c.store.data.insert("expired:wrun_1".into(), format!(r#"{{"expiredAt":1,"compactAt":{later}}}"#).into());
    c.now = T0 + CATALOG_FENCE_GRACE_MS;
    assert!(c.fire());
    assert_eq!(c.store.keys(), ["expired:wrun_1"]);
}

#[test]
fn delete_stale_global_run_is_compare_and_delete() {
    let mut c = Shard::new();
    let lease = c.lease();
    c.upsert("wrun_1", 1000, "pending", lease);
    let key = keys::runall(1000, "wrun_1");
    let value = meta("wrun_1", "pending");
    let older = meta("wrun_1", "running");
    let del = |c: &mut Shard, run: &str, key: &str, value: &str| c.call("deleteStaleGlobalRun", vec![s(run), s(key), s(value)]);
    let deleted = |yes: bool| Ok(Value::object([("deleted", Value::Bool(yes))]));

    assert_eq!(del(&mut c, "wrun_1", &key, &older), deleted(false), "value changed since discovery");
    let exact_key = RpcError::error("Stale run catalog deletion requires the exact global run key");
    assert_eq!(del(&mut c, "wrun_1", &keys::run("wf", 1000, "wrun_1"), &value), Err(exact_key.clone()));
    assert_eq!(del(&mut c, "wrun_2", &key, &value), Err(exact_key));
    let other = meta("wrun_2", "pending");
    let mismatch = RpcError::error("Stale run catalog deletion requires matching run metadata");
    assert_eq!(del(&mut c, "wrun_1", &key, &other), Err(mismatch));
    assert_eq!(del(&mut c, "wrun_1", &key, "not json").unwrap_err().name, "SyntaxError");
    assert_eq!(del(&mut c, "wrun_1", &key, "null").unwrap_err().name, "TypeError");
    assert_eq!(c.store.keys().len(), 2);

    assert_eq!(del(&mut c, "wrun_1", &key, &value), deleted(true));
    assert_eq!(del(&mut c, "wrun_1", &key, &value), deleted(false), "already gone");
    assert_eq!(c.store.keys(), [keys::run("wf", 1000, "wrun_1")], "no fence written, per-workflow key kept");
    assert_eq!(c.alarm, None);
}

fn listed(c: &mut Shard, options: &[(&str, Value)]) -> Value {
    c.ok("list", vec![Value::object(options.iter().cloned())])
}

#[test]
fn list_pages_forward_and_reverse_with_values() {
    let mut c = Shard::new();
    let lease = c.lease();
    for i in 1..=5 {
        c.upsert(&format!("wrun_{i}"), i, "pending", lease);
    }
    let first = listed(&mut c, &[("prefix", s("runall:")), ("limit", n(2))]);
    assert_eq!(names(&first), ["runall:0000000000001:wrun_1", "runall:0000000000002:wrun_2"]);
    assert_eq!(first.get("list_complete"), Some(&Value::Bool(false)));
    assert_eq!(first.get("cursor"), Some(&s("runall:0000000000002:wrun_2")));
    let entry = first.get("keys").and_then(Value::as_array).and_then(|k| k.first()).cloned();
    assert_eq!(entry.and_then(|e| e.get("value").cloned()), Some(s(&meta("wrun_1", "pending"))));

    let cursor = first.get("cursor").cloned().unwrap_or(Value::Null);
    let rest = listed(&mut c, &[("prefix", s("runall:")), ("limit", n(3)), ("cursor", cursor)]);
    assert_eq!(names(&rest).len(), 3);
    assert_eq!(rest.get("list_complete"), Some(&Value::Bool(true)));
    assert_eq!(rest.get("cursor"), None, "omitted when complete");

    let back = listed(&mut c, &[("prefix", s("runall:")), ("limit", n(2)), ("reverse", Value::Bool(true))]);
    assert_eq!(names(&back), ["runall:0000000000005:wrun_5", "runall:0000000000004:wrun_4"]);
    let cursor = back.get("cursor").cloned().unwrap_or(Value::Null);
    let more = listed(&mut c, &[("prefix", s("runall:")), ("limit", n(5)), ("reverse", Value::Bool(true)), ("cursor", cursor)]);
    assert_eq!(names(&more), ["runall:0000000000003:wrun_3", "runall:0000000000002:wrun_2", "runall:0000000000001:wrun_1"]);

    // `end` bounds a forward page; in reverse it is the start, ignored once a cursor is given.
    let end = s("runall:0000000000003");
    let bounded = listed(&mut c, &[("prefix", s("runall:")), ("end", end.clone())]);
    assert_eq!(names(&bounded).len(), 2);
    let from_end = listed(&mut c, &[("prefix", s("runall:")), ("end", end.clone()), ("reverse", Value::Bool(true))]);
    assert_eq!(names(&from_end), ["runall:0000000000002:wrun_2", "runall:0000000000001:wrun_1"]);
    let cursor_wins = listed(&mut c, &[("prefix", s("runall:")), ("end", end), ("reverse", Value::Bool(true)), ("cursor", s("runall:9"))]);
    assert_eq!(names(&cursor_wins).len(), 5);
    // An empty cursor counts as none in reverse (`workflow inspect runs` sends `""`): the
    // newest first, as without one; forward it already bounds nothing.
    let empty = listed(&mut c, &[("prefix", s("runall:")), ("limit", n(2)), ("reverse", Value::Bool(true)), ("cursor", s(""))]);
    assert_eq!(names(&empty), ["runall:0000000000005:wrun_5", "runall:0000000000004:wrun_4"]);
    assert_eq!(empty.get("cursor"), Some(&s("runall:0000000000004:wrun_4")));
    assert_eq!(names(&listed(&mut c, &[("prefix", s("runall:")), ("cursor", s(""))])).len(), 5);

    // Exactly `limit` remaining: complete, no cursor. Limits clamp to at least one.
    let exact = listed(&mut c, &[("prefix", s("run:wf:")), ("limit", n(5))]);
    assert_eq!((names(&exact).len(), exact.get("list_complete"), exact.get("cursor")), (5, Some(&Value::Bool(true)), None));
    assert_eq!(names(&listed(&mut c, &[("prefix", s("run:")), ("limit", n(-4))])).len(), 1);
    // No options: everything (up to 1001).
    assert_eq!(names(&c.ok("list", vec![])).len(), 10);
    assert_eq!(c.call("list", vec![Value::Null]).unwrap_err().name, "TypeError");
}

#[test]
fn utf8_byte_order() {
    let mut c = Shard::new();
    let lease = c.lease();
    for wf in ["a", "B", "\u{e000}", "\u{1f600}"] {
        let keys = Value::Array(vec![s(&format!("run:{wf}:1:wrun_x")), s(&format!("runall:{wf}"))]);
        c.ok("upsertRun", vec![s("wrun_x"), keys, s("{}"), n(lease)]);
    }
    let page = listed(&mut c, &[("prefix", s("run:"))]);
    assert_eq!(names(&page), ["run:B:1:wrun_x", "run:a:1:wrun_x", "run:\u{e000}:1:wrun_x", "run:\u{1f600}:1:wrun_x"]);
}

#[test]
fn runs_spread_over_all_sixteen_shards_two_keys_each() {
    let mut shards: BTreeMap<String, Shard> = BTreeMap::new();
    for i in 0..128 {
        let run = format!("wrun_{i:04}");
        let shard = shards.entry(shard::run_catalog(&run)).or_insert_with(Shard::new);
        let lease = shard.lease();
        assert_eq!(shard.upsert(&run, i, "pending", lease), stored(true));
    }
    assert_eq!(shards.len(), 16);
    assert_eq!(shards.values().map(|sh| sh.store.keys().len()).sum::<usize>(), 256);
    for (name, sh) in &shards {
        for key in sh.store.keys() {
            let run = key.rsplit(':').next().unwrap_or_default();
            assert_eq!(&shard::run_catalog(run), name);
        }
    }
}

#[test]
fn unknown_methods_are_not_functions() {
    let mut c = Shard::new();
    assert_eq!(c.call("get", vec![]).unwrap_err(), RpcError::type_error("RunCatalogDO.get is not a function"));
}

#[test]
fn upsert_key_for_the_legacy_facade() {
    let mut c = Shard::new();
    let key = keys::run("wf", 5, "wrun_1");
    assert_eq!(c.ok("upsertKey", vec![s("wrun_1"), s(&key), s("{}")]), stored(true));
    assert_eq!(c.store.text(&key), Some("{}"));
    assert_eq!(c.ok("upsertKey", vec![s("wrun_1"), s("correlation:x:5:e:wrun_1"), s("{}")]), stored(true));
    for other in ["kv:x", "expired:wrun_1", "expiry-gc:0:wrun_1"] {
        let err = c.call("upsertKey", vec![s("wrun_1"), s(other), s("{}")]).unwrap_err();
        assert_eq!(err.message, format!("Run catalog cannot hold key {other}"));
    }
    c.ok("expireRun", vec![s("wrun_1"), run_keys("wrun_1", 5), n(T0)]);
    assert_eq!(c.ok("upsertKey", vec![s("wrun_1"), s(&key), s("{}")]), stored(false));
    assert_eq!(c.store.text(&key), None);
}

#[test]
fn expire_keys_fences_and_deletes_any_catalog_key_once() {
    let mut c = Shard::new();
    let run = keys::run("wf", 5, "wrun_1");
    let corr = "correlation:c:5:e:wrun_1";
    for key in [run.as_str(), corr] {
        c.ok("upsertKey", vec![s("wrun_1"), s(key), s("{}")]);
    }
    c.store.data.insert("kv:x".into(), "1".into());
    let names = Value::Array(vec![s(&run), s(&run), s(corr), s("kv:x"), s("missing:key"), n(5)]);
    assert_eq!(c.ok("expireKeys", vec![s("wrun_1"), names.clone(), n(T0)]), Value::object([("deleted", n(2))]));
    assert_eq!(c.store.text("kv:x"), Some("1"), "not a catalog key: left alone");
    assert_eq!((c.count("expired:"), c.count("expiry-gc:")), (1, 1));
    assert_eq!(c.alarm, Some(T0 + crate::protocol::lifecycle::CATALOG_FENCE_GRACE_MS));
    assert_eq!(c.ok("upsertKey", vec![s("wrun_1"), s(corr), s("{}")]), stored(false), "behind the fence");
    assert_eq!(c.ok("expireKeys", vec![s("wrun_1"), names, n(T0)]), Value::object([("deleted", n(0))]), "idempotent");
    assert_eq!(c.count("expiry-gc:"), 1, "a refreshed fence keeps its compaction entry");
    let err = c.call("expireKeys", vec![s("wrun_1"), s(&run), n(T0)]).unwrap_err();
    assert_eq!(err, RpcError::type_error("Run catalog expiry requires an array of keys"));
}

// ---- `upsertRunKey` under a lifecycle lease (`super::lease`) ----

mod run_key_lease {
    use std::cell::{Cell, RefCell};

    use super::super::lease::{plan, Plan};
    use crate::protocol::leases::{run_is_expired, LifecycleCache, LifecycleHost};
    use crate::testing::block_on;
    use crate::wire::{RpcError, Value};

    /// A run DO that answers `leaseLifecycle` with `status` and a lease of `lease_ms`.
    struct Runs {
        status: RefCell<&'static str>,
        lease_ms: Option<i64>,
        now: Cell<i64>,
        asked: Cell<u32>,
    }

    impl LifecycleHost for Runs {
        async fn lifecycle_status(&self, _run_id: &str) -> Result<Value, RpcError> {
            unreachable!("a shard that knows its name asks for a lease")
        }
        async fn lifecycle_lease(&self, _run_id: &str) -> Result<Option<Value>, RpcError> {
            self.asked.set(self.asked.get() + 1);
            let status = *self.status.borrow();
            let until = match self.lease_ms {
                Some(ms) if status == "active" || status == "terminal" => Value::num((self.now.get() + ms) as f64),
                _ => Value::Null,
            };
            Ok(Some(Value::object([("status", Value::str(status)), ("leaseUntil", until)])))
        }
        fn now(&self) -> i64 {
            self.now.get()
        }
    }

    #[test]
    fn a_shard_asks_once_per_lease_and_remembers_expiry() {
        let runs = Runs { status: RefCell::new("active"), lease_ms: Some(60_000), now: Cell::new(1_000), asked: Cell::new(0) };
        let cache = LifecycleCache::default();
        assert_eq!(plan(&cache, "wrun_a", 1_000), Plan::Ask);
        assert!(!block_on(run_is_expired(&runs, &cache, "wrun_a")).unwrap());
        assert_eq!(runs.asked.get(), 1);
        // Five more status changes within the lease: no ask.
        for t in [2_000, 30_000, 60_999] {
            assert_eq!(plan(&cache, "wrun_a", t), Plan::Upsert);
        }
        assert_eq!(plan(&cache, "wrun_a", 61_000), Plan::Ask, "a lease ends at its until");
        // A revocation takes it back at once.
        assert!(cache.revoke("wrun_a"));
        assert_eq!(plan(&cache, "wrun_a", 2_000), Plan::Ask);
        // Another run is asked about on its own.
        assert_eq!(plan(&cache, "wrun_b", 2_000), Plan::Ask);
        // An expired run is refused from then on without asking.
        *runs.status.borrow_mut() = "expired";
        assert!(block_on(run_is_expired(&runs, &cache, "wrun_a")).unwrap());
        assert_eq!(plan(&cache, "wrun_a", 2_000), Plan::Refuse);
        assert!(cache.held(2_000).is_empty());
    }

    #[test]
    fn a_missing_run_is_asked_about_every_time() {
        let runs = Runs { status: RefCell::new("missing"), lease_ms: Some(60_000), now: Cell::new(1_000), asked: Cell::new(0) };
        let cache = LifecycleCache::default();
        for _ in 0..3 {
            assert!(!block_on(run_is_expired(&runs, &cache, "wrun_m")).unwrap());
            assert_eq!(plan(&cache, "wrun_m", 1_000), Plan::Ask);
        }
        assert_eq!(runs.asked.get(), 3);
    }
}
