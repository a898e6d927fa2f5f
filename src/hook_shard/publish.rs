//! The storage step of `finalize` (HookTokenDO) / `publish` (HookIdDO)
//! (`catalog-hooks.md` §3, steps 2–6). The lifecycle check that precedes it is a
//! DO-to-DO call, made by [`super::driver::publish`].
//!
//! Calls no other object.

use super::claims::{drop_claim, read_claim, read_record};
use super::keys;
use super::records::stored;
use crate::protocol::hooks::Family;
use crate::protocol::hooks::Owner;
use crate::store::Store;
use crate::wire::{js, RpcError, Value};

/// Publish `serialized` under the natural key, for an owner whose run is active.
///
/// 2. A record of another owner → `<label> <K> is owned by another hook`.
/// 3. An expired claim is dropped → `{stored:false}`.
/// 4. A claim of another owner or another claim id → `<label> <K> is reserved by another hook`.
/// 5. Neither record nor claim → `<label> <K> has no active reservation`.
/// 6. Otherwise the record is (re)written and the claim dropped → `{stored:true}` (a
///    same-owner record without a claim is simply rewritten: the repair path).
///
/// Unlike the reference, a serialized hook whose owner cannot be read is refused before
/// anything is written (it would make every later read of the key fail).
pub fn publish_step(
    store: &mut dyn Store,
    family: Family,
    now: i64,
    key: &str,
    serialized: &str,
    owner: &Owner,
    claim_id: Option<&Value>,
) -> Result<Value, RpcError> {
    Owner::from_serialized(serialized)?;
    let label = family.label();
    let record = read_record(store, family, key)?;
    if let Some(record) = &record {
        if Owner::from_serialized(record)? != *owner {
            return Err(RpcError::error(format!("{label} {key} is owned by another hook")));
        }
    }
    let claim = read_claim(store, key)?;
    if let Some(claim) = &claim {
        if claim.expires_at <= now {
            drop_claim(store, key, claim)?;
            return Ok(stored(false));
        }
        if claim.owner != *owner || !js::strict_eq(Some(&Value::str(claim.claim_id.as_str())), claim_id) {
            return Err(RpcError::error(format!("{label} {key} is reserved by another hook")));
        }
    }
    if record.is_none() && claim.is_none() {
        return Err(RpcError::error(format!("{label} {key} has no active reservation")));
    }
    store.put(&keys::record(family, key), serialized)?;
    if let Some(claim) = &claim {
        drop_claim(store, key, claim)?;
    }
    Ok(stored(true))
}

/// The 0.3 facade's publication (`legacyPublish`), with the 0.3 IndexDO's
/// `finalizeHookIndexes` rules on this shard's key (`spec/index-do.md` §2):
///
/// 1. A record of another owner → `<label> <K> is owned by another hook`.
/// 2. An expired claim is dropped and treated as absent (0.3 claims never expired).
/// 3. A claim of another owner → `<label> <K> is reserved by another hook`; the owner's
///    own claim is accepted whatever its claim id (0.3 had none).
/// 4. The record is (re)written — with or without a claim — and the claim dropped →
///    `{stored:true}`. The serialized hook is stored as given, as 0.3 did (a later read that
///    needs its owner fails on it, as 0.3's `reserveHookToken` did).
pub fn legacy_publish_step(
    store: &mut dyn Store,
    family: Family,
    now: i64,
    key: &str,
    serialized: &str,
    owner: &Owner,
) -> Result<Value, RpcError> {
    let label = family.label();
    if let Some(record) = read_record(store, family, key)? {
        if Owner::from_serialized(&record)? != *owner {
            return Err(RpcError::error(format!("{label} {key} is owned by another hook")));
        }
    }
    if let Some(claim) = read_claim(store, key)? {
        if claim.expires_at > now && claim.owner != *owner {
            return Err(RpcError::error(format!("{label} {key} is reserved by another hook")));
        }
        drop_claim(store, key, &claim)?;
    }
    store.put(&keys::record(family, key), serialized)?;
    Ok(stored(true))
}
