//! The partitioned queue binding over real queue cores (one in-memory store per instance).

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::*;
use crate::config::Config;
use crate::protocol::hop::{Args, Ctx};
use crate::queue::state::put_value;
use crate::store::alarm::Alarm;
use crate::store::MemoryStore;
use crate::testing::block_on;

const T0: i64 = 1_800_000_000_000;

#[derive(Default)]
struct Fleet {
    objects: RefCell<BTreeMap<String, (MemoryStore, Option<i64>)>>,
    calls: RefCell<Vec<String>>,
}

impl PartitionHost for Fleet {
    async fn call(&self, instance: &str, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        self.calls.borrow_mut().push(format!("{instance}.{method}"));
        // As a hop carries them (`shell::call::call_env`): encoded, then decoded.
        let args = match Value::parse(&Value::Array(args).to_json()?).map_err(|e| RpcError::error(e.0))? {
            Value::Array(args) => args,
            other => panic!("{other:?}"),
        };
        let config = Config::default();
        let ctx = Ctx { now: T0, name: instance, config: &config };
        let mut objects = self.objects.borrow_mut();
        let (store, at) = objects.entry(instance.to_string()).or_insert_with(|| (MemoryStore::new(), None));
        let mut alarm = if crate::queue::reads_alarm(method) { Alarm::new(*at) } else { Alarm::unknown() };
        let out = store.transaction(|s| Ok(crate::queue::call(s, &ctx, &mut alarm, method, Args(&args))))?;
        if out.is_ok() {
            if let Some(change) = alarm.change() {
                *at = change.time();
            }
        }
        out
    }
}

fn request(id: &str, key: Option<&str>, run: &str) -> Value {
    let mut members = vec![
        ("messageId", Value::str(id)),
        ("queueName", Value::str("__wkf_workflow_x")),
        ("pathname", Value::str("flow")),
        ("body", Value::str("{}")),
        ("runId", Value::str(run)),
        ("config", Value::object([("targetBaseUrl", Value::str("http://app.internal:3000")), ("queueShards", Value::num(1.0))])),
    ];
    if let Some(k) = key {
        members.push(("idempotencyKey", Value::str(k)));
    }
    Value::object(members)
}

fn q(f: &Fleet, method: &str, args: Vec<Value>) -> Value {
    block_on(call(f, "q:0", method, args, 4, 4)).unwrap()
}

#[test]
fn enqueues_spread_by_dedup_key_and_stats_answer_for_the_whole_shard() {
    let f = Fleet::default();
    for i in 0..40 {
        let answer = q(&f, "enqueue", vec![request(&format!("msg_{i:03}"), None, "wrun_a")]);
        assert!(answer.get("messageId").is_some() || answer.get("ok").is_some(), "{answer:?}");
    }
    let used: Vec<String> = f.objects.borrow().keys().cloned().collect();
    assert_eq!(used, ["q:0", "q:0~1", "q:0~2", "q:0~3"], "40 ids reach all four partitions");
    // The same idempotency key under other message ids: one partition, deduplicated there.
    for i in 0..5 {
        q(&f, "enqueue", vec![request(&format!("dup_{i}"), Some("step_once"), "wrun_a")]);
    }
    let stats = q(&f, "stats", vec![]);
    assert_eq!(stats.get("pending").and_then(Value::as_f64), Some(41.0), "{stats:?}");
    assert_eq!(stats.get("deadLetters").and_then(Value::as_f64), Some(0.0));
    assert!(stats.get("alarmAt").and_then(Value::as_f64).is_some(), "the earliest partition alarm");
}

