//! The DO side of the router → DO hop (see [`crate::hop`]), shared by all four classes:
//! decode the forwarded call, run the core method in one storage transaction with one
//! clock reading, answer `(status, body)`.

use worker::{Env, Request, Response, Result, State};

use super::env::config;
use super::kv::in_transaction;
use crate::hop::{answer, method_from_path, Args, Ctx, NAME_HEADER};
use crate::store::Store;
use crate::wire::uri::decode_uri_component;
use crate::wire::{RpcError, Value};

/// A core's RPC dispatcher.
pub type CoreCall = fn(&mut dyn Store, &Ctx, &str, Args) -> std::result::Result<Value, RpcError>;

/// A decoded hop request.
pub struct HopCall {
    pub method: String,
    pub name: String,
    pub args: Vec<Value>,
}

/// Decode the hop request; `Err` is already the DO's error answer.
pub async fn decode(mut req: Request) -> std::result::Result<HopCall, RpcError> {
    let url = req.url().map_err(|e| RpcError::error(e.to_string()))?;
    let method = method_from_path(url.path()).ok_or_else(|| RpcError::error("bad internal call"))?.to_string();
    let name = req
        .headers()
        .get(NAME_HEADER)
        .ok()
        .flatten()
        .and_then(|n| decode_uri_component(&n))
        .ok_or_else(|| RpcError::error("bad internal call: no instance name"))?;
    let text = req.text().await.map_err(|e| RpcError::error(e.to_string()))?;
    let args = match Value::parse(&text) {
        Ok(Value::Array(args)) => args,
        _ => return Err(RpcError::error("bad internal call: body is not an argument array")),
    };
    Ok(HopCall { method, name, args })
}

/// JSON response with a status.
pub fn json(status: u16, body: String) -> Result<Response> {
    let mut resp = Response::ok(body)?.with_status(status);
    resp.headers_mut().set("content-type", "application/json")?;
    Ok(resp)
}

/// Current time in epoch milliseconds.
pub fn now_ms() -> i64 {
    js_sys::Date::now() as i64
}

/// Serve one forwarded RPC with a synchronous core dispatcher.
pub async fn serve(state: &State, env: &Env, req: Request, core: CoreCall) -> Result<Response> {
    let call = match decode(req).await {
        Ok(c) => c,
        Err(e) => return json(500, e.body()),
    };
    let cfg = config(env);
    let ctx = Ctx { now: now_ms(), name: &call.name, config: &cfg };
    let storage = state.storage();
    let result = in_transaction(&storage, |store| core(store, &ctx, &call.method, Args(&call.args)));
    let (status, body) = answer(result);
    json(status, body)
}
