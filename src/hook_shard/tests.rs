//! Behaviour both hook shard classes share, run once per [`Family`], and the
//! `/v1/index/hooks/*` compositions of spec-0.4 `tests.md` (`test/index-do.test.ts`
//! hook items) over the real shard cores.

use super::testing::{hook_json, owner, s, Admission, World, T0};
use crate::protocol::hooks::Family;
use crate::protocol::lifecycle::HOOK_CLAIM_LEASE_MS;
use crate::wire::{RpcError, Value};

const FAMILIES: [Family; 2] = [Family::Token, Family::Id];

fn claimed(id: &str) -> Result<Value, RpcError> {
    Ok(Value::object([("claimed", Value::Bool(true)), ("claimId", s(id))]))
}
fn held_by(holder: &crate::protocol::hooks::Owner) -> Result<Value, RpcError> {
    Ok(Value::object([("claimed", Value::Bool(false)), ("holder", holder.to_value())]))
}
fn stored(yes: bool) -> Result<Value, RpcError> {
    Ok(Value::object([("stored", Value::Bool(yes))]))
}
fn deleted(n: u32) -> Result<Value, RpcError> {
    Ok(Value::object([("deleted", Value::num(n))]))
}
fn err(family: Family, key: &str, what: &str) -> Result<Value, RpcError> {
    Err(RpcError::error(format!("{} {key} {what}", family.label())))
}

#[test]
fn reserve_publish_get_roundtrip_with_encoded_keys() {
    for family in FAMILIES {
        let w = World::new();
        let me = owner("wrun_a", "hook/1");
        w.set_run("wrun_a", "active");
        let key = "key with spaces/ü";
        assert_eq!(w.reserve(family, key, &me, "c1"), claimed("c1"));
        let enc = "key%20with%20spaces%2F%C3%BC";
        let mut expected = vec![format!("claim-deadline:{}:{enc}", T0 + HOOK_CLAIM_LEASE_MS), format!("claim:{enc}")];
        assert_eq!(w.keys(family, key), expected);
        assert_eq!(w.alarm(family, key), Some(T0 + HOOK_CLAIM_LEASE_MS));
        assert_eq!(w.get(family, key), Value::Null, "nothing published yet");

        assert_eq!(w.publish(family, key, &me, "tok", Some("c1")), stored(true));
        expected = vec![format!("{}{enc}", family.record_prefix())];
        assert_eq!(w.keys(family, key), expected, "claim and deadline consumed");
        assert_eq!(w.get(family, key), s(&hook_json(&me, "tok")));
        // A published record holds the key even against its own owner.
        assert_eq!(w.reserve(family, key, &me, "c2"), held_by(&me));
    }
}

#[test]
fn thirty_two_contenders_one_winner_all_see_that_holder() {
    for family in FAMILIES {
        let w = World::new();
        let mut winners = Vec::new();
        for i in 0..32 {
            let contender = owner(&format!("wrun_{i}"), &format!("hook_{i}"));
            let answer = w.reserve(family, "token_same", &contender, &format!("claim_{i}"));
            if answer.as_ref().ok().and_then(|a| a.get("claimed")) == Some(&Value::Bool(true)) {
                winners.push(i);
            } else {
                assert_eq!(answer, held_by(&owner("wrun_0", "hook_0")));
            }
        }
        assert_eq!(winners, [0]);
    }
}

