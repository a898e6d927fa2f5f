//! The stateless 0.4 "workflow index" coordinator behind `POST /v1/index/{runs|hooks}/{op}`
//! (spec-0.4 `catalog-hooks.md` §4, `wire.md` §4): seven operations over the run catalog
//! and hook shards. The router decides the route ([`crate::wire::router`]) and reads the
//! body; this module decides which shard calls an operation becomes ([`plan`] for the one
//! operation that is a single hop, [`call`] for every operation), generic over the 0.3
//! facade's [`FacadeHost`], so the wasm router drives it against the Durable Objects and
//! the native tests against the real cores.
//!
//! JavaScript semantics of the reference kept where a client or a golden row sees them:
//! the `TypeError`s of member reads on a missing argument (`reading 'runId'`, `'hookId'`,
//! `'hooks'`, `'tokenClaimId'`), `reservation?.…` on `hooks.finalize`, `options?.…` on
//! `runs.list`. Claim ids are random v4 UUIDs chosen by the shell ([`uuid_v4`]), one per
//! `hooks.reserve`, shared by the token and the hook-id claim.
//!
//! Knows the shards only by their methods and answers ([`crate::protocol::calls`]), and
//! nothing of the platform.

#![allow(async_fn_in_trait)]

#[cfg(test)]
mod tests;

use futures_util::future::{join, join_all};

use crate::facade::driver::{list_merged, FacadeHost};
use crate::facade::list::plan_runs_list;
use crate::protocol::calls::{ShardCall, Target};
use crate::protocol::hooks::Owner;
use crate::protocol::lifecycle::pad13;
use crate::protocol::shard;
use crate::wire::router::IndexOp;
use crate::wire::{js, RpcError, Value};

/// Entries per hook shard `releaseBatch`: the most the shards accept.
pub use crate::protocol::hooks::MAX_RELEASE_BATCH as HOOK_RELEASE_BATCH;

