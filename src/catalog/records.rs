//! RunCatalogDO stored records and the decoding of its arguments.
//!
//! Run keys hold the client's metadata text as is. The fence and its compaction entry are
//! JSON records.
//!
//! Knows no method's rules.

use serde::{Deserialize, Serialize};

use crate::wire::{js, RpcError, Value};

/// `expired:<runId>` = `{expiredAt, compactAt}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpiryFence {
    /// As the caller gave it (epoch ms; `null` when it was not a number or date).
    pub expired_at: Option<f64>,
    pub compact_at: i64,
}

/// `expiry-gc:<pad13(compactAt)>:<enc(runId)>` = `{runId, compactAt}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpiryGc {
    pub run_id: String,
    pub compact_at: i64,
}

/// A key-like argument, converted as a template literal would (`String(v)`).
pub fn text(v: Option<&Value>) -> String {
    js::to_js_string(v)
}

/// The two run keys of `upsertRun` / `expireRun`: anything but a two-element array is
/// refused with `message` (an absent array fails on `.length` as in JavaScript).
pub fn two_keys(v: Option<&Value>, message: &str) -> Result<[String; 2], RpcError> {
    js::member(v, "length")?;
    match v.and_then(Value::as_array).map(Vec::as_slice) {
        Some([a, b]) => Ok([text(Some(a)), text(Some(b))]),
        _ => Err(RpcError::error(message)),
    }
}

/// `Number.isSafeInteger(v)` → the integer.
pub fn safe_integer(v: Option<&Value>) -> Option<i64> {
    const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;
    match v {
        Some(Value::Number(n)) if n.is_finite() && n.trunc() == *n && n.abs() <= MAX_SAFE_INTEGER => Some(*n as i64),
        _ => None,
    }
}

/// A time argument kept in a record: a number or a date, else `None`.
pub fn time_value(v: Option<&Value>) -> Option<f64> {
    match v {
        Some(Value::Number(n)) if n.is_finite() => Some(*n),
        Some(Value::Date(Some(ms))) => Some(*ms as f64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_decoding() {
        let keys = Value::Array(vec![Value::str("a"), Value::str("b")]);
        assert_eq!(two_keys(Some(&keys), "m"), Ok(["a".to_string(), "b".to_string()]));
        assert_eq!(two_keys(Some(&Value::Array(vec![])), "m"), Err(RpcError::error("m")));
        assert_eq!(two_keys(None, "m").unwrap_err().name, "TypeError");
        assert_eq!(safe_integer(Some(&Value::num(5))), Some(5));
        assert_eq!(safe_integer(Some(&Value::num(5.5))), None);
        assert_eq!(safe_integer(Some(&Value::num(9_007_199_254_740_992.0))), None);
        assert_eq!(safe_integer(Some(&Value::str("5"))), None);
        assert_eq!(time_value(Some(&Value::date(3))), Some(3.0));
        assert_eq!(time_value(Some(&Value::Null)), None);
    }
}