#[test]
fn a_runs_expiry_fences_every_partition_and_each_acknowledges_its_own_receipt() {
    let f = Fleet::default();
    for i in 0..12 {
        q(&f, "enqueue", vec![request(&format!("msg_{i:03}"), None, "wrun_x")]);
    }
    let options = Value::object([("limit", Value::num(64.0))]);
    let expired = q(&f, "expireRun", vec![Value::str("wrun_x"), Value::num(T0 as f64), options]);
    assert_eq!(expired.get("deleted").and_then(Value::as_f64), Some(12.0));
    assert_eq!(expired.get("done"), Some(&Value::Bool(true)));
    // The receipt one object would give: the counts summed, the expiry's date.
    let receipt = expired.get("receipt").cloned().unwrap();
    assert_eq!(receipt, Value::object([("deleted", Value::num(12.0)), ("expiredAt", Value::num(T0 as f64))]));
    // Every partition refuses the run's messages now, whichever the key lands on.
    for i in 0..8 {
        let late = q(&f, "enqueue", vec![request(&format!("late_{i}"), None, "wrun_x")]);
        assert_eq!(late.get("code"), Some(&Value::str("RUN_EXPIRED")), "{late:?}");
    }
    // A receipt that is not the fences' (another count, another date) changes nothing.
    for wrong in [
        Value::object([("deleted", Value::num(13.0)), ("expiredAt", Value::num(T0 as f64))]),
        Value::object([("deleted", Value::num(12.0)), ("expiredAt", Value::num(1.0))]),
        Value::object([("expiredAt", Value::num(T0 as f64))]),
        Value::Null,
    ] {
        let refused = q(&f, "acknowledgeExpireRun", vec![Value::str("wrun_x"), wrong]);
        assert_eq!(refused, Value::object([("acknowledged", Value::Bool(false))]));
    }
    assert_eq!(f.calls.borrow().iter().filter(|c| c.ends_with(".acknowledgeExpireRun")).count(), 0);
    let ack = q(&f, "acknowledgeExpireRun", vec![Value::str("wrun_x"), receipt.clone()]);
    assert_eq!(ack, Value::object([("acknowledged", Value::Bool(true))]));
    let acks = f.calls.borrow().iter().filter(|c| c.ends_with(".acknowledgeExpireRun")).count();
    assert_eq!(acks, 4, "each partition its own receipt");
    // Again (the fences are compactable, not yet compacted): acknowledged, as one object.
    assert_eq!(q(&f, "acknowledgeExpireRun", vec![Value::str("wrun_x"), receipt]), Value::object([("acknowledged", Value::Bool(true))]));
    // A receipt of the older merged shape is still acknowledged partition by partition.
    let older = Value::object([(
        RECEIPT_PARTITIONS,
        Value::Array(vec![Value::object([("expiredAt", Value::num(1.0)), ("deleted", Value::num(99.0))])]),
    )]);
    let refused = q(&f, "acknowledgeExpireRun", vec![Value::str("wrun_x"), older]);
    assert_eq!(refused, Value::object([("acknowledged", Value::Bool(false))]));
}

#[test]
fn an_expiry_with_an_invalid_date_reaches_every_partition() {
    let f = Fleet::default();
    let expired = q(&f, "expireRun", vec![Value::str("wrun_bad"), Value::Date(None)]);
    assert_eq!(expired, Value::object([("deleted", Value::num(0.0))]));
    assert_eq!(f.calls.borrow().iter().filter(|c| c.ends_with(".expireRun")).count(), 4);
}

#[test]
fn an_acknowledgement_counts_partitions_already_compacted() {
    let at = Value::num(5.0);
    let own = |n: f64| Value::object([("deleted", Value::num(n)), ("expiredAt", at.clone())]);
    let given = Value::object([("deleted", Value::num(5.0)), ("expiredAt", at.clone())]);
    // Partition 1 compacted its fence: the others' counts are within the receipt's.
    assert_eq!(ack_plan(Some(&given), &[own(2.0), Value::Null, own(1.0)]), Some(vec![(0, own(2.0)), (2, own(1.0))]));
    assert_eq!(ack_plan(Some(&given), &[Value::Null, Value::Null]), Some(vec![]), "every fence compacted");
    assert_eq!(ack_plan(Some(&given), &[own(4.0), own(2.0)]), None, "a fence moved on");
    assert_eq!(ack_plan(Some(&given), &[own(2.0), own(2.0)]), None, "every fence there, another count");
}

/// A dead letter as the queue writes it, straight into a partition's store.
fn dead_letter(f: &Fleet, instance: &str, id: &str, failed_at: i64) {
    let mut objects = f.objects.borrow_mut();
    let (store, _) = objects.entry(instance.to_string()).or_insert_with(|| (MemoryStore::new(), None));
    let row = Value::object([
        ("messageId", Value::str(id)),
        ("queueName", Value::str("__wkf_workflow_x")),
        ("attempt", Value::num(5.0)),
        ("lastError", Value::str("HTTP 500")),
        ("failedAt", Value::num(failed_at as f64)),
    ]);
    put_value(store, &dlq_key(failed_at, id), &row).unwrap();
}

