//! The alarm loop as pure steps (queue-do.md §4): [`claim`] (one transaction), the
//! outbound request ([`build_request`]), the answer's classification ([`classify`]) and
//! [`settle`] (one transaction). The shell performs the HTTP requests between claim and
//! settle, concurrently, and applies each step's [`Alarm`] change.
//!
//! Performs no I/O: the shell makes the requests.

use crate::config::Config;
use crate::store::alarm::{Alarm, AlarmChange};
use crate::store::{ListOptions, Store, StoreResult, Stored};
use crate::wire::js::to_js_string;
use crate::wire::number::number_to_string;
use crate::wire::{RpcError, Value};

use super::admin::{ANSWER_EXCERPT_CHARS, LAST_ANSWER};
use super::state::*;

/// A claimed message: its row as claimed and its lease token (the exact
/// `inflight-deadline:` key; every settlement first deletes it and does nothing when it
/// is gone, so a late answer for a recovered claim cannot touch a newer one).
#[derive(Debug, Clone, PartialEq)]
pub struct Claimed {
    pub row: Row,
    pub lease: String,
}

/// The shell's offer to claim a message in its own `enqueue` (our extension, not in the
/// reference): when this instance has a free delivery slot, an immediate message goes
/// straight to an `inflight-deadline:` lease instead of a `due:` entry that the next claim
/// would turn into one. That saves three rows per message (the `due:` put and delete,
/// and the run reference's rewrite) and a claim; the shell delivers the message itself.
///
/// Sound only when the shell marks the lease live (its delivery running in this instance)
/// before anything else can run, and then delivers it: a claim that saw the lease not live
/// would recover it as lost.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Handoff {
    /// The deliveries running (or handed over) in this instance: what a claim counts as
    /// active ([`claim`]'s `is_live`).
    pub live: usize,
    /// Whether a delivery loop is running that takes the message at once; otherwise the
    /// alarm is armed for now, to start one.
    pub looping: bool,
    /// The message the enqueue claimed, for the shell to deliver.
    pub claimed: Option<Claimed>,
}

/// The alarm's claim phase (spec-0.4 `queue.md` §4), one transaction:
///
/// 1. compact a page of due fence-compaction entries (more due → alarm now + 1, stop);
/// 2. convert a page of 0.3 `inflight:<messageId>` claims into `inflight-deadline:` claims
///    with the same deadline;
/// 3. recover lost claims (deadline passed, or — our extension — not running in this
///    instance: `is_live(lease)` is false), at most [`PAGE`] (more → alarm now + 1, stop);
/// 4. claim up to `QUEUE_MAX_INFLIGHT` − active due messages;
/// 5. schedule the next alarm.
///
/// `QUEUE_MAX_INFLIGHT` > 128 or `QUEUE_DELIVERY_TIMEOUT_MS` > 300000 fail the phase
/// (the shell then sets the alarm to now + 1000). Pass `|_| true` as `is_live` for the
/// reference's deadline-only recovery.
pub fn claim(
    store: &mut dyn Store,
    now: i64,
    config: &Config,
    alarm: &mut Alarm,
    is_live: &dyn Fn(&str) -> bool,
) -> Result<Vec<Claimed>, RpcError> {
    claim_at_most(store, now, config, alarm, is_live, usize::MAX, &mut ClaimMemo::default())
}

/// What an instance's claims remember of two key families between them, so that the next
/// claim need not list them again (each storage list costs a statement preparation in
/// workerd's SQLite: most of a claim's cost). Sound only while every write of the
/// instance's storage goes through [`MemoWatch`], which forgets what a write could change;
/// a fresh instance starts from the default (nothing known).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimMemo {
    /// No 0.3 `inflight:<messageId>` claim is left: a claim listed none. Nothing writes
    /// that family any more (0.4 claims are `inflight-deadline:`), so it stays empty.
    pub legacy_empty: bool,
    /// The first fence-compaction key (`None` inside: there is none), as a claim that
    /// compacted nothing listed it.
    pub fence_first: Option<Option<String>>,
    /// How many lost claims the last claim put back on the schedule (deliveries a previous
    /// instance left, or past their deadline): the operator log's `claims.recovered`.
    pub recovered: usize,
}

