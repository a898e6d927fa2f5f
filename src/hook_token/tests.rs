//! What is particular to HookTokenDO: its keys, messages and same-owner `reserve`.

use super::{call, FAMILY};
use crate::config::Config;
use crate::hook_shard::testing::{owner, s, World, T0};
use crate::protocol::hop::{Args, Ctx};
use crate::protocol::lifecycle::HOOK_CLAIM_LEASE_MS;
use crate::store::alarm::Alarm;
use crate::store::MemoryStore;
use crate::wire::{RpcError, Value};

#[test]
fn same_owner_reserve_keeps_the_claim_and_its_lease() {
    let w = World::new();
    let a = owner("wrun_a", "h");
    assert_eq!(w.reserve(FAMILY, "tok", &a, "c1").ok().and_then(|v| v.get("claimId").cloned()), Some(s("c1")));
    w.now.set(T0 + 5);
    let again = w.reserve(FAMILY, "tok", &a, "c2");
    assert_eq!(again, Ok(Value::object([("claimed", Value::Bool(true)), ("claimId", s("c1"))])));
    assert_eq!(w.keys(FAMILY, "tok"), [format!("claim-deadline:{}:tok", T0 + HOOK_CLAIM_LEASE_MS), "claim:tok".to_string()]);
}

#[test]
fn keys_and_messages() {
    let w = World::new();
    let a = owner("wrun_a", "h");
    w.set_run("wrun_a", "active");
    w.reserve(FAMILY, "t:1", &a, "c").ok();
    w.publish(FAMILY, "t:1", &a, "t:1", Some("c")).ok();
    assert_eq!(w.keys(FAMILY, "t:1"), ["hook:t%3A1"]);
    let e = w.publish(FAMILY, "t:1", &owner("wrun_a", "x"), "t:1", None);
    assert_eq!(e, Err(RpcError::error("Hook token t:1 is owned by another hook")));
    assert_eq!(super::methods(), ["get", "reserve", "finalize", "releaseClaim", "releaseBatch"]);
}

#[test]
fn the_per_do_dispatcher_reads_the_clock_from_ctx() {
    let config = Config::default();
    let ctx = Ctx { now: 1000, name: "hook-token:v1:11", config: &config };
    let mut store = MemoryStore::new();
    let mut alarm = Alarm::new(None);
    let args = [s("token_same"), owner("wrun_a", "h").to_value(), s("c")];
    assert!(call(&mut store, &ctx, &mut alarm, "reserve", Args(&args)).is_ok());
    assert_eq!(alarm.get(), Some(1000 + HOOK_CLAIM_LEASE_MS));
    assert!(super::alarm(&mut store, 1000 + HOOK_CLAIM_LEASE_MS, &mut Alarm::unknown()).is_ok());
    assert!(store.keys().is_empty());
}
