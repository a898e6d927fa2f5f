//! Bounded reads: every response that lists stored values is limited to
//! [`RESPONSE_BUDGET_BYTES`] of encoded JSON, and is read from storage entry by entry (one
//! lazy platform listing, [`Store::list_visit`]) so that neither the answer nor the values
//! held while building it can grow with the data.
//!
//! A Worker isolate has 128 MB for everything in flight. One answer holds its values
//! decoded (up to the budget), then their JSON text (the budget), then the response body
//! handed to the runtime (the budget again, UTF-16 or bytes); 8 MiB keeps that near 30 MB
//! even for a page of maximum-size (~2.1 MB) stream chunks or events, so a few such reads
//! can run side by side. A page always holds at least one entry, so a reader always makes
//! progress, however large a single value is.
//!
//! Knows no core's keys or records.

use super::{ListOptions, Store, StoreResult, Stored};

/// Most encoded JSON one listing answer carries (8 MiB), beyond its first entry.
pub const RESPONSE_BUDGET_BYTES: usize = 8 << 20;

/// What [`list_budgeted`] makes of one entry ([`fetch_values`], [`fetch_text`]).
pub type Fetch<T> = fn(&str, Stored) -> StoreResult<T>;

/// What [`list_budgeted`] read.
#[derive(Debug)]
pub struct Budgeted<T> {
    /// The entries in listing order, at most the number asked for.
    pub entries: Vec<(String, T)>,
    /// Whether the budget ended the listing while more entries (within the number asked
    /// for) exist: at least one more entry is known to be there.
    pub truncated: bool,
}

/// List up to `want` entries (`None`: all) of `options`, stopping before the entry that
/// would take the sizes (`size` of each, about its encoded JSON length) past `budget`; the
/// first entry is always kept. One listing read as it goes ([`Store::list_visit`]): the
/// entries past the budget are never loaded (on the platform; other stores read a few at
/// a time). `options.limit` is ignored; `want` replaces it.
pub fn list_budgeted<T>(
    store: &mut dyn Store,
    options: &ListOptions,
    want: Option<usize>,
    budget: usize,
    fetch: Fetch<T>,
    size: impl Fn(&T) -> usize,
) -> StoreResult<Budgeted<T>> {
    let mut entries: Vec<(String, T)> = Vec::new();
    if want == Some(0) {
        return Ok(Budgeted { entries, truncated: false });
    }
    let mut used = 0usize;
    let mut truncated = false;
    let listing = ListOptions { limit: want, ..options.clone() };
    store.list_visit(&listing, &mut |key, value| {
        let value = fetch(&key, value)?;
        let n = size(&value);
        if !entries.is_empty() && used.saturating_add(n) > budget {
            truncated = true;
            return Ok(false);
        }
        used = used.saturating_add(n);
        entries.push((key, value));
        Ok(true)
    })?;
    Ok(Budgeted { entries, truncated })
}

/// The entry as stored, for [`list_budgeted`].
pub fn fetch_values(_key: &str, value: Stored) -> StoreResult<Stored> {
    Ok(value)
}

/// A text entry, for [`list_budgeted`]; a bytes value is an error ([`Store::list`]).
pub fn fetch_text(key: &str, value: Stored) -> StoreResult<String> {
    value.into_text(key)
}

