//! IndexDO core (`index-do.md`): the global string → value index (emulating the Workers KV
//! namespace the original design used), hook-token ownership, and per-run expiry fences.
//!
//! One instance, named `index`, is used by the client and the retention cleanup; other
//! names are independent instances with the same behaviour. Every method runs inside one
//! storage transaction (the shell's), so a thrown error leaves no trace.
//!
//! Files:
//! * [`kv`] — `get`, `put`, `delete`, `putOwned`, `list`;
//! * [`hooks`] — `reserveHookToken`, `finalizeHookIndexes`, `releaseHookToken`,
//!   `deleteHookIndexes`;
//! * [`expiry`] — `expireRun`;
//! * [`keys`] — key formats; [`records`] — stored values, claims and owner rules.
//!
//! The JavaScript semantics the reference applies to its arguments and stored values
//! (coercions, `===`, V8 error texts) are in [`crate::wire::js`], its `JSON.parse` of
//! serialized hooks in [`crate::wire::json_parse`], the storage API's own argument
//! coercions in [`crate::store::js_args`].
//!
//! Storage keys are exactly the reference's (`index-do.md` §1); values are encoded with
//! [`crate::store::slot`] (a one-character tag, then the string, base64 bytes or tagged JSON).
//!
//! Knows no other core: that the 0.4 shards now serve most of the `index` binding is the
//! facade's business ([`crate::facade`]).

pub mod expiry;
pub mod hooks;
pub mod keys;
pub mod kv;
pub mod records;

use crate::protocol::hop::{Args, Ctx};
use crate::store::Store;
use crate::wire::{RpcError, Value};

pub const CLASS: &str = "IndexDO";

/// The methods that never write (the shell serves them outside a transaction).
pub const READ_ONLY: [&str; 2] = ["get", "list"];

/// Dispatch one RPC method (inside one storage transaction).
pub fn call(store: &mut dyn Store, ctx: &Ctx, method: &str, args: Args) -> Result<Value, RpcError> {
    match method {
        "get" => kv::get(store, args),
        "put" => kv::put(store, args),
        "delete" => kv::delete(store, args),
        "putOwned" => kv::put_owned(store, args),
        "list" => kv::list(store, args),
        "expireRun" => expiry::expire_run(store, args),
        "reserveHookToken" => hooks::reserve(store, ctx, args),
        "finalizeHookIndexes" => hooks::finalize(store, args),
        "releaseHookToken" => hooks::release(store, args),
        "deleteHookIndexes" => hooks::delete(store, args),
        other => Err(RpcError::type_error(format!("{CLASS}.{other} is not a function"))),
    }
}

#[cfg(test)]
mod tests;
