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

use crate::config::Config;
use crate::wire::check::{check, Verdict};
use crate::wire::value::decode_utf8;
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

/// Check and decode an RPC body as received (wire.md §4): UTF-8 with a BOM dropped and
/// invalid sequences replaced, then JSON whose top level is an array. The errors are the
/// router's answers for a bad body (400 malformed / not an array, 413 too many values).
pub fn decode_args(bytes: &[u8]) -> Result<Vec<Value>, RouterError> {
    let text = decode_utf8(bytes);
    match check(&text) {
        Verdict::Array => {}
        Verdict::NotArray => return Err(RouterError::NotAnArray),
        Verdict::Malformed => return Err(RouterError::MalformedBody),
        Verdict::TooManyValues => return Err(RouterError::TooManyValues),
    }
    match Value::parse(&text) {
        Ok(Value::Array(args)) => Ok(args),
        Ok(_) => Err(RouterError::NotAnArray),
        Err(_) => Err(RouterError::MalformedBody),
    }
}

/// Placeholder answer of a whitelisted method whose DO core has not landed yet: an
/// explicit error naming it, never a fake success.
pub fn not_implemented(class: &str, method: &str) -> RpcError {
    RpcError::error(format!("{class}.{method} is not implemented in world-celld-rs yet"))
}
