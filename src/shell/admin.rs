//! `/v1/admin/…` (the router's `M` decision): the operator's queue routes over the queue
//! shards. [`crate::admin`] checks the request; this file makes the hops (through
//! `hop.mjs`, like every DO call) and puts the answers together.
//!
//! A shard of a partitioned deployment (`QUEUE_PARTITIONS` above 1) is answered for all
//! of its partitions: each is asked and [`crate::admin::merge`] (or the partitioned queue
//! binding, `super::partitions`) makes one answer; a partition named on its own is its
//! instance alone.
//!
//! Subrequests: the health answer makes one hop per queue instance it covers (at most 64:
//! shards × partitions), a dead-letter page, redrive, purge or rearm one per partition,
//! a `redrive-all` one per partition for its listing and one per dead letter it redrives
//! (at most 20 of them): with the default 16 partitions all within the Free plan's 50 per
//! invocation except a health answer over more than 50 instances (ask those with
//! `?shard=`; Workers limits, "Subrequests").
//!
//! Decides nothing the front door or the queue decides.

use js_sys::{Array, Uint8Array};
use wasm_bindgen::prelude::*;
use worker::Env;

use futures_util::future::join_all;

use super::call::call_env;
use super::env::var;
use super::partitions::queue_call;
use crate::admin::{self, merge, AdminError, AdminRequest, DEAD_LETTERS_METHOD, HEALTH_METHOD, REDRIVE_PAGE};
use crate::config::integer_setting;
use crate::protocol::partition::{partition_name, split_partition};
use crate::wire::router::Binding;
use crate::wire::{RpcError, Value};

fn missing() -> RpcError {
    RpcError::error(format!("missing binding: {}", Binding::Queue.env_name()))
}

async fn queue(env: &Env, shard: &str, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
    call_env(env, Binding::Queue.env_name(), missing, shard, method, args).await
}

fn reply(status: u16, body: String) -> Array {
    Array::of2(&JsValue::from(status), &Uint8Array::from(body.as_bytes()))
}

/// The queue instances a route on `shard` reaches: every partition of a client shard when
/// the deployment has several (`partitions`, `Config::partition_cover`), else itself.
fn instances(shard: &str, partitions: u32) -> Vec<String> {
    let (client, p) = split_partition(shard);
    if p > 0 || partitions <= 1 {
        return vec![shard.to_string()];
    }
    (0..partitions).map(|p| partition_name(client, p)).collect()
}

/// `method(args…)` on each of `names`, in order.
async fn each(env: &Env, names: &[String], method: &str, args: Vec<Value>) -> Vec<Result<Value, RpcError>> {
    join_all(names.iter().map(|name| queue(env, name, method, args.clone()))).await
}

/// A page of `shard`'s dead letters (over its partitions: merged, each row naming its
/// partition).
async fn dead_letters(env: &Env, shard: &str, partitions: u32, limit: usize, cursor: Value) -> Result<Value, RpcError> {
    let names = instances(shard, partitions);
    let args = vec![Value::num(limit as f64), cursor];
    if names.len() == 1 {
        return queue(env, shard, DEAD_LETTERS_METHOD, args).await;
    }
    let pages = each(env, &names, DEAD_LETTERS_METHOD, args).await.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(merge::merge_pages(limit, &names.into_iter().zip(pages).collect::<Vec<_>>()))
}

/// A call that answers for the whole client shard (the partitioned queue binding's merge).
async fn whole(env: &Env, shard: &str, partitions: u32, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
    if instances(shard, partitions).len() == 1 {
        return queue(env, shard, method, args).await;
    }
    queue_call(env, shard, method, args, &missing().message).await
}

