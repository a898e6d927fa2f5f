//! The IndexDO's stored values and the hook-ownership rules over them.
//!
//! Every value is kept with the [`slot`] codec, because `put` stores whatever the caller sent
//! and `get` returns it as stored. The DO's own records are a [`HookClaim`] under
//! `hookclaim:<token>` and the expiry fence value under `expired:<runId>`.
//!
//! An *owner* is a `{runId, hookId}` object. The reference compares owners member by member
//! with `===` and reads the members with plain property access, so a missing owner is a
//! `TypeError` and two object-valued runIds never match; [`same_owner`] keeps those rules.
//!
//! Calls no other object.

use crate::store::{js_args, slot, Store, StoreResult};
use crate::wire::{js, json_parse, RpcError, Value};

/// Read a stored value (`None` when absent).
pub fn read(store: &mut dyn Store, key: &str) -> StoreResult<Option<Value>> {
    store.get(key)?.map(|text| slot::decode(key, &text)).transpose()
}

/// Store a value; `undefined` is refused like the platform's `put`.
pub fn write(store: &mut dyn Store, key: &str, value: Option<&Value>) -> StoreResult<()> {
    let value = value.ok_or_else(js_args::put_undefined)?;
    store.put(key, &slot::encode(value))
}

/// `hookclaim:<token>`: who reserved a token, and when (epoch ms, informational only).
#[derive(Debug, Clone, PartialEq)]
pub struct HookClaim {
    /// The caller's owner argument as sent (normally `{runId, hookId}`).
    pub owner: Option<Value>,
    pub reserved_at: i64,
}

impl HookClaim {
    /// The stored form `{owner, reservedAt}` (an `undefined` owner is simply not a member).
    pub fn to_value(&self) -> Value {
        let mut members = vec![("reservedAt", Value::Number(self.reserved_at as f64))];
        if let Some(owner) = &self.owner {
            members.push(("owner", owner.clone()));
        }
        Value::object(members)
    }
}

/// `left.runId === right.runId && left.hookId === right.hookId`.
pub fn same_owner(left: Option<&Value>, right: Option<&Value>) -> Result<bool, RpcError> {
    let (l_run, r_run) = (js::member(left, "runId")?, js::member(right, "runId")?);
    if !js::strict_eq(l_run, r_run) {
        return Ok(false);
    }
    let (l_hook, r_hook) = (js::member(left, "hookId")?, js::member(right, "hookId")?);
    Ok(js::strict_eq(l_hook, r_hook))
}

/// `claim.owner` of a stored claim value.
pub fn claim_owner(claim: &Value) -> Result<Option<&Value>, RpcError> {
    js::member(Some(claim), "owner")
}

/// The owner of a serialized hook: `{runId, hookId}` of `parse(value)` (shared codec).
/// Non-string stored values are first converted with `String()`, as `JSON.parse` does.
pub fn owner_from_hook(stored: &Value) -> Result<Value, RpcError> {
    let parsed = match stored {
        Value::String(text) => json_parse::parse_shared(text)?,
        other => json_parse::parse_shared(&js::to_js_string(Some(other)))?,
    };
    let run_id = js::member(Some(&parsed), "runId")?.cloned();
    let hook_id = js::member(Some(&parsed), "hookId")?.cloned();
    Ok(owner_value(run_id, hook_id))
}

/// `{runId, hookId}` with `undefined` members left out (as the wire encoding does).
pub fn owner_value(run_id: Option<Value>, hook_id: Option<Value>) -> Value {
    let members = [("runId", run_id), ("hookId", hook_id)];
    Value::object(members.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(run: &str, hook: &str) -> Value {
        owner_value(Some(Value::str(run)), Some(Value::str(hook)))
    }

    #[test]
    fn owners_compare_member_by_member() {
        assert_eq!(same_owner(Some(&owner("r", "h")), Some(&owner("r", "h"))), Ok(true));
        assert_eq!(same_owner(Some(&owner("r", "h")), Some(&owner("r", "x"))), Ok(false));
        assert_eq!(same_owner(Some(&Value::object::<&str>([])), Some(&Value::object::<&str>([]))), Ok(true));
        assert_eq!(same_owner(Some(&owner("r", "h")), None).unwrap_err().message, "Cannot read properties of undefined (reading 'runId')");
        let obj = owner_value(Some(Value::object([("a", Value::Null)])), None);
        assert_eq!(same_owner(Some(&obj), Some(&obj)), Ok(false));
    }

    #[test]
    fn hook_owner_parsing() {
        let hook = Value::str(r#"{"runId":"wrun_t1","hookId":"h1","token":"tok"}"#);
        assert_eq!(owner_from_hook(&hook), Ok(owner("wrun_t1", "h1")));
        assert_eq!(owner_from_hook(&Value::num(5)), Ok(Value::object::<&str>([])));
        let err = owner_from_hook(&Value::str("not json")).unwrap_err();
        assert_eq!(err, RpcError::custom("SyntaxError", "Unexpected token 'o', \"not json\" is not valid JSON"));
        assert_eq!(owner_from_hook(&Value::Null).unwrap_err().message, "Cannot read properties of null (reading 'runId')");
        assert_eq!(owner_from_hook(&Value::object([("a", Value::Null)])).unwrap_err().message, "\"[object Object]\" is not valid JSON");
    }

    #[test]
    fn claims_store_as_objects() {
        let claim = HookClaim { owner: Some(owner("r", "h")), reserved_at: 7 };
        assert_eq!(claim.to_value(), Value::object([("owner", owner("r", "h")), ("reservedAt", Value::num(7))]));
        assert_eq!(HookClaim { owner: None, reserved_at: 7 }.to_value(), Value::object([("reservedAt", Value::num(7))]));
    }
}