/// `crypto.randomUUID()` from 16 random bytes: version 4, RFC 4122 variant, lower-case.
pub fn uuid_v4(mut bytes: [u8; 16]) -> String {
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// The text `TextEncoder.encode(x)` hashes for a shard name: `undefined` is the empty
/// string, anything else its `String(x)`.
fn shard_text(v: Option<&Value>) -> String {
    v.map(|v| js::to_js_string(Some(v))).unwrap_or_default()
}

fn arg(v: Option<&Value>) -> Value {
    v.cloned().unwrap_or(Value::Null)
}

fn token_target(token: Option<&Value>) -> Target {
    Target::HookTokens(shard::hook_token(&shard_text(token)))
}

fn hook_id_target(hook_id: Option<&Value>) -> Target {
    Target::HookIds(shard::hook_id(&shard_text(hook_id)))
}

/// `run.createdAt.getTime()` as `runKeys` writes it: 13 digits, zero-padded.
fn created_at_text(run: Option<&Value>) -> Result<String, RpcError> {
    match js::member(run, "createdAt")? {
        Some(Value::Date(Some(ms))) => Ok(if *ms >= 0 { pad13(*ms) } else { format!("{:0>13}", ms) }),
        Some(Value::Date(None)) => Ok("0000000000NaN".into()),
        created @ (None | Some(Value::Null)) => js::member(created, "getTime").map(|_| String::new()),
        Some(_) => Err(RpcError::type_error("run.createdAt.getTime is not a function")),
    }
}

/// `runs.commit(run, serializedMetadata, publicationExpiresAt)`: `upsertRun` on the run's
/// catalog shard with its two listing keys — one hop, whose answer is the operation's.
pub fn commit_call(args: &[Value]) -> Result<ShardCall, RpcError> {
    let run = args.first();
    let run_id = js::member(run, "runId")?;
    let id_text = js::to_js_string(run_id);
    let workflow = js::to_js_string(js::member(run, "workflowName")?);
    let ts = created_at_text(run)?;
    let keys = vec![Value::String(format!("run:{workflow}:{ts}:{id_text}")), Value::String(format!("runall:{ts}:{id_text}"))];
    Ok(ShardCall {
        target: Target::Catalog(shard::run_catalog(&shard_text(run_id))),
        method: "upsertRun",
        args: vec![arg(run_id), Value::Array(keys), arg(args.get(1)), arg(args.get(2))],
    })
}

/// Whether [`plan`] can make the operation one hop (so its body is worth decoding before
/// [`call`]).
pub fn has_plan(op: IndexOp) -> bool {
    op == IndexOp::RunsCommit
}

/// The one-hop plan of an operation, if it is one (`runs.commit`); `None`: use [`call`].
pub fn plan(op: IndexOp, args: &[Value]) -> Option<ShardCall> {
    match op {
        IndexOp::RunsCommit => commit_call(args).ok(),
        _ => None,
    }
}

/// The `releaseBatch` calls of `releaseHooks({runId, hooks})`: per token shard and per
/// hook-id shard (in first-seen order), batches of [`HOOK_RELEASE_BATCH`]; the calls of
/// one shard run one after the other, the shards concurrently.
pub fn release_calls(run_id: Option<&Value>, hooks: Option<&Value>) -> Result<Vec<Vec<ShardCall>>, RpcError> {
    let hooks = js::for_of_elements(hooks, "values")?;
    let mut tokens: Vec<(Target, Vec<Value>)> = Vec::new();
    for hook in &hooks {
        let target = token_target(js::member(Some(hook), "token")?);
        let entry = Value::object([("token", arg(hook.get("token"))), ("owner", owner(run_id, hook.get("hookId")))]);
        push_grouped(&mut tokens, target, entry);
    }
    let mut ids: Vec<(Target, Vec<Value>)> = Vec::new();
    for hook in &hooks {
        let target = hook_id_target(js::member(Some(hook), "hookId")?);
        let entry = Value::object([("hookId", arg(hook.get("hookId"))), ("owner", owner(run_id, hook.get("hookId")))]);
        push_grouped(&mut ids, target, entry);
    }
    Ok(tokens
        .into_iter()
        .chain(ids)
        .map(|(target, entries)| {
            entries
                .chunks(HOOK_RELEASE_BATCH)
                .map(|batch| ShardCall { target: target.clone(), method: "releaseBatch", args: vec![Value::Array(batch.to_vec())] })
                .collect()
        })
        .collect())
}

fn owner(run_id: Option<&Value>, hook_id: Option<&Value>) -> Value {
    Value::object([("runId", arg(run_id)), ("hookId", arg(hook_id))])
}

fn push_grouped(groups: &mut Vec<(Target, Vec<Value>)>, target: Target, entry: Value) {
    match groups.iter_mut().find(|(t, _)| *t == target) {
        Some((_, entries)) => entries.push(entry),
        None => groups.push((target, vec![entry])),
    }
}

async fn shard_call<H: FacadeHost>(host: &H, call: ShardCall) -> Result<Value, RpcError> {
    host.call(&call.target, call.method, call.args).await
}

fn deleted(answer: &Value) -> f64 {
    answer.get("deleted").and_then(Value::as_f64).unwrap_or(f64::NAN)
}

/// Run the sequences of release calls (shards concurrently): the total `deleted`.
async fn release<H: FacadeHost>(host: &H, shards: Vec<Vec<ShardCall>>) -> Result<f64, RpcError> {
    let per_shard = shards.into_iter().map(|calls| async move {
        let mut total = 0.0;
        for call in calls {
            total += deleted(&shard_call(host, call).await?);
        }
        Ok::<f64, RpcError>(total)
    });
    let mut total = 0.0;
    for result in join_all(per_shard).await {
        total += result?;
    }
    Ok(total)
}

/// Two owners are the same when `runId` and `hookId` are strictly equal.
fn same_owner(left: Option<&Value>, right: Option<&Value>) -> Result<bool, RpcError> {
    Ok(js::strict_eq(js::member(left, "runId")?, js::member(right, "runId")?)
        && js::strict_eq(js::member(left, "hookId")?, js::member(right, "hookId")?))
}

fn claimed(answer: &Value) -> bool {
    js::truthy(answer.get("claimed"))
}

fn refused(holder: Option<&Value>) -> Value {
    Value::object([("admitted", Value::Bool(false)), ("holder", arg(holder))])
}

/// Run one operation. `claim_id` is the fresh UUID `hooks.reserve` proposes (unused by
/// the others).
pub async fn call<H: FacadeHost>(host: &H, op: IndexOp, args: &[Value], claim_id: &str) -> Result<Value, RpcError> {
    let a = |i: usize| args.get(i);
    match op {
        IndexOp::RunsList => {
            let plan = plan_runs_list(a(0));
            list_merged(host, &plan).await
        }
        IndexOp::RunsCommit => shard_call(host, commit_call(args)?).await,
        IndexOp::RunsExpire => {
            let request = a(0);
            let run_id = js::member(request, "runId")?;
            let catalog = ShardCall {
                target: Target::Catalog(shard::run_catalog(&shard_text(run_id))),
                method: "expireRun",
                args: vec![arg(run_id), arg(request.and_then(|r| r.get("keys"))), arg(request.and_then(|r| r.get("expiredAt")))],
            };
            let releases = release_calls(run_id, request.and_then(|r| r.get("hooks")));
            let hooks = async {
                match releases {
                    Ok(shards) => release(host, shards).await,
                    Err(e) => Err(e),
                }
            };
            let (catalog, hooks) = join(shard_call(host, catalog), hooks).await;
            // A release request that cannot even be grouped fails first (synchronously in
            // the reference), otherwise the catalog's error wins.
            let hooks = match hooks {
                Err(e) if catalog.is_ok() || releases_invalid(&e) => return Err(e),
                other => other,
            };
            let catalog = catalog?;
            Ok(Value::object([("deleted", Value::num(deleted(&catalog) + hooks?))]))
        }
        IndexOp::HooksRelease => {
            let request = a(0);
            let hooks = js::member(request, "hooks")?;
            let shards = release_calls(request.and_then(|r| r.get("runId")), hooks)?;
            Ok(Value::object([("deleted", Value::num(release(host, shards).await?))]))
        }
        IndexOp::HooksReserve => reserve(host, a(0), a(1), claim_id).await,
        IndexOp::HooksFinalize => {
            let (token, hook_id, serialized, owner, reservation) = (a(0), a(1), a(2), a(3), a(4));
            // One lifecycle read for both shards, passed as the publications' fifth argument
            // (hook_shard::driver::publish), where each of the reference's shards asks the
            // run DO itself. The run may end between this read and the token shard's
            // transaction, as it may between a shard's own ask and its transaction, and now
            // also before the hook-id shard's: its publication then finds the claim the
            // terminal cleanup released and throws `no active reservation`, or (before that
            // cleanup) publishes a hook that the run's ended status hides from `get` and
            // that the cleanup's marker page releases. An owner without string `runId` and
            // `hookId` is not read for: the shard refuses it before it would ask.
            let status = match Owner::from_arg(owner) {
                Ok(o) => Some(host.lifecycle_status(&o.run_id).await?),
                Err(_) => None,
            };
            let with_status = |mut args: Vec<Value>| {
                args.extend(status.clone());
                args
            };
            let finalize = ShardCall {
                target: token_target(token),
                method: "finalize",
                args: with_status(vec![arg(token), arg(serialized), arg(owner), arg(js::optional_member(reservation, "tokenClaimId"))]),
            };
            let stored = shard_call(host, finalize).await?;
            if !js::truthy(stored.get("stored")) {
                return Ok(Value::Null);
            }
            let publish = ShardCall {
                target: hook_id_target(hook_id),
                method: "publish",
                args: with_status(vec![arg(hook_id), arg(serialized), arg(owner), arg(js::optional_member(reservation, "hookIdClaimId"))]),
            };
            shard_call(host, publish).await?;
            Ok(Value::Null)
        }
        IndexOp::HooksReleaseReservation => {
            let (token, owner, reservation) = (a(0), a(1), a(2));
            let mut calls = Vec::new();
            let token_claim = js::member(reservation, "tokenClaimId")?;
            if js::truthy(token_claim) {
                calls.push(ShardCall {
                    target: token_target(token),
                    method: "releaseClaim",
                    args: vec![arg(token), arg(owner), arg(token_claim)],
                });
            }
            let id_claim = js::member(reservation, "hookIdClaimId")?;
            if js::truthy(id_claim) {
                let hook_id = js::member(owner, "hookId")?;
                calls.push(ShardCall {
                    target: hook_id_target(hook_id),
                    method: "releaseClaim",
                    args: vec![arg(hook_id), arg(owner), arg(id_claim)],
                });
            }
            for result in join_all(calls.into_iter().map(|c| shard_call(host, c))).await {
                result?;
            }
            Ok(Value::Null)
        }
    }
}

/// Whether a release error is the grouping's own (a bad request), not a shard's.
fn releases_invalid(e: &RpcError) -> bool {
    e.name == "TypeError" && (e.message.ends_with("is not iterable") || e.message.starts_with("Cannot read properties of"))
}

/// `hooks.reserve(token, owner)`: the token shard, then the hook-id shard under the same
/// claim id; a refused or failed second step releases what the first claimed.
async fn reserve<H: FacadeHost>(host: &H, token: Option<&Value>, owner: Option<&Value>, proposed: &str) -> Result<Value, RpcError> {
    // `owner.hookId` is read after the token step in the reference; reading it first
    // refuses a missing owner with the same error and without a stray claim.
    let hook_id = js::member(owner, "hookId")?;
    let token_shard = token_target(token);
    let reserve_token =
        ShardCall { target: token_shard.clone(), method: "reserve", args: vec![arg(token), arg(owner), Value::str(proposed)] };
    let token_answer = shard_call(host, reserve_token).await?;
    if !claimed(&token_answer) && !same_owner(token_answer.get("holder"), owner)? {
        return Ok(refused(token_answer.get("holder")));
    }
    let token_claim_id = if claimed(&token_answer) { token_answer.get("claimId").cloned() } else { None };
    let shared = token_claim_id.clone().unwrap_or_else(|| Value::str(proposed));
    let id_shard = hook_id_target(hook_id);
    let release_token = |claim: &Value| ShardCall {
        target: token_shard.clone(),
        method: "releaseClaim",
        args: vec![arg(token), arg(owner), claim.clone()],
    };
    let reserve_id = ShardCall { target: id_shard.clone(), method: "reserve", args: vec![arg(hook_id), arg(owner), shared.clone()] };
    let id_answer = match shard_call(host, reserve_id).await {
        Ok(answer) => answer,
        Err(e) => {
            let mut cleanup = Vec::new();
            if let Some(claim) = &token_claim_id {
                cleanup.push(release_token(claim));
            }
            cleanup.push(ShardCall { target: id_shard, method: "releaseClaim", args: vec![arg(hook_id), arg(owner), shared] });
            // allSettled: the cleanup's own failures are not reported.
            join_all(cleanup.into_iter().map(|c| shard_call(host, c))).await;
            return Err(e);
        }
    };
    if !claimed(&id_answer) {
        if let Some(claim) = &token_claim_id {
            shard_call(host, release_token(claim)).await?;
        }
        return Ok(refused(id_answer.get("holder")));
    }
    let id_claim = arg(id_answer.get("claimId"));
    let token_text = token_claim_id.as_ref().map_or_else(|| "-".to_string(), |c| js::to_js_string(Some(c)));
    let mut reservation = vec![("claimId", Value::String(format!("{token_text}:{}", js::to_js_string(Some(&id_claim)))))];
    if let Some(claim) = token_claim_id {
        reservation.push(("tokenClaimId", claim));
    }
    reservation.push(("hookIdClaimId", id_claim));
    Ok(Value::object([("admitted", Value::Bool(true)), ("reservation", Value::object(reservation))]))
}
