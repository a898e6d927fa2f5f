//! Chunk-role methods (spec-0.4 `stream.md` §2–8, and the legacy 0.3 methods of
//! `stream-do.md` §2 kept over the same layout): the chunks of one stream, in an instance
//! named `stream:<streamName>`.
//!
//! * Owner check ([`assert_owner`]): an empty runId is refused, and a stream owned by
//!   another run. Binary reads are owner-checked; the legacy `getChunks`/`getInfo` are not.
//! * Writable check ([`assert_writable`]): owner, then `expired`, `closed`, `errored`.
//! * The first terminal state wins: `closeStream`/`failStream` on a stream that is not open
//!   change nothing.
//!
//! Every method runs in one storage transaction (the shell's). The long-poll wait of a
//! binary read is the shell's: [`read_snapshot`] is one synchronous snapshot.
//!
//! Calls no other object.

use crate::protocol::hop::Args;
use crate::store::page::{fetch_values, list_budgeted, RESPONSE_BUDGET_BYTES};
use crate::store::{js_args, ListOptions, Store, Stored};
use crate::wire::{js, RpcError, Value};

use super::keys;
use super::protocol::{self, ProtocolError, ReadFrame, ReadParams, WireState};
use super::records::{chunk_wire_bytes, decode_chunk, fence_value, put_chunk, StreamFailure, StreamMeta, StreamState, MAX_COUNT};

/// The first argument, the caller's run id (both roles' methods take it first).
pub(super) fn run_id<'a>(args: Args<'a>) -> Result<&'a str, RpcError> {
    args.raw(0).and_then(Value::as_str).ok_or_else(|| RpcError::type_error("runId must be a string"))
}

/// Why a chunk-role call is refused (all plain `Error`s, HTTP 500, except the protocol's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    RunIdRequired,
    OwnedBy(String),
    RunExpired(String),
    Closed,
    Errored,
    /// A legacy read of an expired stream.
    StreamExpired,
    /// A legacy read of an errored stream: the stored message.
    Failed(String),
    OffsetLimit,
    Protocol(ProtocolError),
}

impl From<Refusal> for RpcError {
    fn from(r: Refusal) -> RpcError {
        match r {
            Refusal::RunIdRequired => RpcError::error("Stream runId is required"),
            Refusal::OwnedBy(owner) => RpcError::error(format!("Stream is owned by workflow run \"{owner}\"")),
            Refusal::RunExpired(run) => RpcError::error(format!("Workflow run \"{run}\" has expired")),
            Refusal::Closed => RpcError::error("Cannot write to a closed stream"),
            Refusal::Errored => RpcError::error("Cannot write to an errored stream"),
            Refusal::StreamExpired => RpcError::error("Stream has expired"),
            Refusal::Failed(message) => RpcError::error(message),
            Refusal::OffsetLimit => RpcError::error("Stream offset limit exceeded"),
            Refusal::Protocol(p) => RpcError { name: ProtocolError::NAME.into(), message: p.message() },
        }
    }
}

pub fn assert_owner(meta: &StreamMeta, run_id: &str) -> Result<(), Refusal> {
    if run_id.is_empty() {
        return Err(Refusal::RunIdRequired);
    }
    match &meta.owner_run_id {
        Some(owner) if owner != run_id => Err(Refusal::OwnedBy(owner.clone())),
        _ => Ok(()),
    }
}

pub fn assert_writable(meta: &StreamMeta, run_id: &str) -> Result<(), Refusal> {
    assert_owner(meta, run_id)?;
    match meta.state {
        StreamState::Open => Ok(()),
        StreamState::Expired => Err(Refusal::RunExpired(run_id.to_string())),
        StreamState::Closed => Err(Refusal::Closed),
        StreamState::Errored => Err(Refusal::Errored),
    }
}

/// Append one chunk after `meta.count` and store the new meta `{count, state: "open",
/// ownerRunId}`: two rows (no `chunk-size:` entry, see [`crate::stream::records`]).
/// Returns its index.
fn append(store: &mut dyn Store, meta: &StreamMeta, run_id: &str, chunk: &Value) -> Result<u64, RpcError> {
    let index = meta.count;
    if index + 1 > MAX_COUNT {
        return Err(Refusal::OffsetLimit.into());
    }
    put_chunk(store, &keys::chunk(index), chunk)?;
    StreamMeta { count: index + 1, state: StreamState::Open, owner_run_id: Some(run_id.to_string()), ..Default::default() }.save(store)?;
    Ok(index)
}

