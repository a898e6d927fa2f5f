//! In-memory [`Store`] for native tests, with transaction semantics: a failed call leaves
//! no trace.
//!
//! Knows no core.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::buffered::{run_buffered, Fallback};
use super::{ListOptions, Store, StoreResult, Stored};
use crate::wire::RpcError;

#[derive(Debug, Default, Clone)]
pub struct MemoryStore {
    pub data: BTreeMap<String, Stored>,
    /// When set, every operation fails with this message (failure injection).
    pub fail_with: Option<String>,
    /// When set, a value (key + value bytes) larger than this is refused the way the
    /// platform refuses it (`string or blob too big: SQLITE_TOOBIG`).
    pub max_value_bytes: Option<usize>,
}

/// The largest value a SQLite-backed object accepted on Miniflare (raw bytes).
pub const PLATFORM_MAX_VALUE_BYTES: usize = 2_199_961;

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Run `f` as one call the way the shell runs it (`src/shell/kv.rs`, `run_sync`): its
    /// writes held back ([`Buffered`]) and written once it has succeeded; a call with a
    /// write too large to hold back runs again writing directly, undone on `Err`. Storage
    /// failing while the writes are written (the shell then aborts the object, which
    /// discards them) leaves the store as it was and fails the call.
    pub fn transaction<T>(&mut self, mut f: impl FnMut(&mut dyn Store) -> StoreResult<T>) -> StoreResult<T> {
        let snapshot = self.data.clone();
        match run_buffered(self, &mut f) {
            Ok(result) => result,
            Err(Fallback::Abort(e)) => {
                self.data = snapshot;
                Err(e)
            }
            Err(Fallback::Transaction) => {
                let result = f(self);
                if result.is_err() {
                    self.data = snapshot;
                }
                result
            }
        }
    }

    /// Run `f` inside one transaction, writing directly, undone on `Err`: what the shell's
    /// `in_transaction` (`transactionSync`) does between the awaits of the asynchronous
    /// paths.
    pub fn in_transaction<T, E>(&mut self, f: impl FnOnce(&mut dyn Store) -> Result<T, E>) -> Result<T, E> {
        let snapshot = self.data.clone();
        let result = f(self);
        if result.is_err() {
            self.data = snapshot;
        }
        result
    }

    /// The text stored at `key` (`None` when absent or bytes).
    pub fn text(&self, key: &str) -> Option<&str> {
        self.data.get(key).and_then(Stored::as_text)
    }

    pub fn keys(&self) -> Vec<&str> {
        self.data.keys().map(String::as_str).collect()
    }

    fn check_size(&self, len: usize) -> StoreResult<()> {
        match self.max_value_bytes {
            Some(max) if len > max => Err(RpcError::error("string or blob too big: SQLITE_TOOBIG")),
            _ => Ok(()),
        }
    }

    fn check(&self) -> StoreResult<()> {
        match &self.fail_with {
            Some(m) => Err(RpcError::error(m.clone())),
            None => Ok(()),
        }
    }
}

impl Store for MemoryStore {
    fn get_value(&mut self, key: &str) -> StoreResult<Option<Stored>> {
        self.check()?;
        Ok(self.data.get(key).cloned())
    }

    fn put(&mut self, key: &str, value: &str) -> StoreResult<()> {
        self.check()?;
        self.check_size(value.len())?;
        self.data.insert(key.to_string(), Stored::Text(value.to_string()));
        Ok(())
    }

    fn put_bytes(&mut self, key: &str, value: &[u8]) -> StoreResult<()> {
        self.check()?;
        self.check_size(value.len())?;
        self.data.insert(key.to_string(), Stored::Bytes(value.to_vec()));
        Ok(())
    }

    fn delete(&mut self, key: &str) -> StoreResult<bool> {
        self.check()?;
        Ok(self.data.remove(key).is_some())
    }

