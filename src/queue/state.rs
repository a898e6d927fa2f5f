//! QueueDO storage layout (queue-do.md §2) and the alarm arithmetic (§6) on the object's
//! [`Alarm`].
//!
//! Every stored value is the tagged-JSON text of a [`Value`]: message rows keep exactly
//! the members the producer sent (like the reference's structured clone), so dead-letter
//! listings echo them back unchanged.
//!
//! Knows no method's rules.

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
/// 0.3 in-flight claim `inflight:<messageId>` = deadline; converted by the alarm.
pub const LEGACY_INFLIGHT_PREFIX: &str = "inflight:";
/// 0.4 in-flight claim `inflight-deadline:<pad(deadline)>:<messageId>` = messageId; the
/// exact key is the delivery's lease token.
pub const INFLIGHT_PREFIX: &str = "inflight-deadline:";
/// Fence compaction index `expired-run-gc:<pad(compactAt)>:<encodeURIComponent(runId)>`.
pub const FENCE_GC_PREFIX: &str = "expired-run-gc:";
/// A fence is compacted this long after its receipt was acknowledged.
pub const FENCE_COMPACTION_GRACE_MS: i64 = 330_000;
/// Entries handled per alarm pass by fence compaction, claim recovery and legacy
/// conversion; dead letters per `purgeDeadLetters` call.
pub const PAGE: usize = 128;
/// Default and largest `expireRun` page.
pub const EXPIRE_PAGE: usize = 64;
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
pub fn legacy_inflight_key(message_id: &str) -> String {
    format!("{LEGACY_INFLIGHT_PREFIX}{message_id}")
}
/// The lease token of a claim with this deadline.
pub fn inflight_key(deadline: i64, message_id: &str) -> String {
    format!("{INFLIGHT_PREFIX}{}:{message_id}", pad(deadline))
}
/// The message id of an `inflight-deadline:` key (after the 13 digits and `:`).
pub fn inflight_message_id(key: &str) -> &str {
    key.get(INFLIGHT_PREFIX.len() + 14..).unwrap_or("")
}
pub fn fence_gc_key(compact_at: i64, run_id: &str) -> String {
    format!("{FENCE_GC_PREFIX}{}:{}", pad(compact_at), crate::wire::uri::encode_uri_component(run_id))
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
    /// Deliveries whose outcome was lost (our extension, [`LOST_DELIVERIES`]).
    pub fn lost_deliveries(&self) -> f64 {
        self.member(LOST_DELIVERIES).and_then(Value::as_f64).unwrap_or(0.0)
    }
    /// The wire attempt of the row's next delivery (`x-vqs-message-attempt`): one more than
    /// the deliveries made so far, failed or lost. 1 only on a message's first delivery.
    pub fn next_delivery_attempt(&self) -> f64 {
        self.attempt() + self.lost_deliveries() + 1.0
    }
}

/// Row member counting deliveries whose outcome was lost: a claim recovered because its
/// instance died or its deadline passed while the delivery was in flight. The app may have
/// received and run such a delivery, so the next one must not present itself as the first
/// (`x-vqs-message-attempt: 1`): runtime 5.0.0-beta.42 takes attempt 1 for a message's first
/// delivery and then runs the run's steps without reading its event log ("turbo"), running
/// completed steps again. Lost deliveries are not failures: they never dead-letter a
/// message (`attempt` alone does, as in the reference). Absent on rows that lost none.
pub const LOST_DELIVERIES: &str = "lostDeliveries";

/// Read `msg:<id>`.
pub fn get_row(store: &mut dyn Store, message_id: &str) -> StoreResult<Option<Row>> {
    let key = msg_key(message_id);
    match get_value(store, &key)? {
        None => Ok(None),
        Some(v) => Row::from_value(&key, v).map(Some),
    }
}

