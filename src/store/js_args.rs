//! How the platform's storage API coerces its JavaScript arguments (workerd's
//! `ctx.storage` methods), for the cores that pass caller-supplied values straight to it
//! (IndexDO, StreamDO).
//!
//! The texts of the errors below were checked against workerd: the storage layer's
//! `put() called with undefined value.` and its int32 argument range error.

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

/// A storage key argument: workerd coerces any value to a string (`undefined` → `"undefined"`).
/// Arrays (which select the multi-key forms) and plain objects are refused with a `TypeError`
/// instead of being mimicked.
pub fn storage_key(v: Option<&Value>, what: &str) -> Result<String, RpcError> {
    match v {
        Some(Value::Array(_) | Value::Object(_)) => Err(RpcError::type_error(format!("{what} must be a string"))),
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
}
