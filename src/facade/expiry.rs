//! Expiring a run in the sharded index through the 0.3 facade: `index.expireRun({runId,
//! keys, hooks, expiredAt})`.
//!
//! The archive IndexDO answers `expireRun(request)` first, unchanged: it validates the
//! request exactly as 0.3 did (its errors are the answer), fences the run there and
//! deletes the run's pre-upgrade entries. Once the archive holds none, only a request
//! that [`needs_archive`] goes there; any other is checked the same way against nothing. Then, concurrently, the shards' share
//! ([`crate::protocol::expiry::shard_calls`], shared with the run DO's retention `index` phase): the catalog shard's
//! `expireKeys` and the hook shards' `legacyReleaseBatch` calls.
//!
//! `deleted` is the sum of the three counts ([`answer`]): an entry lives in exactly one of
//! them.
//!
//! Makes no call.

use crate::protocol::calls::{ShardCall, Target};
use crate::wire::{RpcError, Value};

/// Whether an `expireRun` request names a key only the archive can hold even after the
/// migration: one of no catalog family (`run:`, `runall:`, `correlation:`), which the
/// facade keeps in the archive (`put`, or `putOwned` of another family); a key that is
/// not a string counts as one, and so does a string of keys (its characters). A run's own
/// keys never are, so a run's expiry leaves the archive alone once it holds no
/// pre-upgrade entry; a request refused whatever the archive holds is refused without it.
pub fn needs_archive(request: &Value) -> bool {
    match request.get("keys") {
        Some(Value::Array(keys)) => keys.iter().any(|key| match key {
            Value::String(k) => !matches!(super::key_family(k), super::KeyFamily::Run | super::KeyFamily::Correlation),
            _ => true,
        }),
        Some(Value::String(_)) => true,
        _ => false,
    }
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
    use crate::protocol::expiry::{archive_call, shard_calls};
    use crate::protocol::hooks::{release_entry_value, Family, Owner};

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
}
