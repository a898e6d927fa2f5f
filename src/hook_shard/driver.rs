//! The lifecycle-checked methods (`get`, and `finalize`/`publish`), which ask the owner's
//! run DO `getLifecycleStatus()` (an asynchronous DO-to-DO call) around their storage
//! work. Generic over [`ShardHost`], so the wasm shell runs them against real Durable
//! Objects and the native tests against a fake run DO. [`call`] dispatches every method
//! of the class, the transactional ones through [`ShardHost::transact`].
//!
//! Knows the run DO only through [`ShardHost`].

#![allow(async_fn_in_trait)] // hosts are single-threaded (wasm, tests): no Send bound wanted

use super::claims::{read_record, release_owned};
use super::publish::{legacy_publish_step, publish_step};
use super::records::{natural_key, stored, string_arg};
use super::visibility::{publication_visibility, read_visibility, visible, Visibility};
use crate::protocol::hooks::Family;
use crate::protocol::hooks::Owner;
use crate::protocol::hop::Args;
use crate::store::alarm::Alarm;
use crate::store::Store;
use crate::wire::router::Binding;
use crate::wire::{RpcError, Value};

/// The run DO method asked.
pub use crate::protocol::leases::LIFECYCLE_METHOD;
/// What the shell's [`ShardHost::call`] throws when the runs namespace is not bound.
pub const MISSING_RUNS_BINDING: &str = "world-celld hook index missing WORKFLOW_DB binding";

/// What the lifecycle-checked methods need from their environment.
pub trait ShardHost {
    /// Run `f` as one storage transaction of this shard with a fresh clock reading (epoch
    /// ms) and the object's current alarm. `Err` rolls it back; alarm changes apply after
    /// commit.
    async fn transact<T>(&self, f: impl FnOnce(&mut dyn Store, i64, &mut Alarm) -> Result<T, RpcError>) -> Result<T, RpcError>;
    /// Call a method of another Durable Object (here: `runs`/`<runId>`/`getLifecycleStatus`).
    async fn call(&self, binding: Binding, name: &str, method: &str, args: Vec<Value>) -> Result<Value, RpcError>;
}

/// `runIsActive(runId)`: `WorkflowRunDO(runId).getLifecycleStatus() === "active"` (or, for
/// [`Visibility::NotEnded`], neither `"terminal"` nor `"expired"`).
pub async fn run_is_active<H: ShardHost>(host: &H, run_id: &str, visibility: Visibility) -> Result<bool, RpcError> {
    let status = host.call(Binding::Runs, run_id, LIFECYCLE_METHOD, Vec::new()).await?;
    Ok(visible(&status, visibility))
}

/// `get(K)` → the serialized hook, or `null` when absent, empty, or its run is not
/// active (terminal, expired and missing runs hide their hooks at once). Not a
/// transaction: a plain read, then the run DO call.
pub async fn get<H: ShardHost>(host: &H, family: Family, visibility: Visibility, args: Args<'_>) -> Result<Value, RpcError> {
    let key = natural_key(args.raw(0));
    let record = host.transact(|store, _, _| read_record(store, family, &key)).await?;
    let Some(record) = record.filter(|text| !text.is_empty()) else { return Ok(Value::Null) };
    let owner = Owner::from_serialized(&record)?;
    Ok(if run_is_active(host, &owner.run_id, visibility).await? { Value::String(record) } else { Value::Null })
}

/// What a `get` served in steps needs next ([`get_step`]).
#[derive(Debug, Clone, PartialEq)]
pub enum GetStep {
    /// The answer.
    Answer(Value),
    /// The lifecycle status of this run: ask `getLifecycleStatus()` of its run DO and
    /// take the next step with the answer.
    Ask(String),
}

/// [`get`] as synchronous steps between which the caller makes the run DO call itself
/// (the shell's JavaScript class does, so no wasm future is involved). Each step reads the
/// record as storage holds it then: absent or empty, it is `null` at once; otherwise its
/// owner's run is asked for, and a step given that run's answer (`asked`: the run asked
/// and its answer, the call's error included) answers by it. A record whose owner changed
/// while the run DO was asked (released and published again for another run) is asked for
/// again. The answer is the current record judged by a status read after it was first
/// seen, where [`get`] answers the record it read before asking: the two differ only for
/// a record replaced during the ask, where this answers the newer one.
pub fn get_step(
    store: &mut dyn Store,
    family: Family,
    visibility: Visibility,
    args: Args<'_>,
    asked: Option<(&str, &Result<Value, RpcError>)>,
) -> Result<GetStep, RpcError> {
    let key = natural_key(args.raw(0));
    let Some(record) = read_record(store, family, &key)?.filter(|text| !text.is_empty()) else { return Ok(GetStep::Answer(Value::Null)) };
    let owner = Owner::from_serialized(&record)?;
    match asked {
        Some((run_id, status)) if run_id == owner.run_id => {
            let visible = visible(status.as_ref().map_err(Clone::clone)?, visibility);
            Ok(GetStep::Answer(if visible { Value::String(record) } else { Value::Null }))
        }
        _ => Ok(GetStep::Ask(owner.run_id)),
    }
}

