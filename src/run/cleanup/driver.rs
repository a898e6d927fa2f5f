//! The cleanup pages (spec-0.4 `retention.md` §2–4): one page per alarm, per `cleanupNow`,
//! and up to two inline pages per `enforceRetention`. A page is a plan transaction
//! ([`phases::plan_page`]), the calls to the index shards and archive
//! ([`super::index_phase`]), StreamDOs or QueueDO shards, and a commit transaction. Generic
//! over [`CleanupHost`], so the wasm shell runs it against real Durable Objects and the
//! native tests against the real cores on in-memory stores.
//!
//! The peers' answers are read in their 0.4 shapes and tolerated in their 0.3 ones (an
//! answer without `done` means done, without `receipt` there is nothing to acknowledge), so
//! the order in which the StreamDO/QueueDO upgrades land does not matter.
//!
//! Knows the other objects only as [`crate::protocol::calls`] targets and router bindings;
//! nothing of the platform.

#![allow(async_fn_in_trait)] // hosts are single-threaded (wasm, tests): no Send bound wanted

use futures_util::future::join_all;

use super::index_phase;
use super::phases::{self, Expect, Page, QUEUE_REFERENCES_PER_PAGE, STREAMS_PER_PAGE, STREAM_BYTES_PER_PAGE, STREAM_CHUNKS_PER_PAGE};
use super::record::{CleanupArgs, Phase};
use super::terminal::{self, TerminalPage};
use crate::protocol::calls::{ShardCall, Target};
use crate::run::keys;
use crate::store::alarm::Alarm;
use crate::store::Store;
use crate::wire::router::Binding;
use crate::wire::{RpcError, Value};

/// What a page needs from its environment.
pub trait CleanupHost {
    /// Run `f` as one storage transaction of this run DO with a fresh clock reading
    /// (epoch ms). `Err` rolls it back; alarm changes apply after commit.
    async fn transact<T>(&self, f: impl FnOnce(&mut dyn Store, i64, &mut Alarm) -> Result<T, RpcError>) -> Result<T, RpcError>;
    /// Call a method of another Durable Object.
    async fn call(&self, binding: Binding, name: &str, method: &str, args: Vec<Value>) -> Result<Value, RpcError>;
    /// Call a method of an index instance (catalog or hook shard, or the archive).
    async fn call_index(&self, target: &Target, method: &str, args: Vec<Value>) -> Result<Value, RpcError>;
}

fn number(v: Option<&Value>, what: &str) -> Result<f64, RpcError> {
    v.and_then(Value::as_f64).ok_or_else(|| RpcError::error(format!("unexpected {what} answer")))
}

/// `done` of a paged answer; absent (a 0.3 answer, which did everything at once) is done.
fn done(answer: &Value) -> bool {
    !matches!(answer.get("done"), Some(Value::Bool(false)))
}

async fn all_index_calls<H: CleanupHost>(host: &H, calls: &[ShardCall]) -> Result<(), RpcError> {
    let results = join_all(calls.iter().map(|c| host.call_index(&c.target, c.method, c.args.clone()))).await;
    results.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(())
}

/// One bounded `streams` page: returns (the registry's cumulative count, done).
async fn streams_page<H: CleanupHost>(host: &H, run_id: &str, due_ms: i64, deleted_before: f64) -> Result<(f64, bool), RpcError> {
    let registry = format!("run-streams:{run_id}");
    let due = Value::num(due_ms as f64);
    let limit = Value::object([("limit", Value::num(STREAMS_PER_PAGE))]);
    let answer = host.call(Binding::Streams, &registry, "expireRegistry", vec![Value::str(run_id), due.clone(), limit]).await?;
    let names: Vec<String> = answer
        .get("streams")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|n| crate::wire::js::to_js_string(Some(n))).collect())
        .unwrap_or_default();
    let mut completed = Vec::new();
    let mut newly_deleted = 0.0;
    let (mut chunks, mut bytes) = (STREAM_CHUNKS_PER_PAGE, STREAM_BYTES_PER_PAGE);
    for name in &names {
        if chunks <= 0.0 || bytes <= 0.0 {
            break;
        }
        let options = Value::object([("limit", Value::num(chunks)), ("byteLimit", Value::num(bytes))]);
        let result =
            host.call(Binding::Streams, &format!("stream:{name}"), "expireStream", vec![Value::str(run_id), due.clone(), options]).await?;
        chunks -= result.get("chunks").and_then(Value::as_f64).filter(|n| n.is_finite()).unwrap_or(0.0);
        bytes -= result.get("bytes").and_then(Value::as_f64).filter(|n| n.is_finite()).unwrap_or(0.0);
        if result.get("deleted") == Some(&Value::Bool(true)) {
            newly_deleted += 1.0;
        }
        if done(&result) {
            completed.push(Value::str(name.as_str()));
        }
    }
    let finalized = host.call(Binding::Streams, &registry, "finalizeRegistry", vec![Value::str(run_id), Value::Array(completed)]).await?;
    // 0.4: `{deleted, done}` (cumulative). 0.3: `null` after dropping every name, so this
    // page's count is the news and the registry is done.
    match finalized.get("deleted") {
        Some(deleted) => Ok((number(Some(deleted), "finalizeRegistry")?, done(&finalized))),
        None => Ok((deleted_before + newly_deleted, true)),
    }
}

