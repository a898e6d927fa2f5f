//! The index shards' objects: `RunCatalogDO` ([`crate::catalog`]), `HookTokenDO` and
//! `HookIdDO` ([`crate::hook_shard`]). None of their methods is on `/v1/rpc`; the 0.3
//! `index` facade ([`super::facade`]) and the run DO's retention cleanup call them over the
//! hop.
//!
//! Methods that only touch storage are served synchronously (`rpcCall`, one
//! transaction). Two kinds go through `rpcAsync`: the methods that must see the current
//! alarm first (catalog `expireRun`, hook `reserve`: they arm it only if none is earlier),
//! and the hook shards' lifecycle-checked `get` / `finalize` / `publish`, which ask the
//! owner's run DO `getLifecycleStatus()` ([`crate::hook_shard::driver`]).
//!
//! The alarm compacts fences / abandoned claims in one transaction; when that fails it is
//! re-armed at [`crate::lifecycle::compaction_retry`].

use js_sys::Array;
use wasm_bindgen::prelude::*;
use worker::worker_sys::DurableObjectState;
use worker::{Env, Storage};

use super::alarm::apply_alarm;
use super::call::call_env;
use super::env::config;
use super::kv::{in_transaction, ObjectStorage};
use super::serve::{args_or_refusal, go_async, now_ms, result_reply, serve_sync};
use crate::config::Config;
use crate::hook_shard::driver::{self as hook_driver, ShardHost, MISSING_RUNS_BINDING};
use crate::hook_shard::Family;
use crate::hop::{Args, Ctx};
use crate::store::alarm::Alarm;
use crate::store::Store;
use crate::wire::router::Binding;
use crate::wire::{RpcError, Value};

/// The current alarm (epoch ms), read before a call that arms it at most.
async fn current_alarm(storage: &Storage) -> Result<Option<i64>, RpcError> {
    storage.get_alarm().await.map_err(|e| RpcError::error(format!("alarm: {e}")))
}

/// One compaction pass in one transaction, then its alarm; a failed pass (rolled back)
/// re-arms at now + 1000 ms.
async fn compact(storage: &ObjectStorage, class: &str, pass: impl FnOnce(&mut dyn Store, i64, &mut Alarm) -> Result<usize, RpcError>) {
    let now = now_ms();
    let mut alarm = Alarm::unknown();
    if let Err(e) = in_transaction(storage, |store| pass(store, now, &mut alarm)) {
        worker::console_error!("{class} compaction: {}: {}", e.name, e.message);
        alarm = Alarm::unknown();
        crate::lifecycle::compaction_retry(now, &mut alarm);
    }
    if let Err(e) = apply_alarm(storage, alarm.change()).await {
        worker::console_error!("{class} compaction alarm: {}", e.message);
    }
}

// ---- RunCatalogDO ----------------------------------------------------------------------

/// The catalog methods that never write (served without a transaction; see `serve.rs`).
const CATALOG_READ_ONLY: [&str; 1] = ["list"];

#[wasm_bindgen(js_name = CatalogObject)]
pub struct CatalogObject {
    storage: ObjectStorage,
    config: Config,
}

#[wasm_bindgen(js_class = CatalogObject)]
impl CatalogObject {
    #[wasm_bindgen(constructor)]
    pub fn new(state: DurableObjectState, env: Env) -> CatalogObject {
        CatalogObject { storage: ObjectStorage::of(state), config: config(&env) }
    }

    /// The methods that never write, comma-separated (see `serve.rs`).
    #[wasm_bindgen(js_name = readOnly)]
    pub fn read_only() -> String {
        CATALOG_READ_ONLY.join(",")
    }

    /// One RPC: `[status, body, alarm]`, status 0 for `expireRun` (see `serve.rs`).
    #[wasm_bindgen(js_name = rpcCall)]
    pub fn rpc_call(&self, method: &str, name: &str, body: &[u8], direct: bool) -> Array {
        if crate::catalog::reads_alarm(method) {
            return go_async();
        }
        serve_sync(&self.storage, &CATALOG_READ_ONLY, &self.config, method, name, body, direct, crate::catalog::call)
    }

    /// `expireRun`: the current alarm first, then one transaction, then the alarm change.
    #[wasm_bindgen(js_name = rpcAsync)]
    pub async fn rpc_async(&self, method: String, name: String, body: Vec<u8>) -> Array {
        let args = match args_or_refusal(&body) {
            Ok(a) => a,
            Err(refusal) => return refusal,
        };
        let result = async {
            let mut alarm = Alarm::new(current_alarm(&self.storage).await?);
            let ctx = Ctx { now: now_ms(), name: &name, config: &self.config };
            let out = in_transaction(&self.storage, |store| crate::catalog::call(store, &ctx, &mut alarm, &method, Args(&args)))?;
            apply_alarm(&self.storage, alarm.change()).await?;
            Ok(out)
        };
        result_reply(result.await, f64::NAN)
    }

    /// Fence compaction.
    pub async fn alarm(&self) {
        compact(&self.storage, crate::catalog::CLASS, crate::catalog::alarm).await;
    }
}

