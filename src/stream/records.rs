//! The StreamDO's stored records: the chunk-role [`StreamMeta`] (serde JSON under `meta`),
//! chunk values, and the registry's expiry record.
//!
//! Layout (spec-0.4 `stream.md` §1, but for one row): `meta` = `{count, state,
//! ownerRunId?, error?, expiredAt?, expiredChunkCount?, payloadDeleted?}` and `chunk:<i>`
//! the payload. The reference also writes `chunk-size:<i>` = the payload's byte length
//! with every chunk, so that a read can apply its byte budget before loading a payload;
//! ours reads the chunks in one range listing instead, which loads at most one payload
//! past the budget, and so writes two rows per chunk, not three. `chunk-size:` entries
//! that older data still has are ignored by reads and deleted with their chunks. Data
//! written by the 0.3 layout is read tolerantly: `{count, closed, ownerRunId?,
//! expiredAt?}` is `closed` when `closed` is true and `expired` (payload deleted) when
//! `expiredAt` is present.
//!
//! A byte-array chunk (the normal case) is stored as raw bytes ([`Stored::Bytes`], a
//! `Uint8Array` on the platform), so a chunk costs its own size. Legacy `writeChunk`
//! callers may write any other value (0.3 golden `streams` seq 46 writes `[1,2,3]`): it is
//! stored as text in the [`slot`] encoding and returned unchanged by the legacy reads; the
//! binary read sends the UTF-8 of its tagged JSON.
//! Reads also accept the `b` + padded base64 text that earlier versions wrote for byte
//! chunks.
//!
//! Size limit: the platform caps one stored value at about 2 MB on SQLite-backed objects
//! (measured: 2 199 961 raw bytes stored, 2 199 962 refused with `SQLITE_TOOBIG`). The
//! binary route bounds chunks at 1 MiB; a larger legacy `writeChunk` fails in the
//! platform's `put` and rolls back.
//!
//! Knows no method's rules.

use serde::{Deserialize, Deserializer, Serialize};

use crate::store::slot;
use crate::store::{put_json, Store, StoreResult, Stored};
use crate::wire::{js, RpcError, Value};

use super::keys;

/// Highest count / index (`2^31 − 1`).
pub const MAX_COUNT: u64 = 2_147_483_647;
/// The four stream states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamState {
    Open,
    Closed,
    Errored,
    Expired,
}

/// A persisted stream failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamFailure {
    pub name: String,
    pub message: String,
}

/// `meta` of a chunk-role instance. Absent ≡ `{count: 0, state: "open"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamMeta {
    /// Chunks written so far (= the next chunk index).
    pub count: u64,
    pub state: StreamState,
    /// The first writer (or closer) owns the stream.
    #[serde(rename = "ownerRunId", skip_serializing_if = "Option::is_none")]
    pub owner_run_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<StreamFailure>,
    /// The expiry fence as the caller sent it (normally epoch ms).
    #[serde(rename = "expiredAt", skip_serializing_if = "Option::is_none")]
    pub expired_at: Option<Value>,
    #[serde(rename = "expiredChunkCount", skip_serializing_if = "Option::is_none")]
    pub expired_chunk_count: Option<u64>,
    #[serde(rename = "payloadDeleted", skip_serializing_if = "Option::is_none")]
    pub payload_deleted: Option<bool>,
}

impl Default for StreamMeta {
    fn default() -> Self {
        StreamMeta {
            count: 0,
            state: StreamState::Open,
            owner_run_id: None,
            error: None,
            expired_at: None,
            expired_chunk_count: None,
            payload_deleted: None,
        }
    }
}

/// `meta` as stored by either layout.
#[derive(Deserialize)]
struct RawMeta {
    count: Option<f64>,
    state: Option<String>,
    /// 0.3 layout.
    closed: Option<bool>,
    #[serde(rename = "ownerRunId")]
    owner_run_id: Option<String>,
    error: Option<StreamFailure>,
    #[serde(rename = "expiredAt", default, deserialize_with = "present")]
    expired_at: Option<Value>,
    #[serde(rename = "expiredChunkCount")]
    expired_chunk_count: Option<u64>,
    #[serde(rename = "payloadDeleted")]
    payload_deleted: Option<bool>,
}

/// A member that is present deserializes to `Some`, even when it is `null`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

fn invalid_meta() -> RpcError {
    RpcError::error("Invalid persisted stream metadata")
}

impl StreamMeta {
    pub fn load(store: &mut dyn Store) -> StoreResult<StreamMeta> {
        let Some(text) = store.get(keys::META)? else { return Ok(StreamMeta::default()) };
        StreamMeta::parse(&text)
    }

    /// A stored `meta` (either layout).
    pub fn parse(text: &str) -> StoreResult<StreamMeta> {
        let raw: RawMeta = serde_json::from_str(text).map_err(|_| invalid_meta())?;
        StreamMeta::from_raw(raw)
    }

