//! Read-through to the archive during the upgrade (issue #9, "In-place upgrade"): hook
//! entries written by the pre-upgrade IndexDO (`hook:<token>`, `hookid:<hookId>`,
//! `hookclaim:<token>` in IndexDO `index`) stay visible through the facade, and keep
//! blocking other owners, until the migration has moved them to the shards.
//!
//! * `get` of a hook key that the shard does not have: the archive's record, if its run
//!   is neither terminal nor expired (the same rule as the shards' `legacyGet`);
//! * `reserveHookToken`: before the shards, an archive record of a live run refuses
//!   everyone (0.3: a published hook refuses even its own owner) and an archive claim of
//!   another owner's live run refuses the caller;
//! * `releaseHookToken` / `deleteHookIndexes`: also sent to the archive unchanged (they are
//!   owner-checked and idempotent there), so a pre-upgrade hook released after the upgrade
//!   stops resolving.
//!
//! Everything here is pure; [`super::driver`] makes the calls.
//!
//! Knows no storage: the archive's entries arrive as answers.

use super::hooks::LegacyHook;
use crate::protocol::calls::Target;
use crate::protocol::hooks::Owner;
use crate::wire::{js, RpcError, Value};

/// The archive key of a hook-shard `get`: `hook:<token>` / `hookid:<hookId>`.
pub fn hook_key(target: &Target, key: &str) -> Option<String> {
    match target {
        Target::HookTokens(_) => Some(format!("hook:{key}")),
        Target::HookIds(_) => Some(format!("hookid:{key}")),
        _ => None,
    }
}

/// The owner of an archive hook record (a serialized hook), if it has one.
pub fn record_owner(record: &Value) -> Result<Option<Owner>, RpcError> {
    match record {
        Value::String(text) if !text.is_empty() => Owner::from_serialized(text).map(Some),
        _ => Ok(None),
    }
}

/// The owner of an archive claim (`{owner, reservedAt}`), if it has one.
pub fn claim_owner(claim: &Value) -> Result<Option<Owner>, RpcError> {
    if claim.is_null() {
        return Ok(None);
    }
    match js::member(Some(claim), "owner")? {
        None | Some(Value::Null) => Ok(None),
        owner => Owner::from_arg(owner).map(Some),
    }
}

/// The archive reads a reservation makes first: `get(hook:<token>)`, `get(hookclaim:<token>)`.
pub fn reserve_reads(hook: &LegacyHook) -> [(Target, &'static str, Vec<Value>); 2] {
    [
        (Target::Archive, "get", vec![Value::String(format!("hook:{}", hook.token))]),
        (Target::Archive, "get", vec![Value::String(format!("hookclaim:{}", hook.token))]),
    ]
}

/// The owners whose liveness decides a reservation, in order: the archive record's owner
/// (blocks anyone), then the archive claim's owner when it is another owner.
pub fn reserve_blockers(hook: &LegacyHook, record: &Value, claim: &Value) -> Result<Vec<Owner>, RpcError> {
    let mut out = Vec::new();
    if let Some(owner) = record_owner(record)? {
        out.push(owner);
    }
    if let Some(owner) = claim_owner(claim)?.filter(|owner| *owner != hook.owner) {
        out.push(owner);
    }
    Ok(out)
}

/// `{claimed:false, holder}`.
pub fn refused(holder: &Owner) -> Value {
    Value::object([("claimed", Value::Bool(false)), ("holder", holder.to_value())])
}

/// Whether a lifecycle status keeps a pre-upgrade entry alive (not terminal, not expired).
pub fn alive(status: &Value) -> bool {
    !matches!(status.as_str(), Some("terminal" | "expired"))
}

/// The archive's share of `releaseHookToken` / `deleteHookIndexes`: the 0.3 call itself.
pub fn forward(method: &'static str, args: Vec<Value>) -> (Target, &'static str, Vec<Value>) {
    (Target::Archive, method, args)
}