#[test]
fn expired_claims_are_dropped_by_reserve_and_by_publish() {
    for family in FAMILIES {
        let w = World::new();
        let (a, b) = (owner("wrun_a", "h"), owner("wrun_b", "h"));
        w.set_run("wrun_a", "active");
        w.set_run("wrun_b", "active");
        assert_eq!(w.reserve(family, "k", &a, "ca"), claimed("ca"));
        w.now.set(T0 + HOOK_CLAIM_LEASE_MS - 1);
        assert_eq!(w.reserve(family, "k", &b, "cb"), held_by(&a), "still leased");
        w.now.set(T0 + HOOK_CLAIM_LEASE_MS);
        assert_eq!(w.publish(family, "k", &a, "t", Some("ca")), stored(false), "lease lapsed");
        assert!(w.keys(family, "k").is_empty(), "{:?}", w.keys(family, "k"));
        assert_eq!(w.reserve(family, "k", &a, "ca2"), claimed("ca2"));
        w.now.set(w.now.get() + HOOK_CLAIM_LEASE_MS);
        assert_eq!(w.reserve(family, "k", &b, "cb"), claimed("cb"), "an expired claim is treated as absent");
        assert_eq!(w.keys(family, "k").len(), 2, "one claim, one deadline");
    }
}

#[test]
fn publish_checks_owner_claim_and_reservation() {
    for family in FAMILIES {
        let w = World::new();
        let (a, b) = (owner("wrun_a", "ha"), owner("wrun_b", "hb"));
        w.set_run("wrun_a", "active");
        w.set_run("wrun_b", "active");
        assert_eq!(w.publish(family, "k", &a, "t", None), err(family, "k", "has no active reservation"));
        w.reserve(family, "k", &a, "ca").ok();
        assert_eq!(w.publish(family, "k", &b, "t", Some("ca")), err(family, "k", "is reserved by another hook"));
        assert_eq!(w.publish(family, "k", &a, "t", Some("other")), err(family, "k", "is reserved by another hook"));
        assert_eq!(w.publish(family, "k", &a, "t", None), err(family, "k", "is reserved by another hook"));
        assert_eq!(w.publish(family, "k", &a, "t", Some("ca")), stored(true));
        assert_eq!(w.publish(family, "k", &b, "t", Some("ca")), err(family, "k", "is owned by another hook"));
        // The repair path: the owner rewrites its own record without a claim.
        assert_eq!(w.publish(family, "k", &a, "t2", None), stored(true));
        assert_eq!(w.get(family, "k"), s(&hook_json(&a, "t2")));
        // A serialized hook without an owner is refused before anything is written.
        let bad = w.call(family, "k", family.publish_method(), vec![s("k"), s("{}"), a.to_value()]);
        assert_eq!(bad.map_err(|e| e.name), Err("TypeError".to_string()));
        let not_text = w.call(family, "k", family.publish_method(), vec![s("k"), Value::num(1), a.to_value()]);
        assert_eq!(not_text.map_err(|e| e.name), Err("TypeError".to_string()));
        assert_eq!(w.get(family, "k"), s(&hook_json(&a, "t2")));
    }
}

#[test]
fn lookups_hide_hooks_of_non_active_runs_and_late_publishes_release() {
    for family in FAMILIES {
        let w = World::new();
        let a = owner("wrun_a", "ha");
        w.set_run("wrun_a", "active");
        w.reserve(family, "k", &a, "ca").ok();
        assert_eq!(w.publish(family, "k", &a, "t", Some("ca")), stored(true));
        assert_eq!(w.get(family, "k"), s(&hook_json(&a, "t")));
        for status in ["terminal", "expired", "missing"] {
            w.set_run("wrun_a", status);
            assert_eq!(w.get(family, "k"), Value::Null, "{status}");
        }
        assert_eq!(w.get(family, "absent"), Value::Null);

        // A finalize after the run turned terminal publishes nothing and releases the owner's entries.
        assert_eq!(w.publish(family, "k", &a, "t", None), stored(false));
        assert!(w.keys(family, "k").is_empty());
        w.set_run("wrun_b", "active");
        let b = owner("wrun_b", "hb");
        w.reserve(family, "k2", &b, "cb").ok();
        w.set_run("wrun_b", "terminal");
        assert_eq!(w.publish(family, "k2", &b, "t", Some("cb")), stored(false));
        assert!(w.keys(family, "k2").is_empty(), "the claim went with it");
    }
}

