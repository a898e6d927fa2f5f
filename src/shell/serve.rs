//! The DO side of the router → DO hop (see [`crate::protocol::hop`]), shared by all four classes:
//! decode the forwarded body once, run the core method with one clock reading (its writes
//! land all together or not at all), and hand the JavaScript class its answer.
//!
//! The answer is a JavaScript array `[status, body, alarm]`: the HTTP status, the body as
//! UTF-8 bytes (the router sends them as they are), and the alarm change the call asks for
//! after its commit (`NaN` none, `-1` delete, else the epoch ms to set), which the class
//! applies (the alarm API is asynchronous). Status `0` means "this method is asynchronous:
//! call `rpcAsync`" (the queue and the run's `cleanupNow`, which do I/O between
//! transactions).
//!
//! Writes: the class calls `rpcCall` without a transaction. A writing method's writes are
//! held back and written once it has succeeded ([`Writes::Buffered`]); the platform commits
//! them together. Two more statuses ask the class for something:
//! * `1`: a write was too large to hold back; nothing was written. The class calls again
//!   with `direct` inside `ctx.storage.transactionSync`, rolled back unless the reply is a
//!   success (the way every writing call ran before).
//! * `2`: storage failed while the writes were being written; the class aborts the object,
//!   which discards them (the body is the error message).
//!
//! * `3`: the call needs another object's answer first ([`ask_reply`]: `[3, envBinding,
//!   name, method, body, tag]`). The class makes that call over the hop and calls
//!   `rpcCall` again with its answer as a sixth argument, `[name, status, body, method,
//!   tag]` ([`asked_answer`]), and, for an alarm reader, the alarm read again (other calls
//!   may have run during the ask); a class that cannot (no such binding, the hop threw, too
//!   many asks, wasm was reset meanwhile) calls `rpcAsync` instead, which asks the
//!   asynchronous way and reports the error. The steps before an ask write nothing, so
//!   nothing is held between the calls but the tag (the lease holders' revocation epoch).
//!
//! Read-only methods (learnt once from `readOnly()`) run on a store that refuses writes.
//!
//! Knows no core's methods.

use js_sys::{Array, Uint8Array};
use wasm_bindgen::JsValue;

use super::kv::{run_sync, ObjectStorage, Writes};
use crate::config::Config;
use crate::protocol::hop::{answer, decode_args, Args, Ctx};
use crate::protocol::leases::{LifecycleCache, HELD_METHOD, LEASE_METHOD, LIFECYCLE_METHOD, REVOKE_METHOD};
use crate::store::alarm::{Alarm, AlarmChange};
use crate::store::buffered::Fallback;
use crate::store::Store;
use crate::wire::router::Binding;
use crate::wire::{RpcError, Value};

/// Current time in epoch milliseconds.
pub fn now_ms() -> i64 {
    js_sys::Date::now() as i64
}

/// The alarm slot of a reply: the change as the class writes it, never at or before now
/// ([`AlarmChange::as_written`]).
pub fn alarm_slot(change: Option<AlarmChange>) -> f64 {
    match change.map(|c| c.as_written(now_ms())) {
        None => f64::NAN,
        Some(AlarmChange::Delete) => -1.0,
        Some(AlarmChange::Set(at)) => at as f64,
    }
}

/// The alarm the class read before a call (`rpcCall`'s `current`: epoch ms, `-1` when none
/// is set, `NaN` when it was not read): `None` when not read, else what storage holds.
pub fn class_alarm(current: f64) -> Option<Option<i64>> {
    if current.is_nan() {
        None
    } else {
        Some((current >= 0.0).then_some(current as i64))
    }
}

/// A reply `[status, body, alarm]`.
pub fn reply(status: u16, body: &[u8], alarm: f64) -> Array {
    Array::of3(&JsValue::from(status), &Uint8Array::from(body), &JsValue::from_f64(alarm))
}

/// The reply for a method the synchronous path does not serve.
pub fn go_async() -> Array {
    reply(0, &[], f64::NAN)
}

/// The reply asking the class to call `method` on instance `name` of `env[env_name]` with
/// `body` (status 3, see the module documentation) and to call again with the answer and
/// `tag`, which the class hands back as it is.
pub fn ask_reply(env_name: &str, name: &str, method: &str, body: &[u8], tag: f64) -> Array {
    let reply = Array::of3(&JsValue::from(3), &JsValue::from_str(env_name), &JsValue::from_str(name));
    reply.push(&JsValue::from_str(method));
    reply.push(&Uint8Array::from(body));
    reply.push(&JsValue::from_f64(tag));
    reply
}

/// An [`ask_reply`]'s answer, as the class passes it with the next `rpcCall`.
pub struct Asked {
    /// The instance asked.
    pub name: String,
    /// The method asked.
    pub method: String,
    /// The ask's tag.
    pub tag: f64,
    /// Its answer, decoded as [`super::call::call_env`] decodes one.
    pub answer: Result<Value, RpcError>,
}

/// The answer a call carries (`[name, status, body, method, tag]`: the instance asked, its
/// hop reply, the method and tag of the ask), `None` when it carries none.
pub fn asked_answer(asked: &JsValue, env_name: &str) -> Option<Asked> {
    if !Array::is_array(asked) {
        return None;
    }
    let asked = Array::from(asked);
    let name = asked.get(0).as_string()?;
    let method = asked.get(3).as_string()?;
    let status = asked.get(1).as_f64().unwrap_or(0.0) as u16;
    let bytes = Uint8Array::new(&asked.get(2)).to_vec();
    let answer = super::call::answer_of(env_name, &name, &method, status, bytes);
    Some(Asked { name, method, tag: asked.get(4).as_f64().unwrap_or(f64::NAN), answer })
}

