//! What an operator watches of one queue shard's deliveries (`GET /v1/admin/queues`):
//! deliveries, failures, refusals and dead letters per minute over the last
//! [`MINUTES`] minutes, failures by status, and answer latency (p50, p95) per kind of
//! delivery (workflow queue name and path).
//!
//! Kept in the instance's memory, fed by the shell as each delivery settles; a fresh
//! instance starts from zero (the health answer says since when: `since`). Bounded: at most
//! [`MINUTES`] buckets, [`MAX_KINDS`] kinds of [`SAMPLES`] answer times each, and
//! [`MAX_STATUSES`] failure labels, whatever the traffic.
//!
//! Knows nothing of storage, HTTP or the platform.

use std::collections::{BTreeMap, VecDeque};

use crate::wire::Value;

/// Minutes of per-minute counts kept.
pub const MINUTES: usize = 15;
/// Kinds of delivery whose latency is kept; the least recently answered one makes room.
pub const MAX_KINDS: usize = 32;
/// Answer times kept per kind (the most recent).
pub const SAMPLES: usize = 256;
/// Distinct failure labels counted; more are counted as `other`.
pub const MAX_STATUSES: usize = 16;

const MINUTE_MS: i64 = 60_000;

/// How one delivery ended, as the health counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Counted {
    /// Answered 2xx or a permanent status: the app took it (its answer time is sampled).
    Delivered,
    /// The runtime's `503 {timeoutSeconds}` (a workflow waiting): taken, due again later; not
    /// an answer time worth sampling (it comes back at once).
    Deferred,
    /// Refused with a 429: due again, no attempt consumed.
    Refused,
    /// Failed with this label (`"500"`, `"transport"`, …); `dead` when it was the last attempt.
    Failed { label: String, dead: bool },
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Minute {
    at: i64,
    delivered: u64,
    failed: u64,
    refused: u64,
    dead_lettered: u64,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Kind {
    count: u64,
    samples: VecDeque<i64>,
    last: i64,
}

/// One shard instance's delivery counters.
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    since: i64,
    minutes: VecDeque<Minute>,
    refused: u64,
    dead_lettered: u64,
    failures: BTreeMap<String, u64>,
    kinds: BTreeMap<String, Kind>,
}

impl Metrics {
    /// Counting from `now`.
    pub fn new(now: i64) -> Metrics {
        Metrics { since: now, minutes: VecDeque::new(), refused: 0, dead_lettered: 0, failures: BTreeMap::new(), kinds: BTreeMap::new() }
    }

    fn minute(&mut self, now: i64) -> &mut Minute {
        let at = now - now.rem_euclid(MINUTE_MS);
        if self.minutes.back().is_none_or(|m| m.at < at) {
            self.minutes.push_back(Minute { at, ..Minute::default() });
            while self.minutes.len() > MINUTES {
                self.minutes.pop_front();
            }
        }
        // A clock that went back counts in the newest minute.
        self.minutes.back_mut().expect("a minute was just pushed")
    }

    /// One delivery of `kind` answered at `now` after `took_ms`, ending as `ended`.
    pub fn record(&mut self, now: i64, kind: &str, took_ms: i64, ended: &Counted) {
        let minute = self.minute(now);
        match ended {
            Counted::Delivered | Counted::Deferred => minute.delivered += 1,
            Counted::Refused => minute.refused += 1,
            Counted::Failed { dead, .. } => {
                minute.failed += 1;
                if *dead {
                    minute.dead_lettered += 1;
                }
            }
        }
        match ended {
            Counted::Delivered => self.sample(now, kind, took_ms),
            Counted::Deferred => {}
            Counted::Refused => self.refused += 1,
            Counted::Failed { label, dead } => {
                self.dead_lettered += u64::from(*dead);
                let label = if self.failures.contains_key(label) || self.failures.len() < MAX_STATUSES { label.as_str() } else { "other" };
                *self.failures.entry(label.to_string()).or_insert(0) += 1;
            }
        }
    }

    fn sample(&mut self, now: i64, kind: &str, took_ms: i64) {
        if !self.kinds.contains_key(kind) && self.kinds.len() >= MAX_KINDS {
            let oldest = self.kinds.iter().min_by_key(|(_, k)| k.last).map(|(name, _)| name.clone());
            if let Some(oldest) = oldest {
                self.kinds.remove(&oldest);
            }
        }
        let k = self.kinds.entry(kind.to_string()).or_default();
        k.count += 1;
        k.last = now;
        k.samples.push_back(took_ms.max(0));
        if k.samples.len() > SAMPLES {
            k.samples.pop_front();
        }
    }