#[test]
fn dead_letters_page_across_partitions_in_one_order_with_stable_cursors() {
    let f = Fleet::default();
    // 30 dead letters, spread unevenly, interleaved in time.
    for i in 0..30i64 {
        let instance = partition_name("q:0", [0, 1, 1, 3][(i % 4) as usize]);
        dead_letter(&f, &instance, &format!("dead_{i:02}"), T0 + i * 1000);
    }
    let mut seen = Vec::new();
    let mut cursor: Option<Value> = None;
    loop {
        let mut params = vec![("limit", Value::num(7.0))];
        if let Some(c) = &cursor {
            params.push(("cursor", c.clone()));
        }
        let page = q(&f, "listDeadLetters", vec![Value::object(params)]);
        let data = page.get("data").and_then(Value::as_array).cloned().unwrap();
        assert!(data.len() <= 7);
        seen.extend(data.iter().map(|r| to_js_string(r.get("messageId"))));
        if page.get("hasMore") != Some(&Value::Bool(true)) {
            assert_eq!(page.get("cursor"), Some(&Value::Null));
            break;
        }
        cursor = page.get("cursor").cloned();
        assert!(seen.len() < 40, "paging does not end");
    }
    let want: Vec<String> = (0..30).map(|i| format!("dead_{i:02}")).collect();
    assert_eq!(seen, want, "every dead letter once, oldest first");
    assert_eq!(q(&f, "stats", vec![]).get("deadLetters").and_then(Value::as_f64), Some(30.0));
    // Purge answers for the whole shard.
    let purged = q(&f, "purgeDeadLetters", vec![]);
    assert_eq!(purged, Value::object([("purged", Value::num(30.0)), ("hasMore", Value::Bool(false))]));
}

#[test]
fn merges_of_answers() {
    let stats = merge_stats(&[
        Value::object([
            ("pending", Value::num(2.0)),
            ("inflight", Value::num(1.0)),
            ("deadLetters", Value::num(0.0)),
            ("alarmAt", Value::Null),
        ]),
        Value::object([
            ("pending", Value::num(3.0)),
            ("inflight", Value::num(0.0)),
            ("deadLetters", Value::num(4.0)),
            ("alarmAt", Value::num(50.0)),
        ]),
        Value::object([
            ("pending", Value::num(0.0)),
            ("inflight", Value::num(0.0)),
            ("deadLetters", Value::num(0.0)),
            ("alarmAt", Value::num(20.0)),
        ]),
    ]);
    assert_eq!(
        stats,
        Value::object([
            ("pending", Value::num(5.0)),
            ("inflight", Value::num(1.0)),
            ("deadLetters", Value::num(4.0)),
            ("alarmAt", Value::num(20.0))
        ])
    );
    assert_eq!(merge_rearm(&[Value::object([("alarmAt", Value::Null)])]), Value::object([("alarmAt", Value::Null)]));
    assert_eq!(
        merge_redrive(&[Value::object([("ok", Value::Bool(false))]), Value::object([("ok", Value::Bool(true))])]),
        Value::object([("ok", Value::Bool(true))])
    );
    // The 0.3 (unpaged) expiry: only the count.
    assert_eq!(
        merge_expire(&[Value::object([("deleted", Value::num(2.0))]), Value::object([("deleted", Value::num(1.0))])]),
        Value::object([("deleted", Value::num(3.0))])
    );
    // Paged, one partition not done: no receipt yet.
    let half = merge_expire(&[
        Value::object([
            ("deleted", Value::num(2.0)),
            ("done", Value::Bool(true)),
            ("receipt", Value::object([("deleted", Value::num(2.0))])),
        ]),
        Value::object([("deleted", Value::num(64.0)), ("done", Value::Bool(false))]),
    ]);
    assert_eq!(half, Value::object([("deleted", Value::num(66.0)), ("done", Value::Bool(false))]));
    assert!(fans_out("stats") && !fans_out("enqueue") && !fans_out("courierSync"));
    // Only a receipt of the older merged shape is acknowledged as it says.
    assert_eq!(ack_calls("q:1", &[Value::str("r"), Value::num(5.0)]), None);
}
