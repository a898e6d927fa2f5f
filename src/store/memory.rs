//! In-memory [`Store`] for native tests, with transaction semantics: a failed call leaves
//! no trace.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::{ListOptions, Store, StoreResult};
use crate::wire::RpcError;

#[derive(Debug, Default, Clone)]
pub struct MemoryStore {
    pub data: BTreeMap<String, String>,
    /// When set, every operation fails with this message (failure injection).
    pub fail_with: Option<String>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Run `f` as one transaction: on `Err` every write it made is undone.
    pub fn transaction<T, E>(&mut self, f: impl FnOnce(&mut dyn Store) -> Result<T, E>) -> Result<T, E> {
        let snapshot = self.data.clone();
        let result = f(self);
        if result.is_err() {
            self.data = snapshot;
        }
        result
    }

    pub fn keys(&self) -> Vec<&str> {
        self.data.keys().map(String::as_str).collect()
    }

    fn check(&self) -> StoreResult<()> {
        match &self.fail_with {
            Some(m) => Err(RpcError::error(m.clone())),
            None => Ok(()),
        }
    }
}

impl Store for MemoryStore {
    fn get(&mut self, key: &str) -> StoreResult<Option<String>> {
        self.check()?;
        Ok(self.data.get(key).cloned())
    }

    fn put(&mut self, key: &str, value: &str) -> StoreResult<()> {
        self.check()?;
        self.data.insert(key.to_string(), value.to_string());
        Ok(())
    }

    fn delete(&mut self, key: &str) -> StoreResult<bool> {
        self.check()?;
        Ok(self.data.remove(key).is_some())
    }

    fn list(&mut self, o: &ListOptions) -> StoreResult<Vec<(String, String)>> {
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
        let matching = |(k, _): &(&String, &String)| o.admits(k);
        let out: Vec<(String, String)> = if o.reverse {
            range.filter(matching).collect::<Vec<_>>().into_iter().rev().take(limit).map(|(k, v)| (k.clone(), v.clone())).collect()
        } else {
            range
                .take_while(|(k, _)| o.end.as_deref().is_none_or(|e| k.as_str() < e) && o.prefix.as_deref().is_none_or(|p| k.starts_with(p) || k.as_str() < p))
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
}
