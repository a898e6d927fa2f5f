//! RunCatalogDO core (spec-0.4 `catalog-hooks.md` §2): one of the 16 run-catalog shards
//! `run-catalog:v1:00`…`0f` ([`crate::protocol::shard::run_catalog`]), holding the run listing keys
//! of the runs whose id hashes to it, their expiry fences and the compaction index of
//! those fences.
//!
//! None of its methods is on `/v1/rpc`: the `/v1/index/runs/*` coordinator, the run DO's
//! retention cleanup and the cron sweep call them. Each method is one storage transaction
//! (the shell's); besides storage a call sees the object's alarm as an [`Alarm`], which the
//! shell reads first when [`reads_alarm`] says so and applies after commit.
//!
//! Files:
//! * [`publish`] — `upsertRun` (publication leases, refused behind an expiry fence), and
//!   `upsertKey`, our single-key form for the 0.3 facade;
//! * [`lease`] — `upsertRunKey`, the 0.3 facade's run keys under a lifecycle lease (the
//!   shell serves it: it may ask the run DO first);
//! * [`list`] — the ordered `list` with values and cursors;
//! * [`expiry`] — `expireRun`, `deleteStaleGlobalRun` and the fence compaction [`alarm`];
//! * [`keys`] — key formats; [`records`] — stored records and argument decoding.
//!
//! ## Alarm contract
//! `expireRun` arms the alarm at the fence's `compactAt` unless an earlier alarm is set
//! (so the shell must pass the current alarm, [`Alarm::new`]). When the alarm fires the
//! shell runs [`alarm`] in one transaction with [`Alarm::unknown`]; if it fails (the
//! transaction rolled back) the shell sets the alarm with
//! [`crate::protocol::lifecycle::compaction_retry`] (now + 1000 ms).
//!
//! ## Differences from the reference
//! Metadata values must be strings (the reference stores any structured value, but every
//! caller sends JSON text) and are returned as stored; a `null` list cursor or end is
//! treated as absent.
//!
//! Knows no other core and imports none of its callers (the coordinator, the facade, the
//! run's cleanup, the sweep); the run DO is asked only by the shell ([`lease`]).

pub mod expiry;
pub mod keys;
pub mod lease;
pub mod list;
pub mod publish;
pub mod records;

#[cfg(test)]
mod tests;

use crate::protocol::hop::{Args, Ctx};
use crate::store::alarm::Alarm;
use crate::store::Store;
use crate::wire::{RpcError, Value};

pub use expiry::alarm;

pub const CLASS: &str = "RunCatalogDO";

/// Every method of the reference class (all internal: none is reachable through `/v1/rpc`).
pub const METHODS: [&str; 4] = ["upsertRun", "list", "deleteStaleGlobalRun", "expireRun"];

/// Methods of ours for the 0.3 `index` facade ([`crate::facade`]), also internal (the
/// shell serves [`lease::UPSERT_RUN_KEY`] and the lease methods around this core).
pub const FACADE_METHODS: [&str; 2] = ["upsertKey", "expireKeys"];

/// Does `method` need the current alarm time (the shell then reads it first)?
pub fn reads_alarm(method: &str) -> bool {
    ALARM_READERS.contains(&method)
}

/// The methods that arm the fence compaction at most (only if no alarm is earlier).
pub const ALARM_READERS: [&str; 2] = ["expireRun", "expireKeys"];

/// Dispatch one method (inside one storage transaction).
pub fn call(store: &mut dyn Store, ctx: &Ctx, alarm: &mut Alarm, method: &str, args: Args) -> Result<Value, RpcError> {
    match method {
        "upsertRun" => publish::upsert_run(store, ctx, args),
        "upsertKey" => publish::upsert_key(store, args),
        "list" => list::list(store, args),
        "deleteStaleGlobalRun" => expiry::delete_stale_global_run(store, args),
        "expireRun" => expiry::expire_run(store, ctx, alarm, args),
        "expireKeys" => expiry::expire_keys(store, ctx, alarm, args),
        other => Err(RpcError::type_error(format!("{CLASS}.{other} is not a function"))),
    }
}
