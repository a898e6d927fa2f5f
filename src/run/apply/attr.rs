//! `attr_set` (spec `run-do.md` §6.4): attribute validation against the run's current
//! keys, workflow-writer dedup markers, and the merged attributes.
//!
//! Runs inside `applyEvent`'s transaction; calls no other object.

use std::collections::BTreeSet;

use super::context::{member, Apply};
use super::outcome::{fail, Code, Outcome, Success};
use crate::run::keys;
use crate::run::records::Record;
use crate::run::validate::attributes::{allow_reserved, apply_changes, changes_from, validate_changes};
use crate::run::validate::{compact, parse_object, schemas};
use crate::store::{get_json, put_json};
use crate::wire::js::truthy;
use crate::wire::{Map, RpcError, Value};

pub fn set(cx: &mut Apply, current: Option<Record>) -> Result<Outcome, RpcError> {
    let Some(current) = current else {
        return Ok(Err(fail(Code::RunNotFound, format!("Workflow run \"{}\" not found", cx.run_id_text))));
    };
    let changes_value = cx.event_data_member("changes")?.cloned();
    let attributes = match current.get("attributes") {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    let existing: BTreeSet<String> = attributes.keys().cloned().collect();
    let allow = allow_reserved(cx.event_data_opt("allowReservedAttributes"));
    let changes = changes_from(changes_value.as_ref())?;
    validate_changes(&changes, Some(&existing), allow)?;
    let marker = if truthy(cx.id.as_ref()) {
        let writer = cx.event_data_opt("writer");
        let writer_type = member(writer, "type")?;
        (writer_type.and_then(Value::as_str) == Some("workflow")).then(|| keys::attr_event(&cx.id_text()))
    } else {
        None
    };
    if let Some(key) = &marker {
        if get_json::<Value>(cx.store, key)?.is_some() {
            return Ok(Err(fail(Code::EntityConflict, format!("Attribute event \"{}\" already exists", cx.id_text()))));
        }
    }
    let mut m = current.0.clone();
    m.insert("attributes".into(), Value::Object(apply_changes(&attributes, &changes)));
    m.insert("updatedAt".into(), Value::date(cx.now));
    let run = Record(parse_object(schemas::run_schema(), compact(m))?);
    let event = cx.append_request()?;
    run.save(cx.store, keys::RUN)?;
    if let Some(key) = &marker {
        put_json(cx.store, key, &event.get("eventId").cloned().unwrap_or(Value::Null))?;
    }
    Ok(Ok(Success { event: Some(event), run: Some(run), ..Default::default() }))
}