#[test]
fn get_ignores_an_empty_record_and_asks_the_owner_run() {
    for family in FAMILIES {
        let w = World::new();
        let a = owner("wrun_a", "ha");
        w.set_run("wrun_a", "active");
        w.reserve(family, "k", &a, "ca").ok();
        w.publish(family, "k", &a, "t", Some("ca")).ok();
        w.run_calls.borrow_mut().clear();
        w.get(family, "k");
        assert_eq!(*w.run_calls.borrow(), ["wrun_a.getLifecycleStatus"]);
        w.run_calls.borrow_mut().clear();
        w.get(family, "nothing");
        assert!(w.run_calls.borrow().is_empty(), "no record, no run DO call");
    }
}

/// The shell serves `get` / `legacyGet` as synchronous steps with the run DO asked between
/// them by its JavaScript class (`driver::get_step`): for every record (published, absent,
/// empty) and run status, the steps ask what the driver's `get` asks and answer what it
/// answers; an ask's error is the read's error, and an answer for another run than the
/// record's current owner is asked for again.
#[test]
fn get_in_steps_is_the_drivers_get() {
    use super::driver::{get_step, GetStep};
    use super::visibility::read_visibility;
    use crate::protocol::hooks::LEGACY_GET;
    use crate::protocol::hop::Args;
    use crate::store::{Store, Stored};
    let step = |w: &World, family: Family, method: &str, key: &str, asked: Option<(&str, &Result<Value, RpcError>)>| {
        let mut objects = w.objects.borrow_mut();
        let object = objects.entry((family.class(), family.shard(key))).or_default();
        let args = [s(key)];
        let visibility = read_visibility(method).expect("a read");
        object.store.in_transaction(|store: &mut dyn Store| get_step(store, family, visibility, Args(&args), asked))
    };
    for family in FAMILIES {
        let a = owner("wrun_a", "ha");
        for method in ["get", LEGACY_GET] {
            for status in ["active", "missing", "terminal", "expired"] {
                let w = World::new();
                w.set_run("wrun_a", "active");
                w.reserve(family, "k", &a, "ca").ok();
                w.publish(family, "k", &a, "t", Some("ca")).ok();
                w.set_run("wrun_a", status);
                w.run_calls.borrow_mut().clear();
                let expected = w.call(family, "k", method, vec![s("k")]);
                assert_eq!(*w.run_calls.borrow(), ["wrun_a.getLifecycleStatus"], "{method} {status}");
                assert_eq!(step(&w, family, method, "k", None), Ok(GetStep::Ask("wrun_a".into())), "{method} {status}");
                let answer = Ok(s(status));
                let got = step(&w, family, method, "k", Some(("wrun_a", &answer)));
                assert_eq!(got.map(|g| GetStep::Answer(g_answer(g))), expected.map(GetStep::Answer), "{method} {status}");
                // An answer for a run that no longer owns the record: asked again.
                assert_eq!(step(&w, family, method, "k", Some(("wrun_b", &answer))), Ok(GetStep::Ask("wrun_a".into())));
                // The ask failed: so does the read.
                let failed = Err(RpcError::error("run DO down"));
                assert_eq!(step(&w, family, method, "k", Some(("wrun_a", &failed))), Err(RpcError::error("run DO down")));
            }
            // Absent and empty records answer null without an ask, as the driver's get.
            let w = World::new();
            assert_eq!(step(&w, family, method, "nothing", None), Ok(GetStep::Answer(Value::Null)));
            let empty = super::keys::record(family, "e");
            w.objects
                .borrow_mut()
                .entry((family.class(), family.shard("e")))
                .or_default()
                .store
                .data
                .insert(empty, Stored::Text(String::new()));
            assert_eq!(w.call(family, "e", method, vec![s("e")]), Ok(Value::Null));
            assert_eq!(step(&w, family, method, "e", None), Ok(GetStep::Answer(Value::Null)));
            assert!(w.run_calls.borrow().is_empty());
        }
        assert_eq!(read_visibility("finalize"), None);
        assert_eq!(read_visibility(family.publish_method()), None);
    }
}

