//! The 0.3 `index` binding (`/v1/rpc/index/index/<method>`) served over the index shards:
//! the router's `X` decision ([`super::entry`]) hands the body here instead of hopping to
//! IndexDO. The decisions are [`crate::facade`]'s; this file only provides the
//! [`FacadeHost`] (calls through `hop.mjs`).
//!
//! The `scheduled` handler runs one step of the archive migration per cron tick
//! ([`migrate_archive`]).
//!
//! A call the table sends to the archive unchanged ([`Route::Archive`]) is one raw hop of
//! the body bytes as received, so its answer is the archive's, byte for byte.

use std::cell::Cell;

use js_sys::{Array, Uint8Array};
use wasm_bindgen::prelude::*;
use worker::Env;

use super::call::{call_env, hop_raw};
use super::serve::{args_or_refusal, now_ms, result_reply};
use crate::catalog::lease::UPSERT_RUN_KEY;
use crate::facade::driver::{self, FacadeHost};
use crate::facade::migrate::{self, MigrationCache};
use crate::facade::{archive_matters, discarded_put, route, upsert_args, Route, LIFECYCLE_METHOD, UPSERT_KEY};
use crate::protocol::calls::Target;
use crate::wire::router::Binding;
use crate::wire::{RpcError, Value};

thread_local! {
    /// This isolate's view of the archive migration (wasm is single-threaded).
    static MIGRATION: Cell<MigrationCache> = Cell::new(MigrationCache::default());
}

/// Whether the archive may still hold index entries of the pre-upgrade IndexDO, for the
/// run DO's retention `index` phase (which skips the archive's `expireRun` once it cannot
/// find anything there). The same per-isolate reading as the facade's.
pub(super) async fn archive_in_use(env: &Env) -> bool {
    let wanted = super::env::config(env).index_archive().unwrap_or(true);
    with_archive(&Host { env: env.clone() }, wanted).await
}

/// Whether facade calls still consult the archive (pre-upgrade data): until this isolate
/// has seen the migration finished ([`migrate::read_state`], which finishes it at once
/// on an archive that holds nothing), never with `WORKFLOW_INDEX_ARCHIVE=none`. A reading
/// costs one archive call, at most every [`migrate::RECHECK_MS`] per isolate; a failed
/// reading keeps the archive in. `wanted`: `WORKFLOW_INDEX_ARCHIVE` is not `none`.
async fn with_archive(host: &Host, wanted: bool) -> bool {
    let now = now_ms();
    let mut cache = MIGRATION.with(Cell::get);
    if cache.stale(now) {
        if !wanted {
            cache.observe(&migrate::State { family: migrate::FAMILIES.len(), ..migrate::State::default() }.to_value(), now);
            MIGRATION.with(|c| c.set(cache));
        } else if let Ok(state) = migrate::read_state(host).await {
            cache.observe(&state, now);
            MIGRATION.with(|c| c.set(cache));
        }
    }
    cache.with_archive()
}

struct Host {
    env: Env,
}

fn missing(env_name: &'static str) -> impl FnOnce() -> RpcError {
    move || RpcError::error(format!("world-celld index missing binding {env_name}"))
}

impl FacadeHost for Host {
    async fn call(&self, target: &Target, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        let env_name = target.env_binding();
        call_env(&self.env, env_name, missing(env_name), target.instance(), method, args).await
    }

    async fn lifecycle_status(&self, run_id: &str) -> Result<Value, RpcError> {
        let env_name = Binding::Runs.env_name();
        call_env(&self.env, env_name, missing(env_name), run_id, LIFECYCLE_METHOD, Vec::new()).await
    }
}

fn plain(status: u16, body: &[u8]) -> Array {
    Array::of2(&JsValue::from(status), &Uint8Array::from(body))
}

/// One 0.3 `index` call: `[status, body]`. A body the router would refuse gets the same
/// 400/413 answer as a hop to IndexDO would.
#[wasm_bindgen(js_name = facadeCall)]
pub async fn facade_call(env: Env, method: String, body: Vec<u8>) -> Array {
    let args = match args_or_refusal(&body) {
        Ok(a) => a,
        Err(refusal) => return refusal,
    };
    let config = super::env::config(&env);
    let keep = config.correlation_index();
    let host = Host { env };
    // A call whose serving does not depend on the archive (a run's `putOwned`) never asks.
    let with_archive = if archive_matters(&method) {
        match config.index_archive() {
            Ok(wanted) => with_archive(&host, wanted).await,
            Err(e) => return result_reply(Err(e.into()), f64::NAN),
        }
    } else {
        MIGRATION.with(Cell::get).with_archive()
    };
    let routed = route(&method, &args, with_archive);
    if let Some(answer) = routed.as_ref().ok().and_then(|r| discarded_put(r, keep)) {
        return result_reply(answer, f64::NAN);
    }
    if matches!(routed, Ok(Route::Archive)) {
        let env_name = Target::Archive.env_binding();
        return match hop_raw(&host.env, env_name, missing(env_name), Target::Archive.instance(), &method, &body).await {
            Ok((status, bytes)) => plain(status, &bytes),
            Err(e) => result_reply(Err(e), f64::NAN),
        };
    }
    result_reply(driver::call(&host, &method, args, with_archive).await, f64::NAN)
}

