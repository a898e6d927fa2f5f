//! Registry-role methods (`stream-do.md` §3): the stream names a run has written, in an
//! instance named `run-streams:<runId>`, used by `streams.list(runId)` and by retention.
//!
//! Calls no other object.

use crate::protocol::hop::Args;
use crate::store::{js_args, slot, ListOptions, Store};
use crate::wire::{js, RpcError, Value};

use super::chunks::{bounded_limit, run_id};
use super::keys;
use super::records::RegistryExpiry;

fn owner(store: &mut dyn Store) -> Result<Option<String>, RpcError> {
    store.get(keys::REGISTRY_OWNER)?.map(|text| slot::decode(keys::REGISTRY_OWNER, &text).map(|v| js::to_js_string(Some(&v)))).transpose()
}

fn is_expired(store: &mut dyn Store) -> Result<bool, RpcError> {
    Ok(store.get(keys::REGISTRY_EXPIRED)?.is_some())
}

fn check_owner(store: &mut dyn Store, run_id: &str) -> Result<(), RpcError> {
    match owner(store)? {
        Some(owner) if owner != run_id => Err(RpcError::error(format!("Stream registry is owned by workflow run \"{owner}\""))),
        _ => Ok(()),
    }
}

/// Registered names, prefix removed, ascending.
fn names(store: &mut dyn Store) -> Result<Vec<String>, RpcError> {
    Ok(store
        .list(&ListOptions::prefix(keys::STREAM_PREFIX))?
        .into_iter()
        .map(|(key, _)| key.strip_prefix(keys::STREAM_PREFIX).unwrap_or(&key).to_string())
        .collect())
}

fn names_value(names: Vec<String>) -> Value {
    Value::Array(names.into_iter().map(Value::String).collect())
}

/// `registerStream(runId, streamName)` → `null`. Unlike the other methods, a runId that is
/// not a string is taken as the reference takes it (`registerStream(null)` registers
/// `"undefined"` for the owner `null`, compared as `String(runId)`): only that instance's
/// own registry is affected.
pub fn register_stream(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let owner_value = match args.raw(0) {
        Some(Value::String(s)) => Value::str(s.as_str()),
        Some(v @ (Value::Null | Value::Bool(_) | Value::Number(_))) => v.clone(),
        None => return Err(js_args::put_undefined()),
        Some(_) => return Err(RpcError::type_error("runId must be a string")),
    };
    let run_id = js::to_js_string(args.raw(0));
    let run_id = run_id.as_str();
    if is_expired(store)? {
        return Err(RpcError::error(format!("Workflow run \"{run_id}\" has expired")));
    }
    check_owner(store, run_id)?;
    store.put(keys::REGISTRY_OWNER, &slot::encode(&owner_value))?;
    let name = js::to_js_string(args.raw(1));
    store.put(&keys::registered(&name), &slot::encode(&Value::Bool(true)))?;
    Ok(Value::Null)
}

/// `listStreams()` → the registered names (ascending); an unknown run → `[]`.
pub fn list_streams(store: &mut dyn Store) -> Result<Value, RpcError> {
    if is_expired(store)? {
        return Err(RpcError::error("Workflow run streams have expired"));
    }
    Ok(names_value(names(store)?))
}

/// `expireRegistry(runId, expiredAt, options?)` → `{streams}`: fences the registry
/// (`registry:expired` = the existing record or `{expiredAt, deleted: 0}`) and returns the
/// registered names, at most `options.limit` (1..128, default 16) when `options` is given
/// (the 0.4 cleanup), all of them without (0.3). Idempotent.
pub fn expire_registry(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let run_id = run_id(args)?;
    check_owner(store, run_id)?;
    let expired_at = args.raw(1).ok_or_else(js_args::put_undefined)?;
    store.put(keys::REGISTRY_OWNER, &slot::encode(&Value::str(run_id)))?;
    let expiry = RegistryExpiry::load(store)?.unwrap_or(RegistryExpiry { expired_at: expired_at.clone(), deleted: 0 });
    expiry.save(store)?;
    let mut names = names(store)?;
    if let Some(options) = args.present(2) {
        names.truncate(bounded_limit(options.get("limit"), 16, 128) as usize);
    }
    Ok(Value::object([("streams", names_value(names))]))
}

/// `finalizeRegistry(runId, streams?)`: once fenced by this run, drops registry entries.
///
/// * With `streams` (0.4): only those names (deduplicated) → `{deleted, done}`, `deleted`
///   the cumulative count kept in `registry:expired`, `done` when no entry remains.
/// * Without (0.3): every entry → `null`.
pub fn finalize_registry(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let run_id = run_id(args)?;
    let expiry = match RegistryExpiry::load(store)? {
        Some(e) if owner(store)?.as_deref() == Some(run_id) => e,
        _ => return Err(RpcError::error(format!("Stream registry for workflow run \"{run_id}\" is not expired"))),
    };
    let Some(streams) = args.present(1) else {
        for name in names(store)? {
            store.delete(&keys::registered(&name))?;
        }
        return Ok(Value::Null);
    };
    let mut removed = 0u64;
    for name in js::for_of_elements(Some(streams), "streams")? {
        if store.delete(&keys::registered(&js::to_js_string(Some(&name))))? {
            removed += 1;
        }
    }
    let deleted = expiry.deleted + removed;
    RegistryExpiry { deleted, ..expiry }.save(store)?;
    let done = store.list_keys(&ListOptions::prefix(keys::STREAM_PREFIX).limit(1))?.is_empty();
    Ok(Value::object([("deleted", Value::Number(deleted as f64)), ("done", Value::Bool(done))]))
}