/// `finalize(token, serialized, owner, claimId?)` / `publish(hookId, serialized, owner, claimId?)`
/// → `{stored}`. When the owner's run is not active, the owner's record and claim are
/// released and nothing is published; otherwise [`publish_step`] (for `legacyPublish`:
/// [`legacy_publish_step`]) runs in one transaction ([`publish_decided`]).
///
/// Each takes a fifth argument: the run's lifecycle status as the caller has just read it
/// (the 0.3 facade's `finalizeHookIndexes` and the 0.4 coordinator's `hooks.finalize` read
/// it once for both shards). When it is a string ([`passed_status`]), the shard judges by
/// it instead of asking the run DO, and the shell serves the call synchronously
/// ([`publish_with_status`]). These methods are not routable (only `get` is), so only our
/// own facade and coordinator can pass it; without it (the archive migration) the shard
/// asks, as the reference's shard always does.
pub async fn publish<H: ShardHost>(host: &H, family: Family, visibility: Visibility, args: Args<'_>) -> Result<Value, RpcError> {
    let key = natural_key(args.raw(0));
    let owner = Owner::from_arg(args.raw(2))?;
    let active = match passed_status(args) {
        Some(status) => visible(status, visibility),
        None => run_is_active(host, &owner.run_id, visibility).await?,
    };
    host.transact(|store, now, _| publish_decided(store, family, visibility, now, key, owner, active, args)).await
}

/// The lifecycle status a publication carries (its fifth argument, a string), if any.
pub fn passed_status(args: Args<'_>) -> Option<&Value> {
    args.raw(4).filter(|s| matches!(s, Value::String(_)))
}

/// A publication with the `status` its caller passed (its [`passed_status`]) as one
/// synchronous call: the same decision and storage work as [`publish`], with no ask. A
/// call that carries no status must ask: the shell sends it to [`publish`].
pub fn publish_with_status(
    store: &mut dyn Store,
    family: Family,
    visibility: Visibility,
    now: i64,
    status: &Value,
    args: Args<'_>,
) -> Result<Value, RpcError> {
    let active = visible(status, visibility);
    let key = natural_key(args.raw(0));
    let owner = Owner::from_arg(args.raw(2))?;
    publish_decided(store, family, visibility, now, key, owner, active, args)
}

/// The storage half of [`publish`], once the run's lifecycle is known: release the
/// owner's record and claim (`active` false), else publish.
#[allow(clippy::too_many_arguments)]
fn publish_decided(
    store: &mut dyn Store,
    family: Family,
    visibility: Visibility,
    now: i64,
    key: String,
    owner: Owner,
    active: bool,
    args: Args<'_>,
) -> Result<Value, RpcError> {
    if !active {
        release_owned(store, family, &[(key, owner)])?;
        return Ok(stored(false));
    }
    let serialized = string_arg(args.raw(1), "serialized hook")?;
    let claim_id = args.raw(3);
    match visibility {
        Visibility::Active => publish_step(store, family, now, &key, serialized, &owner, claim_id),
        Visibility::NotEnded => legacy_publish_step(store, family, now, &key, serialized, &owner),
    }
}

/// Dispatch any method of the class: the lifecycle-checked ones through the driver (by
/// [`read_visibility`] and [`publication_visibility`], the shell's synchronous path's
/// rules too), the others as one transaction of [`super::call`].
pub async fn call<H: ShardHost>(host: &H, family: Family, method: &str, args: Args<'_>) -> Result<Value, RpcError> {
    if let Some(visibility) = read_visibility(method) {
        get(host, family, visibility, args).await
    } else if let Some(visibility) = publication_visibility(family, method) {
        publish(host, family, visibility, args).await
    } else {
        host.transact(|store, now, alarm| super::call(store, family, now, alarm, method, args)).await
    }
}
