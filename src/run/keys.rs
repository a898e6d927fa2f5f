//! Storage keys of the run DO (spec `run-do.md` §1). Ids are interpolated the way the
//! reference's template strings do (so a missing id becomes `undefined`).
//!
//! Formats only: no storage access.

use crate::wire::date::iso;
use crate::wire::uri::encode_uri_component as enc;

pub const RUN: &str = "run";
pub const EVENT_SEQUENCE: &str = "event_sequence";
pub const EVENT_PREFIX: &str = "event:";
pub const STEP_PREFIX: &str = "step:";
pub const STEP_CREATED_PREFIX: &str = "stepcreated:";
pub const HOOK_PREFIX: &str = "hook:";
pub const HOOK_CREATED_PREFIX: &str = "hookcreated:";
pub const HOOK_EVENT_PREFIX: &str = "hookevent:";
pub const WAIT_PREFIX: &str = "wait:";
pub const ATTR_EVENT_PREFIX: &str = "attrevent:";
pub const HOOK_RESUME_PREFIX: &str = "hookresume:";
pub const RETENTION_INDEX_PREFIX: &str = "retention:index:";
pub const RETENTION_HOOK_PREFIX: &str = "retention:hook:";
pub const RETENTION_CLEANUP: &str = "retention:cleanup";
pub const RETENTION_TOMBSTONE: &str = "retention:tombstone";
/// Progress of the paged queues phase (spec-0.4 `run-do.md` §1):
/// `{queueShard, queueShardDeleted, pendingAck?: {queueShard, receipt}}`. Deleted when the
/// phase ends.
pub const RETENTION_PROGRESS: &str = "retention:progress";
/// The client's `cleanup.queueShards` at run creation (spec-0.4 `run-do.md` §1), read by
/// maximum-age retention.
pub const RETENTION_QUEUE_SHARDS: &str = "retention:queue-shards";
/// Ours: `true` once the run admitted a hook with a 0.4 `hookClaimId`, i.e. a 0.4 client
/// drives it. Such a run publishes no correlation keys, so no `retention:index:` markers
/// are written for it. Not counted as payload.
pub const RETENTION_CLAIMS: &str = "retention:claims";
/// The terminal cleanup record (spec-0.4 `retention.md` §3).
pub const TERMINAL_CLEANUP: &str = "terminal:cleanup";
pub const HOOK_RELEASED_PREFIX: &str = "hookreleased:";
pub const HOOK_CLAIM_CANCELLED_PREFIX: &str = "hookclaimcancelled:";

pub fn event(event_id: &str) -> String {
    format!("{EVENT_PREFIX}{event_id}")
}
pub fn step(step_id: &str) -> String {
    format!("{STEP_PREFIX}{step_id}")
}
pub fn hook(hook_id: &str) -> String {
    format!("{HOOK_PREFIX}{hook_id}")
}
pub fn hook_event(hook_id: &str) -> String {
    format!("{HOOK_EVENT_PREFIX}{hook_id}")
}
pub fn wait(correlation_id: &str) -> String {
    format!("{WAIT_PREFIX}{correlation_id}")
}
pub fn attr_event(correlation_id: &str) -> String {
    format!("{ATTR_EVENT_PREFIX}{correlation_id}")
}
pub fn hook_resume(resume_id: &str) -> String {
    format!("{HOOK_RESUME_PREFIX}{resume_id}")
}
/// Creation-time index entry (`<prefix><createdAt ISO>:<id>`).
pub fn created(prefix: &str, created_at_ms: i64, id: &str) -> String {
    format!("{prefix}{}:{id}", iso(created_at_ms))
}
/// 13-digit zero-padded epoch milliseconds, as the client embeds in IndexDO keys.
pub fn ms13(ms: i64) -> String {
    format!("{ms:013}")
}
/// The IndexDO correlation key the client writes for an event.
pub fn correlation_index_key(correlation_id: &str, created_at_ms: i64, event_id: &str, run_id: &str) -> String {
    format!("correlation:{}:{}:{event_id}:{run_id}", enc(correlation_id), ms13(created_at_ms))
}
/// `hookreleased:<hookId>`: the durable release marker of a disposed hook.
pub fn hook_released(hook_id: &str) -> String {
    format!("{HOOK_RELEASED_PREFIX}{hook_id}")
}
/// `hookclaimcancelled:<enc(claimId)>`: the cancellation fence of a hook claim.
pub fn hook_claim_cancelled(claim_id: &str) -> String {
    format!("{HOOK_CLAIM_CANCELLED_PREFIX}{}", enc(claim_id))
}
pub fn retention_index(index_key: &str) -> String {
    format!("{RETENTION_INDEX_PREFIX}{}", enc(index_key))
}
pub fn retention_hook(hook_id: &str, token: &str) -> String {
    format!("{RETENTION_HOOK_PREFIX}{}:{}", enc(hook_id), enc(token))
}
