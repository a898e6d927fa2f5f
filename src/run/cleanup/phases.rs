//! The retention cleanup's storage steps (spec-0.4 `retention.md` §2), each one
//! transaction: [`plan_page`] decides what one page (one alarm, or one `cleanupNow`) does
//! and performs the pages that need only this object's storage; the `commit_*` functions
//! persist the outcome of a page that called other objects. Every write is a
//! compare-and-set on the record's (`phase`, `generation`) as read by the plan ([`Expect`]),
//! and bumps `generation`.
//!
//! Calls no other object: it plans the calls, [`super::driver`] makes them.

use serde::{Deserialize, Serialize};

use super::record::{backoff, Phase};
use super::terminal::{self, TerminalPage, TerminalPlan};
use crate::run::keys;
use crate::run::records::{generation, tombstone_for, Record};
use crate::store::alarm::Alarm;
use crate::store::{get_json, put_json, ListOptions, Store};
use crate::wire::js::to_js_string;
use crate::wire::{Map, RpcError, Value};

/// Keys one payload page deletes.
pub const PAYLOAD_BATCH: usize = 128;
/// `retention:hook:` markers one `index` page releases.
pub const HOOK_MARKER_PAGE: usize = 64;
/// Keys the payload phase deletes without counting them in `deletedPayloadKeys`: our own
/// bookkeeping, which the reference never writes (also the `lifecycle-lease:` family).
pub const UNCOUNTED: [&str; 1] = [keys::RETENTION_CLAIMS];
/// Stream names one `streams` page asks the registry for.
pub const STREAMS_PER_PAGE: f64 = 16.0;
/// Chunks and bytes one `streams` page deletes at most, over all its streams.
pub const STREAM_CHUNKS_PER_PAGE: f64 = 128.0;
pub const STREAM_BYTES_PER_PAGE: f64 = 16.0 * 1024.0 * 1024.0;
/// Queue references one `expireRun` page deletes.
pub const QUEUE_REFERENCES_PER_PAGE: f64 = 64.0;
/// Queue shards the queues phase visits at most. The client uses a handful; the bound keeps
/// a corrupt or hostile `queueShards` from turning one phase into millions of pages.
pub const MAX_QUEUE_SHARDS: u32 = 1024;

/// The (`phase`, `generation`) a page was planned for: its writes apply only if the record
/// still has both.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Expect {
    pub phase: Phase,
    pub generation: f64,
}

/// `retention:progress` (spec-0.4 `run-do.md` §1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    pub queue_shard: u32,
    pub queue_shard_deleted: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_ack: Option<PendingAck>,
}

/// A shard's finished `expireRun` whose receipt still has to be acknowledged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingAck {
    pub queue_shard: u32,
    /// `{expiredAt, deleted}`; `null` when the shard answered without one (a QueueDO of the
    /// 0.3 generation): nothing to acknowledge then.
    pub receipt: Value,
}

/// What one page does outside this object's storage.
#[derive(Debug, Clone, PartialEq)]
pub enum Page {
    /// Nothing (more) to call now: the page, if any, was done in the plan's transaction.
    Stop,
    /// `index`: expire `request` in the index shards and the archive, then
    /// [`commit_index`].
    Index { expect: Expect, request: Value, markers: Vec<String>, last: bool },
    /// `streams`: one bounded page of stream expiry, then [`commit_streams`].
    Streams { expect: Expect, run_id: String, due_ms: i64, deleted_streams: f64 },
    /// `queues`: `q:<shard>.expireRun(runId, dueAt, {limit: 64})`, then
    /// [`commit_queue_expire`].
    QueueExpire { expect: Expect, run_id: String, due_ms: i64, shard: u32 },
    /// `queues`: acknowledge the pending receipt (if any), then [`commit_queue_ack`].
    QueueAck { expect: Expect, run_id: String, shard: u32, receipt: Value },
    /// A terminal-cleanup page ([`super::terminal`]).
    Terminal(TerminalPage),
}

fn load(store: &mut dyn Store) -> Result<Option<Record>, RpcError> {
    Record::load(store, keys::RETENTION_CLEANUP)
}

/// The record, if it still matches `expect`.
fn current(store: &mut dyn Store, expect: &Expect) -> Result<Option<Record>, RpcError> {
    Ok(load(store)?.filter(|r| Phase::of(r) == Some(expect.phase) && generation(r) == expect.generation))
}

