//! HookIdDO core (spec-0.4 `catalog-hooks.md` §3): the hook id shards `hook-id:v1:00…1f`
//! (env `WORKFLOW_HOOK_IDS`, RPC binding `hook-ids`, where only `get` is reachable), keyed by
//! `hookId`. The algorithm is [`crate::hook_shard`] with [`FAMILY`] = [`Family::Id`];
//! what is particular to this class: the record key `hookid:<enc(hookId)>`, the
//! publication method `publish`, and a same-owner `reserve` replaces the claim (new lease) unless the proposed claim id is the same.
//!
//! * [`call`] — the transactional methods `reserve`, `releaseClaim`, `releaseBatch`
//!   (one storage transaction; `reserve` may arm the alarm, see [`reads_alarm`]);
//! * [`crate::hook_shard::driver::call`] with [`FAMILY`] — every method, including the
//!   lifecycle-checked `get` and `publish`, over a [`crate::hook_shard::driver::ShardHost`];
//! * [`alarm`] — claim compaction (the shell runs it with [`Alarm::unknown`] and, when
//!   it fails, sets [`crate::protocol::lifecycle::compaction_retry`]).
//!
//! Holds none of the algorithm: that is [`crate::hook_shard`].

use crate::protocol::hop::{Args, Ctx};
use crate::store::alarm::Alarm;
use crate::store::Store;
use crate::wire::{RpcError, Value};

use crate::hook_shard;
pub use crate::hook_shard::reads_alarm;
use crate::protocol::hooks::Family;

pub const FAMILY: Family = Family::Id;
pub const CLASS: &str = "HookIdDO";

/// Every method of the class; only `get` is reachable through `/v1/rpc`.
pub fn methods() -> [&'static str; 5] {
    FAMILY.methods()
}

/// Dispatch one transactional method (inside one storage transaction).
pub fn call(store: &mut dyn Store, ctx: &Ctx, alarm: &mut Alarm, method: &str, args: Args) -> Result<Value, RpcError> {
    hook_shard::call(store, FAMILY, ctx.now, alarm, method, args)
}

/// The alarm: one compaction pass over due claim deadlines.
pub fn alarm(store: &mut dyn Store, now: i64, alarm: &mut Alarm) -> Result<usize, RpcError> {
    hook_shard::compaction::alarm(store, FAMILY, now, alarm)
}

#[cfg(test)]
mod tests;
