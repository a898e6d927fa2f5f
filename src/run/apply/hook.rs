//! Hook events (spec `run-do.md` §6.3 steps 7–8, §6.6): resume-id replays,
//! `hook_created` with the token holder from IndexDO, `hook_disposed`, and the
//! event-only path (`hook_received`, client-sent `hook_conflict`, unknown types).
//!
//! Runs inside `applyEvent`'s transaction; calls no other object (the token holder comes
//! with the request).

use super::context::Apply;
use super::outcome::{fail, Code, Outcome, Success};
use crate::run::keys;
use crate::run::records::Record;
use crate::run::validate::{compact, parse_object, schemas};
use crate::store::put_json;
use crate::wire::js::{to_js_string, truthy};
use crate::wire::{Map, RpcError, Value};

/// Guard 7: a `hook_received` whose `resumeId` was already recorded.
pub fn resume_replay(cx: &mut Apply) -> Result<Option<Outcome>, RpcError> {
    let Some(resume_id) = cx.param("resumeId").filter(|r| truthy(Some(r))).cloned() else { return Ok(None) };
    let resume_text = to_js_string(Some(&resume_id));
    let Some(claim) = Record::load(cx.store, &keys::hook_resume(&resume_text))? else { return Ok(None) };
    let conflict = |what: &str| Ok(Some(Err(fail(Code::EntityConflict, format!("hook_received resumeId \"{resume_text}\" {what}")))));
    if claim.get("hookId") != cx.id.as_ref() {
        return conflict("already recorded for a different hook");
    }
    let digest = cx.param("resumePayloadDigest");
    if truthy(claim.get("payloadDigest")) && truthy(digest) && claim.get("payloadDigest") != digest {
        return conflict("already recorded with a different payload");
    }
    let event_id = to_js_string(claim.get("eventId"));
    if let Some(committed) = Record::load(cx.store, &keys::event(&event_id))? {
        if committed.str("eventType") == Some("hook_received")
            && committed.get("correlationId") == claim.get("hookId")
            && committed.get("resumeId") == Some(&resume_id)
        {
            return Ok(Some(Ok(Success { event: Some(committed), ..Default::default() })));
        }
        return conflict("points to a different event");
    }
    Ok(None)
}

/// The `hookevent:<id>` value of a hook admitted with a 0.4 claim: `{eventId, claimId}`
/// (a hook admitted through the 0.3 `index` binding keeps the bare event id). Which
/// admission a hook had decides its terminal release (see [`super::run::terminal`]) and
/// whether its dispose leaves a `hookreleased:` marker.
fn hook_event_value(event_id: Value, claim_id: Option<&Value>) -> Value {
    match claim_id {
        Some(claim) => Value::object([("eventId", event_id), ("claimId", claim.clone())]),
        None => event_id,
    }
}

/// Was hook `id` admitted with a 0.4 `hookClaimId`?
pub fn admitted_with_claim(store: &mut dyn crate::store::Store, id: &str) -> Result<bool, RpcError> {
    Ok(matches!(crate::store::get_json::<Value>(store, &keys::hook_event(id))?, Some(Value::Object(m)) if m.contains_key("claimId")))
}

/// Guard 8 for an absent hook on `hook_disposed` (spec-0.4 `run-do.md` §2): a
/// `hookreleased:` marker answers success with that release and no event, so a client can
/// replay a dispose whose index release failed.
pub fn released_replay(cx: &mut Apply) -> Result<Option<Outcome>, RpcError> {
    let key = keys::hook_released(&cx.id_text());
    let Some(marker) = crate::store::get_json::<Value>(cx.store, &key)? else { return Ok(None) };
    let pair = (marker.get("hookId").cloned().unwrap_or(Value::Null), marker.get("token").cloned().unwrap_or(Value::Null));
    Ok(Some(Ok(Success { released_hooks: vec![pair], ..Default::default() })))
}

