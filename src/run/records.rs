//! Stored records of the run DO: the run, steps, hooks, waits and events exactly as the
//! schemas produced them (zod output objects, stored as tagged JSON), with typed
//! accessors for the members the state machine reads, plus the retention records.
//!
//! Knows no storage key (those are [`super::keys`]).

use crate::store::{get_json, put_json, Store};
use crate::wire::{Map, RpcError, Value};

/// A validated entity or event.
#[derive(Debug, Clone, PartialEq)]
pub struct Record(pub Map);

impl Record {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }
    pub fn str(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }
    /// A Date member (epoch ms).
    pub fn date(&self, key: &str) -> Option<i64> {
        match self.0.get(key) {
            Some(Value::Date(ms)) => *ms,
            _ => None,
        }
    }
    pub fn num(&self, key: &str) -> Option<f64> {
        self.0.get(key).and_then(Value::as_f64)
    }
    pub fn status(&self) -> &str {
        self.str("status").unwrap_or_default()
    }
    pub fn into_value(self) -> Value {
        Value::Object(self.0)
    }
    pub fn load(store: &mut dyn Store, key: &str) -> Result<Option<Record>, RpcError> {
        Ok(match get_json::<Value>(store, key)? {
            Some(Value::Object(m)) => Some(Record(m)),
            Some(_) => return Err(RpcError::error(format!("corrupt record at {key}"))),
            None => None,
        })
    }
    pub fn save(&self, store: &mut dyn Store, key: &str) -> Result<(), RpcError> {
        put_json(store, key, &Value::Object(self.0.clone()))
    }
}

/// Run statuses after which nothing may change (`isTerminalWorkflowRunStatus`).
pub fn is_terminal_run_status(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

/// Step statuses after which nothing may change (`isTerminalStepStatus`).
pub fn is_terminal_step_status(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

/// The structured error stored on runs and steps (`schemas.md` §10).
pub fn structured_error(error: Option<&Value>, code_override: Option<Value>) -> Value {
    let read = |key: &str| match error {
        Some(Value::Object(m)) => m.get(key).filter(|v| matches!(v, Value::String(_))).cloned(),
        _ => None,
    };
    let message = match error {
        Some(Value::String(s)) => Value::String(s.clone()),
        _ => read("message").unwrap_or_else(|| Value::str("Unknown error")),
    };
    let mut m = Map::new();
    m.insert("message".into(), message);
    if let Some(stack) = read("stack") {
        m.insert("stack".into(), stack);
    }
    if let Some(code) = code_override.or_else(|| read("code")) {
        m.insert("code".into(), code);
    }
    Value::Object(m)
}

/// Why a cleanup record exists (spec-0.4 `retention.md` §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Scheduled by `applyEvent` from the client's `cleanup.retentionMs`.
    TerminalRetention,
    /// `scheduleCleanup` / `cleanupNow`.
    Manual,
    /// The fleet-wide `WORKFLOW_RETENTION_MS` (the cron sweep's `enforceRetention`).
    MaximumAge,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::TerminalRetention => "terminal-retention",
            Reason::Manual => "manual",
            Reason::MaximumAge => "maximum-age",
        }
    }
}

/// Set the members describing the run's state on a cleanup record: `status` (always),
/// `completedAt` and `terminalStatus` (only for a terminal run; absent otherwise).
pub fn stamp_run_state(m: &mut Map, run: &Record) {
    m.insert("status".into(), Value::str(run.status()));
    if is_terminal_run_status(run.status()) {
        m.insert("completedAt".into(), run.get("completedAt").cloned().unwrap_or(Value::Null));
        m.insert("terminalStatus".into(), Value::str(run.status()));
    } else {
        m.remove("completedAt");
        m.remove("terminalStatus");
    }
}

/// A new `retention:cleanup` record (spec-0.4 `retention.md` §1): phase `retained`,
/// generation 0, zero counters. `queue_shards` `None` leaves the member absent.
pub fn cleanup_record(run: &Record, reason: Reason, due_at: i64, queue_shards: Option<Value>) -> Map {
    let mut m = Map::new();
    m.insert("version".into(), Value::num(1));
    m.insert("runId".into(), run.get("runId").cloned().unwrap_or(Value::Null));
    m.insert("workflowName".into(), run.get("workflowName").cloned().unwrap_or(Value::Null));
    m.insert("createdAt".into(), run.get("createdAt").cloned().unwrap_or(Value::Null));
    stamp_run_state(&mut m, run);
    m.insert("reason".into(), Value::str(reason.as_str()));
    m.insert("dueAt".into(), Value::date(due_at));
    if let Some(shards) = queue_shards {
        m.insert("queueShards".into(), shards);
    }
    m.insert("phase".into(), Value::str("retained"));
    m.insert("generation".into(), Value::num(0));
    m.insert("attempts".into(), Value::num(0));
    m.insert("deletedPayloadKeys".into(), Value::num(0));
    m.insert("deletedStreams".into(), Value::num(0));
    m.insert("deletedQueueMessages".into(), Value::num(0));
    m
}

/// The record's `generation`; a record written before generations existed reads as 0.
pub fn generation(record: &Record) -> f64 {
    record.num("generation").filter(|g| g.is_finite()).unwrap_or(0.0)
}

/// `cleanupTombstone(record, at)` (spec-0.4 `retention.md` §1): the tombstone for a cleanup
/// record, embedding the record as tombstoned at `at`.
pub fn tombstone_for(record: &Record, tombstoned_at: Value) -> Map {
    let mut cleanup = record.0.clone();
    cleanup.insert("phase".into(), Value::str("tombstoned"));
    cleanup.insert("tombstonedAt".into(), tombstoned_at.clone());
    let mut m = Map::new();
    m.insert("version".into(), Value::num(1));
    m.insert("runId".into(), record.get("runId").cloned().unwrap_or(Value::Null));
    if let Some(status) = record.get("status").or_else(|| record.get("terminalStatus")) {
        m.insert("status".into(), status.clone());
    }
    for k in ["completedAt", "terminalStatus"] {
        if let Some(v) = record.get(k) {
            m.insert(k.into(), v.clone());
        }
    }
    m.insert("expiredAt".into(), record.get("dueAt").cloned().unwrap_or(Value::Null));
    m.insert("tombstonedAt".into(), tombstoned_at);
    m.insert("cleanup".into(), Value::Object(cleanup));
    m
}

/// A tombstone synthesized from a cleanup record whose time has come (spec-0.4
/// `run-do.md` §5): tombstoned at `record.tombstonedAt ?? record.dueAt`.
pub fn tombstone_from_cleanup(record: &Record) -> Map {
    let at = record.get("tombstonedAt").or_else(|| record.get("dueAt")).cloned().unwrap_or(Value::Null);
    tombstone_for(record, at)
}
