//! The JavaScript value semantics the reference Durable Objects leak onto the wire,
//! reproduced so malformed input gives the same observable result (or the same `TypeError`
//! text) as on workerd: truthiness, `typeof`, `===` / SameValueZero, `String(v)` and
//! template interpolation (`${v}`), `Number(v)`, `new Date(v)`, property reads that throw
//! on `null`/`undefined`, iteration (`new Set(v)`, `for … of`) and own-key order.
//!
//! Conventions: `Option<&Value>` is a JavaScript value where `None` is `undefined`
//! (an absent argument or member). Every function is total: no panics, no overflow.
//!
//! The texts of the errors below were checked against workerd's V8:
//! `Cannot read properties of undefined (reading 'x')` and `number 5 is not iterable
//! (cannot read property Symbol(Symbol.iterator))`. The storage API's argument coercions
//! are in [`crate::store::js_args`].
//!
//! Knows no method, record or storage: only values.

use crate::wire::date::{self, parse_date, MAX_DATE_MS};
use crate::wire::number::number_to_string;
use crate::wire::{Map, RpcError, Value};

// ---- members ------------------------------------------------------------------------

/// `obj.prop`: the member of an object; `undefined` for other values that have no such
/// property; a `TypeError` when `obj` is `undefined` or `null`.
pub fn member<'a>(obj: Option<&'a Value>, prop: &str) -> Result<Option<&'a Value>, RpcError> {
    match obj {
        None => Err(cannot_read("undefined", prop)),
        Some(Value::Null) => Err(cannot_read("null", prop)),
        Some(Value::Object(map)) => Ok(map.get(prop)),
        Some(_) => Ok(None),
    }
}

fn cannot_read(what: &str, prop: &str) -> RpcError {
    RpcError::type_error(format!("Cannot read properties of {what} (reading '{prop}')"))
}

/// `obj?.prop`.
pub fn optional_member<'a>(obj: Option<&'a Value>, prop: &str) -> Option<&'a Value> {
    obj.and_then(|v| v.get(prop))
}

/// Own enumerable keys in JavaScript order: integer-like keys ascending first, then the
/// rest (in stored order — the value model does not keep insertion order).
pub fn own_keys(map: &Map) -> Vec<&String> {
    let mut ints: Vec<(u64, &String)> = Vec::new();
    let mut rest: Vec<&String> = Vec::new();
    for k in map.keys() {
        match array_index(k) {
            Some(i) => ints.push((i, k)),
            None => rest.push(k),
        }
    }
    ints.sort_by_key(|(i, _)| *i);
    ints.into_iter().map(|(_, k)| k).chain(rest).collect()
}

fn array_index(k: &str) -> Option<u64> {
    if k.is_empty() || (k.len() > 1 && k.starts_with('0')) || !k.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    k.parse::<u64>().ok().filter(|i| *i < u64::from(u32::MAX))
}

// ---- comparison and type ------------------------------------------------------------

/// `a === b`. Objects, arrays, dates and byte arrays are distinct references after every
/// storage read or argument decode (structured clone), so they are never strictly equal
/// to anything.
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

/// SameValueZero (what a `Set` uses): like `===` except that `NaN` equals `NaN`.
pub fn same_value_zero(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_nan() && y.is_nan() => true,
        _ => strict_eq(Some(a), Some(b)),
    }
}

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

/// `typeof v`.
pub fn type_of(v: Option<&Value>) -> &'static str {
    match v {
        None => "undefined",
        Some(Value::Bool(_)) => "boolean",
        Some(Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(_) => "object",
    }
}

// ---- to string ----------------------------------------------------------------------