/// A store that tells a [`ClaimMemo`] about the writes that could change what it holds:
/// any write under [`FENCE_GC_PREFIX`] forgets the first fence-compaction key, a put under
/// [`LEGACY_INFLIGHT_PREFIX`] the emptiness of the 0.3 claims. Every store the queue
/// instance hands its cores goes through one (the claim's own writes included).
pub struct MemoWatch<'a> {
    inner: &'a mut dyn Store,
    memo: &'a std::cell::RefCell<ClaimMemo>,
}

impl<'a> MemoWatch<'a> {
    pub fn new(inner: &'a mut dyn Store, memo: &'a std::cell::RefCell<ClaimMemo>) -> Self {
        MemoWatch { inner, memo }
    }

    fn wrote(&self, key: &str, put: bool) {
        if key.starts_with(FENCE_GC_PREFIX) {
            self.memo.borrow_mut().fence_first = None;
        } else if put && key.starts_with(LEGACY_INFLIGHT_PREFIX) {
            self.memo.borrow_mut().legacy_empty = false;
        }
    }
}

impl Store for MemoWatch<'_> {
    fn get_value(&mut self, key: &str) -> StoreResult<Option<Stored>> {
        self.inner.get_value(key)
    }
    fn put(&mut self, key: &str, value: &str) -> StoreResult<()> {
        self.wrote(key, true);
        self.inner.put(key, value)
    }
    fn put_bytes(&mut self, key: &str, value: &[u8]) -> StoreResult<()> {
        self.wrote(key, true);
        self.inner.put_bytes(key, value)
    }
    fn put_value(&mut self, key: &str, value: &Stored) -> StoreResult<()> {
        self.wrote(key, true);
        self.inner.put_value(key, value)
    }
    fn delete(&mut self, key: &str) -> StoreResult<bool> {
        self.wrote(key, false);
        self.inner.delete(key)
    }
    fn contains(&mut self, key: &str) -> StoreResult<bool> {
        self.inner.contains(key)
    }
    fn list_values(&mut self, options: &ListOptions) -> StoreResult<Vec<(String, Stored)>> {
        self.inner.list_values(options)
    }
    fn list_visit(&mut self, options: &ListOptions, visit: &mut dyn FnMut(String, Stored) -> StoreResult<bool>) -> StoreResult<()> {
        self.inner.list_visit(options, visit)
    }
    fn last_key(&mut self, prefix: &str) -> StoreResult<Option<String>> {
        self.inner.last_key(prefix)
    }
}

