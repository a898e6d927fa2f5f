//! The router → Durable Object hop, private to this worker, defined once for all four
//! classes.
//!
//! The router (the JavaScript entry, `src/shell/entry.mjs`, around the decisions of
//! [`crate::wire::router`]) calls an authenticated, whitelisted RPC on the instance over
//! workerd's JavaScript RPC as `stub.call(method, name, body)`: the method name, the
//! decoded instance name and the request body exactly as received (bytes, unchecked). The
//! DO checks and decodes the body once ([`decode_args`]: the router's 400/413 body
//! verdicts, then the argument array), runs the core method in one transaction and answers
//! `[status, body]`: `200` with the tagged-JSON result, `500` with the wire error body
//! `{"error":{"name","message"}}` of a thrown error, or the router's own error answer for a
//! bad body (nothing is read or written then). The router passes the answer through.
//! Because both sides use the same codec, dates, bytes and null-vs-absent survive.
//!
//! Bodies too large for one RPC argument (workerd caps serialized RPC arguments at
//! 32 MiB) take the same call over `stub.fetch` instead, with the method and the
//! percent-encoded name in headers ([`METHOD_HEADER`], [`NAME_HEADER`]).
//!
//! Knows no core's methods: the router's whitelist and each core's dispatch decide those.

use crate::config::Config;
use crate::wire::check::MAX_VALUES;
use crate::wire::value::{decode_utf8, parse_at_most, ParseFailure};
use crate::wire::{RouterError, RpcError, Value};

/// Header of the fetch form of the hop carrying the method name.
pub const METHOD_HEADER: &str = "x-celld-method";
/// Header of the fetch form of the hop carrying the percent-encoded instance name.
pub const NAME_HEADER: &str = "x-celld-name";

/// What a core method sees of its call besides storage.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    /// The single clock reading of this call (epoch ms).
    pub now: i64,
    /// The DO instance name (`idFromName` argument).
    pub name: &'a str,
    pub config: &'a Config,
}

/// Positional arguments. A JSON `null` counts as "not provided" for optional arguments.
#[derive(Debug, Clone, Copy)]
pub struct Args<'a>(pub &'a [Value]);

impl<'a> Args<'a> {
    /// The raw argument (`None` when the array is shorter).
    pub fn raw(&self, i: usize) -> Option<&'a Value> {
        self.0.get(i)
    }
    /// The argument, with `null` treated as absent.
    pub fn present(&self, i: usize) -> Option<&'a Value> {
        self.0.get(i).filter(|v| !v.is_null())
    }
    pub fn str(&self, i: usize) -> Option<&'a str> {
        self.present(i).and_then(Value::as_str)
    }
}

/// The `(status, body)` a DO answers for a core method's result.
pub fn answer(result: Result<Value, RpcError>) -> (u16, String) {
    match result.and_then(|v| v.to_json().map_err(RpcError::from)) {
        Ok(body) => (200, body),
        Err(e) => (500, e.body()),
    }
}

/// Check and decode an RPC body as received (wire.md §4), in one pass: UTF-8 with a BOM
/// dropped and invalid sequences replaced, then JSON of at most [`MAX_VALUES`] values whose
/// top level is an array. The errors are the router's answers for a bad body (400
/// malformed / not an array, 413 too many values), the verdicts of
/// [`check`](crate::wire::check::check).
pub fn decode_args(bytes: &[u8]) -> Result<Vec<Value>, RouterError> {
    match parse_at_most(&decode_utf8(bytes), MAX_VALUES) {
        Ok(Value::Array(args)) => Ok(args),
        Ok(_) => Err(RouterError::NotAnArray),
        Err(ParseFailure::TooManyValues) => Err(RouterError::TooManyValues),
        Err(ParseFailure::Malformed(_)) => Err(RouterError::MalformedBody),
    }
}

/// Placeholder answer of a whitelisted method whose DO core has not landed yet: an
/// explicit error naming it, never a fake success.
pub fn not_implemented(class: &str, method: &str) -> RpcError {
    RpcError::error(format!("{class}.{method} is not implemented in world-celld-rs yet"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::check::{check, Verdict};

    /// The one-pass decode gives the router check's verdict on every kind of body.
    #[test]
    fn decode_args_agrees_with_the_body_check() {
        let verdict = |bytes: &[u8]| match decode_args(bytes) {
            Ok(_) => Verdict::Array,
            Err(RouterError::NotAnArray) => Verdict::NotArray,
            Err(RouterError::TooManyValues) => Verdict::TooManyValues,
            Err(_) => Verdict::Malformed,
        };
        let cases: Vec<String> = [
            "",
            "[",
            "[]",
            "{}",
            "null",
            "1",
            "[1,]",
            " [1] ",
            "\u{feff}[1]",
            "[1] x",
            r#"[{"__type":"Uint8Array","data":"AQID"}]"#,
            r#"[{"__type":"Uint8Array","data":"!!"}]"#,
            r#"[{"__type":"x","data":"!!","__type":"Uint8Array"}]"#,
            r#"[{"__type":"Uint8Array","data":"!!","data":"AQ=="}]"#,
            r#"[{"__type":"Date","iso":"2020-01-01T00:00:00.000Z"}]"#,
            r#"["\ud800"]"#,
            r#"["\ud8"]"#,
            "[1e400]",
            "[-1e400,{\"a\":1e999}]",
            "[1e400",
            r#"{"__type":"Uint8Array","data":"AQID"}"#,
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([
            format!("{}{}", "[".repeat(128), "]".repeat(128)),
            format!("{}{}", "[".repeat(129), "]".repeat(129)),
            format!("[{}0]", "0,".repeat(MAX_VALUES)),
            format!("[{}0]", "0,".repeat(MAX_VALUES - 2)),
            format!("[{}{{\"a\":[1,2]}}]", "0,".repeat(MAX_VALUES - 4)),
            format!("[{}{{\"a\":[1,2]}}]", "0,".repeat(MAX_VALUES - 3)),
        ])
        .collect();
        for text in &cases {
            assert_eq!(verdict(text.as_bytes()), check(&decode_utf8(text.as_bytes())), "{}", &text[..text.len().min(80)]);
        }
        assert_eq!(verdict(b"\xEF\xBB\xBF[1]"), Verdict::Array);
        assert_eq!(decode_args(b"[1,\"a\"]").unwrap(), vec![Value::num(1), Value::str("a")]);
    }
}
