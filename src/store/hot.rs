//! [`HotKeys`]: a Durable Object instance's memory of a few keys that nearly every call of
//! its core reads (the run's record, its event sequence, its retention fences), so that a
//! call reads them from storage only the first time.
//!
//! Coherent because this instance is the only writer of its storage, and every write of
//! a call that may be rolled back is kept out of it:
//! * [`Cached`] sits *under* [`super::buffered::Buffered`]: a call's writes reach it only
//!   in the burst after the call succeeded, which then commits (or the object is aborted,
//!   and its memory with it); reads fill it from storage.
//! * A call run inside a transaction that may roll back (the direct re-run of a call, the
//!   asynchronous paths' `transactionSync`) does not go through it, and the shell
//!   [`clears`](HotKeys::clear) it before such a call.
//!
//! Only values up to [`HOT_VALUE_LIMIT`] bytes are kept (a run record carries its input,
//! and an isolate holds many instances).

use super::{ListOptions, Store, StoreResult, Stored};

/// The largest value kept in memory (bytes of text or bytes).
pub const HOT_VALUE_LIMIT: usize = 4096;

/// The remembered state of each hot key: `None` unknown, `Some(None)` known absent,
/// `Some(Some(v))` known value.
pub struct HotKeys {
    keys: &'static [&'static str],
    known: Vec<Option<Option<Stored>>>,
}

impl HotKeys {
    pub fn new(keys: &'static [&'static str]) -> HotKeys {
        HotKeys { keys, known: vec![None; keys.len()] }
    }

    /// Forget everything (before a call whose writes bypass this memory).
    pub fn clear(&mut self) {
        self.known.iter_mut().for_each(|k| *k = None);
    }

    fn slot(&self, key: &str) -> Option<usize> {
        self.keys.iter().position(|k| *k == key)
    }

    fn remember(&mut self, slot: usize, value: Option<&Stored>) {
        let size = match value {
            Some(Stored::Text(t)) => t.len(),
            Some(Stored::Bytes(b)) => b.len(),
            None => 0,
        };
        self.known[slot] = (size <= HOT_VALUE_LIMIT).then(|| value.cloned());
    }
}

/// A store that answers [`HotKeys`] reads from memory and keeps them up to date with the
/// writes that pass through it.
pub struct Cached<'a> {
    inner: &'a mut dyn Store,
    hot: &'a mut HotKeys,
}

impl<'a> Cached<'a> {
    pub fn new(inner: &'a mut dyn Store, hot: &'a mut HotKeys) -> Self {
        Cached { inner, hot }
    }
}

