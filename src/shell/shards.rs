//! The index shards' objects: `RunCatalogDO` ([`crate::catalog`]), `HookTokenDO` and
//! `HookIdDO` ([`crate::hook_shard`]). None of their methods is on `/v1/rpc`; the 0.3
//! `index` facade ([`super::facade`]) and the run DO's retention cleanup call them over the
//! hop.
//!
//! Methods served synchronously (`rpcCall`, one buffered call) include those that must see
//! the current alarm first (catalog `expireRun` / `expireKeys`, hook `reserve`: they arm it
//! only if none is earlier): the class reads it before the call (`alarmReaders`, as for
//! QueueDO). The hook shards' reads (`get`, `legacyGet`) are synchronous steps between
//! which the class asks the run DO itself (status 3, `serve.rs`). What goes through
//! `rpcAsync` is what must ask a run DO inside the call: the hook shards' publications
//! (`finalize` / `publish` / `legacyPublish`) without their caller's status
//! ([`crate::hook_shard::driver`]); the catalog's `upsertRunKey` without a lease; and, as
//! fallbacks, an alarm reader called without the alarm and a read whose class could not
//! ask.
//!
//! The alarm compacts fences / abandoned claims in one transaction; when that fails it is
//! re-armed at [`crate::protocol::lifecycle::compaction_retry`].
//!
//! Decides no shard rule ([`crate::catalog`], [`crate::hook_shard`] do).

use js_sys::Array;
use wasm_bindgen::prelude::*;
use worker::worker_sys::DurableObjectState;
use worker::{Env, Storage};

use super::alarm::apply_alarm;
use super::call::call_env;
use super::env::config;
use super::kv::{in_transaction, read_only, ObjectStorage};
use super::serve::{
    args_or_refusal, ask_reply, asked_answer, class_alarm, go_async, lease_holder_reply, lifecycle_ask_reply, now_ms, result_reply,
    serve_args, serve_sync,
};
use crate::catalog::lease::{self, Plan, UPSERT_RUN_KEY};
use crate::catalog::records::text;
use crate::config::Config;
use crate::facade::{refused_put, UPSERT_KEY};
use crate::hook_shard::driver::{self as hook_driver, GetStep, ShardHost, MISSING_RUNS_BINDING};
use crate::protocol::hooks::Family;
use crate::protocol::hop::{Args, Ctx};
use crate::protocol::leases::{
    run_is_expired, HolderName, LifecycleCache, LifecycleHost, CATALOG_KIND, HELD_METHOD, LEASE_METHOD, LIFECYCLE_METHOD, REVOKE_METHOD,
};
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
        crate::protocol::lifecycle::compaction_retry(now, &mut alarm);
    }
    if let Err(e) = apply_alarm(storage, alarm.change()).await {
        worker::console_error!("{class} compaction alarm: {}", e.message);
    }
}

// ---- RunCatalogDO ----------------------------------------------------------------------

/// The catalog methods that never write (served without a transaction; see `serve.rs`).
const CATALOG_READ_ONLY: [&str; 1] = ["list"];

/// What the 0.3 facade's driver answers when the runs namespace is not bound; the shard's
/// [`UPSERT_RUN_KEY`] answers the same.
const MISSING_RUNS_FOR_INDEX: &str = "world-celld index missing binding WORKFLOW_DB";

#[wasm_bindgen(js_name = CatalogObject)]
pub struct CatalogObject {
    storage: ObjectStorage,
    config: Config,
    env: Env,
    /// The runs this shard has seen expired and the lifecycle leases it holds
    /// ([`crate::catalog::lease`]).
    lifecycle: LifecycleCache,
    /// This instance's name, learnt from its first RPC: the holder name of its leases.
    name: HolderName,
}

impl LifecycleHost for CatalogObject {
    async fn lifecycle_status(&self, run_id: &str) -> Result<Value, RpcError> {
        let runs = Binding::Runs.env_name();
        call_env(&self.env, runs, || RpcError::error(MISSING_RUNS_FOR_INDEX), run_id, LIFECYCLE_METHOD, Vec::new()).await
    }

    async fn lifecycle_lease(&self, run_id: &str) -> Result<Option<Value>, RpcError> {
        let Some(args) = self.lease_args() else { return Ok(None) };
        let runs = Binding::Runs.env_name();
        call_env(&self.env, runs, || RpcError::error(MISSING_RUNS_FOR_INDEX), run_id, LEASE_METHOD, args).await.map(Some)
    }

    fn now(&self) -> i64 {
        now_ms()
    }
}

impl CatalogObject {
    /// The arguments of this shard's `leaseLifecycle` (its name and kind), `None` until it
    /// knows its name (it cannot hold leases yet).
    fn lease_args(&self) -> Option<Vec<Value>> {
        self.name.get().map(|holder| vec![Value::String(holder), Value::str(CATALOG_KIND)])
    }

