//! Run events (spec `run-do.md` §6.3 step 3, §6.4): resilient start, `run_created`,
//! `run_started`, and the terminal transitions that release hooks and waits.
//!
//! Runs inside `applyEvent`'s transaction; calls no other object.

use super::context::Apply;
use super::outcome::{fail, Code, Outcome, Success};
use crate::run::keys;
use crate::run::records::{structured_error, Record};
use crate::run::validate::attributes::{allow_reserved, changes_from_record, validate_changes, Change};
use crate::run::validate::{compact, parse_object, schemas};
use crate::store::{ListOptions, Store};
use crate::wire::js::truthy;
use crate::wire::{Map, RpcError, Value};

/// Validate `attributes` of a run being created (a record, as a change list).
fn validate_initial_attributes(attributes: Option<&Value>, allow: Option<&Value>) -> Result<(), RpcError> {
    let pairs = changes_from_record(attributes);
    let changes: Vec<Change> = pairs.iter().map(|(k, v)| Change { key: Some(k), value: Some(v), null_element: false }).collect();
    validate_changes(&changes, None, allow_reserved(allow))
}

/// The members of a new run, before `compact` and validation.
fn new_run(cx: &Apply, ed: &Value) -> Map {
    let mut m = Map::new();
    m.insert("runId".into(), cx.run_id.clone());
    for k in ["deploymentId", "workflowName"] {
        if let Some(v) = ed.get(k) {
            m.insert(k.into(), v.clone());
        }
    }
    m.insert("specVersion".into(), cx.spec_version.clone());
    for k in ["executionContext", "attributes", "encryptionPublicKey", "input"] {
        if let Some(v) = ed.get(k) {
            m.insert(k.into(), v.clone());
        }
    }
    m.insert("status".into(), Value::str("pending"));
    m.insert("createdAt".into(), Value::date(cx.now));
    m.insert("updatedAt".into(), Value::date(cx.now));
    m
}

/// `runCreated`: the workflow name and creation time of a run created by this call.
pub type RunCreated = (Value, i64);

/// Resilient start: create the run from `run_started.eventData` when it is complete.
pub fn bootstrap(cx: &mut Apply) -> Result<Option<(Record, RunCreated)>, RpcError> {
    let Some(ed) = cx.event_data().cloned() else { return Ok(None) };
    let (deployment, workflow, input) = (ed.get("deploymentId"), ed.get("workflowName"), ed.get("input"));
    if !(truthy(deployment) && truthy(workflow) && input.is_some()) {
        return Ok(None);
    }
    validate_initial_attributes(ed.get("attributes"), ed.get("allowReservedAttributes"))?;
    let run = Record(parse_object(schemas::run_schema(), compact(new_run(cx, &ed)))?);
    let mut event_data = Map::new();
    for k in ["deploymentId", "workflowName", "input", "executionContext", "attributes", "allowReservedAttributes", "encryptionPublicKey"] {
        if let Some(v) = ed.get(k) {
            event_data.insert(k.into(), v.clone());
        }
    }
    let record = Map::from([("eventType".to_string(), Value::str("run_created")), ("eventData".to_string(), Value::Object(event_data))]);
    cx.append(record)?;
    run.save(cx.store, keys::RUN)?;
    let workflow_name = workflow.cloned().unwrap_or(Value::Null);
    Ok(Some((run, (workflow_name, cx.now))))
}

/// `run_created`.
pub fn created(cx: &mut Apply) -> Result<Outcome, RpcError> {
    if let Some(existing) = Record::load(cx.store, keys::RUN)? {
        return Ok(Ok(Success { run: Some(existing), ..Default::default() }));
    }
    let attributes = cx.event_data_member("attributes")?.cloned();
    let ed = cx.event_data().cloned().unwrap_or(Value::Null);
    validate_initial_attributes(attributes.as_ref(), ed.get("allowReservedAttributes"))?;
    let run = Record(parse_object(schemas::run_schema(), compact(new_run(cx, &ed)))?);
    let event = cx.append_request()?;
    run.save(cx.store, keys::RUN)?;
    let workflow_name = ed.get("workflowName").cloned().unwrap_or(Value::Null);
    Ok(Ok(Success { event: Some(event), run: Some(run), run_created: Some((workflow_name, cx.now)), ..Default::default() }))
}