    fn from_raw(raw: RawMeta) -> StoreResult<StreamMeta> {
        let count = raw.count.filter(|c| c.fract() == 0.0 && *c >= 0.0 && *c <= MAX_COUNT as f64).ok_or_else(invalid_meta)? as u64;
        let (state, payload_deleted) = match raw.state.as_deref() {
            Some("open") => (StreamState::Open, raw.payload_deleted),
            Some("closed") => (StreamState::Closed, raw.payload_deleted),
            Some("errored") => (StreamState::Errored, raw.payload_deleted),
            Some("expired") => (StreamState::Expired, raw.payload_deleted),
            Some(_) => return Err(invalid_meta()),
            // 0.3 layout: its expiry deleted every chunk at once.
            None if raw.expired_at.is_some() => (StreamState::Expired, Some(true)),
            None if raw.closed == Some(true) => (StreamState::Closed, None),
            None => (StreamState::Open, None),
        };
        if state == StreamState::Errored && raw.error.is_none() {
            return Err(RpcError::error("Invalid persisted stream error metadata"));
        }
        Ok(StreamMeta {
            count,
            state,
            owner_run_id: raw.owner_run_id,
            error: raw.error,
            expired_at: raw.expired_at,
            expired_chunk_count: raw.expired_chunk_count,
            payload_deleted,
        })
    }

    pub fn save(&self, store: &mut dyn Store) -> StoreResult<()> {
        put_json(store, keys::META, self)
    }

    /// `count − 1`: the last chunk index, −1 for an empty stream.
    pub fn tail_index(&self) -> i64 {
        self.count as i64 - 1
    }
}

/// The fence value as it can be kept: a value that cannot be encoded (an invalid Date)
/// still fences, as `null`.
pub fn fence_value(expired_at: &Value) -> Value {
    if expired_at.to_json().is_ok() {
        expired_at.clone()
    } else {
        Value::Null
    }
}

/// Store one chunk: a byte array as raw bytes, anything else as [`slot`] text.
pub fn put_chunk(store: &mut dyn Store, key: &str, chunk: &Value) -> StoreResult<()> {
    match chunk {
        Value::Bytes(bytes) => store.put_bytes(key, bytes),
        other => store.put(key, &slot::encode(other)),
    }
}

/// A stored chunk back as the value written: raw bytes, or [`slot`] text (including the
/// `b` + base64 form earlier versions wrote for byte arrays).
pub fn decode_chunk(key: &str, stored: Stored) -> Result<Value, RpcError> {
    match stored {
        Stored::Bytes(bytes) => Ok(Value::Bytes(bytes)),
        Stored::Text(text) => slot::decode(key, &text),
    }
}

/// The bytes the binary read sends for a stored chunk: the bytes, or for a legacy
/// non-byte value the UTF-8 of its tagged JSON.
pub fn chunk_wire_bytes(key: &str, stored: Stored) -> Result<Vec<u8>, RpcError> {
    match decode_chunk(key, stored)? {
        Value::Bytes(b) => Ok(b),
        other => {
            let mut out = String::new();
            other.write_json_keeping_invalid_dates(&mut out);
            Ok(out.into_bytes())
        }
    }
}

/// `registry:expired`: `{expiredAt, deleted}`; 0.3 stored the bare `expiredAt` number.
#[derive(Debug, Clone, PartialEq)]
pub struct RegistryExpiry {
    pub expired_at: Value,
    pub deleted: u64,
}

impl RegistryExpiry {
    pub fn load(store: &mut dyn Store) -> StoreResult<Option<RegistryExpiry>> {
        let Some(text) = store.get(keys::REGISTRY_EXPIRED)? else { return Ok(None) };
        let value = slot::decode(keys::REGISTRY_EXPIRED, &text)?;
        let record = match &value {
            Value::Object(_) if value.get("expiredAt").is_some() => RegistryExpiry {
                expired_at: value.get("expiredAt").cloned().unwrap_or(Value::Null),
                deleted: js::to_number(value.get("deleted")).max(0.0) as u64,
            },
            // A 0.3 fence (a number, or whatever the caller sent).
            _ => RegistryExpiry { expired_at: value.clone(), deleted: 0 },
        };
        Ok(Some(record))
    }

