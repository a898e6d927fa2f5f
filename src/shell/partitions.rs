//! The queue binding over a client shard's partitions ([`crate::partitions`]): the
//! router's plan for a queue call when the deployment has more than one partition, the
//! asynchronous fan-out, and [`queue_call`] for the objects that call a client shard
//! themselves (a run's cleanup).
//!
//! With `QUEUE_PARTITIONS=1` (and `QUEUE_PARTITIONS_PREVIOUS` unset or 1) none of this
//! runs: the router forwards a queue call as any other. Unset, `QUEUE_PARTITIONS` is
//! [`crate::config::DEFAULT_QUEUE_PARTITIONS`].

use js_sys::Array;
use wasm_bindgen::prelude::*;
use worker::Env;

use super::call::call_env;
use super::serve::{args_or_refusal, result_reply};
use crate::config::Config;
use crate::partitions::{self, fans_out, route_enqueue, PartitionHost};
use crate::wire::router::Binding;
use crate::wire::{RpcError, Value};

struct Host<'a> {
    env: &'a Env,
    /// The error when the queue namespace is not bound (the caller's wording).
    missing: &'a str,
}

impl PartitionHost for Host<'_> {
    async fn call(&self, instance: &str, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        let missing = || RpcError::error(self.missing.to_string());
        call_env(self.env, Binding::Queue.env_name(), missing, instance, method, args).await
    }
}

/// `(count, cover)`: the partitions enqueues go to, and those shard-wide calls reach.
fn counts(config: &Config) -> Result<(u32, u32), RpcError> {
    Ok((config.queue_partitions()?, config.partition_cover()?))
}

/// Call `method(args…)` on client queue shard `shard` as the router would: over its
/// partitions when there are several, else on the instance itself. `missing`: the error
/// message when the queue namespace is not bound.
pub(super) async fn queue_call(env: &Env, shard: &str, method: &str, args: Vec<Value>, missing: &str) -> Result<Value, RpcError> {
    let (count, cover) = counts(&super::env::config(env))?;
    let host = Host { env, missing };
    if cover <= 1 {
        return host.call(shard, method, args).await;
    }
    partitions::call(&host, shard, method, args, count, cover).await
}

/// The router's plan for a queue call on client shard `name` (the deployment's partition
/// variables as the environment has them): `[1, status, body]` answer (a refused body or
/// variable), `[2, instance]` hop with the body as received (an `enqueue`, to its
/// partition; a method one instance answers), or `[0]`: call [`queue_partitions_call`].
#[wasm_bindgen(js_name = queuePlan)]
pub fn queue_plan(
    method: &str,
    name: &str,
    body: &[u8],
    partitions: Option<String>,
    previous: Option<String>,
    max_inflight: Option<String>,
) -> Array {
    let config = Config::from_lookup(|v| match v {
        "QUEUE_PARTITIONS" => partitions.clone(),
        "QUEUE_PARTITIONS_PREVIOUS" => previous.clone(),
        "QUEUE_MAX_INFLIGHT" => max_inflight.clone(),
        _ => None,
    });
    let answer = |reply: Array| Array::of3(&JsValue::from(1), &reply.get(0), &reply.get(1));
    let (count, cover) = match counts(&config) {
        Ok(c) => c,
        Err(e) => return answer(result_reply(Err(e), f64::NAN)),
    };
    let hop = |instance: &str| Array::of2(&JsValue::from(2), &JsValue::from_str(instance));
    if cover <= 1 || !(method == "enqueue" || fans_out(method)) {
        return hop(name);
    }
    if method != "enqueue" {
        return Array::of1(&JsValue::from(0));
    }
    match args_or_refusal(body) {
        Ok(args) => hop(&route_enqueue(name, &args, count)),
        Err(refusal) => answer(refusal),
    }
}

/// A shard-wide queue call over the partitions: `[status, body]`.
#[wasm_bindgen(js_name = queuePartitionsCall)]
pub async fn queue_partitions_call(env: Env, name: String, method: String, body: Vec<u8>) -> Array {
    let args = match args_or_refusal(&body) {
        Ok(a) => a,
        Err(refusal) => return refusal,
    };
    let missing = format!("missing binding {}", Binding::Queue.env_name());
    result_reply(queue_call(&env, &name, &method, args, &missing).await, f64::NAN)
}
