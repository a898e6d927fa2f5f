//! Lifecycle constants shared by the 0.4 index shards (spec-0.4 `catalog-hooks.md` §1),
//! the 13-digit time keys they order by, and the paged compaction both the run catalog
//! (expiry fences) and the hook shards (claim deadlines) run from their alarm.
//!
//! Knows no shard's records: callers read their own due times.

use crate::store::alarm::Alarm;
use crate::store::{ListOptions, Store};
use crate::wire::RpcError;

/// Longest a fleet RPC may take (5 min).
pub const MAX_FLEET_RPC_TIMEOUT_MS: i64 = 300_000;
/// 3 × 300 000 + 900.
pub const MAX_IDEMPOTENT_RPC_LIFETIME_MS: i64 = 3 * MAX_FLEET_RPC_TIMEOUT_MS + 900;
/// Longest-lived run catalog publication lease: 300 000 + 900 900.
pub const MAX_RUN_INDEX_PUBLICATION_LIFETIME_MS: i64 = MAX_FLEET_RPC_TIMEOUT_MS + MAX_IDEMPOTENT_RPC_LIFETIME_MS;
/// How long a catalog expiry fence outlives the expiry (= the publication lifetime, so
/// every lease issued before the expiry has lapsed when the fence goes).
pub const CATALOG_FENCE_GRACE_MS: i64 = MAX_RUN_INDEX_PUBLICATION_LIFETIME_MS;
/// Lease of a hook token / hook id claim: (3·2+1) × 300 000 + 2 × 900.
pub const HOOK_CLAIM_LEASE_MS: i64 = 7 * MAX_FLEET_RPC_TIMEOUT_MS + 2 * 900;
/// Entries compacted per alarm pass.
pub const LIFECYCLE_COMPACTION_BATCH: usize = 128;
/// After a failed compaction the alarm is set this far ahead.
pub const LIFECYCLE_COMPACTION_RETRY_MS: i64 = 1000;

/// `pad13(ms)`: `max(0, floor(ms))` left-padded with `0` to 13 digits (times past the year
/// 2286 have more digits and would no longer sort; nothing produces them).
pub fn pad13(ms: i64) -> String {
    format!("{:013}", ms.max(0))
}

/// The run catalog publication lease an applyEvent outcome carrying a run grants
/// (`indexPublicationExpiresAt` = now + 1 200 900, spec-0.4 run-do.md §2 step 8).
pub fn publication_expires_at(now: i64) -> i64 {
    now.saturating_add(MAX_RUN_INDEX_PUBLICATION_LIFETIME_MS)
}

/// The alarm a failed compaction pass sets (after its transaction rolled back).
pub fn compaction_retry(now: i64, alarm: &mut Alarm) {
    alarm.set(now.saturating_add(LIFECYCLE_COMPACTION_RETRY_MS));
}

/// Arm the alarm at `at` unless an earlier one is already set (`armAtMost`).
pub fn arm_at_most(alarm: &mut Alarm, at: i64) {
    if alarm.get().is_none_or(|current| at < current) {
        alarm.set(at);
    }
}

