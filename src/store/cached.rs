//! [`ReadCache`]: the values an object read recently, kept between its calls so that the
//! reads every call of a method repeats (a run's `run` record, its last event key, its
//! retention markers; a shard's fence of the run at hand) cost no storage call at all.
//!
//! Why it is sound: a Durable Object's storage is its own, and every read and write of
//! it goes through this object's [`Store`] in the shell (`src/shell/kv.rs`), one call at a
//! time. So the cache only has to follow this object's own writes:
//! * a write through [`Cached`] updates the key's entry once the inner store has taken
//!   it; a failed write empties the cache (what storage then holds is unknown);
//! * a write that bypasses [`Cached`] (the calls run inside `transactionSync`, which may
//!   roll back) must be followed by [`ReadCache::clear`]: the shell does that;
//! * a call whose writes are held back ([`super::buffered::Buffered`]) reaches
//!   [`Cached`] only with the writes of a call that succeeded, when they are flushed;
//!   a failed call's writes never get here.
//!
//! A storage failure that the platform detects only at commit resets the object, and the
//! cache with it (the shell's objects are created afresh).
//!
//! What it keeps: the key's value or its absence, for values of at most
//! [`CACHE_VALUE_BYTES`], in at most [`CACHE_BYTES`] per object (an isolate may hold many
//! objects, and wasm memory never shrinks). A read fills an entry; a write updates only
//! an entry that is already there, so keys written once and never read (events, index
//! rows) take no room. When full, the cache drops its values and refills with what the
//! next calls read. Listings always go to storage, except [`Store::last_key`]: the
//! greatest key of a prefix is kept (through a drop of the values: every writing call asks
//! again) and follows the object's writes (a put of a greater key becomes it; deleting it
//! forgets the prefix).
//!
//! Knows no core's keys or records: it keeps whatever was read.

use std::collections::HashMap;

use super::{ListOptions, Store, StoreResult, Stored};

/// The bytes of values and keys one object's cache may hold.
pub const CACHE_BYTES: usize = 16 * 1024;
/// The largest value kept (bytes of text or bytes); larger ones are read from storage.
pub const CACHE_VALUE_BYTES: usize = 4 * 1024;
/// What an entry costs besides its key and value (the map's own bookkeeping).
const ENTRY_OVERHEAD: usize = 48;

/// An object's cache of recently read keys (see the module documentation).
#[derive(Debug, Default)]
pub struct ReadCache {
    /// Key → its value, or `None` when storage holds none.
    entries: HashMap<String, Option<Stored>>,
    /// Prefix → its greatest key ([`Store::last_key`]), or `None` when it has none.
    lasts: HashMap<String, Option<String>>,
    /// What the entries and the greatest keys cost ([`cost`], [`last_cost`]).
    bytes: usize,
}

fn value_len(value: &Option<Stored>) -> usize {
    match value {
        None => 0,
        Some(Stored::Text(t)) => t.len(),
        Some(Stored::Bytes(b)) => b.len(),
    }
}

fn cost(key: &str, value: &Option<Stored>) -> usize {
    key.len() + value_len(value) + ENTRY_OVERHEAD
}

impl ReadCache {
    pub fn new() -> Self {
        ReadCache::default()
    }

