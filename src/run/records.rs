//! Stored records of the run DO: the run, steps, hooks, waits and events exactly as the
//! schemas produced them (zod output objects, stored as tagged JSON), with typed
//! accessors for the members the state machine reads, plus the retention records.

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

/// `retention:cleanup` (spec `retention.md` §1).
pub fn cleanup_record(run: &Record, due_at: i64, queue_shards: Value) -> Map {
    let mut m = Map::new();
    m.insert("version".into(), Value::num(1));
    m.insert("runId".into(), run.get("runId").cloned().unwrap_or(Value::Null));
    m.insert("workflowName".into(), run.get("workflowName").cloned().unwrap_or(Value::Null));
    m.insert("createdAt".into(), run.get("createdAt").cloned().unwrap_or(Value::Null));
    m.insert("completedAt".into(), run.get("completedAt").cloned().unwrap_or(Value::Null));
    m.insert("terminalStatus".into(), Value::str(run.status()));
    m.insert("dueAt".into(), Value::date(due_at));
    m.insert("queueShards".into(), queue_shards);
    m.insert("phase".into(), Value::str("retained"));
    m.insert("attempts".into(), Value::num(0));
    m.insert("deletedPayloadKeys".into(), Value::num(0));
    m.insert("deletedStreams".into(), Value::num(0));
    m.insert("deletedQueueMessages".into(), Value::num(0));
    m
}

/// A tombstone synthesized from a cleanup record whose time has come (`run-do.md` §2).
pub fn tombstone_from_cleanup(record: &Record) -> Map {
    let due = record.get("dueAt").cloned().unwrap_or(Value::Null);
    let mut m = Map::new();
    m.insert("version".into(), Value::num(1));
    m.insert("runId".into(), record.get("runId").cloned().unwrap_or(Value::Null));
    m.insert("terminalStatus".into(), record.get("terminalStatus").cloned().unwrap_or(Value::Null));
    m.insert("completedAt".into(), record.get("completedAt").cloned().unwrap_or(Value::Null));
    m.insert("expiredAt".into(), due.clone());
    m.insert("tombstonedAt".into(), record.get("tombstonedAt").cloned().unwrap_or(due));
    m
}