/// One compaction pass over a time-ordered index `<prefix><pad13(t)>:…`, in the caller's
/// transaction:
///
/// 1. list the entries due at `now` (keys below `<prefix><pad13(now + 1)>`), at most
///    [`LIFECYCLE_COMPACTION_BATCH`] + 1;
/// 2. hand the first [`LIFECYCLE_COMPACTION_BATCH`] to `compact` (key, value text), which
///    deletes what it decides to;
/// 3. re-arm: at `now + 1` when more were due; otherwise at `max(now + 1, next)` where
///    `next` is the time `due_time` reads from the first remaining entry's value, or
///    clear the alarm when none remain.
///
/// Returns how many entries were handed to `compact`.
pub fn compact_due(
    store: &mut dyn Store,
    prefix: &str,
    now: i64,
    alarm: &mut Alarm,
    due_time: fn(&str) -> Option<i64>,
    mut compact: impl FnMut(&mut dyn Store, &str, &str) -> Result<(), RpcError>,
) -> Result<usize, RpcError> {
    let bound = format!("{prefix}{}", pad13(now.saturating_add(1)));
    let due = store.list(&ListOptions::prefix(prefix).end(bound).limit(LIFECYCLE_COMPACTION_BATCH + 1))?;
    let page = due.len().min(LIFECYCLE_COMPACTION_BATCH);
    for (key, value) in due.iter().take(page) {
        compact(store, key, value)?;
    }
    if due.len() > LIFECYCLE_COMPACTION_BATCH {
        alarm.set(now.saturating_add(1));
        return Ok(page);
    }
    match store.list(&ListOptions::prefix(prefix).limit(1))?.first() {
        None => alarm.delete(),
        Some((key, value)) => {
            // A value we cannot read still has its time in the key; fall back to that.
            let next = due_time(value).or_else(|| key_time(prefix, key)).unwrap_or(now);
            alarm.set(next.max(now.saturating_add(1)));
        }
    }
    Ok(page)
}

/// The 13-digit time of a `<prefix><pad13(t)>:…` key.
pub fn key_time(prefix: &str, key: &str) -> Option<i64> {
    key.strip_prefix(prefix)?.get(..13)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::alarm::AlarmChange;
    use crate::store::MemoryStore;

    #[test]
    fn constants_match_the_spec() {
        assert_eq!(MAX_IDEMPOTENT_RPC_LIFETIME_MS, 900_900);
        assert_eq!(MAX_RUN_INDEX_PUBLICATION_LIFETIME_MS, 1_200_900);
        assert_eq!(CATALOG_FENCE_GRACE_MS, 1_200_900);
        assert_eq!(HOOK_CLAIM_LEASE_MS, 2_101_800);
    }

    #[test]
    fn pad13_and_key_time() {
        assert_eq!(pad13(5), "0000000000005");
        assert_eq!(pad13(-5), "0000000000000");
        assert_eq!(pad13(1_767_323_045_678), "1767323045678");
        assert_eq!(key_time("g:", "g:1767323045678:x"), Some(1_767_323_045_678));
        assert_eq!(key_time("g:", "g:17:x"), None);
    }

    #[test]
    fn arming_keeps_the_earlier_alarm() {
        let mut alarm = Alarm::new(Some(100));
        arm_at_most(&mut alarm, 200);
        assert_eq!(alarm.change(), None);
        arm_at_most(&mut alarm, 50);
        assert_eq!(alarm.change(), Some(AlarmChange::Set(50)));
        let mut unset = Alarm::new(None);
        arm_at_most(&mut unset, 7);
        assert_eq!(unset.get(), Some(7));
    }

    #[test]
    fn paging_and_rearming() {
        let mut store = MemoryStore::new();
        for t in 0..130 {
            store.data.insert(format!("g:{}:k{t:03}", pad13(1000 + t)), format!("{}", 1000 + t).into());
        }
        store.data.insert(format!("g:{}:late", pad13(5000)), "5000".into());
        let parse = |v: &str| v.parse().ok();
        let mut alarm = Alarm::unknown();
        let mut seen = 0;
        let n = compact_due(&mut store, "g:", 2000, &mut alarm, parse, |s, key, _| {
            seen += 1;
            s.delete(key).map(|_| ())
        })
        .unwrap();
        assert_eq!((n, seen), (128, 128));
        assert_eq!(alarm.get(), Some(2001));
        let mut alarm = Alarm::unknown();
        compact_due(&mut store, "g:", 2001, &mut alarm, parse, |s, key, _| s.delete(key).map(|_| ())).unwrap();
        assert_eq!(alarm.get(), Some(5000));
        assert_eq!(store.keys().len(), 1);
        let mut alarm = Alarm::unknown();
        compact_due(&mut store, "g:", 6000, &mut alarm, parse, |s, key, _| s.delete(key).map(|_| ())).unwrap();
        assert_eq!(alarm.change(), Some(AlarmChange::Delete));
    }
}