/// Save `record` with `generation + 1`.
fn save_next(store: &mut dyn Store, mut record: Record) -> Result<Record, RpcError> {
    let next = generation(&record) + 1.0;
    record.0.insert("generation".into(), Value::num(next));
    record.save(store, keys::RETENTION_CLEANUP)?;
    Ok(record)
}

/// Move to `next` (or stay when `None`), reset `attempts`, drop `lastError`, bump the
/// generation and continue at now + 1.
fn advance(
    store: &mut dyn Store,
    now: i64,
    alarm: &mut Alarm,
    mut record: Record,
    next: Option<Phase>,
    extra: Map,
) -> Result<(), RpcError> {
    record.0.extend(extra);
    if let Some(next) = next {
        record.0.insert("phase".into(), Value::str(next.name()));
    }
    record.0.insert("attempts".into(), Value::num(0));
    record.0.remove("lastError");
    save_next(store, record)?;
    alarm.set(now + 1);
    Ok(())
}

/// Is the retention record due for a page (spec-0.4 `run-do.md` §7 step 1)?
fn due(record: &Record, now: i64) -> bool {
    Phase::of(record) != Some(Phase::Tombstoned) && record.date("dueAt").is_some_and(|d| d <= now)
}

/// Plan one page (spec-0.4 `run-do.md` §7) and do it when it needs only this storage.
pub fn plan_page(store: &mut dyn Store, now: i64, alarm: &mut Alarm) -> Result<Page, RpcError> {
    let record = load(store)?;
    if let Some(record) = record.as_ref().filter(|r| due(r, now)) {
        return plan_retention(store, now, alarm, record.clone());
    }
    match terminal::plan(store, now, alarm)? {
        Some(TerminalPlan::Done) => return Ok(Page::Stop),
        Some(TerminalPlan::Page(page)) => return Ok(Page::Terminal(page)),
        None => {}
    }
    match record {
        Some(r) if Phase::of(&r) != Some(Phase::Tombstoned) => match r.date("dueAt") {
            Some(due) => alarm.set(due.max(now + 1)),
            None => alarm.delete(),
        },
        _ => alarm.delete(),
    }
    Ok(Page::Stop)
}

fn plan_retention(store: &mut dyn Store, now: i64, alarm: &mut Alarm, record: Record) -> Result<Page, RpcError> {
    let phase =
        Phase::of(&record).ok_or_else(|| RpcError::error(format!("unknown cleanup phase {}", to_js_string(record.get("phase")))))?;
    let expect = Expect { phase, generation: generation(&record) };
    let run_id = to_js_string(record.get("runId"));
    let due_ms = record.date("dueAt").unwrap_or(0);
    match phase {
        Phase::Retained => {
            advance(store, now, alarm, record, Some(Phase::Index), Map::new())?;
            Ok(Page::Stop)
        }
        Phase::Index => index_page(store, &record, expect, &run_id, due_ms),
        Phase::Streams => {
            let deleted_streams = record.num("deletedStreams").filter(|n| n.is_finite()).unwrap_or(0.0);
            Ok(Page::Streams { expect, run_id, due_ms, deleted_streams })
        }
        Phase::Queues => {
            let shards = queue_shards(&record);
            let progress: Progress = get_json(store, keys::RETENTION_PROGRESS)?.unwrap_or_default();
            if let Some(pending) = progress.pending_ack {
                return Ok(Page::QueueAck { expect, run_id, shard: pending.queue_shard, receipt: pending.receipt });
            }
            if progress.queue_shard < shards {
                return Ok(Page::QueueExpire { expect, run_id, due_ms, shard: progress.queue_shard });
            }
            store.delete(keys::RETENTION_PROGRESS)?;
            advance(store, now, alarm, record, Some(Phase::Payload), Map::new())?;
            Ok(Page::Stop)
        }
        Phase::Payload => {
            payload_page(store, now, alarm, record)?;
            Ok(Page::Stop)
        }
        Phase::Tombstoned => Ok(Page::Stop),
    }
}

/// `queueShards` as a shard count: a positive number, rounded up, at most
/// [`MAX_QUEUE_SHARDS`]; anything else is 0 (no queue page).
fn queue_shards(record: &Record) -> u32 {
    let shards = record.num("queueShards").unwrap_or(f64::NAN);
    if shards > 0.0 {
        shards.ceil().min(f64::from(MAX_QUEUE_SHARDS)) as u32
    } else {
        0
    }
}

