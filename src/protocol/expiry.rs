//! The calls that expire a run in the sharded index, from its `{runId, keys, hooks,
//! expiredAt}` request: the archive IndexDO's `expireRun(request)` unchanged
//! ([`archive_call`]), and the shards' share ([`shard_calls`]): the run's catalog shard
//! `expireKeys(runId, keys, expiredAt)` (the catalog fence, and every
//! `run:`/`runall:`/`correlation:` key of `keys`) and the hook shards' owner-checked
//! `legacyReleaseBatch` of every `{hookId, token}` of `hooks`, grouped by shard, at most
//! [`MAX_RELEASE_BATCH`] entries a call, owner `{runId, hookId}`.
//!
//! Two callers send them: the 0.3 facade's `index.expireRun` ([`crate::facade::expiry`]:
//! the archive first, then the shards) and the run DO's retention `index` phase
//! ([`crate::run::cleanup::index_phase`]: all at once). Each call is idempotent.
//!
//! Makes no call and knows no shard's storage.

use std::collections::BTreeMap;

use super::calls::{ShardCall, Target};
use super::hooks::{release_entry_value, Family, Owner, MAX_RELEASE_BATCH};
use super::shard;
use crate::wire::{js, Value};

/// The archive's share: `expireRun(request)` unchanged.
pub fn archive_call(request: &Value) -> ShardCall {
    ShardCall { target: Target::Archive, method: "expireRun", args: vec![request.clone()] }
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
            batches.entry(Target::hook_shard(family, key)).or_default().push(release_entry_value(family, key, &owner));
        }
    }
    for (target, entries) in batches {
        for chunk in entries.chunks(MAX_RELEASE_BATCH) {
            out.push(ShardCall { target: target.clone(), method: "legacyReleaseBatch", args: vec![Value::Array(chunk.to_vec())] });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(hook_id: &str, token: &str) -> Value {
        Value::object([("hookId", Value::str(hook_id)), ("token", Value::str(token))])
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