/// About the length of the tagged JSON of `v` (exact for everything but string escapes
/// and numbers, which count as their longest form).
pub fn encoded_len(v: &crate::wire::Value) -> usize {
    use crate::wire::Value;
    match v {
        Value::Null => 4,
        Value::Bool(_) => 5,
        Value::Number(_) => 24,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => items.iter().map(|i| encoded_len(i) + 1).sum::<usize>() + 2,
        Value::Object(map) => map.iter().map(|(k, v)| k.len() + 4 + encoded_len(v)).sum::<usize>() + 2,
        Value::Date(_) => 50,
        Value::Bytes(b) => b.len().div_ceil(3) * 4 + 33,
        Value::Json(text) => text.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{MemoryStore, Stored};

    fn store(n: usize, size: usize) -> MemoryStore {
        let mut s = MemoryStore::new();
        for i in 0..n {
            s.put_bytes(&format!("k:{i:04}"), &vec![1u8; size]).unwrap();
        }
        s
    }

    fn sizes(v: &Stored) -> usize {
        match v {
            Stored::Bytes(b) => b.len(),
            Stored::Text(t) => t.len(),
        }
    }

    fn names<T>(b: &Budgeted<T>) -> Vec<&str> {
        b.entries.iter().map(|(k, _)| k.as_str()).collect()
    }

    #[test]
    fn stops_at_the_budget_but_always_keeps_one() {
        let mut s = store(10, 100);
        let all = list_budgeted(&mut s, &ListOptions::prefix("k:"), None, 10_000, fetch_values, sizes).unwrap();
        assert_eq!((all.entries.len(), all.truncated), (10, false));
        let some = list_budgeted(&mut s, &ListOptions::prefix("k:"), None, 350, fetch_values, sizes).unwrap();
        assert_eq!((names(&some), some.truncated), (vec!["k:0000", "k:0001", "k:0002"], true));
        let one = list_budgeted(&mut s, &ListOptions::prefix("k:"), Some(5), 1, fetch_values, sizes).unwrap();
        assert_eq!((names(&one), one.truncated), (vec!["k:0000"], true));
        // Exactly the budget fits; `want` is honoured and is not truncation.
        let exact = list_budgeted(&mut s, &ListOptions::prefix("k:"), Some(4), 400, fetch_values, sizes).unwrap();
        assert_eq!((exact.entries.len(), exact.truncated), (4, false));
        let last = list_budgeted(&mut s, &ListOptions::prefix("k:").start("k:0009"), None, 1, fetch_values, sizes).unwrap();
        assert_eq!((names(&last), last.truncated), (vec!["k:0009"], false));
    }

    /// A store that counts the entries its listings hand over.
    struct Counting(MemoryStore, usize);

    impl Store for Counting {
        fn get_value(&mut self, key: &str) -> StoreResult<Option<Stored>> {
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
            let out = self.0.list_values(options)?;
            self.1 += out.len();
            Ok(out)
        }
    }

    /// A page the budget ends early reads no more than one batch past its last entry, and
    /// a page asked for `want` entries reads no more than `want`.
    #[test]
    fn reads_no_further_than_the_page_needs() {
        let mut s = Counting(store(500, 100), 0);
        let page = list_budgeted(&mut s, &ListOptions::prefix("k:"), None, 1_000, fetch_values, sizes).unwrap();
        assert_eq!((page.entries.len(), page.truncated), (10, true));
        assert!(s.1 <= 11 + crate::store::LIST_BATCH, "read {} entries", s.1);
        s.1 = 0;
        let page = list_budgeted(&mut s, &ListOptions::prefix("k:"), Some(13), usize::MAX, fetch_values, sizes).unwrap();
        assert_eq!((page.entries.len(), page.truncated, s.1), (13, false, 13));
    }

    #[test]
    fn batches_continue_in_both_directions_within_bounds() {
        let mut s = store(200, 10);
        let fwd = list_budgeted(&mut s, &ListOptions::prefix("k:").start("k:0005"), Some(150), usize::MAX, fetch_values, sizes).unwrap();
        let want: Vec<String> = (5..155).map(|i| format!("k:{i:04}")).collect();
        assert_eq!(names(&fwd), want);
        let back =
            list_budgeted(&mut s, &ListOptions::prefix("k:").end("k:0100").reverse(true), None, usize::MAX, fetch_values, sizes).unwrap();
        let want: Vec<String> = (0..100).rev().map(|i| format!("k:{i:04}")).collect();
        assert_eq!(names(&back), want);
        assert!(!back.truncated);
        s.put("l:0", "x").unwrap();
        let bounded =
            list_budgeted(&mut s, &ListOptions::prefix("k:").start_after("k:0197"), None, usize::MAX, fetch_values, sizes).unwrap();
        assert_eq!(names(&bounded), ["k:0198", "k:0199"]);
    }

    #[test]
    fn encoded_len_bounds_the_json() {
        use crate::wire::Value;
        let v = Value::Array(vec![
            Value::Bytes(vec![0; 1000]),
            Value::object([("a", Value::str("xyz")), ("n", Value::num(1.5))]),
            Value::Null,
            Value::Bool(false),
            Value::date(0),
        ]);
        let json = v.to_json().unwrap().len();
        let est = encoded_len(&v);
        assert!(est >= json && est < json + 64, "{est} vs {json}");
    }
}
