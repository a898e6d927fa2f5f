//! `applyEvent` (spec `run-do.md` §5–6): the request, the guards in the reference's
//! exact order, dispatch to one module per event family, and the outcome.
//!
//! Everything runs inside the caller's storage transaction; a returned `Err` (a thrown
//! error) rolls every write back, and a failure outcome is returned before any write.
//!
//! Calls no other object; the terminal cleanup it starts ([`super::cleanup::terminal`])
//! does, later.

mod attr;
pub mod context;
mod hook;
pub mod outcome;
mod run;
mod step;
mod wait;

use super::events::{event_id_to_slot, list_events, list_events_answer, slot_to_event_id, Page, Sequence};
use super::fence::{expired_at_iso, retention_state};
use super::keys;
use super::records::{is_terminal_run_status, Record};
use super::retention;
use crate::protocol::hop::Ctx;
use crate::store::alarm::Alarm;
use crate::store::Store;
use crate::wire::js::{to_js_string, truthy, type_of};
use crate::wire::{Map, RpcError, Value};
use context::{is_child_entity_creation, member, Apply};
use outcome::{fail, Code, Failure, Outcome, Success};

/// The lowest Workflow spec version served (`SPEC_VERSION_SUPPORTS_SLOT_IDENTITY`): the
/// version both clients declare, so the one the runtime stamps on `run_created` and
/// `run_started`, and the one an event without a `specVersion` counts as.
pub const SPEC_VERSION_FLOOR: u8 = 6;

/// The highest Workflow spec version served (`SPEC_VERSION_SUPPORTS_SEALED_LOG`, the
/// `SPEC_VERSION_MAX_SUPPORTED` of `@workflow/world` 5.0.0-beta.37). Runtime 5.0.0-beta.55
/// stamps its step, hook, wait and terminal run events with it, and a client rebuilt on that
/// `@workflow/world` stamps `run_created` with it. Spec 7 is a reader contract (a `noop`
/// event fills a pre-assigned position whose writer died); this worker assigns each position
/// when its event commits and so never writes one ([`super::events::Sequence::next_id`]).
pub const SPEC_VERSION_MAX: u8 = 7;

/// Is `v` a spec version this worker serves: an integer from [`SPEC_VERSION_FLOOR`] to
/// [`SPEC_VERSION_MAX`]? (The references accepted exactly 6.)
pub fn is_supported_spec_version(v: &Value) -> bool {
    matches!(v, Value::Number(n) if n.fract() == 0.0 && (f64::from(SPEC_VERSION_FLOOR)..=f64::from(SPEC_VERSION_MAX)).contains(n))
}

/// `RUN_NOT_SUPPORTED` for a request or stored run of an unsupported spec version. Below
/// the floor (and for a version that is not a number) the reference's text, which the
/// golden rows pin (`... this world requires 6`); above it, the range served.
fn not_supported(run_id: &str, version: Option<&Value>) -> Failure {
    let version_text = to_js_string(version);
    let served = match version {
        Some(Value::Number(n)) if *n >= f64::from(SPEC_VERSION_FLOOR) => {
            format!("this world supports {SPEC_VERSION_FLOOR} through {SPEC_VERSION_MAX}")
        }
        _ => format!("this world requires {SPEC_VERSION_FLOOR}"),
    };
    Failure {
        code: Code::RunNotSupported,
        message: format!("Run \"{run_id}\" uses unsupported specVersion {version_text}; {served}"),
        retry_after_seconds: None,
        run_spec_version: version.cloned(),
    }
}

