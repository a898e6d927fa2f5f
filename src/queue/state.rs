//! QueueDO storage layout (queue-do.md §2) and the alarm arithmetic (§6) on the object's
//! [`Alarm`].
//!
//! Every stored value is the tagged-JSON text of a [`Value`]: message rows keep exactly
//! the members the producer sent (like the reference's structured clone), so dead-letter
//! listings echo them back unchanged.

use crate::store::alarm::{Alarm, MAX_ALARM_MS};
use crate::store::{ListOptions, Store, StoreResult};
use crate::wire::js::{strict_eq, to_js_string, truthy};
use crate::wire::{Map, RpcError, Value};

/// Grace period past the delivery timeout before an in-flight claim counts as lost.
pub const INFLIGHT_GRACE_MS: i64 = 30_000;
/// Overdue alarms are moved to now + this, so the platform sees a fresh edge.
pub const MIN_ALARM_DELAY_MS: i64 = 1;
/// Backoff cap in seconds.
pub const BACKOFF_CAP_SECONDS: f64 = 60.0;
/// Answers that drop a message without retry or dead letter.
pub const PERMANENT_STATUSES: [u16; 4] = [404, 409, 410, 422];
/// The latest time we schedule anything at: the latest time the platform's alarm API
/// accepts (year 2262, [`MAX_ALARM_MS`]). It has 13 digits, so key order stays time order
/// even for absurd delays (the reference's keys would grow beyond 13 digits and sort
/// wrongly), and a message due then can still be armed for.
pub const MAX_TIME_MS: i64 = MAX_ALARM_MS;

pub const CFG_KEY: &str = "cfg";
pub const MSG_PREFIX: &str = "msg:";
pub const DUE_PREFIX: &str = "due:";
pub const INFLIGHT_PREFIX: &str = "inflight:";
pub const KEY_PREFIX: &str = "key:";
pub const DLQ_PREFIX: &str = "dlq:";
pub const RUN_PREFIX: &str = "run:";
pub const EXPIRED_PREFIX: &str = "expired-run:";

/// `pad(ms)`: decimal of max(0, ms), zero-padded to 13 digits.
pub fn pad(ms: i64) -> String {
    format!("{:013}", ms.clamp(0, MAX_TIME_MS))
}

/// Epoch ms from a JavaScript-style f64 computation, floored and kept inside
/// `[0, MAX_TIME_MS]` (NaN → 0).
pub fn clamp_time(ms: f64) -> i64 {
    if ms.is_nan() {
        return 0;
    }
    let f = ms.floor().clamp(0.0, MAX_TIME_MS as f64);
    f as i64
}

pub fn due_key(at: i64, message_id: &str) -> String {
    format!("{DUE_PREFIX}{}:{message_id}", pad(at))
}
pub fn msg_key(message_id: &str) -> String {
    format!("{MSG_PREFIX}{message_id}")
}
pub fn inflight_key(message_id: &str) -> String {
    format!("{INFLIGHT_PREFIX}{message_id}")
}
pub fn dedup_key(idempotency_key: &str) -> String {
    format!("{KEY_PREFIX}{idempotency_key}")
}
pub fn dlq_key(at: i64, message_id: &str) -> String {
    format!("{DLQ_PREFIX}{}:{message_id}", pad(at))
}
pub fn run_ref_key(run_id: &str, message_id: &str) -> String {
    format!("{RUN_PREFIX}{run_id}:{message_id}")
}
pub fn expired_key(run_id: &str) -> String {
    format!("{EXPIRED_PREFIX}{run_id}")
}

/// `min(60, 2^attempt)` seconds.
pub fn backoff_seconds(attempt: f64) -> f64 {
    2f64.powf(attempt).min(BACKOFF_CAP_SECONDS)
}

// ---- values -------------------------------------------------------------------------

fn corrupt(key: &str) -> RpcError {
    RpcError::error(format!("corrupt queue record at {key}"))
}

