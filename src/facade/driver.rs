//! Executes a [`Route`] of the decision table: the calls to the catalog shards, hook
//! shards, archive and run DO that a 0.3 `index` call becomes, concurrent where the calls
//! are independent. Generic over [`FacadeHost`], so the wasm router drives it against
//! real Durable Objects and the native tests against the real cores.
//!
//! Knows the objects only through [`FacadeHost`].

#![allow(async_fn_in_trait)] // hosts are single-threaded (wasm, tests): no Send bound wanted

use futures_util::future::join_all;

use super::hooks::{LegacyHook, Reserve};
use super::lazy_merge::{asked_limit, LazyMerge};
use super::list::MergedList;
use super::{archive, expiry, refused_put, refuses_put, route, run_get_hit, run_get_options, upsert_args, Route, UPSERT_KEY};
use crate::protocol::calls::{ShardCall, Target};
use crate::protocol::expiry::{archive_call, shard_calls};
use crate::protocol::hooks::LEGACY_GET;
use crate::protocol::hop::Args;
use crate::store::MemoryStore;
use crate::wire::{RpcError, Value};

/// What the facade needs from its environment.
pub trait FacadeHost {
    /// Call a method of the instance `target` names (its env binding:
    /// [`Target::env_binding`], its name: [`Target::instance`]).
    async fn call(&self, target: &Target, method: &str, args: Vec<Value>) -> Result<Value, RpcError>;
    /// `WorkflowRunDO(runId).getLifecycleStatus()`.
    async fn lifecycle_status(&self, run_id: &str) -> Result<Value, RpcError>;
}

/// A merged listing, read round by round until its page is known ([`LazyMerge`]): the
/// sources' calls of a round run in parallel.
pub async fn list_merged<H: FacadeHost>(host: &H, plan: &MergedList) -> Result<Value, RpcError> {
    let mut merging = LazyMerge::new(plan);
    loop {
        let calls = merging.next_round();
        if calls.is_empty() {
            return merging.page();
        }
        let answers = join_all(calls.iter().map(|(_, target, options)| host.call(target, "list", vec![options.clone()]))).await;
        for ((index, _, options), answer) in calls.iter().zip(answers) {
            merging.take(*index, asked_limit(options), &answer?)?;
        }
        merging.end_round();
    }
}

/// Serve one 0.3 `index` call (`with_archive`: see [`route`]).
pub async fn call<H: FacadeHost>(host: &H, method: &str, args: Vec<Value>, with_archive: bool) -> Result<Value, RpcError> {
    match route(method, &args, with_archive)? {
        Route::Archive => host.call(&Target::Archive, method, args).await,
        Route::PutKey { target, run_id, key, value } => host.call(&target, UPSERT_KEY, upsert_args(run_id, key, value)).await,
        Route::ExpireRun(request) => {
            let archived = if with_archive || expiry::needs_archive(&request) {
                let archive = archive_call(&request);
                host.call(&archive.target, archive.method, archive.args).await?
            } else {
                // The archive holds no entry of any run any more: the same request checked
                // as it would have checked it, against nothing (its errors are the answer).
                crate::index::expiry::expire_run(&mut MemoryStore::new(), Args(std::slice::from_ref(&request)))?
            };
            let calls = shard_calls(&request);
            let answers = all(host, calls.clone()).await?;
            expiry::answer(&archived, &calls, &answers)
        }
        Route::RunGet { key, order } => run_get(host, &key, &order).await,
        Route::HookGet { target, key } => {
            let found = host.call(&target, LEGACY_GET, vec![Value::String(key.clone())]).await?;
            match archive::hook_key(&target, &key) {
                Some(archive_key) if with_archive && found.is_null() => archived_hook(host, archive_key).await,
                _ => Ok(found),
            }
        }
        Route::PutRun { target, run_id, key, value } => {
            if refuses_put(&host.lifecycle_status(&run_id).await?) {
                return Ok(refused_put());
            }
            host.call(&target, UPSERT_KEY, upsert_args(run_id, key, value)).await
        }
        Route::List(plan) => list_merged(host, &plan).await,
        Route::ReserveHookToken(hook) => {
            if with_archive {
                if let Some(refusal) = archive_refusal(host, &hook).await? {
                    return Ok(refusal);
                }
            }
            reserve(host, &hook).await
        }
        Route::FinalizeHookIndexes { hook, serialized } => {
            // One lifecycle read for the whole finalize: the fence check's, handed to both
            // shards' publications instead of each asking the run DO again. The run may end
            // between this read and a shard's transaction, as it may between a shard's own
            // ask and its transaction: a hook published that way belongs to a terminal run,
            // which hides it (`legacyGet`) and releases it (the client's `deleteHookIndexes`
            // of `releasedHooks`, and the terminal cleanup's marker page).
            let status = host.lifecycle_status(&hook.owner.run_id).await?;
            if fenced_without_run(host, &hook.owner.run_id, &status).await? {
                // 0.3: a finalize for an expired run is ignored and drops the owner's claim.
                all(host, hook.release_reservation()).await?;
                return Ok(Value::Null);
            }
            let by_token = publish(host, &hook, hook.finalize_token(&serialized, &status)).await?;
            if LegacyHook::token_stored(&by_token) {
                publish(host, &hook, hook.publish_hook_id(&serialized, &status)).await?;
            }
            Ok(Value::Null)
        }
        Route::ReleaseHookToken(hook) => {
            let archived = with_archive.then(|| archive::forward("releaseHookToken", args.clone()));
            with_archive_call(host, hook.release_reservation(), archived).await?;
            Ok(Value::Null)
        }
        Route::DeleteHookIndexes(hook) => {
            let archived = with_archive.then(|| archive::forward("deleteHookIndexes", args.clone()));
            with_archive_call(host, hook.delete_indexes(), archived).await?;
            Ok(Value::Null)
        }
    }
}