// ---- HookTokenDO / HookIdDO ------------------------------------------------------------

/// One hook shard instance of either family.
struct HookShard {
    family: Family,
    storage: ObjectStorage,
    env: Env,
    config: Config,
}

/// The driver's view of a hook shard: its storage (reading the current alarm first when
/// the method arms it at most) and the run DOs.
struct Host<'a> {
    shard: &'a HookShard,
    reads_alarm: bool,
}

impl ShardHost for Host<'_> {
    async fn transact<T>(&self, f: impl FnOnce(&mut dyn Store, i64, &mut Alarm) -> Result<T, RpcError>) -> Result<T, RpcError> {
        let storage = &self.shard.storage;
        let mut alarm = if self.reads_alarm { Alarm::new(current_alarm(storage).await?) } else { Alarm::unknown() };
        let now = now_ms();
        let out = in_transaction(storage, |store| f(store, now, &mut alarm))?;
        apply_alarm(storage, alarm.change()).await?;
        Ok(out)
    }

    async fn call(&self, binding: Binding, name: &str, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        call_env(&self.shard.env, binding.env_name(), || RpcError::error(MISSING_RUNS_BINDING), name, method, args).await
    }
}

impl HookShard {
    fn new(family: Family, state: DurableObjectState, env: Env) -> HookShard {
        let config = config(&env);
        HookShard { family, storage: ObjectStorage::of(state), env, config }
    }

    fn is_async(&self, method: &str) -> bool {
        crate::hook_shard::reads_alarm(method) || hook_driver::is_lifecycle_checked(self.family, method)
    }

    fn rpc_call(&self, method: &str, name: &str, body: &[u8], direct: bool) -> Array {
        if self.is_async(method) {
            return go_async();
        }
        let family = self.family;
        serve_sync(&self.storage, &[], &self.config, method, name, body, direct, |store, ctx, alarm, m, args| {
            crate::hook_shard::call(store, family, ctx.now, alarm, m, args)
        })
    }

    async fn rpc_async(&self, method: String, body: Vec<u8>) -> Array {
        let args = match args_or_refusal(&body) {
            Ok(a) => a,
            Err(refusal) => return refusal,
        };
        let host = Host { shard: self, reads_alarm: crate::hook_shard::reads_alarm(&method) };
        result_reply(hook_driver::call(&host, self.family, &method, Args(&args)).await, f64::NAN)
    }

    async fn alarm(&self) {
        let family = self.family;
        compact(&self.storage, family.class(), |store, now, alarm| crate::hook_shard::compaction::alarm(store, family, now, alarm)).await;
    }
}

#[wasm_bindgen(js_name = HookTokenObject)]
pub struct HookTokenObject(HookShard);

#[wasm_bindgen(js_class = HookTokenObject)]
impl HookTokenObject {
    #[wasm_bindgen(constructor)]
    pub fn new(state: DurableObjectState, env: Env) -> HookTokenObject {
        HookTokenObject(HookShard::new(Family::Token, state, env))
    }

    /// The methods that never write: none are served without a transaction.
    #[wasm_bindgen(js_name = readOnly)]
    pub fn read_only() -> String {
        String::new()
    }

    /// One RPC: `[status, body, alarm]`, status 0 for the asynchronous methods.
    #[wasm_bindgen(js_name = rpcCall)]
    pub fn rpc_call(&self, method: &str, name: &str, body: &[u8], direct: bool) -> Array {
        self.0.rpc_call(method, name, body, direct)
    }

    /// `reserve`, `get`, `finalize`.
    #[wasm_bindgen(js_name = rpcAsync)]
    pub async fn rpc_async(&self, method: String, _name: String, body: Vec<u8>) -> Array {
        self.0.rpc_async(method, body).await
    }

    /// Claim compaction.
    pub async fn alarm(&self) {
        self.0.alarm().await;
    }
}

#[wasm_bindgen(js_name = HookIdObject)]
pub struct HookIdObject(HookShard);

#[wasm_bindgen(js_class = HookIdObject)]
impl HookIdObject {
    #[wasm_bindgen(constructor)]
    pub fn new(state: DurableObjectState, env: Env) -> HookIdObject {
        HookIdObject(HookShard::new(Family::Id, state, env))
    }

    /// The methods that never write: none are served without a transaction.
    #[wasm_bindgen(js_name = readOnly)]
    pub fn read_only() -> String {
        String::new()
    }

    /// One RPC: `[status, body, alarm]`, status 0 for the asynchronous methods.
    #[wasm_bindgen(js_name = rpcCall)]
    pub fn rpc_call(&self, method: &str, name: &str, body: &[u8], direct: bool) -> Array {
        self.0.rpc_call(method, name, body, direct)
    }

    /// `reserve`, `get`, `publish`.
    #[wasm_bindgen(js_name = rpcAsync)]
    pub async fn rpc_async(&self, method: String, _name: String, body: Vec<u8>) -> Array {
        self.0.rpc_async(method, body).await
    }

    /// Claim compaction.
    pub async fn alarm(&self) {
        self.0.alarm().await;
    }
}