/// The value of an answering step.
fn g_answer(step: super::driver::GetStep) -> Value {
    match step {
        super::driver::GetStep::Answer(v) => v,
        super::driver::GetStep::Ask(run) => panic!("asked again for {run}"),
    }
}

#[test]
fn release_claim_needs_owner_and_claim_id() {
    for family in FAMILIES {
        let w = World::new();
        let (a, b) = (owner("wrun_a", "ha"), owner("wrun_b", "hb"));
        w.reserve(family, "k", &a, "ca").ok();
        assert_eq!(w.release_claim(family, "k", &b, "ca"), Ok(Value::Null));
        assert_eq!(w.release_claim(family, "k", &a, "other"), Ok(Value::Null));
        assert_eq!(w.keys(family, "k").len(), 2);
        assert_eq!(w.release_claim(family, "k", &a, "ca"), Ok(Value::Null));
        assert!(w.keys(family, "k").is_empty(), "claim and deadline gone");
        assert_eq!(w.release_claim(family, "k", &a, "ca"), Ok(Value::Null), "idempotent");
    }
}

#[test]
fn release_batch_is_owner_checked_idempotent_and_bounded() {
    for family in FAMILIES {
        let w = World::new();
        let (a, b) = (owner("wrun_a", "ha"), owner("wrun_b", "hb"));
        w.set_run("wrun_a", "active");
        // Two keys on one shard: find a second key hashing like "k".
        let shard = family.shard("k");
        let other = (0..1000).map(|i| format!("k{i}")).find(|k| family.shard(k) == shard).unwrap_or_default();
        w.reserve(family, "k", &a, "ca").ok();
        w.publish(family, "k", &a, "t", Some("ca")).ok();
        w.reserve(family, &other, &a, "ca2").ok();
        // Not the owner: nothing goes.
        assert_eq!(w.release_batch(family, "k", &[("k", &b), (other.as_str(), &b)]), deleted(0));
        // Record of "k" and claim of `other` (its deadline is not counted).
        assert_eq!(w.release_batch(family, "k", &[("k", &a), (other.as_str(), &a)]), deleted(2));
        assert!(w.keys(family, "k").is_empty(), "{:?}", w.keys(family, "k"));
        assert_eq!(w.release_batch(family, "k", &[("k", &a), (other.as_str(), &a)]), deleted(0), "idempotent");
        assert_eq!(w.release_batch(family, "k", &[]), deleted(0));
        let many: Vec<(String, crate::protocol::hooks::Owner)> = (0..65).map(|i| (format!("k{i}"), a.clone())).collect();
        let refs: Vec<(&str, &crate::protocol::hooks::Owner)> = many.iter().map(|(k, o)| (k.as_str(), o)).collect();
        assert_eq!(w.release_batch(family, "k", &refs), Err(RpcError::error(format!("{} release batch is too large", family.label()))));
        assert_eq!(w.release_batch(family, "k", refs.get(..64).unwrap_or_default()), deleted(0));
        let not_array = w.call(family, "k", "releaseBatch", vec![]);
        assert_eq!(not_array.map_err(|e| e.message), Err("Cannot read properties of undefined (reading 'length')".to_string()));
    }
}