/// Read a stored value (`None` when the key is absent).
pub fn get_value(store: &mut dyn Store, key: &str) -> StoreResult<Option<Value>> {
    match store.get(key)? {
        None => Ok(None),
        Some(text) => Value::parse(&text).map(Some).map_err(|_| corrupt(key)),
    }
}

pub fn put_value(store: &mut dyn Store, key: &str, value: &Value) -> StoreResult<()> {
    let text = value.to_json().map_err(RpcError::from)?;
    store.put(key, &text)
}

/// A stored value decoded from a listing entry.
pub fn decode_entry(key: &str, text: &str) -> StoreResult<Value> {
    Value::parse(text).map_err(|_| corrupt(key))
}

/// A message row (`msg:` value; also the body of a `dlq:` row). Members are kept as the
/// producer sent them; absent members stay absent.
#[derive(Debug, Clone, PartialEq)]
pub struct Row(pub Map);

impl Row {
    pub fn from_value(key: &str, v: Value) -> StoreResult<Row> {
        match v {
            Value::Object(m) => Ok(Row(m)),
            _ => Err(corrupt(key)),
        }
    }
    pub fn to_value(&self) -> Value {
        Value::Object(self.0.clone())
    }
    pub fn member(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }
    pub fn set(&mut self, key: &str, v: Value) {
        self.0.insert(key.to_string(), v);
    }
    pub fn remove(&mut self, key: &str) {
        self.0.remove(key);
    }
    /// `${row.messageId}`.
    pub fn id(&self) -> String {
        to_js_string(self.member("messageId"))
    }
    /// `${row.runId}` when `row.runId` is truthy.
    pub fn run_id(&self) -> Option<String> {
        truthy(self.member("runId")).then(|| to_js_string(self.member("runId")))
    }
    /// `${row.idempotencyKey}` when truthy.
    pub fn idempotency_key(&self) -> Option<String> {
        truthy(self.member("idempotencyKey")).then(|| to_js_string(self.member("idempotencyKey")))
    }
    /// Completed failed attempts.
    pub fn attempt(&self) -> f64 {
        self.member("attempt").and_then(Value::as_f64).unwrap_or(0.0)
    }
}

/// Read `msg:<id>`.
pub fn get_row(store: &mut dyn Store, message_id: &str) -> StoreResult<Option<Row>> {
    let key = msg_key(message_id);
    match get_value(store, &key)? {
        None => Ok(None),
        Some(v) => Row::from_value(&key, v).map(Some),
    }
}

/// The run reference `{messageId, dueKey?, dlqKey?, idempotencyKey?}`.
pub fn run_reference(row: &Row, due: Option<&str>, dlq: Option<&str>) -> Value {
    let mut m = Map::new();
    if let Some(id) = row.member("messageId") {
        m.insert("messageId".into(), id.clone());
    }
    if let Some(d) = due {
        m.insert("dueKey".into(), Value::str(d));
    }
    if let Some(d) = dlq {
        m.insert("dlqKey".into(), Value::str(d));
    }
    if let Some(k) = row.member("idempotencyKey") {
        m.insert("idempotencyKey".into(), k.clone());
    }
    Value::Object(m)
}

/// Rewrite the row's run reference (if it has a run) to point at `due` or `dlq`.
pub fn put_run_reference(store: &mut dyn Store, row: &Row, due: Option<&str>, dlq: Option<&str>) -> StoreResult<()> {
    if let Some(run_id) = row.run_id() {
        put_value(store, &run_ref_key(&run_id, &row.id()), &run_reference(row, due, dlq))?;
    }
    Ok(())
}

/// Is `expired-run:<runId>` present for the row's run?
pub fn run_fenced(store: &mut dyn Store, row: &Row) -> StoreResult<bool> {
    match row.run_id() {
        Some(run_id) => Ok(store.get(&expired_key(&run_id))?.is_some()),
        None => Ok(false),
    }
}

