//! What the operator console reads of one shard's storage (`GET /v1/admin/queues` and its
//! dead-letter pages, docs/operations.md "The queue console"): the message counts with the
//! age of the oldest due message, and a page of dead letters summarized for a decision
//! (never their payloads).
//!
//! Bounded by what it reads: each count lists at most [`COUNT_CAP`] + 1 keys (a larger
//! queue answers `capped: true` and the counts as "at least"), a dead-letter page at most
//! [`MAX_DEAD_LETTER_PAGE`] entries after its cursor.
//!
//! Reads only; knows no other core and nothing of the platform.

use crate::store::{ListOptions, Store};
use crate::wire::js::to_js_string;
use crate::wire::{RpcError, Value};

use super::state::*;

/// The most keys a count lists.
pub const COUNT_CAP: usize = 1000;
/// The largest dead-letter page.
pub const MAX_DEAD_LETTER_PAGE: usize = 100;
/// The longest excerpt of the app's last answer kept with a failed message.
pub const ANSWER_EXCERPT_CHARS: usize = 200;
/// Row member: the start of the app's last failed answer ([`ANSWER_EXCERPT_CHARS`]), for the
/// console. Our extension; `listDeadLetters` leaves it out (the rows it echoes are the
/// producer's, as in the reference).
pub const LAST_ANSWER: &str = "lastAnswer";

/// Keys of `options`, at most [`COUNT_CAP`] + 1: the count and whether it was capped.
fn count(store: &mut dyn Store, options: ListOptions) -> Result<(usize, bool), RpcError> {
    let n = store.list_keys(&options.limit(COUNT_CAP + 1))?.len();
    Ok((n.min(COUNT_CAP), n > COUNT_CAP))
}

/// `{messages: {pending, due, inflight, deadLetters, capped}, oldestDueAgeMs}` at `now`.
pub fn health(store: &mut dyn Store, now: i64) -> Result<Value, RpcError> {
    let (pending, a) = count(store, ListOptions::prefix(DUE_PREFIX))?;
    let due_end = format!("{DUE_PREFIX}{}", pad(now.saturating_add(1)));
    let (due, b) = count(store, ListOptions::prefix(DUE_PREFIX).end(due_end))?;
    let (inflight, c) = count(store, ListOptions::prefix(INFLIGHT_PREFIX))?;
    let (legacy, d) = count(store, ListOptions::prefix(LEGACY_INFLIGHT_PREFIX))?;
    let (dead, e) = count(store, ListOptions::prefix(DLQ_PREFIX))?;
    let oldest = store.list_keys(&ListOptions::prefix(DUE_PREFIX).limit(1))?;
    let oldest_due = oldest.first().map(|k| due_time(k)).filter(|at| *at <= now).map(|at| now - at);
    Ok(Value::object([
        (
            "messages",
            Value::object([
                ("pending", Value::num(pending as f64)),
                ("due", Value::num(due as f64)),
                ("inflight", Value::num((inflight + legacy) as f64)),
                ("deadLetters", Value::num(dead as f64)),
                ("capped", Value::Bool(a || b || c || d || e)),
            ]),
        ),
        ("oldestDueAgeMs", oldest_due.map_or(Value::Null, |ms| Value::num(ms as f64))),
    ]))
}

/// Why a dead-letter page request is refused (the front door answers 400 with it).
pub fn check_page(limit: usize, cursor: Option<&str>) -> Result<(), String> {
    if limit == 0 || limit > MAX_DEAD_LETTER_PAGE {
        return Err(format!("limit must be an integer between 1 and {MAX_DEAD_LETTER_PAGE}"));
    }
    if let Some(c) = cursor {
        if !is_dead_letter_key(c) {
            return Err("malformed cursor: pass the cursor of the previous page".into());
        }
    }
    Ok(())
}

/// `dlq:<13 digits>:<messageId>`.
fn is_dead_letter_key(key: &str) -> bool {
    let Some(rest) = key.strip_prefix(DLQ_PREFIX) else { return false };
    key.len() <= 1024 && rest.len() > 14 && rest.as_bytes()[..13].iter().all(u8::is_ascii_digit) && rest.as_bytes()[13] == b':'
}

fn member_or_null(v: &Value, key: &str) -> Value {
    match v.get(key) {
        None => Value::Null,
        Some(m) => m.clone(),
    }
}