/// `String(v)` / `${v}` (also what workerd's string-typed storage arguments do to a value).
pub fn to_js_string(v: Option<&Value>) -> String {
    match v {
        None => "undefined".into(),
        Some(Value::Null) => "null".into(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => number_to_string(*n),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::Null => String::new(),
                other => to_js_string(Some(other)),
            })
            .collect::<Vec<_>>()
            .join(","),
        Some(Value::Object(_)) => "[object Object]".into(),
        Some(Value::Date(ms)) => date_to_string(*ms),
        Some(Value::Bytes(bytes)) => bytes.iter().map(u8::to_string).collect::<Vec<_>>().join(","),
        Some(json @ Value::Json(_)) => to_js_string(Some(&json.decoded())),
    }
}

/// `Date.prototype.toString()` in UTC (workerd runs in UTC).
pub fn date_to_string(ms: Option<i64>) -> String {
    let Some(ms) = ms.filter(|m| (-MAX_DATE_MS..=MAX_DATE_MS).contains(m)) else {
        return "Invalid Date".into();
    };
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (y, m, d) = date::civil_from_days(days);
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let weekday = usize::try_from(days.rem_euclid(7)).ok().and_then(|i| WEEKDAYS.get(i)).unwrap_or(&"Thu");
    let month = usize::try_from(m - 1).ok().and_then(|i| MONTHS.get(i)).unwrap_or(&"Jan");
    let year = if y < 0 { format!("-{:06}", -y) } else { format!("{y:04}") };
    format!(
        "{weekday} {month} {d:02} {year} {:02}:{:02}:{:02} GMT+0000 (Coordinated Universal Time)",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60
    )
}

/// Number of UTF-16 code units (JavaScript `.length`).
pub fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}

// ---- to number and date -------------------------------------------------------------

/// `Number(v)` (ToNumber, with ToPrimitive for objects).
pub fn to_number(v: Option<&Value>) -> f64 {
    match v {
        None => f64::NAN,
        Some(Value::Null) => 0.0,
        Some(Value::Bool(b)) => f64::from(u8::from(*b)),
        Some(Value::Number(n)) => *n,
        Some(Value::String(s)) => string_to_number(s),
        Some(Value::Date(ms)) => ms.map_or(f64::NAN, |ms| ms as f64),
        Some(other @ (Value::Array(_) | Value::Bytes(_) | Value::Object(_) | Value::Json(_))) => {
            string_to_number(&to_js_string(Some(other)))
        }
    }
}

/// JavaScript's WhiteSpace and LineTerminator code points (what `Number(" 1 ")` trims).
fn is_js_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\u{0b}' | '\u{0c}' | '\r' | ' ' | '\u{a0}' | '\u{feff}' | '\u{2028}' | '\u{2029}') || c.is_whitespace()
}

/// StringToNumber: trimmed decimal literal, `Infinity`, or a `0x`/`0o`/`0b` integer;
/// empty → 0; anything else → NaN.
pub fn string_to_number(s: &str) -> f64 {
    let t = s.trim_matches(is_js_whitespace);
    if t.is_empty() {
        return 0.0;
    }
    for (prefix, radix) in [("0x", 16), ("0X", 16), ("0o", 8), ("0O", 8), ("0b", 2), ("0B", 2)] {
        if let Some(rest) = t.strip_prefix(prefix) {
            if rest.is_empty() {
                return f64::NAN;
            }
            let mut acc = 0.0f64;
            for c in rest.chars() {
                match c.to_digit(radix) {
                    Some(d) => acc = acc * f64::from(radix) + f64::from(d),
                    None => return f64::NAN,
                }
            }
            return acc;
        }
    }
    let (sign, body) = match t.as_bytes().first() {
        Some(b'-') => (-1.0, &t[1..]),
        Some(b'+') => (1.0, &t[1..]),
        _ => (1.0, t),
    };
    if body == "Infinity" {
        return sign * f64::INFINITY;
    }
    // Only a StrDecimalLiteral: digits, optional fraction, optional exponent.
    let bytes = body.as_bytes();
    let mut i = 0;
    let int_digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    i += int_digits;
    let mut frac_digits = 0;
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        frac_digits = bytes.get(i..).unwrap_or(&[]).iter().take_while(|b| b.is_ascii_digit()).count();
        i += frac_digits;
    }
    if int_digits == 0 && frac_digits == 0 {
        return f64::NAN;
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_digits = bytes.get(i..).unwrap_or(&[]).iter().take_while(|b| b.is_ascii_digit()).count();
        if exp_digits == 0 {
            return f64::NAN;
        }
        i += exp_digits;
    }
    if i != bytes.len() {
        return f64::NAN;
    }
    body.parse::<f64>().map_or(f64::NAN, |n| sign * n)
}