/// `run_started` (the run exists unless the bootstrap was impossible).
pub fn started(cx: &mut Apply, current: Option<Record>, bootstrapped: Option<RunCreated>) -> Result<Outcome, RpcError> {
    let Some(current) = current else {
        return Ok(Err(fail(Code::RunNotFound, format!("Workflow run \"{}\" not found", cx.run_id_text))));
    };
    let skip_preload = truthy(cx.param("skipPreload"));
    if current.status() == "running" {
        let page = if skip_preload { None } else { Some(cx.preload()?) };
        return Ok(Ok(Success { run: Some(current), max_events: Some(cx.max_events), page, ..Default::default() }));
    }
    let mut m = current.0.clone();
    m.insert("status".into(), Value::str("running"));
    for k in ["output", "error", "completedAt"] {
        m.remove(k);
    }
    if !m.contains_key("startedAt") || m.get("startedAt") == Some(&Value::Null) {
        m.insert("startedAt".into(), Value::date(cx.now));
    }
    m.insert("updatedAt".into(), Value::date(cx.now));
    let run = Record(parse_object(schemas::run_schema(), compact(m))?);
    let event = cx.append_request()?;
    run.save(cx.store, keys::RUN)?;
    let page = if skip_preload { None } else { Some(cx.preload()?) };
    Ok(Ok(Success {
        event: Some(event),
        run: Some(run),
        run_created: bootstrapped,
        max_events: Some(cx.max_events),
        page,
        ..Default::default()
    }))
}

/// `run_completed`, `run_failed`, `run_cancelled` on a live run.
pub fn terminal(cx: &mut Apply, current: Option<Record>) -> Result<Outcome, RpcError> {
    let Some(current) = current else {
        return Ok(Err(fail(Code::RunNotFound, format!("Workflow run \"{}\" not found", cx.run_id_text))));
    };
    let mut m = current.0.clone();
    match cx.event_type() {
        Some("run_completed") => {
            let output = cx.event_data_member("output")?.cloned();
            m.insert("status".into(), Value::str("completed"));
            match output {
                Some(o) => m.insert("output".into(), o),
                None => m.remove("output"),
            };
            m.remove("error");
        }
        Some("run_failed") => {
            let error = cx.event_data_member("error")?.cloned();
            let code = cx.event_data_opt("errorCode").filter(|c| !c.is_null()).cloned();
            m.insert("status".into(), Value::str("failed"));
            m.remove("output");
            m.insert("error".into(), structured_error(error.as_ref(), code));
        }
        _ => {
            m.insert("status".into(), Value::str("cancelled"));
            m.remove("output");
            m.remove("error");
        }
    }
    m.insert("completedAt".into(), Value::date(cx.now));
    m.insert("updatedAt".into(), Value::date(cx.now));
    let run = Record(parse_object(schemas::run_schema(), compact(m))?);
    let event = cx.append_request()?;
    run.save(cx.store, keys::RUN)?;
    let released_hooks = release_all_hooks(cx.store)?;
    delete_all_waits(cx.store)?;
    Ok(Ok(Success { event: Some(event), run: Some(run), released_hooks, ..Default::default() }))
}

/// Delete every live hook (and its creation index entry); `hookevent:` markers stay.
///
/// Returns the hooks the client must release itself (`releasedHooks`): those admitted
/// through the 0.3 `index` binding, which 0.3 releases inline. Hooks admitted with a 0.4
/// `hookClaimId` are deleted here too but not reported (0.4's `releasedHooks: []`): the
/// terminal cleanup's `markers` page releases them from the alarm (spec-0.4 `run-do.md`
/// §2, `retention.md` §3). Both kinds keep their `retention:hook:` marker for that page.
fn release_all_hooks(store: &mut dyn Store) -> Result<Vec<(Value, Value)>, RpcError> {
    let entries = store.list(&ListOptions::prefix(keys::HOOK_PREFIX))?;
    let mut released = Vec::new();
    for (key, text) in entries {
        let hook = match Value::parse(&text) {
            Ok(Value::Object(m)) => Record(m),
            _ => return Err(RpcError::error(format!("corrupt record at {key}"))),
        };
        let hook_id = hook.get("hookId").cloned().unwrap_or(Value::Null);
        let id_text = crate::wire::js::to_js_string(Some(&hook_id));
        store.delete(&keys::hook(&id_text))?;
        if let Some(created) = hook.date("createdAt") {
            store.delete(&keys::created(keys::HOOK_CREATED_PREFIX, created, &id_text))?;
        }
        if !super::hook::admitted_with_claim(store, &id_text)? {
            released.push((hook_id, hook.get("token").cloned().unwrap_or(Value::Null)));
        }
    }
    Ok(released)
}

fn delete_all_waits(store: &mut dyn Store) -> Result<(), RpcError> {
    crate::store::delete_prefix(store, keys::WAIT_PREFIX)?;
    Ok(())
}
