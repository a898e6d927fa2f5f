//! How the platform's storage API coerces its JavaScript arguments (workerd's
//! `ctx.storage` methods), for the cores that pass caller-supplied values straight to it
//! (IndexDO, StreamDO).
//!
//! The texts of the errors below were checked against workerd: the storage layer's
//! `put() called with undefined value.` and its int32 argument range error.
//!
//! Knows no core: only the storage API's argument rules.

use crate::wire::js::{to_js_string, to_number};
use crate::wire::{RpcError, Value};

/// How workerd converts a numeric storage argument (e.g. a list `limit`) to its `int`:
/// ToNumber, NaN → 0, truncation, and a `TypeError` outside the int32 range.
pub fn to_storage_int(v: Option<&Value>) -> Result<i32, RpcError> {
    let n = to_number(v);
    if n.is_nan() {
        return Ok(0);
    }
    let t = n.trunc();
    if t < f64::from(i32::MIN) || t > f64::from(i32::MAX) {
        return Err(RpcError::type_error("Value out of range. Must be between -2147483648 and 2147483647 (inclusive)."));
    }
    Ok(t as i32)
}

/// The storage layer refuses to store `undefined`.
pub fn put_undefined() -> RpcError {
    RpcError::type_error("put() called with undefined value.")
}

/// A storage key argument, coerced like JavaScript's `String(x)` as the reference's
/// storage call does (`undefined` → `"undefined"`, a plain object → `"[object Object]"`).
/// Arrays (which select the platform's multi-key forms), Dates and byte arrays are refused
/// with a `TypeError`: the reference fails on a Date key too, and a key spelled from a
/// Date's local-time text or a byte list is never what a caller meant.
pub fn storage_key(v: Option<&Value>, what: &str) -> Result<String, RpcError> {
    match v {
        Some(Value::Array(_) | Value::Date(_) | Value::Bytes(_)) => Err(RpcError::type_error(format!("{what} must be a string"))),
        other => Ok(to_js_string(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_ints() {
        assert_eq!(to_storage_int(Some(&Value::num(2.5))), Ok(2));
        assert_eq!(to_storage_int(Some(&Value::str("x"))), Ok(0));
        assert!(to_storage_int(Some(&Value::num(2_147_483_648.0))).is_err());
    }

    #[test]
    fn storage_keys_coerce_like_string_but_refuse_dates_arrays_bytes() {
        let key = |v: Value| storage_key(Some(&v), "key");
        assert_eq!(key(Value::object([("a", Value::num(1))])), Ok("[object Object]".into()));
        assert_eq!(key(Value::num(1.5)), Ok("1.5".into()));
        assert_eq!(key(Value::Null), Ok("null".into()));
        assert_eq!(storage_key(None, "key"), Ok("undefined".into()));
        for bad in [Value::date(1_577_836_800_000), Value::Date(None), Value::Array(vec![]), Value::Bytes(vec![1])] {
            assert_eq!(key(bad), Err(RpcError::type_error("key must be a string")));
        }
    }
}
