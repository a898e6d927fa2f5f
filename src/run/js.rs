//! The few JavaScript value semantics the reference's behaviour leaks onto the wire:
//! truthiness, `typeof`, template-string interpolation (`${x}`) and `new Date(x)`.
//!
//! `None` stands for JavaScript `undefined` (an absent member).

use crate::wire::date::{parse_date, to_iso, MAX_DATE_MS};
use crate::wire::Value;

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

/// JavaScript `Number.prototype.toString()` for the values JSON can carry.
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

const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/// `Date.prototype.toString()` in UTC (the Workers time zone).
fn date_to_string(ms: Option<i64>) -> String {
    let Some(ms) = ms.filter(|m| m.abs() <= MAX_DATE_MS) else {
        return "Invalid Date".into();
    };
    let Some(iso) = to_iso(ms) else {
        return "Invalid Date".into();
    };
    let days = ms.div_euclid(86_400_000);
    let weekday = WEEKDAYS.get(days.rem_euclid(7) as usize).copied().unwrap_or("Thu");
    let (y, m, d) = crate::wire::date::civil_from_days(days);
    let month = MONTHS.get((m - 1).clamp(0, 11) as usize).copied().unwrap_or("Jan");
    let time = iso.get(iso.len().saturating_sub(13)..iso.len().saturating_sub(5)).unwrap_or("00:00:00");
    let year = if y < 0 { format!("-{:06}", -y) } else { format!("{y:04}") };
    format!("{weekday} {month} {d:02} {year} {time} GMT+0000 (Coordinated Universal Time)")
}

/// `${v}` / `String(v)`.
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
        Value::Date(ms) => date_to_string(*ms),
        Value::Bytes(b) => b.iter().map(u8::to_string).collect::<Vec<_>>().join(","),
        Value::Array(items) => {
            if depth > 64 {
                return String::new();
            }
            items
                .iter()
                .map(|x| match x {
                    Value::Null => String::new(),
                    x => value_to_string(x, depth + 1),
                })
                .collect::<Vec<_>>()
                .join(",")
        }
    }
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
        other => parse_date(value_to_string(other, 0).trim()),
    }
}

/// ECMAScript TimeClip.
pub fn time_clip(n: f64) -> Option<i64> {
    if !n.is_finite() || n.abs() > MAX_DATE_MS as f64 {
        return None;
    }
    Some(n.trunc() as i64)
}

/// JSON.stringify of a string (for messages that embed a JSON string literal).
pub fn json_string(s: &str) -> String {
    let mut out = String::new();
    crate::wire::value::write_string(&mut out, s);
    out
}

/// Number of UTF-16 code units (JavaScript `.length`).
pub fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Own enumerable keys in JavaScript order: integer-like keys ascending first, then the
/// rest (in stored order — the value model does not keep insertion order).
pub fn own_keys(map: &crate::wire::Map) -> Vec<&String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolation_and_truthiness() {
        assert_eq!(to_js_string(None), "undefined");
        assert_eq!(to_js_string(Some(&Value::Null)), "null");
        assert_eq!(to_js_string(Some(&Value::num(1.5))), "1.5");
        assert_eq!(to_js_string(Some(&Value::Array(vec![Value::num(1), Value::Null, Value::str("a")]))), "1,,a");
        assert_eq!(to_js_string(Some(&Value::date(0))), "Thu Jan 01 1970 00:00:00 GMT+0000 (Coordinated Universal Time)");
        assert!(!truthy(Some(&Value::str(""))));
        assert!(truthy(Some(&Value::Object(Default::default()))));
        assert!(!truthy(Some(&Value::num(0))));
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
    fn key_order() {
        let m: crate::wire::Map = [("b", 1), ("2", 1), ("a", 1), ("10", 1), ("01", 1)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), Value::num(v)))
            .collect();
        assert_eq!(own_keys(&m), ["2", "10", "01", "a", "b"]);
    }
}
