//! Expiring a run in the sharded index: the 0.3 `index.expireRun({runId, keys, hooks,
//! expiredAt})` through the facade, and the run DO's retention `index` phase
//! ([`crate::run::cleanup::index_phase`]), which sends the same request.
//!
//! The archive IndexDO answers `expireRun(request)` first, unchanged: it validates the
//! request exactly as 0.3 did (its errors are the answer), fences the run there and
//! deletes the run's pre-upgrade entries. Then, concurrently ([`shard_calls`]):
//! * the run's catalog shard `expireKeys(runId, keys, expiredAt)`: the catalog fence, and
//!   every `run:`/`runall:`/`correlation:` key of `keys` (the facade keeps all three there);
//! * the hook shards: the owner-checked `legacyReleaseBatch` (`releaseBatch`, also counting
//!   records alone) of every `{hookId, token}` of
//!   `hooks`, grouped by shard, ≤ 64 entries per call, owner `{runId, hookId}`.
//!
//! `deleted` is the sum of the three counts: an entry lives in exactly one of them.

use std::collections::BTreeMap;

use super::hooks::ShardCall;
use super::Target;
use crate::hook_shard::claims::MAX_RELEASE_BATCH;
use crate::hook_shard::records::{release_entry_value, Owner};
use crate::hook_shard::Family;
use crate::protocol::shard;
use crate::wire::{js, RpcError, Value};

/// The archive's share: `expireRun(request)` unchanged.
pub fn archive_call(request: &Value) -> ShardCall {
    ShardCall { target: Target::Archive, method: "expireRun", args: vec![request.clone()] }
}

fn family_target(family: Family, key: &str) -> Target {
    match family {
        Family::Token => Target::HookTokens(shard::hook_token(key)),
        Family::Id => Target::HookIds(shard::hook_id(key)),
    }
}

/// The shards' share, for a request the archive accepted.
pub fn shard_calls(request: &Value) -> Vec<ShardCall> {
    let run_id = js::to_js_string(request.get("runId"));
    let expired_at = request.get("expiredAt").cloned().unwrap_or(Value::Null);
    let mut names: Vec<Value> = Vec::new();
    for key in request.get("keys").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
        match key {
            Value::Array(many) => names.extend(many.iter().map(|k| Value::String(js::to_js_string(Some(k))))),
            one => names.push(Value::String(js::to_js_string(Some(one)))),
        }
    }
    let mut out = vec![ShardCall {
        target: Target::Catalog(shard::run_catalog(&run_id)),
        method: "expireKeys",
        args: vec![Value::str(run_id.as_str()), Value::Array(names), expired_at],
    }];
    let mut batches: BTreeMap<Target, Vec<Value>> = BTreeMap::new();
    for hook in request.get("hooks").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
        let hook_id = js::to_js_string(hook.get("hookId"));
        let token = js::to_js_string(hook.get("token"));
        let owner = Owner::new(run_id.as_str(), hook_id.as_str());
        for (family, key) in [(Family::Token, &token), (Family::Id, &hook_id)] {
            batches.entry(family_target(family, key)).or_default().push(release_entry_value(family, key, &owner));
        }
    }
    for (target, entries) in batches {
        for chunk in entries.chunks(MAX_RELEASE_BATCH) {
            out.push(ShardCall { target: target.clone(), method: "legacyReleaseBatch", args: vec![Value::Array(chunk.to_vec())] });
        }
    }
    out
}

fn count(answer: &Value, member: &str) -> Result<f64, RpcError> {
    answer.get(member).and_then(Value::as_f64).ok_or_else(|| RpcError::error("malformed index expiry answer"))
}

/// The facade's answer `{deleted}`, counted as 0.3 counted: the archive's and the
/// catalog's deleted keys, the token shards' records and claims, the hook-id shards'
/// records (0.3 kept no hook-id claims). `answers` are those of `calls`, in order.
pub fn answer(archived: &Value, calls: &[ShardCall], answers: &[Value]) -> Result<Value, RpcError> {
    let mut total = count(archived, "deleted")?;
    for (call, answer) in calls.iter().zip(answers) {
        total += count(answer, if matches!(call.target, Target::HookIds(_)) { "records" } else { "deleted" })?;
    }
    Ok(Value::object([("deleted", Value::num(total))]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(hook_id: &str, token: &str) -> Value {
        Value::object([("hookId", Value::str(hook_id)), ("token", Value::str(token))])
    }

    #[test]
    fn catalog_then_hook_shards() {
        let request = Value::object([
            ("runId", Value::str("wrun_same")),
            ("keys", Value::Array(vec![Value::str("run:wf:1:wrun_same"), Value::str("runall:1:wrun_same"), Value::str("correlation:x")])),
            ("hooks", Value::Array(vec![hook("hook_same", "token_same")])),
            ("expiredAt", Value::num(5)),
        ]);
        let calls = shard_calls(&request);
        assert_eq!(calls.len(), 3);
        assert_eq!(calls[0].target, Target::Catalog("run-catalog:v1:0e".into()));
        assert_eq!(calls[0].method, "expireKeys");
        assert_eq!(calls[0].args, vec![Value::str("wrun_same"), request.get("keys").cloned().unwrap(), Value::num(5)]);
        let owner = Owner::new("wrun_same", "hook_same");
        assert!(calls.contains(&ShardCall {
            target: Target::HookTokens("hook-token:v1:11".into()),
            method: "legacyReleaseBatch",
            args: vec![Value::Array(vec![release_entry_value(Family::Token, "token_same", &owner)])],
        }));
        assert!(calls.contains(&ShardCall {
            target: Target::HookIds("hook-id:v1:19".into()),
            method: "legacyReleaseBatch",
            args: vec![Value::Array(vec![release_entry_value(Family::Id, "hook_same", &owner)])],
        }));
        assert_eq!(archive_call(&request).args, vec![request]);
        let counts = |deleted: u32, records: u32| Value::object([("deleted", Value::num(deleted)), ("records", Value::num(records))]);
        let answers = [Value::object([("deleted", Value::num(1))]), counts(2, 1), counts(2, 1)];
        let total = answer(&Value::object([("deleted", Value::num(3))]), &calls, &answers);
        assert_eq!(total, Ok(Value::object([("deleted", Value::num(7))])), "3 archive + 1 catalog + 2 token + 1 hook-id record");
    }

    #[test]
    fn batches_of_64_per_shard() {
        let hooks: Vec<Value> = (0..200).map(|i| hook(&format!("h{i}"), &format!("t{i}"))).collect();
        let request = Value::object([("runId", Value::str("r")), ("keys", Value::Array(vec![])), ("hooks", Value::Array(hooks))]);
        let mut released = 0;
        for call in shard_calls(&request).iter().filter(|c| c.method == "legacyReleaseBatch") {
            let n = call.args[0].as_array().map_or(0, Vec::len);
            assert!((1..=MAX_RELEASE_BATCH).contains(&n));
            released += n;
        }
        assert_eq!(released, 400, "each hook on both families");
    }
}
