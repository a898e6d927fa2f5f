//! The DO side of the router → DO hop (see [`crate::hop`]), shared by all four classes:
//! decode the forwarded body once, run the core method in one storage transaction with one
//! clock reading, and hand the JavaScript class its answer.
//!
//! The answer is a JavaScript array `[status, body, alarm]`: the HTTP status, the body as
//! UTF-8 bytes (the router sends them as they are), and the alarm change the call asks for
//! after its commit (`NaN` none, `-1` delete, else the epoch ms to set), which the class
//! applies (the alarm API is asynchronous). Status `0` means "this method is asynchronous:
//! call `rpcAsync`" (the queue and the run's `cleanupNow`, which do I/O between
//! transactions).
//!
//! The class opens the transaction around `rpcCall` (`ctx.storage.transactionSync`, rolled
//! back by a throw when the reply is not a success), except for the core's read-only
//! methods, which it learns once from `readOnly()`.

use js_sys::{Array, Uint8Array};
use wasm_bindgen::JsValue;
use worker::Storage;

use super::kv::in_caller_transaction;
use crate::config::Config;
use crate::hop::{answer, decode_args, Args, Ctx};
use crate::store::alarm::{Alarm, AlarmChange};
use crate::store::Store;
use crate::wire::{RpcError, Value};

/// Current time in epoch milliseconds.
pub fn now_ms() -> i64 {
    js_sys::Date::now() as i64
}

/// The alarm slot of a reply.
pub fn alarm_slot(change: Option<AlarmChange>) -> f64 {
    match change {
        None => f64::NAN,
        Some(AlarmChange::Delete) => -1.0,
        Some(AlarmChange::Set(at)) => at as f64,
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

/// Serve one call synchronously: decode, then `core` in the transaction the class opened
/// (for a method in `read_only`, with none; see [`in_caller_transaction`]).
pub fn serve_sync(
    storage: &Storage,
    read_only: &[&str],
    cfg: &Config,
    method: &str,
    name: &str,
    body: &[u8],
    core: impl FnOnce(&mut dyn Store, &Ctx, &mut Alarm, &str, Args) -> Result<Value, RpcError>,
) -> Array {
    let args = match args_or_refusal(body) {
        Ok(a) => a,
        Err(refusal) => return refusal,
    };
    let ctx = Ctx { now: now_ms(), name, config: cfg };
    let mut alarm = Alarm::unknown();
    let result = in_caller_transaction(storage, read_only.contains(&method), |store| core(store, &ctx, &mut alarm, method, Args(&args)));
    result_reply(result, alarm_slot(alarm.change()))
}