/// The `applyEvent` RPC method: fence, core, bookkeeping, page; the wire outcome.
pub fn apply_event(store: &mut dyn Store, ctx: &Ctx, alarm: &mut Alarm, request: Option<&Value>) -> Result<Value, RpcError> {
    let retention = retention_state(store, ctx.now)?;
    if let Some(t) = &retention.tombstone {
        let run_id = to_js_string(member(request, "runId")?);
        return Ok(failure_value(&fail(Code::RunExpired, format!("Workflow run \"{run_id}\" expired at {}", expired_at_iso(t)))));
    }
    let seq = Sequence::load(store)?;
    let req = |k: &str| request.and_then(|r| r.get(k)).cloned();
    let data = match req("data") {
        None => return Err(RpcError::type_error("Cannot read properties of undefined (reading 'specVersion')")),
        Some(Value::Null) => return Err(RpcError::type_error("Cannot read properties of null (reading 'specVersion')")),
        Some(Value::Object(m)) => m,
        Some(_) => Map::new(),
    };
    let run_id = req("runId").unwrap_or(Value::Null);
    let run_id_text = to_js_string(request.and_then(|r| r.get("runId")));
    let spec_version = data.get("specVersion").filter(|v| !v.is_null()).cloned().unwrap_or(Value::num(SPEC_VERSION_FLOOR));
    let mut cx = Apply {
        store,
        seq,
        now: ctx.now,
        max_events: super::events::max_events(ctx.config.workflow_max_events.as_deref()),
        run_id,
        run_id_text,
        id: data.get("correlationId").cloned(),
        data,
        params: req("params"),
        token_holder: req("tokenHolder"),
        hook_claim_id: req("hookClaimId").filter(|v| !v.is_null()),
        spec_version,
    };
    let outcome = match core(&mut cx)? {
        Err(f) => return Ok(failure_value(&f)),
        Ok(s) => s,
    };
    cx.seq.save(cx.store)?;
    let cleanup = req("cleanup");
    let mut outcome = outcome;
    retention::record_queue_shards(cx.store, &outcome, cleanup.as_ref())?;
    // A bad WORKFLOW_CORRELATION_INDEX keeps the markers: the facade refuses the keys'
    // `putOwned` with the setting's message, and a marker of a key never stored is harmless.
    let correlation_index = ctx.config.correlation_index().unwrap_or(true);
    retention::record_markers(cx.store, &outcome, &cx.run_id_text, cx.hook_claim_id.is_some(), correlation_index)?;
    retention::schedule(cx.store, alarm, &mut outcome, cleanup.as_ref(), retention.cleanup.is_some())?;
    // spec-0.4 `run-do.md` §2.7: any outcome carrying a terminal run (re)starts the
    // terminal cleanup, which pages the hook releases from the alarm.
    if let Some(run) = outcome.run.as_ref().filter(|r| is_terminal_run_status(r.status())) {
        let run_id = run.str("runId").unwrap_or(cx.run_id_text.as_str()).to_string();
        super::cleanup::terminal::start(cx.store, &run_id, ctx.now, alarm)?;
    }
    let outcome = finalize_page(&mut cx, outcome)?;
    Ok(success_value(outcome, ctx.now))
}