    fn list_values(&mut self, o: &ListOptions) -> StoreResult<Vec<(String, Stored)>> {
        self.check()?;
        if o.limit == Some(0) {
            return Err(RpcError::list_limit());
        }
        let lower = match (&o.start, &o.start_after, &o.prefix) {
            (_, Some(s), _) => Bound::Excluded(s.clone()),
            (Some(s), _, _) => Bound::Included(s.clone()),
            (None, None, Some(p)) => Bound::Included(p.clone()),
            _ => Bound::Unbounded,
        };
        let range = self.data.range::<String, _>((lower, Bound::Unbounded));
        let limit = o.limit.unwrap_or(usize::MAX);
        let matching = |(k, _): &(&String, &Stored)| o.admits(k);
        let out: Vec<(String, Stored)> = if o.reverse {
            range.filter(matching).collect::<Vec<_>>().into_iter().rev().take(limit).map(|(k, v)| (k.clone(), v.clone())).collect()
        } else {
            range
                .take_while(|(k, _)| {
                    o.end.as_deref().is_none_or(|e| k.as_str() < e)
                        && o.prefix.as_deref().is_none_or(|p| k.starts_with(p) || k.as_str() < p)
                })
                .filter(matching)
                .take(limit)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(keys: &[&str]) -> MemoryStore {
        let mut s = MemoryStore::new();
        for k in keys {
            s.put(k, "v").unwrap();
        }
        s
    }

    fn names(v: Vec<(String, String)>) -> Vec<String> {
        v.into_iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn list_bounds_prefix_reverse_limit() {
        let mut s = store(&["a", "b:1", "b:2", "b:3", "c"]);
        assert_eq!(names(s.list(&ListOptions::prefix("b:")).unwrap()), ["b:1", "b:2", "b:3"]);
        assert_eq!(names(s.list(&ListOptions::prefix("b:").start_after("b:1")).unwrap()), ["b:2", "b:3"]);
        assert_eq!(names(s.list(&ListOptions::prefix("b:").start("b:2")).unwrap()), ["b:2", "b:3"]);
        assert_eq!(names(s.list(&ListOptions::prefix("b:").end("b:3").reverse(true)).unwrap()), ["b:2", "b:1"]);
        assert_eq!(names(s.list(&ListOptions::prefix("b:").reverse(true).limit(1)).unwrap()), ["b:3"]);
        assert_eq!(names(s.list(&ListOptions::default().limit(2)).unwrap()), ["a", "b:1"]);
        assert_eq!(s.list(&ListOptions::default().limit(0)).unwrap_err(), RpcError::list_limit());
    }

    #[test]
    fn transaction_rolls_back_on_error() {
        let mut s = store(&["a"]);
        let r: Result<(), RpcError> = s.transaction(|t| {
            t.put("b", "1")?;
            t.delete("a")?;
            Err(RpcError::error("boom"))
        });
        assert!(r.is_err());
        assert_eq!(s.keys(), ["a"]);
    }

    #[test]
    fn bytes_values_get_list_and_roll_back() {
        let mut s = store(&["a"]);
        s.put_bytes("b:1", &[0, 1, 0xff]).unwrap();
        s.put_value("b:2", &Stored::Bytes(vec![])).unwrap();
        s.put_value("b:3", &Stored::Text("t".into())).unwrap();
        assert_eq!(s.get_value("b:1").unwrap(), Some(Stored::Bytes(vec![0, 1, 0xff])));
        assert_eq!(s.get_value("b:2").unwrap(), Some(Stored::Bytes(vec![])));
        assert_eq!(s.get_value("a").unwrap(), Some(Stored::Text("v".into())));
        assert_eq!(s.get_value("zz").unwrap(), None);
        // The string methods keep working on text and refuse bytes.
        assert_eq!(s.get("b:3").unwrap().as_deref(), Some("t"));
        assert_eq!(s.get("b:1").unwrap_err().message, "value at b:1 is bytes");
        assert_eq!(s.list(&ListOptions::prefix("b:")).unwrap_err().message, "value at b:1 is bytes");
        assert_eq!(s.list(&ListOptions::prefix("b:3")).unwrap(), [("b:3".to_string(), "t".to_string())]);
        // Mixed listings: values in key order, keys whatever the values.
        assert_eq!(
            s.list_values(&ListOptions::prefix("b:").reverse(true).limit(2)).unwrap(),
            [("b:3".to_string(), Stored::Text("t".into())), ("b:2".to_string(), Stored::Bytes(vec![]))]
        );
        assert_eq!(s.list_keys(&ListOptions::default()).unwrap(), ["a", "b:1", "b:2", "b:3"]);
        // A failed transaction undoes bytes writes and deletes too.
        let r: Result<(), RpcError> = s.transaction(|t| {
            t.put_bytes("b:1", &[9])?;
            t.put_bytes("c", &[1])?;
            t.delete("b:2")?;
            Err(RpcError::error("boom"))
        });
        assert!(r.is_err());
        assert_eq!(s.keys(), ["a", "b:1", "b:2", "b:3"]);
        assert_eq!(s.data["b:1"], Stored::Bytes(vec![0, 1, 0xff]));
        assert_eq!(s.text("b:3"), Some("t"));
        assert_eq!(s.text("b:1"), None);
    }
}
