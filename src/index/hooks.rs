//! Hook-token ownership (`index-do.md` §2–3): reservation, publication, release and
//! deletion of the `hook:<token>`, `hookid:<hookId>` and `hookclaim:<token>` entries.
//!
//! Each method is one transaction; the checks run in the reference's order, so a malformed
//! stored hook or owner fails with the same error at the same point.
//!
//! Calls no other object.

use crate::protocol::hop::{Args, Ctx};
use crate::store::Store;
use crate::wire::{RpcError, Value};

use super::keys;
use super::records::{claim_owner, owner_from_hook, read, same_owner, write, HookClaim};
use crate::wire::js;

/// `reserveHookToken(token, owner)` → `{claimed: true}` or `{claimed: false, holder}`.
///
/// A published hook always wins (even against its own owner); then a claim by another
/// owner; otherwise the caller's claim is (re)written with `reservedAt` = now.
pub fn reserve(store: &mut dyn Store, ctx: &Ctx, args: Args) -> Result<Value, RpcError> {
    let (token, owner) = (args.raw(0), args.raw(1));
    if let Some(hook) = read(store, &keys::hook(token))? {
        return Ok(not_claimed(owner_from_hook(&hook)?));
    }
    let claim_key = keys::hook_claim(token);
    if let Some(claim) = read(store, &claim_key)? {
        let holder = claim_owner(&claim)?;
        if !same_owner(holder, owner)? {
            return Ok(not_claimed(holder.cloned().unwrap_or(Value::Null)));
        }
    }
    let claim = HookClaim { owner: owner.cloned(), reserved_at: ctx.now };
    write(store, &claim_key, Some(&claim.to_value()))?;
    Ok(Value::object([("claimed", Value::Bool(true))]))
}

fn not_claimed(holder: Value) -> Value {
    Value::object([("claimed", Value::Bool(false)), ("holder", holder)])
}

/// `finalizeHookIndexes(token, hookId, serializedHook, owner)` → `null`.
///
/// For an expired run only the caller's own claim is dropped. Otherwise a hook or claim of
/// another owner is an error, and the hook is published under both keys (the claim, now
/// necessarily the caller's, is removed).
pub fn finalize(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let (token, hook_id, serialized, owner) = (args.raw(0), args.raw(1), args.raw(2), args.raw(3));
    let claim_key = keys::hook_claim(token);
    if read(store, &keys::expired(js::member(owner, "runId")?))?.is_some() {
        if let Some(claim) = read(store, &claim_key)? {
            if same_owner(claim_owner(&claim)?, owner)? {
                store.delete(&claim_key)?;
            }
        }
        return Ok(Value::Null);
    }
    let token_key = keys::hook(token);
    if let Some(hook) = read(store, &token_key)? {
        if !same_owner(Some(&owner_from_hook(&hook)?), owner)? {
            return Err(RpcError::error(format!("Hook token {} is owned by another hook", js::to_js_string(token))));
        }
    }
    let claim = read(store, &claim_key)?;
    if let Some(claim) = &claim {
        if !same_owner(claim_owner(claim)?, owner)? {
            return Err(RpcError::error(format!("Hook token {} is reserved by another hook", js::to_js_string(token))));
        }
    }
    write(store, &token_key, serialized)?;
    write(store, &keys::hook_id(hook_id), serialized)?;
    if claim.is_some() {
        store.delete(&claim_key)?;
    }
    Ok(Value::Null)
}

/// `releaseHookToken(token, owner)` → `null`: drops the claim only if it is the caller's.
pub fn release(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let (token, owner) = (args.raw(0), args.raw(1));
    let claim_key = keys::hook_claim(token);
    if let Some(claim) = read(store, &claim_key)? {
        if same_owner(claim_owner(&claim)?, owner)? {
            store.delete(&claim_key)?;
        }
    }
    Ok(Value::Null)
}

/// `deleteHookIndexes(token, hookId, owner)` → `null`: removes whichever of the three
/// entries belong to `owner`; entries of other owners stay.
pub fn delete(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let (token, hook_id, owner) = (args.raw(0), args.raw(1), args.raw(2));
    delete_owned(store, token, hook_id, owner)?;
    Ok(Value::Null)
}

/// Delete the owner's `hook:`, `hookid:` and `hookclaim:` entries (all three are read
/// first, then checked in that order); returns how many existed and were deleted.
pub fn delete_owned(store: &mut dyn Store, token: Option<&Value>, hook_id: Option<&Value>, owner: Option<&Value>) -> Result<u32, RpcError> {
    let token_key = keys::hook(token);
    let id_key = keys::hook_id(hook_id);
    let claim_key = keys::hook_claim(token);
    let by_token = read(store, &token_key)?;
    let by_id = read(store, &id_key)?;
    let claim = read(store, &claim_key)?;
    let mut deleted = 0u32;
    if let Some(hook) = by_token {
        if same_owner(Some(&owner_from_hook(&hook)?), owner)? && store.delete(&token_key)? {
            deleted = deleted.saturating_add(1);
        }
    }
    if let Some(hook) = by_id {
        if same_owner(Some(&owner_from_hook(&hook)?), owner)? && store.delete(&id_key)? {
            deleted = deleted.saturating_add(1);
        }
    }
    if let Some(claim) = claim {
        if same_owner(claim_owner(&claim)?, owner)? && store.delete(&claim_key)? {
            deleted = deleted.saturating_add(1);
        }
    }
    Ok(deleted)
}
