//! Queue partitions (issue #54): where a message of a client queue shard lives when the
//! deployment spreads each client shard over several `QueueDO` instances.
//!
//! A client names a queue shard `q:<k>`; with `QUEUE_PARTITIONS` = P it is served by P
//! instances: partition 0 is `q:<k>` itself (so state written before partitions existed is
//! where it always was), partition p ≥ 1 is `q:<k>~<p>`. A message goes to the partition
//! given by FNV-1a of what deduplication is keyed on (its idempotency key, else its message
//! id), so every enqueue of one key meets the same instance: dedup, attempts, leases, dead
//! letters and fences keep their meaning per message. `QUEUE_MAX_INFLIGHT` and
//! `QUEUE_MIN_INFLIGHT` stay deployment-wide: partition p runs its [`share`].
//!
//! Knows nothing of what a partition holds; the fan-out and the merging of answers are the
//! front door's (`crate::partitions`).

use super::shard::fnv1a32;
use crate::wire::js::{to_js_string, truthy};
use crate::wire::Value;

pub use crate::config::MAX_QUEUE_PARTITIONS;
/// Between a client shard's name and a partition's number.
pub const PARTITION_SEPARATOR: char = '~';

/// The instance of partition `p` of client shard `shard`.
pub fn partition_name(shard: &str, p: u32) -> String {
    if p == 0 {
        shard.to_string()
    } else {
        format!("{shard}{PARTITION_SEPARATOR}{p}")
    }
}

/// A queue instance's client shard and partition: `q:0~3` → (`q:0`, 3), `q:0` → (`q:0`, 0).
/// A name whose suffix is not a partition number is partition 0 of itself.
pub fn split_partition(name: &str) -> (&str, u32) {
    match name.rsplit_once(PARTITION_SEPARATOR) {
        Some((shard, p)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && !p.starts_with('0') => {
            p.parse().map_or((name, 0), |p| (shard, p))
        }
        _ => (name, 0),
    }
}

/// What deduplication is keyed on for an `enqueue` request: its idempotency key when it has
/// one (truthy, as the queue reads it), else its message id, as strings.
pub fn dedup_basis(request: Option<&Value>) -> String {
    let member = |name: &str| request.and_then(|r| r.get(name));
    match member("idempotencyKey") {
        Some(key) if truthy(Some(key)) => to_js_string(Some(key)),
        _ => to_js_string(member("messageId")),
    }
}

/// The partition of a message among `count` (at least 1).
pub fn partition_of(basis: &str, count: u32) -> u32 {
    fnv1a32(basis) % count.max(1)
}

/// Partition `p`'s part of a deployment-wide limit: `total` split as evenly as integers
/// allow (the first `total % count` partitions one more), at least 1. The parts sum to
/// `total` whenever `total >= count`, which `Config::queue_partitions` keeps for
/// `QUEUE_MAX_INFLIGHT`.
pub fn share(total: u32, count: u32, p: u32) -> u32 {
    let count = count.max(1);
    (total / count + u32::from(p < total % count)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_partition_zero_is_the_shard() {
        assert_eq!(partition_name("q:0", 0), "q:0");
        assert_eq!(partition_name("q:3", 5), "q:3~5");
        for (shard, p) in [("q:0", 0), ("q:0", 1), ("q:12", 15)] {
            assert_eq!(split_partition(&partition_name(shard, p)), (shard, p));
        }
        for odd in ["q:0~", "q:0~x", "q:0~01", "q:0~-1", "q:0~99999999999"] {
            assert_eq!(split_partition(odd), (odd, 0), "{odd}");
        }
    }

    #[test]
    fn a_key_always_meets_the_same_partition() {
        let with_key = Value::object([("messageId", Value::str("msg_1")), ("idempotencyKey", Value::str("step_a"))]);
        let other_id = Value::object([("messageId", Value::str("msg_2")), ("idempotencyKey", Value::str("step_a"))]);
        assert_eq!(dedup_basis(Some(&with_key)), "step_a");
        assert_eq!(partition_of(&dedup_basis(Some(&with_key)), 4), partition_of(&dedup_basis(Some(&other_id)), 4));
        for empty in [Value::str(""), Value::Null, Value::Bool(false)] {
            let plain = Value::object([("messageId", Value::str("msg_3")), ("idempotencyKey", empty)]);
            assert_eq!(dedup_basis(Some(&plain)), "msg_3");
        }
        assert_eq!(partition_of("anything", 0), 0);
        assert_eq!(partition_of("anything", 1), 0);
        // Spread: 1,000 ids over 4 partitions, none far from a quarter.
        let mut seen = [0u32; 4];
        for i in 0..1000 {
            seen[partition_of(&format!("msg_{i:05}"), 4) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| (180..=320).contains(&n)), "{seen:?}");
    }

    #[test]
    fn shares_keep_the_deployment_wide_limits() {
        for (total, count) in [(128, 4), (20, 3), (5, 5), (1, 1), (7, 7), (128, 16)] {
            let sum: u32 = (0..count).map(|p| share(total, count, p)).sum();
            assert_eq!(sum, total, "{total} over {count}");
        }
        assert_eq!(share(5, 4, 3), 1, "a floor of 5 over 4: 2, 1, 1, 1");
        assert_eq!(share(2, 4, 3), 1, "at least one");
    }
}
