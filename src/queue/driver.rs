//! The authoritative expiry checks (spec-0.4 `queue.md` §3): before a run-guarded
//! mutation the queue asks the run's `WorkflowRunDO.getLifecycleStatus()` (a DO-to-DO call,
//! outside the transaction), then the transaction treats the run as expired when that
//! answer was `"expired"` **or** its `expired-run:` fence exists.
//!
//! Generic over [`QueueHost`], so the wasm shell runs it against real Durable Objects and
//! the native tests against a fake run DO.
//!
//! Cost on the hot `enqueue` path: one extra hop per enqueue that names a run. It is
//! skipped when the queue's own fence already refuses the run (no hop needed) and for a
//! run this instance has already seen expired (an expired run never becomes active
//! again; [`ExpiredCache`]). "active" is never cached: the check would no longer be
//! authoritative.

#![allow(async_fn_in_trait)] // hosts are single-threaded (wasm, tests): no Send bound wanted

use std::cell::RefCell;
use std::collections::BTreeSet;

use super::methods::{enqueue_run_id, redrive_run_id};
use super::state::{expired_key, Lifecycle, Row};
use crate::config::Config;
use crate::hop::Args;
use crate::store::Store;
use crate::wire::{RpcError, Value};

/// The run DO method asked, and the answer that means "expired".
pub const LIFECYCLE_METHOD: &str = "getLifecycleStatus";
pub const EXPIRED: &str = "expired";
/// What the shell's lifecycle call throws when the runs namespace is not bound.
pub const MISSING_RUNS_BINDING: &str = "world-celld queue missing WORKFLOW_DB binding";

/// What the checks need from their environment.
pub trait QueueHost {
    /// `WorkflowRunDO(runId).getLifecycleStatus()`.
    async fn lifecycle_status(&self, run_id: &str) -> Result<Value, RpcError>;
}

/// Runs this instance has seen reported `expired` (bounded; cleared when full).
#[derive(Debug, Default)]
pub struct ExpiredCache {
    runs: RefCell<BTreeSet<String>>,
}

/// Most runs an [`ExpiredCache`] remembers.
pub const EXPIRED_CACHE_LIMIT: usize = 256;

impl ExpiredCache {
    pub fn contains(&self, run_id: &str) -> bool {
        self.runs.borrow().contains(run_id)
    }
    pub fn insert(&self, run_id: &str) {
        let mut runs = self.runs.borrow_mut();
        if runs.len() >= EXPIRED_CACHE_LIMIT {
            runs.clear();
        }
        runs.insert(run_id.to_string());
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

/// Split `runs` into those `cache` knows are expired and those still to ask.
pub fn from_cache(cache: &ExpiredCache, runs: Vec<String>) -> (Vec<String>, Vec<String>) {
    runs.into_iter().partition(|r| cache.contains(r))
}

/// Is the run expired according to its run DO? Remembers `expired` answers in `cache`.
pub async fn run_is_expired<H: QueueHost>(host: &H, cache: &ExpiredCache, run_id: &str) -> Result<bool, RpcError> {
    if cache.contains(run_id) {
        return Ok(true);
    }
    let expired = host.lifecycle_status(run_id).await?.as_str() == Some(EXPIRED);
    if expired {
        cache.insert(run_id);
    }
    Ok(expired)
}

/// Ask about every run in `runs`: the [`Lifecycle`] the transaction then uses.
pub async fn ask<H: QueueHost>(host: &H, cache: &ExpiredCache, runs: &[String]) -> Result<Lifecycle, RpcError> {
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
pub async fn check_row<H: QueueHost>(host: &H, cache: &ExpiredCache, row: &Row) -> Result<Lifecycle, RpcError> {
    let Some(run_id) = row.run_id() else { return Ok(Lifecycle::unknown()) };
    Ok(if run_is_expired(host, cache, &run_id).await? { Lifecycle::expired([run_id]) } else { Lifecycle::unknown() })
}
