//! WorkflowRunDO core (spec `run-do.md`): one instance per workflow run, holding the
//! run, its append-only event log, steps, hooks, waits, idempotency markers and the
//! retention bookkeeping.
//!
//! Map:
//! * [`apply`] — `applyEvent`: guards, one module per event family, outcome;
//! * [`events`] — slot ids, event construction, event pages;
//! * [`reads`] — the six fenced read methods and their pagination;
//! * [`fence`] — expired-run fencing; [`retention`] — markers and scheduling;
//! * [`records`], [`keys`] — stored records and storage keys;
//! * [`validate`] — zod-equivalent schemas and attribute rules; [`js`] — JavaScript
//!   value semantics the wire depends on.

pub mod apply;
pub mod events;
pub mod fence;
pub mod js;
pub mod keys;
pub mod reads;
pub mod records;
pub mod retention;
pub mod validate;

#[cfg(test)]
mod tests;

use crate::hop::{not_implemented, Args, Ctx};
use crate::store::Store;
use crate::wire::{RpcError, Value};

pub use retention::take_alarm;

pub const CLASS: &str = "WorkflowRunDO";

/// Dispatch one RPC method (inside one storage transaction). After an `Ok`, the shell
/// should apply [`take_alarm`] (the alarm time a terminal transition scheduled).
pub fn call(store: &mut dyn Store, ctx: &Ctx, method: &str, args: Args) -> Result<Value, RpcError> {
    retention::reset_alarm();
    let result = match method {
        "applyEvent" => apply::apply_event(store, ctx, args.raw(0)),
        "getRun" => reads::get_run(store, ctx),
        "getStep" => reads::get_step(store, ctx, args),
        "getEvent" => reads::get_event(store, ctx, args),
        "listEvents" => reads::list_events_method(store, ctx, args),
        "listSteps" => reads::list_steps_method(store, ctx, args),
        "listHooks" => reads::list_hooks_method(store, ctx, args),
        _ => Err(not_implemented(CLASS, method)),
    };
    if result.is_err() {
        retention::reset_alarm();
    }
    result
}