/// The state machine (§6.3–6.8). `Ok(Err(failure))` is a failure outcome.
fn core(cx: &mut Apply) -> Result<Outcome, RpcError> {
    let et = cx.event_type().map(str::to_string);
    let et = et.as_deref();
    // 1. Spec version of the request: absent or null counts as the floor
    // (`Apply::spec_version`), else it must be one this worker serves.
    if let Some(spec) = cx.data.get("specVersion").filter(|v| !v.is_null()) {
        if !is_supported_spec_version(spec) {
            return Ok(Err(not_supported(&cx.run_id_text, Some(spec))));
        }
    }
    // 2. Load the run.
    let skip_run = matches!(et, Some("run_created" | "step_completed" | "step_retrying"));
    let mut current = if skip_run { None } else { Record::load(cx.store, keys::RUN)? };
    // 3. Resilient start.
    let mut bootstrapped = None;
    if et == Some("run_started") && current.is_none() && truthy(cx.event_data()) {
        if let Some((run, created)) = run::bootstrap(cx)? {
            current = Some(run);
            bootstrapped = Some(created);
        }
    }
    // 4. Spec version of the stored run: one this worker serves (a run created at 7 is
    // served by events at 6 and 7 alike, as the runtime mixes them).
    if let Some(run) = &current {
        if !run.get("specVersion").is_some_and(is_supported_spec_version) {
            return Ok(Err(not_supported(&cx.run_id_text, run.get("specVersion"))));
        }
    }
    // 5. Terminal run.
    if let Some(run) = &current {
        let status = run.status().to_string();
        if is_terminal_run_status(&status) {
            if et == Some("run_cancelled") && status == "cancelled" {
                let event = cx.append_request()?;
                return Ok(Ok(Success { event: Some(event), run: current.clone(), ..Default::default() }));
            }
            if et == Some("run_started") {
                return Ok(Err(fail(
                    Code::RunExpired,
                    format!("Workflow run \"{}\" is already in terminal state \"{status}\"", cx.run_id_text),
                )));
            }
            if matches!(et, Some("run_completed" | "run_failed" | "run_cancelled")) {
                return Ok(Err(fail(Code::EntityConflict, format!("Cannot transition run from terminal state \"{status}\""))));
            }
            if is_child_entity_creation(&cx.data) {
                return Ok(Err(fail(Code::EntityConflict, format!("Cannot create new entities on run in terminal state \"{status}\""))));
            }
            if et == Some("attr_set") {
                return Ok(Err(fail(Code::EntityConflict, format!("Cannot set attributes on run in terminal state \"{status}\""))));
            }
        }
    }
    // 6. Steps.
    let mut step = None;
    if matches!(et, Some("step_started" | "step_completed" | "step_failed" | "step_retrying")) {
        match step::guard(cx, current.as_ref())? {
            Err(f) => return Ok(Err(f)),
            Ok(s) => step = s,
        }
    }
    // 7. Hook resume idempotency.
    if et == Some("hook_received") {
        if let Some(outcome) = hook::resume_replay(cx)? {
            return Ok(outcome);
        }
    }
    // 8. Hook existence.
    if matches!(et, Some("hook_disposed" | "hook_received")) && truthy(cx.id.as_ref()) {
        let key = keys::hook(&cx.id_text());
        if Record::load(cx.store, &key)?.is_none() {
            if et == Some("hook_disposed") {
                if let Some(outcome) = hook::released_replay(cx)? {
                    return Ok(outcome);
                }
            }
            return Ok(Err(fail(Code::HookNotFound, format!("Hook \"{}\" not found", cx.id_text()))));
        }
    }
    // 9. Run existence.
    if !matches!(et, Some("run_created" | "run_started" | "step_completed" | "step_retrying")) && current.is_none() {
        return Ok(Err(fail(Code::RunNotFound, format!("Workflow run \"{}\" not found", cx.run_id_text))));
    }
    // 10. Per-type effects.
    match et {
        Some("run_created") => run::created(cx),
        Some("run_started") => run::started(cx, current, bootstrapped),
        Some("run_completed" | "run_failed" | "run_cancelled") => run::terminal(cx, current),
        Some("attr_set") => attr::set(cx, current),
        Some("step_created") => step::created(cx),
        Some("step_started") => step::started(cx, step),
        Some("step_completed" | "step_failed" | "step_retrying") => step::progressed(cx, step),
        Some("hook_created") => hook::created(cx),
        Some("hook_disposed") => hook::disposed(cx),
        Some("wait_created") => wait::created(cx),
        Some("wait_completed") => wait::completed(cx),
        _ => hook::event_only(cx),
    }
}