/// [`claim`], taking at most `limit` messages (the shell's per-invocation budget), and
/// skipping the lists that `memo` answers (updating it from those it makes). `store` must
/// be a [`MemoWatch`] over the same memo when anything else writes the instance's storage.
pub fn claim_at_most(
    store: &mut dyn Store,
    now: i64,
    config: &Config,
    alarm: &mut Alarm,
    is_live: &dyn Fn(&str) -> bool,
    limit: usize,
    memo: &mut ClaimMemo,
) -> Result<Vec<Claimed>, RpcError> {
    let max_inflight = config.max_inflight()? as usize;
    memo.recovered = 0;
    let fences = compact_fences(store, now, &mut memo.fence_first)?;
    if fences.more {
        alarm.set(now.saturating_add(MIN_ALARM_DELAY_MS));
        return Ok(Vec::new());
    }
    let legacy = if memo.legacy_empty { Legacy { more: false, none: true } } else { convert_legacy_claims(store)? };
    memo.legacy_empty = legacy.none;
    if legacy.more {
        alarm.set(now.saturating_add(MIN_ALARM_DELAY_MS));
        return Ok(Vec::new());
    }
    // What this claim lists anyway tells the next wake-up most of what it needs
    // (`WakeHints`): no 0.3 claims remain once they are converted.
    let mut hints = WakeHints { fence_gc: fences.next, legacy: Some(false), ..WakeHints::default() };

    // Recover lost claims. Active claims number at most QUEUE_MAX_INFLIGHT (≤ 128), so
    // one page of PAGE + 1 keys holds them all unless many claims were lost.
    let claims = store.list(&ListOptions::prefix(INFLIGHT_PREFIX).limit(PAGE + 1))?;
    let mut active = 0usize;
    let mut recovered = 0usize;
    // The first lease left (leases sort by deadline), when the page held them all.
    let mut first_lease: Option<&str> = None;
    for (lease, _) in &claims {
        let lost = key_deadline(lease) <= now || !is_live(lease);
        if !lost {
            active += 1;
            first_lease = first_lease.or(Some(lease));
            continue;
        }
        if recovered == PAGE {
            alarm.set(now.saturating_add(MIN_ALARM_DELAY_MS));
            return Ok(Vec::new());
        }
        recovered += 1;
        memo.recovered = recovered;
        store.delete(lease)?;
        let message_id = inflight_message_id(lease).to_string();
        if let Some(mut row) = get_row(store, &message_id)? {
            // The lost delivery may have reached the app: the next one is a redelivery.
            row.set(LOST_DELIVERIES, Value::num(row.lost_deliveries() + 1.0));
            put_value(store, &msg_key(&message_id), &row.to_value())?;
            let schedule = due_key(now, &message_id);
            put_value(store, &schedule, &Value::str(message_id.as_str()))?;
            put_run_reference(store, &row, Slot::Due(&schedule))?;
        }
    }
    if claims.len() > PAGE {
        // Claims beyond this page were not looked at (more than PAGE only after the cap
        // was lowered, or deliveries of several dead instances): claim nothing this pass.
        active = active.max(max_inflight);
    }

    let mut claimed = Vec::new();
    if active < max_inflight && limit > 0 {
        let timeout = config.delivery_timeout_ms()?;
        let room = (max_inflight - active).min(limit);
        let end = format!("{DUE_PREFIX}{}", pad(now.saturating_add(1)));
        // One listing for both: the due entries (at most `room`), and the first entry left
        // after them, whose time is the next `due:` wake-up (`none` when the listing runs
        // out first). The cursor loads each value as it is visited, so later messages cost
        // one more entry, not a page.
        let mut due = Vec::new();
        let mut next = None;
        store.list_visit(&ListOptions::prefix(DUE_PREFIX).limit(room.saturating_add(1)), &mut |key, value| {
            if due.len() < room && key < end {
                let text = value.into_text(&key)?;
                due.push((key, text));
                Ok(true)
            } else {
                next = Some(due_time(&key));
                Ok(false)
            }
        })?;
        hints.due = Some(next);
        let deadline = clamp_time(now as f64 + timeout as f64 + INFLIGHT_GRACE_MS as f64);
        for (key, text) in due {
            store.delete(&key)?;
            let message_id = to_js_string(Some(&decode_entry(&key, &text)?));
            let Some(row) = get_row(store, &message_id)? else {
                continue; // orphaned schedule entry
            };
            let lease = inflight_key(deadline, &message_id);
            put_value(store, &lease, &Value::str(message_id.as_str()))?;
            put_run_reference(store, &row, Slot::Inflight(&lease))?;
            claimed.push(Claimed { row, lease });
        }
    }
    if claims.len() <= PAGE {
        // Every lease was on the page: the first left is the earliest of the survivors and
        // of this claim's new leases (all with one deadline).
        let new_first = claimed.iter().map(|c| c.lease.as_str()).min();
        let first = [first_lease, new_first].into_iter().flatten().min();
        hints.inflight = Some(first.map(|lease| key_time(INFLIGHT_PREFIX, lease)));
    }
    schedule_next_with(store, now, alarm, hints)?;
    Ok(claimed)
}

