//! The tagged-JSON codec ([`world_celld_rs::wire::Value`]) on arbitrary bytes: no panic;
//! when the text decodes, encoding it and decoding the encoding gives the same value (with
//! non-finite numbers as `null`, as `JSON.stringify` writes them), and
//! the encoding is a fixed point (parse → encode → parse → encode gives the same text);
//! `to_json` fails exactly when an invalid Date is inside; the router's allocation-free
//! check ([`check`]) gives the same verdict as the decode.
#![no_main]

use libfuzzer_sys::fuzz_target;
use world_celld_rs::wire::check::{check, Verdict};
use world_celld_rs::wire::value::decode_utf8;
use world_celld_rs::wire::Value;

/// The value `JSON.stringify` keeps: non-finite numbers (a number beyond a double parses as
/// ±Infinity, as `JSON.parse` reads it) are written as `null`.
fn as_written(v: &Value) -> Value {
    match v {
        Value::Number(n) if !n.is_finite() => Value::Null,
        Value::Array(items) => Value::Array(items.iter().map(as_written).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), as_written(v))).collect()),
        other => other.clone(),
    }
}

fn has_invalid_date(v: &Value) -> bool {
    match v {
        Value::Date(None) => true,
        Value::Array(items) => items.iter().any(has_invalid_date),
        Value::Object(m) => m.values().any(has_invalid_date),
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let text = decode_utf8(data);
    let parsed = Value::parse(&text);
    match (check(&text), &parsed) {
        (Verdict::Array, Ok(Value::Array(_))) | (Verdict::Malformed, Err(_)) | (Verdict::TooManyValues, _) => {}
        (Verdict::NotArray, Ok(v)) if !matches!(v, Value::Array(_)) => {}
        (verdict, parsed) => panic!("check says {verdict:?}, parse says {parsed:?}"),
    }
    let Ok(value) = parsed else { return };
    assert_eq!(value.to_json().is_err(), has_invalid_date(&value));
    let mut first = String::new();
    value.write_json_keeping_invalid_dates(&mut first);
    let again = Value::parse(&first).unwrap_or_else(|e| panic!("our own encoding does not decode: {e:?}\n{first}"));
    assert_eq!(again, as_written(&value), "value changed by a round trip through {first}");
    let mut second = String::new();
    again.write_json_keeping_invalid_dates(&mut second);
    assert_eq!(second, first, "encoding is not a fixed point");
});
