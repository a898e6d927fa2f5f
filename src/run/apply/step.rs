//! Step events (spec `run-do.md` §6.3 step 6, §6.5): the step guards, `step_created`,
//! `step_started` (with the lazy start), `step_completed`, `step_failed`, `step_retrying`.
//!
//! Runs inside `applyEvent`'s transaction; calls no other object.

use super::context::{is_child_entity_creation, Apply};
use super::outcome::{fail, Code, Failure, Outcome, Success};
use crate::run::keys;
use crate::run::records::{is_terminal_run_status, is_terminal_step_status, structured_error, Record};
use crate::run::validate::{compact, parse_object, schemas};
use crate::wire::js::{new_date, truthy};
use crate::wire::{Map, RpcError, Value};

/// Guard 6: the step must exist (unless lazily created) and be modifiable.
pub fn guard(cx: &mut Apply, current: Option<&Record>) -> Result<Result<Option<Record>, Failure>, RpcError> {
    let lazy = cx.event_type() == Some("step_started") && is_child_entity_creation(&cx.data);
    let id = cx.id_text();
    let step = Record::load(cx.store, &keys::step(&id))?;
    match &step {
        None if !lazy => return Ok(Err(fail(Code::StepNotFound, format!("Step \"{id}\" not found")))),
        Some(_) if lazy => return Ok(Err(fail(Code::EntityConflict, format!("Step \"{id}\" already exists")))),
        _ => {}
    }
    if let Some(s) = &step {
        if is_terminal_step_status(s.status()) {
            return Ok(Err(fail(Code::EntityConflict, format!("Cannot modify step in terminal state \"{}\"", s.status()))));
        }
        if let Some(run) = current.filter(|r| is_terminal_run_status(r.status())) {
            if s.status() != "running" {
                return Ok(Err(fail(
                    Code::RunExpired,
                    format!("Cannot modify non-running step on run in terminal state \"{}\"", run.status()),
                )));
            }
        }
    }
    Ok(Ok(step))
}

/// A new pending step.
fn new_step(cx: &Apply, step_name: Option<&Value>, input: Option<&Value>) -> Result<Record, RpcError> {
    let mut m = Map::new();
    m.insert("runId".into(), cx.run_id.clone());
    if let Some(id) = &cx.id {
        m.insert("stepId".into(), id.clone());
    }
    if let Some(n) = step_name {
        m.insert("stepName".into(), n.clone());
    }
    m.insert("status".into(), Value::str("pending"));
    if let Some(i) = input {
        m.insert("input".into(), i.clone());
    }
    m.insert("attempt".into(), Value::num(0));
    m.insert("createdAt".into(), Value::date(cx.now));
    m.insert("updatedAt".into(), Value::date(cx.now));
    m.insert("specVersion".into(), cx.spec_version.clone());
    Ok(Record(parse_object(schemas::step_schema(), compact(m))?))
}

fn store_new_step(cx: &mut Apply, step: &Record) -> Result<(), RpcError> {
    let id = cx.id_text();
    step.save(cx.store, &keys::step(&id))?;
    let step_id = step.str("stepId").unwrap_or_default().to_string();
    let created = step.date("createdAt").unwrap_or(cx.now);
    crate::store::put_json(cx.store, &keys::created(keys::STEP_CREATED_PREFIX, created, &step_id), &Value::String(step_id.clone()))
}

/// `step_created`.
pub fn created(cx: &mut Apply) -> Result<Outcome, RpcError> {
    let id = cx.id_text();
    if Record::load(cx.store, &keys::step(&id))?.is_some() {
        return Ok(Err(fail(Code::EntityConflict, format!("Step \"{id}\" already exists"))));
    }
    let step_name = cx.event_data_member("stepName")?.cloned();
    let input = cx.event_data_opt("input").cloned();
    let step = new_step(cx, step_name.as_ref(), input.as_ref())?;
    let event = cx.append_request()?;
    store_new_step(cx, &step)?;
    Ok(Ok(Success { event: Some(event), step: Some(step), ..Default::default() }))
}