/// While deliveries run, the alarm is kept at most this far ahead (ms), so that an instance
/// that dies with deliveries in flight (a crash, a restart, an eviction) has a successor
/// woken by its alarm within this time, which finds their claims no longer live and
/// delivers them again at once, instead of at their lease deadline
/// (`QUEUE_DELIVERY_TIMEOUT_MS`, 5 minutes by default). Without it nothing wakes the
/// successor when every run waits on those deliveries: no call comes, and the alarm is
/// that deadline (the chaos test's stall, `docs/testing.md`).
pub const HEARTBEAT_MS: i64 = 5_000;

/// The alarm a delivery loop keeps: `want` (its next due time or in-flight deadline, `None`
/// for none), no later than [`HEARTBEAT_MS`] from `now` while deliveries run.
pub fn with_heartbeat(want: Option<i64>, now: i64, running: bool) -> Option<i64> {
    if !running {
        return want;
    }
    let beat = now.saturating_add(HEARTBEAT_MS);
    Some(want.map_or(beat, |w| w.min(beat)))
}

/// The alarm change a queue call (not the loop: an `enqueue` deduplicated, `rearmAlarm`,
/// `expireRun`, ...) leaves: while deliveries run, no later than [`with_heartbeat`]'s beat,
/// and while claims a dead instance left wait for recovery, no later than the alarm armed
/// to recover them (`recovery`). Those calls schedule the queue's exact next wake-up — with
/// deliveries in flight and nothing due, the first lease's deadline, 5 minutes out — and
/// that write replaced the beat or the recovery alarm: a kill right after one, or a fresh
/// instance whose only calls were such, left the claims undelivered (the chaos stalls,
/// `docs/testing.md`). No change stays no change.
pub fn call_alarm_change(change: Option<AlarmChange>, now: i64, running: bool, recovery: Option<i64>) -> Option<AlarmChange> {
    let want = match (with_heartbeat(change?.time(), now, running), recovery) {
        (Some(at), Some(r)) => Some(at.min(r)),
        (at, None) => at,
        (None, r) => r,
    };
    Some(AlarmChange::to(want))
}

/// The deadline in a lease key (0 when it cannot be read).
pub fn lease_deadline(lease: &str) -> i64 {
    key_deadline(lease)
}

/// The deadline in a lease key.
fn key_deadline(lease: &str) -> i64 {
    lease.get(INFLIGHT_PREFIX.len()..INFLIGHT_PREFIX.len() + 13).and_then(|d| d.parse().ok()).unwrap_or(0)
}

/// What [`compact_fences`] did and saw.
struct FenceScan {
    /// More entries are due than one pass compacts.
    more: bool,
    /// The time of the first entry left, when known without another list.
    next: Option<Option<i64>>,
}

/// Step 1: compact up to [`PAGE`] due fence-compaction entries (delete the entry, and the
/// fence when its `compactAt` is the entry's). Usually none is due, which the first entry
/// shows (and its time is the next fence wake-up); only then are the due ones listed.
///
/// `known` is the first entry's key when a previous claim saw it (and no write under the
/// prefix has happened since): then it is not listed again. Updated to what this claim
/// leaves: the first key when nothing was due, unknown after a compaction.
fn compact_fences(store: &mut dyn Store, now: i64, known: &mut Option<Option<String>>) -> Result<FenceScan, RpcError> {
    let end = format!("{FENCE_GC_PREFIX}{}", pad(now.saturating_add(1)));
    let first = match known.take() {
        Some(first) => first,
        None => store.list_keys(&ListOptions::prefix(FENCE_GC_PREFIX).limit(1))?.into_iter().next(),
    };
    match first {
        None => {
            *known = Some(None);
            return Ok(FenceScan { more: false, next: Some(None) });
        }
        Some(key) if key >= end => {
            let next = key_time(FENCE_GC_PREFIX, &key);
            *known = Some(Some(key));
            return Ok(FenceScan { more: false, next: Some(Some(next)) });
        }
        Some(_) => {}
    }
    let due = store.list(&ListOptions::prefix(FENCE_GC_PREFIX).end(end).limit(PAGE + 1))?;
    for (key, text) in due.iter().take(PAGE) {
        store.delete(key)?;
        let entry = decode_entry(key, text)?;
        let run_id = to_js_string(entry.get("runId"));
        let compact_at = entry.get("compactAt").and_then(Value::as_f64).map(clamp_time);
        if let Some(fence) = Fence::read(store, &run_id)? {
            if fence.compact_at.is_some() && fence.compact_at == compact_at {
                store.delete(&expired_key(&run_id))?;
            }
        }
    }
    Ok(FenceScan { more: due.len() > PAGE, next: None })
}

