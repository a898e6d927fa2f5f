//! The storage every Durable Object core runs on: an ordered string key → value map (a
//! value is text or bytes, [`Stored`]), the shape of `ctx.storage.kv` on SQLite-backed
//! objects.
//!
//! A core method receives `&mut dyn Store` for the duration of one call, and its writes
//! land all together or, when it returns an error, not at all: the shell holds them back
//! ([`buffered::Buffered`]) and writes them in one synchronous burst once the call has
//! succeeded, which the platform commits as one transaction (or, for the rare call with a
//! write too large to hold back, runs it inside `transactionSync`). [`MemoryStore`] is the
//! host implementation used by the native tests; [`MemoryStore::transaction`] runs a call
//! the same way.
//!
//! Values are JSON text of each core's typed records (see the `records` modules), except
//! byte-array stream chunks, which are kept as raw bytes ([`Stored::Bytes`]): the platform
//! stores a `Uint8Array` as is, so a chunk costs its own size instead of 4/3 of it in
//! base64.
//!
//! Knows no core's keys and nothing of the platform: the shell adapts `ctx.storage.kv` to
//! [`Store`].

pub mod alarm;
pub mod buffered;
pub mod cached;
pub mod js_args;
mod memory;
pub mod page;
pub mod read_only;
pub mod record;
pub mod slot;

pub use memory::{MemoryStore, PLATFORM_MAX_VALUE_BYTES};

use crate::wire::RpcError;

pub type StoreResult<T> = Result<T, RpcError>;

/// Ordered listing options (all bounds on raw key strings, compared as UTF-8 bytes —
/// which orders like the platform's UTF-16 comparison for the ASCII keys we use).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    pub prefix: Option<String>,
    /// Inclusive lower bound.
    pub start: Option<String>,
    /// Exclusive lower bound.
    pub start_after: Option<String>,
    /// Exclusive upper bound.
    pub end: Option<String>,
    pub reverse: bool,
    /// Must be at least 1 when set (the platform throws `List limit must be positive.`).
    pub limit: Option<usize>,
}

impl ListOptions {
    pub fn prefix(prefix: impl Into<String>) -> Self {
        ListOptions { prefix: Some(prefix.into()), ..Default::default() }
    }
    pub fn start(mut self, key: impl Into<String>) -> Self {
        self.start = Some(key.into());
        self
    }
    pub fn start_after(mut self, key: impl Into<String>) -> Self {
        self.start_after = Some(key.into());
        self
    }
    pub fn end(mut self, key: impl Into<String>) -> Self {
        self.end = Some(key.into());
        self
    }
    pub fn reverse(mut self, reverse: bool) -> Self {
        self.reverse = reverse;
        self
    }
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Does `key` fall inside the bounds (ignoring `limit`/`reverse`)?
    pub fn admits(&self, key: &str) -> bool {
        self.prefix.as_deref().is_none_or(|p| key.starts_with(p))
            && self.start.as_deref().is_none_or(|s| key >= s)
            && self.start_after.as_deref().is_none_or(|s| key > s)
            && self.end.as_deref().is_none_or(|e| key < e)
    }
}

/// One stored value: text (every record) or raw bytes (stream chunks, stored on the
/// platform as a `Uint8Array`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    Text(String),
    Bytes(Vec<u8>),
}

impl Stored {
    /// The text, or `None` for bytes.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Stored::Text(t) => Some(t),
            Stored::Bytes(_) => None,
        }
    }

    /// The text, or the error the string-valued methods give for a bytes value.
    pub fn into_text(self, key: &str) -> StoreResult<String> {
        match self {
            Stored::Text(t) => Ok(t),
            Stored::Bytes(b) if record::is_packed(&b) => {
                record::unpack(&b).ok_or_else(|| RpcError::error(format!("corrupt record at {key}")))
            }
            Stored::Bytes(_) => Err(RpcError::error(format!("value at {key} is bytes"))),
        }
    }
}

impl From<&str> for Stored {
    fn from(text: &str) -> Self {
        Stored::Text(text.to_string())
    }
}

