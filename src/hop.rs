//! The router → Durable Object hop, private to this worker, defined once for all four
//! classes.
//!
//! The router forwards an authenticated, whitelisted call as `POST /rpc/<method>` to the
//! instance, with the instance name percent-encoded in [`NAME_HEADER`] and the request's
//! argument array (the router's already-checked UTF-8 text) as the body. The DO answers
//! either `200` with the tagged-JSON result, or `500` with the wire error body
//! `{"error":{"name","message"}}` of a thrown error; the router passes both through.
//! Because both sides use the same codec, dates, bytes and null-vs-absent survive.

use crate::config::Config;
use crate::wire::{RpcError, Value};

pub const NAME_HEADER: &str = "x-celld-name";
pub const RPC_PATH_PREFIX: &str = "/rpc/";

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

/// Split a hop request path into the method name.
pub fn method_from_path(path: &str) -> Option<&str> {
    path.strip_prefix(RPC_PATH_PREFIX).filter(|m| !m.is_empty())
}

/// Placeholder answer of a whitelisted method whose DO core has not landed yet: an
/// explicit error naming it, never a fake success.
pub fn not_implemented(class: &str, method: &str) -> RpcError {
    RpcError::error(format!("{class}.{method} is not implemented in world-celld-rs yet"))
}
