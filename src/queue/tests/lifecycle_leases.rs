//! Lifecycle leases (ours, `crate::run::lease`): a lease saves the run DO hop until it runs
//! out or is revoked, and the shell's synchronous path asks and stores what the
//! asynchronous one does.

use super::run_sim::*;
use super::T0;
use crate::queue::driver::{self, LifecycleCache, QueueHost};
use crate::queue::*;
use crate::testing::block_on;
use crate::wire::Value;

fn enqueue_for(sim: &mut RunSim, id: &str, run: &str) -> String {
    sim.ok("enqueue", vec![delayed(message(id, Some(run)), 3600.0)])
}

#[test]
fn a_lease_saves_the_hop_until_it_runs_out() {
    let mut sim = RunSim::new();
    sim.runs.lease_ms.set(Some(60_000));
    sim.runs.set("wrun_a", "active");
    assert!(enqueue_for(&mut sim, "m1", "wrun_a").contains("\"ok\":true"));
    assert_eq!(sim.runs.calls(), 1);
    for i in 0..5 {
        sim.now += 10_000;
        assert!(enqueue_for(&mut sim, &format!("m{}", i + 2), "wrun_a").contains("\"ok\":true"));
    }
    assert_eq!(sim.runs.calls(), 1, "five enqueues under the lease asked nobody");
    // The synchronous path sees the lease too: nothing left to ask.
    let (expired, unknown) = driver::from_cache(&sim.cache, vec!["wrun_a".into()], sim.now);
    assert!(expired.is_empty() && unknown.is_empty());
    sim.now = T0 + 60_000;
    assert!(enqueue_for(&mut sim, "m9", "wrun_a").contains("\"ok\":true"));
    assert_eq!(sim.runs.calls(), 2, "a lease that ran out is asked for again");
}

#[test]
fn a_revoked_lease_asks_again_and_sees_the_expiry() {
    let mut sim = RunSim::new();
    sim.runs.lease_ms.set(Some(60_000));
    sim.runs.set("wrun_a", "active");
    enqueue_for(&mut sim, "m1", "wrun_a");
    // The run DO expires the run, then revokes before answering its caller.
    sim.runs.set("wrun_a", "expired");
    assert!(sim.cache.revoke("wrun_a"));
    assert!(!sim.cache.revoke("wrun_a"), "a second revocation finds no lease");
    let out = enqueue_for(&mut sim, "m2", "wrun_a");
    assert!(out.contains("RUN_EXPIRED"), "{out}");
    assert_eq!(sim.runs.calls(), 2);
    // Expired is final: no lease, no further hop.
    assert!(enqueue_for(&mut sim, "m3", "wrun_a").contains("RUN_EXPIRED"));
    assert_eq!(sim.runs.calls(), 2);
}

#[test]
fn missing_runs_and_holders_without_a_name_get_no_lease() {
    let mut sim = RunSim::new();
    sim.runs.lease_ms.set(Some(60_000));
    enqueue_for(&mut sim, "m1", "wrun_missing");
    enqueue_for(&mut sim, "m2", "wrun_missing");
    assert_eq!(sim.runs.calls(), 2, "a missing run is asked every time");
    sim.runs.lease_ms.set(None);
    sim.runs.set("wrun_b", "active");
    enqueue_for(&mut sim, "m3", "wrun_b");
    enqueue_for(&mut sim, "m4", "wrun_b");
    assert_eq!(sim.runs.calls(), 4, "without leases every enqueue asks");
}

/// The shell's synchronous path (`driver::known_lifecycle`, the run DO asked by the class
/// between two calls) answers, stores and asks exactly what the asynchronous path
/// (`driver::ask`, then the transaction) does: enqueues naming active, terminal, expired
/// and missing runs, with and without leases, across lease expiries, a run expiring with
/// its revocation, and the queue's own expiry fence.
#[test]
fn enqueue_in_steps_is_enqueue_after_the_ask() {
    for leases in [None, Some(60_000)] {
        let (mut asked, mut steps) = (RunSim::new(), RunSim::new());
        for sim in [&mut asked, &mut steps] {
            sim.runs.lease_ms.set(leases);
            sim.runs.set("wrun_a", "active");
            sim.runs.set("wrun_t", "terminal");
            sim.runs.set("wrun_x", "expired");
        }
        let runs = ["wrun_a", "wrun_t", "wrun_x", "wrun_missing", "wrun_f"];
        for i in 0..60 {
            if i % 7 == 6 {
                asked.now += 25_000;
                steps.now += 25_000;
            }
            if i == 30 {
                // The run DO expires wrun_a and revokes the leases it granted.
                for sim in [&mut asked, &mut steps] {
                    sim.runs.set("wrun_a", "expired");
                    sim.cache.revoke("wrun_a");
                }
            }
            if i == 40 {
                // The queue's own fence for wrun_f (a retention cleanup's expireRun).
                for sim in [&mut asked, &mut steps] {
                    sim.rpc("expireRun", vec![Value::str("wrun_f")]).expect("expireRun");
                }
            }
            let run = runs[i % runs.len()];
            let args = vec![delayed(message(&format!("m{i}"), Some(run)), 3600.0)];
            let (a, b) = (asked.rpc("enqueue", args.clone()), steps.rpc_steps("enqueue", args));
            assert_eq!(a, b, "enqueue {i} naming {run} (leases {leases:?})");
        }
        assert_eq!(asked.store.data, steps.store.data, "leases {leases:?}");
        assert_eq!(asked.alarm, steps.alarm);
        assert_eq!(*asked.runs.calls.borrow(), *steps.runs.calls.borrow(), "the same asks (leases {leases:?})");
        assert_eq!(asked.cache.held(asked.now), steps.cache.held(steps.now));
    }
}

/// A revocation that reaches the holder while its grant is still on the way back (two
/// connections, no order between them): the grant must not be kept.
#[test]
fn a_revocation_overtaking_the_grant_wins() {
    struct Racing<'a> {
        cache: &'a LifecycleCache,
    }
    impl QueueHost for Racing<'_> {
        async fn lifecycle_status(&self, _run_id: &str) -> Result<Value, RpcError> {
            unreachable!("leases are supported")
        }
        async fn lifecycle_lease(&self, run_id: &str) -> Result<Option<Value>, RpcError> {
            // Granted as active, but the run DO expires the run and its revocation is
            // handled here before this answer arrives.
            assert!(!self.cache.revoke(run_id));
            Ok(Some(Value::object([("status", Value::str("active")), ("leaseUntil", Value::num((T0 + 60_000) as f64))])))
        }
        fn now(&self) -> i64 {
            T0
        }
    }
    let cache = LifecycleCache::default();
    let host = Racing { cache: &cache };
    assert!(!block_on(driver::run_is_expired(&host, &cache, "wrun_r")).unwrap());
    assert!(!cache.leased("wrun_r", T0), "the overtaken grant was dropped");
}
