//! Wait events (spec `run-do.md` §6.7).
//!
//! Runs inside `applyEvent`'s transaction; calls no other object.

use super::context::Apply;
use super::outcome::{fail, Code, Outcome, Success};
use crate::run::keys;
use crate::run::records::Record;
use crate::run::validate::{parse_object, schemas};
use crate::wire::js::to_js_string;
use crate::wire::{Map, RpcError, Value};

/// `wait_created` (validated, not compacted).
pub fn created(cx: &mut Apply) -> Result<Outcome, RpcError> {
    let id = cx.id_text();
    let key = keys::wait(&id);
    if Record::load(cx.store, &key)?.is_some() {
        return Ok(Err(fail(Code::EntityConflict, format!("Wait \"{id}\" already exists"))));
    }
    let resume_at = cx.event_data_member("resumeAt")?.cloned();
    let mut m = Map::new();
    m.insert("waitId".into(), Value::String(format!("{}-{id}", to_js_string(Some(&cx.run_id)))));
    m.insert("runId".into(), cx.run_id.clone());
    m.insert("status".into(), Value::str("waiting"));
    if let Some(r) = resume_at {
        m.insert("resumeAt".into(), r);
    }
    m.insert("createdAt".into(), Value::date(cx.now));
    m.insert("updatedAt".into(), Value::date(cx.now));
    m.insert("specVersion".into(), cx.spec_version.clone());
    let wait = Record(parse_object(schemas::wait_schema(), m)?);
    let event = cx.append_request()?;
    wait.save(cx.store, &key)?;
    Ok(Ok(Success { event: Some(event), wait: Some(wait), ..Default::default() }))
}

/// `wait_completed` (the event is built before the wait is re-validated).
pub fn completed(cx: &mut Apply) -> Result<Outcome, RpcError> {
    let id = cx.id_text();
    let key = keys::wait(&id);
    let Some(existing) = Record::load(cx.store, &key)? else {
        return Ok(Err(fail(Code::WaitNotFound, format!("Wait \"{id}\" not found"))));
    };
    if existing.status() == "completed" {
        return Ok(Err(fail(Code::EntityConflict, format!("Wait \"{id}\" already completed"))));
    }
    let event = cx.append_request()?;
    let mut m = existing.0.clone();
    m.insert("status".into(), Value::str("completed"));
    if let Some(r) = cx.event_data_opt("resumeAt").filter(|r| !r.is_null()) {
        m.insert("resumeAt".into(), r.clone());
    }
    m.insert("completedAt".into(), Value::date(cx.now));
    m.insert("updatedAt".into(), Value::date(cx.now));
    let wait = Record(parse_object(schemas::wait_schema(), m)?);
    wait.save(cx.store, &key)?;
    Ok(Ok(Success { event: Some(event), wait: Some(wait), ..Default::default() }))
}
