//! Lifecycle leases between a run DO and the objects that ask it whether the run is
//! expired (the grant itself is `crate::run::lease`): the method names, who may hold a
//! lease and for how long ([`HolderKind`], [`LEASE_MS`], [`CATALOG_LEASE_MS`]), and what a
//! holder knows of runs: the runs it has seen expired and the leases it holds
//! ([`LifecycleCache`]), and the ask that fills them ([`run_is_expired`]). Two kinds of
//! instance hold leases: the QueueDO shards (before a run-guarded queue mutation,
//! `crate::queue::driver`) and the run-catalog shards (before the 0.3 facade's upsert of a
//! `run:`/`runall:` key, `crate::catalog::lease`).
//!
//! Knows no run's state: the grant and its revocation are the run DO's
//! ([`crate::run::lease`]).

#![allow(async_fn_in_trait)] // hosts are single-threaded (wasm, tests): no Send bound wanted

use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap};

use super::calls::RUN_CATALOG_ENV_BINDING;
use super::lifecycle::CATALOG_FENCE_GRACE_MS;
use crate::wire::router::Binding;
use crate::wire::{RpcError, Value};

/// The run DO method asked, and the answer that means "expired".
pub const LIFECYCLE_METHOD: &str = "getLifecycleStatus";
/// The run DO method that answers the status with a lease: `leaseLifecycle(holder,
/// kind?)` → `{status, leaseUntil}` (internal, not on the router's whitelist).
pub const LEASE_METHOD: &str = "leaseLifecycle";
/// The holder method a run DO calls to take back a lease (internal, not routable).
pub const REVOKE_METHOD: &str = "revokeLifecycleLease";
/// Internal probe (tests): the runs whose leases this instance holds.
pub const HELD_METHOD: &str = "heldLifecycleLeases";
pub const EXPIRED: &str = "expired";

/// The `kind` argument of a run-catalog shard's grant.
pub const CATALOG_KIND: &str = "catalog";
/// Longest lease granted to a queue shard. Must stay below the queue's fence compaction
/// delay (330 s).
pub const LEASE_MS: i64 = 60_000;
/// Longest lease granted to a run's catalog shard: a run's status changes (created,
/// started, completed) are seldom more than a few minutes apart. Must stay below the
/// catalog's expiry fence grace (20 min), which refuses what a stale lease lets through.
pub const CATALOG_LEASE_MS: i64 = 300_000;
const _: () = assert!(CATALOG_LEASE_MS < CATALOG_FENCE_GRACE_MS);

/// Who holds a lease, and where it is revoked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HolderKind {
    /// A QueueDO shard (`WORKFLOW_QUEUE`); the run DO stores its leases
    /// (`lifecycle-lease:<holder>`).
    Queue,
    /// The run's catalog shard (`WORKFLOW_RUN_CATALOG`), for the 0.3 facade's run keys
    /// (`crate::catalog::lease`); not stored.
    Catalog,
}

impl HolderKind {
    /// The grant's optional `kind` argument: absent or null for a queue shard.
    pub fn from_arg(kind: Option<&Value>) -> Result<HolderKind, RpcError> {
        match kind {
            None | Some(Value::Null) => Ok(HolderKind::Queue),
            Some(Value::String(k)) if k == CATALOG_KIND => Ok(HolderKind::Catalog),
            Some(_) => Err(RpcError::error(format!("{LEASE_METHOD}: kind must be absent or \"{CATALOG_KIND}\""))),
        }
    }

    /// The longest lease granted to this kind of holder.
    pub fn lease_ms(self) -> i64 {
        match self {
            HolderKind::Queue => LEASE_MS,
            HolderKind::Catalog => CATALOG_LEASE_MS,
        }
    }

    /// The env binding of the holders' namespace.
    pub fn env_binding(self) -> &'static str {
        match self {
            HolderKind::Queue => Binding::Queue.env_name(),
            HolderKind::Catalog => RUN_CATALOG_ENV_BINDING,
        }
    }
}

