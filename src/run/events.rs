//! Event ids (dense slots), event construction and pages (spec `run-do.md` §4, §6.1–6.2,
//! §6.11; `schemas.md` §3–4).
//!
//! Knows no event family's rules (those are [`super::apply`]'s).

use super::keys;
use super::records::Record;
use super::validate::{compact, parse_object, schemas};
use crate::store::page::{fetch_text, list_budgeted, RESPONSE_BUDGET_BYTES};
use crate::store::{ListOptions, Store};
use crate::wire::number::number_to_string;
use crate::wire::{Map, RpcError, Value};

pub const EVENT_ID_PREFIX: &str = "evnt_";
pub const DEFAULT_MAX_EVENTS: f64 = 25_000.0;
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// `slotToEventId`: `evnt_` + the slot padded to 26 digits.
pub fn slot_to_event_id(slot: f64) -> Result<String, RpcError> {
    if !(slot.is_finite() && slot.trunc() == slot && (1.0..=MAX_SAFE_INTEGER).contains(&slot)) {
        return Err(RpcError::range_error(format!("Invalid event slot: {}", number_to_string(slot))));
    }
    Ok(format!("{EVENT_ID_PREFIX}{:026}", slot as u64))
}

/// `eventIdToSlot`: the slot of a (possibly prefixed) slot id, else `None`.
pub fn event_id_to_slot(event_id: &str) -> Option<u64> {
    let body = match event_id.find('_') {
        Some(i) => event_id.get(i + 1..)?,
        None => event_id,
    };
    let b = body.as_bytes();
    if b.len() != 26 || !b.iter().take(10).all(|c| *c == b'0') || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let slot: u64 = body.parse().ok()?;
    (slot >= 1 && slot as f64 <= MAX_SAFE_INTEGER).then_some(slot)
}

/// `getMaxEventsPerRun()` from the raw `WORKFLOW_MAX_EVENTS` text.
pub fn max_events(raw: Option<&str>) -> f64 {
    let Some(raw) = raw.filter(|r| !r.is_empty()) else { return DEFAULT_MAX_EVENTS };
    match js_number(raw) {
        Some(n) if n.is_finite() && n.trunc() == n && n > 0.0 => n,
        _ => DEFAULT_MAX_EVENTS,
    }
}

/// JavaScript `Number(text)` for the forms that can yield a finite number.
fn js_number(text: &str) -> Option<f64> {
    let t = text.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    if t.is_empty() {
        return Some(0.0);
    }
    for (prefix, radix) in [("0x", 16), ("0X", 16), ("0o", 8), ("0O", 8), ("0b", 2), ("0B", 2)] {
        if let Some(digits) = t.strip_prefix(prefix) {
            if digits.is_empty() {
                return None;
            }
            let mut v = 0f64;
            for c in digits.chars() {
                v = v * f64::from(radix) + f64::from(c.to_digit(radix)?);
            }
            return Some(v);
        }
    }
    let body = t.strip_prefix(['+', '-']).unwrap_or(t);
    if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-')) {
        return None;
    }
    if !body.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return None;
    }
    t.parse::<f64>().ok()
}

/// The event counter of one call: the run's last slot.
///
/// The slot of the greatest `event:` key is the counter itself (ids are dense slots,
/// zero-padded so that key order is slot order), so a call reads it there (a
/// [`Store::last_key`], which the object's cache answers from memory) and writes no
/// counter row. The `event_sequence` row the reference writes on every call is written
/// once, by a run's first successful call, and only read as a floor: it keeps the run's
/// keys, and so its cleanup's `deletedPayloadKeys`, the reference's, and it carries a
/// counter a run of an earlier build stored. A run whose greatest event key is not a
/// slot id (none of ours) keeps saving the counter on every call, as before.
pub struct Sequence {
    pub seq: u64,
    /// Write `event_sequence` with the call's outcome.
    save: bool,
}

impl Sequence {
    pub fn load(store: &mut dyn Store) -> Result<Sequence, RpcError> {
        let stored = match crate::store::get_json::<Value>(store, keys::EVENT_SEQUENCE)? {
            Some(Value::Number(n)) if n >= 0.0 && n.is_finite() => Some(n as u64),
            Some(_) => Some(0),
            None => None,
        };
        let last = store.last_key(keys::EVENT_PREFIX)?;
        let slot = last.as_deref().and_then(|k| k.strip_prefix(keys::EVENT_PREFIX)).and_then(event_id_to_slot);
        let legacy = last.is_some() && slot.is_none();
        Ok(Sequence { seq: stored.unwrap_or(0).max(slot.unwrap_or(0)), save: stored.is_none() || legacy })
    }
    pub fn save(&self, store: &mut dyn Store) -> Result<(), RpcError> {
        if !self.save {
            return Ok(());
        }
        crate::store::put_json(store, keys::EVENT_SEQUENCE, &Value::num(self.seq as f64))
    }
    /// Allocate the next slot's id.
    ///
    /// A position is assigned here, inside the storage transaction that writes the event
    /// occupying it, and the counter is that event's key, stored only with a committed
    /// outcome: a failure or a thrown error takes no slot. So no position is ever left
    /// empty, and the log is spec 7 (`SPEC_VERSION_SUPPORTS_SEALED_LOG`) by construction,
    /// with no `noop` events to write. A change that hands positions out ahead of the
    /// commit (a sequencer, a reservation across calls) takes on spec 7's other half:
    /// sealing every abandoned position with a `noop` event, and reads that wait for a
    /// pending position to be filled or sealed instead of answering a log that ends
    /// before it.
    pub fn next_id(&mut self) -> Result<String, RpcError> {
        self.seq = self.seq.checked_add(1).ok_or_else(|| RpcError::range_error("Invalid event slot"))?;
        slot_to_event_id(self.seq as f64)
    }
}