impl From<String> for Stored {
    fn from(text: String) -> Self {
        Stored::Text(text)
    }
}

impl PartialEq<str> for Stored {
    fn eq(&self, other: &str) -> bool {
        self.as_text() == Some(other)
    }
}

impl PartialEq<&str> for Stored {
    fn eq(&self, other: &&str) -> bool {
        self.as_text() == Some(*other)
    }
}

/// Synchronous key/value storage for one object, inside one transaction.
///
/// The value-level methods ([`Store::get_value`], [`Store::put_bytes`],
/// [`Store::list_values`]) see text and bytes; the string methods ([`Store::get`],
/// [`Store::list`]) are for keys that only ever hold text and refuse a bytes value
/// (`value at <key> is bytes`). Key-only listings use [`Store::list_keys`], which works on
/// any mix.
pub trait Store {
    fn get_value(&mut self, key: &str) -> StoreResult<Option<Stored>>;
    fn put(&mut self, key: &str, value: &str) -> StoreResult<()>;
    fn put_bytes(&mut self, key: &str, value: &[u8]) -> StoreResult<()>;
    /// Returns whether the key existed.
    fn delete(&mut self, key: &str) -> StoreResult<bool>;
    /// Entries in key order (descending when `reverse`), at most `limit`.
    fn list_values(&mut self, options: &ListOptions) -> StoreResult<Vec<(String, Stored)>>;

    /// The entries of [`Store::list_values`] handed to `visit` one at a time, in order, until
    /// it answers `false` (or fails): a caller that stops early has read no more than it
    /// needed. The default reads [`LIST_BATCH`] entries at a time, so at most that many
    /// values are held besides what `visit` keeps; a store whose platform listing is lazy
    /// (the shell's, a cursor over SQLite) reads them as `visit` asks for them, in one call.
    fn list_visit(&mut self, options: &ListOptions, visit: &mut dyn FnMut(String, Stored) -> StoreResult<bool>) -> StoreResult<()> {
        visit_in_batches(self, options, visit)
    }

    /// Whether `key` holds a value.
    fn contains(&mut self, key: &str) -> StoreResult<bool> {
        Ok(self.get_value(key)?.is_some())
    }

    fn put_value(&mut self, key: &str, value: &Stored) -> StoreResult<()> {
        match value {
            Stored::Text(t) => self.put(key, t),
            Stored::Bytes(b) => self.put_bytes(key, b),
        }
    }

    /// A text value; a bytes value is an error.
    fn get(&mut self, key: &str) -> StoreResult<Option<String>> {
        self.get_value(key)?.map(|v| v.into_text(key)).transpose()
    }

    /// Text entries, as [`Store::list_values`]; a bytes value is an error.
    fn list(&mut self, options: &ListOptions) -> StoreResult<Vec<(String, String)>> {
        self.list_values(options)?
            .into_iter()
            .map(|(k, v)| {
                let text = v.into_text(&k)?;
                Ok((k, text))
            })
            .collect()
    }

    /// Keys only, as [`Store::list_values`], whatever the values are.
    fn list_keys(&mut self, options: &ListOptions) -> StoreResult<Vec<String>> {
        Ok(self.list_values(options)?.into_iter().map(|(k, _)| k).collect())
    }

    /// The greatest key starting with `prefix`, or `None` when there is none. The default
    /// lists one entry in reverse; a store that can answer without the value (the
    /// shell's) or from memory (a cache that follows its writes) does.
    fn last_key(&mut self, prefix: &str) -> StoreResult<Option<String>> {
        Ok(self.list_keys(&ListOptions::prefix(prefix).reverse(true).limit(1))?.into_iter().next())
    }
}

/// Entries read per batch by the default [`Store::list_visit`]: 8 values of the largest
/// size (~2.2 MB each) stay near 18 MB.
pub const LIST_BATCH: usize = 8;

