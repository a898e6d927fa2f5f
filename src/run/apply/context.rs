//! What every event module of `applyEvent` works on: the call's request and shared state
//! ([`Apply`]: the store, the event sequence, the clock, the request's members) with the
//! event appends, and the reference's JavaScript member read and child-entity test.
//!
//! Knows no event family's rules (those are the sibling modules') and calls no other
//! object.

use crate::run::events::{append_event, list_events_answer, EventCtx, Page, Sequence};
use crate::run::records::Record;
use crate::store::Store;
use crate::wire::js::to_js_string;
use crate::wire::{Map, RpcError, Value};

/// The call's request and shared state.
pub struct Apply<'a> {
    pub store: &'a mut dyn Store,
    pub seq: Sequence,
    pub now: i64,
    pub max_events: f64,
    /// `request.runId` as sent (normally a string).
    pub run_id: Value,
    /// `request.runId` interpolated into messages and keys.
    pub run_id_text: String,
    /// `request.data` members.
    pub data: Map,
    /// `data.correlationId`.
    pub id: Option<Value>,
    pub params: Option<Value>,
    pub token_holder: Option<Value>,
    /// 0.4: `request.hookClaimId`, sent only with an admitted `hook_created`.
    pub hook_claim_id: Option<Value>,
    /// The effective spec version of the request: `data.specVersion` when present and not
    /// null (checked before anything is written), else [`SPEC_VERSION_FLOOR`](super::SPEC_VERSION_FLOOR). Stamped on
    /// every event this call appends and on the run, step, hook and wait it creates.
    pub spec_version: Value,
}

impl Apply<'_> {
    pub fn event_type(&self) -> Option<&str> {
        self.data.get("eventType").and_then(Value::as_str)
    }
    /// `${data.correlationId}`.
    pub fn id_text(&self) -> String {
        to_js_string(self.id.as_ref())
    }
    pub fn param(&self, key: &str) -> Option<&Value> {
        match &self.params {
            Some(Value::Object(m)) => m.get(key),
            _ => None,
        }
    }
    /// `data.eventData` (None when absent).
    pub fn event_data(&self) -> Option<&Value> {
        self.data.get("eventData")
    }
    /// `data.eventData.<key>` with JavaScript's TypeError for a missing `eventData`.
    pub fn event_data_member(&self, key: &str) -> Result<Option<&Value>, RpcError> {
        member(self.event_data(), key)
    }
    /// `data.eventData?.<key>`.
    pub fn event_data_opt(&self, key: &str) -> Option<&Value> {
        self.event_data().and_then(|d| d.get(key))
    }
    fn event_ctx(&self) -> (Value, Option<Value>, Option<Value>, Value) {
        (self.run_id.clone(), self.param("occurredAt").cloned(), self.param("resumeId").cloned(), self.spec_version.clone())
    }
    /// Append an event built from `record` (request members or a synthetic event).
    pub fn append(&mut self, record: Map) -> Result<Record, RpcError> {
        let (run_id, occurred_at, resume_id, spec_version) = self.event_ctx();
        let ctx = EventCtx {
            run_id: &run_id,
            now: self.now,
            occurred_at: occurred_at.as_ref(),
            resume_id: resume_id.as_ref(),
            spec_version: &spec_version,
        };
        append_event(self.store, &mut self.seq, &ctx, record)
    }
    /// Append an event the DO writes on its own (`hook_conflict`, lazy `step_created`): the
    /// type, the request's `correlationId` when it has one, and `eventData`.
    pub fn append_own(&mut self, event_type: &str, event_data: Map) -> Result<Record, RpcError> {
        let mut record = Map::new();
        record.insert("eventType".into(), Value::str(event_type));
        if let Some(id) = &self.id {
            record.insert("correlationId".into(), id.clone());
        }
        record.insert("eventData".into(), Value::Object(event_data));
        self.append(record)
    }
    /// Append the request itself as the event.
    pub fn append_request(&mut self) -> Result<Record, RpcError> {
        let record = self.data.clone();
        self.append(record)
    }
    /// The event page of all events, from the beginning (run_started preload), for the
    /// answer: events as stored where that is the encoder's output ([`list_events_answer`]).
    pub fn preload(&mut self) -> Result<Page, RpcError> {
        list_events_answer(self.store, self.max_events, None, false)
    }
}

/// JavaScript member read `v.key`: TypeError on undefined/null, `undefined` on
/// primitives.
pub fn member<'v>(v: Option<&'v Value>, key: &str) -> Result<Option<&'v Value>, RpcError> {
    match v {
        None => Err(RpcError::type_error(format!("Cannot read properties of undefined (reading '{key}')"))),
        Some(Value::Null) => Err(RpcError::type_error(format!("Cannot read properties of null (reading '{key}')"))),
        Some(Value::Object(m)) => Ok(m.get(key)),
        Some(_) => Ok(None),
    }
}

/// `isChildEntityCreationEvent(data)`.
pub fn is_child_entity_creation(data: &Map) -> bool {
    match data.get("eventType").and_then(Value::as_str) {
        Some("step_created" | "hook_created" | "wait_created") => true,
        Some("step_started") => {
            let ed = data.get("eventData");
            matches!(ed.and_then(|d| d.get("stepName")), Some(Value::String(_))) && ed.and_then(|d| d.get("input")).is_some()
        }
        _ => false,
    }
}
