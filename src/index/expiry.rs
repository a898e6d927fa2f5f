//! `expireRun` (`index-do.md` §2, `retention.md` §5): fence a run and remove its derived
//! index entries in one transaction.
//!
//! Calls no other object.

use crate::protocol::hop::Args;
use crate::store::Store;
use crate::wire::{RpcError, Value};

use super::hooks::delete_owned;
use super::keys;
use super::records::{owner_value, write};
use crate::wire::js;

/// `expireRun({runId, keys, hooks, expiredAt})` → `{deleted}`.
///
/// 1. `expired:<runId>` = `expiredAt` (later `putOwned` / `finalizeHookIndexes` for the run
///    are ignored);
/// 2. each distinct key of `keys` is deleted and counted if it existed;
/// 3. for each `{hookId, token}` of `hooks`, the entries owned by `{runId, hookId}` are
///    deleted and counted.
///
/// Idempotent in effect: a repeat deletes nothing more.
pub fn expire_run(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let request = args.raw(0);
    let run_id = js::member(request, "runId")?;
    let fence = keys::expired(run_id);
    write(store, &fence, js::member(request, "expiredAt")?)?;

    let mut deleted: u32 = 0;
    let mut distinct: Vec<Value> = Vec::new();
    for key in js::set_elements(js::member(request, "keys")?)? {
        if !distinct.iter().any(|seen| js::same_value_zero(seen, &key)) {
            distinct.push(key);
        }
    }
    for key in &distinct {
        if delete_key(store, key)? {
            deleted = deleted.saturating_add(1);
        }
    }

    for hook in js::for_of_elements(js::member(request, "hooks")?, "request.hooks")? {
        let hook_id = js::member(Some(&hook), "hookId")?;
        let owner = owner_value(run_id.cloned(), hook_id.cloned());
        let token = js::member(Some(&hook), "token")?;
        let n = delete_owned(store, token, hook_id, Some(&owner))?;
        deleted = deleted.saturating_add(n);
    }
    Ok(Value::object([("deleted", Value::Number(f64::from(deleted)))]))
}

/// `storage.delete(key)` truthiness: a string-coerced key, or for an array of keys the
/// multi-key form (truthy when any existed).
fn delete_key(store: &mut dyn Store, key: &Value) -> Result<bool, RpcError> {
    match key {
        Value::Array(many) => {
            let mut any = false;
            for k in many {
                any |= store.delete(&js::to_js_string(Some(k)))?;
            }
            Ok(any)
        }
        other => Ok(store.delete(&js::to_js_string(Some(other)))?),
    }
}