    /// Forget everything (after writes that bypassed the cache, or a failure).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.lasts.clear();
        self.bytes = 0;
    }

    /// How many keys are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The bytes the entries cost (at most [`CACHE_BYTES`]).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn get(&self, key: &str) -> Option<&Option<Stored>> {
        self.entries.get(key)
    }

    /// Whether a value of `len` bytes would be kept.
    fn keeps(key: &str, len: usize) -> bool {
        len <= CACHE_VALUE_BYTES && key.len() <= CACHE_VALUE_BYTES
    }

    /// Keep `key` → `value` (a read's answer, or a write to a kept key). Too large a value
    /// drops the key instead; a full cache is emptied first.
    fn keep(&mut self, key: &str, value: Option<Stored>) {
        self.forget(key);
        if !ReadCache::keeps(key, value_len(&value)) {
            return;
        }
        let c = cost(key, &value);
        self.make_room(c);
        self.bytes += c;
        self.entries.insert(key.to_string(), value);
    }

    /// Make room for `more` bytes: drop every kept value, but not the few greatest keys,
    /// which every call of a writing method asks for again; everything, should those
    /// alone still not leave the room.
    fn make_room(&mut self, more: usize) {
        if self.bytes + more <= CACHE_BYTES {
            return;
        }
        self.entries.clear();
        self.bytes = self.lasts.iter().map(|(p, l)| last_cost(p, l)).sum();
        if self.bytes + more > CACHE_BYTES {
            self.clear();
        }
    }

    fn forget(&mut self, key: &str) {
        if let Some(old) = self.entries.remove(key) {
            self.bytes -= cost(key, &old);
        }
    }

    /// A write of `key` landed (`put`, else a deletion): update its entry if it has one,
    /// and the greatest key of each kept prefix it falls under. A put of a greater key
    /// becomes it; deleting it forgets the prefix, whose next greatest key only storage
    /// knows.
    fn wrote(&mut self, key: &str, put: bool, value: impl FnOnce() -> Option<Stored>) {
        if self.entries.contains_key(key) {
            self.keep(key, value());
        }
        if self.lasts.is_empty() {
            return;
        }
        let mut forgotten = Vec::new();
        for (prefix, last) in self.lasts.iter_mut().filter(|(p, _)| key.starts_with(p.as_str())) {
            match last {
                Some(l) if !put && l.as_str() == key => forgotten.push(prefix.clone()),
                Some(l) if put && l.as_str() < key => {
                    self.bytes = self.bytes + key.len() - l.len();
                    *l = key.to_string();
                }
                None if put => {
                    self.bytes += key.len();
                    *last = Some(key.to_string());
                }
                _ => {}
            }
        }
        for prefix in forgotten {
            self.forget_last(&prefix);
        }
        self.make_room(0);
    }

    fn last(&self, prefix: &str) -> Option<&Option<String>> {
        self.lasts.get(prefix)
    }

    /// Keep `prefix`'s greatest key (a read's answer).
    fn keep_last(&mut self, prefix: &str, last: Option<String>) {
        self.forget_last(prefix);
        let c = last_cost(prefix, &last);
        if c > CACHE_VALUE_BYTES {
            return;
        }
        self.make_room(c);
        self.bytes += c;
        self.lasts.insert(prefix.to_string(), last);
    }

    fn forget_last(&mut self, prefix: &str) {
        if let Some(old) = self.lasts.remove(prefix) {
            self.bytes -= last_cost(prefix, &old);
        }
    }
}

fn last_cost(prefix: &str, last: &Option<String>) -> usize {
    prefix.len() + last.as_ref().map_or(0, String::len) + ENTRY_OVERHEAD
}

/// A store whose reads are answered from (and fill) a [`ReadCache`], and whose writes go
/// to the inner store and then update the cache.
pub struct Cached<'a> {
    inner: &'a mut dyn Store,
    cache: &'a mut ReadCache,
}

impl<'a> Cached<'a> {
    pub fn new(inner: &'a mut dyn Store, cache: &'a mut ReadCache) -> Self {
        Cached { inner, cache }
    }

    /// A write's outcome: on failure storage may or may not hold it, so nothing kept can
    /// be trusted any more.
    fn landed<T>(&mut self, result: StoreResult<T>) -> StoreResult<T> {
        if result.is_err() {
            self.cache.clear();
        }
        result
    }
}

