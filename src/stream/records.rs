//! The StreamDO's stored records: the chunk-role [`StreamMeta`] (serde JSON under `meta`)
//! and chunk values.
//!
//! Chunk values use the [`slot`] encoding (shared with the IndexDO): a byte array (the normal case) is
//! `b` + padded base64, so a chunk costs 4/3 of its size plus one character; legacy callers
//! may write any JSON value (golden `streams` seq 46 writes `[1,2,3]`), kept as tagged JSON
//! and returned unchanged.
//!
//! Size limit: the platform caps one stored value at about 2 MB on SQLite-backed objects.
//! With base64, one chunk can hold about 1.55 MiB of bytes here (measured on Miniflare:
//! 1 625 292 bytes stored, 1 677 721 refused); the reference, storing raw bytes, about 2 MB.
//! A larger `writeChunk` fails in the platform's `put` with HTTP 500
//! `{"name":"Error","message":"string or blob too big: SQLITE_TOOBIG"}` and rolls back; the
//! router's 32 MiB request limit is far above either.

use serde::{Deserialize, Deserializer, Serialize};

use crate::store::slot;
use crate::store::{get_json, put_json, Store, StoreResult};
use crate::wire::{RpcError, Value};

use super::keys;

/// `meta`: `{count, closed, ownerRunId?, expiredAt?}`; absent ≡ `{count: 0, closed: false}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamMeta {
    /// Chunks written so far (= the next chunk index).
    pub count: u64,
    pub closed: bool,
    /// The first writer (or closer) owns the stream.
    #[serde(rename = "ownerRunId", default, skip_serializing_if = "Option::is_none")]
    pub owner_run_id: Option<String>,
    /// The expiry fence, as the caller sent it (normally epoch ms). Only its presence
    /// matters: a `null` sent by a caller still fences.
    #[serde(rename = "expiredAt", default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub expired_at: Option<Value>,
}

/// A member that is present deserializes to `Some`, even when it is `null`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl StreamMeta {
    pub fn load(store: &mut dyn Store) -> StoreResult<StreamMeta> {
        Ok(get_json(store, keys::META)?.unwrap_or_default())
    }

    pub fn save(&self, store: &mut dyn Store) -> StoreResult<()> {
        put_json(store, keys::META, self)
    }

    pub fn is_expired(&self) -> bool {
        self.expired_at.is_some()
    }

    /// `count − 1`: the last chunk index, −1 for an empty stream.
    pub fn tail_index(&self) -> Value {
        Value::Number(self.count as f64 - 1.0)
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

pub fn encode_chunk(chunk: &Value) -> String {
    slot::encode(chunk)
}

pub fn decode_chunk(key: &str, text: &str) -> Result<Value, RpcError> {
    slot::decode(key, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    #[test]
    fn meta_roundtrips_and_defaults() {
        let mut s = MemoryStore::new();
        assert_eq!(StreamMeta::load(&mut s).unwrap(), StreamMeta::default());
        let m = StreamMeta { count: 3, closed: true, owner_run_id: Some("r".into()), expired_at: Some(Value::Null) };
        m.save(&mut s).unwrap();
        assert_eq!(s.data["meta"], r#"{"count":3,"closed":true,"ownerRunId":"r","expiredAt":null}"#);
        assert_eq!(StreamMeta::load(&mut s).unwrap(), m);
        assert_eq!(m.tail_index(), Value::num(2));
        assert_eq!(StreamMeta::default().tail_index(), Value::num(-1));
        assert_eq!(fence_value(&Value::Date(None)), Value::Null);
        assert_eq!(fence_value(&Value::num(5)), Value::num(5));
    }
}
