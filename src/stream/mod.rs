//! StreamDO core (`stream-do.md`). One class, two roles chosen only by the instance name
//! the caller uses; every whitelisted method works on every instance, with the keys of its
//! role:
//!
//! * `stream:<streamName>` — the chunks of one stream ([`chunks`]). Stream names are
//!   global: the first writer (or closer) owns the stream.
//! * `run-streams:<runId>` — the names a run has written ([`registry`]), for
//!   `streams.list(runId)` and retention.
//!
//! Every method runs inside one storage transaction (the shell's), so a thrown error leaves
//! no trace. Keys are exactly the reference's ([`keys`]); records are in [`records`].
//!
//! `runId` arguments must be strings (the client and the retention cleanup always send
//! strings); any other value is refused with a `TypeError` rather than mimicking how the
//! reference would compare or store it.

pub mod chunks;
pub mod keys;
pub mod records;
pub mod registry;

use crate::hop::{Args, Ctx};
use crate::store::Store;
use crate::wire::{RpcError, Value};

pub const CLASS: &str = "StreamDO";

/// Every method of the class, as whitelisted by the router.
pub const METHODS: [&str; 9] = [
    "writeChunk",
    "closeStream",
    "getChunks",
    "getInfo",
    "registerStream",
    "listStreams",
    "expireRegistry",
    "finalizeRegistry",
    "expireStream",
];

/// The methods that never write (the shell serves them outside a transaction).
pub const READ_ONLY: [&str; 3] = ["getChunks", "getInfo", "listStreams"];

/// Dispatch one RPC method (inside one storage transaction).
pub fn call(store: &mut dyn Store, _ctx: &Ctx, method: &str, args: Args) -> Result<Value, RpcError> {
    match method {
        "writeChunk" => chunks::write_chunk(store, args),
        "closeStream" => chunks::close_stream(store, args),
        "getChunks" => chunks::get_chunks(store, args),
        "getInfo" => chunks::get_info(store),
        "expireStream" => chunks::expire_stream(store, args),
        "registerStream" => registry::register_stream(store, args),
        "listStreams" => registry::list_streams(store),
        "expireRegistry" => registry::expire_registry(store, args),
        "finalizeRegistry" => registry::finalize_registry(store, args),
        other => Err(RpcError::type_error(format!("{CLASS}.{other} is not a function"))),
    }
}

/// The first argument, the caller's run id.
fn run_id<'a>(args: Args<'a>) -> Result<&'a str, RpcError> {
    args.raw(0).and_then(Value::as_str).ok_or_else(|| RpcError::type_error("runId must be a string"))
}

#[cfg(test)]
pub(crate) mod golden;
#[cfg(test)]
mod tests;