/// `writeChunks(runId, chunks)` (binary POST): the batch rules, the writable check, one
/// contiguous append. Returns the 16-byte `WCSA` acknowledgement.
pub fn write_chunks(store: &mut dyn Store, run_id: &str, chunks: &[&[u8]]) -> Result<[u8; 16], RpcError> {
    protocol::validate_batch(chunks.iter().map(|c| c.len())).map_err(Refusal::Protocol)?;
    let meta = StreamMeta::load(store)?;
    assert_writable(&meta, run_id)?;
    let start = meta.count;
    if start + chunks.len() as u64 > MAX_COUNT {
        return Err(Refusal::OffsetLimit.into());
    }
    for (offset, chunk) in chunks.iter().enumerate() {
        let index = start + offset as u64;
        store.put_bytes(&keys::chunk(index), chunk)?;
    }
    let next = start + chunks.len() as u64;
    StreamMeta { count: next, state: StreamState::Open, owner_run_id: Some(run_id.to_string()), ..Default::default() }.save(store)?;
    Ok(protocol::encode_ack(start as u32, chunks.len() as u16))
}

/// `writeChunk(runId, bytes)` (0.3) → the new chunk's index. The 0.3 check order: an
/// expired stream refuses the caller's run before the owner check.
pub fn write_chunk(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let run_id = run_id(args)?;
    let meta = StreamMeta::load(store)?;
    if meta.state == StreamState::Expired {
        return Err(Refusal::RunExpired(run_id.to_string()).into());
    }
    assert_writable(&meta, run_id)?;
    let chunk = args.raw(1).ok_or_else(js_args::put_undefined)?;
    let index = append(store, &meta, run_id, chunk)?;
    Ok(Value::Number(index as f64))
}

/// `closeStream(runId)` → `null`. First terminal state wins.
pub fn close_stream(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let run_id = run_id(args)?;
    let meta = StreamMeta::load(store)?;
    assert_owner(&meta, run_id)?;
    match meta.state {
        StreamState::Expired => Err(Refusal::RunExpired(run_id.to_string()).into()),
        StreamState::Open => {
            StreamMeta { owner_run_id: Some(run_id.to_string()), state: StreamState::Closed, ..meta }.save(store)?;
            Ok(Value::Null)
        }
        StreamState::Closed | StreamState::Errored => Ok(Value::Null),
    }
}

/// Cut `s` to at most `max` UTF-16 units (never inside a surrogate pair).
fn truncate_utf16(s: &str, max: usize) -> String {
    let mut units = 0;
    let mut out = String::new();
    for c in s.chars() {
        units += c.len_utf16();
        if units > max {
            break;
        }
        out.push(c);
    }
    out
}

/// The stored form of a `failStream` error (`stream-protocol` normalisation): `{name,
/// message}` strings as given, anything else stringified with name `Error`; name ≤ 1024 and
/// message ≤ 4096 UTF-16 units, then shrunk until the UTF-8 total is ≤ 16384 bytes.
pub fn normalize_failure(error: Option<&Value>) -> StreamFailure {
    let (name, message) = match error {
        Some(v @ Value::Object(_)) => match (v.get("name").and_then(Value::as_str), v.get("message").and_then(Value::as_str)) {
            (Some(n), Some(m)) => (n.to_string(), m.to_string()),
            _ => ("Error".to_string(), js::to_js_string(Some(v))),
        },
        other => ("Error".to_string(), js::to_js_string(other)),
    };
    let mut name = truncate_utf16(&name, 1024);
    let mut message = truncate_utf16(&message, 4096);
    while name.len() + message.len() > protocol::MAX_ERROR_BYTES {
        if !message.is_empty() {
            message = truncate_utf16(&message, js::utf16_len(&message).saturating_sub(256));
        } else {
            name = truncate_utf16(&name, js::utf16_len(&name).saturating_sub(256));
        }
    }
    StreamFailure { name, message }
}

/// `failStream(runId, error)` → `null`. First terminal state wins.
pub fn fail_stream(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let run_id = run_id(args)?;
    let failure = normalize_failure(args.raw(1));
    let meta = StreamMeta::load(store)?;
    assert_owner(&meta, run_id)?;
    match meta.state {
        StreamState::Expired => Err(Refusal::RunExpired(run_id.to_string()).into()),
        StreamState::Open => {
            StreamMeta { owner_run_id: Some(run_id.to_string()), state: StreamState::Errored, error: Some(failure), ..meta }.save(store)?;
            Ok(Value::Null)
        }
        StreamState::Closed | StreamState::Errored => Ok(Value::Null),
    }
}

