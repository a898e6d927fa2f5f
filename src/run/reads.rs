//! Read methods (spec `run-do.md` §3–4): `getRun`, `getStep`, `getEvent`, `listEvents`,
//! `listSteps`, `listHooks`, all behind the expiry fence.
//!
//! Knows nothing of how events are applied.

use super::events::{list_entries, list_events_answer, Page};
use super::fence::{expired_read, retention_state};
use super::keys;
use crate::protocol::hop::{Args, Ctx};
use crate::store::page::{encoded_len, RESPONSE_BUDGET_BYTES};
use crate::store::{get_answer, Store};
use crate::wire::js::{to_js_string, truthy};
use crate::wire::{RpcError, Value};

fn ok(value: Value) -> Value {
    Value::object([("ok", Value::Bool(true)), ("value", value)])
}

/// Run `read` unless the run is expired.
fn fenced(store: &mut dyn Store, ctx: &Ctx, read: impl FnOnce(&mut dyn Store) -> Result<Value, RpcError>) -> Result<Value, RpcError> {
    if let Some(t) = retention_state(store, ctx.now)?.tombstone {
        return Ok(expired_read(t));
    }
    Ok(ok(read(store)?))
}

fn read_key(store: &mut dyn Store, ctx: &Ctx, key: String) -> Result<Value, RpcError> {
    fenced(store, ctx, |s| Ok(get_answer(s, &key)?.unwrap_or(Value::Null)))
}

pub fn get_run(store: &mut dyn Store, ctx: &Ctx) -> Result<Value, RpcError> {
    read_key(store, ctx, keys::RUN.to_string())
}

pub fn get_step(store: &mut dyn Store, ctx: &Ctx, args: Args) -> Result<Value, RpcError> {
    read_key(store, ctx, keys::step(&to_js_string(args.raw(0))))
}

pub fn get_event(store: &mut dyn Store, ctx: &Ctx, args: Args) -> Result<Value, RpcError> {
    read_key(store, ctx, keys::event(&to_js_string(args.raw(0))))
}

/// `{limit?, cursor?, sortOrder?}` with null members meaning "absent".
pub struct ListParams {
    pub limit: f64,
    pub cursor: Option<String>,
    pub desc: bool,
}

pub fn list_params(arg: Option<&Value>, default_limit: f64) -> ListParams {
    let member = |k: &str| arg.and_then(|a| a.get(k)).filter(|v| !v.is_null());
    let limit = match member("limit") {
        Some(Value::Number(n)) => *n,
        Some(Value::String(s)) => s.trim().parse::<f64>().unwrap_or(f64::NAN),
        Some(Value::Bool(b)) => f64::from(u8::from(*b)),
        Some(_) => f64::NAN,
        None => default_limit,
    };
    let cursor = member("cursor").filter(|c| truthy(Some(c))).map(|c| to_js_string(Some(c)));
    let desc = member("sortOrder").and_then(Value::as_str) == Some("desc");
    ListParams { limit, cursor, desc }
}

pub fn list_events_method(store: &mut dyn Store, ctx: &Ctx, args: Args) -> Result<Value, RpcError> {
    let p = list_params(args.present(0), 100.0);
    fenced(store, ctx, |s| Ok(list_events_answer(s, p.limit, p.cursor.as_deref(), p.desc)?.to_value()))
}

/// Page over a creation-time index, loading each entity (§4.2). At most
/// [`RESPONSE_BUDGET_BYTES`] of entities beyond the first: a page the budget cut short has
/// `hasMore` and the cursor of its last entry.
pub fn list_by_creation(store: &mut dyn Store, index_prefix: &str, entity_prefix: &str, p: &ListParams) -> Result<Page, RpcError> {
    let (entries, keep) = list_entries(store, index_prefix, p.limit, p.cursor.as_deref(), p.desc)?;
    let mut has_more = entries.len() as f64 > p.limit;
    let mut data = Vec::new();
    let mut used = 0usize;
    let mut last = None;
    for (key, id_text) in entries.iter().take(keep) {
        let id = match Value::parse(id_text) {
            Ok(v) => to_js_string(Some(&v)),
            Err(_) => id_text.clone(),
        };
        if let Some(entity) = get_answer(store, &format!("{entity_prefix}{id}"))? {
            let size = encoded_len(&entity);
            if !data.is_empty() && used.saturating_add(size) > RESPONSE_BUDGET_BYTES {
                has_more = true;
                break;
            }
            used = used.saturating_add(size);
            data.push(entity);
        }
        last = Some(key);
    }
    let cursor = if has_more { last.and_then(|k| k.strip_prefix(index_prefix)).map(str::to_string) } else { None };
    Ok(Page { data, cursor, has_more })
}

/// Largest `listSteps` / `listHooks` page (spec-0.4 `run-do.md` §5).
pub const MAX_ENTITY_PAGE: f64 = 1000.0;

/// 0.4's clamp of the entity listings' `limit` to 1..=1000 (a non-finite limit is 1).
/// Replaces 0.3's unclamped limit (where 0 answered an empty page): the shared method has
/// one behaviour, and this one bounds responses (`tests/golden-conflicts.json`).
pub fn clamp_entity_limit(limit: f64) -> f64 {
    if limit.is_finite() {
        limit.floor().clamp(1.0, MAX_ENTITY_PAGE)
    } else {
        1.0
    }
}

pub fn list_steps_method(store: &mut dyn Store, ctx: &Ctx, args: Args) -> Result<Value, RpcError> {
    let mut p = list_params(args.present(0), 20.0);
    p.limit = clamp_entity_limit(p.limit);
    fenced(store, ctx, |s| Ok(list_by_creation(s, keys::STEP_CREATED_PREFIX, keys::STEP_PREFIX, &p)?.to_value()))
}

pub fn list_hooks_method(store: &mut dyn Store, ctx: &Ctx, args: Args) -> Result<Value, RpcError> {
    let mut p = list_params(args.present(0), 100.0);
    p.limit = clamp_entity_limit(p.limit);
    fenced(store, ctx, |s| Ok(list_by_creation(s, keys::HOOK_CREATED_PREFIX, keys::HOOK_PREFIX, &p)?.to_value()))
}
