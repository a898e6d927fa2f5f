//! DO-to-DO calls over the same private hop the router uses (see [`crate::hop`]), for the
//! run DO's retention cleanup.

use worker::{Env, Headers, Method, Request, RequestInit};

use super::env::namespace;
use super::kv::js_error;
use crate::hop::{NAME_HEADER, RPC_PATH_PREFIX};
use crate::wire::router::Binding;
use crate::wire::uri::encode_uri_component;
use crate::wire::{RpcError, Value};

/// The hop request for `method` on instance `name`, with the argument array's JSON text.
pub fn hop_request(name: &str, method: &str, args_json: String) -> worker::Result<Request> {
    let headers = Headers::new();
    headers.set(NAME_HEADER, &encode_uri_component(name))?;
    headers.set("content-type", "application/json")?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_headers(headers).with_body(Some(args_json.into()));
    Request::new_with_init(&format!("https://celld.internal{RPC_PATH_PREFIX}{method}"), &init)
}

/// Call `method(args…)` on instance `name` of `binding`. A thrown error of the callee
/// comes back as its [`RpcError`]; a missing namespace is
/// `world-celld retention missing binding <ENV>` (retention.md §9 of wire.md).
pub async fn call_do(env: &Env, binding: Binding, name: &str, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
    let env_name = binding.env_name();
    let ns = namespace(env, env_name).ok_or_else(|| RpcError::error(format!("world-celld retention missing binding {env_name}")))?;
    let to_err = |e: worker::Error| match e {
        worker::Error::JsError(m) => RpcError::error(m),
        worker::Error::Internal(v) => js_error(&v),
        other => RpcError::error(other.to_string()),
    };
    let stub = ns.id_from_name(name).and_then(|id| id.get_stub()).map_err(to_err)?;
    let body = Value::Array(args).to_json()?;
    let req = hop_request(name, method, body).map_err(to_err)?;
    let mut resp = stub.fetch_with_request(req).await.map_err(to_err)?;
    let status = resp.status_code();
    let text = resp.text().await.map_err(to_err)?;
    let value = Value::parse(&text).map_err(|e| RpcError::error(format!("bad answer from {env_name}/{name}.{method}: {}", e.0)))?;
    if status == 200 {
        return Ok(value);
    }
    let err = value.get("error");
    let field = |k: &str| err.and_then(|e| e.get(k)).and_then(Value::as_str).map(str::to_string);
    Err(RpcError { name: field("name").unwrap_or_else(|| "Error".into()), message: field("message").unwrap_or(text) })
}
