//! The sweep against the real catalog core (16 in-memory shards) and scripted run DOs.

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::*;
use crate::config::Config;
use crate::protocol::hop::{Args, Ctx};
use crate::store::alarm::Alarm;
use crate::store::MemoryStore;
use crate::testing::block_on;

const NOW: i64 = 1_767_323_045_000;

#[derive(Default)]
struct Fleet {
    catalogs: RefCell<BTreeMap<String, MemoryStore>>,
    /// runId → the state `enforceRetention` answers (`Err` text: it throws).
    runs: RefCell<BTreeMap<String, Result<&'static str, &'static str>>>,
    enforced: RefCell<Vec<(String, Value)>>,
    lists: RefCell<u32>,
}

impl Fleet {
    fn catalog(&self, shard: &str, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        let config = Config::default();
        let ctx = Ctx { now: NOW, name: shard, config: &config };
        let mut catalogs = self.catalogs.borrow_mut();
        let store = catalogs.entry(shard.to_string()).or_default();
        store.transaction(|s| crate::catalog::call(s, &ctx, &mut Alarm::new(None), method, Args(&args)))
    }

    /// Publish a run created at `created` (its two keys, with a valid lease).
    fn publish(&self, run_id: &str, created: i64, state: Result<&'static str, &'static str>) {
        let ms = crate::run::keys::ms13(created);
        let keys = Value::Array(vec![Value::String(format!("run:wf:{ms}:{run_id}")), Value::String(format!("runall:{ms}:{run_id}"))]);
        let meta = format!(r#"{{"runId":"{run_id}","createdAt":"x","status":"running"}}"#);
        let args = vec![Value::str(run_id), keys, Value::String(meta), Value::num((NOW + 1000) as f64)];
        let out = self.catalog(&crate::protocol::shard::run_catalog(run_id), "upsertRun", args).unwrap();
        assert_eq!(out.get("stored"), Some(&Value::Bool(true)));
        self.runs.borrow_mut().insert(run_id.to_string(), state);
    }

    fn runall(&self) -> Vec<String> {
        let mut names = Vec::new();
        for store in self.catalogs.borrow_mut().values_mut() {
            names.extend(store.keys().into_iter().filter(|k| k.starts_with("runall:")).map(str::to_string));
        }
        names.sort();
        names
    }
}

impl SweepHost for Fleet {
    async fn list_catalog(&self, shard: &str, options: Value) -> Result<Value, RpcError> {
        *self.lists.borrow_mut() += 1;
        self.catalog(shard, "list", vec![options])
    }
    async fn enforce(&self, run_id: &str, request: Value) -> Result<Value, RpcError> {
        self.enforced.borrow_mut().push((run_id.to_string(), request));
        match self.runs.borrow().get(run_id) {
            Some(Ok(state)) => Ok(Value::object([("state", Value::str(*state)), ("cleanup", Value::Null)])),
            Some(Err(message)) => Err(RpcError::error(*message)),
            None => Ok(Value::object([("state", Value::str("missing")), ("cleanup", Value::Null)])),
        }
    }
    async fn delete_stale(&self, shard: &str, run_id: &str, name: &str, value: &str) -> Result<Value, RpcError> {
        self.catalog(shard, "deleteStaleGlobalRun", vec![Value::str(run_id), Value::str(name), Value::str(value)])
    }
}

fn vars(ms: &'static str, batch: &'static str) -> impl Fn(&str) -> Option<String> {
    move |k: &str| match k {
        "WORKFLOW_RETENTION_MS" => Some(ms.to_string()),
        "WORKFLOW_RETENTION_BATCH_SIZE" => Some(batch.to_string()),
        "WORKFLOW_RETENTION_QUEUE_SHARDS" => Some("2".to_string()),
        _ => None,
    }
}

#[test]
fn disabled_policy_does_no_catalog_work() {
    let fleet = Fleet::default();
    fleet.publish("wrun_old", NOW - 10_000, Ok("expired"));
    let out = block_on(sweep(&fleet, vars("0", "nonsense"), NOW as f64)).unwrap();
    assert!(out.disabled);
    assert_eq!(out.to_value().get("cutoff"), Some(&Value::Null));
    assert_eq!(*fleet.lists.borrow(), 0);
    let early = block_on(sweep(&fleet, vars("5000", "1"), 4000.0)).unwrap();
    assert_eq!((early.disabled, early.cutoff, early.scanned), (false, Some(-1000), 0));
    assert_eq!(*fleet.lists.borrow(), 0);
}

#[test]
fn bad_inputs_throw() {
    let fleet = Fleet::default();
    let err = block_on(sweep(&fleet, vars("5000", "128"), -1.0)).unwrap_err();
    assert_eq!(err.message, "world-celld: scheduledTime must be a non-negative safe integer");
    let err = block_on(sweep(&fleet, vars("5000", "0"), NOW as f64)).unwrap_err();
    assert_eq!(err.message, "world-celld: WORKFLOW_RETENTION_BATCH_SIZE must be an integer between 1 and 1000");
}

#[test]
fn old_runs_are_enforced_and_young_ones_untouched() {
    let fleet = Fleet::default();
    for (i, state) in ["expired", "scheduled", "expired"].into_iter().enumerate() {
        fleet.publish(&format!("wrun_old_{i}"), NOW - 10_000 + i as i64, Ok(state));
    }
    fleet.publish("wrun_young", NOW - 1000, Ok("expired"));
    let out = block_on(sweep(&fleet, vars("5000", "128"), NOW as f64)).unwrap();
    assert_eq!(
        out,
        SweepResult { disabled: false, cutoff: Some(NOW - 5000), scanned: 3, scheduled: 1, expired: 2, missing: 0, not_due: 0 }
    );
    let enforced = fleet.enforced.borrow();
    assert_eq!(enforced.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), ["wrun_old_0", "wrun_old_1", "wrun_old_2"]);
    let request = &enforced[0].1;
    assert_eq!(request.get("retentionMs"), Some(&Value::num(5000)));
    assert_eq!(request.get("queueShards"), Some(&Value::num(2)));
    assert_eq!(request.get("scheduledTime"), Some(&Value::num(NOW as f64)));
    assert_eq!(*fleet.lists.borrow(), 16, "one page per catalog shard");
}