/// Run one page's calls and commit it. An `Err` is a failed page (to be recorded).
async fn execute<H: CleanupHost>(host: &H, page: &Page) -> Result<(), RpcError> {
    match page {
        Page::Stop => Ok(()),
        Page::Index { expect, request, markers, last } => {
            all_index_calls(host, &index_phase::calls(request)).await?;
            host.transact(|s, now, alarm| phases::commit_index(s, now, alarm, expect, markers, *last)).await
        }
        Page::Streams { expect, run_id, due_ms, deleted_streams } => {
            let (deleted, done) = streams_page(host, run_id, *due_ms, *deleted_streams).await?;
            host.transact(|s, now, alarm| phases::commit_streams(s, now, alarm, expect, deleted, done)).await
        }
        Page::QueueExpire { expect, run_id, due_ms, shard } => {
            let options = Value::object([("limit", Value::num(QUEUE_REFERENCES_PER_PAGE))]);
            let args = vec![Value::str(run_id.as_str()), Value::num(*due_ms as f64), options];
            let answer = host.call(Binding::Queue, &format!("q:{shard}"), "expireRun", args).await?;
            let answer = phases::QueueAnswer {
                deleted: number(answer.get("deleted"), "queue expireRun")?,
                done: done(&answer),
                receipt: answer.get("receipt").cloned().unwrap_or(Value::Null),
            };
            host.transact(|s, now, alarm| phases::commit_queue_expire(s, now, alarm, expect, *shard, answer)).await
        }
        Page::QueueAck { expect, run_id, shard, receipt } => {
            if !receipt.is_null() {
                let args = vec![Value::str(run_id.as_str()), receipt.clone()];
                let answer = host.call(Binding::Queue, &format!("q:{shard}"), "acknowledgeExpireRun", args).await?;
                if answer.get("acknowledged") == Some(&Value::Bool(false)) {
                    return Err(RpcError::error(format!("queue shard {shard} rejected expiry receipt for {run_id}")));
                }
            }
            host.transact(|s, now, alarm| phases::commit_queue_ack(s, now, alarm, expect, *shard)).await
        }
        Page::Terminal(t) => {
            all_index_calls(host, &t.calls).await?;
            host.transact(|s, now, alarm| terminal::commit(s, now, alarm, t)).await
        }
    }
}

/// The (`phase`, `generation`) a planned retention page expects, if it is one.
fn expectation(page: &Page) -> Option<&Expect> {
    match page {
        Page::Index { expect, .. } | Page::Streams { expect, .. } | Page::QueueExpire { expect, .. } | Page::QueueAck { expect, .. } => {
            Some(expect)
        }
        Page::Stop | Page::Terminal(_) => None,
    }
}

fn terminal_of(page: &Page) -> Option<&TerminalPage> {
    match page {
        Page::Terminal(t) => Some(t),
        _ => None,
    }
}

/// One page (the alarm handler's work): plan, call, commit; a failed page is recorded with
/// its backoff instead of returned. Returns the page that ran.
pub async fn run_page<H: CleanupHost>(host: &H) -> Result<Page, RpcError> {
    let page = host.transact(phases::plan_page).await?;
    if let Err(e) = execute(host, &page).await {
        if let Some(expect) = expectation(&page) {
            host.transact(|s, now, alarm| phases::record_failure(s, now, expect, &e.message, alarm)).await?;
        } else if let Some(t) = terminal_of(&page) {
            host.transact(|s, now, alarm| terminal::record_failure(s, now, t, &e.message, alarm)).await?;
        }
    }
    Ok(page)
}

/// Pages a `cleanupNow` that had to schedule the record runs at most (0.3's loop took 5–6).
pub const FRESH_CLEANUP_PAGES: usize = 32;

/// `cleanupNow({retentionMs, queueShards})` (spec-0.4 `run-do.md` §6): schedule if needed
/// (retention `max(1, retentionMs)`), move the due time to now, run pages, answer the
/// current status.
///
/// How many pages: on a run that already had a record, **one** (0.4.0; the first answer
/// is typically phase `index`). On a run this call had to schedule, the pages up to and
/// including the first payload page (0.3.0's loop, which the spec's dual-version design
/// suggests: the answer is typically phase `payload` with the run already tombstoned), but
/// bounded ([`FRESH_CLEANUP_PAGES`]) and stopping at a failed page. Both golden sets
/// pin one of the two cases (0.3 `retention` seq 87, 0.4 `retention-040` seq 78), and the
/// rule keeps both.
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
    if has_record {
        run_page(host).await?;
    } else {
        for _ in 0..FRESH_CLEANUP_PAGES {
            let before = host.transact(|s, _, _| super::current_phase(s)).await?;
            if matches!(before, None | Some(Phase::Tombstoned)) {
                break;
            }
            run_page(host).await?;
            let failed = host.transact(|s, _, _| super::has_failure(s)).await?;
            if before == Some(Phase::Payload) || failed {
                break;
            }
        }
    }
    host.transact(|s, _, _| super::get_status(s)).await
}

/// `enforceRetention({retentionMs, queueShards, scheduledTime})` (spec-0.4 `retention.md`
/// §4): the transaction, then up to two inline pages while the phase is `retained` or
/// `index` (so the catalog entries are gone before the sweep moves on). `{state, cleanup}`.
pub async fn enforce_retention<H: CleanupHost>(host: &H, request: Option<&Value>) -> Result<Value, RpcError> {
    let args = super::EnforceArgs::parse(request)?;
    let outcome = host.transact(|s, now, alarm| super::enforce(s, now, &args, alarm)).await?;
    let cleanup = match outcome.cleanup {
        Some(cleanup) => cleanup,
        None => {
            for _ in 0..2 {
                let phase = host.transact(|s, _, _| super::current_phase(s)).await?;
                if !matches!(phase, Some(Phase::Retained | Phase::Index)) {
                    break;
                }
                run_page(host).await?;
            }
            host.transact(|s, _, _| super::get_status(s)).await?
        }
    };
    Ok(Value::object([("state", Value::str(outcome.state.as_str())), ("cleanup", cleanup)]))
}