async fn serve(env: &Env, request: AdminRequest, partitions: u32) -> Result<Value, RpcError> {
    match request {
        AdminRequest::Health { shards } => {
            let rows = join_all(shards.iter().map(|shard| async move {
                let names = instances(shard, partitions);
                let answers = each(env, &names, HEALTH_METHOD, Vec::new()).await;
                let failed = |e: RpcError| format!("{}: {}", e.name, e.message);
                if names.len() > 1 {
                    let parts: Vec<(String, Result<Value, String>)> =
                        names.into_iter().zip(answers.into_iter().map(|a| a.map_err(failed))).collect();
                    return merge::merge_health(shard, &parts);
                }
                match answers.into_iter().next() {
                    Some(Ok(row)) => row,
                    Some(Err(e)) => Value::object([("shard", Value::str(shard.as_str())), ("error", Value::String(failed(e)))]),
                    None => Value::object([("shard", Value::str(shard.as_str())), ("error", Value::str("Error: no answer"))]),
                }
            }))
            .await;
            Ok(Value::object([("at", Value::num(js_sys::Date::now())), ("shards", Value::Array(rows))]))
        }
        AdminRequest::DeadLetters { shard, limit, cursor } => {
            dead_letters(env, &shard, partitions, limit, cursor.map_or(Value::Null, Value::String)).await
        }
        AdminRequest::Redrive { shard, message_id } => {
            whole(env, &shard, partitions, "redriveDeadLetter", vec![Value::String(message_id)]).await
        }
        AdminRequest::RedriveAll { shard } => {
            let page = dead_letters(env, &shard, partitions, REDRIVE_PAGE, Value::Null).await?;
            // Each where it lies: its partition when the page is merged, else the shard.
            let rows: Vec<(String, String)> = page
                .get("data")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|d| {
                    let id = d.get("messageId").and_then(Value::as_str)?.to_string();
                    Some((d.get("partition").and_then(Value::as_str).unwrap_or(&shard).to_string(), id))
                })
                .collect();
            let (mut redriven, mut failed) = (0, 0);
            for (instance, id) in rows {
                match queue(env, &instance, "redriveDeadLetter", vec![Value::String(id)]).await {
                    Ok(v) if v.get("ok") == Some(&Value::Bool(true)) => redriven += 1,
                    _ => failed += 1,
                }
            }
            let has_more = admin::more_to_redrive(page.get("hasMore") == Some(&Value::Bool(true)), redriven);
            Ok(Value::object([
                ("redriven", Value::num(redriven as f64)),
                ("failed", Value::num(failed as f64)),
                ("hasMore", Value::Bool(has_more)),
            ]))
        }
        AdminRequest::Purge { shard } => whole(env, &shard, partitions, "purgeDeadLetters", Vec::new()).await,
        AdminRequest::Rearm { shard } => whole(env, &shard, partitions, "rearmAlarm", Vec::new()).await,
    }
}

/// One admin request: `[status, body]` (JSON). `search` is the URL's query string.
#[wasm_bindgen(js_name = adminCall)]
pub async fn admin_call(env: Env, method: String, pathname: String, search: String) -> Array {
    let raw = var(&env, "WORKFLOW_RETENTION_QUEUE_SHARDS");
    let shards = integer_setting(raw.as_deref(), "WORKFLOW_RETENTION_QUEUE_SHARDS", 1, 1, i64::from(u32::MAX))
        .map(|n| n as u32)
        .map_err(|e| e.message());
    let partitions = match super::env::config(&env).partition_cover() {
        Ok(n) => n,
        Err(e) => return reply(500, AdminError::Config(e.message().into()).body()),
    };
    let request = match admin::parse(&method, &pathname, &search, shards, partitions) {
        Ok(r) => r,
        Err(e) => return reply(e.status(), e.body()),
    };
    match serve(&env, request, partitions).await {
        Ok(v) => match v.to_json() {
            Ok(body) => reply(200, body),
            Err(_) => reply(500, AdminError::Config("an answer could not be encoded".into()).body()),
        },
        Err(e) if e.name == "BadRequest" => reply(400, AdminError::BadRequest(e.message).body()),
        Err(e) => reply(500, e.body()),
    }
}