#[test]
fn abandoned_claims_are_compacted_after_the_lease_even_across_restarts() {
    for family in FAMILIES {
        let w = World::new();
        let a = owner("wrun_a", "ha");
        w.reserve(family, "k", &a, "ca").ok();
        w.now.set(T0 + 10);
        let shard = family.shard("k");
        let sibling = (0..1000).map(|i| format!("k{i}")).find(|k| family.shard(k) == shard).unwrap_or_default();
        w.reserve(family, &sibling, &a, "cs").ok();
        assert_eq!(w.alarm(family, "k"), Some(T0 + HOOK_CLAIM_LEASE_MS), "the earlier deadline");
        w.restart();
        assert!(w.fire(family, "k"));
        assert_eq!(
            w.keys(family, "k"),
            [format!("claim-deadline:{}:{sibling}", T0 + 10 + HOOK_CLAIM_LEASE_MS), format!("claim:{sibling}")]
        );
        assert_eq!(w.alarm(family, "k"), Some(T0 + 10 + HOOK_CLAIM_LEASE_MS));
        w.restart();
        assert!(w.fire(family, "k"));
        assert!(w.keys(family, "k").is_empty());
        assert_eq!(w.alarm(family, "k"), None);
        // Another owner can now take the key.
        assert_eq!(w.reserve(family, "k", &owner("wrun_b", "hb"), "cb"), claimed("cb"));
    }
}

#[test]
fn compaction_pages_and_spares_renewed_claims() {
    for family in FAMILIES {
        let w = World::new();
        let a = owner("wrun_a", "ha");
        let shard = family.shard("k");
        let keys: Vec<String> = (0..5000).map(|i| format!("k{i}")).filter(|k| family.shard(k) == shard).take(130).collect();
        assert_eq!(keys.len(), 130);
        for key in &keys {
            w.reserve(family, key, &a, "c").ok();
        }
        // A stale deadline entry whose claim moved on (another claim id) only loses the entry.
        let first = keys.first().cloned().unwrap_or_default();
        w.release_claim(family, &first, &a, "c").ok();
        w.reserve(family, &first, &owner("wrun_b", "hb"), "fresh").ok();
        w.now.set(T0 + HOOK_CLAIM_LEASE_MS);
        assert!(w.fire(family, "k"));
        assert_eq!(w.alarm(family, "k"), Some(T0 + HOOK_CLAIM_LEASE_MS + 1), "more were due: again at once");
        assert!(w.fire(family, "k"));
        assert!(w.keys(family, "k").is_empty(), "{:?}", w.keys(family, "k"));
    }
}

#[test]
fn a_failed_compaction_rearms_a_second_later() {
    for family in FAMILIES {
        let w = World::new();
        w.reserve(family, "k", &owner("wrun_a", "ha"), "c").ok();
        w.now.set(T0 + HOOK_CLAIM_LEASE_MS);
        let name = family.shard("k");
        if let Some(object) = w.objects.borrow_mut().get_mut(&(family.class(), name.clone())) {
            object.store.data.insert("claim:k".into(), "not json".into());
        }
        assert!(w.fire(family, "k"));
        assert_eq!(w.alarm(family, "k"), Some(T0 + HOOK_CLAIM_LEASE_MS + 1000));
        assert_eq!(w.keys(family, "k").len(), 2, "rolled back");
    }
}

#[test]
fn unknown_methods_and_lifecycle_methods_in_the_sync_dispatcher() {
    use crate::protocol::hop::Args;
    use crate::store::alarm::Alarm;
    use crate::store::MemoryStore;
    for family in FAMILIES {
        let mut store = MemoryStore::new();
        let e = super::call(&mut store, family, T0, &mut Alarm::unknown(), "nope", Args(&[])).unwrap_err();
        assert_eq!(e, RpcError::type_error(format!("{}.nope is not a function", family.class())));
        let e = super::call(&mut store, family, T0, &mut Alarm::unknown(), family.publish_method(), Args(&[])).unwrap_err();
        assert_eq!(e.name, "Error");
        assert!(super::visibility::is_lifecycle_checked(family, "get"));
    }
}

// ---- the coordinator compositions (catalog-hooks.md §4) ----------------------------------