/// What [`convert_legacy_claims`] saw.
#[derive(Debug)]
struct Legacy {
    /// More remain than one pass converts.
    more: bool,
    /// There were none.
    none: bool,
}

/// Step 2: convert up to [`PAGE`] 0.3 claims `inflight:<id>` = deadline into
/// `inflight-deadline:<pad(deadline)>:<id>` (and their run references), so messages
/// claimed before the upgrade are recovered like any other claim.
fn convert_legacy_claims(store: &mut dyn Store) -> Result<Legacy, RpcError> {
    let legacy = store.list(&ListOptions::prefix(LEGACY_INFLIGHT_PREFIX).limit(PAGE + 1))?;
    for (key, text) in legacy.iter().take(PAGE) {
        store.delete(key)?;
        let message_id = key.get(LEGACY_INFLIGHT_PREFIX.len()..).unwrap_or("");
        let Some(row) = get_row(store, message_id)? else { continue };
        // A deadline we cannot read counts as passed.
        let deadline = decode_entry(key, text).ok().and_then(|v| v.as_f64()).map_or(0, clamp_time);
        let lease = inflight_key(deadline, message_id);
        put_value(store, &lease, &Value::str(message_id))?;
        put_run_reference(store, &row, Slot::Inflight(&lease))?;
    }
    Ok(Legacy { more: legacy.len() > PAGE, none: legacy.is_empty() })
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
        ("x-vqs-message-attempt", number_to_string(row.next_delivery_attempt())),
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
    /// A 429 answer (the app refuses more work for now), with its `Retry-After` header.
    Refused { retry_after: Option<String> },
}

/// Whether the classification needs the response body of this status.
pub fn needs_body(status: u16) -> bool {
    // 503 for its `timeoutSeconds`; every other failure for the excerpt kept with the
    // message (`lastAnswer`, the operator console's).
    !(200..=299).contains(&status) && status != 429 && !PERMANENT_STATUSES.contains(&status)
}

/// The most of a failed answer's body the shell keeps (a courier reports it to its shard).
pub const MAX_ANSWER_BODY_BYTES: usize = 65_536;

/// The start of a failed answer's body as kept with the message ([`LAST_ANSWER`]): at most
/// [`ANSWER_EXCERPT_CHARS`] characters of its text (invalid UTF-8 replaced, control
/// characters as spaces), `None` when there is none.
pub fn answer_excerpt(body: Option<&[u8]>) -> Option<String> {
    let text = String::from_utf8_lossy(body?);
    let excerpt: String = text.trim().chars().take(ANSWER_EXCERPT_CHARS).map(|c| if c.is_control() { ' ' } else { c }).collect();
    (!excerpt.is_empty()).then_some(excerpt)
}

/// What to do with a delivered message (§4.2 table).
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// 2xx, or a permanent failure (404/409/410/422): done.
    Ack,
    /// 503 with a numeric `timeoutSeconds`: due again after it, no attempt consumed.
    Redeliver { timeout_seconds: f64 },
    /// 429 (our extension; the reference retries it like a failure): the app refused the
    /// message unseen, so it is due again after `delay_ms` (its `Retry-After`, see
    /// [`refusal_delay_ms`]) with no attempt consumed, and never reaches the
    /// dead letters. The shell's pace lowers the shard's concurrency meanwhile.
    Refused { delay_ms: i64 },
    /// Anything else: one attempt consumed, backoff or dead letter. `answer`: the start of
    /// the answer's body ([`answer_excerpt`]), kept with the message for the console.
    Retry { reason: String, answer: Option<String> },
}