/// `step_started`, creating the step first on the lazy path.
pub fn started(cx: &mut Apply, step: Option<Record>) -> Result<Outcome, RpcError> {
    let mut step = step;
    let mut step_created = false;
    let input = cx.event_data_opt("input").cloned();
    let step_name = cx.event_data_opt("stepName").cloned();
    if step.is_none() && input.is_some() && truthy(step_name.as_ref()) {
        let created = new_step(cx, step_name.as_ref(), input.as_ref())?;
        let mut event_data = Map::new();
        if let Some(n) = &step_name {
            event_data.insert("stepName".into(), n.clone());
        }
        if let Some(w) = cx.event_data_opt("workflowName") {
            event_data.insert("workflowName".into(), w.clone());
        }
        if let Some(i) = &input {
            event_data.insert("input".into(), i.clone());
        }
        cx.append_own("step_created", event_data)?;
        store_new_step(cx, &created)?;
        step = Some(created);
        step_created = true;
    }
    let id = cx.id_text();
    let Some(step) = step else {
        return Ok(Err(fail(Code::StepNotFound, format!("Step \"{id}\" not found"))));
    };
    if let Some(retry_after) = step.date("retryAfter").filter(|ra| *ra > cx.now) {
        let wait_ms = (retry_after - cx.now) as f64;
        return Ok(Err(Failure {
            code: Code::TooEarly,
            message: format!("Cannot start step \"{id}\": retryAfter timestamp has not been reached yet"),
            retry_after_seconds: Some((wait_ms / 1000.0).ceil()),
            run_spec_version: None,
        }));
    }
    let mut m = step.0.clone();
    m.insert("status".into(), Value::str("running"));
    if step.date("startedAt").is_none() {
        m.insert("startedAt".into(), Value::date(cx.now));
    }
    m.insert("attempt".into(), Value::num(step.num("attempt").unwrap_or(0.0) + 1.0));
    m.remove("retryAfter");
    m.insert("updatedAt".into(), Value::date(cx.now));
    let updated = Record(parse_object(schemas::step_schema(), compact(m))?);
    let event = cx.append_request()?;
    updated.save(cx.store, &keys::step(&id))?;
    Ok(Ok(Success { event: Some(event), step: Some(updated), step_created, ..Default::default() }))
}

/// `step_completed`, `step_failed`, `step_retrying`.
pub fn progressed(cx: &mut Apply, step: Option<Record>) -> Result<Outcome, RpcError> {
    let id = cx.id_text();
    let Some(step) = step else {
        return Ok(Err(fail(Code::StepNotFound, format!("Step \"{id}\" not found"))));
    };
    let mut m = step.0.clone();
    match cx.event_type() {
        Some("step_completed") => {
            let result = cx.event_data_member("result")?.cloned();
            m.insert("status".into(), Value::str("completed"));
            match result {
                Some(r) => m.insert("output".into(), r),
                None => m.remove("output"),
            };
            m.insert("completedAt".into(), Value::date(cx.now));
        }
        Some("step_failed") => {
            let error = cx.event_data_member("error")?.cloned();
            m.insert("status".into(), Value::str("failed"));
            m.insert("error".into(), structured_error(error.as_ref(), None));
            m.insert("completedAt".into(), Value::date(cx.now));
        }
        _ => {
            let error = cx.event_data_member("error")?.cloned();
            let retry_after = cx.event_data_opt("retryAfter").cloned();
            m.insert("status".into(), Value::str("pending"));
            m.insert("error".into(), structured_error(error.as_ref(), None));
            if truthy(retry_after.as_ref()) {
                m.insert("retryAfter".into(), Value::Date(new_date(retry_after.as_ref())));
            } else {
                m.remove("retryAfter");
            }
        }
    }
    m.insert("updatedAt".into(), Value::date(cx.now));
    let updated = Record(parse_object(schemas::step_schema(), compact(m))?);
    let event = cx.append_request()?;
    updated.save(cx.store, &keys::step(&id))?;
    Ok(Ok(Success { event: Some(event), step: Some(updated), ..Default::default() }))
}