/// Where a message is while its run reference points at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot<'a> {
    Due(&'a str),
    Dlq(&'a str),
    Inflight(&'a str),
}

/// The run reference `{messageId, dueKey?, dlqKey?, inflightKey?, idempotencyKey?}`.
pub fn run_reference(row: &Row, slot: Slot<'_>) -> Value {
    let mut m = Map::new();
    if let Some(id) = row.member("messageId") {
        m.insert("messageId".into(), id.clone());
    }
    let (name, key) = match slot {
        Slot::Due(k) => ("dueKey", k),
        Slot::Dlq(k) => ("dlqKey", k),
        Slot::Inflight(k) => ("inflightKey", k),
    };
    m.insert(name.into(), Value::str(key));
    if let Some(k) = row.member("idempotencyKey") {
        m.insert("idempotencyKey".into(), k.clone());
    }
    Value::Object(m)
}

/// Rewrite the row's run reference (if it has a run) to point at `slot`.
pub fn put_run_reference(store: &mut dyn Store, row: &Row, slot: Slot<'_>) -> StoreResult<()> {
    if let Some(run_id) = row.run_id() {
        put_value(store, &run_ref_key(&run_id, &row.id()), &run_reference(row, slot))?;
    }
    Ok(())
}

/// The runs the run DOs reported `expired` for this call (asked before its transaction;
/// see [`super::driver`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lifecycle {
    expired: Vec<String>,
}

impl Lifecycle {
    /// Nothing asked: only the queue's own fences count.
    pub fn unknown() -> Lifecycle {
        Lifecycle::default()
    }
    pub fn expired(run_ids: impl IntoIterator<Item = String>) -> Lifecycle {
        Lifecycle { expired: run_ids.into_iter().collect() }
    }
    pub fn reports_expired(&self, run_id: &str) -> bool {
        self.expired.iter().any(|r| r == run_id)
    }
}

/// Is the run expired: reported so by its run DO, or fenced here (`expired-run:<runId>`)?
pub fn run_expired(store: &mut dyn Store, run_id: &str, lifecycle: &Lifecycle) -> StoreResult<bool> {
    Ok(lifecycle.reports_expired(run_id) || store.get(&expired_key(run_id))?.is_some())
}

/// [`run_expired`] for the row's run (`false` without a run).
pub fn row_run_expired(store: &mut dyn Store, row: &Row, lifecycle: &Lifecycle) -> StoreResult<bool> {
    match row.run_id() {
        Some(run_id) => run_expired(store, &run_id, lifecycle),
        None => Ok(false),
    }
}

/// The expiry fence `expired-run:<runId>` = `{expiredAt, deleted, compactAt?}`. A fence
/// written by 0.3 (or by a 0.3-style `expireRun` call) has no `compactAt` member, read as
/// `null`; `paged` records whether it had one (the result shape follows it).
#[derive(Debug, Clone, PartialEq)]
pub struct Fence {
    /// `None`: the member is absent (an `expireRun` without `expiredAt`).
    pub expired_at: Option<Value>,
    pub deleted: f64,
    pub compact_at: Option<i64>,
    pub paged: bool,
}

impl Fence {
    pub fn read(store: &mut dyn Store, run_id: &str) -> StoreResult<Option<Fence>> {
        let key = expired_key(run_id);
        let Some(v) = get_value(store, &key)? else { return Ok(None) };
        let Value::Object(m) = v else { return Err(corrupt(&key)) };
        Ok(Some(Fence {
            expired_at: m.get("expiredAt").cloned(),
            deleted: m.get("deleted").and_then(Value::as_f64).unwrap_or(0.0),
            compact_at: m.get("compactAt").and_then(Value::as_f64).map(clamp_time),
            paged: m.contains_key("compactAt"),
        }))
    }

    pub fn write(&self, store: &mut dyn Store, run_id: &str) -> StoreResult<()> {
        let mut m = Map::new();
        if let Some(at) = &self.expired_at {
            m.insert("expiredAt".into(), at.clone());
        }
        m.insert("deleted".into(), Value::num(self.deleted));
        if self.paged {
            m.insert("compactAt".into(), self.compact_at.map_or(Value::Null, |t| Value::num(t as f64)));
        }
        put_value(store, &expired_key(run_id), &Value::Object(m))
    }

    /// The receipt `{expiredAt, deleted}`.
    pub fn receipt(&self) -> Value {
        let mut m = Map::new();
        if let Some(at) = &self.expired_at {
            m.insert("expiredAt".into(), at.clone());
        }
        m.insert("deleted".into(), Value::num(self.deleted));
        Value::Object(m)
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
pub fn due_time(key: &str) -> i64 {
    let digits: String = key.get(DUE_PREFIX.len()..).unwrap_or("").chars().take(13).take_while(char::is_ascii_digit).collect();
    digits.parse::<i64>().unwrap_or(0)
}

/// The 13 digits after `prefix` as epoch ms.
pub(crate) fn key_time(prefix: &str, key: &str) -> i64 {
    let digits: String = key.get(prefix.len()..).unwrap_or("").chars().take(13).take_while(char::is_ascii_digit).collect();
    digits.parse::<i64>().unwrap_or(0)
}

/// What a caller already knows about the keys [`next_wake`] reads, so that it need not
/// list them again: each `Some` is the answer the corresponding list would give (`None`
/// inside: no such key), each `None` a list still to make. Every storage list costs a
/// fresh compilation of its SQL statement on the platform (its bounds are new bindings),
/// so a claim, which has just listed most of these, passes what it saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WakeHints {
    /// The time of the first `due:` key.
    pub due: Option<Option<i64>>,
    /// The deadline of the first in-flight lease.
    pub inflight: Option<Option<i64>>,
    /// The time of the first fence compaction entry.
    pub fence_gc: Option<Option<i64>>,
    /// Whether 0.3 `inflight:` claims remain.
    pub legacy: Option<bool>,
}

/// The earliest of: the first `due:` time, the first in-flight deadline, the first fence
/// compaction time, and "now" (0) while 0.3 `inflight:` claims wait for conversion.
pub fn next_wake(store: &mut dyn Store) -> StoreResult<Option<i64>> {
    next_wake_with(store, WakeHints::default())
}

/// [`next_wake`], listing only what `known` does not say.
pub fn next_wake_with(store: &mut dyn Store, known: WakeHints) -> StoreResult<Option<i64>> {
    let mut first = |prefix: &str, time: fn(&str) -> i64| -> StoreResult<Option<i64>> {
        Ok(store.list(&ListOptions::prefix(prefix).limit(1))?.first().map(|(key, _)| time(key)))
    };
    let times = [
        match known.due {
            Some(t) => t,
            None => first(DUE_PREFIX, due_time)?,
        },
        match known.inflight {
            Some(t) => t,
            None => first(INFLIGHT_PREFIX, |k| key_time(INFLIGHT_PREFIX, k))?,
        },
        match known.fence_gc {
            Some(t) => t,
            None => first(FENCE_GC_PREFIX, |k| key_time(FENCE_GC_PREFIX, k))?,
        },
        match known.legacy {
            Some(any) => any.then_some(0),
            None => first(LEGACY_INFLIGHT_PREFIX, |_| 0)?,
        },
    ];
    Ok(times.into_iter().flatten().min())
}

/// "Schedule next (now)" (§6): alarm at the earliest due time / in-flight deadline
/// (now + 1 ms if that is not in the future), or no alarm.
pub fn schedule_next(store: &mut dyn Store, now: i64, alarm: &mut Alarm) -> StoreResult<()> {
    schedule_next_with(store, now, alarm, WakeHints::default())
}

/// [`schedule_next`] with what the caller already knows ([`WakeHints`]).
pub fn schedule_next_with(store: &mut dyn Store, now: i64, alarm: &mut Alarm, known: WakeHints) -> StoreResult<()> {
    match next_wake_with(store, known)? {
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
