//! Bounded reads: every response that lists stored values is limited to
//! [`RESPONSE_BUDGET_BYTES`] of encoded JSON, and is read from storage in small batches so
//! that neither the answer nor the values held while building it can grow with the data.
//!
//! A Worker isolate has 128 MB for everything in flight. One answer holds its values
//! decoded (up to the budget), then their JSON text (the budget), then the response body
//! handed to the runtime (the budget again, UTF-16 or bytes); 8 MiB keeps that near 30 MB
//! even for a page of maximum-size (~2.1 MB) stream chunks or events, so a few such reads
//! can run side by side. A page always holds at least one entry, so a reader always makes
//! progress, however large a single value is.

use super::{ListOptions, Store, StoreResult};

/// Most encoded JSON one listing answer carries (8 MiB), beyond its first entry.
pub const RESPONSE_BUDGET_BYTES: usize = 8 << 20;

/// Most entries read from storage in one batch, and the first batch's size (before
/// anything is known about the entries' sizes). Batches shrink to what the budget left
/// holds at the size of the largest entry seen; the cap bounds the one batch that meets
/// large entries after small ones: 8 × a maximum-size value (~2.2 MB, ~2.9 MB as JSON
/// text) stays near 23 MB.
const MAX_BATCH: usize = 8;
const FIRST_BATCH: usize = 4;

/// Reads one batch of entries ([`fetch_values`], [`fetch_text`]).
pub type Fetch<T> = fn(&mut dyn Store, &ListOptions) -> StoreResult<Vec<(String, T)>>;

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
/// first entry is always kept. Reads in batches sized from the entries seen so far.
/// `options.limit` is ignored; `want` replaces it.
pub fn list_budgeted<T>(
    store: &mut dyn Store,
    options: &ListOptions,
    want: Option<usize>,
    budget: usize,
    fetch: Fetch<T>,
    size: impl Fn(&T) -> usize,
) -> StoreResult<Budgeted<T>> {
    let mut entries: Vec<(String, T)> = Vec::new();
    let mut used = 0usize;
    let mut largest = 0usize;
    let mut batch_options = ListOptions { limit: None, ..options.clone() };
    loop {
        let left = want.map_or(usize::MAX, |w| w.saturating_sub(entries.len()));
        if left == 0 {
            return Ok(Budgeted { entries, truncated: false });
        }
        let batch = if entries.is_empty() { FIRST_BATCH } else { budget.saturating_sub(used) / largest.max(1) + 1 };
        let batch = batch.clamp(1, MAX_BATCH).min(left);
        batch_options.limit = Some(batch);
        let page = fetch(store, &batch_options)?;
        let got = page.len();
        let mut last_key = None;
        for (key, value) in page {
            let n = size(&value);
            if !entries.is_empty() && used.saturating_add(n) > budget {
                return Ok(Budgeted { entries, truncated: true });
            }
            used = used.saturating_add(n);
            largest = largest.max(n);
            last_key = Some(key.clone());
            entries.push((key, value));
        }
        let Some(last_key) = last_key.filter(|_| got == batch) else {
            return Ok(Budgeted { entries, truncated: false });
        };
        // Continue after the last entry, in the listing's direction.
        if batch_options.reverse {
            batch_options.end = Some(last_key);
        } else {
            batch_options.start = None;
            batch_options.start_after = Some(last_key);
        }
    }
}

/// [`Store::list_values`] as a batch reader for [`list_budgeted`].
pub fn fetch_values(store: &mut dyn Store, options: &ListOptions) -> StoreResult<Vec<(String, super::Stored)>> {
    store.list_values(options)
}

/// [`Store::list`] (text values) as a batch reader for [`list_budgeted`].
pub fn fetch_text(store: &mut dyn Store, options: &ListOptions) -> StoreResult<Vec<(String, String)>> {
    store.list(options)
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
