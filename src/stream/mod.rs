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
//!
//! Knows no other core and nothing of the platform (the binary route's HTTP and the
//! long-poll wait are the shell's).

pub mod chunks;
pub mod keys;
pub mod protocol;
pub mod records;
pub mod registry;
pub mod route;

use crate::protocol::hop::{Args, Ctx};
use crate::store::Store;
use crate::wire::{RpcError, Value};

pub const CLASS: &str = "StreamDO";

/// The methods that never write (the shell serves them outside a transaction).
pub const READ_ONLY: [&str; 3] = ["getChunks", "getInfo", "listStreams"];

/// Dispatch one RPC method (inside one storage transaction).
pub fn call(store: &mut dyn Store, _ctx: &Ctx, method: &str, args: Args) -> Result<Value, RpcError> {
    match method {
        "writeChunk" => chunks::write_chunk(store, args),
        "closeStream" => chunks::close_stream(store, args),
        "failStream" => chunks::fail_stream(store, args),
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

/// The binary write (`POST /v1/streams/<name>/chunks`): decode the `WCSW` body and append
/// it (one transaction, the shell's). Returns the `WCSA` acknowledgement.
pub fn write_frame(store: &mut dyn Store, run_id: &str, body: &[u8]) -> Result<[u8; 16], RpcError> {
    let ranges = protocol::decode_write(body).map_err(chunks::Refusal::Protocol)?;
    let chunks: Vec<&[u8]> = ranges.into_iter().map(|r| &body[r]).collect();
    chunks::write_chunks(store, run_id, &chunks)
}

#[cfg(test)]
mod golden040;
#[cfg(test)]
mod tests;
