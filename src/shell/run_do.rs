//! `WorkflowRunDO`'s object: every RPC but `cleanupNow` is one transaction of the run core,
//! served synchronously; the retention cleanup (its alarm, and `cleanupNow`, which runs the
//! loop before answering) alternates transactions with calls to the other Durable Objects
//! ([`crate::run::cleanup::driver`]).
//!
//! Decides no run rule ([`crate::run`] does): it makes the calls the cleanup plans.

use futures_util::future::join_all;
use js_sys::Array;
use wasm_bindgen::prelude::*;
use worker::worker_sys::DurableObjectState;
use worker::Env;

use super::alarm::apply_alarm;
use super::call::{call_do, call_env};
use super::env::config;
use super::kv::{in_transaction, ObjectStorage};
use super::serve::{args_or_refusal, go_async, now_ms, result_reply, serve_sync};
use crate::config::Config;
use crate::protocol::calls::Target;
use crate::queue::driver::REVOKE_METHOD;
use crate::run::cleanup::driver::{self, CleanupHost};
use crate::run::cleanup::CleanupArgs;
use crate::run::lease::{Revocation, Watch};
use crate::store::alarm::Alarm;
use crate::store::Store;
use crate::wire::router::Binding;
use crate::wire::{RpcError, Value};

/// The run methods that do I/O between transactions (served by `rpcAsync`):
/// `cleanupNow` and the cron sweep's internal `enforceRetention`.
fn is_async(method: &str) -> bool {
    method == "cleanupNow" || method == "enforceRetention"
}

#[wasm_bindgen(js_name = RunObject)]
pub struct RunObject {
    storage: ObjectStorage,
    env: Env,
    config: Config,
}

/// The cleanup loop's view of this object: its storage and the other namespaces.
struct Host<'a> {
    storage: &'a ObjectStorage,
    env: &'a Env,
}

impl CleanupHost for Host<'_> {
    async fn transact<T>(
        &self,
        f: impl FnOnce(&mut dyn Store, i64, &mut Alarm) -> std::result::Result<T, RpcError>,
    ) -> std::result::Result<T, RpcError> {
        let storage = self.storage;
        let mut alarm = Alarm::unknown();
        let now = now_ms();
        let (out, revocations) = in_transaction(storage, |s| {
            let mut watch = Watch::new(s, now);
            let out = f(&mut watch, now, &mut alarm)?;
            Ok((out, watch.finish()?))
        })?;
        apply_alarm(storage, alarm.change()).await?;
        revoke(self.env, &revocations).await;
        Ok(out)
    }

    async fn call(&self, binding: Binding, name: &str, method: &str, args: Vec<Value>) -> std::result::Result<Value, RpcError> {
        // A client queue shard answers over its partitions (a run's expiry fences them all).
        if binding == Binding::Queue {
            let missing = format!("world-celld retention missing binding {}", binding.env_name());
            return super::partitions::queue_call(self.env, name, method, args, &missing).await;
        }
        call_do(self.env, binding, name, method, args).await
    }

    async fn call_index(&self, target: &Target, method: &str, args: Vec<Value>) -> std::result::Result<Value, RpcError> {
        // Once the archive migration is done the archive holds no run's index entries:
        // its `expireRun` would only add a fence nobody reads.
        if *target == Target::Archive && !super::facade::archive_in_use(self.env).await {
            return Ok(Value::object([("deleted", Value::num(0))]));
        }
        let env_name = target.env_binding();
        let missing = || RpcError::error(format!("world-celld retention missing binding {env_name}"));
        call_env(self.env, env_name, missing, target.instance(), method, args).await
    }
}