/// One binary read snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub state: StreamState,
    pub tail_index: i64,
    pub chunks: Vec<Vec<u8>>,
    pub error: Option<StreamFailure>,
}

impl Snapshot {
    /// Should a long poll wait for the next change instead of answering this?
    pub fn idle(&self, params: &ReadParams) -> bool {
        self.chunks.is_empty() && self.state == StreamState::Open && params.wait_ms > 0 && params.max_chunks > 0
    }

    /// The `WCSR` frame of this snapshot.
    pub fn frame(&self, params: &ReadParams, timed_out: bool) -> Result<Vec<u8>, RpcError> {
        let state = match self.state {
            StreamState::Open => WireState::Open,
            StreamState::Closed => WireState::Closed,
            StreamState::Errored => WireState::Errored,
            StreamState::Expired => WireState::Expired,
        };
        protocol::encode_read(&ReadFrame {
            state,
            timed_out,
            start_index: params.start_index,
            tail_index: self.tail_index,
            chunks: &self.chunks,
            error: self.error.as_ref().map(|e| (e.name.as_str(), e.message.as_str())),
        })
        .map_err(|p| Refusal::Protocol(p).into())
    }
}

/// `readChunks` snapshot (`stream.md` §4 step 2): owner check; at most `maxChunks` chunks
/// from `startIndex`, the longest prefix within `maxBytes` (at least one, so that a legacy
/// chunk larger than `maxBytes` cannot stall a reader); none when expired. One range
/// listing of the `chunk:` keys, read as it goes: the chunk past the budget is the last
/// one loaded. A chunk missing inside the stream's count is an error, not a short page.
pub fn read_snapshot(store: &mut dyn Store, run_id: &str, params: &ReadParams) -> Result<Snapshot, RpcError> {
    let meta = StreamMeta::load(store)?;
    assert_owner(&meta, run_id)?;
    let start = u64::from(params.start_index);
    let available = if meta.state == StreamState::Expired { 0 } else { meta.count.saturating_sub(start).min(u64::from(params.max_chunks)) };
    let mut chunks = Vec::new();
    if available > 0 {
        let options = ListOptions {
            prefix: Some(keys::CHUNK_PREFIX.into()),
            start: Some(keys::chunk(start)),
            end: Some(keys::chunk(start + available)),
            ..Default::default()
        };
        let missing = |index: u64| RpcError::error(format!("Invalid persisted stream chunk at index {index}"));
        let page =
            list_budgeted(store, &options, Some(available as usize), params.max_bytes as usize, chunk_wire_bytes, |bytes: &Vec<u8>| {
                bytes.len()
            })?;
        for (offset, (key, bytes)) in page.entries.into_iter().enumerate() {
            let index = start + offset as u64;
            if key != keys::chunk(index) {
                return Err(missing(index));
            }
            chunks.push(bytes);
        }
        let read = start + chunks.len() as u64;
        if !page.truncated && read < start + available {
            return Err(missing(read));
        }
    }
    Ok(Snapshot { state: meta.state, tail_index: meta.tail_index(), chunks, error: meta.error })
}

/// The page size of the 0.3.0 client's stream reader (`readFromStream`, `READ_BATCH_SIZE`):
/// it asks `getChunks({startIndex, limit: 32})` in a loop and sleeps `readPollMs` (250 ms)
/// after an empty answer of a stream not done. Its page listing (`streams.getChunks`, which
/// the DevKit's web UI and `workflow inspect` use) asks `limit + 1` for a page of at most 32,
/// so 33 by default: only a listing with a page size of exactly 31 looks like the reader.
pub const LEGACY_READER_LIMIT: f64 = 32.0;

/// How long a reader's empty `getChunks` waits for the next write, close or failure before
/// it is answered: below the 0.3.0 client's 30 s RPC timeout, as the 0.4 long poll's 20 s.
pub const LEGACY_HOLD_MS: u32 = 20_000;

/// How long to hold a 0.3 `getChunks` answer before sending it (0: send it now): the
/// reader's request (`limit` exactly [`LEGACY_READER_LIMIT`]) answered with no chunks for a
/// stream that is not done. The caller then reads again once the stream changes, so the
/// 0.3.0 reader gets a chunk as it is written instead of up to 250 ms later. A listing, a
/// finished stream, an error or a page with chunks is answered at once.
pub fn legacy_hold_ms(args: &[Value], answer: &Value) -> u32 {
    let reader = args.first().and_then(|p| p.get("limit")).and_then(Value::as_f64) == Some(LEGACY_READER_LIMIT);
    let empty = answer.get("chunks").and_then(Value::as_array).is_some_and(Vec::is_empty);
    let live = answer.get("done").and_then(Value::as_bool) == Some(false);
    if reader && empty && live {
        LEGACY_HOLD_MS
    } else {
        0
    }
}

