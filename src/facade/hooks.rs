//! The 0.3 hook-ownership methods over the 0.4 hook shards (spec-0.4 README, "Legacy
//! `index` binding as a facade"). The 0.3 client names no claim, so the facade uses a
//! **deterministic** claim id per owner ([`legacy_claim_id`]) on both shards; a later
//! legacy call by the same owner can then name the exact claim.
//!
//! Every function here is pure: it says which shard calls to make and what to answer from
//! their results. The shard methods are those of [`crate::hook_shard`].
//!
//! Knows no shard's storage.

use crate::protocol::calls::{ShardCall, Target};
use crate::protocol::hooks::{release_entry_value, Family, Owner, LEGACY_PUBLISH};
use crate::wire::uri::encode_uri_component;
use crate::wire::{RpcError, Value};

/// `legacy:<enc(runId)>:<enc(hookId)>`.
pub fn legacy_claim_id(owner: &Owner) -> String {
    format!("legacy:{}:{}", encode_uri_component(&owner.run_id), encode_uri_component(&owner.hook_id))
}

/// The owner's token and hook-id, and the claim id the facade uses for them.
#[derive(Debug, Clone, PartialEq)]
pub struct LegacyHook {
    pub token: String,
    /// The hook id whose shard is addressed (`owner.hookId`, or the explicit argument of
    /// `finalizeHookIndexes` / `deleteHookIndexes`).
    pub hook_id: String,
    pub owner: Owner,
    pub claim_id: String,
}

impl LegacyHook {
    pub fn new(token: String, hook_id: String, owner: Owner) -> LegacyHook {
        let claim_id = legacy_claim_id(&owner);
        LegacyHook { token, hook_id, owner, claim_id }
    }

    // ---- reserveHookToken(token, owner) -------------------------------------------------

    /// Step 1: the token shard's `reserve`.
    pub fn reserve_token(&self) -> ShardCall {
        ShardCall {
            target: Target::hook_shard(Family::Token, &self.token),
            method: "reserve",
            args: vec![Value::str(self.token.as_str()), self.owner.to_value(), Value::str(self.claim_id.as_str())],
        }
    }

    /// Step 2: the hook-id shard's `reserve` under the same claim id.
    pub fn reserve_hook_id(&self) -> ShardCall {
        ShardCall {
            target: Target::hook_shard(Family::Id, &self.hook_id),
            method: "reserve",
            args: vec![Value::str(self.hook_id.as_str()), self.owner.to_value(), Value::str(self.claim_id.as_str())],
        }
    }

    /// After step 1. A published token answers `{claimed:false, holder}` even for its own
    /// owner (the 0.3 rule), as does a claim of another owner: that is the final answer.
    /// Otherwise go on to step 2.
    pub fn after_token(&self, answer: &Value) -> Result<Reserve, RpcError> {
        if claimed(answer)? {
            Ok(Reserve::ReserveHookId)
        } else {
            Ok(Reserve::Answer(not_claimed(answer)))
        }
    }

    /// After step 2 (its error, if any, is handled by [`LegacyHook::after_hook_id_error`]).
    /// Claimed: `{claimed:true}`. Refused: release the token claim, answer the hook-id holder.
    pub fn after_hook_id(&self, answer: &Value) -> Result<(Vec<ShardCall>, Value), RpcError> {
        if claimed(answer)? {
            Ok((Vec::new(), Value::object([("claimed", Value::Bool(true))])))
        } else {
            Ok((vec![self.release_claim(Family::Token)], not_claimed(answer)))
        }
    }

    /// When step 2 threw: release both claims (best effort, in parallel), then rethrow.
    pub fn after_hook_id_error(&self) -> Vec<ShardCall> {
        self.release_reservation()
    }

    // ---- finalizeHookIndexes(token, hookId, serialized, owner) --------------------------

    /// The token shard's `finalize` (its 0.3 lifecycle rule: [`LEGACY_PUBLISH`]) with the
    /// legacy claim id and the run's lifecycle `status` as the facade has just read it (the
    /// shard then does not ask again); only when it answers `stored:true`,
    /// [`LegacyHook::publish_hook_id`]. The 0.3 method answers `null`.
    pub fn finalize_token(&self, serialized: &Value, status: &Value) -> ShardCall {
        self.publication(Family::Token, serialized, status)
    }

