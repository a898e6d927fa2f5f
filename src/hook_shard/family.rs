//! The two key families one hook-shard algorithm serves: hook **tokens** (HookTokenDO)
//! and hook **ids** (HookIdDO). Everything that differs between the two classes is a
//! method of [`Family`]; no other code branches on it.

use crate::wire::router::Binding;

/// The 0.3 facade's `get`: visible unless the owner's run is terminal or expired
/// ([`crate::hook_shard::driver::Visibility::NotEnded`]).
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