/// `getChunks({startIndex, limit})` (0.3) → `{chunks, done, tailIndex}`.
///
/// Starts at `max(0, startIndex)` (inclusive) and returns at most `limit` chunks (all when
/// `limit` is absent), and at most [`RESPONSE_BUDGET_BYTES`] of them beyond the first (a
/// short page then answers `done: false`). Argument handling is the 0.3 reference's
/// JavaScript: a missing argument is `Cannot read properties of undefined (reading
/// 'startIndex')`, `startIndex` goes through `Math.max(0, …)` and the key is built from its
/// decimal text, and `limit` is the platform's list limit (0, negative, `null` → `List
/// limit must be positive.`). Expired → `Stream has expired`; errored → an `Error` with the
/// stored message (so 0.3 readers stop instead of polling forever).
pub fn get_chunks(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let meta = legacy_readable(StreamMeta::load(store)?)?;
    let params = args.raw(0);
    let start = js::to_number(js::member(params, "startIndex")?);
    // Math.max(0, x): NaN stays NaN, −0 and negatives become 0.
    let start = if start.is_nan() { start } else { start.max(0.0) };
    let start_key = keys::chunk_at(&crate::wire::number::number_to_string(start));
    let limit = match js::member(params, "limit")? {
        None => None,
        Some(v) => Some(usize::try_from(js_args::to_storage_int(Some(v))?).ok().filter(|&n| n > 0).ok_or_else(RpcError::list_limit)?),
    };
    let options = ListOptions { prefix: Some(keys::CHUNK_PREFIX.into()), start: Some(start_key), ..Default::default() };
    let page = list_budgeted(store, &options, limit, RESPONSE_BUDGET_BYTES, fetch_values, chunk_json_len)?;
    let chunks = page.entries.into_iter().map(|(key, stored)| decode_chunk(&key, stored)).collect::<Result<Vec<_>, _>>()?;
    // A page the budget cut short is never the end: the client advances by the chunks it
    // got and asks again.
    let done = meta.state == StreamState::Closed && !page.truncated;
    Ok(Value::object([
        ("chunks", Value::Array(chunks)),
        ("done", Value::Bool(done)),
        ("tailIndex", Value::Number(meta.tail_index() as f64)),
    ]))
}

fn legacy_readable(meta: StreamMeta) -> Result<StreamMeta, Refusal> {
    match meta.state {
        StreamState::Expired => Err(Refusal::StreamExpired),
        StreamState::Errored => Err(Refusal::Failed(meta.error.map(|e| e.message).unwrap_or_default())),
        StreamState::Open | StreamState::Closed => Ok(meta),
    }
}

/// About the length of a stored chunk in the answer: base64 in a `Uint8Array` tag for
/// bytes, the stored text (the value's tagged JSON, plus a kind letter) otherwise.
fn chunk_json_len(stored: &Stored) -> usize {
    match stored {
        Stored::Bytes(b) => b.len().div_ceil(3) * 4 + 34,
        Stored::Text(t) => t.len() + 1,
    }
}

/// `getInfo()` (0.3) → `{tailIndex, done}`; an unknown stream is `{tailIndex: -1, done: false}`.
pub fn get_info(store: &mut dyn Store) -> Result<Value, RpcError> {
    let meta = legacy_readable(StreamMeta::load(store)?)?;
    Ok(Value::object([("tailIndex", Value::Number(meta.tail_index() as f64)), ("done", Value::Bool(meta.state == StreamState::Closed))]))
}

/// `floor(v)` clamped to `1..=max`, `default` when absent or not a number.
pub fn bounded_limit(v: Option<&Value>, default: u64, max: u64) -> u64 {
    match v.and_then(Value::as_f64).filter(|n| n.is_finite()) {
        Some(n) => n.floor().clamp(1.0, max as f64) as u64,
        None => default,
    }
}

/// One page of [`expire_stream`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ExpirePage {
    deleted: bool,
    chunks: u64,
    bytes: u64,
    done: bool,
}

