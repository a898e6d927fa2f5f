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
//!
//! Knows the run DO only through [`QueueHost`].

use super::methods::{enqueue_run_id, redrive_run_id};
use super::state::{expired_key, Lifecycle, Row};
use crate::config::Config;
use crate::protocol::hop::Args;
use crate::store::Store;
use crate::wire::RpcError;

/// What the shell's lifecycle call throws when the runs namespace is not bound.
pub const MISSING_RUNS_BINDING: &str = "world-celld queue missing WORKFLOW_DB binding";

pub use crate::protocol::leases::{
    run_is_expired, LifecycleCache, LifecycleHost as QueueHost, EXPIRED, EXPIRED_CACHE_LIMIT, HELD_METHOD, LEASE_CACHE_LIMIT, LEASE_METHOD,
    LIFECYCLE_METHOD, REVOKE_METHOD,
};

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

/// The [`Lifecycle`] a run-guarded call's transaction uses, when what this instance knows
/// decides every run `method` must check ([`runs_to_check`]): runs it has seen expired or
/// holds a running lease of at `now`, and `answered` (a run its class has just asked about,
/// and whether it is expired; the answer already taken by [`LifecycleCache::answered`]).
/// Otherwise `Err` with the first run still to ask. The step form of [`ask`], for the
/// shell's synchronous path (the class asks between the steps). Read-only.
pub fn known_lifecycle(
    store: &mut dyn Store,
    config: &Config,
    cache: &LifecycleCache,
    method: &str,
    args: Args,
    now: i64,
    answered: Option<(&str, bool)>,
) -> Result<Result<Lifecycle, String>, RpcError> {
    let runs = runs_to_check(store, config, method, args)?;
    let (mut expired, unknown) = from_cache(cache, runs, now);
    for run_id in unknown {
        match answered {
            Some((asked, is_expired)) if asked == run_id => {
                if is_expired {
                    expired.push(run_id);
                }
            }
            _ => return Ok(Err(run_id)),
        }
    }
    Ok(Ok(Lifecycle::expired(expired)))
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
