//! A merged listing that reads what its page needs, not `limit + 1` entries from every
//! source (issue #46): a page of the runs list then costs about the same at 1,000 stored
//! runs as at 20.
//!
//! The sources (16 catalog shards, maybe the archive, maybe more families) each hold a
//! sorted part of the listing. Round one asks each for a share of the page
//! ([`first_ask`]: about twice its even share). After each round, an entry is certain when
//! no source that still has more (`list_complete: false`) could hold an entry before it:
//! every such source's last name comes at or after it in the listing's order. While fewer
//! than `limit + 1` entries are certain, the next round asks again only the sources whose
//! last name comes before the `limit + 1`-th entry (or all unfinished ones when there are
//! fewer), twice as many as before, after their last name. The page is then the
//! [`merge`] of what was read, which is exactly the page a full read of every source
//! would give.
//!
//! Makes no call: [`super::driver::list_merged`] runs the rounds.

use std::cmp::Ordering;

use crate::protocol::calls::Target;
use crate::wire::{RpcError, Value};

use super::list::{merge, MergedList};

/// At most this many rounds; a source still unfinished then is read to the page's end at
/// once (its last round asks `limit + 1`).
const MAX_ROUNDS: usize = 8;

/// One source's progress.
#[derive(Debug, Clone)]
struct Source {
    target: Target,
    options: Value,
    /// Entries read so far, in storage order of the listing (as answered).
    entries: Vec<(String, Option<Value>)>,
    /// What its last call asked for; 0 before the first.
    asked: usize,
    complete: bool,
}

/// The rounds of one merged listing ([module docs](self)).
#[derive(Debug, Clone)]
pub struct LazyMerge {
    plan: MergedList,
    sources: Vec<Source>,
    rounds: usize,
}

/// The first round's ask per source: about twice an even share of `limit + 1`, at least 4.
pub fn first_ask(limit: usize, sources: usize) -> usize {
    let want = limit + 1;
    (want * 2).div_ceil(sources.max(1)).max(4).min(want)
}

impl LazyMerge {
    pub fn new(plan: &MergedList) -> LazyMerge {
        let sources = plan
            .sources
            .iter()
            .map(|t| (t.clone(), plan.options.clone()))
            .chain(plan.extra.iter().cloned())
            .map(|(target, options)| Source { target, options, entries: Vec::new(), asked: 0, complete: false })
            .collect();
        LazyMerge { plan: plan.clone(), sources, rounds: 0 }
    }

    /// `a` before `b` in the listing's order.
    fn before(&self, a: &str, b: &str) -> bool {
        let o = a.cmp(b);
        if self.plan.reverse {
            o == Ordering::Greater
        } else {
            o == Ordering::Less
        }
    }

    /// The name of the `limit + 1`-th entry read so far in the listing's order, if any.
    fn cut(&self) -> Option<String> {
        let mut names: Vec<&str> = self.sources.iter().flat_map(|s| s.entries.iter().map(|(n, _)| n.as_str())).collect();
        names.sort_unstable();
        names.dedup();
        if self.plan.reverse {
            names.reverse();
        }
        names.get(self.plan.limit).map(|n| n.to_string())
    }

    /// The next round's calls: `(source index, target, list options)`; empty when the page
    /// is known.
    pub fn next_round(&self) -> Vec<(usize, Target, Value)> {
        let want = self.plan.limit + 1;
        let cut = self.cut();
        let last_round = self.rounds + 1 >= MAX_ROUNDS;
        let mut calls = Vec::new();
        for (i, s) in self.sources.iter().enumerate() {
            if s.complete {
                continue;
            }
            let ask = match s.entries.last() {
                None if s.asked == 0 => first_ask(self.plan.limit, self.sources.len()),
                None => continue,
                Some((last, _)) => {
                    let needed = cut.as_deref().is_none_or(|cut| self.before(last, cut));
                    if !needed {
                        continue;
                    }
                    if last_round {
                        want
                    } else {
                        (s.asked * 2).min(want)
                    }
                }
            };
            let mut options = s.options.clone();
            if let Value::Object(members) = &mut options {
                members.insert("limit".into(), Value::num(ask as f64));
                if let Some((last, _)) = s.entries.last() {
                    members.insert("cursor".into(), Value::String(last.clone()));
                }
            }
            calls.push((i, s.target.clone(), options));
        }
        calls
    }

    /// Take source `index`'s answer to its call of this round (`asked`: the limit it asked).
    pub fn take(&mut self, index: usize, asked: usize, page: &Value) -> Result<(), RpcError> {
        let malformed = || RpcError::error("malformed run catalog page");
        let Some(source) = self.sources.get_mut(index) else { return Err(malformed()) };
        let keys = page.get("keys").and_then(Value::as_array).ok_or_else(malformed)?;
        for entry in keys {
            let name = entry.get("name").and_then(Value::as_str).ok_or_else(malformed)?.to_string();
            source.entries.push((name, entry.get("value").cloned()));
        }
        let complete = page.get("list_complete").and_then(Value::as_bool).ok_or_else(malformed)?;
        // A page that is not complete but empty cannot make progress: take it as the end.
        source.complete = complete || keys.is_empty();
        source.asked = asked;
        Ok(())
    }

    /// Count a finished round.
    pub fn end_round(&mut self) {
        self.rounds += 1;
    }

    /// The page: [`merge`] of everything read.
    pub fn page(&self) -> Result<Value, RpcError> {
        let pages: Vec<Value> = self
            .sources
            .iter()
            .map(|s| {
                let keys = s
                    .entries
                    .iter()
                    .map(|(name, value)| {
                        let mut members = vec![("name", Value::String(name.clone()))];
                        if let Some(v) = value {
                            members.push(("value", v.clone()));
                        }
                        Value::object(members)
                    })
                    .collect();
                Value::object([("keys", Value::Array(keys)), ("list_complete", Value::Bool(s.complete))])
            })
            .collect();
        merge(&self.plan, &pages)
    }

