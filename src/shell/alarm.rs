//! Applying a core call's alarm change with the platform's (asynchronous) alarm API, right
//! after the call's transaction committed.
//!
//! Decides no alarm: the core's change is applied as reported, never at or before now
//! ([`AlarmChange::as_written`]: workerd loses such an alarm set inside an alarm handler).

use js_sys::Date;
use wasm_bindgen::JsValue;
use worker::{ScheduledTime, Storage};

use crate::store::alarm::AlarmChange;
use crate::wire::RpcError;

pub async fn apply_alarm(storage: &Storage, change: Option<AlarmChange>) -> Result<(), RpcError> {
    let result = match change.map(|c| c.as_written(Date::now() as i64)) {
        None => return Ok(()),
        Some(AlarmChange::Set(at)) => storage.set_alarm(ScheduledTime::new(Date::new(&JsValue::from_f64(at as f64)))).await,
        Some(AlarmChange::Delete) => storage.delete_alarm().await,
    };
    result.map_err(|e| RpcError::error(format!("alarm: {e}")))
}
