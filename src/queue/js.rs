//! The JavaScript value semantics the reference QueueDO leaks onto the wire: truthiness,
//! strict equality, template-string interpolation (`${x}`), `ToNumber`, and property
//! reads that throw on `null`/`undefined`.
//!
//! `None` stands for JavaScript `undefined` (an absent member or argument).

use crate::wire::{RpcError, Value};

/// JavaScript truthiness.
pub fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => *n != 0.0 && !n.is_nan(),
        Some(Value::String(s)) => !s.is_empty(),
        Some(_) => true,
    }
}

/// `a === b` for values that went through storage (objects are never identical: every
/// read yields a fresh copy, like structured clone in the reference).
pub fn strict_eq(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(Value::Null), Some(Value::Null)) => true,
        (Some(Value::Bool(x)), Some(Value::Bool(y))) => x == y,
        (Some(Value::Number(x)), Some(Value::Number(y))) => x == y,
        (Some(Value::String(x)), Some(Value::String(y))) => x == y,
        _ => false,
    }
}

/// JavaScript `Number.prototype.toString()` for finite and non-finite values.
pub fn number_to_string(n: f64) -> String {
    if n.is_nan() {
        return "NaN".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    let mut out = String::new();
    crate::wire::value::write_number(&mut out, n);
    out
}

/// `${v}` / `String(v)`. Dates render as their ISO text (the reference would use
/// `Date.prototype.toString()`; no client sends Dates where strings are expected).
pub fn to_js_string(v: Option<&Value>) -> String {
    match v {
        None => "undefined".into(),
        Some(v) => value_to_string(v, 0),
    }
}

fn value_to_string(v: &Value, depth: usize) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number_to_string(*n),
        Value::String(s) => s.clone(),
        Value::Object(_) => "[object Object]".into(),
        Value::Date(ms) => ms.and_then(crate::wire::date::to_iso).unwrap_or_else(|| "Invalid Date".into()),
        Value::Bytes(b) => b.iter().map(u8::to_string).collect::<Vec<_>>().join(","),
        Value::Array(items) => {
            if depth > 64 {
                return String::new();
            }
            items
                .iter()
                .map(|x| match x {
                    Value::Null => String::new(),
                    other => value_to_string(other, depth + 1),
                })
                .collect::<Vec<_>>()
                .join(",")
        }
    }
}

/// JavaScript `ToNumber` for the values JSON can carry (`undefined` → NaN).
pub fn to_number(v: Option<&Value>) -> f64 {
    match v {
        None => f64::NAN,
        Some(Value::Null) => 0.0,
        Some(Value::Bool(b)) => f64::from(u8::from(*b)),
        Some(Value::Number(n)) => *n,
        Some(Value::String(s)) => string_to_number(s),
        Some(Value::Date(ms)) => ms.map_or(f64::NAN, |m| m as f64),
        Some(Value::Array(items)) => match items.as_slice() {
            [] => 0.0,
            [one] if !matches!(one, Value::Array(_)) => to_number(Some(one)),
            _ => f64::NAN,
        },
        Some(_) => f64::NAN,
    }
}

/// `Number(text)`: trimmed decimal (or `0x`/`0o`/`0b`) literal, `""` → 0, else NaN.
fn string_to_number(s: &str) -> f64 {
    let t = s.trim();
    if t.is_empty() {
        return 0.0;
    }
    for (prefix, radix) in [("0x", 16), ("0X", 16), ("0o", 8), ("0O", 8), ("0b", 2), ("0B", 2)] {
        if let Some(digits) = t.strip_prefix(prefix) {
            return u128::from_str_radix(digits, radix).map_or(f64::NAN, |n| n as f64);
        }
    }
    match t {
        "Infinity" | "+Infinity" => return f64::INFINITY,
        "-Infinity" => return f64::NEG_INFINITY,
        _ => {}
    }
    let ok = t.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    if !ok {
        return f64::NAN;
    }
    t.parse::<f64>().unwrap_or(f64::NAN)
}

/// `obj.key` where `obj` may be `undefined`/`null` (V8's `TypeError`) or a primitive
/// (no such member → `undefined`).
pub fn member<'a>(obj: Option<&'a Value>, key: &str) -> Result<Option<&'a Value>, RpcError> {
    match obj {
        None => Err(RpcError::type_error(format!("Cannot read properties of undefined (reading '{key}')"))),
        Some(Value::Null) => Err(RpcError::type_error(format!("Cannot read properties of null (reading '{key}')"))),
        Some(v) => Ok(v.get(key)),
    }
}

/// `obj?.key`.
pub fn optional_member<'a>(obj: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    obj.and_then(|v| v.get(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_numbers_truthiness() {
        assert_eq!(to_js_string(None), "undefined");
        assert_eq!(to_js_string(Some(&Value::Null)), "null");
        assert_eq!(to_js_string(Some(&Value::num(2.0))), "2");
        assert_eq!(to_js_string(Some(&Value::num(2.5))), "2.5");
        assert_eq!(to_js_string(Some(&Value::Array(vec![Value::num(1.0), Value::Null, Value::str("a")]))), "1,,a");
        assert_eq!(to_js_string(Some(&Value::object([("a", Value::Null)]))), "[object Object]");
        assert!(truthy(Some(&Value::str("x"))) && !truthy(Some(&Value::str(""))) && !truthy(Some(&Value::num(0.0))));
        assert!(to_number(Some(&Value::str("abc"))).is_nan());
        assert_eq!(to_number(Some(&Value::str(" 5 "))), 5.0);
        assert_eq!(to_number(Some(&Value::str(""))), 0.0);
        assert_eq!(to_number(Some(&Value::str("0x10"))), 16.0);
        assert_eq!(to_number(Some(&Value::Bool(true))), 1.0);
        assert!(strict_eq(Some(&Value::str("a")), Some(&Value::str("a"))));
        assert!(!strict_eq(Some(&Value::object([("a", Value::Null)])), Some(&Value::object([("a", Value::Null)]))));
        assert!(member(None, "x").is_err());
        assert_eq!(member(Some(&Value::num(1.0)), "x"), Ok(None));
    }
}
