//! RunCatalogDO key formats (`catalog-hooks.md` §2). The two run keys are byte-identical
//! to the 0.3.0 IndexDO run keys, so the same names list the same way in both.
//!
//! Formats only: no storage access.

use crate::protocol::lifecycle::pad13;
use crate::wire::uri::encode_uri_component;

/// Prefix of the per-workflow run keys.
pub const RUN_PREFIX: &str = "run:";
/// Prefix of the global run keys (the retention sweep pages these).
pub const RUNALL_PREFIX: &str = "runall:";
/// Prefix of the 0.3 client's correlation keys, which the 0.3 facade keeps in the run's
/// shard (nothing reads them but tests and the retention cleanup).
pub const CORRELATION_PREFIX: &str = "correlation:";
/// Prefix of the expiry fences.
pub const EXPIRED_PREFIX: &str = "expired:";
/// Prefix of the time-ordered fence compaction index.
pub const EXPIRY_GC_PREFIX: &str = "expiry-gc:";

/// Is `key` one of the keys a facade call may write or expire here (`run:`, `runall:`,
/// `correlation:`)? Never one of the shard's own records.
pub fn is_catalog_key(key: &str) -> bool {
    [RUN_PREFIX, RUNALL_PREFIX, CORRELATION_PREFIX].iter().any(|p| key.starts_with(p))
}

/// `run:<workflowName>:<pad13(createdAt)>:<runId>` (the workflow name is not escaped).
pub fn run(workflow_name: &str, created_at_ms: i64, run_id: &str) -> String {
    format!("{RUN_PREFIX}{workflow_name}:{}:{run_id}", pad13(created_at_ms))
}

/// `runall:<pad13(createdAt)>:<runId>`.
pub fn runall(created_at_ms: i64, run_id: &str) -> String {
    format!("{RUNALL_PREFIX}{}:{run_id}", pad13(created_at_ms))
}

/// `expired:<runId>` — the expiry fence.
pub fn expired(run_id: &str) -> String {
    format!("{EXPIRED_PREFIX}{run_id}")
}

/// `expiry-gc:<pad13(compactAt)>:<encodeURIComponent(runId)>`.
pub fn expiry_gc(compact_at: i64, run_id: &str) -> String {
    format!("{EXPIRY_GC_PREFIX}{}:{}", pad13(compact_at), encode_uri_component(run_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(run("wf", 1_700_000_000_000, "wrun_1"), "run:wf:1700000000000:wrun_1");
        assert_eq!(run("a:b", 5, "wrun_1"), "run:a:b:0000000000005:wrun_1");
        assert_eq!(runall(5, "wrun_1"), "runall:0000000000005:wrun_1");
        assert_eq!(expired("wrun_1"), "expired:wrun_1");
        assert_eq!(expiry_gc(12, "w run/1"), "expiry-gc:0000000000012:w%20run%2F1");
    }
}
