//! The cleanup loop (retention.md §3): storage steps ([`super::next_step`] and friends) alternated
//! with calls to the index shards and archive ([`super::index_phase`]), StreamDOs and QueueDO shards. Generic over
//! [`CleanupHost`], so the wasm shell runs it against real Durable Objects and the
//! native tests against the real cores on in-memory stores.

#![allow(async_fn_in_trait)] // hosts are single-threaded (wasm, tests): no Send bound wanted

use futures_util::future::join_all;

use super::index_phase;
use super::phases::{
    change_phase, finish_queues, next_step, record_failure, store_deleted_streams, store_queue_progress, Step, QUEUE_SHARDS_PER_STEP,
};
use super::record::{CleanupArgs, Phase};
use crate::facade::Target;
use crate::run::keys;
use crate::run::records::Record;
use crate::store::alarm::Alarm;
use crate::store::Store;
use crate::wire::router::Binding;
use crate::wire::{Map, RpcError, Value};

/// StreamDO `expireStream` calls made concurrently.
pub const STREAM_BATCH: usize = 16;

/// What the loop needs from its environment.
pub trait CleanupHost {
    /// Run `f` as one storage transaction of this run DO with a fresh clock reading
    /// (epoch ms). `Err` rolls it back; alarm changes apply after commit.
    async fn transact<T>(&self, f: impl FnOnce(&mut dyn Store, i64, &mut Alarm) -> Result<T, RpcError>) -> Result<T, RpcError>;
    /// Call a method of another Durable Object.
    async fn call(&self, binding: Binding, name: &str, method: &str, args: Vec<Value>) -> Result<Value, RpcError>;
    /// Call a method of an index instance (catalog or hook shard, or the archive).
    async fn call_index(&self, target: &Target, method: &str, args: Vec<Value>) -> Result<Value, RpcError>;
}

fn number(v: &Value, what: &str) -> Result<f64, RpcError> {
    v.as_f64().ok_or_else(|| RpcError::error(format!("unexpected {what} answer")))
}

async fn streams_phase<H: CleanupHost>(host: &H, run_id: &str, due_ms: i64) -> Result<(), RpcError> {
    let registry = format!("run-streams:{run_id}");
    let due = Value::num(due_ms as f64);
    let answer = host.call(Binding::Streams, &registry, "expireRegistry", vec![Value::str(run_id), due.clone()]).await?;
    let names: Vec<String> = answer
        .get("streams")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|n| crate::wire::js::to_js_string(Some(n))).collect())
        .unwrap_or_default();
    let mut deleted = if names.is_empty() {
        host.transact(|s, _, _| Ok(Record::load(s, keys::RETENTION_CLEANUP)?.and_then(|r| r.num("deletedStreams")).unwrap_or(0.0))).await?
    } else {
        0.0
    };
    for batch in names.chunks(STREAM_BATCH) {
        let instances: Vec<String> = batch.iter().map(|name| format!("stream:{name}")).collect();
        let calls =
            instances.iter().map(|instance| host.call(Binding::Streams, instance, "expireStream", vec![Value::str(run_id), due.clone()]));
        for result in join_all(calls).await {
            if result?.get("deleted") == Some(&Value::Bool(true)) {
                deleted += 1.0;
            }
        }
    }
    host.transact(|s, _, _| store_deleted_streams(s, deleted)).await?;
    host.call(Binding::Streams, &registry, "finalizeRegistry", vec![Value::str(run_id)]).await?;
    host.transact(|s, _, _| change_phase(s, Phase::Streams, Phase::Queues, Map::new())).await?;
    Ok(())
}

/// One step of the queues phase: shards `from..` up to [`QUEUE_SHARDS_PER_STEP`] of them.
/// Returns whether the phase finished (else its progress is stored and the alarm armed).
async fn queues_phase<H: CleanupHost>(host: &H, run_id: &str, due_ms: i64, shards: u32, from: u32, purged: f64) -> Result<bool, RpcError> {
    let mut purged = purged;
    let end = from.saturating_add(QUEUE_SHARDS_PER_STEP).min(shards);
    for shard in from..end {
        let answer =
            host.call(Binding::Queue, &format!("q:{shard}"), "expireRun", vec![Value::str(run_id), Value::num(due_ms as f64)]).await?;
        purged += answer.get("deleted").map_or(Ok(0.0), |v| number(v, "queue expireRun"))?;
    }
    if end < shards {
        host.transact(|s, now, alarm| store_queue_progress(s, now, end, purged, alarm)).await?;
        return Ok(false);
    }
    host.transact(|s, _, _| finish_queues(s, purged)).await?;
    Ok(true)
}

/// Run the loop until it stops; an `Err` is a failed phase (to be recorded).
pub async fn run_loop<H: CleanupHost>(host: &H) -> Result<(), RpcError> {
    loop {
        match host.transact(next_step).await? {
            Step::Stop => return Ok(()),
            Step::Index { request } => {
                let calls = index_phase::calls(&request);
                let results = join_all(calls.iter().map(|c| host.call_index(&c.target, c.method, c.args.clone()))).await;
                results.into_iter().collect::<Result<Vec<_>, _>>()?;
                host.transact(|s, _, _| change_phase(s, Phase::Index, Phase::Streams, Map::new())).await?;
            }
            Step::Streams { run_id, due_ms } => streams_phase(host, &run_id, due_ms).await?,
            Step::Queues { run_id, due_ms, shards, from, purged } => {
                if !queues_phase(host, &run_id, due_ms, shards, from, purged).await? {
                    return Ok(());
                }
            }
        }
    }
}

/// Run the loop, recording a failure instead of returning it (the alarm handler and
/// `cleanupNow` never fail because a phase did).
pub async fn run_and_record<H: CleanupHost>(host: &H) -> Result<(), RpcError> {
    if let Err(e) = run_loop(host).await {
        host.transact(|s, now, alarm| record_failure(s, now, &e.message, alarm)).await?;
    }
    Ok(())
}

/// `cleanupNow({retentionMs, queueShards})` (retention.md §2): schedule if needed, move the
/// due time to now, run the loop, answer the current record. Separate transactions.
pub async fn cleanup_now<H: CleanupHost>(host: &H, args: CleanupArgs) -> Result<Value, RpcError> {
    let has_record = host.transact(|s, _, _| Ok(s.get(keys::RETENTION_CLEANUP)?.is_some())).await?;
    if !has_record {
        // `Math.max(1, retentionMs)`: NaN stays NaN.
        let retention_ms = if args.retention_ms.is_nan() { f64::NAN } else { args.retention_ms.max(1.0) };
        let args = CleanupArgs { retention_ms, ..args };
        let scheduled = host.transact(|s, now, alarm| super::schedule(s, now, &args, alarm)).await?;
        if scheduled.is_null() {
            return Ok(Value::Null);
        }
    }
    host.transact(super::expedite).await?;
    run_and_record(host).await?;
    host.transact(|s, _, _| super::get_status(s)).await
}