/// `timeoutSeconds` of a 503 body when the body parses as JSON and it is a number.
fn timeout_seconds(body: &[u8]) -> Option<f64> {
    let text = String::from_utf8_lossy(body.strip_prefix(&[0xEF, 0xBB, 0xBF]).unwrap_or(body));
    let parsed: serde_json::Value = serde_json::from_str(&text).ok()?;
    parsed.as_object()?.get("timeoutSeconds")?.as_f64()
}

pub fn classify(outcome: &Outcome) -> Action {
    match outcome {
        Outcome::Transport(error) => Action::Retry { reason: format!("transport error: {error}"), answer: None },
        Outcome::Refused { retry_after } => Action::Refused { delay_ms: refusal_delay_ms(retry_after.as_deref()) },
        Outcome::Response { status: 429, .. } => Action::Refused { delay_ms: refusal_delay_ms(None) },
        Outcome::Response { status, .. } if (200..=299).contains(status) => Action::Ack,
        Outcome::Response { status: 503, body } => match body.as_deref().and_then(timeout_seconds) {
            Some(timeout_seconds) => Action::Redeliver { timeout_seconds },
            None => Action::Retry { reason: "HTTP 503".into(), answer: answer_excerpt(body.as_deref()) },
        },
        Outcome::Response { status, .. } if PERMANENT_STATUSES.contains(status) => Action::Ack,
        Outcome::Response { status, body } => Action::Retry { reason: format!("HTTP {status}"), answer: answer_excerpt(body.as_deref()) },
    }
}

/// How long to wait before delivering a refused (429) message again: the app's
/// `Retry-After` in delta-seconds (clamped to 1 s … 300 s), else 1 s (an HTTP-date is not
/// read).
pub fn refusal_delay_ms(retry_after: Option<&str>) -> i64 {
    const DEFAULT_MS: i64 = 1_000;
    const MAX_MS: i64 = 300_000;
    retry_after
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map_or(DEFAULT_MS, |s| ((s * 1000.0) as i64).clamp(DEFAULT_MS, MAX_MS))
}

/// The delay of an [`Action::Refused`] (0 for any other action).
fn refused_delay(action: &Action) -> i64 {
    match action {
        Action::Refused { delay_ms } => *delay_ms,
        _ => 0,
    }
}

/// What [`settle`] did (for logs and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    Acked,
    Redelivering,
    Retrying,
    DeadLettered,
    /// The run expired while the message was in flight (its run DO says so, or the queue
    /// fenced it): gone, not dead-lettered.
    Purged,
    /// The lease was gone (the claim was recovered or purged meanwhile): nothing changed.
    Stale,
}

/// Delete the message and everything pointing at it (its claim is already deleted).
fn purge(store: &mut dyn Store, row: &Row) -> Result<(), RpcError> {
    let id = row.id();
    store.delete(&msg_key(&id))?;
    if let Some(run_id) = row.run_id() {
        store.delete(&run_ref_key(&run_id, &id))?;
    }
    release_claim(store, row.member("idempotencyKey"), row.member("messageId"))
}

/// Drop a claimed message of an expired run without delivering it (checked right before
/// the POST). One transaction.
pub fn drop_expired(store: &mut dyn Store, now: i64, claimed: &Claimed, rearm: Rearm, alarm: &mut Alarm) -> Result<Settled, RpcError> {
    if store.get(&claimed.lease)?.is_none() {
        return Ok(Settled::Stale);
    }
    store.delete(&claimed.lease)?;
    purge(store, &claimed.row)?;
    rearm.apply(store, now, None, alarm)?;
    Ok(Settled::Purged)
}

/// How a settle (or an expired drop) re-arms the alarm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rearm {
    /// "Schedule next" (§6): the exact next wake-up, read from storage (four lists).
    Exact,
    /// Earlier only: arm at most the time of the due entry the settle wrote (a retry, a
    /// 503 redelivery), else leave the alarm. For the shell's delivery loop, which keeps
    /// the alarm no later than the exact one and claims (computing it exactly) right after
    /// each settle.
    Earlier,
}