/// What asking a run DO needs from the holder's environment.
pub trait LifecycleHost {
    /// `WorkflowRunDO(runId).getLifecycleStatus()`.
    async fn lifecycle_status(&self, run_id: &str) -> Result<Value, RpcError>;
    /// `WorkflowRunDO(runId).leaseLifecycle(<this instance's name>)` →
    /// `{status, leaseUntil}`, or `None` when this instance cannot hold leases (it does
    /// not know its own name yet).
    async fn lifecycle_lease(&self, run_id: &str) -> Result<Option<Value>, RpcError>;
    /// The current time (epoch ms).
    fn now(&self) -> i64;
}

/// What this instance knows of runs' lifecycles: runs seen expired, and the leases it
/// holds (both bounded; cleared when full).
#[derive(Debug, Default)]
pub struct LifecycleCache {
    expired: RefCell<BTreeSet<String>>,
    /// runId → lease `until` (epoch ms).
    leases: RefCell<HashMap<String, i64>>,
    /// Revocations received so far: a lease granted while one arrived is not kept (the
    /// revocation may have overtaken the grant's answer).
    revocations: Cell<u64>,
}

/// Most runs a [`LifecycleCache`] remembers as expired, and most leases it holds.
pub const EXPIRED_CACHE_LIMIT: usize = 256;
pub const LEASE_CACHE_LIMIT: usize = 4096;

impl LifecycleCache {
    pub fn contains(&self, run_id: &str) -> bool {
        self.expired.borrow().contains(run_id)
    }
    pub fn insert(&self, run_id: &str) {
        let mut runs = self.expired.borrow_mut();
        if runs.len() >= EXPIRED_CACHE_LIMIT {
            runs.clear();
        }
        runs.insert(run_id.to_string());
        self.leases.borrow_mut().remove(run_id);
    }
    /// Does this instance hold a lease of the run that is still running at `now`?
    pub fn leased(&self, run_id: &str, now: i64) -> bool {
        self.leases.borrow().get(run_id).is_some_and(|until| now < *until)
    }
    fn keep_lease(&self, run_id: &str, until: i64, now: i64) {
        let mut leases = self.leases.borrow_mut();
        if leases.len() >= LEASE_CACHE_LIMIT {
            leases.retain(|_, u| now < *u);
            if leases.len() >= LEASE_CACHE_LIMIT {
                leases.clear();
            }
        }
        leases.insert(run_id.to_string(), until);
    }
    /// The runs this instance holds a running lease of at `now`, sorted.
    pub fn held(&self, now: i64) -> Vec<String> {
        let mut runs: Vec<String> = self.leases.borrow().iter().filter(|(_, u)| now < **u).map(|(r, _)| r.clone()).collect();
        runs.sort();
        runs
    }
    /// The revocations received so far: taken before an ask and handed back with its
    /// answer ([`LifecycleCache::answered`]).
    pub fn epoch(&self) -> u64 {
        self.revocations.get()
    }
    /// What an ask of `run_id` made at `epoch` answered (`lease`: the `{status,
    /// leaseUntil}` of [`LEASE_METHOD`], else the status of [`LIFECYCLE_METHOD`]): keeps a
    /// lease granted while no revocation came in, remembers an expired run, and tells
    /// whether the run is expired.
    pub fn answered(&self, run_id: &str, epoch: u64, lease: bool, answer: &Value, now: i64) -> bool {
        let status = if lease {
            let until = answer.get("leaseUntil").and_then(Value::as_f64);
            if let Some(until) = until.filter(|u| u.is_finite()) {
                if self.revocations.get() == epoch {
                    self.keep_lease(run_id, until as i64, now);
                }
            }
            answer.get("status").unwrap_or(&Value::Null)
        } else {
            answer
        };
        let expired = status.as_str() == Some(EXPIRED);
        if expired {
            self.insert(run_id);
        }
        expired
    }
    /// `revokeLifecycleLease(runId)`: forget the run's lease (and any grant in flight).
    /// Returns whether a lease was held.
    pub fn revoke(&self, run_id: &str) -> bool {
        self.revocations.set(self.revocations.get().wrapping_add(1));
        self.leases.borrow_mut().remove(run_id).is_some()
    }
    /// The answer of [`REVOKE_METHOD`]`(runId)`: `{revoked}`.
    pub fn revoke_answer(&self, args: &[Value]) -> Result<Value, RpcError> {
        match args.first().and_then(Value::as_str) {
            Some(run_id) => Ok(Value::object([("revoked", Value::Bool(self.revoke(run_id)))])),
            None => Err(RpcError::error(format!("{REVOKE_METHOD}: runId must be a string"))),
        }
    }
    /// The answer of [`HELD_METHOD`]: `{runs}`, the runs leased at `now`.
    pub fn held_answer(&self, now: i64) -> Value {
        Value::object([("runs", Value::Array(self.held(now).into_iter().map(Value::String).collect()))])
    }
}

