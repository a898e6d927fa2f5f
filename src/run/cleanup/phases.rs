//! The cleanup loop's storage steps (retention.md §3–4), each one transaction.

use super::record::Phase;
use crate::run::keys;
use crate::run::records::Record;
use crate::store::alarm::Alarm;
use crate::store::{put_json, ListOptions, Store};
use crate::wire::js::to_js_string;
use crate::wire::{Map, RpcError, Value};

/// Payload keys deleted per batch (one transaction, one alarm each).
pub const PAYLOAD_BATCH: usize = 256;
/// Queue shards the queues phase visits at most. The client uses a handful; the bound keeps
/// a corrupt or hostile `queueShards` from turning one phase into millions of calls.
pub const MAX_QUEUE_SHARDS: u32 = 1024;
/// Queue shards one step of the queues phase visits (one `expireRun` call each, ~10 ms):
/// more continue from the next alarm, as payload batches do, so one `cleanupNow` or alarm
/// invocation stays short whatever `queueShards` says.
pub const QUEUE_SHARDS_PER_STEP: u32 = 32;
/// Retry delay cap after a failed phase.
pub const MAX_RETRY_DELAY_MS: i64 = 3_600_000;

/// What the loop must do next outside storage.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Nothing more now (finished, not yet due, or a payload batch was deleted and the
    /// alarm continues).
    Stop,
    /// Expire the run in the index ([`super::index_phase`]: its catalog shard, hook
    /// shards and the archive), then `index` → `streams`.
    Index { request: Value },
    /// Expire the run's streams (registry, each stream, finalize), then `streams` → `queues`.
    Streams { run_id: String, due_ms: i64 },
    /// Call `expireRun(runId, dueMs)` on shards `from..shards` (at most
    /// `QUEUE_SHARDS_PER_STEP` of them now), adding to `purged`; when the last shard is
    /// done, `queues` → `payload`.
    Queues { run_id: String, due_ms: i64, shards: u32, from: u32, purged: f64 },
}

fn load(store: &mut dyn Store) -> Result<Option<Record>, RpcError> {
    Record::load(store, keys::RETENTION_CLEANUP)
}

/// Change phase `expected` → `next` with `extra` members, if the record is still in
/// `expected` (retention.md §4). Returns whether it changed.
pub fn change_phase(store: &mut dyn Store, expected: Phase, next: Phase, extra: Map) -> Result<bool, RpcError> {
    let Some(mut record) = load(store)? else { return Ok(false) };
    if Phase::of(&record) != Some(expected) {
        return Ok(false);
    }
    record.0.extend(extra);
    record.0.insert("phase".into(), Value::str(next.name()));
    record.0.insert("attempts".into(), Value::num(0));
    record.0.remove("lastError");
    record.save(store, keys::RETENTION_CLEANUP)?;
    Ok(true)
}

/// Record a failed phase: count it, keep the message, retry after a capped exponential
/// backoff (1 s, 2 s, 4 s, … 1 h). The phase stays, so the retry resumes it.
pub fn record_failure(store: &mut dyn Store, now: i64, message: &str, alarm: &mut Alarm) -> Result<(), RpcError> {
    let Some(mut record) = load(store)? else { return Ok(()) };
    if Phase::of(&record) == Some(Phase::Tombstoned) {
        return Ok(());
    }
    let attempts = record.num("attempts").filter(|n| n.is_finite()).unwrap_or(0.0) + 1.0;
    record.0.insert("attempts".into(), Value::num(attempts));
    record.0.insert("lastError".into(), Value::str(message));
    record.0.insert("lastAttemptAt".into(), Value::date(now));
    record.save(store, keys::RETENTION_CLEANUP)?;
    let exponent = (attempts - 1.0).clamp(0.0, 12.0) as u32;
    let delay = (1000i64 << exponent).min(MAX_RETRY_DELAY_MS);
    alarm.set(now.saturating_add(delay));
    Ok(())
}

/// The queues phase got as far as shard `next` (exclusive) with `purged` messages deleted:
/// kept for the next step, which the alarm runs at once. Only while the phase is `queues`.
pub fn store_queue_progress(store: &mut dyn Store, now: i64, next: u32, purged: f64, alarm: &mut Alarm) -> Result<(), RpcError> {
    let Some(record) = load(store)? else { return Ok(()) };
    if Phase::of(&record) == Some(Phase::Queues) {
        let progress = Value::object([("next", Value::num(next)), ("purged", Value::num(purged))]);
        put_json(store, keys::RETENTION_QUEUES_PROGRESS, &progress)?;
        alarm.set(now + 1);
    }
    Ok(())
}

/// The queues phase is over: `queues` → `payload` with the total, progress dropped.
pub fn finish_queues(store: &mut dyn Store, purged: f64) -> Result<bool, RpcError> {
    store.delete(keys::RETENTION_QUEUES_PROGRESS)?;
    let mut extra = Map::new();
    extra.insert("deletedQueueMessages".into(), Value::num(purged));
    change_phase(store, Phase::Queues, Phase::Payload, extra)
}

/// The streams phase's count, stored only while the phase is still `streams`.
pub fn store_deleted_streams(store: &mut dyn Store, deleted: f64) -> Result<(), RpcError> {
    let Some(mut record) = load(store)? else { return Ok(()) };
    if Phase::of(&record) == Some(Phase::Streams) {
        record.0.insert("deletedStreams".into(), Value::num(deleted));
        record.save(store, keys::RETENTION_CLEANUP)?;
    }
    Ok(())
}

