//! `/v1/admin/…` (the router's `M` decision): the operator's queue routes over the queue
//! shards. [`crate::admin`] checks the request; this file makes the hops (through
//! `hop.mjs`, like every DO call) and puts the answers together.
//!
//! Subrequests: the health answer makes one hop per shard it covers (at most 64), a
//! `redrive-all` at most 21 (a page of 20 and its listing), every other route one, all
//! within the Free plan's 50 per invocation except a health answer over more than 50
//! shards (ask those with `?shard=`).
//!
//! Decides nothing the front door or the queue decides.

use js_sys::{Array, Uint8Array};
use wasm_bindgen::prelude::*;
use worker::Env;

use super::call::call_env;
use super::env::var;
use crate::admin::{self, AdminError, AdminRequest, DEAD_LETTERS_METHOD, HEALTH_METHOD, REDRIVE_PAGE};
use crate::config::integer_setting;
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

async fn serve(env: &Env, request: AdminRequest) -> Result<Value, RpcError> {
    match request {
        AdminRequest::Health { shards } => {
            let calls = shards.iter().map(|shard| queue(env, shard, HEALTH_METHOD, Vec::new()));
            let answers = futures_util::future::join_all(calls).await;
            let mut out = Vec::with_capacity(answers.len());
            for (shard, answer) in shards.iter().zip(answers) {
                out.push(answer.unwrap_or_else(|e| {
                    Value::object([("shard", Value::str(shard.as_str())), ("error", Value::str(format!("{}: {}", e.name, e.message)))])
                }));
            }
            Ok(Value::object([("at", Value::num(js_sys::Date::now())), ("shards", Value::Array(out))]))
        }
        AdminRequest::DeadLetters { shard, limit, cursor } => {
            let cursor = cursor.map_or(Value::Null, Value::String);
            queue(env, &shard, DEAD_LETTERS_METHOD, vec![Value::num(limit as f64), cursor]).await
        }
        AdminRequest::Redrive { shard, message_id } => queue(env, &shard, "redriveDeadLetter", vec![Value::String(message_id)]).await,
        AdminRequest::RedriveAll { shard } => {
            let page = queue(env, &shard, DEAD_LETTERS_METHOD, vec![Value::num(REDRIVE_PAGE as f64), Value::Null]).await?;
            let ids: Vec<String> = page
                .get("data")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|d| d.get("messageId").and_then(Value::as_str).map(str::to_string))
                .collect();
            let (mut redriven, mut failed) = (0, 0);
            for id in ids {
                match queue(env, &shard, "redriveDeadLetter", vec![Value::String(id)]).await {
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
        AdminRequest::Purge { shard } => queue(env, &shard, "purgeDeadLetters", Vec::new()).await,
        AdminRequest::Rearm { shard } => queue(env, &shard, "rearmAlarm", Vec::new()).await,
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
    match serve(&env, request).await {
        Ok(v) => match v.to_json() {
            Ok(body) => reply(200, body),
            Err(_) => reply(500, AdminError::Config("an answer could not be encoded".into()).body()),
        },
        Err(e) if e.name == "BadRequest" => reply(400, AdminError::BadRequest(e.message).body()),
        Err(e) => reply(500, e.body()),
    }
}
