//! WorkflowRunDO core (spec `run-do.md`).

pub mod js;
pub mod validate;

use crate::hop::{not_implemented, Args, Ctx};
use crate::store::Store;
use crate::wire::{RpcError, Value};

pub const CLASS: &str = "WorkflowRunDO";

/// Dispatch one RPC method (inside one storage transaction).
pub fn call(_store: &mut dyn Store, _ctx: &Ctx, method: &str, _args: Args) -> Result<Value, RpcError> {
    Err(not_implemented(CLASS, method))
}
