//! Retention bookkeeping inside `applyEvent` (spec `run-do.md` §6.9–6.10,
//! `retention.md` §2): the markers that let a later cleanup find the run's IndexDO
//! entries, and automatic scheduling when a run becomes terminal.
//!
//! Calls no other object: the cleanup that reads the markers is [`super::cleanup`].

use super::apply::outcome::Success;
use super::keys;
use super::records::{cleanup_record, is_terminal_run_status, Reason, Record};
use super::validate::{parse_object, schemas};
use crate::store::alarm::Alarm;
use crate::store::{put_json, Store};
use crate::wire::js::to_js_string;
use crate::wire::{Map, RpcError, Value};

fn hook_marker(store: &mut dyn Store, hook_id: &Value, token: &Value) -> Result<(), RpcError> {
    let key = keys::retention_hook(&to_js_string(Some(hook_id)), &to_js_string(Some(token)));
    put_json(store, &key, &Value::object([("hookId", hook_id.clone()), ("token", token.clone())]))
}

/// spec-0.4 `run-do.md` §2 step 4: keep the creating client's `cleanup.queueShards` for
/// maximum-age retention — when that client has terminal retention on
/// (`cleanup.retentionMs > 0`). Without it the sweep's `WORKFLOW_RETENTION_QUEUE_SHARDS`
/// applies, which must equal the clients' `queueShards` anyway (the reference's deployment
/// guide). The condition keeps the payload counts of both golden generations: 0.3 runs
/// created with retention off had no such key (`retention` seq 76), 0.4 runs created with
/// it on do (`retention-040` seq 80).
pub fn record_queue_shards(store: &mut dyn Store, s: &Success, cleanup: Option<&Value>) -> Result<(), RpcError> {
    if s.run_created.is_none() {
        return Ok(());
    }
    let retention_on = matches!(cleanup.and_then(|c| c.get("retentionMs")), Some(Value::Number(n)) if *n > 0.0);
    match cleanup.and_then(|c| c.get("queueShards")).filter(|v| !v.is_null()) {
        Some(shards) if retention_on => put_json(store, keys::RETENTION_QUEUE_SHARDS, shards),
        _ => Ok(()),
    }
}

/// §6.9: correlation-index, hook-index and released-hook markers. `claimed`: the request
/// carried a 0.4 `hookClaimId`; from then on the run is known to be driven by a 0.4 client,
/// which publishes no correlation keys, so it gets no `retention:index:` markers.
/// `correlation_index`: the deployment keeps the 0.3 correlation index
/// ([`crate::config::Config::correlation_index`]); when it does not, the facade stores no
/// `correlation:` key, so there is nothing for a marker to find and none is written.
pub fn record_markers(store: &mut dyn Store, s: &Success, run_id: &str, claimed: bool, correlation_index: bool) -> Result<(), RpcError> {
    if claimed && s.hook_to_index.is_some() {
        put_json(store, keys::RETENTION_CLAIMS, &true)?;
    }
    let v04 = claimed || !correlation_index || store.get(keys::RETENTION_CLAIMS)?.is_some();
    if let Some(event) = s.event.as_ref().filter(|_| !v04) {
        if let (Some(correlation_id), Some(created), Some(event_id)) =
            (event.str("correlationId"), event.date("createdAt"), event.str("eventId"))
        {
            let index_key = keys::correlation_index_key(correlation_id, created, event_id, run_id);
            put_json(store, &keys::retention_index(&index_key), &Value::String(index_key.clone()))?;
        }
    }
    if let Some(hook) = &s.hook_to_index {
        let hook_id = hook.get("hookId").cloned().unwrap_or(Value::Null);
        let token = hook.get("token").cloned().unwrap_or(Value::Null);
        hook_marker(store, &hook_id, &token)?;
    }
    for (hook_id, token) in &s.released_hooks {
        hook_marker(store, hook_id, token)?;
    }
    Ok(())
}

/// §6.10: schedule cleanup of a run that the outcome shows terminal.
pub fn schedule(
    store: &mut dyn Store,
    alarm: &mut Alarm,
    s: &mut Success,
    cleanup: Option<&Value>,
    has_record: bool,
) -> Result<(), RpcError> {
    let retention_ms = match cleanup.and_then(|c| c.get("retentionMs")) {
        Some(Value::Number(n)) => *n,
        _ => 0.0,
    };
    if retention_ms.is_nan() || retention_ms <= 0.0 || has_record {
        return Ok(());
    }
    let Some(run) = s.run.as_ref().filter(|r| is_terminal_run_status(r.status())) else { return Ok(()) };
    let completed = run.date("completedAt").unwrap_or_default() as f64;
    let due = crate::wire::js::time_clip(completed + retention_ms);
    let mut m: Map = run.0.clone();
    m.insert("expiredAt".into(), Value::Date(due));
    let updated = Record(parse_object(schemas::run_schema(), m)?);
    let due = due.unwrap_or_default();
    let shards = match cleanup.and_then(|c| c.get("queueShards")) {
        None | Some(Value::Null) => Value::num(1),
        Some(v) => v.clone(),
    };
    updated.save(store, keys::RUN)?;
    put_json(store, keys::RETENTION_CLEANUP, &Value::Object(cleanup_record(&updated, Reason::TerminalRetention, due, Some(shards))))?;
    alarm.set(due);
    s.run = Some(updated);
    Ok(())
}