/// §6.11: `maxEvents`, then the `sinceCursor` / `eventCount` page.
fn finalize_page(cx: &mut Apply, mut s: Success) -> Result<Success, RpcError> {
    if s.run.is_some() && s.max_events.is_none() {
        s.max_events = Some(cx.max_events);
    }
    let Some(event_id) = s.event.as_ref().map(|e| e.str("eventId").unwrap_or_default().to_string()) else {
        return Ok(s);
    };
    if let Some(Value::String(since)) = cx.param("sinceCursor").cloned() {
        s.page = Some(list_events_answer(cx.store, 100.0, Some(&since), false)?);
        return Ok(s);
    }
    let event_count = match cx.param("eventCount") {
        None => return Ok(s),
        Some(Value::Number(n)) => *n,
        Some(Value::Null) => 0.0,
        Some(Value::Bool(b)) => f64::from(u8::from(*b)),
        Some(_) => return Ok(s),
    };
    let Some(committed) = event_id_to_slot(&event_id) else { return Ok(s) };
    let committed = committed as f64;
    if committed <= event_count + 1.0 {
        return Ok(s);
    }
    let skipped = committed - event_count - 1.0;
    let cursor = if event_count > 0.0 { Some(slot_to_event_id(event_count)?) } else { None };
    let page = list_events(cx.store, skipped, cursor.as_deref(), false)?;
    let events: Vec<Value> =
        page.data.into_iter().filter(|e| e.get("eventId").and_then(Value::as_str).is_some_and(|id| id < event_id.as_str())).collect();
    let has_more = (events.len() as f64) < skipped;
    s.page = Some(Page { data: events, cursor: None, has_more });
    Ok(s)
}

fn failure_value(f: &Failure) -> Value {
    let mut m = Map::new();
    m.insert("ok".into(), Value::Bool(false));
    m.insert("code".into(), Value::str(f.code.as_str()));
    m.insert("message".into(), Value::String(f.message.clone()));
    if let Some(n) = f.retry_after_seconds {
        m.insert("retryAfterSeconds".into(), Value::num(n));
    }
    if let Some(v) = &f.run_spec_version {
        m.insert("runSpecVersion".into(), v.clone());
    }
    Value::Object(m)
}

/// The success outcome. `now` dates the run catalog publication lease
/// (`indexPublicationExpiresAt`, spec-0.4 run-do.md §2 step 8) of an outcome carrying a run.
fn success_value(s: Success, now: i64) -> Value {
    let lease = s.run.is_some().then(|| crate::protocol::lifecycle::publication_expires_at(now));
    let mut m = Map::new();
    m.insert("ok".into(), Value::Bool(true));
    let mut put = |k: &str, r: Option<Record>| {
        if let Some(r) = r {
            m.insert(k.into(), r.into_value());
        }
    };
    put("event", s.event);
    put("run", s.run);
    put("step", s.step);
    put("hook", s.hook);
    put("wait", s.wait);
    put("hookToIndex", s.hook_to_index);
    if s.step_created {
        m.insert("stepCreated".into(), Value::Bool(true));
    }
    let released = s.released_hooks.into_iter().map(|(hook_id, token)| Value::object([("hookId", hook_id), ("token", token)])).collect();
    m.insert("releasedHooks".into(), Value::Array(released));
    if let Some((workflow_name, created_at)) = s.run_created {
        m.insert("runCreated".into(), Value::object([("workflowName", workflow_name), ("createdAt", Value::date(created_at))]));
    }
    if let Some(p) = s.page {
        m.insert("events".into(), Value::Array(p.data));
        m.insert("cursor".into(), p.cursor.map_or(Value::Null, Value::String));
        m.insert("hasMore".into(), Value::Bool(p.has_more));
    }
    if let Some(at) = lease {
        m.insert("indexPublicationExpiresAt".into(), Value::num(at as f64));
    }
    if let Some(n) = s.max_events {
        m.insert("maxEvents".into(), Value::num(n));
    }
    Value::Object(m)
}

/// `typeof` re-exported for the families.
pub fn js_type(v: Option<&Value>) -> &'static str {
    type_of(v)
}
