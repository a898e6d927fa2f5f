//! The retention `index` phase over the sharded index (issue #9; spec-0.4 `retention.md`
//! §2 and the README's proposed design): the phase's request `{runId, keys, hooks,
//! expiredAt}` (`phases.rs`) expires the run wherever its index entries can be — its
//! catalog shard (fence, run and correlation keys), the hook shards (owner-checked
//! releases of every hook marker) and the archive IndexDO (entries written before the
//! upgrade): the calls of [`crate::protocol::expiry`], all concurrent here (the request is
//! built by the run DO, so no validation has to come first). Each call is idempotent, so a
//! retried phase repeats them safely.
//!
//! Knows neither the 0.3 facade nor the shards' storage.

use crate::protocol::calls::ShardCall;
use crate::protocol::expiry::{archive_call, shard_calls};
use crate::wire::Value;

/// The calls for one `index` phase request.
pub fn calls(request: &Value) -> Vec<ShardCall> {
    let mut out = shard_calls(request);
    out.push(archive_call(request));
    out
}
