//! `resolveHookTokenClaim({hookId, token, claimId})` (spec-0.4 `run-do.md` §3): after an
//! `applyEvent(hook_created)` whose outcome the client never saw, decide whether it
//! committed. If not, fence the claim id so that the lost request, should it still arrive,
//! fails `HOOK_CLAIM_CANCELLED` instead of committing a hook whose claims the client is
//! about to release.
//!
//! Knows no hook shard: the client releases its claims.

use super::fence::retention_state;
use super::keys;
use super::records::Record;
use crate::protocol::hop::Args;
use crate::store::{put_json, Store};
use crate::wire::js::{member, to_js_string};
use crate::wire::{RpcError, Value};

fn committed(yes: bool) -> Value {
    Value::object([("committed", Value::Bool(yes))])
}

/// One transaction: an expired run writes nothing and answers `false`; a hook `hookId`
/// holding `token` answers `true`; otherwise the fence `hookclaimcancelled:<enc(claimId)>`
/// is written and the answer is `false`.
pub fn resolve(store: &mut dyn Store, now: i64, args: Args) -> Result<Value, RpcError> {
    let request = args.raw(0);
    let hook_id = member(request, "hookId")?.cloned().unwrap_or(Value::Null);
    let token = member(request, "token")?.cloned().unwrap_or(Value::Null);
    let claim_id = member(request, "claimId")?.cloned().unwrap_or(Value::Null);
    if retention_state(store, now)?.tombstone.is_some() {
        return Ok(committed(false));
    }
    if let Some(hook) = Record::load(store, &keys::hook(&to_js_string(Some(&hook_id))))? {
        if hook.get("token") == Some(&token) {
            return Ok(committed(true));
        }
    }
    let fence = Value::object([("hookId", hook_id), ("token", token), ("canceledAt", Value::date(now))]);
    put_json(store, &keys::hook_claim_cancelled(&to_js_string(Some(&claim_id))), &fence)?;
    Ok(committed(false))
}