/// Delete `key:<idempotencyKey>` if it still names `message_id`.
pub fn release_claim(store: &mut dyn Store, idempotency_key: Option<&Value>, message_id: Option<&Value>) -> StoreResult<()> {
    if truthy(idempotency_key) {
        let key = dedup_key(&to_js_string(idempotency_key));
        if strict_eq(get_value(store, &key)?.as_ref(), message_id) {
            store.delete(&key)?;
        }
    }
    Ok(())
}

// ---- alarm arithmetic (§6) ---------------------------------------------------------

/// The 13 digits after `due:` as epoch ms (parseInt of the slice).
fn due_time(key: &str) -> i64 {
    let digits: String = key.get(DUE_PREFIX.len()..).unwrap_or("").chars().take(13).take_while(char::is_ascii_digit).collect();
    digits.parse::<i64>().unwrap_or(0)
}

/// The earliest `due:` time and in-flight deadline, if any.
pub fn next_wake(store: &mut dyn Store) -> StoreResult<Option<i64>> {
    let mut next: Option<i64> = None;
    if let Some((key, _)) = store.list(&ListOptions::prefix(DUE_PREFIX).limit(1))?.into_iter().next() {
        next = Some(due_time(&key));
    }
    for (key, text) in store.list(&ListOptions::prefix(INFLIGHT_PREFIX))? {
        let deadline = clamp_time(decode_entry(&key, &text)?.as_f64().unwrap_or(0.0));
        if next.is_none_or(|n| deadline < n) {
            next = Some(deadline);
        }
    }
    Ok(next)
}

/// "Schedule next (now)" (§6): alarm at the earliest due time / in-flight deadline
/// (now + 1 ms if that is not in the future), or no alarm.
pub fn schedule_next(store: &mut dyn Store, now: i64, alarm: &mut Alarm) -> StoreResult<()> {
    match next_wake(store)? {
        Some(next) => alarm.set(if next <= now { now.saturating_add(MIN_ALARM_DELAY_MS) } else { next }),
        None => alarm.delete(),
    }
    Ok(())
}

/// "Arm at most (at, now)" (§6).
pub fn arm_at_most(at: i64, now: i64, alarm: &mut Alarm) {
    let current = alarm.get();
    if let Some(c) = current {
        if c <= now {
            alarm.set(now.saturating_add(MIN_ALARM_DELAY_MS));
            return;
        }
    }
    let target = if at <= now { now.saturating_add(MIN_ALARM_DELAY_MS) } else { at };
    if current.is_none_or(|c| target < c) {
        alarm.set(target);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pad_and_clamp() {
        assert_eq!(pad(5), "0000000000005");
        assert_eq!(pad(-5), "0000000000000");
        assert_eq!(pad(i64::MAX), "9223372036000");
        assert_eq!(clamp_time(f64::NAN), 0);
        assert_eq!(clamp_time(1.9), 1);
        assert_eq!(clamp_time(1e300), MAX_TIME_MS);
        assert_eq!(due_time("due:0000000001234:m"), 1234);
        assert_eq!(backoff_seconds(1.0), 2.0);
        assert_eq!(backoff_seconds(4.0), 16.0);
        assert_eq!(backoff_seconds(6.0), 60.0);
        assert_eq!(backoff_seconds(1e9), 60.0);
    }

    #[test]
    fn arm_at_most_rules() {
        let mut a = Alarm::new(Some(50));
        arm_at_most(200, 100, &mut a); // overdue alarm → now + 1
        assert_eq!(a.get(), Some(101));
        let mut a = Alarm::new(Some(500));
        arm_at_most(300, 100, &mut a);
        assert_eq!(a.get(), Some(300));
        arm_at_most(400, 100, &mut a);
        assert_eq!(a.get(), Some(300));
        let mut a = Alarm::new(None);
        arm_at_most(90, 100, &mut a);
        assert_eq!(a.get(), Some(101));
    }
}
