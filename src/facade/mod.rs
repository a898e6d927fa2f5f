//! The 0.3 `index` binding over the 0.4 index shards, as a **pure decision table** (spec-0.4
//! README, "Legacy `index` binding as a facade"): for each of the ten 0.3 IndexDO methods
//! and the key family of its arguments, which instance serves it — the run's catalog shard
//! (or all 16), a hook-token or hook-id shard, or the archive IndexDO instance `index` —
//! and, where several calls are needed, the calls and the merge of their answers.
//!
//! The decisions are pure ([`route`], [`list`], [`hooks`]); [`driver`] executes a
//! [`Route`] over a [`driver::FacadeHost`] the shell provides (`src/shell/facade.rs`). Files:
//! [`list`] (the catalog fan-out and page merge), [`hooks`] (the hook-ownership methods
//! over both hook shards), [`driver`] (the calls, concurrent where independent).
//!
//! | 0.3 method | key family | target |
//! | --- | --- | --- |
//! | `get(key)` | `run:…:<runId>`, `runall:…:<runId>` | catalog shard of the runId after the last `:`; on a miss the other 15 shards, then the archive ([`Route::RunGet`]) |
//! | `get(key)` | `correlation:…:<runId>` | the same as run keys (the catalog shard of the runId after the last `:`, …) |
//! | `get(key)` | `hook:<token>` | `hook-tokens` shard of the token, `legacyGet(token)` (lifecycle-checked: hidden once the run is terminal or expired) |
//! | `get(key)` | `hookid:<hookId>` | `hook-ids` shard of the hook id, `legacyGet(hookId)` (the same) |
//! | `get(key)` | anything else | archive |
//! | `putOwned(runId, key, value)` | `run:`, `runall:` | catalog shard of `runId`: refused (`{stored:false}`) when `runs/<runId>.getLifecycleStatus()` is `expired`, else `upsertKey`. The router's plan makes this the shard's `upsertRunKey`, which asks under a lifecycle lease (`crate::catalog::lease`); the driver (a stale migration view) asks each time |
//! | `putOwned(runId, key, value)` | `correlation:` | by default (`WORKFLOW_CORRELATION_INDEX=off`) `{"stored":true}` at once, nothing written ([`discarded_put`]): no client reads them. With `=on` (the 0.3.0 reference's index, which the 0.3 golden files read back): catalog shard of `runId`, `upsertKey`, no lifecycle check (refused behind the catalog fence, as 0.3 refused behind its own) — the same one hop as the run keys, spread over 16 shards |
//! | `putOwned(runId, key, value)` | anything else | archive |
//! | `list(options)` | prefix `run:…` / `runall:…` / `correlation:…` | all 16 catalog shards (+ archive while migrating), merged ([`list`]) |
//! | `list(options)` | any other prefix | archive |
//! | `reserveHookToken(token, owner)` | — | token shard, then hook-id shard of `owner.hookId`, claim id [`hooks::legacy_claim_id`] |
//! | `finalizeHookIndexes(token, hookId, serialized, owner)` | — | token shard `legacyPublish` (`finalize` with the 0.3 lifecycle rule), then hook-id shard of `hookId` `legacyPublish`; a key the owner holds under another claim id is retried under it (`claimOf`) |
//! | `releaseHookToken(token, owner)` | — | `releaseClaim` on both shards |
//! | `deleteHookIndexes(token, hookId, owner)` | — | `releaseBatch` of one entry on both shards |
//! | `expireRun(request)` | — | archive first (0.3 validation and errors, pre-upgrade entries), then the catalog shard `expireKeys` and the hook shards' `legacyReleaseBatch` ([`expiry`]); `deleted` counted as 0.3 did |
//! | `put`, `delete` | — | archive |
//!
//! Knows the cores only by their methods and answers, and nothing of the platform.

pub mod archive;
pub mod driver;
pub mod expiry;
pub mod hooks;
pub mod lazy_merge;
pub mod list;
pub mod migrate;

#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
pub(crate) mod tests;

use crate::protocol::calls::Target;
use crate::protocol::hooks::Owner;
use crate::protocol::shard;
use crate::wire::{js, RpcError, Value};

use hooks::LegacyHook;
use list::ListRoute;