/// `new Date(v).getTime()`: `None` for an invalid Date. Strings follow the ISO forms of
/// [`parse_date`] (V8's legacy free-form parsing is not reproduced).
pub fn new_date(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Null => Some(0),
        Value::Bool(b) => Some(i64::from(*b)),
        Value::Number(n) => time_clip(*n),
        Value::Date(ms) => *ms,
        Value::String(s) => parse_date(s.trim()),
        other => parse_date(to_js_string(Some(other)).trim()),
    }
}

/// ECMAScript TimeClip.
pub fn time_clip(n: f64) -> Option<i64> {
    if !n.is_finite() || n.abs() > MAX_DATE_MS as f64 {
        return None;
    }
    Some(n.trunc() as i64)
}

// ---- iteration ----------------------------------------------------------------------

/// The elements `new Set(v)` iterates (`undefined`/`null` → none), or V8's `TypeError`.
pub fn set_elements(v: Option<&Value>) -> Result<Vec<Value>, RpcError> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(other) => iterate(other).ok_or_else(|| {
            let desc = match other {
                Value::Number(n) => format!("number {}", number_to_string(*n)),
                Value::Bool(b) => format!("boolean {b}"),
                _ => "object".to_string(),
            };
            RpcError::type_error(format!("{desc} is not iterable (cannot read property Symbol(Symbol.iterator))"))
        }),
    }
}

/// The elements `for (const x of <expr>)` iterates, or V8's `<expr> is not iterable`.
pub fn for_of_elements(v: Option<&Value>, expr: &str) -> Result<Vec<Value>, RpcError> {
    v.and_then(iterate).ok_or_else(|| RpcError::type_error(format!("{expr} is not iterable")))
}