#[test]
fn admission_is_token_then_hook_id_and_finalize_publishes_both() {
    let w = World::new();
    let a = owner("wrun_a", "hook_a");
    w.set_run("wrun_a", "active");
    let admission = w.admit("tok", &a, "p1");
    let expected = Admission::Admitted { token_claim_id: Some("p1".into()), hook_id_claim_id: "p1".into() };
    assert_eq!(admission, Ok(expected.clone()));
    assert_eq!(w.finalize("tok", &a, &expected), Ok(()));
    assert_eq!(w.get(Family::Token, "tok"), s(&hook_json(&a, "tok")));
    assert_eq!(w.get(Family::Id, "hook_a"), s(&hook_json(&a, "tok")));
    // Both lookups vanish as soon as the run is terminal.
    w.set_run("wrun_a", "terminal");
    assert_eq!(w.get(Family::Token, "tok"), Value::Null);
    assert_eq!(w.get(Family::Id, "hook_a"), Value::Null);
    // A later finalize publishes nothing.
    assert_eq!(w.finalize("tok", &a, &expected), Ok(()));
    assert!(w.keys(Family::Token, "tok").is_empty(), "the token shard released the owner's record");
    assert_eq!(w.keys(Family::Id, "hook_a"), ["hookid:hook_a"], "stored:false stops before the hook-id shard; still hidden");
    assert_eq!(w.get(Family::Id, "hook_a"), Value::Null);
}

#[test]
fn hook_id_collision_is_refused_before_the_contender_token_is_published() {
    let w = World::new();
    let (a, b) = (owner("wrun_a", "hook_same"), owner("wrun_b", "hook_same"));
    w.set_run("wrun_a", "active");
    w.set_run("wrun_b", "active");
    let first = w.admit("tok_a", &a, "pa").unwrap_or_else(|e| panic!("{e:?}"));
    w.finalize("tok_a", &a, &first).ok();
    assert_eq!(w.admit("tok_b", &b, "pb"), Ok(Admission::Refused(a.to_value())));
    assert!(w.keys(Family::Token, "tok_b").is_empty(), "the contender's token claim was released");
    assert_eq!(w.get(Family::Id, "hook_same"), s(&hook_json(&a, "tok_a")), "the first owner is still found by id");
    // The contender can use the token with another hook id.
    let c = owner("wrun_b", "hook_other");
    let second = w.admit("tok_b", &c, "pc").unwrap_or_else(|e| panic!("{e:?}"));
    assert!(matches!(second, Admission::Admitted { .. }));
    assert_eq!(w.finalize("tok_b", &c, &second), Ok(()));
    assert_eq!(w.get(Family::Token, "tok_b"), s(&hook_json(&c, "tok_b")));
}

#[test]
fn a_failing_hook_id_claim_releases_the_token_claim() {
    let w = World::new();
    let (a, b) = (owner("wrun_a", "hook_a"), owner("wrun_b", "hook_b"));
    *w.failing.borrow_mut() = Some(Family::Id.shard("hook_a"));
    assert_eq!(w.admit("tok", &a, "pa").map_err(|e| e.message), Err(format!("injected failure at {}", Family::Id.shard("hook_a"))));
    *w.failing.borrow_mut() = None;
    assert!(w.keys(Family::Token, "tok").is_empty());
    assert!(matches!(w.admit("tok", &b, "pb"), Ok(Admission::Admitted { .. })), "another owner can reserve");
}

#[test]
fn a_stale_reservation_cannot_finalize_but_the_new_one_can() {
    let w = World::new();
    let a = owner("wrun_a", "hook_a");
    w.set_run("wrun_a", "active");
    let stale = w.admit("tok", &a, "old").unwrap_or_else(|e| panic!("{e:?}"));
    w.release_claim(Family::Token, "tok", &a, "old").ok();
    w.release_claim(Family::Id, "hook_a", &a, "old").ok();
    let fresh = w.admit("tok", &a, "new").unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(w.finalize("tok", &a, &stale), Err(RpcError::error("Hook token tok is reserved by another hook")));
    assert_eq!(w.finalize("tok", &a, &fresh), Ok(()));
    assert_eq!(w.get(Family::Id, "hook_a"), s(&hook_json(&a, "tok")));
}

