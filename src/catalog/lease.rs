//! `upsertRunKey(runId, key, value)` (ours, internal): the 0.3 facade's `putOwned` of a
//! `run:`/`runall:` key, served by the run's catalog shard under a lifecycle lease.
//!
//! The facade must refuse (`{stored:false}`) the key of an expired run, which only the
//! run's DO knows (`getLifecycleStatus()`, spec-0.4 README, the legacy `index` binding).
//! Asking it costs a hop on every call: the 0.3 client writes both run keys at every
//! status change of a run, six calls per run. So the shard asks the way a QueueDO shard
//! does ([`crate::protocol::leases`]): `leaseLifecycle(<shard name>, "catalog")` answers the status
//! and, for a run that exists and is not expired, a lease (≤ 5 min, never past the run's
//! cleanup due time) that the run DO revokes before answering any call that would expire
//! the run sooner ([`crate::run::lease`]). While the shard holds a lease, the upsert is
//! one hop and one transaction, as a `correlation:` key's is.
//!
//! Why a stale lease cannot leak a key (a revocation that failed, or one that raced the
//! grant): it lasts at most 5 minutes past the instant the run's expiry moved. If the run's
//! retention cleanup has already called this shard's `expireRun`, its fence (kept 20 min)
//! refuses the upsert inside [`super::publish::upsert_key`]; if it has not, that
//! `expireRun` deletes the key when it comes. The answer in that window may be
//! `{stored:true}` where asking would have refused: the same race the reference's own
//! check-then-upsert has.
//!
//! Asks nothing itself: the shell asks the run DO between the plan and the upsert.

use crate::protocol::leases::LifecycleCache;

/// The internal method (not on the router's whitelist; the facade's plan names it). Its
/// transaction is the core's `upsertKey` (`crate::facade::UPSERT_KEY`).
pub const UPSERT_RUN_KEY: &str = "upsertRunKey";

/// How a shard serves one [`UPSERT_RUN_KEY`] call, from what it knows of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// The shard holds a running lease: the upsert, at once.
    Upsert,
    /// The run was seen expired (it never becomes active again): `{stored:false}`.
    Refuse,
    /// Ask the run DO first (`leaseLifecycle`), outside any transaction.
    Ask,
}

/// The [`Plan`] for the key of `run_id` at `now`.
pub fn plan(cache: &LifecycleCache, run_id: &str, now: i64) -> Plan {
    if cache.contains(run_id) {
        Plan::Refuse
    } else if cache.leased(run_id, now) {
        Plan::Upsert
    } else {
        Plan::Ask
    }
}