/// A page of dead letters after `cursor` (a key of a previous page): each as
/// `{messageId, queueName, runId, attempts, lastError, lastAnswer, failedAt}`, with the
/// cursor of its last entry when more follow. `limit` and `cursor` are [`check_page`]d.
pub fn dead_letters(store: &mut dyn Store, limit: usize, cursor: Option<&str>) -> Result<Value, RpcError> {
    if let Err(message) = check_page(limit, cursor) {
        return Err(RpcError { name: "BadRequest".into(), message });
    }
    let mut options = ListOptions::prefix(DLQ_PREFIX).limit(limit + 1);
    if let Some(c) = cursor {
        options = options.start_after(c);
    }
    let entries = store.list(&options)?;
    let more = entries.len() > limit;
    let mut data = Vec::new();
    let mut last = None;
    for (key, text) in entries.into_iter().take(limit) {
        let v = decode_entry(&key, &text)?;
        let run_id = v.get("runId").filter(|r| !matches!(r, Value::Null)).map(|r| Value::str(to_js_string(Some(r))));
        data.push(Value::object([
            ("messageId", Value::str(to_js_string(v.get("messageId")))),
            ("queueName", Value::str(to_js_string(v.get("queueName")))),
            ("runId", run_id.unwrap_or(Value::Null)),
            ("attempts", member_or_null(&v, "attempt")),
            ("lastError", member_or_null(&v, "lastError")),
            ("lastAnswer", member_or_null(&v, LAST_ANSWER)),
            ("failedAt", member_or_null(&v, "failedAt")),
        ]));
        last = Some(key);
    }
    Ok(Value::object([
        ("data", Value::Array(data)),
        ("cursor", if more { last.map_or(Value::Null, Value::String) } else { Value::Null }),
        ("hasMore", Value::Bool(more)),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    fn dead(store: &mut MemoryStore, at: i64, id: &str, answer: Option<&str>) {
        let mut row = Value::object([
            ("messageId", Value::str(id)),
            ("queueName", Value::str("__wkf_step_x")),
            ("runId", Value::str("wrun_1")),
            ("attempt", Value::num(5.0)),
            ("lastError", Value::str("HTTP 500")),
            ("failedAt", Value::num(at as f64)),
            ("body", Value::str("PAYLOAD")),
        ]);
        if let (Some(a), Value::Object(m)) = (answer, &mut row) {
            m.insert(LAST_ANSWER.into(), Value::str(a));
        }
        put_value(store, &dlq_key(at, id), &row).unwrap();
    }

    #[test]
    fn counts_and_the_oldest_due() {
        let mut s = MemoryStore::default();
        for (at, id) in [(100, "a"), (200, "b"), (5_000, "c")] {
            put_value(&mut s, &due_key(at, id), &Value::str(id)).unwrap();
        }
        put_value(&mut s, &inflight_key(9_000, "d"), &Value::str("d")).unwrap();
        dead(&mut s, 50, "e", None);
        let h = health(&mut s, 1_000).unwrap();
        let m = h.get("messages").unwrap();
        let n = |k: &str| m.get(k).and_then(Value::as_f64).unwrap();
        assert_eq!((n("pending"), n("due"), n("inflight"), n("deadLetters")), (3.0, 2.0, 1.0, 1.0));
        assert_eq!(m.get("capped"), Some(&Value::Bool(false)));
        assert_eq!(h.get("oldestDueAgeMs").and_then(Value::as_f64), Some(900.0));
        // Nothing due yet: no age.
        assert_eq!(health(&mut s, 10).unwrap().get("oldestDueAgeMs"), Some(&Value::Null));
    }

    #[test]
    fn counts_stop_at_the_cap() {
        let mut s = MemoryStore::default();
        for i in 0..COUNT_CAP + 5 {
            put_value(&mut s, &due_key(i as i64, &format!("m{i}")), &Value::str("x")).unwrap();
        }
        let h = health(&mut s, 0).unwrap();
        let m = h.get("messages").unwrap();
        assert_eq!(m.get("pending").and_then(Value::as_f64), Some(COUNT_CAP as f64));
        assert_eq!(m.get("capped"), Some(&Value::Bool(true)));
    }

    #[test]
    fn dead_letter_pages_without_payloads() {
        let mut s = MemoryStore::default();
        for i in 0..5 {
            dead(&mut s, 1_000 + i, &format!("msg_{i}"), (i == 0).then_some("boom: the app said no"));
        }
        let first = dead_letters(&mut s, 2, None).unwrap();
        let data = first.get("data").and_then(Value::as_array).unwrap();
        assert_eq!(data.len(), 2);
        assert_eq!(data[0].get("messageId").and_then(Value::as_str), Some("msg_0"));
        assert_eq!(data[0].get("lastAnswer").and_then(Value::as_str), Some("boom: the app said no"));
        assert_eq!(data[1].get("lastAnswer"), Some(&Value::Null));
        assert_eq!(data[0].get("attempts").and_then(Value::as_f64), Some(5.0));
        assert!(!first.to_json().unwrap().contains("PAYLOAD"));
        assert_eq!(first.get("hasMore"), Some(&Value::Bool(true)));
        let cursor = first.get("cursor").and_then(Value::as_str).unwrap().to_string();
        let mut seen = 2;
        let mut cursor = Some(cursor);
        while let Some(c) = cursor {
            let page = dead_letters(&mut s, 2, Some(&c)).unwrap();
            seen += page.get("data").and_then(Value::as_array).unwrap().len();
            cursor = page.get("cursor").and_then(Value::as_str).map(str::to_string);
        }
        assert_eq!(seen, 5);
    }

    #[test]
    fn bad_pages_are_refused() {
        let mut s = MemoryStore::default();
        for (limit, cursor) in
            [(0, None), (MAX_DEAD_LETTER_PAGE + 1, None), (10, Some("x")), (10, Some("dlq:12:x")), (10, Some("due:0000000000001:x"))]
        {
            let e = dead_letters(&mut s, limit, cursor).unwrap_err();
            assert_eq!(e.name, "BadRequest", "{limit} {cursor:?}");
        }
        assert!(dead_letters(&mut s, 10, Some(&dlq_key(5, "m"))).is_ok());
    }
}