/// Call off the lifecycle leases a committed transaction contradicted (see
/// [`crate::run::lease`]). A failed call is logged: that holder's lease then runs out by
/// itself, within [`crate::protocol::leases::LEASE_MS`].
async fn revoke(env: &Env, revocations: &[Revocation]) {
    let calls = revocations.iter().map(|r| async move {
        let args = vec![Value::str(r.run_id.as_str())];
        let env_name = r.kind.env_binding();
        let missing = || RpcError::error(format!("missing binding {env_name}"));
        if let Err(e) = call_env(env, env_name, missing, &r.holder, REVOKE_METHOD, args).await {
            worker::console_error!("WorkflowRunDO lease revocation at {}: {}: {}", r.holder, e.name, e.message);
        }
    });
    join_all(calls).await;
}

impl RunObject {
    fn host(&self) -> Host<'_> {
        Host { storage: &self.storage, env: &self.env }
    }
}

#[wasm_bindgen(js_class = RunObject)]
impl RunObject {
    /// The methods that never write, comma-separated (see `serve.rs`).
    #[wasm_bindgen(js_name = readOnly)]
    pub fn read_only() -> String {
        crate::run::READ_ONLY.join(",")
    }

    /// The method that revokes a lifecycle lease (the holder's namespace comes with each
    /// revocation).
    #[wasm_bindgen(js_name = leaseRevocation)]
    pub fn lease_revocation() -> String {
        REVOKE_METHOD.to_string()
    }

    #[wasm_bindgen(constructor)]
    pub fn new(state: DurableObjectState, env: Env) -> RunObject {
        let config = config(&env);
        RunObject { storage: ObjectStorage::of(state), env, config }
    }

    /// One RPC: `[status, body, alarm]`, status 0 for `cleanupNow` (see `serve.rs`). The
    /// class sets the alarm after the commit; a committed call is answered even if the
    /// alarm cannot be set (the run is fenced by time regardless, and `rearmCleanup`
    /// re-arms).
    #[wasm_bindgen(js_name = rpcCall)]
    pub fn rpc_call(&self, method: &str, name: &str, body: &[u8], direct: bool) -> Array {
        if is_async(method) {
            return go_async();
        }
        let mut revocations = Vec::new();
        let reply =
            serve_sync(&self.storage, &crate::run::READ_ONLY, &self.config, method, name, body, direct, |s, ctx, alarm, m, args| {
                let (value, owed) = crate::run::call_watched(s, ctx, alarm, m, args)?;
                revocations = owed;
                Ok(value)
            });
        // A committed call that contradicted leases: the class revokes them (`[env binding,
        // holder, runId]` triples in a fourth slot) before answering.
        if !revocations.is_empty() && reply.get(0).as_f64() == Some(200.0) {
            let pairs = Array::new();
            for r in &revocations {
                pairs.push(&Array::of3(&r.kind.env_binding().into(), &JsValue::from_str(&r.holder), &JsValue::from_str(&r.run_id)));
            }
            reply.push(&pairs);
        }
        reply
    }

    /// `cleanupNow`: the cleanup loop, then its result.
    #[wasm_bindgen(js_name = rpcAsync)]
    pub async fn rpc_async(&self, method: String, _name: String, body: Vec<u8>) -> Array {
        let args = match args_or_refusal(&body) {
            Ok(a) => a,
            Err(refusal) => return refusal,
        };
        let result = if method == "enforceRetention" {
            driver::enforce_retention(&self.host(), args.first()).await
        } else if is_async(&method) {
            match CleanupArgs::parse(crate::protocol::hop::Args(&args)) {
                Ok(args) => driver::cleanup_now(&self.host(), args).await,
                Err(e) => Err(e),
            }
        } else {
            Err(RpcError::error(format!("bad internal call: {method} is not asynchronous")))
        };
        result_reply(result, f64::NAN)
    }

    /// The cleanup alarm: one page (retention or terminal cleanup). Never throws: a failed
    /// page is recorded with a backoff alarm by the driver.
    pub async fn alarm(&self) {
        if let Err(e) = driver::run_page(&self.host()).await {
            worker::console_error!("WorkflowRunDO cleanup: {}: {}", e.name, e.message);
        }
    }
}