#[test]
fn the_cutoff_itself_is_included() {
    let fleet = Fleet::default();
    fleet.publish("wrun_at", NOW - 5000, Ok("expired"));
    fleet.publish("wrun_after", NOW - 4999, Ok("expired"));
    let out = block_on(sweep(&fleet, vars("5000", "128"), NOW as f64)).unwrap();
    assert_eq!(out.scanned, 1);
    assert_eq!(fleet.enforced.borrow()[0].0, "wrun_at");
}

#[test]
fn batches_page_through_occurrences_and_rejects_are_deleted() {
    let fleet = Fleet::default();
    // Not due / missing runs: their global entries are compare-deleted, so the next
    // occurrence sees the next ones.
    for i in 0..5 {
        fleet.publish(&format!("wrun_{i}"), NOW - 100_000 + i, Ok(if i % 2 == 0 { "not-due" } else { "missing" }));
    }
    let mut scanned = Vec::new();
    for _ in 0..4 {
        scanned.push(block_on(sweep(&fleet, vars("5000", "2"), NOW as f64)).unwrap().scanned);
    }
    assert_eq!(scanned, [2, 2, 1, 0]);
    assert!(fleet.runall().is_empty());
}

#[test]
fn one_failure_fails_the_occurrence_after_the_others_progressed() {
    let fleet = Fleet::default();
    fleet.publish("wrun_a", NOW - 9000, Ok("not-due"));
    fleet.publish("wrun_b", NOW - 8000, Err("boom"));
    fleet.publish("wrun_c", NOW - 7000, Ok("missing"));
    let err = block_on(sweep(&fleet, vars("5000", "128"), NOW as f64)).unwrap_err();
    assert_eq!(err.message, "world-celld retention sweep failed for 1 run(s)");
    assert_eq!(fleet.runall().len(), 1, "the two rejects were deleted, the failing one kept");
    fleet.runs.borrow_mut().insert("wrun_b".into(), Ok("expired"));
    let out = block_on(sweep(&fleet, vars("5000", "128"), NOW as f64)).unwrap();
    assert_eq!((out.scanned, out.expired), (1, 1));
}

#[test]
fn merge_is_in_byte_order_and_values_need_a_run_id() {
    let page = |names: &[&str]| {
        Value::object([(
            "keys",
            Value::Array(names.iter().map(|n| Value::object([("name", Value::str(*n)), ("value", Value::str("{}"))])).collect()),
        )])
    };
    let merged = merge(&[page(&["runall:2:b", "runall:3:a"]), page(&["runall:1:z", "runall:2:B"])], 3).unwrap();
    assert_eq!(merged.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["runall:1:z", "runall:2:B", "runall:2:b"]);
    assert_eq!(run_id_of(r#"{"runId":"wrun_x"}"#).unwrap(), "wrun_x");
    for bad in ["{}", r#"{"runId":""}"#, r#"{"runId":5}"#, "not json"] {
        assert_eq!(run_id_of(bad).unwrap_err().message, "world-celld: run catalog entry has no runId");
    }
    assert_eq!(list_options(NOW, 128).get("end"), Some(&Value::String(format!("runall:{}:", NOW + 1))));
}