/// `hook_created`.
pub fn created(cx: &mut Apply) -> Result<Outcome, RpcError> {
    let id = cx.id_text();
    if let Some(claim) = cx.hook_claim_id.clone() {
        let fence = keys::hook_claim_cancelled(&to_js_string(Some(&claim)));
        if cx.store.get(&fence)?.is_some() {
            return Ok(Err(fail(Code::HookClaimCancelled, format!("Hook reservation for \"{id}\" was canceled before commit"))));
        }
    }
    let token = cx.event_data_member("token")?.cloned();
    let holder = cx.token_holder.clone().filter(|h| truthy(Some(h)));
    if let Some(holder) = &holder {
        let holder_run = holder.get("runId");
        if holder_run != Some(&cx.run_id) || holder.get("hookId") != cx.id.as_ref() {
            let mut event_data = Map::new();
            if let Some(t) = &token {
                event_data.insert("token".into(), t.clone());
            }
            if let Some(r) = holder_run {
                event_data.insert("conflictingRunId".into(), r.clone());
            }
            let event = cx.append_own("hook_conflict", event_data)?;
            return Ok(Ok(Success { event: Some(event), ..Default::default() }));
        }
    }
    if crate::store::get_json::<Value>(cx.store, &keys::hook_event(&id))?.is_some() {
        if let Some(existing) = Record::load(cx.store, &keys::hook(&id))?.filter(|_| holder.is_none()) {
            return Ok(Ok(Success { hook: Some(existing.clone()), hook_to_index: Some(existing), ..Default::default() }));
        }
        return Ok(Err(fail(Code::EntityConflict, format!("Hook \"{id}\" already created"))));
    }
    let mut m = Map::new();
    m.insert("runId".into(), cx.run_id.clone());
    if let Some(c) = &cx.id {
        m.insert("hookId".into(), c.clone());
    }
    if let Some(t) = &token {
        m.insert("token".into(), t.clone());
    }
    if let Some(md) = cx.event_data_opt("metadata") {
        m.insert("metadata".into(), md.clone());
    }
    for k in ["ownerId", "projectId", "environment"] {
        m.insert(k.into(), Value::str(""));
    }
    m.insert("createdAt".into(), Value::date(cx.now));
    m.insert("specVersion".into(), cx.spec_version.clone());
    let is_webhook = cx.event_data_opt("isWebhook").filter(|v| !v.is_null()).cloned().unwrap_or(Value::Bool(false));
    m.insert("isWebhook".into(), is_webhook);
    for k in ["isSystem", "tokenRetentionUntil"] {
        if let Some(v) = cx.event_data_opt(k) {
            m.insert(k.into(), v.clone());
        }
    }
    let hook = Record(parse_object(schemas::hook_schema(), compact(m))?);
    let event = cx.append_request()?;
    let hook_id = hook.str("hookId").unwrap_or_default().to_string();
    hook.save(cx.store, &keys::hook(&id))?;
    let created = hook.date("createdAt").unwrap_or(cx.now);
    put_json(cx.store, &keys::created(keys::HOOK_CREATED_PREFIX, created, &hook_id), &Value::String(hook_id.clone()))?;
    let event_value = hook_event_value(event.get("eventId").cloned().unwrap_or(Value::Null), cx.hook_claim_id.as_ref());
    put_json(cx.store, &keys::hook_event(&id), &event_value)?;
    Ok(Ok(Success { event: Some(event), hook: Some(hook.clone()), hook_to_index: Some(hook), ..Default::default() }))
}

/// `hook_disposed` (existence already checked when the id is truthy).
pub fn disposed(cx: &mut Apply) -> Result<Outcome, RpcError> {
    let id = cx.id_text();
    let Some(hook) = Record::load(cx.store, &keys::hook(&id))? else {
        return Ok(Err(fail(Code::HookNotFound, format!("Hook \"{id}\" not found"))));
    };
    let hook_id = hook.get("hookId").cloned().unwrap_or(Value::Null);
    let hook_id_text = to_js_string(Some(&hook_id));
    cx.store.delete(&keys::hook(&id))?;
    if let Some(created) = hook.date("createdAt") {
        cx.store.delete(&keys::created(keys::HOOK_CREATED_PREFIX, created, &hook_id_text))?;
    }
    let event = cx.append_request()?;
    let token = hook.get("token").cloned().unwrap_or(Value::Null);
    if admitted_with_claim(cx.store, &id)? {
        let marker = Value::object([("hookId", hook_id.clone()), ("token", token.clone())]);
        put_json(cx.store, &keys::hook_released(&hook_id_text), &marker)?;
    }
    Ok(Ok(Success { event: Some(event), released_hooks: vec![(hook_id, token)], ..Default::default() }))
}

/// The default path: append the event; record a `hook_received` resume claim.
pub fn event_only(cx: &mut Apply) -> Result<Outcome, RpcError> {
    let event = cx.append_request()?;
    if cx.event_type() == Some("hook_received") {
        if let Some(resume_id) = cx.param("resumeId").filter(|r| truthy(Some(r))).cloned() {
            let mut claim = Map::new();
            claim.insert("hookId".into(), cx.id.clone().unwrap_or(Value::Null));
            claim.insert("eventId".into(), event.get("eventId").cloned().unwrap_or(Value::Null));
            if let Some(d) = cx.param("resumePayloadDigest").filter(|d| truthy(Some(d))) {
                claim.insert("payloadDigest".into(), d.clone());
            }
            put_json(cx.store, &keys::hook_resume(&to_js_string(Some(&resume_id))), &Value::Object(claim))?;
        }
    }
    Ok(Ok(Success { event: Some(event), ..Default::default() }))
}