/// Fence the stream and delete one bounded page of chunks (`stream.md` §8).
fn expire_page(store: &mut dyn Store, run_id: &str, expired_at: &Value, limit: u64, byte_limit: u64) -> Result<ExpirePage, RpcError> {
    let meta = StreamMeta::load(store)?;
    assert_owner(&meta, run_id)?;
    let first_fence = meta.state != StreamState::Expired;
    // One budgeted listing of the payloads (only their lengths are kept), then the page's
    // deletes: each chunk, and the `chunk-size:` entries that data written before they
    // were dropped still has (found by one key listing over the page's range).
    let listed = list_budgeted(
        store,
        &ListOptions::prefix(keys::CHUNK_PREFIX),
        Some(limit as usize),
        byte_limit as usize,
        |key, stored| Ok(chunk_wire_bytes(key, stored).map_or(0, |b| b.len() as u64)),
        |size: &u64| *size as usize,
    )?;
    let mut page: Vec<u64> = Vec::new();
    let mut bytes = 0u64;
    for (key, size) in &listed.entries {
        store.delete(key)?;
        // A key we did not write is dropped too, so that paging always progresses.
        if let Some(index) = keys::index_of(key) {
            page.push(index);
            bytes += size;
        }
    }
    if let (Some(first), Some(last)) = (page.iter().min(), page.iter().max()) {
        let range = ListOptions {
            prefix: Some(keys::CHUNK_SIZE_PREFIX.into()),
            start: Some(keys::chunk_size(*first)),
            end: Some(keys::chunk_size(last + 1)),
            ..Default::default()
        };
        for key in store.list_keys(&range)? {
            store.delete(&key)?;
        }
    }
    let mut done = store.list_keys(&ListOptions::prefix(keys::CHUNK_PREFIX).limit(1))?.is_empty();
    if done {
        // Size entries left without their chunk (older data): gone with the last page.
        let orphans = store.list_keys(&ListOptions::prefix(keys::CHUNK_SIZE_PREFIX).limit(limit as usize + 1))?;
        done = orphans.len() <= limit as usize;
        for key in orphans.iter().take(limit as usize) {
            store.delete(key)?;
        }
    }
    if done && page.is_empty() && meta.state == StreamState::Expired && meta.payload_deleted == Some(true) {
        return Ok(ExpirePage { deleted: false, chunks: 0, bytes: 0, done: true });
    }
    let count = if done { 0 } else { meta.count };
    StreamMeta {
        count,
        owner_run_id: Some(run_id.to_string()),
        state: StreamState::Expired,
        error: None,
        expired_at: Some(meta.expired_at.clone().unwrap_or_else(|| fence_value(expired_at))),
        expired_chunk_count: Some(meta.expired_chunk_count.unwrap_or(meta.count)),
        payload_deleted: Some(done),
    }
    .save(store)?;
    Ok(ExpirePage { deleted: first_fence, chunks: page.len() as u64, bytes, done })
}

/// `expireStream(runId, expiredAt, options?)`.
///
/// * With `options` (the 0.4 cleanup always passes them): one bounded page, `limit`
///   1..64 (default 64), `byteLimit` 1..16777216 (default 16 MiB) →
///   `{deleted, chunks, bytes, done}`; `deleted` only on the call that installed the fence.
/// * Without (the 0.3 cleanup, and the 0.3 golden transcript): every page at once →
///   `{deleted: true, chunks}` as 0.3 answered.
pub fn expire_stream(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let run_id = run_id(args)?;
    let expired_at = args.raw(1).cloned().unwrap_or(Value::Null);
    match args.present(2) {
        Some(options) => {
            let limit = bounded_limit(options.get("limit"), 64, 64);
            let byte_limit = bounded_limit(options.get("byteLimit"), 16_777_216, 16_777_216);
            let p = expire_page(store, run_id, &expired_at, limit, byte_limit)?;
            Ok(Value::object([
                ("deleted", Value::Bool(p.deleted)),
                ("chunks", Value::Number(p.chunks as f64)),
                ("bytes", Value::Number(p.bytes as f64)),
                ("done", Value::Bool(p.done)),
            ]))
        }
        None => {
            let mut chunks = 0;
            loop {
                let p = expire_page(store, run_id, &expired_at, 64, 16_777_216)?;
                chunks += p.chunks;
                if p.done {
                    break;
                }
            }
            if args.raw(1).is_none() {
                // 0.3 stored `expiredAt: undefined`: the chunks are gone but nothing is fenced.
                let meta = StreamMeta::load(store)?;
                StreamMeta { count: 0, state: StreamState::Closed, owner_run_id: meta.owner_run_id, ..Default::default() }.save(store)?;
            }
            Ok(Value::object([("deleted", Value::Bool(true)), ("chunks", Value::Number(chunks as f64))]))
        }
    }
}