/// A page of results.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub data: Vec<Value>,
    pub cursor: Option<String>,
    pub has_more: bool,
}

impl Page {
    pub fn empty() -> Page {
        Page { data: Vec::new(), cursor: None, has_more: false }
    }
    pub fn to_value(self) -> Value {
        Value::object([
            ("data", Value::Array(self.data)),
            ("cursor", self.cursor.map_or(Value::Null, Value::String)),
            ("hasMore", Value::Bool(self.has_more)),
        ])
    }
}

/// The storage read size `limit + 1` (the platform refuses fewer than one entry) and
/// how many entries a page keeps (`slice(0, limit)`).
pub fn read_sizes(limit: f64) -> Result<(usize, usize), RpcError> {
    let read = (limit + 1.0).floor();
    if read.is_nan() || read < 1.0 {
        return Err(RpcError::list_limit());
    }
    let read = if read > 1e9 { 1_000_000_000usize } else { read as usize };
    let keep = if limit <= 0.0 {
        0
    } else if limit > 1e9 {
        1_000_000_000usize
    } else {
        limit.floor() as usize
    };
    Ok((read, keep))
}

/// List `prefix` entries after (asc) or before (desc) `<prefix><cursor>`.
pub fn list_entries(
    store: &mut dyn Store,
    prefix: &str,
    limit: f64,
    cursor: Option<&str>,
    desc: bool,
) -> Result<(Vec<(String, String)>, usize), RpcError> {
    let (read, keep) = read_sizes(limit)?;
    Ok((store.list(&entry_options(prefix, cursor, desc).limit(read))?, keep))
}

/// The listing of `prefix` entries after (asc) or before (desc) `<prefix><cursor>`.
fn entry_options(prefix: &str, cursor: Option<&str>, desc: bool) -> ListOptions {
    let options = ListOptions::prefix(prefix).reverse(desc);
    match cursor.filter(|c| !c.is_empty()) {
        Some(c) if desc => options.end(format!("{prefix}{c}")),
        Some(c) => options.start_after(format!("{prefix}{c}")),
        None => options,
    }
}

/// Event page (§4.1): cursor = the id of the last returned event, on every page that
/// returned one (null only for an empty page). At most [`RESPONSE_BUDGET_BYTES`] of events
/// beyond the first: a page the budget cut short has fewer than `limit` events, `hasMore`
/// and the cursor of its last event.
///
/// The references answer a null cursor on the last page; ours is the position past the
/// page's last event there too, as `@workflow/world-local` answers and as the Workflow
/// runtime needs: it resumes its event log from that cursor (listing only newer events),
/// and it keeps the log current from its writes' answers (`sinceCursor` deltas, the
/// `run_started` preload) instead of reading the log again after every step. With a null
/// cursor it re-reads the whole log once per step. Listing from the cursor answers an
/// empty page with a null cursor, so a reader that pages until `hasMore` is false, or
/// until the cursor is null, stops either way.
pub fn list_events(store: &mut dyn Store, limit: f64, cursor: Option<&str>, desc: bool) -> Result<Page, RpcError> {
    list_events_as(store, limit, cursor, desc, false)
}

/// [`list_events`] for the `listEvents` answer: each event as its stored text when that is
/// already the encoder's output ([`Value::stored`]), else decoded. The same page and
/// cursor: an event is stored under `event:<its eventId>` ([`append_event`]), so a stored
/// text's cursor is its key's id.
pub fn list_events_answer(store: &mut dyn Store, limit: f64, cursor: Option<&str>, desc: bool) -> Result<Page, RpcError> {
    list_events_as(store, limit, cursor, desc, true)
}