#[test]
fn after_release_a_delayed_finalize_has_no_reservation_and_the_token_is_free() {
    let w = World::new();
    let (a, b) = (owner("wrun_a", "hook_a"), owner("wrun_b", "hook_b"));
    w.set_run("wrun_a", "active");
    let reservation = w.admit("tok", &a, "pa").unwrap_or_else(|e| panic!("{e:?}"));
    // hooks.release({runId, hooks}) for that one hook.
    assert_eq!(w.release_batch(Family::Token, "tok", &[("tok", &a)]), deleted(1));
    assert_eq!(w.release_batch(Family::Id, "hook_a", &[("hook_a", &a)]), deleted(1));
    assert_eq!(w.finalize("tok", &a, &reservation), Err(RpcError::error("Hook token tok has no active reservation")));
    assert!(w.keys(Family::Token, "tok").is_empty() && w.keys(Family::Id, "hook_a").is_empty(), "no fences accumulate");
    assert!(matches!(w.admit("tok", &b, "pb"), Ok(Admission::Admitted { .. })));
}

#[test]
fn the_same_owner_readmits_its_published_token_for_repair() {
    let w = World::new();
    let a = owner("wrun_a", "hook_a");
    w.set_run("wrun_a", "active");
    let first = w.admit("tok", &a, "p1").unwrap_or_else(|e| panic!("{e:?}"));
    // Token published, hook-id publication lost.
    w.publish(
        Family::Token,
        "tok",
        &a,
        "tok",
        match &first {
            Admission::Admitted { token_claim_id, .. } => token_claim_id.as_deref(),
            Admission::Refused(_) => None,
        },
    )
    .ok();
    assert_eq!(w.get(Family::Id, "hook_a"), Value::Null);
    let again = w.admit("tok", &a, "p2");
    let repair = Admission::Admitted { token_claim_id: None, hook_id_claim_id: "p2".into() };
    assert_eq!(again, Ok(repair.clone()), "HookIdDO replaces its claim under the new id");
    assert_eq!(w.finalize("tok", &a, &repair), Ok(()));
    assert_eq!(w.get(Family::Id, "hook_a"), s(&hook_json(&a, "tok")));
}

#[test]
fn claim_of_names_only_the_owners_unexpired_claim() {
    for family in FAMILIES {
        let w = World::new();
        let (a, b) = (owner("wrun_a", "ha"), owner("wrun_b", "hb"));
        let claim_of = |who: &crate::protocol::hooks::Owner| w.call(family, "k", "claimOf", vec![s("k"), who.to_value()]);
        assert_eq!(claim_of(&a), Ok(Value::Null));
        w.reserve(family, "k", &a, "ca").ok();
        assert_eq!(claim_of(&a), Ok(Value::object([("claimId", s("ca"))])));
        assert_eq!(claim_of(&b), Ok(Value::Null));
        w.now.set(T0 + HOOK_CLAIM_LEASE_MS);
        assert_eq!(claim_of(&a), Ok(Value::Null), "expired");
        assert_eq!(family.facade_methods(), ["claimOf", "legacyReleaseBatch", "legacyGet", "legacyPublish"]);
    }
}

