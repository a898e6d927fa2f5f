//! How an arbitrary JavaScript value the reference would keep in storage (structured
//! clone) is kept as text in our [`Store`](crate::store::Store) (IndexDO values, StreamDO
//! registry values, and StreamDO chunks that are not byte arrays: byte-array chunks are
//! stored as raw bytes, see [`crate::stream::records`], which still reads the `b` form
//! earlier versions wrote for them).
//!
//! One leading tag character, then the payload:
//!
//! | tag | value | payload |
//! | --- | --- | --- |
//! | `s` | string | the string itself (no escaping; index values are usually JSON text) |
//! | `b` | byte array | standard padded base64 (4/3 of the byte length) |
//! | `j` | anything else | tagged JSON (`wire.md` §6), with an invalid Date kept as `{"__type":"Date","iso":"Invalid Date"}` |
//!
//! Size: the platform limits one stored value to about 2.2 MB (SQLite-backed objects), so a
//! byte array stored here can hold about 1.57 MiB (base64 overhead; measured 1 649 976
//! bytes) and a string about 2 MB. Larger values fail in the platform's `put`
//! (`SQLITE_TOOBIG`) and the call rolls back, as in the reference. (Byte-array stream
//! chunks, stored raw, hold about 2.1 MiB: 2 199 961 bytes measured.)
//!
//! JavaScript `undefined` is never stored: the platform's `put` refuses it
//! ([`super::js_args::put_undefined`]).
//!
//! Knows no core's keys: callers choose where a value goes.

use crate::wire::{base64, RpcError, Value};

pub fn encode(value: &Value) -> String {
    match value {
        Value::String(s) => {
            let mut out = String::with_capacity(s.len() + 1);
            out.push('s');
            out.push_str(s);
            out
        }
        Value::Bytes(b) => {
            let mut out = String::with_capacity(b.len().div_ceil(3) * 4 + 1);
            out.push('b');
            out.push_str(&base64::encode(b));
            out
        }
        other => {
            let mut out = String::from("j");
            other.write_json_keeping_invalid_dates(&mut out);
            out
        }
    }
}

/// `key` only names the record in the corruption error.
pub fn decode(key: &str, text: &str) -> Result<Value, RpcError> {
    let corrupt = || RpcError::error(format!("corrupt stored value at {key}"));
    let mut chars = text.chars();
    let tag = chars.next().ok_or_else(corrupt)?;
    let payload = chars.as_str();
    match tag {
        's' => Ok(Value::String(payload.to_string())),
        'b' => base64::decode(payload).map(Value::Bytes).ok_or_else(corrupt),
        'j' => Value::parse(payload).map_err(|_| corrupt()),
        _ => Err(corrupt()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrips_every_kind() {
        let values = [
            Value::str(""),
            Value::str("{\"runId\":\"r\"} ü \u{0}"),
            Value::Bytes(vec![]),
            Value::Bytes(vec![0, 0xfd, 0xfe, 0xff]),
            Value::Null,
            Value::Bool(true),
            Value::num(-1.5),
            Value::date(0),
            Value::Date(None),
            Value::Array(vec![Value::Bytes(vec![1]), Value::Date(None), Value::str("x")]),
            Value::object([("owner", Value::object([("runId", Value::str("r"))])), ("reservedAt", Value::num(5))]),
        ];
        for v in values {
            let text = encode(&v);
            assert_eq!(decode("k", &text).unwrap(), v, "{text}");
        }
        assert_eq!(encode(&Value::Bytes(vec![1, 2, 3])), "bAQID");
        assert_eq!(encode(&Value::str("v1")), "sv1");
    }

    #[test]
    fn corrupt_values_are_errors() {
        for bad in ["", "x", "b!!", "j{"] {
            assert_eq!(decode("k", bad).unwrap_err().message, "corrupt stored value at k");
        }
    }
}
