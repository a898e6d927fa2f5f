//! Chunk-role methods (`stream-do.md` §2): the chunks of one stream, in an instance named
//! `stream:<streamName>`.
//!
//! "Owner check" (writes and close): an expired stream refuses the *caller's* run
//! (`Workflow run "<runId>" has expired`); a stream owned by another run refuses with
//! `Stream is owned by workflow run "<owner>"`. Reads do no owner check: any run can read
//! any stream by name.

use crate::hop::Args;
use crate::store::page::{fetch_values, list_budgeted, RESPONSE_BUDGET_BYTES};
use crate::store::{js_args, ListOptions, Store, Stored};
use crate::wire::{js, RpcError, Value};

use super::keys;
use super::records::{decode_chunk, fence_value, put_chunk, StreamMeta};
use super::run_id;

fn check_owner(meta: &StreamMeta, run_id: &str) -> Result<(), RpcError> {
    if meta.is_expired() {
        return Err(RpcError::error(format!("Workflow run \"{run_id}\" has expired")));
    }
    check_not_owned_by_other(meta, run_id)
}

fn check_not_owned_by_other(meta: &StreamMeta, run_id: &str) -> Result<(), RpcError> {
    match &meta.owner_run_id {
        Some(owner) if owner != run_id => Err(RpcError::error(format!("Stream is owned by workflow run \"{owner}\""))),
        _ => Ok(()),
    }
}

fn expired_read() -> RpcError {
    RpcError::error("Stream has expired")
}

/// `writeChunk(runId, bytes)` → the new chunk's 0-based index. Empty chunks are allowed.
pub fn write_chunk(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let run_id = run_id(args)?;
    let meta = StreamMeta::load(store)?;
    check_owner(&meta, run_id)?;
    if meta.closed {
        return Err(RpcError::error("Cannot write to a closed stream"));
    }
    let chunk = args.raw(1).ok_or_else(js_args::put_undefined)?;
    let index = meta.count;
    let count = index.checked_add(1).ok_or_else(|| RpcError::range_error("Stream chunk index overflow"))?;
    put_chunk(store, &keys::chunk(index), chunk)?;
    StreamMeta { count, closed: false, owner_run_id: Some(run_id.to_string()), expired_at: None }.save(store)?;
    Ok(Value::Number(index as f64))
}

/// `closeStream(runId)` → `null`. Idempotent; closing a never-written stream creates
/// `{count: 0, closed: true, ownerRunId}`.
pub fn close_stream(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let run_id = run_id(args)?;
    let meta = StreamMeta::load(store)?;
    check_owner(&meta, run_id)?;
    StreamMeta { owner_run_id: Some(run_id.to_string()), closed: true, ..meta }.save(store)?;
    Ok(Value::Null)
}

/// `getChunks({startIndex, limit})` → `{chunks, done, tailIndex}`.
///
/// Starts at `max(0, startIndex)` (inclusive) and returns at most `limit` chunks (all when
/// `limit` is absent), and at most [`RESPONSE_BUDGET_BYTES`] of them beyond the first (a
/// short page then answers `done: false`). Argument handling is the reference's JavaScript: a missing argument
/// is `Cannot read properties of undefined (reading 'startIndex')`, `startIndex` goes
/// through `Math.max(0, …)` and the key is built from its decimal text, and `limit` is the
/// platform's list limit (0, negative, `null` → `List limit must be positive.`).
pub fn get_chunks(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let meta = StreamMeta::load(store)?;
    if meta.is_expired() {
        return Err(expired_read());
    }
    let params = args.raw(0);
    let start = js::to_number(js::member(params, "startIndex")?);
    // Math.max(0, x): NaN stays NaN, −0 and negatives become 0.
    let start = if start.is_nan() { start } else { start.max(0.0) };
    let start_key = keys::chunk_at(&js::number_to_string(start));
    let limit = match js::member(params, "limit")? {
        None => None,
        Some(v) => Some(usize::try_from(js_args::to_storage_int(Some(v))?).ok().filter(|&n| n > 0).ok_or_else(RpcError::list_limit)?),
    };
    let options = ListOptions { prefix: Some(keys::CHUNK_PREFIX.into()), start: Some(start_key), ..Default::default() };
    let page = list_budgeted(store, &options, limit, RESPONSE_BUDGET_BYTES, fetch_values, chunk_json_len)?;
    let chunks = page.entries.into_iter().map(|(key, stored)| decode_chunk(&key, stored)).collect::<Result<Vec<_>, _>>()?;
    // A page the budget cut short is never the end: `readFromStream` advances by the chunks
    // it got and asks again; `getStreamChunks` sees `hasMore: false` (fewer than limit + 1
    // chunks) but `done: false`, so it cannot take the stream for finished.
    let done = meta.closed && !page.truncated;
    Ok(Value::object([("chunks", Value::Array(chunks)), ("done", Value::Bool(done)), ("tailIndex", meta.tail_index())]))
}

/// About the length of a stored chunk in the answer: base64 in a `Uint8Array` tag for
/// bytes, the stored text (the value's tagged JSON, plus a kind letter) otherwise.
fn chunk_json_len(stored: &Stored) -> usize {
    match stored {
        Stored::Bytes(b) => b.len().div_ceil(3) * 4 + 34,
        Stored::Text(t) => t.len() + 1,
    }
}

/// `getInfo()` → `{tailIndex, done}`; an unknown stream is `{tailIndex: -1, done: false}`.
pub fn get_info(store: &mut dyn Store) -> Result<Value, RpcError> {
    let meta = StreamMeta::load(store)?;
    if meta.is_expired() {
        return Err(expired_read());
    }
    Ok(Value::object([("tailIndex", meta.tail_index()), ("done", Value::Bool(meta.closed))]))
}

/// `expireStream(runId, expiredAt)` → `{deleted: true, chunks: n}`: deletes every chunk and
/// leaves `meta = {count: 0, closed: true, ownerRunId, expiredAt}`. Only another owner is
/// refused (an already expired stream is fine: idempotent). An absent `expiredAt` leaves the
/// stream unfenced, as in the reference.
pub fn expire_stream(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let run_id = run_id(args)?;
    let meta = StreamMeta::load(store)?;
    check_not_owned_by_other(&meta, run_id)?;
    // Keys only: chunk values may be bytes.
    let chunks = store.list_keys(&ListOptions::prefix(keys::CHUNK_PREFIX))?;
    for key in &chunks {
        store.delete(key)?;
    }
    StreamMeta { count: 0, closed: true, owner_run_id: Some(run_id.to_string()), expired_at: args.raw(1).map(fence_value) }.save(store)?;
    Ok(Value::object([("deleted", Value::Bool(true)), ("chunks", Value::Number(chunks.len() as f64))]))
}
