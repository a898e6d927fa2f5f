//! The coordinator's seven operations over the real catalog and hook shard cores (the
//! in-memory fleet, `facade::testing`), their JavaScript errors and the one-hop plan.

use super::*;
use crate::facade::testing::Fleet;
use crate::hook_shard::testing::{block_on, hook_json, owner, s, T0};
use crate::protocol::hooks::Family;
use crate::protocol::lifecycle::MAX_RUN_INDEX_PUBLICATION_LIFETIME_MS as LEASE;

const UUID_A: &str = "11111111-1111-4111-8111-111111111111";
const UUID_B: &str = "22222222-2222-4222-8222-222222222222";

fn op(f: &Fleet, op: IndexOp, args: Vec<Value>) -> Result<Value, RpcError> {
    block_on(call(f, op, &args, UUID_A))
}

fn op_with(f: &Fleet, op: IndexOp, args: Vec<Value>, claim: &str) -> Result<Value, RpcError> {
    block_on(call(f, op, &args, claim))
}

fn run(run_id: &str, workflow: &str, created_at: i64) -> Value {
    Value::object([
        ("runId", s(run_id)),
        ("workflowName", s(workflow)),
        ("status", s("pending")),
        ("createdAt", Value::date(created_at)),
        ("input", Value::Bytes(vec![1, 2, 3])),
    ])
}

