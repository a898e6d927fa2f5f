//! Run expiry on a catalog shard (`catalog-hooks.md` §2): `expireRun` fences a run and
//! removes its keys, `deleteStaleGlobalRun` is the sweep's compare-and-delete, and the
//! [`alarm`] compacts fences whose grace period has passed.
//!
//! Knows no caller.

use crate::protocol::hop::{Args, Ctx};
use crate::protocol::lifecycle::{arm_at_most, compact_due, CATALOG_FENCE_GRACE_MS};
use crate::store::alarm::Alarm;
use crate::store::{get_json, put_json, Store};
use crate::wire::json_parse::parse_shared;
use crate::wire::{js, RpcError, Value};

use super::keys::{self, EXPIRY_GC_PREFIX};
use super::records::{text, time_value, two_keys, ExpiryFence, ExpiryGc};

/// `expireRun(runId, keys, expiredAt)` → `{deleted}`.
///
/// Writes (or refreshes) the fence `expired:<runId>` = `{expiredAt, compactAt}`, keeping
/// an existing fence's `compactAt` (else now + 1 200 900), and its compaction entry; arms
/// the alarm at `compactAt` unless an earlier one is set; deletes the two keys and counts
/// those that existed.
pub fn expire_run(store: &mut dyn Store, ctx: &Ctx, alarm: &mut Alarm, args: Args) -> Result<Value, RpcError> {
    let run_keys = two_keys(args.raw(1), "Run catalog expiry requires exactly two keys")?;
    fence(store, ctx, alarm, text(args.raw(0)), args.raw(2))?;
    let mut deleted = 0u32;
    for key in &run_keys {
        if store.delete(key)? {
            deleted += 1;
        }
    }
    Ok(Value::object([("deleted", Value::num(deleted))]))
}

/// Write (or refresh) the fence of `run_id` and its compaction entry; arm the alarm.
fn fence(store: &mut dyn Store, ctx: &Ctx, alarm: &mut Alarm, run_id: String, expired_at: Option<&Value>) -> Result<(), RpcError> {
    let fence_key = keys::expired(&run_id);
    let existing: Option<ExpiryFence> = get_json(store, &fence_key)?;
    let compact_at = existing.map_or_else(|| ctx.now.saturating_add(CATALOG_FENCE_GRACE_MS), |fence| fence.compact_at);
    put_json(store, &fence_key, &ExpiryFence { expired_at: time_value(expired_at), compact_at })?;
    put_json(store, &keys::expiry_gc(compact_at, &run_id), &ExpiryGc { run_id, compact_at })?;
    arm_at_most(alarm, compact_at);
    Ok(())
}

/// `expireKeys(runId, keys, expiredAt)` → `{deleted}`: ours (not in the reference class),
/// for the 0.3 facade's `expireRun` and the retention `index` phase, which also hold the
/// run's `correlation:` keys here. The fence of [`expire_run`], then each distinct key of
/// the array `keys` that belongs to the catalog ([`keys::is_catalog_key`]) is deleted and
/// counted if it existed.
pub fn expire_keys(store: &mut dyn Store, ctx: &Ctx, alarm: &mut Alarm, args: Args) -> Result<Value, RpcError> {
    let Some(Value::Array(names)) = args.raw(1) else {
        return Err(RpcError::type_error("Run catalog expiry requires an array of keys"));
    };
    fence(store, ctx, alarm, text(args.raw(0)), args.raw(2))?;
    let mut seen: Vec<&str> = Vec::new();
    let mut deleted = 0u32;
    for name in names.iter().filter_map(Value::as_str).filter(|k| keys::is_catalog_key(k)) {
        if !seen.contains(&name) {
            seen.push(name);
            if store.delete(name)? {
                deleted += 1;
            }
        }
    }
    Ok(Value::object([("deleted", Value::num(deleted))]))
}

/// `deleteStaleGlobalRun(runId, key, expectedValue)` → `{deleted}`.
///
/// Only an exact `runall:…:<runId>` key whose metadata names the run is accepted; the key
/// is then deleted only if it still holds exactly `expectedValue`. No fence is written.
pub fn delete_stale_global_run(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let run_id = args.raw(0);
    let key = match args.raw(1) {
        Some(Value::String(key)) => key,
        _ => return Err(RpcError::type_error("key.startsWith is not a function")),
    };
    let suffix = format!(":{}", text(run_id));
    if !key.starts_with(keys::RUNALL_PREFIX) || !key.ends_with(&suffix) {
        return Err(RpcError::error("Stale run catalog deletion requires the exact global run key"));
    }
    let expected = args.raw(2);
    let metadata = parse_shared(&text(expected))?;
    if !js::strict_eq(js::member(Some(&metadata), "runId")?, run_id) {
        return Err(RpcError::error("Stale run catalog deletion requires matching run metadata"));
    }
    let current = store.get(key)?;
    let matches = matches!((current.as_deref(), expected), (Some(current), Some(Value::String(expected))) if current == expected);
    let deleted = matches && store.delete(key)?;
    Ok(Value::object([("deleted", Value::Bool(deleted))]))
}

/// The alarm: one compaction pass (≤ 128 due `expiry-gc:` entries). Each due entry is
/// deleted, with its fence when the fence still carries the same `compactAt` (a fence
/// refreshed since keeps its own later entry). Re-arms per
/// [`crate::protocol::lifecycle::compact_due`]. Returns how many entries were compacted.
pub fn alarm(store: &mut dyn Store, now: i64, alarm: &mut Alarm) -> Result<usize, RpcError> {
    compact_due(store, EXPIRY_GC_PREFIX, now, alarm, gc_time, |store, key, value| {
        let entry: ExpiryGc = serde_json::from_str(value).map_err(|e| RpcError::error(format!("corrupt record at {key}: {e}")))?;
        let fence_key = keys::expired(&entry.run_id);
        let fence: Option<ExpiryFence> = get_json(store, &fence_key)?;
        if fence.is_some_and(|fence| fence.compact_at == entry.compact_at) {
            store.delete(&fence_key)?;
        }
        store.delete(key)?;
        Ok(())
    })
}

fn gc_time(value: &str) -> Option<i64> {
    serde_json::from_str::<ExpiryGc>(value).ok().map(|entry| entry.compact_at)
}