impl Store for Cached<'_> {
    fn get_value(&mut self, key: &str) -> StoreResult<Option<Stored>> {
        if let Some(v) = self.cache.get(key) {
            return Ok(v.clone());
        }
        let v = self.inner.get_value(key)?;
        if ReadCache::keeps(key, value_len(&v)) {
            self.cache.keep(key, v.clone());
        }
        Ok(v)
    }

    fn contains(&mut self, key: &str) -> StoreResult<bool> {
        if let Some(v) = self.cache.get(key) {
            return Ok(v.is_some());
        }
        // The inner store's `contains` does not bring the value over: only an absence is
        // learnt here.
        let present = self.inner.contains(key)?;
        if !present {
            self.cache.keep(key, None);
        }
        Ok(present)
    }

    fn put(&mut self, key: &str, value: &str) -> StoreResult<()> {
        let r = self.inner.put(key, value);
        self.landed(r)?;
        self.cache.wrote(key, true, || Some(Stored::Text(value.to_string())));
        Ok(())
    }

    fn put_bytes(&mut self, key: &str, value: &[u8]) -> StoreResult<()> {
        let r = self.inner.put_bytes(key, value);
        self.landed(r)?;
        self.cache.wrote(key, true, || Some(Stored::Bytes(value.to_vec())));
        Ok(())
    }

    fn delete(&mut self, key: &str) -> StoreResult<bool> {
        let r = self.inner.delete(key);
        let existed = self.landed(r)?;
        self.cache.wrote(key, false, || None);
        Ok(existed)
    }

    fn list_values(&mut self, options: &ListOptions) -> StoreResult<Vec<(String, Stored)>> {
        self.inner.list_values(options)
    }

    fn list_visit(&mut self, options: &ListOptions, visit: &mut dyn FnMut(String, Stored) -> StoreResult<bool>) -> StoreResult<()> {
        self.inner.list_visit(options, visit)
    }

    fn last_key(&mut self, prefix: &str) -> StoreResult<Option<String>> {
        if let Some(last) = self.cache.last(prefix) {
            return Ok(last.clone());
        }
        let last = self.inner.last_key(prefix)?;
        self.cache.keep_last(prefix, last.clone());
        Ok(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::buffered::run_buffered;
    use crate::store::MemoryStore;
    use crate::wire::RpcError;

    /// A store that counts the calls reaching it, and can be made to fail its writes.
    struct Counting {
        mem: MemoryStore,
        reads: usize,
        fail_writes: bool,
    }

    impl Counting {
        fn new() -> Self {
            Counting { mem: MemoryStore::new(), reads: 0, fail_writes: false }
        }
        fn write<T>(&mut self, f: impl FnOnce(&mut MemoryStore) -> StoreResult<T>) -> StoreResult<T> {
            if self.fail_writes {
                return Err(RpcError::error("disk full"));
            }
            f(&mut self.mem)
        }
    }

    impl Store for Counting {
        fn get_value(&mut self, key: &str) -> StoreResult<Option<Stored>> {
            self.reads += 1;
            self.mem.get_value(key)
        }
        fn contains(&mut self, key: &str) -> StoreResult<bool> {
            self.reads += 1;
            self.mem.contains(key)
        }
        fn put(&mut self, key: &str, value: &str) -> StoreResult<()> {
            self.write(|m| m.put(key, value))
        }
        fn put_bytes(&mut self, key: &str, value: &[u8]) -> StoreResult<()> {
            self.write(|m| m.put_bytes(key, value))
        }
        fn delete(&mut self, key: &str) -> StoreResult<bool> {
            self.write(|m| m.delete(key))
        }
        fn list_values(&mut self, o: &ListOptions) -> StoreResult<Vec<(String, Stored)>> {
            self.reads += 1;
            self.mem.list_values(o)
        }
    }

    #[test]
    fn repeated_reads_reach_storage_once_and_follow_writes() {
        let mut inner = Counting::new();
        inner.mem.put("run", "r1").unwrap();
        let mut cache = ReadCache::new();
        for _ in 0..3 {
            let mut c = Cached::new(&mut inner, &mut cache);
            assert_eq!(c.get("run").unwrap().as_deref(), Some("r1"));
            assert_eq!(c.get("seq").unwrap(), None);
            assert!(!c.contains("seq").unwrap());
        }
        assert_eq!(inner.reads, 2, "one read of each key");

        let mut c = Cached::new(&mut inner, &mut cache);
        c.put("run", "r2").unwrap();
        c.put("seq", "1").unwrap();
        c.put_bytes("chunk", &[1, 2]).unwrap();
        assert_eq!(c.get("run").unwrap().as_deref(), Some("r2"));
        assert_eq!(c.get("seq").unwrap().as_deref(), Some("1"));
        assert!(c.delete("run").unwrap());
        assert_eq!(c.get("run").unwrap(), None);
        assert_eq!(inner.reads, 2, "written keys that were kept answer from the cache");
        assert_eq!(inner.mem.keys(), ["chunk", "seq"], "every write reached storage");
        assert_eq!(cache.len(), 2, "a key written but never read takes no room");
    }

    #[test]
    fn a_failed_write_empties_the_cache() {
        let mut inner = Counting::new();
        inner.mem.put("a", "1").unwrap();
        let mut cache = ReadCache::new();
        let mut c = Cached::new(&mut inner, &mut cache);
        c.get("a").unwrap();
        c.get("b").unwrap();
        inner.fail_writes = true;
        let mut c = Cached::new(&mut inner, &mut cache);
        assert!(c.put("a", "2").is_err());
        assert!(cache.is_empty());
        inner.fail_writes = false;
        let mut c = Cached::new(&mut inner, &mut cache);
        assert_eq!(c.get("a").unwrap().as_deref(), Some("1"));
        assert_eq!(inner.reads, 3, "read again from storage");
    }

    #[test]
    fn a_buffered_call_updates_the_cache_only_when_it_succeeds() {
        let mut inner = Counting::new();
        inner.mem.put("seq", "1").unwrap();
        let mut cache = ReadCache::new();
        let failed = run_buffered(&mut Cached::new(&mut inner, &mut cache), |s| {
            assert_eq!(s.get("seq")?.as_deref(), Some("1"));
            s.put("seq", "2")?;
            Err::<(), _>(RpcError::error("refused"))
        });
        assert!(matches!(failed, Ok(Err(_))));
        let mut c = Cached::new(&mut inner, &mut cache);
        assert_eq!(c.get("seq").unwrap().as_deref(), Some("1"), "the failed call's write never landed");
        let done = run_buffered(&mut Cached::new(&mut inner, &mut cache), |s| s.put("seq", "3"));
        assert!(matches!(done, Ok(Ok(()))));
        let mut c = Cached::new(&mut inner, &mut cache);
        assert_eq!(c.get("seq").unwrap().as_deref(), Some("3"));
        assert_eq!(inner.reads, 1);
        assert_eq!(inner.mem.text("seq"), Some("3"));
    }

    #[test]
    fn large_values_are_not_kept_and_the_cache_stays_within_its_budget() {
        let mut inner = Counting::new();
        let big = "x".repeat(CACHE_VALUE_BYTES + 1);
        inner.mem.put("big", &big).unwrap();
        let mut cache = ReadCache::new();
        let mut c = Cached::new(&mut inner, &mut cache);
        c.get("big").unwrap();
        c.get("big").unwrap();
        assert_eq!(inner.reads, 2, "a large value is read each time");
        assert!(cache.is_empty());

        // A kept key grown past the limit is dropped, not kept stale.
        let mut c = Cached::new(&mut inner, &mut cache);
        c.get("small").unwrap();
        c.put("small", &big).unwrap();
        assert_eq!(c.get("small").unwrap().as_deref(), Some(big.as_str()));
        assert!(cache.is_empty());

        let value = "v".repeat(1000);
        for i in 0..100 {
            let key = format!("k{i}");
            inner.mem.put(&key, &value).unwrap();
            Cached::new(&mut inner, &mut cache).get(&key).unwrap();
            assert!(cache.bytes() <= CACHE_BYTES);
        }
        assert!(!cache.is_empty());
        // The budget counts exactly what is kept.
        let counted: usize = cache.entries.iter().map(|(k, v)| cost(k, v)).sum();
        assert_eq!(counted, cache.bytes());
    }

    /// Random operations through the cache agree with the same operations on a store
    /// without one, read for read.
    #[test]
    fn agrees_with_an_uncached_store_on_random_sequences() {
        let mut next = crate::testing::xorshift(0x2545_f491_4f6c_dd1d);
        let mut plain = MemoryStore::new();
        let mut inner = Counting::new();
        let mut cache = ReadCache::new();
        for step in 0..20_000 {
            let key = format!("k{}", next(40));
            let len = [1, 100, 3000, CACHE_VALUE_BYTES + 10][next(4) as usize];
            let value = format!("{step}:{}", "v".repeat(len));
            let prefix = ["k", "k1", "k3", "x"][next(4) as usize];
            let mut c = Cached::new(&mut inner, &mut cache);
            match next(7) {
                6 => assert_eq!(c.last_key(prefix), plain.last_key(prefix), "step {step}"),
                0 => assert_eq!(c.put(&key, &value), plain.put(&key, &value)),
                1 => assert_eq!(c.put_bytes(&key, value.as_bytes()), plain.put_bytes(&key, value.as_bytes())),
                2 => assert_eq!(c.delete(&key), plain.delete(&key)),
                3 => assert_eq!(c.contains(&key), plain.contains(&key)),
                4 => assert_eq!(c.list_keys(&ListOptions::prefix("k1")), plain.list_keys(&ListOptions::prefix("k1"))),
                _ => assert_eq!(c.get_value(&key), plain.get_value(&key)),
            }
            assert!(cache.bytes() <= CACHE_BYTES);
        }
        assert!(inner.reads < 20_000, "some reads were answered from the cache");
    }

    #[test]
    fn the_greatest_key_of_a_prefix_is_read_once_and_follows_writes() {
        let mut inner = Counting::new();
        inner.mem.put("event:1", "a").unwrap();
        inner.mem.put("event:2", "b").unwrap();
        inner.mem.put("f", "c").unwrap();
        let mut cache = ReadCache::new();
        let mut c = Cached::new(&mut inner, &mut cache);
        assert_eq!(c.last_key("event:").unwrap().as_deref(), Some("event:2"));
        assert_eq!(c.last_key("event:").unwrap().as_deref(), Some("event:2"));
        assert_eq!(c.last_key("none:").unwrap(), None);
        assert_eq!(c.last_key("none:").unwrap(), None);
        assert_eq!(inner.reads, 2, "one listing per prefix");

        let mut c = Cached::new(&mut inner, &mut cache);
        c.put("event:3", "c").unwrap();
        c.put("event:0", "z").unwrap();
        c.put("none:1", "n").unwrap();
        assert_eq!(c.last_key("event:").unwrap().as_deref(), Some("event:3"));
        assert_eq!(c.last_key("none:").unwrap().as_deref(), Some("none:1"));
        assert_eq!(inner.reads, 2, "puts move the kept answers");

        // Deleting the greatest key forgets it; deleting another key does not.
        let mut c = Cached::new(&mut inner, &mut cache);
        c.delete("event:1").unwrap();
        assert_eq!(c.last_key("event:").unwrap().as_deref(), Some("event:3"));
        assert_eq!(inner.reads, 2);
        let mut c = Cached::new(&mut inner, &mut cache);
        c.delete("event:3").unwrap();
        assert_eq!(c.last_key("event:").unwrap().as_deref(), Some("event:2"));
        assert_eq!(inner.reads, 3, "read again after its greatest key went");

        // A failed write empties everything kept.
        inner.fail_writes = true;
        assert!(Cached::new(&mut inner, &mut cache).put("event:9", "x").is_err());
        inner.fail_writes = false;
        assert_eq!(Cached::new(&mut inner, &mut cache).last_key("event:").unwrap().as_deref(), Some("event:2"));
        assert_eq!(inner.reads, 4);
        let counted: usize =
            cache.entries.iter().map(|(k, v)| cost(k, v)).sum::<usize>() + cache.lasts.iter().map(|(p, l)| last_cost(p, l)).sum::<usize>();
        assert_eq!(counted, cache.bytes());

        // Making room for values keeps the greatest keys: every writing call asks again.
        let value = "v".repeat(1000);
        for i in 0..40 {
            let key = format!("k{i}");
            inner.mem.put(&key, &value).unwrap();
            Cached::new(&mut inner, &mut cache).get(&key).unwrap();
        }
        let reads = inner.reads;
        assert_eq!(Cached::new(&mut inner, &mut cache).last_key("event:").unwrap().as_deref(), Some("event:2"));
        assert_eq!(inner.reads, reads, "still answered from memory");
        assert!(cache.bytes() <= CACHE_BYTES);
    }

    /// Buffered calls over the cache, some failing, agree with the same calls on a plain
    /// store on every greatest key they read.
    #[test]
    fn buffered_calls_read_the_greatest_key_of_their_own_writes() {
        let mut next = crate::testing::xorshift(0x9e37_79b9_7f4a_7c15);
        let mut plain = MemoryStore::new();
        let mut inner = Counting::new();
        let mut cache = ReadCache::new();
        for call in 0..3_000 {
            let ops: Vec<(u64, String, &str)> =
                (0..next(6) + 1).map(|_| (next(3), format!("e:{:02}", next(30)), ["e:", "e:1", "e:2", "f"][next(4) as usize])).collect();
            let fails = next(4) == 0;
            let mut seen = Vec::new();
            let mut expected = Vec::new();
            let _ = run_buffered(&mut Cached::new(&mut inner, &mut cache), |s| {
                for (op, key, prefix) in &ops {
                    match op {
                        0 => s.put(key, "v")?,
                        1 => {
                            s.delete(key)?;
                        }
                        _ => seen.push(s.last_key(prefix)?),
                    }
                }
                if fails {
                    return Err(RpcError::error("refused"));
                }
                Ok(())
            });
            // The same operations on a copy of the plain store, kept only when the call succeeds.
            let mut copy = plain.clone();
            for (op, key, prefix) in &ops {
                match op {
                    0 => copy.put(key, "v").unwrap(),
                    1 => {
                        copy.delete(key).unwrap();
                    }
                    _ => expected.push(copy.last_key(prefix).unwrap()),
                }
            }
            assert_eq!(seen, expected, "call {call}");
            if !fails {
                plain = copy;
            }
            assert_eq!(inner.mem.keys(), plain.keys(), "call {call}");
        }
    }
}