fn list_events_as(store: &mut dyn Store, limit: f64, cursor: Option<&str>, desc: bool, as_stored: bool) -> Result<Page, RpcError> {
    let (read, keep) = read_sizes(limit)?;
    let options = entry_options(keys::EVENT_PREFIX, cursor, desc);
    let page = list_budgeted(store, &options, Some(read), RESPONSE_BUDGET_BYTES, fetch_text, String::len)?;
    let has_more = page.truncated || page.entries.len() as f64 > limit;
    let mut data = Vec::new();
    let mut last_key = None;
    for (key, text) in page.entries.into_iter().take(keep) {
        let stored = if as_stored { Value::stored(text) } else { Err(text) };
        let event = match stored {
            Ok(event) => event,
            Err(text) => Value::parse(&text).map_err(|e| RpcError::error(format!("corrupt record at {key}: {}", e.0)))?,
        };
        data.push(event);
        last_key = Some(key);
    }
    let cursor = match data.last() {
        Some(Value::Json(_)) => last_key.and_then(|k| k.strip_prefix(keys::EVENT_PREFIX).map(str::to_string)),
        last => last.and_then(|e| e.get("eventId")).map(|id| crate::wire::js::to_js_string(Some(id))),
    };
    Ok(Page { data, cursor, has_more })
}

/// Build, validate and store an event (§6.2). `record` holds the request's top-level
/// members (or a synthetic event's).
pub fn append_event(store: &mut dyn Store, seq: &mut Sequence, ctx: &EventCtx<'_>, mut record: Map) -> Result<Record, RpcError> {
    let event_type = record.get("eventType").cloned();
    record.insert("runId".into(), ctx.run_id.clone());
    record.insert("eventId".into(), Value::String(seq.next_id()?));
    record.insert("createdAt".into(), Value::date(ctx.now));
    match ctx.occurred_at {
        Some(v) => record.insert("occurredAt".into(), v.clone()),
        None => record.remove("occurredAt"),
    };
    let is = |t: &str| event_type.as_ref().and_then(Value::as_str) == Some(t);
    match ctx.resume_id.filter(|_| is("hook_received")) {
        Some(v) => record.insert("resumeId".into(), v.clone()),
        None => record.remove("resumeId"),
    };
    record.insert("specVersion".into(), ctx.spec_version.clone());
    if is("run_started") {
        record.remove("eventData");
    }
    if is("step_started") {
        if let Some(data) = record.get("eventData").and_then(without_input) {
            record.insert("eventData".into(), data);
        }
    }
    let event = Record(parse_object(schemas::event_schema(), compact(record))?);
    let id = event.str("eventId").unwrap_or_default().to_string();
    event.save(store, &keys::event(&id))?;
    Ok(event)
}

/// `const {input, ...rest} = eventData` for an object-typed `eventData`.
fn without_input(v: &Value) -> Option<Value> {
    match v {
        Value::Object(m) => {
            let mut m = m.clone();
            m.remove("input");
            Some(Value::Object(m))
        }
        Value::Array(items) => Some(Value::Object(items.iter().enumerate().map(|(i, x)| (i.to_string(), x.clone())).collect())),
        Value::Bytes(b) => Some(Value::Object(b.iter().enumerate().map(|(i, x)| (i.to_string(), Value::num(*x))).collect())),
        Value::Date(_) => Some(Value::Object(Map::new())),
        _ => None,
    }
}

/// What every event of one call shares.
pub struct EventCtx<'a> {
    pub run_id: &'a Value,
    pub now: i64,
    pub occurred_at: Option<&'a Value>,
    pub resume_id: Option<&'a Value>,
    /// The call's effective spec version ([`crate::run::apply::context::Apply::spec_version`]).
    pub spec_version: &'a Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots() {
        assert_eq!(slot_to_event_id(1.0).unwrap(), "evnt_00000000000000000000000001");
        assert_eq!(slot_to_event_id(1.5).unwrap_err(), RpcError::range_error("Invalid event slot: 1.5"));
        assert_eq!(slot_to_event_id(0.0).unwrap_err(), RpcError::range_error("Invalid event slot: 0"));
        assert_eq!(event_id_to_slot("evnt_00000000000000000000000007"), Some(7));
        assert_eq!(event_id_to_slot("wevt_00000000000000000000000007"), Some(7));
        assert_eq!(event_id_to_slot("00000000000000000000000007"), Some(7));
        assert_eq!(event_id_to_slot("evnt_10000000000000000000000007"), None);
        assert_eq!(event_id_to_slot("evnt_00000000000000000000000000"), None);
        assert_eq!(event_id_to_slot("not-an-event"), None);
    }

    #[test]
    fn max_events_rules() {
        assert_eq!(max_events(None), 25_000.0);
        assert_eq!(max_events(Some("")), 25_000.0);
        assert_eq!(max_events(Some(" 1e3 ")), 1000.0);
        assert_eq!(max_events(Some("0x10")), 16.0);
        for bad in ["1.5", "-4", "0", "abc", "Infinity", "  "] {
            assert_eq!(max_events(Some(bad)), 25_000.0, "{bad}");
        }
    }
}