impl Store for Cached<'_> {
    fn get_value(&mut self, key: &str) -> StoreResult<Option<Stored>> {
        let Some(slot) = self.hot.slot(key) else { return self.inner.get_value(key) };
        if let Some(known) = &self.hot.known[slot] {
            return Ok(known.clone());
        }
        let value = self.inner.get_value(key)?;
        self.hot.remember(slot, value.as_ref());
        Ok(value)
    }

    fn contains(&mut self, key: &str) -> StoreResult<bool> {
        match self.hot.slot(key).and_then(|slot| self.hot.known[slot].as_ref()) {
            Some(known) => Ok(known.is_some()),
            None => self.inner.contains(key),
        }
    }

    fn put(&mut self, key: &str, value: &str) -> StoreResult<()> {
        self.put_value(key, &Stored::Text(value.to_string()))
    }

    fn put_bytes(&mut self, key: &str, value: &[u8]) -> StoreResult<()> {
        self.put_value(key, &Stored::Bytes(value.to_vec()))
    }

    fn put_value(&mut self, key: &str, value: &Stored) -> StoreResult<()> {
        match self.hot.slot(key) {
            Some(slot) => {
                // Unknown until the write has gone through.
                self.hot.known[slot] = None;
                self.inner.put_value(key, value)?;
                self.hot.remember(slot, Some(value));
                Ok(())
            }
            None => self.inner.put_value(key, value),
        }
    }

    fn delete(&mut self, key: &str) -> StoreResult<bool> {
        match self.hot.slot(key) {
            Some(slot) => {
                self.hot.known[slot] = None;
                let existed = self.inner.delete(key)?;
                self.hot.known[slot] = Some(None);
                Ok(existed)
            }
            None => self.inner.delete(key),
        }
    }

    fn list_values(&mut self, options: &ListOptions) -> StoreResult<Vec<(String, Stored)>> {
        self.inner.list_values(options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::buffered::Buffered;
    use crate::store::MemoryStore;

    const HOT: &[&str] = &["run", "seq"];

    /// Counts the reads that reach the store.
    struct Reads<'a>(&'a mut MemoryStore, usize);
    impl Store for Reads<'_> {
        fn get_value(&mut self, key: &str) -> StoreResult<Option<Stored>> {
            self.1 += 1;
            self.0.get_value(key)
        }
        fn put(&mut self, key: &str, value: &str) -> StoreResult<()> {
            self.0.put(key, value)
        }
        fn put_bytes(&mut self, key: &str, value: &[u8]) -> StoreResult<()> {
            self.0.put_bytes(key, value)
        }
        fn delete(&mut self, key: &str) -> StoreResult<bool> {
            self.0.delete(key)
        }
        fn list_values(&mut self, options: &ListOptions) -> StoreResult<Vec<(String, Stored)>> {
            self.0.list_values(options)
        }
    }

    #[test]
    fn hot_keys_are_read_once_and_follow_flushed_writes_only() {
        let mut mem = MemoryStore::new();
        mem.put("run", "r1").unwrap();
        let mut hot = HotKeys::new(HOT);
        let mut reads = Reads(&mut mem, 0);
        {
            let mut cached = Cached::new(&mut reads, &mut hot);
            assert_eq!(cached.get("run").unwrap().as_deref(), Some("r1"));
            assert_eq!(cached.get("seq").unwrap(), None);
            assert_eq!(cached.get("run").unwrap().as_deref(), Some("r1"));
            assert!(!cached.contains("seq").unwrap());
            assert_eq!(cached.get("other").unwrap(), None);
            assert_eq!(cached.get("other").unwrap(), None);
        }
        assert_eq!(reads.1, 4, "run and seq once, other twice");

        // A failed call's writes never reach the memory.
        {
            let mut cached = Cached::new(&mut reads, &mut hot);
            let mut call = Buffered::new(&mut cached);
            call.put("run", "r2").unwrap();
            call.put("seq", "1").unwrap();
            assert_eq!(call.get("run").unwrap().as_deref(), Some("r2"));
            drop(call);
            assert_eq!(cached.get("run").unwrap().as_deref(), Some("r1"));
        }
        // A successful one's do, through the burst.
        {
            let mut cached = Cached::new(&mut reads, &mut hot);
            let mut call = Buffered::new(&mut cached);
            call.put("run", "r2").unwrap();
            call.put("seq", "1").unwrap();
            call.flush().unwrap();
            assert_eq!(cached.get("run").unwrap().as_deref(), Some("r2"));
            assert_eq!(cached.get("seq").unwrap().as_deref(), Some("1"));
            cached.delete("seq").unwrap();
            assert_eq!(cached.get("seq").unwrap(), None);
        }
        assert_eq!(reads.1, 4, "no further reads of hot keys");
        assert_eq!(mem.text("run"), Some("r2"));
        assert_eq!(mem.text("seq"), None);

        // Large values are not kept; a cleared memory reads again.
        let mut reads = Reads(&mut mem, 0);
        {
            let mut cached = Cached::new(&mut reads, &mut hot);
            cached.put("run", &"x".repeat(HOT_VALUE_LIMIT + 1)).unwrap();
            cached.get("run").unwrap();
            cached.get("run").unwrap();
        }
        assert_eq!(reads.1, 2);
        hot.clear();
        {
            let mut cached = Cached::new(&mut reads, &mut hot);
            cached.get("seq").unwrap();
        }
        assert_eq!(reads.1, 3);
    }

    #[test]
    fn a_failed_write_leaves_the_key_unknown() {
        let mut mem = MemoryStore::new();
        mem.put("run", "r1").unwrap();
        let mut hot = HotKeys::new(HOT);
        Cached::new(&mut mem, &mut hot).get("run").unwrap();
        mem.fail_with = Some("disk I/O error".into());
        assert!(Cached::new(&mut mem, &mut hot).put("run", "r2").is_err());
        mem.fail_with = None;
        assert_eq!(Cached::new(&mut mem, &mut hot).get("run").unwrap().as_deref(), Some("r1"));
    }
}