/// A holder's own name (the holder name of its leases), learnt from its first RPC.
#[derive(Debug, Default)]
pub struct HolderName(RefCell<Option<String>>);

impl HolderName {
    /// Remember `name` unless one is known already (or it is empty).
    pub fn learn(&self, name: &str) {
        if self.0.borrow().is_none() && !name.is_empty() {
            *self.0.borrow_mut() = Some(name.to_string());
        }
    }
    pub fn get(&self) -> Option<String> {
        self.0.borrow().clone()
    }
}

/// Is the run expired according to its run DO? Remembers `expired` answers and leases in
/// `cache`.
pub async fn run_is_expired<H: LifecycleHost>(host: &H, cache: &LifecycleCache, run_id: &str) -> Result<bool, RpcError> {
    if cache.contains(run_id) {
        return Ok(true);
    }
    if cache.leased(run_id, host.now()) {
        return Ok(false);
    }
    let epoch = cache.epoch();
    match host.lifecycle_lease(run_id).await? {
        Some(answer) => Ok(cache.answered(run_id, epoch, true, &answer, host.now())),
        None => {
            let status = host.lifecycle_status(run_id).await?;
            Ok(cache.answered(run_id, epoch, false, &status, host.now()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(status: &str, until: f64) -> Value {
        Value::object([("status", Value::str(status)), ("leaseUntil", Value::num(until))])
    }

    /// The step form the run-catalog class uses (an ask made by JavaScript between two
    /// synchronous calls, the epoch carried as the ask's tag): the same rules as
    /// [`run_is_expired`] after its await.
    #[test]
    fn an_answer_keeps_a_lease_only_if_no_revocation_came_in_since_its_epoch() {
        let cache = LifecycleCache::default();
        let epoch = cache.epoch();
        assert!(!cache.answered("wrun_a", epoch, true, &lease("active", 5_000.0), 1_000));
        assert!(cache.leased("wrun_a", 4_999) && !cache.leased("wrun_a", 5_000));
        // A revocation arrives while the next grant is in flight: the grant is not kept.
        let epoch = cache.epoch();
        cache.revoke("wrun_b");
        assert!(!cache.answered("wrun_b", epoch, true, &lease("active", 5_000.0), 1_000));
        assert!(!cache.leased("wrun_b", 1_000), "the overtaken grant was dropped");
        // No lease in the answer (a run that does not exist), a non-finite one, a plain status.
        let epoch = cache.epoch();
        let missing = Value::object([("status", Value::str("missing"))]);
        assert!(!cache.answered("wrun_c", epoch, true, &missing, 1_000));
        assert!(!cache.answered("wrun_c", epoch, true, &lease("active", f64::INFINITY), 1_000));
        assert!(!cache.answered("wrun_c", epoch, false, &Value::str("active"), 1_000));
        assert!(!cache.leased("wrun_c", 1_000));
        // Expired, either way: remembered, never leased.
        assert!(cache.answered("wrun_d", epoch, true, &lease(EXPIRED, 5_000.0), 1_000));
        assert!(cache.answered("wrun_e", epoch, false, &Value::str(EXPIRED), 1_000));
        assert!(cache.contains("wrun_d") && cache.contains("wrun_e"));
        assert!(!cache.leased("wrun_d", 1_000), "an expired run holds no lease");
    }
}