/// The facade's synchronous plan for a call that is one hop (a `putOwned`, a call the
/// table sends to the archive unchanged), so the router makes the hop itself without this
/// module's asynchronous machinery (which costs more than a hop): `[1, status, body]`
/// answer (a body the router refuses), `[2, ENV, instance, method]` hop with the body as
/// received, `[2, ENV, instance, method, body]` hop with this body, or `[0]`: call
/// [`facade_call`]. A `run:`/`runall:` key's `putOwned` is the catalog shard's
/// `upsertRunKey`, which asks the run's lifecycle itself, under a lease
/// ([`crate::catalog::lease`]); a `correlation:` key's is its `upsertKey`. The shard's
/// answer is the call's answer as it is, as [`facade_call`] would give it. Only while this
/// isolate's view of the migration is fresh (see [`with_archive`]); a stale view takes
/// [`facade_call`], which re-reads it. `correlation_index`: the deployment's
/// `WORKFLOW_CORRELATION_INDEX` (a `correlation:` key's `putOwned` is answered here, with
/// no hop, when it is `off`: [`discarded_put`]).
#[wasm_bindgen(js_name = facadePlan)]
pub fn facade_plan(method: &str, body: &[u8], correlation_index: Option<String>) -> Array {
    let asynchronous = || Array::of1(&JsValue::from(0));
    let args = match args_or_refusal(body) {
        Ok(a) => a,
        Err(refusal) => return Array::of3(&JsValue::from(1), &refusal.get(0), &refusal.get(1)),
    };
    let cache = MIGRATION.with(Cell::get);
    if archive_matters(method) && cache.stale(now_ms()) {
        return asynchronous();
    }
    let upsert_body = |run_id: String, key: String, value: Value| Value::Array(upsert_args(run_id, key, value)).to_json();
    let routed = route(method, &args, cache.with_archive());
    let keep = crate::config::Config { correlation_index, ..Default::default() }.correlation_index();
    if let Some(answer) = routed.as_ref().ok().and_then(|r| discarded_put(r, keep)) {
        let reply = result_reply(answer, f64::NAN);
        return Array::of3(&JsValue::from(1), &reply.get(0), &reply.get(1));
    }
    match routed {
        Ok(Route::Archive) => hop_plan(&Target::Archive, method),
        Ok(Route::PutKey { target, run_id, key, value }) => put_plan(&target, UPSERT_KEY, upsert_body(run_id, key, value)),
        Ok(Route::PutRun { target, run_id, key, value }) => put_plan(&target, UPSERT_RUN_KEY, upsert_body(run_id, key, value)),
        _ => asynchronous(),
    }
}

/// Plan 2: the hop to `method` on `target`.
fn hop_plan(target: &Target, method: &str) -> Array {
    Array::of4(&JsValue::from(2), &target.env_binding().into(), &target.instance().into(), &method.into())
}

/// Plan 2 with a body: the upsert hop on the key's catalog shard, or `[0]` if the body
/// cannot be written.
fn put_plan<E>(target: &Target, method: &str, body: Result<String, E>) -> Array {
    let Ok(body) = body else { return Array::of1(&JsValue::from(0)) };
    let plan = hop_plan(target, method);
    plan.push(&Uint8Array::from(body.as_bytes()));
    plan
}

/// Entries one cron tick of the archive migration moves at most (each costs 3–4 Durable
/// Object calls); `WORKFLOW_INDEX_MIGRATION_BUDGET` overrides it.
pub const MIGRATION_BUDGET: usize = 64;

/// One step of the archive migration ([`crate::facade::migrate`]), for the `scheduled`
/// handler: the state after it, as JSON text.
#[wasm_bindgen(js_name = migrateArchive)]
pub async fn migrate_archive(env: Env) -> Result<String, JsValue> {
    let budget = super::env::var(&env, "WORKFLOW_INDEX_MIGRATION_BUDGET")
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(MIGRATION_BUDGET);
    let host = Host { env };
    let state = migrate::step(&host, budget).await.map_err(|e| JsValue::from_str(&format!("{}: {}", e.name, e.message)))?;
    state.to_value().to_json().map_err(|e| JsValue::from_str(&format!("{e:?}")))
}
