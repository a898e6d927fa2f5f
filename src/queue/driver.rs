//! The authoritative expiry checks (spec-0.4 `queue.md` §3): before a run-guarded
//! mutation the queue asks the run's `WorkflowRunDO.getLifecycleStatus()` (a DO-to-DO call,
//! outside the transaction), then the transaction treats the run as expired when that
//! answer was `"expired"` **or** its `expired-run:` fence exists.
//!
//! Generic over [`QueueHost`], so the wasm shell runs it against real Durable Objects and
//! the native tests against a fake run DO.
//!
//! Cost on the hot `enqueue` path: asking costs a hop. It is skipped when the queue's own
//! fence already refuses the run, for a run this instance has already seen expired (an
//! expired run never becomes active again), and while this instance holds a **lifecycle
//! lease** of the run: the run DO's promise, revoked before it is broken, that the run
//! will not be expired before the lease's `until` (see `crate::run::lease`). So a run's
//! enqueues on one shard cost one hop per lease (60 s) instead of one each, and the answer
//! stays the run DO's.

#![allow(async_fn_in_trait)] // hosts are single-threaded (wasm, tests): no Send bound wanted

use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap};

use super::methods::{enqueue_run_id, redrive_run_id};
use super::state::{expired_key, Lifecycle, Row};
use crate::config::Config;
use crate::hop::Args;
use crate::store::Store;
use crate::wire::{RpcError, Value};

/// The run DO method asked, and the answer that means "expired".
pub const LIFECYCLE_METHOD: &str = "getLifecycleStatus";
/// The run DO method that answers the status with a lease (internal).
pub const LEASE_METHOD: &str = crate::run::lease::METHOD;
/// The queue method a run DO calls to take back a lease (internal, not routable).
pub const REVOKE_METHOD: &str = "revokeLifecycleLease";
/// Internal probe (tests): the runs whose leases this instance holds.
pub const HELD_METHOD: &str = "heldLifecycleLeases";
pub const EXPIRED: &str = "expired";
/// What the shell's lifecycle call throws when the runs namespace is not bound.
pub const MISSING_RUNS_BINDING: &str = "world-celld queue missing WORKFLOW_DB binding";

/// What the checks need from their environment.
pub trait QueueHost {
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
    /// `revokeLifecycleLease(runId)`: forget the run's lease (and any grant in flight).
    /// Returns whether a lease was held.
    pub fn revoke(&self, run_id: &str) -> bool {
        self.revocations.set(self.revocations.get().wrapping_add(1));
        self.leases.borrow_mut().remove(run_id).is_some()
    }
}

/// The run ids an RPC method must ask the run DOs about before its transaction: the
/// enqueued message's run, or the run of the dead letter being redriven — unless the
/// queue's fence already decides (then the transaction refuses without a hop), or the
/// enqueue fails its configuration check first. Read-only.
pub fn runs_to_check(store: &mut dyn Store, config: &Config, method: &str, args: Args) -> Result<Vec<String>, RpcError> {
    let run = match method {
        "enqueue" if config.max_inflight().is_ok() && config.delivery_timeout_ms().is_ok() => enqueue_run_id(args),
        "redriveDeadLetter" => redrive_run_id(store, args)?,
        _ => None,
    };
    let mut out = Vec::new();
    if let Some(run_id) = run {
        if store.get(&expired_key(&run_id))?.is_none() {
            out.push(run_id);
        }
    }
    Ok(out)
}

/// Split `runs` into those `cache` knows are expired and those still to ask; runs under a
/// lease running at `now` are in neither (they are not expired).
pub fn from_cache(cache: &LifecycleCache, runs: Vec<String>, now: i64) -> (Vec<String>, Vec<String>) {
    runs.into_iter().filter(|r| !cache.leased(r, now)).partition(|r| cache.contains(r))
}

/// Is the run expired according to its run DO? Remembers `expired` answers and leases in
/// `cache`.
pub async fn run_is_expired<H: QueueHost>(host: &H, cache: &LifecycleCache, run_id: &str) -> Result<bool, RpcError> {
    if cache.contains(run_id) {
        return Ok(true);
    }
    if cache.leased(run_id, host.now()) {
        return Ok(false);
    }
    let epoch = cache.revocations.get();
    let status = match host.lifecycle_lease(run_id).await? {
        Some(answer) => {
            let until = answer.get("leaseUntil").and_then(Value::as_f64);
            if let Some(until) = until.filter(|u| u.is_finite()) {
                if cache.revocations.get() == epoch {
                    cache.keep_lease(run_id, until as i64, host.now());
                }
            }
            answer.get("status").cloned().unwrap_or(Value::Null)
        }
        None => host.lifecycle_status(run_id).await?,
    };
    let expired = status.as_str() == Some(EXPIRED);
    if expired {
        cache.insert(run_id);
    }
    Ok(expired)
}

/// Ask about every run in `runs`: the [`Lifecycle`] the transaction then uses.
pub async fn ask<H: QueueHost>(host: &H, cache: &LifecycleCache, runs: &[String]) -> Result<Lifecycle, RpcError> {
    let mut expired = Vec::new();
    for run_id in runs {
        if run_is_expired(host, cache, run_id).await? {
            expired.push(run_id.clone());
        }
    }
    Ok(Lifecycle::expired(expired))
}

/// The check before a delivery, a retry or a 503 rescheduling of `row`: its run's
/// [`Lifecycle`] (unknown for a message without a run). The shell treats a failed call
/// as "not expired" (and logs it): the queue fence is still checked in the transaction
/// and the run DO refuses a late run's events itself, so a run DO outage cannot strand
/// claimed messages.
pub async fn check_row<H: QueueHost>(host: &H, cache: &LifecycleCache, row: &Row) -> Result<Lifecycle, RpcError> {
    let Some(run_id) = row.run_id() else { return Ok(Lifecycle::unknown()) };
    Ok(if run_is_expired(host, cache, &run_id).await? { Lifecycle::expired([run_id]) } else { Lifecycle::unknown() })
}
