//! [`Buffered`]: a writing call's puts and deletes held in memory until the call has
//! succeeded, then written in one synchronous burst ([`Buffered::flush`]).
//!
//! Why: the platform commits every write of one synchronous stretch of a Durable Object's
//! code together (its implicit transaction), so a call's writes need no explicit
//! transaction to land all together; they need one only to be *undone* when the call
//! fails half-way. Holding the writes back until the outcome is known does that undoing
//! for free: a failed call simply drops them. An explicit `transactionSync` costs a SQLite
//! savepoint per call (measured: about 8 % of a real-client event's server CPU, see
//! `docs/performance.md`).
//!
//! What could still fail in the burst:
//! * **Size.** The platform refuses a row (key + serialized value) over about 2.2 MB
//!   (`SQLITE_TOOBIG`; measured 2 199 961 bytes of value with a one-byte key). A write
//!   whose bound ([`row_bound`]: key bytes, plus two bytes per UTF-8 byte of text, which
//!   covers the platform's UTF-16 serialization of any string, or the bytes themselves,
//!   plus a margin) exceeds [`DIRECT_ROW_LIMIT`] is not buffered: the call is marked
//!   [`Buffered::needs_transaction`], fails fast, and the shell runs it again inside a
//!   transaction with direct writes, where the platform gives its own verdict and a
//!   failure rolls back, exactly as before. Writes under the bound cannot fail for size.
//! * **The storage itself** (an I/O error, a full database). The shell then aborts the
//!   object (`ctx.abort()`), which discards the uncommitted implicit transaction: nothing
//!   of the call lands, and nothing of it was acknowledged.
//!
//! Reads see the call's own writes: a pending value or deletion answers first, and
//! listings merge the pending keys of their range into what storage lists.
//!
//! Knows no core's keys.

use std::collections::BTreeMap;

use super::{ListOptions, Store, StoreResult, Stored};
use crate::wire::RpcError;

/// The largest [`row_bound`] a buffered write may have (bytes). The platform's own limit
/// is about 2 200 000; the bound over-estimates every row, so anything under this fits.
pub const DIRECT_ROW_LIMIT: usize = 2_000_000;

/// An upper bound of the row the platform stores for `key` → `value`: the key's bytes,
/// the value serialized (a string as one byte per Latin-1 character or two per UTF-16
/// unit, at most two bytes per UTF-8 byte; bytes as themselves) and a few dozen bytes of
/// serialization and record headers.
pub fn row_bound(key: &str, value: &Stored) -> usize {
    let value = match value {
        Stored::Text(t) => t.len().saturating_mul(2),
        Stored::Bytes(b) => b.len(),
    };
    key.len().saturating_add(value).saturating_add(64)
}

/// The error a buffered write over the limit fails with. It never reaches a client: the
/// shell sees [`Buffered::needs_transaction`] and runs the call again.
fn oversized(key: &str) -> RpcError {
    RpcError::error(format!("internal: write of {key} too large to buffer"))
}

/// Why a call run by [`run_buffered`] needs the shell to do more than answer.
#[derive(Debug)]
pub enum Fallback {
    /// A write was too large to hold back; nothing was written. Run the call again with
    /// direct writes inside a transaction.
    Transaction,
    /// Storage failed while the succeeded call's writes were being written: some may be in
    /// the open implicit transaction; the object must be aborted, which discards them.
    Abort(RpcError),
}

/// Run `f` with its writes held back over `inner`, and write them once it has succeeded:
/// its result, or what the shell must do instead ([`Fallback`]).
pub fn run_buffered<T>(inner: &mut dyn Store, f: impl FnOnce(&mut dyn Store) -> StoreResult<T>) -> Result<StoreResult<T>, Fallback> {
    let mut buffered = Buffered::new(inner);
    let result = f(&mut buffered);
    if buffered.needs_transaction() {
        return Err(Fallback::Transaction);
    }
    if result.is_ok() {
        buffered.flush().map_err(Fallback::Abort)?;
    }
    Ok(result)
}

/// Writes held back over an inner store (see the module documentation).
pub struct Buffered<'a> {
    inner: &'a mut dyn Store,
    /// Key → the pending value, or `None` for a pending deletion.
    pending: BTreeMap<String, Option<Stored>>,
    oversized: bool,
}

