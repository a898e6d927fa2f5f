//! What is particular to HookIdDO: its keys, messages and same-owner `reserve`.

use super::{call, FAMILY};
use crate::config::Config;
use crate::hook_shard::testing::{owner, s, World, T0};
use crate::protocol::hop::{Args, Ctx};
use crate::protocol::lifecycle::HOOK_CLAIM_LEASE_MS;
use crate::store::alarm::Alarm;
use crate::store::MemoryStore;
use crate::wire::{RpcError, Value};

fn claimed(id: &str) -> Result<Value, RpcError> {
    Ok(Value::object([("claimed", Value::Bool(true)), ("claimId", s(id))]))
}

#[test]
fn same_owner_reserve_replaces_the_claim_unless_the_id_is_the_same() {
    let w = World::new();
    let a = owner("wrun_a", "hook_same");
    assert_eq!(w.reserve(FAMILY, "hook_same", &a, "c1"), claimed("c1"));
    w.now.set(T0 + 5);
    assert_eq!(w.reserve(FAMILY, "hook_same", &a, "c1"), claimed("c1"));
    assert_eq!(w.keys(FAMILY, "hook_same")[0], format!("claim-deadline:{}:hook_same", T0 + HOOK_CLAIM_LEASE_MS), "not renewed");
    assert_eq!(w.reserve(FAMILY, "hook_same", &a, "c2"), claimed("c2"));
    assert_eq!(
        w.keys(FAMILY, "hook_same"),
        [format!("claim-deadline:{}:hook_same", T0 + 5 + HOOK_CLAIM_LEASE_MS), "claim:hook_same".to_string()],
        "a fresh lease, the old deadline gone"
    );
    // The old claim id no longer publishes; the new one does.
    w.set_run("wrun_a", "active");
    assert_eq!(w.publish(FAMILY, "hook_same", &a, "t", Some("c1")), Err(RpcError::error("Hook id hook_same is reserved by another hook")));
    assert_eq!(w.publish(FAMILY, "hook_same", &a, "t", Some("c2")), Ok(Value::object([("stored", Value::Bool(true))])));
    assert_eq!(w.keys(FAMILY, "hook_same"), ["hookid:hook_same"]);
}

#[test]
fn names_and_methods() {
    assert_eq!(super::methods(), ["get", "reserve", "publish", "releaseClaim", "releaseBatch"]);
    assert_eq!(FAMILY.shard("hook_same"), "hook-id:v1:19");
    let config = Config::default();
    let ctx = Ctx { now: 1000, name: "hook-id:v1:19", config: &config };
    let mut store = MemoryStore::new();
    let e = call(&mut store, &ctx, &mut Alarm::unknown(), "finalize", Args(&[])).unwrap_err();
    assert_eq!(e, RpcError::type_error("HookIdDO.finalize is not a function"));
}
