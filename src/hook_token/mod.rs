//! HookTokenDO core (spec-0.4 `catalog-hooks.md` §3): the hook token shards `hook-token:v1:00…1f`
//! (env `WORKFLOW_HOOK_TOKENS`, RPC binding `hook-tokens`, where only `get` is reachable), keyed by
//! `token`. The algorithm is [`crate::hook_shard`] with [`FAMILY`] = [`Family::Token`];
//! what is particular to this class: the record key `hook:<enc(token)>`, the
//! publication method `finalize`, and a same-owner `reserve` answers the existing claim id without renewing the lease.
//!
//! * [`call`] — the transactional methods `reserve`, `releaseClaim`, `releaseBatch`
//!   (one storage transaction; `reserve` may arm the alarm, see [`reads_alarm`]);
//! * [`crate::hook_shard::driver::call`] with [`FAMILY`] — every method, including the
//!   lifecycle-checked `get` and `finalize`, over a [`crate::hook_shard::driver::ShardHost`];
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

pub const FAMILY: Family = Family::Token;
pub const CLASS: &str = "HookTokenDO";

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