/// 13-digit creation ms as the client's IndexDO run keys embed them.
fn run_keys(record: &Record, run_id: &str) -> [String; 2] {
    let created = record.date("createdAt").map(keys::ms13).unwrap_or_else(|| "NaN".into());
    let workflow = to_js_string(record.get("workflowName"));
    [format!("run:{workflow}:{created}:{run_id}"), format!("runall:{created}:{run_id}")]
}

fn values(store: &mut dyn Store, prefix: &str) -> Result<Vec<Value>, RpcError> {
    store
        .list(&ListOptions::prefix(prefix))?
        .into_iter()
        .map(|(k, text)| serde_json::from_str::<Value>(&text).map_err(|e| RpcError::error(format!("corrupt record at {k}: {e}"))))
        .collect()
}

/// The `index.expireRun` request: both run keys, every recorded IndexDO key and hook.
fn index_request(store: &mut dyn Store, record: &Record, run_id: &str, due_ms: i64) -> Result<Value, RpcError> {
    let mut keys_list: Vec<Value> = run_keys(record, run_id).into_iter().map(Value::String).collect();
    keys_list.extend(values(store, keys::RETENTION_INDEX_PREFIX)?);
    let hooks = values(store, keys::RETENTION_HOOK_PREFIX)?;
    Ok(Value::object([
        ("runId", Value::str(run_id)),
        ("keys", Value::Array(keys_list)),
        ("hooks", Value::Array(hooks)),
        ("expiredAt", Value::num(due_ms as f64)),
    ]))
}

/// One payload batch. Returns how many keys it deleted.
fn payload_batch(store: &mut dyn Store, record: &mut Record, run_id: &str, now: i64) -> Result<usize, RpcError> {
    // Two more than a batch, since the two retention keys are listed too.
    let listed = store.list_keys(&ListOptions::default().limit(PAYLOAD_BATCH + 3))?;
    let doomed: Vec<String> =
        listed.into_iter().filter(|k| k != keys::RETENTION_CLEANUP && k != keys::RETENTION_TOMBSTONE).take(PAYLOAD_BATCH).collect();
    let mut tombstone = Map::new();
    tombstone.insert("version".into(), Value::num(1));
    tombstone.insert("runId".into(), Value::str(run_id));
    for (member, from) in [("terminalStatus", "terminalStatus"), ("completedAt", "completedAt"), ("expiredAt", "dueAt")] {
        tombstone.insert(member.into(), record.get(from).cloned().unwrap_or(Value::Null));
    }
    tombstone.insert("tombstonedAt".into(), Value::date(now));
    put_json(store, keys::RETENTION_TOMBSTONE, &Value::Object(tombstone))?;
    for k in &doomed {
        store.delete(k)?;
    }
    if !doomed.is_empty() {
        let total = record.num("deletedPayloadKeys").filter(|n| n.is_finite()).unwrap_or(0.0) + doomed.len() as f64;
        record.0.insert("deletedPayloadKeys".into(), Value::num(total));
        record.0.remove("lastError");
        record.save(store, keys::RETENTION_CLEANUP)?;
    }
    Ok(doomed.len())
}

/// Advance the loop through every phase that needs only this object's storage, and say
/// what to do next (retention.md §3 steps 1–2 and 6; 3–5 are returned as [`Step`]s).
pub fn next_step(store: &mut dyn Store, now: i64, alarm: &mut Alarm) -> Result<Step, RpcError> {
    loop {
        let Some(mut record) = load(store)? else {
            alarm.delete();
            return Ok(Step::Stop);
        };
        let run_id = to_js_string(record.get("runId"));
        let due_ms = record.date("dueAt").unwrap_or(0);
        let phase =
            Phase::of(&record).ok_or_else(|| RpcError::error(format!("unknown cleanup phase {}", to_js_string(record.get("phase")))))?;
        match phase {
            Phase::Tombstoned => {
                alarm.delete();
                return Ok(Step::Stop);
            }
            Phase::Retained => {
                if record.date("dueAt").is_some_and(|d| d > now) {
                    alarm.set(due_ms);
                    return Ok(Step::Stop);
                }
                change_phase(store, Phase::Retained, Phase::Index, Map::new())?;
            }
            Phase::Index => {
                return Ok(Step::Index { request: index_request(store, &record, &run_id, due_ms)? });
            }
            Phase::Streams => return Ok(Step::Streams { run_id, due_ms }),
            Phase::Queues => {
                let shards = record.num("queueShards").unwrap_or(f64::NAN);
                let shards = if shards > 0.0 { shards.ceil().min(f64::from(MAX_QUEUE_SHARDS)) as u32 } else { 0 };
                let progress = store.get(keys::RETENTION_QUEUES_PROGRESS)?.and_then(|t| serde_json::from_str::<Value>(&t).ok());
                let member =
                    |k: &str| progress.as_ref().and_then(|p| p.get(k)).and_then(Value::as_f64).filter(|n| n.is_finite() && *n >= 0.0);
                let from = member("next").map_or(0, |n| n.min(f64::from(shards)) as u32);
                let purged = member("purged").unwrap_or(0.0);
                return Ok(Step::Queues { run_id, due_ms, shards, from, purged });
            }
            Phase::Payload => {
                if payload_batch(store, &mut record, &run_id, now)? > 0 {
                    alarm.set(now + 1);
                    return Ok(Step::Stop);
                }
                let mut extra = Map::new();
                extra.insert("tombstonedAt".into(), Value::date(now));
                change_phase(store, Phase::Payload, Phase::Tombstoned, extra)?;
                alarm.delete();
            }
        }
    }
}
