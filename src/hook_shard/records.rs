//! Hook shard records and argument decoding: owners, claims and their deadline entries.
//!
//! An *owner* is `{runId, hookId}`; two owners are equal when both members are. The
//! owner of a published record is read from the serialized hook (shared codec JSON).

use serde::{Deserialize, Serialize};

use super::family::Family;
use crate::wire::json_parse::parse_shared;
use crate::wire::{js, Map, RpcError, Value};

/// `{runId, hookId}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Owner {
    pub run_id: String,
    pub hook_id: String,
}

impl Owner {
    pub fn new(run_id: impl Into<String>, hook_id: impl Into<String>) -> Owner {
        Owner { run_id: run_id.into(), hook_id: hook_id.into() }
    }

    /// An owner argument: an object with string `runId` and `hookId` (a missing owner
    /// fails on the member read, as in JavaScript; non-string members are refused).
    pub fn from_arg(v: Option<&Value>) -> Result<Owner, RpcError> {
        let run_id = js::member(v, "runId")?;
        let hook_id = js::member(v, "hookId")?;
        match (run_id, hook_id) {
            (Some(Value::String(run_id)), Some(Value::String(hook_id))) => Ok(Owner::new(run_id.as_str(), hook_id.as_str())),
            _ => Err(RpcError::type_error("hook owner must be {runId, hookId} strings")),
        }
    }

    /// The owner of a serialized hook: `runId` and `hookId` of its shared-codec parse.
    pub fn from_serialized(text: &str) -> Result<Owner, RpcError> {
        let hook = parse_shared(text)?;
        match (js::member(Some(&hook), "runId")?, js::member(Some(&hook), "hookId")?) {
            (Some(Value::String(run_id)), Some(Value::String(hook_id))) => Ok(Owner::new(run_id.as_str(), hook_id.as_str())),
            _ => Err(RpcError::type_error("serialized hook has no string runId and hookId")),
        }
    }

    pub fn to_value(&self) -> Value {
        Value::object([("runId", Value::str(self.run_id.as_str())), ("hookId", Value::str(self.hook_id.as_str()))])
    }
}

/// `claim:<enc(K)>` = `{owner, claimId, reservedAt, expiresAt, deadlineKey}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Claim {
    pub owner: Owner,
    pub claim_id: String,
    pub reserved_at: i64,
    pub expires_at: i64,
    pub deadline_key: String,
}

/// `claim-deadline:…` = `{token | hookId, claimId, expiresAt}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deadline {
    /// The natural key (token or hookId, unescaped).
    pub key: String,
    pub claim_id: String,
    pub expires_at: i64,
}

impl Deadline {
    /// The stored JSON text, naming the key with the family's member.
    pub fn to_json(&self, family: Family) -> String {
        let mut map = serde_json::Map::new();
        map.insert(family.key_member().into(), self.key.clone().into());
        map.insert("claimId".into(), self.claim_id.clone().into());
        map.insert("expiresAt".into(), self.expires_at.into());
        serde_json::Value::Object(map).to_string()
    }

    pub fn parse(family: Family, text: &str) -> Option<Deadline> {
        let value: serde_json::Value = serde_json::from_str(text).ok()?;
        Some(Deadline {
            key: value.get(family.key_member())?.as_str()?.to_string(),
            claim_id: value.get("claimId")?.as_str()?.to_string(),
            expires_at: value.get("expiresAt")?.as_i64()?,
        })
    }
}

/// A natural-key argument (`String(v)`, as the template literal building the key does).
pub fn natural_key(v: Option<&Value>) -> String {
    js::to_js_string(v)
}

/// A string argument the class stores (the serialized hook); anything else is refused.
pub fn string_arg<'a>(v: Option<&'a Value>, what: &str) -> Result<&'a str, RpcError> {
    match v {
        Some(Value::String(s)) => Ok(s),
        _ => Err(RpcError::type_error(format!("{what} must be a string"))),
    }
}

/// `{claimed: true, claimId}`.
pub fn claimed(claim_id: &str) -> Value {
    Value::object([("claimed", Value::Bool(true)), ("claimId", Value::str(claim_id))])
}

/// `{claimed: false, holder}`.
pub fn held_by(holder: &Owner) -> Value {
    Value::object([("claimed", Value::Bool(false)), ("holder", holder.to_value())])
}

/// `{stored}`.
pub fn stored(yes: bool) -> Value {
    Value::object([("stored", Value::Bool(yes))])
}

/// One `releaseBatch` entry `{<token|hookId>, owner}`.
pub fn release_entry(family: Family, entry: &Value) -> Result<(String, Owner), RpcError> {
    let key = natural_key(js::member(Some(entry), family.key_member())?);
    let owner = Owner::from_arg(js::member(Some(entry), "owner")?)?;
    Ok((key, owner))
}

/// A release-batch entry as the coordinator builds it.
pub fn release_entry_value(family: Family, key: &str, owner: &Owner) -> Value {
    let mut map = Map::new();
    map.insert(family.key_member().into(), Value::str(key));
    map.insert("owner".into(), owner.to_value());
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners() {
        let owner = Owner::new("wrun_1", "h1");
        assert_eq!(Owner::from_arg(Some(&owner.to_value())), Ok(owner.clone()));
        assert_eq!(Owner::from_arg(None).unwrap_err().message, "Cannot read properties of undefined (reading 'runId')");
        assert_eq!(Owner::from_arg(Some(&Value::object([("runId", Value::num(1))]))).unwrap_err().name, "TypeError");
        let hook = r#"{"runId":"wrun_1","hookId":"h1","token":"t","createdAt":{"__type":"Date","iso":"2026-01-01T00:00:00.000Z"}}"#;
        assert_eq!(Owner::from_serialized(hook), Ok(owner));
        assert_eq!(Owner::from_serialized("nope").unwrap_err().name, "SyntaxError");
        assert_eq!(Owner::from_serialized("null").unwrap_err().name, "TypeError");
        assert_eq!(Owner::from_serialized("{}").unwrap_err().name, "TypeError");
    }

    #[test]
    fn deadlines_name_the_family_key() {
        let d = Deadline { key: "t 1".into(), claim_id: "c".into(), expires_at: 9 };
        assert_eq!(d.to_json(Family::Token), r#"{"claimId":"c","expiresAt":9,"token":"t 1"}"#);
        assert_eq!(d.to_json(Family::Id), r#"{"claimId":"c","expiresAt":9,"hookId":"t 1"}"#);
        assert_eq!(Deadline::parse(Family::Id, &d.to_json(Family::Id)), Some(d.clone()));
        assert_eq!(Deadline::parse(Family::Token, &d.to_json(Family::Id)), None);
    }
}
