//! WorkflowRunDO core (spec `run-do.md`): one instance per workflow run, holding the
//! run, its append-only event log, steps, hooks, waits, idempotency markers and the
//! retention bookkeeping.
//!
//! Map:
//! * [`apply`] — `applyEvent`: guards, one module per event family, outcome;
//! * [`events`] — slot ids, event construction, event pages;
//! * [`reads`] — the six fenced read methods and their pagination;
//! * [`fence`] — expired-run fencing; [`retention`] — markers and scheduling;
//!   [`cleanup`] — the retention admin methods and the cleanup phase machine;
//! * [`records`], [`keys`] — stored records and storage keys;
//! * [`validate`] — zod-equivalent schemas and attribute rules (JavaScript value semantics
//!   are in [`crate::wire::js`]).
//!
//! Knows no other core and no front door: the index shards, streams and queues its cleanup
//! reaches are [`crate::protocol`] calls that a host (the shell) makes.

pub mod apply;
pub mod cleanup;
pub mod events;
pub mod fence;
pub mod hook_claims;
pub mod keys;
pub mod lease;
pub mod reads;
pub mod records;
pub mod retention;
pub mod validate;

#[cfg(test)]
mod tests;

use crate::protocol::hop::{Args, Ctx};
use crate::store::alarm::Alarm;
use crate::store::Store;
use crate::wire::{RpcError, Value};

pub const CLASS: &str = "WorkflowRunDO";

/// The methods that never write (the shell serves them outside a transaction).
/// `getLifecycleStatus` is asked on every queue enqueue and hook lookup naming a run: served
/// without a transaction it costs the caller's hop less.
pub const READ_ONLY: [&str; 8] =
    ["getRun", "getStep", "getEvent", "listEvents", "listSteps", "listHooks", "getCleanupStatus", "getLifecycleStatus"];

/// [`call`], plus the lifecycle leases the call contradicted (see [`lease`]): the shell
/// revokes them after the commit, before answering.
pub fn call_watched(
    store: &mut dyn Store,
    ctx: &Ctx,
    alarm: &mut Alarm,
    method: &str,
    args: Args,
) -> Result<(Value, Vec<lease::Revocation>), RpcError> {
    let mut watch = lease::Watch::new(store, ctx.now);
    let value = call(&mut watch, ctx, alarm, method, args)?;
    Ok((value, watch.finish()?))
}

/// Dispatch one RPC method (inside one storage transaction). `alarm` collects the alarm
/// change the call asks for (terminal-run scheduling, the retention admin methods); the
/// shell applies it after the transaction commits.
///
/// `cleanupNow` and `enforceRetention` are not single transactions: the shell serves them
/// through [`cleanup::driver`], so they never reach this function.
pub fn call(store: &mut dyn Store, ctx: &Ctx, alarm: &mut Alarm, method: &str, args: Args) -> Result<Value, RpcError> {
    match method {
        "applyEvent" => apply::apply_event(store, ctx, alarm, args.raw(0)),
        "getRun" => reads::get_run(store, ctx),
        "getStep" => reads::get_step(store, ctx, args),
        "getEvent" => reads::get_event(store, ctx, args),
        "listEvents" => reads::list_events_method(store, ctx, args),
        "listSteps" => reads::list_steps_method(store, ctx, args),
        "listHooks" => reads::list_hooks_method(store, ctx, args),
        "getCleanupStatus" => cleanup::get_status(store),
        "scheduleCleanup" => cleanup::schedule(store, ctx.now, &cleanup::CleanupArgs::parse(args)?, alarm),
        "rearmCleanup" => cleanup::rearm(store, ctx.now, alarm),
        "getLifecycleStatus" => fence::lifecycle_status(store, ctx.now),
        "resolveHookTokenClaim" => hook_claims::resolve(store, ctx.now, args),
        crate::protocol::leases::LEASE_METHOD => lease::grant(store, ctx.now, ctx.name, args.str(0), args.present(1)),
        _ => Err(RpcError::error(format!("{CLASS}.{method} cannot run as a single transaction"))),
    }
}