impl Rearm {
    fn apply(self, store: &mut dyn Store, now: i64, scheduled: Option<i64>, alarm: &mut Alarm) -> StoreResult<()> {
        match (self, scheduled) {
            (Rearm::Exact, _) => schedule_next(store, now, alarm),
            (Rearm::Earlier, Some(at)) => {
                arm_at_most(at, now, alarm);
                Ok(())
            }
            (Rearm::Earlier, None) => Ok(()),
        }
    }
}

/// Commit the outcome of one delivery of a claimed message. One transaction. `lifecycle`
/// is what the run DO said before a retry or 503 rescheduling (see [`super::driver`]);
/// `rearm` says how the alarm follows ([`Rearm`]).
// Each argument is a separate input of the step: the delivery (claim, action, lifecycle
// answer), the clock, the config, and the alarm with how to re-arm it.
#[allow(clippy::too_many_arguments)]
pub fn settle(
    store: &mut dyn Store,
    now: i64,
    config: &Config,
    claimed: &Claimed,
    action: &Action,
    lifecycle: &Lifecycle,
    rearm: Rearm,
    alarm: &mut Alarm,
) -> Result<Settled, RpcError> {
    let row = &claimed.row;
    // The time of the due entry this settle writes, if any.
    let mut scheduled = None;
    if store.get(&claimed.lease)?.is_none() {
        return Ok(Settled::Stale);
    }
    store.delete(&claimed.lease)?;
    let id = row.id();
    let settled = match action {
        Action::Ack => {
            store.delete(&msg_key(&id))?;
            release_claim(store, row.member("idempotencyKey"), row.member("messageId"))?;
            if let Some(run_id) = row.run_id() {
                store.delete(&run_ref_key(&run_id, &id))?;
            }
            Settled::Acked
        }
        _ if row_run_expired(store, row, lifecycle)? => {
            purge(store, row)?;
            Settled::Purged
        }
        Action::Redeliver { .. } | Action::Refused { .. } => {
            let at = match action {
                Action::Redeliver { timeout_seconds } => clamp_time(now as f64 + timeout_seconds * 1000.0),
                _ => now.saturating_add(refused_delay(action)),
            };
            scheduled = Some(at);
            let schedule = due_key(at, &id);
            put_value(store, &schedule, &Value::str(id.as_str()))?;
            put_run_reference(store, row, Slot::Due(&schedule))?;
            Settled::Redelivering
        }
        Action::Retry { reason, answer } => {
            let attempt = row.attempt() + 1.0;
            let mut updated = row.clone();
            updated.set("attempt", Value::num(attempt));
            updated.set("lastError", Value::str(reason.as_str()));
            match answer {
                Some(text) => updated.set(LAST_ANSWER, Value::str(text.as_str())),
                None => updated.remove(LAST_ANSWER),
            }
            if attempt >= f64::from(config.queue_max_attempts) {
                updated.set("failedAt", Value::num(now as f64));
                let dead_key = dlq_key(now, &id);
                put_value(store, &dead_key, &updated.to_value())?;
                store.delete(&msg_key(&id))?;
                release_claim(store, row.member("idempotencyKey"), row.member("messageId"))?;
                put_run_reference(store, row, Slot::Dlq(&dead_key))?;
                Settled::DeadLettered
            } else {
                let at = clamp_time(now as f64 + backoff_seconds(attempt) * 1000.0);
                scheduled = Some(at);
                let schedule = due_key(at, &id);
                put_value(store, &msg_key(&id), &updated.to_value())?;
                put_value(store, &schedule, &Value::str(id.as_str()))?;
                put_run_reference(store, row, Slot::Due(&schedule))?;
                Settled::Retrying
            }
        }
    };
    rearm.apply(store, now, scheduled, alarm)?;
    Ok(settled)
}