/// How one 0.3 `index` call is served.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// Forward the call unchanged to the archive.
    Archive,
    /// `get` of a run or correlation key: ask the catalog shards with `list({prefix: key, limit: 1})` —
    /// the home shard (first in `order`), on a miss the other 15 (concurrently is fine) —
    /// then the archive with `get(key)`; the first hit ([`run_get_hit`]) is the answer,
    /// else `null`.
    RunGet { key: String, order: Vec<Target> },
    /// `get` of a hook key: `legacyGet(natural key)` on that shard; its answer is the answer.
    HookGet { target: Target, key: String },
    /// `putOwned` of a run key: ask `runs/<runId>.getLifecycleStatus()`; `expired` →
    /// `{stored:false}`; otherwise `upsertKey(runId, key, value)` on the target.
    PutRun { target: Target, run_id: String, key: String, value: Value },
    /// `putOwned` of a `correlation:` key: `upsertKey(runId, key, value)` on the target,
    /// without the lifecycle check.
    PutKey { target: Target, run_id: String, key: String, value: Value },
    /// `expireRun(request)`: [`crate::protocol::expiry::archive_call`], then
    /// [`crate::protocol::expiry::shard_calls`] concurrently; answers [`expiry::answer`].
    ExpireRun(Value),
    /// `list` over the catalog: [`list::MergedList`].
    List(list::MergedList),
    /// `reserveHookToken`: [`LegacyHook::reserve_token`], [`LegacyHook::after_token`], …
    ReserveHookToken(LegacyHook),
    /// `finalizeHookIndexes`: [`LegacyHook::finalize_token`], then maybe
    /// [`LegacyHook::publish_hook_id`]; answers `null`.
    FinalizeHookIndexes { hook: LegacyHook, serialized: Value },
    /// `releaseHookToken`: [`LegacyHook::release_reservation`]; answers `null`.
    ReleaseHookToken(LegacyHook),
    /// `deleteHookIndexes`: [`LegacyHook::delete_indexes`]; answers `null`.
    DeleteHookIndexes(LegacyHook),
}

/// Key families the facade tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyFamily {
    Run,
    HookToken,
    HookId,
    Correlation,
    Other,
}

/// The family of a 0.3 index key.
pub fn key_family(key: &str) -> KeyFamily {
    if key.starts_with("run:") || key.starts_with("runall:") {
        KeyFamily::Run
    } else if key.starts_with("hookid:") {
        KeyFamily::HookId
    } else if key.starts_with("hook:") {
        KeyFamily::HookToken
    } else if key.starts_with("correlation:") {
        KeyFamily::Correlation
    } else {
        KeyFamily::Other
    }
}

/// Whether [`route`]'s decision for this call, or its serving, depends on `with_archive`:
/// reads (`get`, `list`), hook reservations and releases, and a run's expiry do;
/// `putOwned` (a run's start and its status changes: a catalog shard's, or the archive's
/// for a key of no known family), `finalizeHookIndexes` and `put`/`delete` (the archive's
/// anyway) do not, so they are served without asking whether the archive is still in use.
pub fn archive_matters(method: &str) -> bool {
    !matches!(method, "putOwned" | "finalizeHookIndexes" | "put" | "delete")
}

/// Decide one 0.3 `index` call. `with_archive` makes run reads also consult the archive
/// (until the migration has emptied it of run keys).
pub fn route(method: &str, args: &[Value], with_archive: bool) -> Result<Route, RpcError> {
    let arg = |i: usize| args.get(i);
    match method {
        "get" => Ok(route_get(&js::to_js_string(arg(0)), with_archive)),
        "putOwned" => {
            let key = js::to_js_string(arg(1));
            match key_family(&key) {
                KeyFamily::Run => {
                    let run_id = js::to_js_string(arg(0));
                    let target = Target::Catalog(shard::run_catalog(&run_id));
                    Ok(Route::PutRun { target, run_id, key, value: arg(2).cloned().unwrap_or(Value::Null) })
                }
                KeyFamily::Correlation => {
                    let run_id = js::to_js_string(arg(0));
                    let target = Target::Catalog(shard::run_catalog(&run_id));
                    Ok(Route::PutKey { target, run_id, key, value: arg(2).cloned().unwrap_or(Value::Null) })
                }
                _ => Ok(Route::Archive),
            }
        }
        "list" => Ok(match list::plan(arg(0), with_archive)? {
            ListRoute::Merged(plan) => Route::List(plan),
            ListRoute::Archive => Route::Archive,
        }),
        "reserveHookToken" => {
            let owner = Owner::from_arg(arg(1))?;
            Ok(Route::ReserveHookToken(LegacyHook::new(js::to_js_string(arg(0)), owner.hook_id.clone(), owner)))
        }
        "finalizeHookIndexes" => {
            let owner = Owner::from_arg(arg(3))?;
            let hook = LegacyHook::new(js::to_js_string(arg(0)), js::to_js_string(arg(1)), owner);
            Ok(Route::FinalizeHookIndexes { hook, serialized: arg(2).cloned().unwrap_or(Value::Null) })
        }
        "releaseHookToken" => {
            let owner = Owner::from_arg(arg(1))?;
            Ok(Route::ReleaseHookToken(LegacyHook::new(js::to_js_string(arg(0)), owner.hook_id.clone(), owner)))
        }
        "deleteHookIndexes" => {
            let owner = Owner::from_arg(arg(2))?;
            Ok(Route::DeleteHookIndexes(LegacyHook::new(js::to_js_string(arg(0)), js::to_js_string(arg(1)), owner)))
        }
        "expireRun" => Ok(Route::ExpireRun(arg(0).cloned().unwrap_or(Value::Null))),
        "put" | "delete" => Ok(Route::Archive),
        other => Err(RpcError::type_error(format!("IndexDO.{other} is not a function"))),
    }
}

