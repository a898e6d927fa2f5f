//! Reservations (`catalog-hooks.md` §3): `reserve`, `releaseClaim` and the owner-checked
//! `releaseBatch`. Each is one transaction.
//!
//! Calls no other object.

use super::keys;
use super::records::{claimed, held_by, natural_key, release_entry, Claim, Deadline};
use crate::protocol::hooks::Owner;
use crate::protocol::hooks::{Family, SameOwnerClaim, MAX_RELEASE_BATCH};
use crate::protocol::hop::Args;
use crate::protocol::lifecycle::{arm_at_most, HOOK_CLAIM_LEASE_MS};
use crate::store::alarm::Alarm;
use crate::store::{get_json, put_json, Store};
use crate::wire::{js, RpcError, Value};

/// The published record's text (`None` when absent).
pub fn read_record(store: &mut dyn Store, family: Family, key: &str) -> Result<Option<String>, RpcError> {
    store.get(&keys::record(family, key))
}

pub fn read_claim(store: &mut dyn Store, key: &str) -> Result<Option<Claim>, RpcError> {
    get_json(store, &keys::claim(key))
}

/// Delete a claim and its deadline entry.
pub fn drop_claim(store: &mut dyn Store, key: &str, claim: &Claim) -> Result<bool, RpcError> {
    store.delete(&claim.deadline_key)?;
    store.delete(&keys::claim(key))
}

/// Store a fresh claim (lease now + 2 101 800 ms) with its deadline entry, and arm the
/// alarm at its expiry unless an earlier alarm is set.
fn new_claim(
    store: &mut dyn Store,
    family: Family,
    now: i64,
    alarm: &mut Alarm,
    key: &str,
    owner: Owner,
    claim_id: &str,
) -> Result<(), RpcError> {
    let expires_at = now.saturating_add(HOOK_CLAIM_LEASE_MS);
    let deadline_key = keys::deadline(expires_at, key);
    let deadline = Deadline { key: key.to_string(), claim_id: claim_id.to_string(), expires_at };
    store.put(&deadline_key, &deadline.to_json(family))?;
    let claim = Claim { owner, claim_id: claim_id.to_string(), reserved_at: now, expires_at, deadline_key };
    put_json(store, &keys::claim(key), &claim)?;
    arm_at_most(alarm, expires_at);
    Ok(())
}

/// `reserve(K, owner, proposedClaimId)` → `{claimed:true, claimId}` | `{claimed:false, holder}`.
///
/// 1. A published record wins, even against its own owner.
/// 2. An expired claim is dropped and treated as absent.
/// 3. A claim by another owner wins.
/// 4. No claim: a fresh one under `proposedClaimId`.
/// 5. The caller's own claim: per [`Family::same_owner_claim`].
pub fn reserve(store: &mut dyn Store, family: Family, now: i64, alarm: &mut Alarm, args: Args) -> Result<Value, RpcError> {
    let key = natural_key(args.raw(0));
    let owner = Owner::from_arg(args.raw(1))?;
    let proposed = js::to_js_string(args.raw(2));
    if let Some(record) = read_record(store, family, &key)? {
        return Ok(held_by(&Owner::from_serialized(&record)?));
    }
    let mut existing = read_claim(store, &key)?;
    if let Some(claim) = existing.as_ref().filter(|claim| claim.expires_at <= now) {
        drop_claim(store, &key, claim)?;
        existing = None;
    }
    let Some(claim) = existing else {
        new_claim(store, family, now, alarm, &key, owner, &proposed)?;
        return Ok(claimed(&proposed));
    };
    if claim.owner != owner {
        return Ok(held_by(&claim.owner));
    }
    match family.same_owner_claim() {
        SameOwnerClaim::Keep => Ok(claimed(&claim.claim_id)),
        SameOwnerClaim::ReplaceUnlessSameId if claim.claim_id == proposed => Ok(claimed(&claim.claim_id)),
        SameOwnerClaim::ReplaceUnlessSameId => {
            store.delete(&claim.deadline_key)?;
            new_claim(store, family, now, alarm, &key, owner, &proposed)?;
            Ok(claimed(&proposed))
        }
    }
}