    /// Entries read from storage so far, over all sources (tests, docs).
    pub fn entries_read(&self) -> usize {
        self.sources.iter().map(|s| s.entries.len()).sum()
    }
}

/// The `limit` an options object asks (for [`LazyMerge::take`]).
pub fn asked_limit(options: &Value) -> usize {
    options.get("limit").and_then(Value::as_f64).map_or(0, |n| n.max(0.0) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::xorshift;

    /// One sorted source answering `list({limit, cursor?, reverse})` as a catalog shard
    /// does; counts the entries it reads.
    fn answer(names: &[String], options: &Value, read: &mut usize) -> Value {
        let reverse = options.get("reverse").and_then(Value::as_bool).unwrap_or(false);
        let limit = asked_limit(options);
        let cursor = options.get("cursor").and_then(Value::as_str);
        let mut listed: Vec<&String> = names.iter().collect();
        if reverse {
            listed.reverse();
        }
        let after: Vec<&String> = listed
            .into_iter()
            .filter(|n| cursor.is_none_or(|c| if reverse { n.as_str() < c } else { n.as_str() > c }))
            .take(limit + 1)
            .collect();
        *read += after.len();
        let complete = after.len() <= limit;
        let keys =
            after.iter().take(limit).map(|n| Value::object([("name", Value::str(n.as_str())), ("value", Value::str("v"))])).collect();
        Value::object([("keys", Value::Array(keys)), ("list_complete", Value::Bool(complete))])
    }

    fn plan(limit: usize, reverse: bool, cursor: Option<&str>, sources: usize) -> MergedList {
        let mut options =
            vec![("prefix", Value::str("runall:")), ("limit", Value::num(limit as f64 + 1.0)), ("reverse", Value::Bool(reverse))];
        if let Some(c) = cursor {
            options.push(("cursor", Value::str(c)));
        }
        MergedList {
            sources: (0..sources).map(|i| Target::Catalog(format!("run-catalog:v1:{i:02x}"))).collect(),
            options: Value::object(options),
            extra: Vec::new(),
            limit,
            reverse,
            with_values: true,
        }
    }

    /// Runs the rounds over in-memory sources: the page and the entries read.
    fn run(plan: &MergedList, shards: &[Vec<String>]) -> (Value, usize, usize) {
        let mut m = LazyMerge::new(plan);
        let mut read = 0;
        let mut rounds = 0;
        loop {
            let calls = m.next_round();
            if calls.is_empty() {
                return (m.page().unwrap(), read, rounds);
            }
            rounds += 1;
            for (i, _, options) in calls {
                let page = answer(&shards[i], &options, &mut read);
                m.take(i, asked_limit(&options), &page).unwrap();
            }
            m.end_round();
        }
    }

    /// The reference: every source read to `limit + 1`, then merged.
    fn full(plan: &MergedList, shards: &[Vec<String>]) -> (Value, usize) {
        let mut read = 0;
        let pages: Vec<Value> = shards.iter().map(|names| answer(names, &plan.options, &mut read)).collect();
        (merge(plan, &pages).unwrap(), read)
    }

    fn fleet(runs: usize, shards: usize, seed: u64) -> Vec<Vec<String>> {
        let mut next = xorshift(seed);
        let mut out = vec![Vec::new(); shards];
        for i in 0..runs {
            out[next(shards as u64) as usize].push(format!("runall:{:013}:wrun_{i:05}", 1_000_000 + i * 7));
        }
        for s in &mut out {
            s.sort();
        }
        out
    }

    #[test]
    fn pages_equal_a_full_read_and_cost_what_the_page_needs() {
        for (runs, seed) in [(0, 1), (3, 2), (20, 3), (1000, 4), (5000, 5)] {
            let shards = fleet(runs, 16, seed);
            for reverse in [true, false] {
                for limit in [1, 20, 50, 100, 1000] {
                    let p = plan(limit, reverse, None, 16);
                    let (page, read, rounds) = run(&p, &shards);
                    let (want, full_read) = full(&p, &shards);
                    assert_eq!(page, want, "{runs} runs, limit {limit}, reverse {reverse}");
                    assert!(rounds <= MAX_ROUNDS);
                    // Proportional to the page, not to the runs stored.
                    assert!(read <= 3 * (limit + 1) + 16 * 5, "{runs} runs, limit {limit}: read {read} (a full read {full_read})");
                    // Paging on with the cursor gives the same page as a full read.
                    if let Some(cursor) = page.get("cursor").and_then(Value::as_str) {
                        let p2 = plan(limit, reverse, Some(cursor), 16);
                        assert_eq!(run(&p2, &shards).0, full(&p2, &shards).0);
                    }
                }
            }
        }
    }

    /// Skewed sources (all recent runs on one shard) still give the exact page.
    #[test]
    fn skewed_sources() {
        let mut shards = fleet(300, 16, 9);
        shards[3].extend((0..200).map(|i| format!("runall:{:013}:hot_{i:03}", 9_000_000 + i)));
        shards[3].sort();
        for reverse in [true, false] {
            for limit in [10, 50, 250] {
                let p = plan(limit, reverse, None, 16);
                assert_eq!(run(&p, &shards).0, full(&p, &shards).0, "limit {limit}, reverse {reverse}");
            }
        }
        assert_eq!(first_ask(50, 16), 7);
        assert_eq!(first_ask(1000, 16), 126);
        assert_eq!(first_ask(0, 16), 1);
        assert_eq!(first_ask(3, 1), 4);
    }
}
