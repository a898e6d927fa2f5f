//! The `scheduled` handler's retention sweep ([`crate::sweep`]): the catalog shards and run
//! DOs it calls, through the same private hop as every DO-to-DO call.
//!
//! Decides nothing: [`crate::sweep`] does.

use wasm_bindgen::prelude::*;
use worker::Env;

use super::call::call_env;
use crate::protocol::calls::RUN_CATALOG_ENV_BINDING;
use crate::sweep::{self, SweepHost};
use crate::wire::{RpcError, Value};

struct Host {
    env: Env,
}

fn missing(name: &'static str) -> impl FnOnce() -> RpcError {
    move || RpcError::error(format!("world-celld retention sweep missing binding {name}"))
}

impl SweepHost for Host {
    async fn list_catalog(&self, shard: &str, options: Value) -> Result<Value, RpcError> {
        call_env(&self.env, RUN_CATALOG_ENV_BINDING, missing(RUN_CATALOG_ENV_BINDING), shard, "list", vec![options]).await
    }

    async fn enforce(&self, run_id: &str, request: Value) -> Result<Value, RpcError> {
        let env_name = crate::wire::router::Binding::Runs.env_name();
        call_env(&self.env, env_name, missing("WORKFLOW_DB"), run_id, "enforceRetention", vec![request]).await
    }

    async fn delete_stale(&self, shard: &str, run_id: &str, name: &str, value: &str) -> Result<Value, RpcError> {
        let args = vec![Value::str(run_id), Value::str(name), Value::str(value)];
        call_env(&self.env, RUN_CATALOG_ENV_BINDING, missing(RUN_CATALOG_ENV_BINDING), shard, "deleteStaleGlobalRun", args).await
    }
}

/// One occurrence of the maximum-age sweep at `scheduled_time` (the controller's
/// `scheduledTime`): its result as JSON text, or the error it failed with.
#[wasm_bindgen(js_name = retentionSweep)]
pub async fn retention_sweep(env: Env, scheduled_time: f64) -> Result<String, JsValue> {
    let get = |name: &str| super::env::var(&env, name);
    let host = Host { env: env.clone() };
    let result = sweep::sweep(&host, get, scheduled_time).await.map_err(|e| JsValue::from_str(&format!("{}: {}", e.name, e.message)))?;
    result.to_value().to_json().map_err(|e| JsValue::from_str(&format!("{e:?}")))
}
