//! QueueDO core (spec `queue-do.md`): one instance `q:<shard>` owns enqueue with
//! shard-count pinning and idempotency-key dedup, durable scheduling through the object's
//! alarm, HTTP delivery with retries, capped exponential backoff and dead letters, the
//! admin methods, and purging of expired runs' messages.
//!
//! * [`call`] runs one RPC method inside one storage transaction. Besides storage it sees
//!   the object's alarm as an [`Alarm`] (read by the shell before the transaction) and
//!   records the change the shell applies after commit.
//! * The alarm loop is split into pure steps in [`delivery`]: [`delivery::claim`],
//!   [`delivery::build_request`], [`delivery::classify`], [`delivery::settle`], so the
//!   shell only does I/O (fetch, timers, the alarm API).

pub mod delivery;
pub mod js;
pub mod methods;
pub mod state;

#[cfg(test)]
mod tests;

use crate::hop::{Args, Ctx};
use crate::store::Store;
use crate::wire::{RpcError, Value};

pub use state::{Alarm, AlarmChange, Row};

pub const CLASS: &str = "QueueDO";

/// Does `method` need the current alarm time (the shell then reads it first)?
pub fn reads_alarm(method: &str) -> bool {
    matches!(method, "enqueue" | "stats" | "redriveDeadLetter" | "rearmAlarm")
}

/// Dispatch one RPC method (inside one storage transaction).
pub fn call(store: &mut dyn Store, ctx: &Ctx, alarm: &mut Alarm, method: &str, args: Args) -> Result<Value, RpcError> {
    match method {
        "enqueue" => methods::enqueue(store, ctx, alarm, args),
        "stats" => methods::stats(store, alarm),
        "listDeadLetters" => methods::list_dead_letters(store, args),
        "redriveDeadLetter" => methods::redrive_dead_letter(store, ctx, alarm, args),
        "purgeDeadLetters" => methods::purge_dead_letters(store),
        "rearmAlarm" => methods::rearm_alarm(store, ctx, alarm),
        "expireRun" => methods::expire_run(store, ctx, alarm, args),
        other => Err(RpcError::type_error(format!("QueueDO has no method {other}"))),
    }
}
