//! Expired-run fencing (spec `run-do.md` §2): a tombstone, or a cleanup record whose
//! time has come, fences reads and writes.
//!
//! Knows nothing of how a run is cleaned up (that is [`super::cleanup`]).

use super::keys;
use super::records::{tombstone_from_cleanup, Record};
use crate::store::Store;
use crate::wire::date::iso;
use crate::wire::{Map, RpcError, Value};

/// What the fence saw at the start of a call.
pub struct RetentionState {
    pub cleanup: Option<Record>,
    /// The tombstone (stored or synthesized) when the run is expired.
    pub tombstone: Option<Map>,
}

pub fn retention_state(store: &mut dyn Store, now: i64) -> Result<RetentionState, RpcError> {
    let cleanup = Record::load(store, keys::RETENTION_CLEANUP)?;
    if let Some(t) = Record::load(store, keys::RETENTION_TOMBSTONE)? {
        return Ok(RetentionState { cleanup, tombstone: Some(t.0) });
    }
    let tombstone = match &cleanup {
        Some(c) if !(c.str("phase") == Some("retained") && c.date("dueAt").is_some_and(|d| d > now)) => Some(tombstone_from_cleanup(c)),
        _ => None,
    };
    Ok(RetentionState { cleanup, tombstone })
}

/// `expiredAt` of a tombstone as ISO text.
pub fn expired_at_iso(tombstone: &Map) -> String {
    match tombstone.get("expiredAt") {
        Some(Value::Date(Some(ms))) => iso(*ms),
        other => crate::wire::js::to_js_string(other),
    }
}

/// The expired-read envelope.
pub fn expired_read(tombstone: Map) -> Value {
    let run_id = crate::wire::js::to_js_string(tombstone.get("runId"));
    let message = format!("Workflow run \"{run_id}\" expired at {}", expired_at_iso(&tombstone));
    Value::object([
        ("ok", Value::Bool(false)),
        ("code", Value::str("RUN_EXPIRED")),
        ("message", Value::String(message)),
        ("tombstone", Value::Object(tombstone)),
    ])
}

/// `getLifecycleStatus()` (spec-0.4 `run-do.md` §4): `"expired"` when the fence above
/// holds, `"missing"` without a run, `"terminal"` for a terminal run, else `"active"`.
/// The hook shards and the facade ask it; the queue asks [`super::lease::grant`], which
/// answers the same status. Whitelisted on `/v1/rpc/runs` (0.4), though no client calls it.
pub fn lifecycle_status(store: &mut dyn Store, now: i64) -> Result<Value, RpcError> {
    let state = retention_state(store, now)?;
    lifecycle_status_of(store, &state)
}

/// [`lifecycle_status`] given the [`retention_state`] already read.
pub fn lifecycle_status_of(store: &mut dyn Store, state: &RetentionState) -> Result<Value, RpcError> {
    if state.tombstone.is_some() {
        return Ok(Value::str("expired"));
    }
    let Some(run) = crate::store::get_json::<Value>(store, keys::RUN)? else { return Ok(Value::str("missing")) };
    let terminal = run.get("status").and_then(Value::as_str).is_some_and(super::records::is_terminal_run_status);
    Ok(Value::str(if terminal { "terminal" } else { "active" }))
}
