//! The cross-object call: which Durable Object instance a call addresses ([`Target`]:
//! the archive IndexDO, a run catalog shard or a hook shard) and one call to it
//! ([`ShardCall`]: target, method, arguments). The 0.3 facade, the 0.4 coordinator and the
//! run DO's retention and terminal cleanup all plan their calls in these terms; the shell
//! makes them.
//!
//! Knows the instances' names and env bindings, not what their methods do.

use super::hooks::Family;
use crate::wire::Value;

/// The archive instance name (the 0.3 client's only `index` instance).
pub const ARCHIVE_INSTANCE: &str = "index";

/// The env binding of the run catalog shards (`RunCatalogDO`; none of its methods is on
/// `/v1/rpc`, so the router has no binding for it). build.rs checks wrangler.toml binds the
/// class under this name.
pub const RUN_CATALOG_ENV_BINDING: &str = "WORKFLOW_RUN_CATALOG";

/// One Durable Object instance a facade call addresses.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    /// IndexDO `index` (env `WORKFLOW_INDEX`): pre-upgrade data and arbitrary keys.
    Archive,
    /// RunCatalogDO `run-catalog:v1:XX` (env `WORKFLOW_RUN_CATALOG`).
    Catalog(String),
    /// HookTokenDO `hook-token:v1:XX` (env `WORKFLOW_HOOK_TOKENS`).
    HookTokens(String),
    /// HookIdDO `hook-id:v1:XX` (env `WORKFLOW_HOOK_IDS`).
    HookIds(String),
}

impl Target {
    /// The hook shard of `family` that owns the natural key `key`.
    pub fn hook_shard(family: Family, key: &str) -> Target {
        match family {
            Family::Token => Target::HookTokens(family.shard(key)),
            Family::Id => Target::HookIds(family.shard(key)),
        }
    }

    /// The env binding of the target's class.
    pub fn env_binding(&self) -> &'static str {
        match self {
            Target::Archive => "WORKFLOW_INDEX",
            Target::Catalog(_) => RUN_CATALOG_ENV_BINDING,
            Target::HookTokens(_) => Family::Token.env_binding(),
            Target::HookIds(_) => Family::Id.env_binding(),
        }
    }

    /// The instance name.
    pub fn instance(&self) -> &str {
        match self {
            Target::Archive => ARCHIVE_INSTANCE,
            Target::Catalog(name) | Target::HookTokens(name) | Target::HookIds(name) => name,
        }
    }
}

/// One call to another object (a hook shard, a catalog shard or the archive).
#[derive(Debug, Clone, PartialEq)]
pub struct ShardCall {
    pub target: Target,
    pub method: &'static str,
    pub args: Vec<Value>,
}