    pub fn save(&self, store: &mut dyn Store) -> StoreResult<()> {
        let value = Value::object([("expiredAt", fence_value(&self.expired_at)), ("deleted", Value::Number(self.deleted as f64))]);
        store.put(keys::REGISTRY_EXPIRED, &slot::encode(&value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    #[test]
    fn meta_roundtrips_and_defaults() {
        let mut s = MemoryStore::new();
        assert_eq!(StreamMeta::load(&mut s).unwrap(), StreamMeta::default());
        let m = StreamMeta {
            count: 3,
            state: StreamState::Errored,
            owner_run_id: Some("r".into()),
            error: Some(StreamFailure { name: "E".into(), message: "m".into() }),
            ..Default::default()
        };
        m.save(&mut s).unwrap();
        assert_eq!(s.data["meta"], r#"{"count":3,"state":"errored","ownerRunId":"r","error":{"name":"E","message":"m"}}"#);
        assert_eq!(StreamMeta::load(&mut s).unwrap(), m);
        assert_eq!(m.tail_index(), 2);
        assert_eq!(StreamMeta::default().tail_index(), -1);
    }

    #[test]
    fn legacy_meta_reads_tolerantly() {
        let mut s = MemoryStore::new();
        let load = |s: &mut MemoryStore, text: &str| {
            s.put("meta", text).unwrap();
            StreamMeta::load(s)
        };
        let m = load(&mut s, r#"{"count":2,"closed":true,"ownerRunId":"r"}"#).unwrap();
        assert_eq!((m.count, m.state, m.owner_run_id.as_deref()), (2, StreamState::Closed, Some("r")));
        let m = load(&mut s, r#"{"count":0,"closed":true,"ownerRunId":"r","expiredAt":5}"#).unwrap();
        assert_eq!((m.state, m.expired_at, m.payload_deleted), (StreamState::Expired, Some(Value::num(5)), Some(true)));
        let m = load(&mut s, r#"{"count":0,"closed":true,"expiredAt":null}"#).unwrap();
        assert_eq!(m.state, StreamState::Expired);
        assert_eq!(load(&mut s, r#"{"count":4,"closed":false}"#).unwrap().state, StreamState::Open);
        for bad in [
            r#"{"count":-1,"state":"open"}"#,
            r#"{"count":1.5,"state":"open"}"#,
            r#"{"state":"open"}"#,
            r#"{"count":1,"state":"odd"}"#,
            "x",
        ] {
            assert_eq!(load(&mut s, bad).unwrap_err().message, "Invalid persisted stream metadata", "{bad}");
        }
        assert_eq!(load(&mut s, r#"{"count":1,"state":"errored"}"#).unwrap_err().message, "Invalid persisted stream error metadata");
    }

    #[test]
    fn registry_expiry() {
        let mut s = MemoryStore::new();
        assert_eq!(RegistryExpiry::load(&mut s).unwrap(), None);
        s.put("registry:expired", &slot::encode(&Value::num(946_684_800_000.0))).unwrap();
        assert_eq!(RegistryExpiry::load(&mut s).unwrap(), Some(RegistryExpiry { expired_at: Value::num(946_684_800_000.0), deleted: 0 }));
        RegistryExpiry { expired_at: Value::num(5), deleted: 2 }.save(&mut s).unwrap();
        assert_eq!(s.data["registry:expired"], r#"j{"deleted":2,"expiredAt":5}"#);
        assert_eq!(RegistryExpiry::load(&mut s).unwrap(), Some(RegistryExpiry { expired_at: Value::num(5), deleted: 2 }));
    }

    #[test]
    fn chunks_store_bytes_raw_and_read_both_forms() {
        let mut s = MemoryStore::new();
        put_chunk(&mut s, "chunk:000000000000", &Value::Bytes(vec![0xF0, 0x9F, 0])).unwrap();
        put_chunk(&mut s, "chunk:000000000002", &Value::Array(vec![Value::num(1)])).unwrap();
        assert_eq!(s.data["chunk:000000000000"], Stored::Bytes(vec![0xF0, 0x9F, 0]));
        assert_eq!(s.data["chunk:000000000002"], "j[1]");
        s.put("chunk:000000000004", "bAQID").unwrap();
        let read = |s: &mut MemoryStore, k: &str| decode_chunk(k, s.get_value(k).unwrap().unwrap()).unwrap();
        assert_eq!(read(&mut s, "chunk:000000000000"), Value::Bytes(vec![0xF0, 0x9F, 0]));
        assert_eq!(read(&mut s, "chunk:000000000002"), Value::Array(vec![Value::num(1)]));
        assert_eq!(read(&mut s, "chunk:000000000004"), Value::Bytes(vec![1, 2, 3]));
        let wire = |s: &mut MemoryStore, k: &str| chunk_wire_bytes(k, s.get_value(k).unwrap().unwrap()).unwrap();
        assert_eq!(wire(&mut s, "chunk:000000000002"), b"[1]".to_vec());
        assert_eq!(wire(&mut s, "chunk:000000000004"), vec![1, 2, 3]);
        assert_eq!(decode_chunk("k", Stored::Text("b!!".into())).unwrap_err().message, "corrupt stored value at k");
    }
}
