//! The alarm loop as pure steps (queue-do.md §4): [`claim`] (one transaction), the
//! outbound request ([`build_request`]), the answer's classification ([`classify`]) and
//! [`settle`] (one transaction). The shell performs the HTTP requests between claim and
//! settle, concurrently, and applies each step's [`Alarm`] change.

use crate::config::Config;
use crate::store::alarm::Alarm;
use crate::store::{ListOptions, Store};
use crate::wire::js::{number_to_string, to_js_string};
use crate::wire::{RpcError, Value};

use super::state::*;

/// Recover lost in-flight claims, claim due messages up to `QUEUE_MAX_INFLIGHT`, and
/// schedule the next alarm (§4.1). One transaction.
///
/// `is_live(messageId)` tells whether a delivery of that message is running in this very
/// object instance. An `inflight:` entry that is not live was left behind by an instance
/// that no longer exists (eviction, restart, deploy): it is recovered at once instead of
/// waiting for its deadline (delivery is at least once either way). Pass `|_| true` for
/// the reference's deadline-only behaviour.
pub fn claim(
    store: &mut dyn Store,
    now: i64,
    config: &Config,
    alarm: &mut Alarm,
    is_live: &dyn Fn(&str) -> bool,
) -> Result<Vec<Row>, RpcError> {
    claim_at_most(store, now, config, alarm, is_live, usize::MAX)
}

/// [`claim`], taking at most `limit` messages (the shell's per-invocation budget).
pub fn claim_at_most(
    store: &mut dyn Store,
    now: i64,
    config: &Config,
    alarm: &mut Alarm,
    is_live: &dyn Fn(&str) -> bool,
    limit: usize,
) -> Result<Vec<Row>, RpcError> {
    let max_inflight = config.queue_max_inflight as usize;
    let mut inflight_count = 0usize;
    for (key, text) in store.list(&ListOptions::prefix(INFLIGHT_PREFIX))? {
        let message_id = key.get(INFLIGHT_PREFIX.len()..).unwrap_or("").to_string();
        let deadline = decode_entry(&key, &text)?.as_f64().unwrap_or(f64::NAN);
        let lost = deadline <= now as f64 || !is_live(&message_id);
        if !lost {
            inflight_count += 1;
            continue;
        }
        store.delete(&key)?;
        if let Some(row) = get_row(store, &message_id)? {
            let schedule = due_key(now, &message_id);
            put_value(store, &schedule, &Value::str(message_id.as_str()))?;
            put_run_reference(store, &row, Some(&schedule), None)?;
        }
    }

    let mut rows = Vec::new();
    if inflight_count < max_inflight && limit > 0 {
        let room = (max_inflight - inflight_count).min(limit);
        let end = format!("{DUE_PREFIX}{}", pad(now.saturating_add(1)));
        let due = store.list(&ListOptions::prefix(DUE_PREFIX).end(end).limit(room))?;
        let deadline = now as f64 + config.queue_delivery_timeout_ms as f64 + INFLIGHT_GRACE_MS as f64;
        for (key, text) in due {
            store.delete(&key)?;
            let message_id = to_js_string(Some(&decode_entry(&key, &text)?));
            let Some(row) = get_row(store, &message_id)? else {
                continue; // orphaned schedule entry
            };
            put_value(store, &inflight_key(&message_id), &Value::num(deadline))?;
            rows.push(row);
        }
    }
    schedule_next(store, now, alarm)?;
    Ok(rows)
}

/// The body of a delivery: `row.body` as `fetch` would send it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    None,
    Text(String),
    Bytes(Vec<u8>),
}

/// One outbound delivery request (§4.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundRequest {
    pub url: String,
    /// In this order: content-type, x-vqs-queue-name, x-vqs-message-id,
    /// x-vqs-message-attempt, then x-workflow-callback-secret when configured.
    pub headers: Vec<(&'static str, String)>,
    pub body: Body,
}

/// `targetBaseUrl` without one trailing `/`, + `/.well-known/workflow/v1/<pathname>`.
pub fn delivery_url(row: &Row) -> String {
    let base = to_js_string(row.member("targetBaseUrl"));
    let base = base.strip_suffix('/').unwrap_or(&base);
    format!("{base}/.well-known/workflow/v1/{}", to_js_string(row.member("pathname")))
}

pub fn build_request(row: &Row, config: &Config) -> OutboundRequest {
    let mut headers = vec![
        ("content-type", "application/json".to_string()),
        ("x-vqs-queue-name", to_js_string(row.member("queueName"))),
        ("x-vqs-message-id", to_js_string(row.member("messageId"))),
        ("x-vqs-message-attempt", number_to_string(row.attempt() + 1.0)),
    ];
    if let Some(secret) = config.callback_secret.as_deref().filter(|s| !s.is_empty()) {
        headers.push(("x-workflow-callback-secret", secret.to_string()));
    }
    let body = match row.member("body") {
        None | Some(Value::Null) => Body::None,
        Some(Value::String(s)) => Body::Text(s.clone()),
        Some(Value::Bytes(b)) => Body::Bytes(b.clone()),
        Some(other) => Body::Text(to_js_string(Some(other))),
    };
    OutboundRequest { url: delivery_url(row), headers, body }
}