/// A publication under the legacy claim id; when the owner holds the key under another
/// claim id, once more under that one.
async fn publish<H: FacadeHost>(host: &H, hook: &LegacyHook, publication: ShardCall) -> Result<Value, RpcError> {
    match shard_call(host, publication.clone()).await {
        Err(e) if LegacyHook::is_reserved_elsewhere(&e) => {
            let claim = shard_call(host, hook.claim_of(&publication)).await?;
            match LegacyHook::retry_with(&publication, &claim) {
                Some(retry) => shard_call(host, retry).await,
                None => Err(e),
            }
        }
        other => other,
    }
}

async fn shard_call<H: FacadeHost>(host: &H, call: ShardCall) -> Result<Value, RpcError> {
    host.call(&call.target, call.method, call.args).await
}

/// Every call concurrently; the first error, once all have finished.
async fn all<H: FacadeHost>(host: &H, calls: Vec<ShardCall>) -> Result<Vec<Value>, RpcError> {
    join_all(calls.into_iter().map(|call| shard_call(host, call))).await.into_iter().collect()
}

/// A hook the shards do not have, from the archive: shown while its run lives.
async fn archived_hook<H: FacadeHost>(host: &H, archive_key: String) -> Result<Value, RpcError> {
    let record = host.call(&Target::Archive, "get", vec![Value::String(archive_key)]).await?;
    match archive::record_owner(&record)? {
        Some(owner) if archive::alive(&host.lifecycle_status(&owner.run_id).await?) => Ok(record),
        _ => Ok(Value::Null),
    }
}

/// The refusal a pre-upgrade record or claim of a live run imposes on a reservation.
async fn archive_refusal<H: FacadeHost>(host: &H, hook: &LegacyHook) -> Result<Option<Value>, RpcError> {
    let reads = archive::reserve_reads(hook);
    let answers = join_all(reads.iter().map(|(target, method, args)| host.call(target, method, args.clone()))).await;
    let [record, claim]: [Value; 2] = match answers.into_iter().collect::<Result<Vec<_>, _>>()?.try_into() {
        Ok(pair) => pair,
        Err(_) => return Err(RpcError::error("archive reads")),
    };
    for owner in archive::reserve_blockers(hook, &record, &claim)? {
        if archive::alive(&host.lifecycle_status(&owner.run_id).await?) {
            return Ok(Some(archive::refused(&owner)));
        }
    }
    Ok(None)
}

/// The shard calls and, concurrently, the archive's (its answer is not used).
async fn with_archive_call<H: FacadeHost>(
    host: &H,
    calls: Vec<ShardCall>,
    archived: Option<(Target, &'static str, Vec<Value>)>,
) -> Result<(), RpcError> {
    let archive = async {
        match &archived {
            Some((target, method, args)) => host.call(target, method, args.clone()).await.map(drop),
            None => Ok(()),
        }
    };
    let (shards, archive) = futures_util::future::join(all(host, calls), archive).await;
    shards?;
    archive
}

/// Whether the run is unknown to the run DO (`missing`) but fenced by an `expireRun` in its
/// catalog shard: the 0.3 `index.expireRun` of a run the run DO never held (tests and
/// recordings do this). A run the run DO holds is judged by its lifecycle `status` (read
/// by the caller), in the hook shards. One catalog call, only for missing runs.
async fn fenced_without_run<H: FacadeHost>(host: &H, run_id: &str, status: &Value) -> Result<bool, RpcError> {
    if status.as_str() != Some("missing") {
        return Ok(false);
    }
    let fence = format!("expired:{run_id}");
    let target = Target::Catalog(crate::protocol::shard::run_catalog(run_id));
    Ok(run_get_hit(&fence, &host.call(&target, "list", vec![run_get_options(&fence)]).await?).is_some())
}

/// The home shard; on a miss the other catalog shards concurrently; then the archive.
async fn run_get<H: FacadeHost>(host: &H, key: &str, order: &[Target]) -> Result<Value, RpcError> {
    let (catalogs, archive): (Vec<&Target>, Vec<&Target>) = order.iter().partition(|t| matches!(t, Target::Catalog(_)));
    if let Some((home, rest)) = catalogs.split_first() {
        if let Some(hit) = run_get_hit(key, &host.call(home, "list", vec![run_get_options(key)]).await?) {
            return Ok(hit);
        }
        for page in join_all(rest.iter().map(|target| host.call(target, "list", vec![run_get_options(key)]))).await {
            if let Some(hit) = run_get_hit(key, &page?) {
                return Ok(hit);
            }
        }
    }
    for target in archive {
        let value = host.call(target, "get", vec![Value::str(key)]).await?;
        if !value.is_null() {
            return Ok(value);
        }
    }
    Ok(Value::Null)
}

/// `reserveHookToken`: token shard, then hook-id shard; a refused or failed hook-id step
/// releases what the token step claimed (best effort).
async fn reserve<H: FacadeHost>(host: &H, hook: &LegacyHook) -> Result<Value, RpcError> {
    match hook.after_token(&shard_call(host, hook.reserve_token()).await?)? {
        Reserve::Answer(answer) => Ok(answer),
        Reserve::ReserveHookId => match shard_call(host, hook.reserve_hook_id()).await {
            Ok(answer) => {
                let (cleanup, answer) = hook.after_hook_id(&answer)?;
                // Best effort: the claim lapses with its lease if this fails.
                let _ = all(host, cleanup).await;
                Ok(answer)
            }
            Err(e) => {
                let _ = all(host, hook.after_hook_id_error()).await;
                Err(e)
            }
        },
    }
}
