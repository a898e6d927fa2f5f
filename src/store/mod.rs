//! The storage every Durable Object core runs on: an ordered string key → string value
//! map, the shape of `ctx.storage.kv` on SQLite-backed objects.
//!
//! A core method receives `&mut dyn Store` for the duration of one call; the shell runs
//! that call inside one storage transaction (`transactionSync`), so a method's writes land
//! all together or, when it returns an error, not at all. [`MemoryStore`] is the host
//! implementation used by the native tests; it offers the same all-or-nothing behaviour
//! through [`MemoryStore::transaction`].
//!
//! Values are JSON text of each core's typed records (see the `records` modules).

pub mod alarm;
pub mod js_args;
mod memory;
pub mod slot;

pub use memory::MemoryStore;

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

/// Synchronous key/value storage for one object, inside one transaction.
pub trait Store {
    fn get(&mut self, key: &str) -> StoreResult<Option<String>>;
    fn put(&mut self, key: &str, value: &str) -> StoreResult<()>;
    /// Returns whether the key existed.
    fn delete(&mut self, key: &str) -> StoreResult<bool>;
    /// Entries in key order (descending when `reverse`), at most `limit`.
    fn list(&mut self, options: &ListOptions) -> StoreResult<Vec<(String, String)>>;

}

/// Read and decode a typed record stored as JSON.
pub fn get_json<T: serde::de::DeserializeOwned>(store: &mut dyn Store, key: &str) -> StoreResult<Option<T>> {
    match store.get(key)? {
        None => Ok(None),
        Some(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| RpcError::error(format!("corrupt record at {key}: {e}"))),
    }
}

/// Encode and store a typed record as JSON.
pub fn put_json<T: serde::Serialize>(store: &mut dyn Store, key: &str, value: &T) -> StoreResult<()> {
    let text = serde_json::to_string(value).map_err(|e| RpcError::error(format!("cannot encode record {key}: {e}")))?;
    store.put(key, &text)
}

/// Delete every key under `prefix` (in batches), returning how many were deleted.
pub fn delete_prefix(store: &mut dyn Store, prefix: &str) -> StoreResult<usize> {
    let keys: Vec<String> = store.list(&ListOptions::prefix(prefix))?.into_iter().map(|(k, _)| k).collect();
    for k in &keys {
        store.delete(k)?;
    }
    Ok(keys.len())
}
