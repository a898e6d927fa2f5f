//! QueueDO core (spec `queue-do.md`, 0.4 deltas in spec-0.4 `queue.md`): one instance
//! `q:<shard>` owns enqueue with shard-count pinning and idempotency-key dedup, durable scheduling through the object's
//! alarm, HTTP delivery with retries, capped exponential backoff and dead letters, the
//! admin methods, and purging of expired runs' messages.
//!
//! * [`call`] runs one RPC method inside one storage transaction. Besides storage it sees
//!   the object's alarm as an [`Alarm`] (read by the shell before the transaction) and
//!   records the change the shell applies after commit.
//! * The alarm loop is split into pure steps in [`delivery`]: [`delivery::claim`],
//!   [`delivery::build_request`], [`delivery::classify`], [`delivery::settle`], so the
//!   shell only does I/O (fetch, timers, the alarm API).
//!
//! ## Serving 0.3 and 0.4 from one layout
//!
//! * Storage is the 0.4 layout: in-flight claims are `inflight-deadline:<pad(deadline)>:<id>`
//!   leases; 0.3 `inflight:<id>` claims left by the previous release are converted by the
//!   alarm, one page of 128 per pass ([`delivery::claim`]).
//! * Run-guarded mutations ask the run DO first ([`driver`]): `enqueue`, `redriveDeadLetter`,
//!   retries, 503 rescheduling and every delivery of a message with a run.
//! * `expireRun` is paged with receipts when the caller passes options (the 0.4 run DO
//!   cleanup does) or the run's fence was started by such a call; otherwise it keeps the 0.3
//!   contract (everything in one call, `{deleted}`), which the 0.3 golden rows record.
//! * `purgeDeadLetters` is bounded (128, `hasMore`) for both generations
//!   (`tests/golden-conflicts.json`).
//!
//! ## Where this differs from the reference (none of it is visible in the golden files)
//!
//! * **Alarm writes** happen right after the KV transaction commits instead of inside it
//!   (the platform's alarm API is not part of `transactionSync`). Every core call reports
//!   the alarm it wants; the shell issues it before anything else can run.
//! * **Pipelined alarm loop**: one alarm invocation keeps claiming while its deliveries run
//!   (a settled delivery frees a slot at once), up to 48 deliveries per invocation; the
//!   reference delivers one batch of `QUEUE_MAX_INFLIGHT` per alarm. Caps and schedule
//!   semantics are unchanged.
//! * **Claimed in the enqueue**: when the instance has a free delivery slot and nothing due
//!   waits, an immediate message gets its `inflight-deadline:` lease in its own `enqueue`
//!   ([`delivery::Handoff`]) and the shell's loop delivers it; the reference writes a
//!   `due:` entry that the next alarm claims. Three rows fewer per such message.
//! * **Orphaned claims**: an `inflight-deadline:` lease whose delivery is not running in
//!   the current instance (the previous instance died) is put back on the schedule at the
//!   next claim, and a fresh instance's first call arms the alarm when such entries (or
//!   0.3 `inflight:` entries) exist. The reference waits for the deadline (timeout + 30 s),
//!   and until then the stale entries also block the cell's delivery slots.
//! * **Lifecycle call failures**: a failed `getLifecycleStatus` before a delivery, retry or
//!   503 rescheduling counts as "not expired" (logged); the queue fence is still checked.
//!   The reference's throw would leave the claim until its deadline. `enqueue` and
//!   `redriveDeadLetter` fail with the error, as in the reference.
//! * **Absurd times** are clamped to 9 223 372 036 000 ms (year 2262), the latest the
//!   alarm API accepts, so the alarm write cannot fail and key order stays time order; a non-numeric `delaySeconds` counts as 0 (the reference builds `NaN`
//!   keys and may throw). A 503 body whose number overflows f64 (`1e400`) is not numeric
//!   here (JavaScript would redeliver immediately with `Infinity`).
//!
//! Knows no other core (a run's lifecycle arrives through [`crate::protocol::leases`]) and
//! nothing of the platform: HTTP and the alarm API are the shell's.

pub mod admin;
pub mod courier;
pub mod delivery;
pub mod driver;
pub mod logs;
pub mod methods;
pub mod metrics;
pub mod pace;
pub mod state;

#[cfg(test)]
mod tests;

use crate::protocol::hop::{Args, Ctx};
use crate::store::alarm::Alarm;
use crate::store::Store;
use crate::wire::{RpcError, Value};

pub use state::{Lifecycle, Row};

pub const CLASS: &str = "QueueDO";

/// Does `method` need the current alarm time (the shell then reads it first)?
pub fn reads_alarm(method: &str) -> bool {
    ALARM_READERS.contains(&method)
}

/// The methods that read the current alarm ([`reads_alarm`]).
pub const ALARM_READERS: [&str; 4] = ["enqueue", "stats", "redriveDeadLetter", "rearmAlarm"];

/// Partition 0's pin of a client shard's configuration, asked by its other partitions
/// ([`methods::pin_shards`]); internal, as [`ADOPT_PIN_METHOD`] ([`methods::adopt_pin`]).
pub const PIN_METHOD: &str = "pinShards";
pub const ADOPT_PIN_METHOD: &str = "adoptPin";

/// The methods that never write (the shell serves them outside a transaction).
pub const READ_ONLY: [&str; 3] = ["stats", "listDeadLetters", "expireReceipt"];

/// Dispatch one RPC method (inside one storage transaction), with no run DO answer:
/// only the queue's own fences mark runs expired. See [`call_checked`].
pub fn call(store: &mut dyn Store, ctx: &Ctx, alarm: &mut Alarm, method: &str, args: Args) -> Result<Value, RpcError> {
    call_checked(store, ctx, alarm, method, args, &Lifecycle::unknown(), None)
}

/// Dispatch one RPC method (inside one storage transaction). `lifecycle` is what the run
/// DOs answered for the runs [`driver::runs_to_check`] named, asked before the
/// transaction. `handoff`: the shell's offer to take a message `enqueue` claims at once
/// ([`delivery::Handoff`]); other methods ignore it.
pub fn call_checked(
    store: &mut dyn Store,
    ctx: &Ctx,
    alarm: &mut Alarm,
    method: &str,
    args: Args,
    lifecycle: &Lifecycle,
    handoff: Option<&mut delivery::Handoff>,
) -> Result<Value, RpcError> {
    match method {
        "enqueue" => methods::enqueue(store, ctx, alarm, args, lifecycle, handoff),
        "stats" => methods::stats(store, alarm),
        "listDeadLetters" => methods::list_dead_letters(store, args),
        "redriveDeadLetter" => methods::redrive_dead_letter(store, ctx, alarm, args, lifecycle),
        "purgeDeadLetters" => methods::purge_dead_letters(store),
        "rearmAlarm" => methods::rearm_alarm(store, ctx, alarm),
        "expireRun" => methods::expire_run(store, ctx, alarm, args),
        "acknowledgeExpireRun" => methods::acknowledge_expire_run(store, ctx, alarm, args),
        "expireReceipt" => methods::expire_receipt(store, args),
        PIN_METHOD => methods::pin_shards(store, ctx, args),
        ADOPT_PIN_METHOD => methods::adopt_pin(store, args),
        other => Err(RpcError::type_error(format!("QueueDO has no method {other}"))),
    }
}
