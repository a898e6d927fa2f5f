//! The hook shards as their callers see them: the two key families one hook-shard
//! algorithm serves, hook **tokens** (HookTokenDO) and hook **ids** (HookIdDO), whose
//! differences are all methods of [`Family`] (no other code branches on it); the owner
//! `{runId, hookId}` every claim and record names ([`Owner`]); and the `releaseBatch`
//! entries the coordinator, the 0.3 facade and the run's terminal cleanup send
//! ([`release_entry_value`], at most [`MAX_RELEASE_BATCH`] a call).
//!
//! Knows no shard's storage (that is [`crate::hook_shard`]) and no caller.

use serde::{Deserialize, Serialize};

use crate::wire::json_parse::parse_shared;
use crate::wire::router::Binding;
use crate::wire::{js, Map, RpcError, Value};

/// Most entries one `releaseBatch` accepts.
pub const MAX_RELEASE_BATCH: usize = 64;

/// The 0.3 facade's `get`: visible unless the owner's run is terminal or expired
/// ([`crate::hook_shard::visibility::Visibility::NotEnded`]).
pub const LEGACY_GET: &str = "legacyGet";
/// The 0.3 facade's `finalize` / `publish`, with the same lifecycle rule.
pub const LEGACY_PUBLISH: &str = "legacyPublish";

/// Which natural key a hook shard owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// HookTokenDO: records by token, `hook-token:v1:XX`.
    Token,
    /// HookIdDO: records by hookId, `hook-id:v1:XX`.
    Id,
}

/// What `reserve` does when the caller already holds the claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SameOwnerClaim {
    /// Answer the existing claim id; the lease is not renewed (HookTokenDO).
    Keep,
    /// Answer it when the proposed id is the same, else replace the claim with a fresh
    /// one under the proposed id and a new lease (HookIdDO).
    ReplaceUnlessSameId,
}

impl Family {
    /// The public binding of the class (its names are the router's).
    pub fn binding(self) -> Binding {
        match self {
            Family::Token => Binding::HookTokens,
            Family::Id => Binding::HookIds,
        }
    }

    pub fn class(self) -> &'static str {
        self.binding().class_name()
    }

    /// The env binding the shell needs for the class.
    pub fn env_binding(self) -> &'static str {
        self.binding().env_name()
    }

    /// The RPC binding key (`/v1/rpc/<key>/<shard>/get`).
    pub fn rpc_binding(self) -> &'static str {
        self.binding().key()
    }

    /// Prefix of the published record key (`hook:` / `hookid:`), before the encoded key.
    pub fn record_prefix(self) -> &'static str {
        match self {
            Family::Token => "hook:",
            Family::Id => "hookid:",
        }
    }

    /// The member naming the natural key in release-batch entries and deadline records.
    pub fn key_member(self) -> &'static str {
        match self {
            Family::Token => "token",
            Family::Id => "hookId",
        }
    }

    /// The subject of the error messages (`Hook token <K> …` / `Hook id <K> …`).
    pub fn label(self) -> &'static str {
        match self {
            Family::Token => "Hook token",
            Family::Id => "Hook id",
        }
    }

    /// The name of the lifecycle-checked publication method.
    pub fn publish_method(self) -> &'static str {
        match self {
            Family::Token => "finalize",
            Family::Id => "publish",
        }
    }

    pub fn same_owner_claim(self) -> SameOwnerClaim {
        match self {
            Family::Token => SameOwnerClaim::Keep,
            Family::Id => SameOwnerClaim::ReplaceUnlessSameId,
        }
    }

    /// The shard instance of a natural key.
    pub fn shard(self, key: &str) -> String {
        match self {
            Family::Token => crate::protocol::shard::hook_token(key),
            Family::Id => crate::protocol::shard::hook_id(key),
        }
    }

    /// Every method of the class; only `get` is reachable through `/v1/rpc`.
    pub fn methods(self) -> [&'static str; 5] {
        ["get", "reserve", self.publish_method(), "releaseClaim", "releaseBatch"]
    }

    /// Internal methods of ours (not in the reference class), for the 0.3 facade.
    pub fn facade_methods(self) -> [&'static str; 4] {
        ["claimOf", "legacyReleaseBatch", LEGACY_GET, LEGACY_PUBLISH]
    }
}

/// `{runId, hookId}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Owner {
    pub run_id: String,
    pub hook_id: String,
}

impl Owner {
    pub fn new(run_id: impl Into<String>, hook_id: impl Into<String>) -> Owner {
        Owner { run_id: run_id.into(), hook_id: hook_id.into() }
    }

    /// An owner argument: an object with string `runId` and `hookId` (a missing owner
    /// fails on the member read, as in JavaScript; non-string members are refused).
    pub fn from_arg(v: Option<&Value>) -> Result<Owner, RpcError> {
        let run_id = js::member(v, "runId")?;
        let hook_id = js::member(v, "hookId")?;
        match (run_id, hook_id) {
            (Some(Value::String(run_id)), Some(Value::String(hook_id))) => Ok(Owner::new(run_id.as_str(), hook_id.as_str())),
            _ => Err(RpcError::type_error("hook owner must be {runId, hookId} strings")),
        }
    }

    /// The owner of a serialized hook: `runId` and `hookId` of its shared-codec parse.
    pub fn from_serialized(text: &str) -> Result<Owner, RpcError> {
        let hook = parse_shared(text)?;
        match (js::member(Some(&hook), "runId")?, js::member(Some(&hook), "hookId")?) {
            (Some(Value::String(run_id)), Some(Value::String(hook_id))) => Ok(Owner::new(run_id.as_str(), hook_id.as_str())),
            _ => Err(RpcError::type_error("serialized hook has no string runId and hookId")),
        }
    }

    pub fn to_value(&self) -> Value {
        Value::object([("runId", Value::str(self.run_id.as_str())), ("hookId", Value::str(self.hook_id.as_str()))])
    }
}

/// A release-batch entry as the coordinator builds it.
pub fn release_entry_value(family: Family, key: &str, owner: &Owner) -> Value {
    let mut map = Map::new();
    map.insert(family.key_member().into(), Value::str(key));
    map.insert("owner".into(), owner.to_value());
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners() {
        let owner = Owner::new("wrun_1", "h1");
        assert_eq!(Owner::from_arg(Some(&owner.to_value())), Ok(owner.clone()));
        assert_eq!(Owner::from_arg(None).unwrap_err().message, "Cannot read properties of undefined (reading 'runId')");
        assert_eq!(Owner::from_arg(Some(&Value::object([("runId", Value::num(1))]))).unwrap_err().name, "TypeError");
        let hook = r#"{"runId":"wrun_1","hookId":"h1","token":"t","createdAt":{"__type":"Date","iso":"2026-01-01T00:00:00.000Z"}}"#;
        assert_eq!(Owner::from_serialized(hook), Ok(owner));
        assert_eq!(Owner::from_serialized("nope").unwrap_err().name, "SyntaxError");
        assert_eq!(Owner::from_serialized("null").unwrap_err().name, "TypeError");
        assert_eq!(Owner::from_serialized("{}").unwrap_err().name, "TypeError");
    }
}