/// The run's two catalog keys (`run:<wf>:<ms13>:<id>`, `runall:<ms13>:<id>`).
fn run_keys(record: &Record, run_id: &str) -> [String; 2] {
    let created = record.date("createdAt").map(keys::ms13).unwrap_or_else(|| "NaN".into());
    let workflow = to_js_string(record.get("workflowName"));
    [format!("run:{workflow}:{created}:{run_id}"), format!("runall:{created}:{run_id}")]
}

/// Up to `page` entries of `prefix` (listing one more to know whether more remain).
fn marker_page(store: &mut dyn Store, prefix: &str, page: usize) -> Result<(Vec<(String, Value)>, bool), RpcError> {
    let listed = store.list(&ListOptions::prefix(prefix).limit(page + 1))?;
    let more = listed.len() > page;
    let entries = listed
        .into_iter()
        .take(page)
        .map(|(k, text)| {
            Value::parse(&text).map(|v| (k.clone(), v)).map_err(|e| RpcError::error(format!("corrupt record at {k}: {}", e.0)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((entries, more))
}

/// One `index` page: the run keys, every `retention:index:` marker (the correlation keys a
/// 0.3 client published, sent whole as 0.3 did, and kept: they are payload) and ≤ 64 hook
/// markers (released, then consumed).
fn index_page(store: &mut dyn Store, record: &Record, expect: Expect, run_id: &str, due_ms: i64) -> Result<Page, RpcError> {
    let (hook_markers, more) = marker_page(store, keys::RETENTION_HOOK_PREFIX, HOOK_MARKER_PAGE)?;
    let mut index_keys: Vec<Value> = run_keys(record, run_id).into_iter().map(Value::String).collect();
    for (k, text) in store.list(&ListOptions::prefix(keys::RETENTION_INDEX_PREFIX))? {
        index_keys.push(Value::parse(&text).map_err(|e| RpcError::error(format!("corrupt record at {k}: {}", e.0)))?);
    }
    let request = Value::object([
        ("runId", Value::str(run_id)),
        ("keys", Value::Array(index_keys)),
        ("hooks", Value::Array(hook_markers.iter().map(|(_, v)| v.clone()).collect())),
        ("expiredAt", Value::num(due_ms as f64)),
    ]);
    let markers = hook_markers.into_iter().map(|(k, _)| k).collect();
    Ok(Page::Index { expect, request, markers, last: !more })
}

/// After an `index` page's calls: drop its markers; `streams` when it was the last page.
pub fn commit_index(
    store: &mut dyn Store,
    now: i64,
    alarm: &mut Alarm,
    expect: &Expect,
    markers: &[String],
    last: bool,
) -> Result<(), RpcError> {
    let Some(record) = current(store, expect)? else { return Ok(()) };
    for k in markers {
        store.delete(k)?;
    }
    advance(store, now, alarm, record, last.then_some(Phase::Streams), Map::new())
}

/// After a `streams` page: the registry's cumulative count; `queues` when it is done.
pub fn commit_streams(
    store: &mut dyn Store,
    now: i64,
    alarm: &mut Alarm,
    expect: &Expect,
    deleted: f64,
    done: bool,
) -> Result<(), RpcError> {
    let Some(record) = current(store, expect)? else { return Ok(()) };
    let extra = Map::from([("deletedStreams".to_string(), Value::num(deleted))]);
    advance(store, now, alarm, record, done.then_some(Phase::Queues), extra)
}

/// A shard's `expireRun` answer: cumulative `deleted`, `done` (absent = done, a 0.3
/// answer), `receipt` (`null` when absent).
#[derive(Debug, Clone, PartialEq)]
pub struct QueueAnswer {
    pub deleted: f64,
    pub done: bool,
    pub receipt: Value,
}

/// After `expireRun` on `shard`: add the delta of its cumulative `deleted`; when `done`,
/// keep its receipt for acknowledgement (spec-0.4 `retention.md` §2).
pub fn commit_queue_expire(
    store: &mut dyn Store,
    now: i64,
    alarm: &mut Alarm,
    expect: &Expect,
    shard: u32,
    answer: QueueAnswer,
) -> Result<(), RpcError> {
    let Some(record) = current(store, expect)? else { return Ok(()) };
    let mut progress: Progress = get_json(store, keys::RETENTION_PROGRESS)?.unwrap_or_default();
    if progress.queue_shard != shard || progress.pending_ack.is_some() {
        return Ok(());
    }
    let QueueAnswer { deleted, done, receipt } = answer;
    if deleted < progress.queue_shard_deleted {
        let run_id = to_js_string(record.get("runId"));
        return Err(RpcError::error(format!("queue shard {shard} regressed expiry receipt for {run_id}")));
    }
    let delta = deleted - progress.queue_shard_deleted;
    let total = record.num("deletedQueueMessages").filter(|n| n.is_finite()).unwrap_or(0.0) + delta;
    progress.queue_shard_deleted = deleted;
    if done {
        progress.pending_ack = Some(PendingAck { queue_shard: shard, receipt });
    }
    put_json(store, keys::RETENTION_PROGRESS, &progress)?;
    let extra = Map::from([("deletedQueueMessages".to_string(), Value::num(total))]);
    advance(store, now, alarm, record, None, extra)
}

/// After the receipt of `shard` was acknowledged: go on with the next shard.
pub fn commit_queue_ack(store: &mut dyn Store, now: i64, alarm: &mut Alarm, expect: &Expect, shard: u32) -> Result<(), RpcError> {
    let Some(record) = current(store, expect)? else { return Ok(()) };
    let progress: Progress = get_json(store, keys::RETENTION_PROGRESS)?.unwrap_or_default();
    if progress.pending_ack.as_ref().map(|p| p.queue_shard) != Some(shard) {
        return Ok(());
    }
    put_json(store, keys::RETENTION_PROGRESS, &Progress { queue_shard: shard + 1, queue_shard_deleted: 0.0, pending_ack: None })?;
    advance(store, now, alarm, record, None, Map::new())
}

/// One payload page: delete up to [`PAYLOAD_BATCH`] keys (never the record or the
/// tombstone) and refresh the tombstone; a page that finds nothing tombstones the record.
/// The record is kept (embedded in the tombstone too), so the admin methods still answer
/// with it (spec-0.4 README, proposed design).
fn payload_page(store: &mut dyn Store, now: i64, alarm: &mut Alarm, mut record: Record) -> Result<(), RpcError> {
    let listed = store.list_keys(&ListOptions::default().limit(PAYLOAD_BATCH + 3))?;
    let doomed: Vec<String> =
        listed.into_iter().filter(|k| k != keys::RETENTION_CLEANUP && k != keys::RETENTION_TOMBSTONE).take(PAYLOAD_BATCH).collect();
    if doomed.is_empty() {
        record.0.insert("phase".into(), Value::str(Phase::Tombstoned.name()));
        record.0.insert("attempts".into(), Value::num(0));
        record.0.remove("lastError");
        record.0.insert("tombstonedAt".into(), Value::date(now));
        let record = save_next(store, record)?;
        put_json(store, keys::RETENTION_TOMBSTONE, &Value::Object(tombstone_for(&record, Value::date(now))))?;
        alarm.delete();
        return Ok(());
    }
    put_json(store, keys::RETENTION_TOMBSTONE, &Value::Object(tombstone_for(&record, Value::date(now))))?;
    for k in &doomed {
        store.delete(k)?;
    }
    let counted = doomed.iter().filter(|k| !UNCOUNTED.contains(&k.as_str()) && !crate::run::lease::is_lease_key(k)).count();
    let total = record.num("deletedPayloadKeys").filter(|n| n.is_finite()).unwrap_or(0.0) + counted as f64;
    record.0.insert("deletedPayloadKeys".into(), Value::num(total));
    record.0.remove("lastError");
    save_next(store, record)?;
    alarm.set(now + 1);
    Ok(())
}

/// Record a failed page planned for `expect`: count it, keep the message, bump the
/// generation, retry after a capped exponential backoff (1 s, 2 s, 4 s, … 1 h). A failure
/// of a stale generation is ignored.
pub fn record_failure(store: &mut dyn Store, now: i64, expect: &Expect, message: &str, alarm: &mut Alarm) -> Result<(), RpcError> {
    let Some(mut record) = current(store, expect)? else { return Ok(()) };
    if expect.phase == Phase::Tombstoned {
        return Ok(());
    }
    let attempts = record.num("attempts").filter(|n| n.is_finite()).unwrap_or(0.0) + 1.0;
    record.0.insert("attempts".into(), Value::num(attempts));
    record.0.insert("lastError".into(), Value::str(message));
    record.0.insert("lastAttemptAt".into(), Value::date(now));
    save_next(store, record)?;
    alarm.set(now.saturating_add(backoff(attempts)));
    Ok(())
}