/// A lease holder's lifecycle ask (the one `crate::protocol::leases::run_is_expired` makes) as a
/// status-3 reply: `leaseLifecycle(...lease_args)` of the run when the holder can hold
/// leases (`lease_args`: its name, and its kind where it has one), else
/// `getLifecycleStatus()`; tagged with the cache's revocation epoch.
pub fn lifecycle_ask_reply(cache: &LifecycleCache, run_id: &str, lease_args: Option<Vec<Value>>) -> Array {
    let runs = Binding::Runs.env_name();
    let epoch = cache.epoch() as f64;
    let Some(args) = lease_args else { return ask_reply(runs, run_id, LIFECYCLE_METHOD, b"[]", epoch) };
    match Value::Array(args).to_json() {
        Ok(body) => ask_reply(runs, run_id, LEASE_METHOD, body.as_bytes(), epoch),
        Err(e) => result_reply(Err(e.into()), f64::NAN),
    }
}

impl Asked {
    /// The answer to a [`lifecycle_ask_reply`], taken as `run_is_expired` takes one after
    /// its await ([`LifecycleCache::answered`] at the tag's epoch; a tag that is no epoch
    /// matches none, so no lease is kept): the run asked and whether it is expired, or the
    /// ask's error.
    pub fn into_lifecycle(self, cache: &LifecycleCache, now: i64) -> Result<(String, bool), RpcError> {
        let answer = self.answer?;
        let epoch = if self.tag >= 0.0 { self.tag as u64 } else { u64::MAX };
        let expired = cache.answered(&self.name, epoch, self.method == LEASE_METHOD, &answer, now);
        Ok((self.name, expired))
    }
}

/// The reply of a core result.
pub fn result_reply(result: Result<Value, RpcError>, alarm: f64) -> Array {
    let (status, body) = answer(result);
    // A failed call rolled back: it asks for no alarm.
    let alarm = if status == 200 { alarm } else { f64::NAN };
    reply(status, body.as_bytes(), alarm)
}

/// Decode the body, or the reply refusing it (the router's 400/413 answers).
pub fn args_or_refusal(body: &[u8]) -> Result<Vec<Value>, Array> {
    decode_args(body).map_err(|e| reply(e.status(), e.body().as_bytes(), f64::NAN))
}

/// The reply asking the class for a [`Fallback`]: status 1 (call again inside a
/// transaction) or 2 (abort the object; the body is the error). See the module
/// documentation.
pub fn fallback_reply(fallback: &Fallback) -> Array {
    match fallback {
        Fallback::Transaction => reply(1, &[], f64::NAN),
        Fallback::Abort(e) => reply(2, format!("{}: {}", e.name, e.message).as_bytes(), f64::NAN),
    }
}

/// Serve one call synchronously: decode, then `core` on storage in the mode the class
/// asked for (see [`Writes`]).
#[allow(clippy::too_many_arguments)]
pub fn serve_sync(
    storage: &ObjectStorage,
    read_only: &[&str],
    cfg: &Config,
    method: &str,
    name: &str,
    body: &[u8],
    direct: bool,
    core: impl FnOnce(&mut dyn Store, &Ctx, &mut Alarm, &str, Args) -> Result<Value, RpcError>,
) -> Array {
    match args_or_refusal(body) {
        Ok(args) => serve_args(storage, read_only, cfg, method, name, &args, direct, Alarm::unknown(), core),
        Err(refusal) => refusal,
    }
}

/// [`serve_sync`] of arguments already decoded, starting from `alarm` (the current alarm
/// when the class read it, else [`Alarm::unknown`]).
#[allow(clippy::too_many_arguments)]
pub fn serve_args(
    storage: &ObjectStorage,
    read_only: &[&str],
    cfg: &Config,
    method: &str,
    name: &str,
    args: &[Value],
    direct: bool,
    mut alarm: Alarm,
    core: impl FnOnce(&mut dyn Store, &Ctx, &mut Alarm, &str, Args) -> Result<Value, RpcError>,
) -> Array {
    let ctx = Ctx { now: now_ms(), name, config: cfg };
    let writes = Writes::of(method, read_only, direct);
    match run_sync(storage, writes, |store| core(store, &ctx, &mut alarm, method, Args(args))) {
        Ok(result) => result_reply(result, alarm_slot(alarm.change())),
        Err(fallback) => fallback_reply(&fallback),
    }
}

/// The reply of a lease holder's own methods (no storage, no transaction):
/// `revokeLifecycleLease(runId)` from a run DO, and the tests' probe `heldLifecycleLeases`;
/// `None` for any other method. Served by the QueueDO and run-catalog shards.
pub fn lease_holder_reply(cache: &LifecycleCache, method: &str, body: &[u8]) -> Option<Array> {
    let result = if method == HELD_METHOD {
        Ok(cache.held_answer(now_ms()))
    } else if method == REVOKE_METHOD {
        match args_or_refusal(body) {
            Ok(args) => cache.revoke_answer(&args),
            Err(refusal) => return Some(refusal),
        }
    } else {
        return None;
    };
    Some(result_reply(result, f64::NAN))
}