    /// The `deliveries` member of the health answer at `now`: the per-minute counts of the
    /// last [`MINUTES`] minutes (oldest first, minutes without a delivery included as
    /// zeros), the totals since [`Metrics::new`], and each kind's answer times.
    pub fn snapshot(&self, now: i64) -> Value {
        let current = now - now.rem_euclid(MINUTE_MS);
        let first = current - (MINUTES as i64 - 1) * MINUTE_MS;
        let minutes = (0..MINUTES as i64)
            .map(|i| {
                let at = first + i * MINUTE_MS;
                let m = self.minutes.iter().find(|m| m.at == at).cloned().unwrap_or_default();
                Value::object([
                    ("at", Value::num(at as f64)),
                    ("delivered", Value::num(m.delivered as f64)),
                    ("failed", Value::num(m.failed as f64)),
                    ("refused", Value::num(m.refused as f64)),
                    ("deadLettered", Value::num(m.dead_lettered as f64)),
                ])
            })
            .collect();
        let failures = self.failures.iter().map(|(label, n)| (label.clone(), Value::num(*n as f64))).collect();
        let mut kinds: Vec<(&String, &Kind)> = self.kinds.iter().collect();
        kinds.sort_by(|a, b| b.1.count.cmp(&a.1.count).then_with(|| a.0.cmp(b.0)));
        let kinds = kinds
            .into_iter()
            .map(|(name, k)| {
                let mut sorted: Vec<i64> = k.samples.iter().copied().collect();
                sorted.sort_unstable();
                Value::object([
                    ("kind", Value::str(name.as_str())),
                    ("count", Value::num(k.count as f64)),
                    ("p50Ms", percentile(&sorted, 50).map_or(Value::Null, |v| Value::num(v as f64))),
                    ("p95Ms", percentile(&sorted, 95).map_or(Value::Null, |v| Value::num(v as f64))),
                ])
            })
            .collect();
        Value::object([
            ("since", Value::num(self.since as f64)),
            ("minutes", Value::Array(minutes)),
            ("refused", Value::num(self.refused as f64)),
            ("deadLettered", Value::num(self.dead_lettered as f64)),
            ("failuresByStatus", Value::Object(failures)),
            ("kinds", Value::Array(kinds)),
        ])
    }
}

/// The nearest-rank `p`th percentile of `sorted` (ascending), `None` when empty.
pub fn percentile(sorted: &[i64], p: usize) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(label: &str, dead: bool) -> Counted {
        Counted::Failed { label: label.into(), dead }
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50), Some(50));
        assert_eq!(percentile(&v, 95), Some(95));
        assert_eq!(percentile(&[7], 95), Some(7));
        assert_eq!(percentile(&[], 50), None);
    }

    #[test]
    fn counts_per_minute_and_in_total() {
        let t0 = 10 * MINUTE_MS + 5;
        let mut m = Metrics::new(t0);
        m.record(t0, "q flow", 100, &Counted::Delivered);
        m.record(t0 + 1, "q flow", 300, &Counted::Delivered);
        m.record(t0 + 2, "q flow", 1, &Counted::Refused);
        m.record(t0 + 3, "q flow", 1, &Counted::Deferred);
        m.record(t0 + MINUTE_MS, "q step", 1, &failed("500", false));
        m.record(t0 + MINUTE_MS, "q step", 1, &failed("500", true));
        m.record(t0 + MINUTE_MS, "q step", 1, &failed("transport", false));
        let s = m.snapshot(t0 + MINUTE_MS);
        let minutes = s.get("minutes").and_then(Value::as_array).unwrap();
        assert_eq!(minutes.len(), MINUTES);
        let last = &minutes[MINUTES - 1];
        let prev = &minutes[MINUTES - 2];
        let n = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64).unwrap();
        assert_eq!((n(prev, "delivered"), n(prev, "refused"), n(prev, "failed")), (3.0, 1.0, 0.0));
        assert_eq!((n(last, "failed"), n(last, "deadLettered")), (3.0, 1.0));
        assert_eq!(n(last, "at"), (11 * MINUTE_MS) as f64);
        assert_eq!(n(&s, "refused"), 1.0);
        assert_eq!(n(&s, "deadLettered"), 1.0);
        let failures = s.get("failuresByStatus").unwrap();
        assert_eq!((n(failures, "500"), n(failures, "transport")), (2.0, 1.0));
        let kinds = s.get("kinds").and_then(Value::as_array).unwrap();
        assert_eq!(kinds.len(), 1, "only answered deliveries have a latency");
        assert_eq!((n(&kinds[0], "count"), n(&kinds[0], "p50Ms"), n(&kinds[0], "p95Ms")), (2.0, 100.0, 300.0));
        // Long after, the old minutes are gone.
        let later = m.snapshot(t0 + 60 * MINUTE_MS);
        let minutes = later.get("minutes").and_then(Value::as_array).unwrap();
        assert!(minutes.iter().all(|m| n(m, "delivered") == 0.0 && n(m, "failed") == 0.0));
    }

    #[test]
    fn bounded_whatever_the_traffic() {
        let mut m = Metrics::new(0);
        for i in 0..1000i64 {
            m.record(i * 1000, &format!("kind {}", i % 100), i, &Counted::Delivered);
            m.record(i * 1000, "k", 1, &failed(&format!("{}", 400 + i), false));
        }
        assert!(m.minutes.len() <= MINUTES);
        assert_eq!(m.kinds.len(), MAX_KINDS);
        assert!(m.kinds.values().all(|k| k.samples.len() <= SAMPLES));
        assert_eq!(m.failures.len(), MAX_STATUSES + 1, "the others count as `other`");
        assert_eq!(m.failures.get("other"), Some(&(1000 - MAX_STATUSES as u64)));
        // The most recently answered kinds are kept.
        assert!(m.kinds.contains_key("kind 99"));
    }
}