fn meta(run_id: &str) -> Value {
    s(&format!(r#"{{"runId":"{run_id}","status":"pending"}}"#))
}

fn stored(b: bool) -> Result<Value, RpcError> {
    Ok(Value::object([("stored", Value::Bool(b))]))
}

fn commit(f: &Fleet, run_id: &str, workflow: &str, created_at: i64) -> Result<Value, RpcError> {
    let lease = Value::num((f.world.now.get() + LEASE) as f64);
    op(f, IndexOp::RunsCommit, vec![run(run_id, workflow, created_at), meta(run_id), lease])
}

fn names(page: &Value) -> Vec<String> {
    page.get("keys")
        .and_then(Value::as_array)
        .map_or_else(Vec::new, |keys| keys.iter().filter_map(|k| k.get("name").and_then(Value::as_str).map(str::to_string)).collect())
}

fn type_error(message: &str) -> Result<Value, RpcError> {
    Err(RpcError::type_error(message))
}

#[test]
fn operations_by_path_segments_verbatim() {
    assert_eq!(IndexOp::parse("runs", "list"), Some(IndexOp::RunsList));
    assert_eq!(IndexOp::parse("hooks", "release-reservation"), Some(IndexOp::HooksReleaseReservation));
    for (domain, name) in [("runs", "get"), ("foo", "list"), ("hooks", "get"), ("Runs", "list"), ("runs", "li%73t"), ("runs.list", "")] {
        assert_eq!(IndexOp::parse(domain, name), None, "{domain}.{name}");
    }
    for o in IndexOp::ALL {
        assert_eq!(IndexOp::from_name(o.name()), Some(o));
    }
}

#[test]
fn claim_ids_are_v4_uuids() {
    let id = uuid_v4([0xff; 16]);
    assert_eq!(id, "ffffffff-ffff-4fff-bfff-ffffffffffff");
    assert_eq!(uuid_v4([0; 16]), "00000000-0000-4000-8000-000000000000");
}

#[test]
fn commit_is_one_hop_to_the_runs_catalog_shard() {
    let args = vec![run("wrun_same", "wf-a", 1_767_323_045_000), meta("wrun_same"), Value::num(5)];
    let call = plan(IndexOp::RunsCommit, &args).expect("one hop");
    assert_eq!(call.target, Target::Catalog("run-catalog:v1:0e".into()));
    assert_eq!(call.method, "upsertRun");
    assert_eq!(
        call.args,
        vec![
            s("wrun_same"),
            Value::Array(vec![s("run:wf-a:1767323045000:wrun_same"), s("runall:1767323045000:wrun_same")]),
            meta("wrun_same"),
            Value::num(5)
        ]
    );
    assert_eq!(plan(IndexOp::RunsList, &[]), None);
    assert_eq!(IndexOp::ALL.into_iter().filter(|o| has_plan(*o)).collect::<Vec<_>>(), [IndexOp::RunsCommit]);
    assert_eq!(plan(IndexOp::RunsCommit, &[Value::Null]), None, "the error is the asynchronous path's");
    // Early dates are zero-padded to 13 digits.
    let early = commit_call(&[run("r", "w", 946_684_800_000)]).map(|c| c.args[1].clone());
    assert_eq!(early, Ok(Value::Array(vec![s("run:w:0946684800000:r"), s("runall:0946684800000:r")])));
}

#[test]
fn commit_leases_and_errors() {
    let f = Fleet::new();
    let now = f.world.now.get();
    let at = |lease: Value| op(&f, IndexOp::RunsCommit, vec![run("wrun_1", "wf", T0), meta("wrun_1"), lease]);
    assert_eq!(at(Value::num(946_684_800_000.0)), stored(false), "a lease in the past");
    assert_eq!(at(Value::num((now + LEASE + 1) as f64)), stored(false), "beyond now + 1200900");
    assert_eq!(at(s("123")), stored(false), "not a number");
    assert_eq!(op(&f, IndexOp::RunsCommit, vec![run("wrun_1", "wf", T0), meta("wrun_1")]), stored(false), "no lease");
    assert_eq!(at(Value::num((now + LEASE) as f64)), stored(true));
    assert_eq!(
        op(&f, IndexOp::RunsCommit, vec![Value::Null, meta("x"), Value::num(1)]),
        type_error("Cannot read properties of null (reading 'runId')")
    );
    assert_eq!(op(&f, IndexOp::RunsCommit, vec![]), type_error("Cannot read properties of undefined (reading 'runId')"));
    let no_date = Value::object([("runId", s("r")), ("workflowName", s("w"))]);
    assert_eq!(op(&f, IndexOp::RunsCommit, vec![no_date]), type_error("Cannot read properties of undefined (reading 'getTime')"));
}

#[test]
fn list_merges_every_shard_with_values_in_utf8_order() {
    let f = Fleet::new();
    for (i, id) in ["wrun_a", "wrun_b", "wrun_c", "wrun_é", "wrun_z"].iter().enumerate() {
        assert_eq!(commit(&f, id, if i % 2 == 0 { "wf-a" } else { "wf-b" }, T0 + i as i64), stored(true), "{id}");
    }
    f.calls.borrow_mut().clear();
    let page = op(&f, IndexOp::RunsList, vec![Value::object([("prefix", s("runall:"))])]).unwrap_or(Value::Null);
    assert_eq!(f.calls.borrow().len(), 16, "one call per catalog shard");
    assert_eq!(names(&page).len(), 5);
    assert_eq!(page.get("list_complete"), Some(&Value::Bool(true)));
    assert_eq!(page.get("cursor"), None);
    let first = page.get("keys").and_then(Value::as_array).and_then(|k| k.first()).cloned().unwrap_or(Value::Null);
    assert_eq!(first.get("value"), Some(&meta("wrun_a")), "entries carry their values");

    let by_byte = op(&f, IndexOp::RunsList, vec![Value::object([("prefix", s("run:wf-a:")), ("reverse", Value::Bool(true))])]);
    assert_eq!(
        by_byte.map(|p| names(&p)),
        Ok(vec![format!("run:wf-a:{}:wrun_z", T0 + 4), format!("run:wf-a:{}:wrun_c", T0 + 2), format!("run:wf-a:{T0}:wrun_a")])
    );
    // limit 0 and -1 clamp to 1; 2.5 floors to 2; paging with the cursor is gap-free.
    for limit in [0.0, -1.0] {
        let page =
            op(&f, IndexOp::RunsList, vec![Value::object([("prefix", s("runall:")), ("limit", Value::num(limit))])]).unwrap_or(Value::Null);
        assert_eq!((names(&page).len(), page.get("list_complete")), (1, Some(&Value::Bool(false))), "{limit}");
    }
    let mut seen = Vec::new();
    let mut cursor: Option<Value> = None;
    loop {
        let mut options = vec![("prefix", s("runall:")), ("limit", Value::num(2.5))];
        if let Some(c) = cursor.take() {
            options.push(("cursor", c));
        }
        let page = op(&f, IndexOp::RunsList, vec![Value::object(options)]).unwrap_or(Value::Null);
        seen.extend(names(&page));
        match page.get("cursor") {
            Some(c) => cursor = Some(c.clone()),
            None => break,
        }
    }
    assert_eq!(seen.len(), 5);
    // null and missing options list everything.
    for args in [vec![], vec![Value::Null], vec![Value::object::<&str>([])]] {
        assert_eq!(op(&f, IndexOp::RunsList, args).map(|p| names(&p).len()), Ok(10));
    }
}

#[test]
fn expire_fences_the_catalog_and_releases_hooks() {
    let f = Fleet::new();
    assert_eq!(commit(&f, "wrun_x", "wf", T0), stored(true));
    let me = owner("wrun_x", "hook_x");
    f.world.set_run("wrun_x", "active");
    let admitted = op(&f, IndexOp::HooksReserve, vec![s("tok_x"), me.to_value()]).unwrap_or(Value::Null);
    assert_eq!(admitted.get("admitted"), Some(&Value::Bool(true)));
    let keys = Value::Array(vec![s(&format!("runall:{T0}:wrun_x")), s(&format!("run:wf:{T0}:wrun_x"))]);
    let hooks = Value::Array(vec![Value::object([("hookId", s("hook_x")), ("token", s("tok_x"))])]);
    let request = Value::object([("runId", s("wrun_x")), ("keys", keys.clone()), ("hooks", hooks), ("expiredAt", Value::num(1))]);
    assert_eq!(op(&f, IndexOp::RunsExpire, vec![request.clone()]), Ok(Value::object([("deleted", Value::num(4))])), "2 keys, 2 claims");
    assert_eq!(op(&f, IndexOp::RunsExpire, vec![request]), Ok(Value::object([("deleted", Value::num(0))])));
    assert_eq!(commit(&f, "wrun_x", "wf", T0), stored(false), "behind the fence");
    let two_keys_wanted = Value::object([
        ("runId", s("wrun_9")),
        ("keys", Value::Array(vec![])),
        ("hooks", Value::Array(vec![Value::object([("hookId", s("h-x")), ("token", s("tok-x"))])])),
        ("expiredAt", Value::num(1)),
    ]);
    assert_eq!(op(&f, IndexOp::RunsExpire, vec![two_keys_wanted]), Err(RpcError::error("Run catalog expiry requires exactly two keys")));
    assert_eq!(op(&f, IndexOp::RunsExpire, vec![]), type_error("Cannot read properties of undefined (reading 'runId')"));
    let no_hooks = Value::object([("runId", s("wrun_9")), ("keys", keys), ("expiredAt", Value::num(1))]);
    assert_eq!(op(&f, IndexOp::RunsExpire, vec![no_hooks]), type_error("values is not iterable"));
}

#[test]
fn reserve_finalize_and_read_back() {
    let f = Fleet::new();
    let (a, b) = (owner("wrun_a", "hook_a"), owner("wrun_b", "hook_b"));
    f.world.set_run("wrun_a", "active");
    f.world.set_run("wrun_b", "active");
    let first = op_with(&f, IndexOp::HooksReserve, vec![s("tok"), a.to_value()], UUID_A);
    let reservation =
        Value::object([("claimId", s(&format!("{UUID_A}:{UUID_A}"))), ("tokenClaimId", s(UUID_A)), ("hookIdClaimId", s(UUID_A))]);
    assert_eq!(first, Ok(Value::object([("admitted", Value::Bool(true)), ("reservation", reservation.clone())])));
    // The same owner again: the existing claim, not the new proposal.
    let again = op_with(&f, IndexOp::HooksReserve, vec![s("tok"), a.to_value()], UUID_B);
    assert_eq!(again, Ok(Value::object([("admitted", Value::Bool(true)), ("reservation", reservation.clone())])));
    // Another owner is refused with the holder, and leaves nothing behind.
    let other = op_with(&f, IndexOp::HooksReserve, vec![s("tok"), b.to_value()], UUID_B);
    assert_eq!(other, Ok(Value::object([("admitted", Value::Bool(false)), ("holder", a.to_value())])));
    assert!(f.world.keys(Family::Id, "hook_b").is_empty());

    let serialized = s(&hook_json(&a, "tok"));
    let finalize = vec![s("tok"), s("hook_a"), serialized.clone(), a.to_value(), reservation.clone()];
    f.world.run_calls.borrow_mut().clear();
    assert_eq!(op(&f, IndexOp::HooksFinalize, finalize), Ok(Value::Null));
    // One lifecycle read for both shards (each of the reference's shards asks itself).
    assert_eq!(*f.world.run_calls.borrow(), ["wrun_a.getLifecycleStatus"]);
    assert_eq!(f.world.get(Family::Token, "tok"), serialized);
    assert_eq!(f.world.get(Family::Id, "hook_a"), serialized);
    // Published: even the owner is now refused (the repair path keeps the hook-id claim).
    let published = op_with(&f, IndexOp::HooksReserve, vec![s("tok"), b.to_value()], UUID_B);
    assert_eq!(published, Ok(Value::object([("admitted", Value::Bool(false)), ("holder", a.to_value())])));

    // Release: both records go, and the token is free for b.
    let hooks = Value::Array(vec![Value::object([("hookId", s("hook_a")), ("token", s("tok"))])]);
    let released = op(&f, IndexOp::HooksRelease, vec![Value::object([("runId", s("wrun_a")), ("hooks", hooks)])]);
    assert_eq!(released, Ok(Value::object([("deleted", Value::num(2))])));
    assert_eq!(f.world.get(Family::Token, "tok"), Value::Null);
    let free = op_with(&f, IndexOp::HooksReserve, vec![s("tok"), b.to_value()], UUID_B).unwrap_or(Value::Null);
    assert_eq!(free.get("admitted"), Some(&Value::Bool(true)));

    // release-reservation drops exactly the named claims.
    let b_reservation = free.get("reservation").cloned().unwrap_or(Value::Null);
    assert_eq!(op(&f, IndexOp::HooksReleaseReservation, vec![s("tok"), b.to_value(), b_reservation]), Ok(Value::Null));
    assert!(f.world.keys(Family::Token, "tok").is_empty() && f.world.keys(Family::Id, "hook_b").is_empty());
}

#[test]
fn finalize_without_a_reservation_and_for_an_ended_run() {
    let f = Fleet::new();
    let a = owner("wrun_a", "hook_a");
    f.world.set_run("wrun_a", "active");
    let serialized = s(&hook_json(&a, "tok"));
    let finalize =
        |reservation: Value| op(&f, IndexOp::HooksFinalize, vec![s("tok"), s("hook_a"), serialized.clone(), a.to_value(), reservation]);
    assert_eq!(finalize(Value::Null), Err(RpcError::error("Hook token tok has no active reservation")));
    let reservation = op(&f, IndexOp::HooksReserve, vec![s("tok"), a.to_value()]).ok().and_then(|r| r.get("reservation").cloned());
    f.world.set_run("wrun_a", "terminal");
    f.world.run_calls.borrow_mut().clear();
    assert_eq!(finalize(reservation.unwrap_or(Value::Null)), Ok(Value::Null), "a silent stored:false");
    assert_eq!(*f.world.run_calls.borrow(), ["wrun_a.getLifecycleStatus"], "read once");
    assert_eq!(f.world.get(Family::Token, "tok"), Value::Null);
    assert!(f.world.keys(Family::Token, "tok").is_empty(), "and the claim released");
    // An owner that is not {runId, hookId} strings is refused by the shard, unread for.
    f.world.run_calls.borrow_mut().clear();
    let bad = op(&f, IndexOp::HooksFinalize, vec![s("tok"), s("hook_a"), serialized.clone(), s("owner"), Value::Null]);
    assert_eq!(bad, type_error("hook owner must be {runId, hookId} strings"));
    assert!(f.world.run_calls.borrow().is_empty());
}

#[test]
fn javascript_errors_of_missing_arguments() {
    let f = Fleet::new();
    assert_eq!(op(&f, IndexOp::HooksReserve, vec![]), type_error("Cannot read properties of undefined (reading 'hookId')"));
    assert_eq!(op(&f, IndexOp::HooksRelease, vec![]), type_error("Cannot read properties of undefined (reading 'hooks')"));
    assert_eq!(
        op(&f, IndexOp::HooksReleaseReservation, vec![s("t")]),
        type_error("Cannot read properties of undefined (reading 'tokenClaimId')")
    );
    let id_claim_only = Value::object([("hookIdClaimId", s(UUID_A))]);
    assert_eq!(
        op(&f, IndexOp::HooksReleaseReservation, vec![s("t"), Value::Null, id_claim_only]),
        type_error("Cannot read properties of null (reading 'hookId')")
    );
    assert!(f.world.objects.borrow().is_empty(), "nothing was written");
    let bad_hook = Value::object([("runId", s("r")), ("hooks", Value::Array(vec![Value::Null]))]);
    assert_eq!(op(&f, IndexOp::HooksRelease, vec![bad_hook]), type_error("Cannot read properties of null (reading 'token')"));
}

#[test]
fn release_batches_64_per_shard() {
    let hooks: Vec<Value> = (0..200).map(|i| Value::object([("hookId", s("same_id")), ("token", s(&format!("t{i}")))])).collect();
    let shards = release_calls(Some(&s("r")), Some(&Value::Array(hooks))).unwrap_or_default();
    let id_calls =
        shards.iter().find(|calls| calls.first().is_some_and(|c| matches!(c.target, Target::HookIds(_)))).cloned().unwrap_or_default();
    assert_eq!(id_calls.iter().map(|c| c.args[0].as_array().map_or(0, Vec::len)).collect::<Vec<_>>(), [64, 64, 64, 8]);
    let total: usize = shards
        .iter()
        .flatten()
        .filter(|c| matches!(c.target, Target::HookTokens(_)))
        .map(|c| c.args[0].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(total, 200);
}

#[test]
fn a_hook_id_collision_is_refused_before_the_token_is_published() {
    let f = Fleet::new();
    let (a, b, c) = (owner("wrun_a", "hook_same"), owner("wrun_b", "hook_same"), owner("wrun_c", "hook_c"));
    for run in ["wrun_a", "wrun_b", "wrun_c"] {
        f.world.set_run(run, "active");
    }
    assert_eq!(
        op(&f, IndexOp::HooksReserve, vec![s("tok_a"), a.to_value()]).map(|r| r.get("admitted").cloned()),
        Ok(Some(Value::Bool(true)))
    );
    let collision = op_with(&f, IndexOp::HooksReserve, vec![s("tok_b"), b.to_value()], UUID_B);
    assert_eq!(collision, Ok(Value::object([("admitted", Value::Bool(false)), ("holder", a.to_value())])));
    assert!(f.world.keys(Family::Token, "tok_b").is_empty(), "the token claim is released");
    let reused = op_with(&f, IndexOp::HooksReserve, vec![s("tok_b"), c.to_value()], UUID_B).unwrap_or(Value::Null);
    assert_eq!(reused.get("admitted"), Some(&Value::Bool(true)), "the token is free for another id");
}

#[test]
fn a_stale_reservation_cannot_finalize() {
    let f = Fleet::new();
    let a = owner("wrun_a", "hook_a");
    f.world.set_run("wrun_a", "active");
    let stale = op_with(&f, IndexOp::HooksReserve, vec![s("tok"), a.to_value()], UUID_A).ok().and_then(|r| r.get("reservation").cloned());
    let stale = stale.unwrap_or(Value::Null);
    assert_eq!(op(&f, IndexOp::HooksReleaseReservation, vec![s("tok"), a.to_value(), stale.clone()]), Ok(Value::Null));
    let fresh = op_with(&f, IndexOp::HooksReserve, vec![s("tok"), a.to_value()], UUID_B).ok().and_then(|r| r.get("reservation").cloned());
    let serialized = s(&hook_json(&a, "tok"));
    let finalize =
        |reservation: Value| op(&f, IndexOp::HooksFinalize, vec![s("tok"), s("hook_a"), serialized.clone(), a.to_value(), reservation]);
    assert_eq!(finalize(stale), Err(RpcError::error("Hook token tok is reserved by another hook")));
    assert_eq!(finalize(fresh.unwrap_or(Value::Null)), Ok(Value::Null));
    assert_eq!(f.world.get(Family::Id, "hook_a"), serialized);
}