    /// The upsert's transaction (the core's `upsertKey`).
    fn upsert(&self, name: &str, args: &[Value], direct: bool) -> Array {
        serve_args(&self.storage, &CATALOG_READ_ONLY, &self.config, UPSERT_KEY, name, args, direct, Alarm::unknown(), crate::catalog::call)
    }
}

#[wasm_bindgen(js_class = CatalogObject)]
impl CatalogObject {
    #[wasm_bindgen(constructor)]
    pub fn new(state: DurableObjectState, env: Env) -> CatalogObject {
        let config = config(&env);
        CatalogObject { storage: ObjectStorage::of(state), config, env, lifecycle: LifecycleCache::default(), name: HolderName::default() }
    }

    /// The methods that never write, comma-separated (see `serve.rs`).
    #[wasm_bindgen(js_name = readOnly)]
    pub fn read_only() -> String {
        // The lease methods touch no storage.
        let mut methods = CATALOG_READ_ONLY.to_vec();
        methods.extend([REVOKE_METHOD, HELD_METHOD]);
        methods.join(",")
    }

    /// One RPC: `[status, body, alarm]`; status 3 for an `upsertRunKey` that must ask the
    /// run first (`asked`: the class's answer to that ask, see `serve.rs`), status 0 for an
    /// `expireRun` / `expireKeys` whose current alarm the class did not read (`current` is
    /// that alarm, `-1` none set, `NaN` not read).
    #[wasm_bindgen(js_name = rpcCall)]
    pub fn rpc_call(&self, method: &str, name: &str, body: &[u8], direct: bool, current: f64, asked: JsValue) -> Array {
        if let Some(reply) = lease_holder_reply(&self.lifecycle, method, body) {
            return reply;
        }
        if method == UPSERT_RUN_KEY {
            self.name.learn(name);
            let args = match args_or_refusal(body) {
                Ok(a) => a,
                Err(refusal) => return refusal,
            };
            let run_id = text(args.first());
            let now = now_ms();
            let refused = || result_reply(Ok(refused_put()), f64::NAN);
            return match lease::plan(&self.lifecycle, &run_id, now) {
                Plan::Upsert => self.upsert(name, &args, direct),
                Plan::Refuse => refused(),
                // The answer to this run's ask (what `run_is_expired` does after its await).
                Plan::Ask => {
                    let asked = asked_answer(&asked, Binding::Runs.env_name()).filter(|a| a.name == run_id);
                    match asked.map(|a| a.into_lifecycle(&self.lifecycle, now)) {
                        Some(Err(e)) => result_reply(Err(e), f64::NAN),
                        Some(Ok((_, true))) => refused(),
                        Some(Ok((_, false))) => self.upsert(name, &args, direct),
                        None => lifecycle_ask_reply(&self.lifecycle, &run_id, self.lease_args()),
                    }
                }
            };
        }
        if !crate::catalog::reads_alarm(method) {
            return serve_sync(&self.storage, &CATALOG_READ_ONLY, &self.config, method, name, body, direct, crate::catalog::call);
        }
        let Some(current) = class_alarm(current) else { return go_async() };
        let args = match args_or_refusal(body) {
            Ok(a) => a,
            Err(refusal) => return refusal,
        };
        serve_args(&self.storage, &CATALOG_READ_ONLY, &self.config, method, name, &args, direct, Alarm::new(current), crate::catalog::call)
    }

    /// The methods whose current alarm the class reads before `rpcCall`, comma-separated.
    #[wasm_bindgen(js_name = alarmReaders)]
    pub fn alarm_readers() -> String {
        crate::catalog::ALARM_READERS.join(",")
    }