/// `releaseClaim(K, owner, claimId)` → `null`: drops the claim (and its deadline) only
/// when both the owner and the claim id match.
pub fn release_claim(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let key = natural_key(args.raw(0));
    let owner = Owner::from_arg(args.raw(1))?;
    let claim_id = args.raw(2);
    if let Some(claim) = read_claim(store, &key)? {
        if claim.owner == owner && js::strict_eq(Some(&Value::str(claim.claim_id.as_str())), claim_id) {
            drop_claim(store, &key, &claim)?;
        }
    }
    Ok(Value::Null)
}

/// `releaseBatch([{K, owner}])` → `{deleted}`: at most 64 entries; for each, the record
/// and the claim are deleted when `owner` owns them. `deleted` counts records and claims.
pub fn release_batch(store: &mut dyn Store, family: Family, args: Args) -> Result<Value, RpcError> {
    let released = release_batch_counts(store, family, args)?;
    Ok(Value::object([("deleted", Value::num(released.deleted))]))
}

/// `legacyReleaseBatch([{K, owner}])` → `{deleted, records}`: ours, for the 0.3 facade's
/// `expireRun`, whose count (0.3's) covers the records of both families but the claims of
/// tokens only (0.3 had no hook-id claims). Otherwise [`release_batch`].
pub fn legacy_release_batch(store: &mut dyn Store, family: Family, args: Args) -> Result<Value, RpcError> {
    let released = release_batch_counts(store, family, args)?;
    Ok(Value::object([("deleted", Value::num(released.deleted)), ("records", Value::num(released.records))]))
}

fn release_batch_counts(store: &mut dyn Store, family: Family, args: Args) -> Result<Released, RpcError> {
    let entries = match args.raw(0) {
        Some(Value::Array(items)) => items,
        other => {
            js::member(other, "length")?;
            return Err(RpcError::type_error(format!("{} release batch must be an array", family.label())));
        }
    };
    if entries.len() > MAX_RELEASE_BATCH {
        return Err(RpcError::error(format!("{} release batch is too large", family.label())));
    }
    let entries = entries.iter().map(|entry| release_entry(family, entry)).collect::<Result<Vec<_>, _>>()?;
    release_owned(store, family, &entries)
}

/// What [`release_owned`] deleted: records and claims, and records alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Released {
    pub deleted: u32,
    pub records: u32,
}

/// Delete each entry's record and claim that `owner` owns; returns how many existed.
pub fn release_owned(store: &mut dyn Store, family: Family, entries: &[(String, Owner)]) -> Result<Released, RpcError> {
    let mut deleted = 0u32;
    let mut records = 0u32;
    for (key, owner) in entries {
        if let Some(record) = read_record(store, family, key)? {
            if Owner::from_serialized(&record)? == *owner && store.delete(&keys::record(family, key))? {
                deleted += 1;
                records += 1;
            }
        }
        if let Some(claim) = read_claim(store, key)? {
            if claim.owner == *owner && drop_claim(store, key, &claim)? {
                deleted += 1;
            }
        }
    }
    Ok(Released { deleted, records })
}

/// `claimOf(K, owner)` → `{claimId}` of the owner's unexpired claim, or `null`. Ours, not
/// the reference's: the 0.3 facade uses it when a same-owner claim was made under another
/// id than its deterministic legacy one (a run driven by both client versions).
pub fn claim_of(store: &mut dyn Store, now: i64, args: Args) -> Result<Value, RpcError> {
    let key = natural_key(args.raw(0));
    let owner = Owner::from_arg(args.raw(1))?;
    Ok(match read_claim(store, &key)? {
        Some(claim) if claim.owner == owner && claim.expires_at > now => Value::object([("claimId", Value::String(claim.claim_id))]),
        _ => Value::Null,
    })
}