fn route_get(key: &str, with_archive: bool) -> Route {
    match key_family(key) {
        KeyFamily::Run | KeyFamily::Correlation => {
            // Client-minted run ids contain no `:`; the id is what follows the last one.
            let run_id = key.rsplit(':').next().unwrap_or_default();
            let home = shard::run_catalog(run_id);
            let mut order = vec![Target::Catalog(home.clone())];
            order.extend(shard::all_run_catalogs().into_iter().filter(|name| *name != home).map(Target::Catalog));
            if with_archive {
                order.push(Target::Archive);
            }
            Route::RunGet { key: key.to_string(), order }
        }
        KeyFamily::HookToken => {
            let token = key.strip_prefix("hook:").unwrap_or_default();
            Route::HookGet { target: Target::HookTokens(shard::hook_token(token)), key: token.to_string() }
        }
        KeyFamily::HookId => {
            let hook_id = key.strip_prefix("hookid:").unwrap_or_default();
            Route::HookGet { target: Target::HookIds(shard::hook_id(hook_id)), key: hook_id.to_string() }
        }
        KeyFamily::Other => Route::Archive,
    }
}

/// The `list` options a [`Route::RunGet`] sends to a catalog shard.
pub fn run_get_options(key: &str) -> Value {
    Value::object([("prefix", Value::str(key)), ("limit", Value::num(1))])
}

/// The value of `key` in a catalog shard's page for [`run_get_options`], if it is there.
pub fn run_get_hit(key: &str, page: &Value) -> Option<Value> {
    let first = page.get("keys")?.as_array()?.first()?;
    (first.get("name")?.as_str()? == key).then(|| first.get("value").cloned())?
}

/// Whether a lifecycle status refuses a legacy `putOwned` (the authoritative check that
/// replaces the publication lease the 0.3 client does not send).
pub fn refuses_put(lifecycle_status: &Value) -> bool {
    lifecycle_status.as_str() == Some("expired")
}

/// The catalog shard's single-key upsert that serves a legacy `putOwned`.
pub const UPSERT_KEY: &str = "upsertKey";

/// The arguments of [`UPSERT_KEY`].
pub fn upsert_args(run_id: String, key: String, value: Value) -> Vec<Value> {
    vec![Value::String(run_id), Value::String(key), value]
}

/// The answer to a `putOwned` of a `correlation:` key ([`Route::PutKey`]) when the
/// deployment keeps no correlation index (`WORKFLOW_CORRELATION_INDEX=off`,
/// [`crate::config::Config::correlation_index`]): `{"stored":true}` and nothing written,
/// as spec-0.4's facade recommends (no client reads these keys; the 0.3.0 client's
/// `listByCorrelationId` scans the run's events). A value that is not a string is refused
/// as the catalog shard would refuse it, and a bad setting with its message. `None`: the
/// key is kept (route it).
pub fn discarded_put(route: &Route, keep: Result<bool, crate::config::ConfigError>) -> Option<Result<Value, RpcError>> {
    let Route::PutKey { value, .. } = route else { return None };
    match keep {
        Ok(true) => None,
        Err(e) => Some(Err(e.into())),
        Ok(false) if !matches!(value, Value::String(_)) => Some(Err(RpcError::type_error("Run catalog metadata must be a string"))),
        Ok(false) => Some(Ok(Value::object([("stored", Value::Bool(true))]))),
    }
}

/// The answer to a legacy `putOwned` that [`refuses_put`].
pub fn refused_put() -> Value {
    Value::object([("stored", Value::Bool(false))])
}

/// The run DO method whose answer [`refuses_put`] judges.
pub use crate::protocol::leases::LIFECYCLE_METHOD;
