//! Hook shard records and argument decoding: claims and their deadline entries, the
//! arguments and answers of the shard methods. Owners (`{runId, hookId}`, equal when both
//! members are) and the release entries callers build are [`crate::protocol::hooks`].
//!
//! Calls no other object.

use serde::{Deserialize, Serialize};

use crate::protocol::hooks::{Family, Owner};
use crate::wire::{js, RpcError, Value};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_name_the_family_key() {
        let d = Deadline { key: "t 1".into(), claim_id: "c".into(), expires_at: 9 };
        assert_eq!(d.to_json(Family::Token), r#"{"claimId":"c","expiresAt":9,"token":"t 1"}"#);
        assert_eq!(d.to_json(Family::Id), r#"{"claimId":"c","expiresAt":9,"hookId":"t 1"}"#);
        assert_eq!(Deadline::parse(Family::Id, &d.to_json(Family::Id)), Some(d.clone()));
        assert_eq!(Deadline::parse(Family::Token, &d.to_json(Family::Id)), None);
    }
}
