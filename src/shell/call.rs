//! DO-to-DO calls over the same private hop the router uses (see [`crate::protocol::hop`] and
//! `hop.mjs`), for the run DO's retention cleanup, the hook shards' lifecycle checks and
//! the 0.3 `index` facade.
//!
//! Decides nothing: the callers' plans name the target and the method.

use js_sys::{Array, Promise, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use worker::Env;

use super::env::namespace;
use super::kv::js_error;
use crate::wire::router::Binding;
use crate::wire::{RpcError, Value};

#[wasm_bindgen(module = "/src/shell/hop.mjs")]
extern "C" {
    /// `hop(namespace, name, method, body)` → `Promise<[status, body]>`.
    #[wasm_bindgen(catch)]
    fn hop(namespace: &JsValue, name: &str, method: &str, body: &Uint8Array) -> Result<Promise, JsValue>;
}

/// Call `method(args…)` on instance `name` of `binding`. A thrown error of the callee
/// comes back as its [`RpcError`]; a missing namespace is
/// `world-celld retention missing binding <ENV>` (retention.md §9 of wire.md).
pub async fn call_do(env: &Env, binding: Binding, name: &str, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
    let env_name = binding.env_name();
    let missing = || RpcError::error(format!("world-celld retention missing binding {env_name}"));
    call_env(env, env_name, missing, name, method, args).await
}

/// [`call_do`] on the namespace `env[env_name]`, with `missing` the error when it is not
/// bound.
pub async fn call_env(
    env: &Env,
    env_name: &str,
    missing: impl FnOnce() -> RpcError,
    name: &str,
    method: &str,
    args: Vec<Value>,
) -> Result<Value, RpcError> {
    let body = Value::Array(args).to_json()?;
    let (status, bytes) = hop_raw(env, env_name, missing, name, method, body.as_bytes()).await?;
    answer_of(env_name, name, method, status, bytes)
}

/// A hop's reply (`status`, body bytes) as the callee's value, or the error it threw.
pub fn answer_of(env_name: &str, name: &str, method: &str, status: u16, bytes: Vec<u8>) -> Result<Value, RpcError> {
    let text = String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    let value = Value::parse(&text).map_err(|e| RpcError::error(format!("bad answer from {env_name}/{name}.{method}: {}", e.0)))?;
    if status == 200 {
        return Ok(value);
    }
    let err = value.get("error");
    let field = |k: &str| err.and_then(|e| e.get(k)).and_then(Value::as_str).map(str::to_string);
    Err(RpcError { name: field("name").unwrap_or_else(|| "Error".into()), message: field("message").unwrap_or(text) })
}

/// One hop with the body bytes as they are: the callee's status and body bytes.
pub async fn hop_raw(
    env: &Env,
    env_name: &str,
    missing: impl FnOnce() -> RpcError,
    name: &str,
    method: &str,
    body: &[u8],
) -> Result<(u16, Vec<u8>), RpcError> {
    let ns = namespace(env, env_name).ok_or_else(missing)?;
    let promise = hop(&ns, name, method, &Uint8Array::from(body)).map_err(|e| js_error(&e))?;
    let reply: Array = JsFuture::from(promise).await.map_err(|e| js_error(&e))?.unchecked_into();
    let status = reply.get(0).as_f64().unwrap_or(0.0) as u16;
    Ok((status, Uint8Array::new(&reply.get(1)).to_vec()))
}