/// The iteration of an iterable value: arrays by element, strings by code point, byte arrays
/// by byte. `None` when the value is not iterable.
fn iterate(v: &Value) -> Option<Vec<Value>> {
    match v {
        Value::Array(items) => Some(items.clone()),
        Value::String(s) => Some(s.chars().map(|c| Value::String(c.to_string())).collect()),
        Value::Bytes(b) => Some(b.iter().map(|&x| Value::Number(f64::from(x))).collect()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_number_matches_v8() {
        let s = |t: &str| string_to_number(t);
        assert_eq!(s(" 12 "), 12.0);
        assert_eq!(s("0x1F"), 31.0);
        assert_eq!(s("0b11"), 3.0);
        assert_eq!(s("0o7"), 7.0);
        assert_eq!(s("1e3"), 1000.0);
        assert_eq!(s(""), 0.0);
        assert!(s("-0x5").is_nan());
        assert_eq!(s("+Infinity"), f64::INFINITY);
        assert!(s("1_0").is_nan());
        assert_eq!(s(".5"), 0.5);
        assert_eq!(s("5."), 5.0);
        assert_eq!(s("\u{a0}12"), 12.0);
        assert!(s(".").is_nan());
        assert!(s("1e").is_nan());
        assert_eq!(to_number(Some(&Value::Array(vec![Value::num(5)]))), 5.0);
        assert!(to_number(Some(&Value::object([("a", Value::Null)]))).is_nan());
        assert_eq!(to_number(Some(&Value::Null)), 0.0);
        assert!(to_number(None).is_nan());
        assert!(to_number(Some(&Value::str("abc"))).is_nan());
        assert_eq!(to_number(Some(&Value::str(" 5 "))), 5.0);
        assert_eq!(to_number(Some(&Value::str(""))), 0.0);
        assert_eq!(to_number(Some(&Value::str("0x10"))), 16.0);
        assert_eq!(to_number(Some(&Value::Bool(true))), 1.0);
    }

    #[test]
    fn to_js_string_and_dates() {
        assert_eq!(to_js_string(None), "undefined");
        assert_eq!(to_js_string(Some(&Value::Null)), "null");
        assert_eq!(to_js_string(Some(&Value::num(1.5))), "1.5");
        assert_eq!(to_js_string(Some(&Value::num(2.0))), "2");
        assert_eq!(to_js_string(Some(&Value::Array(vec![Value::num(1), Value::Null, Value::str("a")]))), "1,,a");
        assert_eq!(to_js_string(Some(&Value::Array(vec![Value::Null, Value::num(1), Value::str("a")]))), ",1,a");
        assert_eq!(to_js_string(Some(&Value::object([("a", Value::Null)]))), "[object Object]");
        assert_eq!(to_js_string(Some(&Value::Bytes(vec![1, 2]))), "1,2");
        assert_eq!(to_js_string(Some(&Value::date(0))), "Thu Jan 01 1970 00:00:00 GMT+0000 (Coordinated Universal Time)");
        assert_eq!(to_js_string(Some(&Value::date(946_684_800_000))), "Sat Jan 01 2000 00:00:00 GMT+0000 (Coordinated Universal Time)");
    }

    #[test]
    fn truthiness_and_equality() {
        assert!(truthy(Some(&Value::str("x"))));
        assert!(!truthy(Some(&Value::str(""))));
        assert!(!truthy(Some(&Value::num(0))));
        assert!(truthy(Some(&Value::Object(Default::default()))));
        assert!(strict_eq(Some(&Value::str("a")), Some(&Value::str("a"))));
        assert!(!strict_eq(Some(&Value::object([("a", Value::Null)])), Some(&Value::object([("a", Value::Null)]))));
    }

    #[test]
    fn dates_like_new_date() {
        assert_eq!(new_date(None), None);
        assert_eq!(new_date(Some(&Value::Null)), Some(0));
        assert_eq!(new_date(Some(&Value::Bool(true))), Some(1));
        assert_eq!(new_date(Some(&Value::num(1.7))), Some(1));
        assert_eq!(new_date(Some(&Value::num(-0.5))), Some(0));
        assert_eq!(new_date(Some(&Value::num(8.64e15 + 1.0))), None);
        assert_eq!(new_date(Some(&Value::str("not a date"))), None);
        assert_eq!(new_date(Some(&Value::Object(Default::default()))), None);
    }

    #[test]
    fn members_and_iteration_errors() {
        assert_eq!(
            set_elements(Some(&Value::num(5))).unwrap_err().message,
            "number 5 is not iterable (cannot read property Symbol(Symbol.iterator))"
        );
        assert_eq!(set_elements(None), Ok(vec![]));
        assert_eq!(for_of_elements(None, "request.hooks").unwrap_err().message, "request.hooks is not iterable");
        assert_eq!(member(None, "runId").unwrap_err().message, "Cannot read properties of undefined (reading 'runId')");
        assert_eq!(member(Some(&Value::str("x")), "runId"), Ok(None));
        assert_eq!(member(Some(&Value::num(1.0)), "x"), Ok(None));
    }

    #[test]
    fn key_order() {
        let m: Map =
            [("b", 1), ("2", 1), ("a", 1), ("10", 1), ("01", 1)].into_iter().map(|(k, v)| (k.to_string(), Value::num(v))).collect();
        assert_eq!(own_keys(&m), ["2", "10", "01", "a", "b"]);
    }
}