    /// Whether a `finalize` answer lets the hook id be published.
    pub fn token_stored(answer: &Value) -> bool {
        answer.get("stored") == Some(&Value::Bool(true))
    }

    /// The hook-id shard's publication, like [`LegacyHook::finalize_token`].
    pub fn publish_hook_id(&self, serialized: &Value, status: &Value) -> ShardCall {
        self.publication(Family::Id, serialized, status)
    }

    /// `legacyPublish(key, serialized, owner, claimId, status)` on `family`'s shard.
    fn publication(&self, family: Family, serialized: &Value, status: &Value) -> ShardCall {
        let key = self.key(family);
        ShardCall {
            target: Target::hook_shard(family, key),
            method: LEGACY_PUBLISH,
            args: vec![Value::str(key), serialized.clone(), self.owner.to_value(), Value::str(self.claim_id.as_str()), status.clone()],
        }
    }

    /// The hook's key in `family`: its token or its hook id.
    fn key(&self, family: Family) -> &str {
        match family {
            Family::Token => &self.token,
            Family::Id => &self.hook_id,
        }
    }

    /// The fallback when a publication call (`finalize_token` / `publish_hook_id`) failed
    /// because the key is "reserved by another hook": ask that shard for the owner's
    /// unexpired claim (`claimOf`) …
    pub fn claim_of(&self, publication: &ShardCall) -> ShardCall {
        let key = if matches!(publication.target, Target::HookTokens(_)) { &self.token } else { &self.hook_id };
        ShardCall { target: publication.target.clone(), method: "claimOf", args: vec![Value::str(key.as_str()), self.owner.to_value()] }
    }

    /// … and, when it names another claim id than the one tried, the same publication
    /// under that id (else `None`: the original error stands).
    pub fn retry_with(publication: &ShardCall, claim_of: &Value) -> Option<ShardCall> {
        let claim_id = claim_of.get("claimId")?.clone();
        let mut retry = publication.clone();
        let slot = retry.args.get_mut(3)?;
        if *slot == claim_id {
            return None;
        }
        *slot = claim_id;
        Some(retry)
    }

    /// Whether a publication error is the one [`LegacyHook::claim_of`] can resolve.
    pub fn is_reserved_elsewhere(error: &RpcError) -> bool {
        error.message.ends_with(" is reserved by another hook")
    }

    // ---- releaseHookToken(token, owner) ---------------------------------------------------

    /// `releaseClaim` of the legacy claim on both shards (in parallel); answers `null`.
    pub fn release_reservation(&self) -> Vec<ShardCall> {
        vec![self.release_claim(Family::Token), self.release_claim(Family::Id)]
    }

    fn release_claim(&self, family: Family) -> ShardCall {
        let key = self.key(family);
        ShardCall {
            target: Target::hook_shard(family, key),
            method: "releaseClaim",
            args: vec![Value::str(key), self.owner.to_value(), Value::str(self.claim_id.as_str())],
        }
    }

    // ---- deleteHookIndexes(token, hookId, owner) ----------------------------------------

    /// An owner-checked `releaseBatch` of one entry on each shard (in parallel); answers `null`.
    pub fn delete_indexes(&self) -> Vec<ShardCall> {
        [(Family::Token, &self.token), (Family::Id, &self.hook_id)]
            .into_iter()
            .map(|(family, key)| ShardCall {
                target: Target::hook_shard(family, key),
                method: "releaseBatch",
                args: vec![Value::Array(vec![release_entry_value(family, key, &self.owner)])],
            })
            .collect()
    }
}

/// What `reserveHookToken` does after the token shard answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Reserve {
    /// The final 0.3 answer.
    Answer(Value),
    /// Reserve the hook id next.
    ReserveHookId,
}

fn claimed(answer: &Value) -> Result<bool, RpcError> {
    answer.get("claimed").and_then(Value::as_bool).ok_or_else(|| RpcError::error("malformed hook shard reservation"))
}

/// `{claimed:false, holder}` from a shard's refusal.
fn not_claimed(answer: &Value) -> Value {
    Value::object([("claimed", Value::Bool(false)), ("holder", answer.get("holder").cloned().unwrap_or(Value::Null))])
}