impl<'a> Buffered<'a> {
    pub fn new(inner: &'a mut dyn Store) -> Self {
        Buffered { inner, pending: BTreeMap::new(), oversized: false }
    }

    /// A write was too large to buffer: the call must run again with direct writes inside
    /// a transaction (its outcome here is void).
    pub fn needs_transaction(&self) -> bool {
        self.oversized
    }

    /// How many writes are pending.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Write everything pending, in key order. An error leaves the writes before it in
    /// the inner store: the caller must then make sure none of them commits (the shell
    /// aborts the object).
    pub fn flush(self) -> StoreResult<()> {
        debug_assert!(!self.oversized, "an oversized call is run again, not flushed");
        for (key, value) in self.pending {
            match value {
                Some(v) => self.inner.put_value(&key, &v)?,
                None => {
                    self.inner.delete(&key)?;
                }
            }
        }
        Ok(())
    }

    fn hold(&mut self, key: &str, value: Stored) -> StoreResult<()> {
        if self.oversized || row_bound(key, &value) > DIRECT_ROW_LIMIT {
            self.oversized = true;
            self.pending.clear();
            return Err(oversized(key));
        }
        self.pending.insert(key.to_string(), Some(value));
        Ok(())
    }
}

impl Store for Buffered<'_> {
    fn get_value(&mut self, key: &str) -> StoreResult<Option<Stored>> {
        match self.pending.get(key) {
            Some(v) => Ok(v.clone()),
            None => self.inner.get_value(key),
        }
    }

    fn contains(&mut self, key: &str) -> StoreResult<bool> {
        match self.pending.get(key) {
            Some(v) => Ok(v.is_some()),
            None => self.inner.contains(key),
        }
    }

    fn put(&mut self, key: &str, value: &str) -> StoreResult<()> {
        self.hold(key, Stored::Text(value.to_string()))
    }

    fn put_bytes(&mut self, key: &str, value: &[u8]) -> StoreResult<()> {
        self.hold(key, Stored::Bytes(value.to_vec()))
    }

    fn delete(&mut self, key: &str) -> StoreResult<bool> {
        if self.oversized {
            return Err(oversized(key));
        }
        let existed = self.contains(key)?;
        self.pending.insert(key.to_string(), None);
        Ok(existed)
    }

    fn list_values(&mut self, o: &ListOptions) -> StoreResult<Vec<(String, Stored)>> {
        let mine: Vec<(&String, &Option<Stored>)> = self.pending.iter().filter(|(k, _)| o.admits(k)).collect();
        if mine.is_empty() {
            return self.inner.list_values(o);
        }
        // Each pending key can hide at most one stored entry of the range (a deletion, or
        // an overwrite that the merge counts once), so `limit + pending` stored entries
        // always contain the first `limit` entries of the merged range.
        let mut wide = o.clone();
        wide.limit = o.limit.map(|l| l.saturating_add(mine.len()));
        let mut merged: BTreeMap<String, Stored> = self.inner.list_values(&wide)?.into_iter().collect();
        for (k, v) in mine {
            match v {
                Some(v) => merged.insert(k.clone(), v.clone()),
                None => merged.remove(k),
            };
        }
        let limit = o.limit.unwrap_or(usize::MAX);
        Ok(if o.reverse { merged.into_iter().rev().take(limit).collect() } else { merged.into_iter().take(limit).collect() })
    }

    /// Lazy as the inner store's when no held write falls in the range; else in batches of
    /// the merged listing above.
    fn list_visit(&mut self, o: &ListOptions, visit: &mut dyn FnMut(String, Stored) -> StoreResult<bool>) -> StoreResult<()> {
        if self.pending.keys().any(|k| o.admits(k)) {
            crate::store::visit_in_batches(self, o, visit)
        } else {
            self.inner.list_visit(o, visit)
        }
    }

    /// The inner store's answer (which may come from memory) and the held puts of the
    /// prefix; a merged listing only when a held deletion removes the inner answer.
    fn last_key(&mut self, prefix: &str) -> StoreResult<Option<String>> {
        let held = self.pending.range(prefix.to_string()..).take_while(|(k, _)| k.starts_with(prefix));
        let mut held_put: Option<String> = None;
        let mut any = false;
        for (k, v) in held {
            any = true;
            if v.is_some() {
                held_put = Some(k.clone());
            }
        }
        let inner = self.inner.last_key(prefix)?;
        if !any {
            return Ok(inner);
        }
        if let Some(k) = &inner {
            if matches!(self.pending.get(k), Some(None)) {
                return Ok(self.list_keys(&ListOptions::prefix(prefix).reverse(true).limit(1))?.into_iter().next());
            }
        }
        Ok(inner.into_iter().chain(held_put).max())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    fn store(keys: &[&str]) -> MemoryStore {
        let mut s = MemoryStore::new();
        for k in keys {
            s.put(k, &format!("v{k}")).unwrap();
        }
        s
    }

    /// A visit across several batches sees the merged listing, in both directions, with held
    /// writes and deletions on either side of the batch boundaries.
    #[test]
    fn list_visit_merges_held_writes_across_batches() {
        let keys: Vec<String> = (0..30).map(|i| format!("k{i:02}")).collect();
        let mut mem = store(&keys.iter().map(String::as_str).collect::<Vec<_>>());
        let mut b = Buffered::new(&mut mem);
        for i in [0, 7, 8, 9, 16, 29] {
            b.delete(&format!("k{i:02}")).unwrap();
        }
        for k in ["k07a", "k15", "k31", "a"] {
            b.put(k, "new").unwrap();
        }
        for reverse in [false, true] {
            for limit in [None, Some(1), Some(8), Some(9), Some(20)] {
                let o = ListOptions { prefix: Some("k".into()), reverse, limit, ..Default::default() };
                let mut seen = Vec::new();
                b.list_visit(&o, &mut |k, v| {
                    seen.push((k, v));
                    Ok(true)
                })
                .unwrap();
                assert_eq!(seen, b.list_values(&o).unwrap(), "reverse {reverse}, limit {limit:?}");
            }
        }
    }

    #[test]
    fn reads_see_pending_writes_and_nothing_lands_before_flush() {
        let mut mem = store(&["a", "b", "c"]);
        let mut b = Buffered::new(&mut mem);
        b.put("b", "new").unwrap();
        assert!(b.delete("c").unwrap());
        assert!(!b.delete("zz").unwrap());
        assert!(!b.delete("c").unwrap(), "already deleted in this call");
        b.put_bytes("d", &[1, 2]).unwrap();
        assert_eq!(b.get("b").unwrap().as_deref(), Some("new"));
        assert_eq!(b.get("c").unwrap(), None);
        assert_eq!(b.get_value("d").unwrap(), Some(Stored::Bytes(vec![1, 2])));
        assert!(b.contains("a").unwrap() && !b.contains("c").unwrap());
        assert_eq!(b.list_keys(&ListOptions::default()).unwrap(), ["a", "b", "d"]);
        assert_eq!(b.len(), 4);
        drop(b);
        assert_eq!(mem.keys(), ["a", "b", "c"], "dropped without a flush: nothing written");
        assert_eq!(mem.text("b"), Some("vb"));

        let mut b = Buffered::new(&mut mem);
        b.put("b", "new").unwrap();
        b.delete("c").unwrap();
        b.put("c", "again").unwrap();
        b.delete("a").unwrap();
        b.flush().unwrap();
        assert_eq!(mem.keys(), ["b", "c"]);
        assert_eq!((mem.text("b"), mem.text("c")), (Some("new"), Some("again")));
    }

    #[test]
    fn listings_merge_pending_keys_under_every_bound_and_limit() {
        let mut mem = store(&["k:1", "k:2", "k:3", "k:4", "m"]);
        let mut b = Buffered::new(&mut mem);
        b.delete("k:1").unwrap();
        b.delete("k:2").unwrap();
        b.put("k:25", "x").unwrap();
        b.put("k:3", "y").unwrap();
        let keys = |b: &mut Buffered, o: ListOptions| b.list_keys(&o).unwrap();
        assert_eq!(keys(&mut b, ListOptions::prefix("k:").limit(1)), ["k:25"]);
        assert_eq!(keys(&mut b, ListOptions::prefix("k:").limit(2)), ["k:25", "k:3"]);
        assert_eq!(keys(&mut b, ListOptions::prefix("k:").reverse(true).limit(3)), ["k:4", "k:3", "k:25"]);
        assert_eq!(keys(&mut b, ListOptions::prefix("k:").start_after("k:25")), ["k:3", "k:4"]);
        assert_eq!(keys(&mut b, ListOptions::prefix("k:").start("k:25").end("k:4")), ["k:25", "k:3"]);
        assert_eq!(keys(&mut b, ListOptions::prefix("m")), ["m"]);
        assert_eq!(b.list(&ListOptions::prefix("k:3")).unwrap(), [("k:3".to_string(), "y".to_string())]);
    }

    /// Random call-sized sequences of operations: through [`Buffered`] then flushed, the
    /// store ends as a direct run leaves it, and every read on the way answers the same.
    #[test]
    fn agrees_with_direct_writes_on_random_sequences() {
        let mut next = crate::testing::xorshift(0x9e37_79b9_7f4a_7c15);
        let key = |i: u64| format!("{}:{}", ["a", "b", "c"][(i % 3) as usize], i % 7);
        for round in 0..400u64 {
            let mut start = MemoryStore::new();
            for i in 0..next(12) {
                start.put(&key(i * 5 + round), "s").unwrap();
            }
            let mut direct = start.clone();
            let mut buffered_base = start.clone();
            let mut b = Buffered::new(&mut buffered_base);
            for step in 0..next(16) {
                let k = key(next(40));
                match next(6) {
                    0 | 1 => {
                        let v = format!("{round}.{step}");
                        direct.put(&k, &v).unwrap();
                        b.put(&k, &v).unwrap();
                    }
                    2 => assert_eq!(direct.delete(&k).unwrap(), b.delete(&k).unwrap(), "delete {k}"),
                    3 => assert_eq!(direct.get_value(&k).unwrap(), b.get_value(&k).unwrap(), "get {k}"),
                    _ => {
                        let mut o = ListOptions::prefix(["a:", "b:", "c"][next(3) as usize]);
                        o.reverse = next(2) == 1;
                        if next(2) == 1 {
                            o.limit = Some(1 + next(4) as usize);
                        }
                        if next(3) == 0 {
                            o.start_after = Some(k.clone());
                        }
                        assert_eq!(direct.list_values(&o).unwrap(), b.list_values(&o).unwrap(), "list {o:?}");
                    }
                }
            }
            b.flush().unwrap();
            assert_eq!(direct.data, buffered_base.data, "round {round}");
        }
    }

    #[test]
    fn a_write_too_large_to_buffer_marks_the_call_for_a_transaction() {
        let mut mem = store(&["a"]);
        let mut b = Buffered::new(&mut mem);
        b.put("small", "x").unwrap();
        let big = "é".repeat(DIRECT_ROW_LIMIT / 4);
        assert!(row_bound("big", &Stored::Text(big.clone())) > DIRECT_ROW_LIMIT);
        assert!(b.put("big", &big).is_err());
        assert!(b.needs_transaction());
        // Everything after fails too, and nothing was kept.
        assert!(b.put("later", "x").is_err());
        assert!(b.delete("a").is_err());
        assert!(b.is_empty());
        // Bytes count as themselves: just under the limit is buffered.
        let mut b = Buffered::new(&mut mem);
        let fits = vec![0u8; DIRECT_ROW_LIMIT - 64 - 3];
        b.put_bytes("big", &fits).unwrap();
        assert!(!b.needs_transaction());
        assert!(b.put_bytes("big", &[fits.as_slice(), &[0]].concat()).is_err());
    }

    #[test]
    fn the_bound_covers_what_the_platform_refuses() {
        // The platform stored 2 199 961 bytes under a one-byte key and refused more with a
        // 100-byte key: no value the bound admits comes near.
        let at_limit = DIRECT_ROW_LIMIT - 64 - 1;
        assert!(at_limit + 100 < 2_199_961);
        assert!(row_bound("k", &Stored::Text("a".repeat(DIRECT_ROW_LIMIT / 2))) > DIRECT_ROW_LIMIT);
    }

    #[test]
    fn a_failing_store_fails_the_flush() {
        let mut mem = MemoryStore::new();
        mem.fail_with = Some("disk I/O error".into());
        let mut b = Buffered::new(&mut mem);
        assert!(b.get("a").is_err(), "reads of keys not pending go to the store");
        b.put("a", "1").unwrap();
        assert_eq!(b.flush().unwrap_err().message, "disk I/O error");
    }
}
