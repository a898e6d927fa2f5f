//! `upsertRun` (`catalog-hooks.md` §2): publish a run's two listing keys under a
//! publication lease.
//!
//! Knows no caller.

use crate::protocol::hop::{Args, Ctx};
use crate::protocol::lifecycle::MAX_RUN_INDEX_PUBLICATION_LIFETIME_MS;
use crate::store::Store;
use crate::wire::{RpcError, Value};

use super::keys;
use super::records::{safe_integer, text, two_keys};

/// `upsertRun(runId, keys, serializedMetadata, publicationExpiresAt)` → `{stored}`.
///
/// Refused (`stored:false`, nothing written) behind the run's expiry fence, or when the
/// lease is not a safe integer in `(now, now + 1 200 900]`. Otherwise both keys are
/// (over)written with the metadata: the later status wins.
pub fn upsert_run(store: &mut dyn Store, ctx: &Ctx, args: Args) -> Result<Value, RpcError> {
    let keys = two_keys(args.raw(1), "Run catalog commit requires exactly two keys")?;
    if store.get(&keys::expired(&text(args.raw(0))))?.is_some() {
        return Ok(stored(false));
    }
    let lease_ok = safe_integer(args.raw(3))
        .is_some_and(|lease| lease > ctx.now && lease <= ctx.now.saturating_add(MAX_RUN_INDEX_PUBLICATION_LIFETIME_MS));
    if !lease_ok {
        return Ok(stored(false));
    }
    let metadata = match args.raw(2) {
        Some(Value::String(s)) => s,
        _ => return Err(RpcError::type_error("Run catalog metadata must be a string")),
    };
    for key in &keys {
        store.put(key, metadata)?;
    }
    Ok(stored(true))
}

fn stored(yes: bool) -> Value {
    Value::object([("stored", Value::Bool(yes))])
}

/// `upsertKey(runId, key, value)` → `{stored}`: the single-key upsert the 0.3 `index`
/// facade uses for `putOwned` of a `run:`/`runall:`/`correlation:` key (the 0.3 client has no lease; the
/// facade asks the run DO's lifecycle instead, before this call). Refused behind the
/// run's expiry fence, like `upsertRun`. Not part of the reference class.
pub fn upsert_key(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let key = text(args.raw(1));
    if !keys::is_catalog_key(&key) {
        return Err(RpcError::error(format!("Run catalog cannot hold key {key}")));
    }
    if store.get(&keys::expired(&text(args.raw(0))))?.is_some() {
        return Ok(stored(false));
    }
    let value = match args.raw(2) {
        Some(Value::String(s)) => s,
        _ => return Err(RpcError::type_error("Run catalog metadata must be a string")),
    };
    store.put(&key, value)?;
    Ok(stored(true))
}
