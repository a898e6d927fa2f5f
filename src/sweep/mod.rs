//! The maximum-age retention sweep (spec-0.4 `retention.md` §5), run by the `scheduled`
//! handler on the hourly cron `0 * * * *`: page the oldest `runall:` catalog entries
//! (created at or before `scheduledTime − WORKFLOW_RETENTION_MS`) over the 16 run-catalog
//! shards, call `WorkflowRunDO.enforceRetention` for each, and compare-delete the catalog
//! entries of runs that turn out missing or not due, so a page of rejects cannot block
//! later occurrences.
//!
//! All decisions are here; the shell ([`crate::shell`]) only provides the calls
//! ([`SweepHost`]).
//!
//! Knows the catalog shards and the run DOs only through [`SweepHost`], and nothing of the
//! platform.

#![allow(async_fn_in_trait)] // hosts are single-threaded (wasm, tests)

use futures_util::future::join_all;

use crate::config::{RetentionSettings, MAX_SAFE_INTEGER};
use crate::protocol::lifecycle::pad13;
use crate::wire::{js, RpcError, Value};

/// Candidates enforced concurrently.
pub const GROUP: usize = 8;

/// The calls a sweep makes.
pub trait SweepHost {
    /// `run-catalog:v1:XX.list(options)`.
    async fn list_catalog(&self, shard: &str, options: Value) -> Result<Value, RpcError>;
    /// `runs/<runId>.enforceRetention(request)`.
    async fn enforce(&self, run_id: &str, request: Value) -> Result<Value, RpcError>;
    /// `run-catalog:v1:XX.deleteStaleGlobalRun(runId, name, value)`.
    async fn delete_stale(&self, shard: &str, run_id: &str, name: &str, value: &str) -> Result<Value, RpcError>;
}

/// What one occurrence did (logged by the shell when `scanned > 0`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepResult {
    pub disabled: bool,
    pub cutoff: Option<i64>,
    pub scanned: u32,
    pub scheduled: u32,
    pub expired: u32,
    pub missing: u32,
    pub not_due: u32,
}

impl SweepResult {
    pub fn to_value(&self) -> Value {
        Value::object([
            ("disabled", Value::Bool(self.disabled)),
            ("cutoff", self.cutoff.map_or(Value::Null, |c| Value::num(c as f64))),
            ("scanned", Value::num(self.scanned)),
            ("scheduled", Value::num(self.scheduled)),
            ("expired", Value::num(self.expired)),
            ("missing", Value::num(self.missing)),
            ("notDue", Value::num(self.not_due)),
        ])
    }
}

/// The merged catalog options for a cutoff: the oldest `runall:` entries created at or
/// before `cutoff`.
pub fn list_options(cutoff: i64, limit: i64) -> Value {
    Value::object([
        ("prefix", Value::str("runall:")),
        ("end", Value::String(format!("runall:{}:", pad13(cutoff.saturating_add(1))))),
        ("limit", Value::num(limit as f64)),
    ])
}

/// Merge the shards' pages in UTF-8 byte order and keep the first `limit` `(name, value)`.
pub fn merge(pages: &[Value], limit: usize) -> Result<Vec<(String, String)>, RpcError> {
    let mut all = Vec::new();
    for page in pages {
        let keys = page.get("keys").and_then(Value::as_array).ok_or_else(|| RpcError::error("malformed run catalog page"))?;
        for entry in keys {
            let name = entry.get("name").and_then(Value::as_str).ok_or_else(|| RpcError::error("malformed run catalog page"))?;
            let value = entry.get("value").and_then(Value::as_str).unwrap_or_default();
            all.push((name.to_string(), value.to_string()));
        }
    }
    all.sort();
    all.truncate(limit);
    Ok(all)
}

/// The run id of a catalog value (`{"runId": …}`, non-empty string).
pub fn run_id_of(value: &str) -> Result<String, RpcError> {
    let parsed = Value::parse(value).ok();
    match parsed.as_ref().and_then(|v| v.get("runId")) {
        Some(Value::String(id)) if !id.is_empty() => Ok(id.clone()),
        _ => Err(RpcError::error("world-celld: run catalog entry has no runId")),
    }
}

/// One candidate: enforce, and compare-delete a stale entry. Returns the run's state.
async fn candidate<H: SweepHost>(host: &H, name: &str, value: &str, request: &Value) -> Result<String, RpcError> {
    let run_id = run_id_of(value)?;
    let answer = host.enforce(&run_id, request.clone()).await?;
    let state = js::to_js_string(answer.get("state"));
    if state == "missing" || state == "not-due" {
        host.delete_stale(&crate::protocol::shard::run_catalog(&run_id), &run_id, name, value).await?;
    }
    Ok(state)
}

/// One occurrence at `scheduled_time` (epoch ms) with the variables `get` reads.
pub async fn sweep<H: SweepHost>(host: &H, get: impl Fn(&str) -> Option<String>, scheduled_time: f64) -> Result<SweepResult, RpcError> {
    if !(scheduled_time.is_finite()
        && scheduled_time.trunc() == scheduled_time
        && scheduled_time >= 0.0
        && scheduled_time <= MAX_SAFE_INTEGER as f64)
    {
        return Err(RpcError::error("world-celld: scheduledTime must be a non-negative safe integer"));
    }
    let scheduled_time = scheduled_time as i64;
    let retention_ms = RetentionSettings::retention_ms(&get).map_err(|e| RpcError::error(e.message()))?;
    if retention_ms == 0 {
        return Ok(SweepResult { disabled: true, ..Default::default() });
    }
    let cutoff = scheduled_time - retention_ms;
    if cutoff < 0 {
        return Ok(SweepResult { cutoff: Some(cutoff), ..Default::default() });
    }
    let settings = RetentionSettings::from_lookup(get).map_err(|e| RpcError::error(e.message()))?;
    let options = list_options(cutoff, settings.batch_size);
    let shards = crate::protocol::shard::all_run_catalogs();
    let pages = join_all(shards.iter().map(|shard| host.list_catalog(shard, options.clone()))).await;
    let pages = pages.into_iter().collect::<Result<Vec<_>, _>>()?;
    let entries = merge(&pages, settings.batch_size as usize)?;
    let request = Value::object([
        ("retentionMs", Value::num(retention_ms as f64)),
        ("queueShards", Value::num(settings.queue_shards as f64)),
        ("scheduledTime", Value::num(scheduled_time as f64)),
    ]);
    let mut result = SweepResult { cutoff: Some(cutoff), scanned: entries.len() as u32, ..Default::default() };
    let mut failed = 0u32;
    for group in entries.chunks(GROUP) {
        let outcomes = join_all(group.iter().map(|(name, value)| candidate(host, name, value, &request))).await;
        for outcome in outcomes {
            match outcome.as_deref() {
                Ok("scheduled") => result.scheduled += 1,
                Ok("expired") => result.expired += 1,
                Ok("missing") => result.missing += 1,
                Ok("not-due") => result.not_due += 1,
                Ok(_) => {}
                Err(_) => failed += 1,
            }
        }
    }
    if failed > 0 {
        return Err(RpcError { name: "AggregateError".into(), message: format!("world-celld retention sweep failed for {failed} run(s)") });
    }
    Ok(result)
}

#[cfg(test)]
mod tests;