    /// `upsertRunKey`: the run's lifecycle lease first, then the upsert. `expireRun` /
    /// `expireKeys` when the class did not read the alarm: the current alarm first, then
    /// one transaction, then the alarm change.
    #[wasm_bindgen(js_name = rpcAsync)]
    pub async fn rpc_async(&self, method: String, name: String, body: Vec<u8>) -> Array {
        let args = match args_or_refusal(&body) {
            Ok(a) => a,
            Err(refusal) => return refusal,
        };
        if method == UPSERT_RUN_KEY {
            self.name.learn(&name);
            let run_id = text(args.first());
            let result = match run_is_expired(self, &self.lifecycle, &run_id).await {
                Ok(false) => {
                    let ctx = Ctx { now: now_ms(), name: &name, config: &self.config };
                    let mut alarm = Alarm::unknown();
                    in_transaction(&self.storage, |store| crate::catalog::call(store, &ctx, &mut alarm, UPSERT_KEY, Args(&args)))
                }
                Ok(true) => Ok(refused_put()),
                Err(e) => Err(e),
            };
            return result_reply(result, f64::NAN);
        }
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

    /// One RPC served synchronously; status 3 for a read (`get`, `legacyGet`) that needs
    /// its hook's run's lifecycle status (`asked`: the class's answer to the previous
    /// step's ask, see `serve.rs`); status 0 for a publication (`finalize`/`publish`,
    /// `legacyPublish`) without its caller's status, which must ask the run DO, and for a
    /// `reserve` whose current alarm the class did not read (`current` is that alarm, `-1`
    /// none set, `NaN` not read).
    fn rpc_call(&self, method: &str, name: &str, body: &[u8], direct: bool, current: f64, asked: &JsValue) -> Array {
        let family = self.family;
        let current = class_alarm(current);
        let reads_alarm = crate::hook_shard::reads_alarm(method);
        let publication = crate::hook_shard::visibility::publication_visibility(family, method);
        let read = crate::hook_shard::visibility::read_visibility(method);
        if reads_alarm && current.is_none() {
            return go_async();
        }
        let args = match args_or_refusal(body) {
            Ok(a) => a,
            Err(refusal) => return refusal,
        };
        if let Some(visibility) = read {
            let asked = asked_answer(asked, Binding::Runs.env_name()).filter(|a| a.method == hook_driver::LIFECYCLE_METHOD);
            let step = read_only(&self.storage, |store| {
                hook_driver::get_step(store, family, visibility, Args(&args), asked.as_ref().map(|a| (a.name.as_str(), &a.answer)))
            });
            return match step {
                Ok(GetStep::Ask(run_id)) => ask_reply(Binding::Runs.env_name(), &run_id, hook_driver::LIFECYCLE_METHOD, b"[]", f64::NAN),
                Ok(GetStep::Answer(value)) => result_reply(Ok(value), f64::NAN),
                Err(e) => result_reply(Err(e), f64::NAN),
            };
        }
        if let Some(visibility) = publication {
            let Some(status) = hook_driver::passed_status(Args(&args)) else { return go_async() };
            return serve_args(
                &self.storage,
                &[],
                &self.config,
                method,
                name,
                &args,
                direct,
                Alarm::unknown(),
                |store, ctx, _, _, args| hook_driver::publish_with_status(store, family, visibility, ctx.now, status, args),
            );
        }
        let alarm = match current {
            Some(current) if reads_alarm => Alarm::new(current),
            _ => Alarm::unknown(),
        };
        serve_args(&self.storage, &[], &self.config, method, name, &args, direct, alarm, |store, ctx, alarm, m, args| {
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

    /// The methods whose current alarm the class reads before `rpcCall`, comma-separated.
    #[wasm_bindgen(js_name = alarmReaders)]
    pub fn alarm_readers() -> String {
        crate::hook_shard::ALARM_READERS.join(",")
    }

    /// One RPC: `[status, body, alarm]`, status 0 for the asynchronous methods and 3 for a
    /// read that asks a run DO first; `current` is the alarm the class read for the
    /// [`alarm readers`](Self::alarm_readers) (`-1` none set), else `NaN`; `asked` the
    /// answer to the previous step's ask, `[name, status, body]`, else `undefined`.
    #[wasm_bindgen(js_name = rpcCall)]
    pub fn rpc_call(&self, method: &str, name: &str, body: &[u8], direct: bool, current: f64, asked: JsValue) -> Array {
        self.0.rpc_call(method, name, body, direct, current, &asked)
    }

    /// A publication without its caller's status, and `reserve` or a read when they could
    /// not be served synchronously.
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

    /// The methods whose current alarm the class reads before `rpcCall`, comma-separated.
    #[wasm_bindgen(js_name = alarmReaders)]
    pub fn alarm_readers() -> String {
        crate::hook_shard::ALARM_READERS.join(",")
    }

    /// One RPC: `[status, body, alarm]`, status 0 for the asynchronous methods and 3 for a
    /// read that asks a run DO first; `current` is the alarm the class read for the
    /// [`alarm readers`](Self::alarm_readers) (`-1` none set), else `NaN`; `asked` the
    /// answer to the previous step's ask, `[name, status, body]`, else `undefined`.
    #[wasm_bindgen(js_name = rpcCall)]
    pub fn rpc_call(&self, method: &str, name: &str, body: &[u8], direct: bool, current: f64, asked: JsValue) -> Array {
        self.0.rpc_call(method, name, body, direct, current, &asked)
    }

    /// A publication without its caller's status, and `reserve` or a read when they could
    /// not be served synchronously.
    #[wasm_bindgen(js_name = rpcAsync)]
    pub async fn rpc_async(&self, method: String, _name: String, body: Vec<u8>) -> Array {
        self.0.rpc_async(method, body).await
    }

    /// Claim compaction.
    pub async fn alarm(&self) {
        self.0.alarm().await;
    }
}