/// [`Store::list_visit`] over [`Store::list_values`], [`LIST_BATCH`] entries at a time,
/// each batch continuing after the previous one's last key in the listing's direction.
pub fn visit_in_batches<S: Store + ?Sized>(
    store: &mut S,
    options: &ListOptions,
    visit: &mut dyn FnMut(String, Stored) -> StoreResult<bool>,
) -> StoreResult<()> {
    let mut left = options.limit.unwrap_or(usize::MAX);
    let mut batch_options = options.clone();
    while left > 0 {
        let batch = left.min(LIST_BATCH);
        batch_options.limit = Some(batch);
        let entries = store.list_values(&batch_options)?;
        let got = entries.len();
        let mut last_key = None;
        for (key, value) in entries {
            last_key = Some(key.clone());
            if !visit(key, value)? {
                return Ok(());
            }
        }
        left -= got;
        let Some(last_key) = last_key.filter(|_| got == batch) else { return Ok(()) };
        if batch_options.reverse {
            batch_options.end = Some(last_key);
        } else {
            batch_options.start = None;
            batch_options.start_after = Some(last_key);
        }
    }
    Ok(())
}

/// Read and decode a typed record stored as JSON.
pub fn get_json<T: serde::de::DeserializeOwned>(store: &mut dyn Store, key: &str) -> StoreResult<Option<T>> {
    store.get(key)?.map(|text| decode_record(key, &text)).transpose()
}

/// A record's stored JSON text decoded (`corrupt record at <key>` when it does not decode).
fn decode_record<T: serde::de::DeserializeOwned>(key: &str, text: &str) -> StoreResult<T> {
    serde_json::from_str(text).map_err(|e| RpcError::error(format!("corrupt record at {key}: {e}")))
}

/// Read a record for an answer: its stored text as it is when that is already what the
/// encoder would write ([`Value::stored`]), else decoded as [`get_json`] decodes it (same
/// errors).
pub fn get_answer(store: &mut dyn Store, key: &str) -> StoreResult<Option<crate::wire::Value>> {
    store.get(key)?.map(|text| crate::wire::Value::stored(text).or_else(|text| decode_record(key, &text))).transpose()
}

/// Encode and store a typed record as JSON (packed, see [`record`], when it is large and
/// carries byte arrays).
pub fn put_json<T: serde::Serialize>(store: &mut dyn Store, key: &str, value: &T) -> StoreResult<()> {
    let text = serde_json::to_string(value).map_err(|e| RpcError::error(format!("cannot encode record {key}: {e}")))?;
    match record::pack(&text) {
        Some(packed) => store.put_bytes(key, &packed),
        None => store.put(key, &text),
    }
}

/// Delete every key under `prefix` (in batches), returning how many were deleted.
pub fn delete_prefix(store: &mut dyn Store, prefix: &str) -> StoreResult<usize> {
    let keys = store.list_keys(&ListOptions::prefix(prefix))?;
    for k in &keys {
        store.delete(k)?;
    }
    Ok(keys.len())
}

/// A borrowed store is a store (so adapters such as [`read_only::ReadOnly`] can wrap one).
impl<S: Store + ?Sized> Store for &mut S {
    fn get_value(&mut self, key: &str) -> StoreResult<Option<Stored>> {
        (**self).get_value(key)
    }
    fn put(&mut self, key: &str, value: &str) -> StoreResult<()> {
        (**self).put(key, value)
    }
    fn put_bytes(&mut self, key: &str, value: &[u8]) -> StoreResult<()> {
        (**self).put_bytes(key, value)
    }
    fn delete(&mut self, key: &str) -> StoreResult<bool> {
        (**self).delete(key)
    }
    fn list_values(&mut self, options: &ListOptions) -> StoreResult<Vec<(String, Stored)>> {
        (**self).list_values(options)
    }
    fn list_visit(&mut self, options: &ListOptions, visit: &mut dyn FnMut(String, Stored) -> StoreResult<bool>) -> StoreResult<()> {
        (**self).list_visit(options, visit)
    }
    fn contains(&mut self, key: &str) -> StoreResult<bool> {
        (**self).contains(key)
    }
    fn last_key(&mut self, prefix: &str) -> StoreResult<Option<String>> {
        (**self).last_key(prefix)
    }
}
