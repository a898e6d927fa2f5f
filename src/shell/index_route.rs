//! `POST /v1/index/{runs|hooks}/{op}`: the router's `I<op>` decision ([`super::entry`])
//! hands the body here. The decisions are [`crate::coordinator`]'s; this file provides its
//! host (calls through `hop.mjs`) and the random claim ids.
//!
//! Like the 0.3 facade, an operation that is one hop (`runs.commit`) has a synchronous
//! plan ([`index_plan`]) so that the router makes the hop itself; the shard's answer is the
//! operation's answer, byte for byte.

use js_sys::{Array, Uint8Array};
use wasm_bindgen::prelude::*;
use worker::Env;

use super::call::call_env;
use super::serve::{args_or_refusal, result_reply};
use crate::coordinator::{self, uuid_v4};
use crate::facade::driver::FacadeHost;
use crate::protocol::calls::Target;
use crate::wire::router::Binding;
use crate::wire::router::IndexOp;
use crate::wire::{RpcError, Value};

struct Host {
    env: Env,
}

/// The reference has no binding check on this route: a missing namespace is the
/// `TypeError` of its `namespace.idFromName(…)`.
fn missing() -> RpcError {
    RpcError::type_error("Cannot read properties of undefined (reading 'idFromName')")
}

impl FacadeHost for Host {
    async fn call(&self, target: &Target, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        call_env(&self.env, target.env_binding(), missing, target.instance(), method, args).await
    }

    async fn lifecycle_status(&self, run_id: &str) -> Result<Value, RpcError> {
        call_env(&self.env, Binding::Runs.env_name(), missing, run_id, crate::protocol::leases::LIFECYCLE_METHOD, Vec::new()).await
    }
}

/// A fresh v4 UUID (`crypto.randomUUID()`).
fn claim_id() -> Result<String, RpcError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| RpcError::error(format!("crypto: {e}")))?;
    Ok(uuid_v4(bytes))
}

fn operation(name: &str) -> Result<IndexOp, RpcError> {
    IndexOp::from_name(name).ok_or_else(|| RpcError::error(format!("unknown index operation: {name}")))
}

/// One coordinator operation: `[status, body]`. A body the router would refuse gets its
/// 400/413 answer.
#[wasm_bindgen(js_name = indexCall)]
pub async fn index_call(env: Env, op: String, body: Vec<u8>) -> Array {
    let args = match args_or_refusal(&body) {
        Ok(a) => a,
        Err(refusal) => return refusal,
    };
    let host = Host { env };
    let result = async {
        let op = operation(&op)?;
        let claim = if op == IndexOp::HooksReserve { claim_id()? } else { String::new() };
        coordinator::call(&host, op, &args, &claim).await
    };
    result_reply(result.await, f64::NAN)
}

/// The synchronous plan of an operation: `[1, status, body]` answer (a body the router
/// refuses), `[2, ENV, instance, method, body]` one hop with this body, or `[0]`: call
/// [`index_call`] (which checks the body itself).
#[wasm_bindgen(js_name = indexPlan)]
pub fn index_plan(op: &str, body: &[u8]) -> Array {
    let asynchronous = || Array::of1(&JsValue::from(0));
    // Only an operation that can be one hop decodes the body here ([`index_call`] does).
    let Some(op) = IndexOp::from_name(op).filter(|op| coordinator::has_plan(*op)) else { return asynchronous() };
    let args = match args_or_refusal(body) {
        Ok(a) => a,
        Err(refusal) => return Array::of3(&JsValue::from(1), &refusal.get(0), &refusal.get(1)),
    };
    let Some(call) = coordinator::plan(op, &args) else { return asynchronous() };
    let Ok(body) = Value::Array(call.args).to_json() else { return asynchronous() };
    let plan = Array::of4(&JsValue::from(2), &call.target.env_binding().into(), &call.target.instance().into(), &call.method.into());
    plan.push(&Uint8Array::from(body.as_bytes()));
    plan
}