/// What came back from a delivery attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// An HTTP answer. `body` is read only for 503 ([`needs_body`]); `None` when it was
    /// not read or could not be read.
    Response { status: u16, body: Option<Vec<u8>> },
    /// Network error or timeout, as `String(error)`.
    Transport(String),
}

/// Whether the classification needs the response body of this status.
pub fn needs_body(status: u16) -> bool {
    status == 503
}

/// What to do with a delivered message (§4.2 table).
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// 2xx, or a permanent failure (404/409/410/422): done.
    Ack,
    /// 503 with a numeric `timeoutSeconds`: due again after it, no attempt consumed.
    Redeliver { timeout_seconds: f64 },
    /// Anything else: one attempt consumed, backoff or dead letter.
    Retry { reason: String },
}

/// `timeoutSeconds` of a 503 body when the body parses as JSON and it is a number.
fn timeout_seconds(body: &[u8]) -> Option<f64> {
    let text = String::from_utf8_lossy(body.strip_prefix(&[0xEF, 0xBB, 0xBF]).unwrap_or(body));
    let parsed: serde_json::Value = serde_json::from_str(&text).ok()?;
    parsed.as_object()?.get("timeoutSeconds")?.as_f64()
}

pub fn classify(outcome: &Outcome) -> Action {
    match outcome {
        Outcome::Transport(error) => Action::Retry { reason: format!("transport error: {error}") },
        Outcome::Response { status, .. } if (200..=299).contains(status) => Action::Ack,
        Outcome::Response { status: 503, body } => match body.as_deref().and_then(timeout_seconds) {
            Some(timeout_seconds) => Action::Redeliver { timeout_seconds },
            None => Action::Retry { reason: "HTTP 503".into() },
        },
        Outcome::Response { status, .. } if PERMANENT_STATUSES.contains(status) => Action::Ack,
        Outcome::Response { status, .. } => Action::Retry { reason: format!("HTTP {status}") },
    }
}

/// What [`settle`] did (for logs and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    Acked,
    Redelivering,
    Retrying,
    DeadLettered,
    /// The run was fenced while the message was in flight: gone, not dead-lettered.
    Purged,
}

/// Delete the message and everything pointing at it (run fenced meanwhile).
fn purge(store: &mut dyn Store, row: &Row) -> Result<(), RpcError> {
    let id = row.id();
    store.delete(&msg_key(&id))?;
    store.delete(&inflight_key(&id))?;
    if let Some(run_id) = row.run_id() {
        store.delete(&run_ref_key(&run_id, &id))?;
    }
    release_claim(store, row.member("idempotencyKey"), row.member("messageId"))
}

/// Commit the outcome of one delivery of `row` (the row as claimed). One transaction.
pub fn settle(
    store: &mut dyn Store,
    now: i64,
    config: &Config,
    row: &Row,
    action: &Action,
    alarm: &mut Alarm,
) -> Result<Settled, RpcError> {
    let id = row.id();
    let settled = match action {
        Action::Ack => {
            store.delete(&msg_key(&id))?;
            store.delete(&inflight_key(&id))?;
            release_claim(store, row.member("idempotencyKey"), row.member("messageId"))?;
            if let Some(run_id) = row.run_id() {
                store.delete(&run_ref_key(&run_id, &id))?;
            }
            Settled::Acked
        }
        Action::Redeliver { timeout_seconds } => {
            if run_fenced(store, row)? {
                purge(store, row)?;
                Settled::Purged
            } else {
                store.delete(&inflight_key(&id))?;
                let schedule = due_key(clamp_time(now as f64 + timeout_seconds * 1000.0), &id);
                put_value(store, &schedule, &Value::str(id.as_str()))?;
                put_run_reference(store, row, Some(&schedule), None)?;
                Settled::Redelivering
            }
        }
        Action::Retry { reason } => {
            let attempt = row.attempt() + 1.0;
            if run_fenced(store, row)? {
                purge(store, row)?;
                Settled::Purged
            } else {
                store.delete(&inflight_key(&id))?;
                let mut updated = row.clone();
                updated.set("attempt", Value::num(attempt));
                updated.set("lastError", Value::str(reason.as_str()));
                if attempt >= f64::from(config.queue_max_attempts) {
                    updated.set("failedAt", Value::num(now as f64));
                    let dead_key = dlq_key(now, &id);
                    put_value(store, &dead_key, &updated.to_value())?;
                    store.delete(&msg_key(&id))?;
                    release_claim(store, row.member("idempotencyKey"), row.member("messageId"))?;
                    put_run_reference(store, row, None, Some(&dead_key))?;
                    Settled::DeadLettered
                } else {
                    let schedule = due_key(clamp_time(now as f64 + backoff_seconds(attempt) * 1000.0), &id);
                    put_value(store, &msg_key(&id), &updated.to_value())?;
                    put_value(store, &schedule, &Value::str(id.as_str()))?;
                    put_run_reference(store, row, Some(&schedule), None)?;
                    Settled::Retrying
                }
            }
        }
    };
    schedule_next(store, now, alarm)?;
    Ok(settled)
}