/// `legacyPublish` judges by the lifecycle status the 0.3 facade passes as its fifth
/// argument (read once for both shards) and asks the run DO only without one.
#[test]
fn legacy_publish_takes_the_callers_lifecycle_status() {
    use crate::protocol::hooks::LEGACY_PUBLISH;
    for family in FAMILIES {
        let w = World::new();
        let a = owner("wrun_a", "ha");
        let args = |status: Value| vec![s("k"), s(&hook_json(&a, "t")), a.to_value(), s("legacy"), status];
        // The run DO would say terminal; the caller read it active: published, no ask.
        w.set_run("wrun_a", "terminal");
        w.reserve(family, "k", &a, "legacy").ok();
        assert_eq!(w.call(family, "k", LEGACY_PUBLISH, args(s("active"))), stored(true));
        assert!(w.run_calls.borrow().is_empty(), "{:?}", w.run_calls.borrow());
        // The caller read it terminal: nothing published, the owner's entries released, no ask.
        w.set_run("wrun_a", "active");
        assert_eq!(w.call(family, "k", LEGACY_PUBLISH, args(s("terminal"))), stored(false));
        assert!(w.keys(family, "k").is_empty());
        assert!(w.run_calls.borrow().is_empty());
        // No status (or not a string): the shard asks.
        for status in [Value::Null, Value::num(1)] {
            w.reserve(family, "k", &a, "legacy").ok();
            assert_eq!(w.call(family, "k", LEGACY_PUBLISH, args(status)), stored(true));
            assert_eq!(*w.run_calls.borrow(), ["wrun_a.getLifecycleStatus"]);
            w.run_calls.borrow_mut().clear();
            w.release_batch(family, "k", &[("k", &a)]).ok();
        }
    }
}

/// The shell serves a publication that carries its caller's status synchronously
/// (`driver::publish_with_status`, one buffered call): `legacyPublish` (the 0.3 facade's)
/// and `finalize`/`publish` (the 0.4 coordinator's) give the same answer and the same
/// storage as the driver's `publish` with that status, and as the driver's `publish` that
/// asks the run DO for it, for every status; without a status the shell declines
/// (`driver::passed_status` finds none: the call goes the asynchronous way and asks).
#[test]
fn publish_with_status_is_the_drivers_publish_without_the_ask() {
    use super::driver::{passed_status, publish_with_status};
    use super::visibility::publication_visibility;
    use crate::protocol::hooks::LEGACY_PUBLISH;
    use crate::protocol::hop::Args;
    use crate::store::Store;
    for family in FAMILIES {
        let a = owner("wrun_a", "ha");
        let args = |status: Value| vec![s("k"), s(&hook_json(&a, "t")), a.to_value(), s("claim"), status];
        for method in [LEGACY_PUBLISH, family.publish_method()] {
            let visibility = publication_visibility(family, method).expect("a publication");
            for status in ["active", "missing", "terminal", "expired"] {
                let (asked, driver, sync) = (World::new(), World::new(), World::new());
                for w in [&asked, &driver, &sync] {
                    w.set_run("wrun_a", status);
                    w.reserve(family, "k", &a, "claim").ok();
                }
                let expected = asked.call(family, "k", method, args(Value::Null));
                assert_eq!(*asked.run_calls.borrow(), ["wrun_a.getLifecycleStatus"], "{method} {status}: asked");
                assert_eq!(driver.call(family, "k", method, args(s(status))), expected, "{method} {status}: driver");
                let got = {
                    let mut objects = sync.objects.borrow_mut();
                    let object = objects.get_mut(&(family.class(), family.shard("k"))).expect("reserved shard");
                    let a = args(s(status));
                    let passed = passed_status(Args(&a)).expect("has a status");
                    object
                        .store
                        .in_transaction(|store: &mut dyn Store| publish_with_status(store, family, visibility, T0, passed, Args(&a)))
                };
                assert_eq!(got, expected, "{method} {status}");
                let values = |w: &World| w.objects.borrow().get(&(family.class(), family.shard("k"))).map(|o| o.store.data.clone());
                for w in [&driver, &sync] {
                    assert_eq!(w.keys(family, "k"), asked.keys(family, "k"), "{method} {status}");
                    assert_eq!(values(w), values(&asked), "{method} {status}");
                    assert!(w.run_calls.borrow().is_empty(), "{method} {status}: no ask with a status");
                }
            }
        }
        for status in [Value::Null, Value::num(1)] {
            assert!(passed_status(Args(&args(status))).is_none());
        }
        assert!(passed_status(Args(&args(s("active"))[..4])).is_none());
        assert_eq!(publication_visibility(family, "reserve"), None);
        assert_eq!(publication_visibility(family, "get"), None);
    }
}
