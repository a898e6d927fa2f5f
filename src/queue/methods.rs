//! The QueueDO RPC methods (queue-do.md §3 and §5). Each runs inside one storage
//! transaction with one clock reading (`ctx.now`).
//!
//! Calls no other object.

use crate::protocol::hop::{Args, Ctx};
use crate::store::alarm::Alarm;
use crate::store::page::{fetch_text, list_budgeted, RESPONSE_BUDGET_BYTES};
use crate::store::{ListOptions, Store};
use crate::wire::js::{member, optional_member, strict_eq, to_js_string, to_number, truthy};
use crate::wire::{Map, RpcError, Value};

use super::admin::LAST_ANSWER;
use super::delivery::{with_heartbeat, Claimed, Handoff};
use super::state::*;

fn ok_outcome(message_id: Option<&Value>, deduped: bool) -> Value {
    let mut m = Map::new();
    m.insert("ok".into(), Value::Bool(true));
    if let Some(id) = message_id {
        m.insert("messageId".into(), id.clone());
    }
    m.insert("deduped".into(), Value::Bool(deduped));
    Value::Object(m)
}

fn failure(code: &str, message: String) -> Value {
    Value::object([("ok", Value::Bool(false)), ("code", Value::str(code)), ("message", Value::str(message))])
}

/// The run a request names (`request.runId` when truthy), read without failing.
pub fn enqueue_run_id(args: Args) -> Option<String> {
    let run_id = optional_member(args.raw(0), "runId");
    truthy(run_id).then(|| to_js_string(run_id))
}

/// `enqueue(request)` (§3; spec-0.4 `queue.md` §2–3). `lifecycle` holds the run DO's
/// answer for `request.runId`, asked before this transaction. With a `handoff` from the
/// shell, a message due now is claimed here when a slot is free and nothing due waits
/// before it (see [`Handoff`]).
pub fn enqueue(
    store: &mut dyn Store,
    ctx: &Ctx,
    alarm: &mut Alarm,
    args: Args,
    lifecycle: &Lifecycle,
    handoff: Option<&mut Handoff>,
) -> Result<Value, RpcError> {
    let now = ctx.now;
    ctx.config.max_inflight()?;
    ctx.config.delivery_timeout_ms()?;
    let request = args.raw(0);
    let run_id = member(request, "runId")?;

    // 1. Expired: the run DO said so, or the queue's fence exists.
    if truthy(run_id) && run_expired(store, &to_js_string(run_id), lifecycle)? {
        return Ok(failure("RUN_EXPIRED", format!("Workflow run \"{}\" has expired", to_js_string(run_id))));
    }

    // 2. Shard-count pinning (the target URL is not pinned).
    let config = member(request, "config")?;
    match get_value(store, CFG_KEY)? {
        None => pin(store, config, now)?,
        Some(pinned) => {
            let given = member(config, "queueShards")?;
            let pinned_shards = pinned.get("queueShards");
            if !strict_eq(pinned_shards, given) {
                return Ok(failure(
                    "CONFIG_MISMATCH",
                    format!(
                        "queue cell shard-count mismatch: pinned {}, got {} \u{2014} changing queueShards requires draining the fleet",
                        to_js_string(pinned_shards),
                        to_js_string(given)
                    ),
                ));
            }
        }
    }

    // 3. Dedup by idempotency key.
    let message_id = member(request, "messageId")?;
    let idempotency_key = member(request, "idempotencyKey")?;
    if truthy(idempotency_key) {
        let key = dedup_key(&to_js_string(idempotency_key));
        let existing = get_value(store, &key)?;
        if truthy(existing.as_ref()) {
            if store.get(&msg_key(&to_js_string(existing.as_ref())))?.is_some() {
                schedule_next(store, now, alarm)?;
                return Ok(ok_outcome(existing.as_ref(), true));
            }
            store.delete(&key)?; // stale claim: the message is gone
        }
        match message_id {
            Some(id) => put_value(store, &key, id)?,
            None => {
                store.delete(&key)?;
            }
        }
    }

    // 4. The row, with exactly the members the producer sent.
    let mut row = Row(Map::new());
    for name in ["messageId", "queueName", "pathname", "body", "runId"] {
        if let Some(v) = member(request, name)? {
            row.set(name, v.clone());
        }
    }
    if let Some(url) = member(config, "targetBaseUrl")? {
        row.set("targetBaseUrl", url.clone());
    }
    if let Some(k) = idempotency_key {
        row.set("idempotencyKey", k.clone());
    }
    row.set("attempt", Value::num(0.0));
    row.set("enqueuedAt", Value::num(now as f64));

    // 5. Schedule. `Math.max(0, delaySeconds ?? 0)`; a non-numeric delay counts as 0.
    let delay = match member(request, "delaySeconds")? {
        None | Some(Value::Null) => 0.0,
        Some(v) => to_number(Some(v)),
    };
    let delay = if delay.is_nan() { 0.0 } else { delay.max(0.0) };
    let due_at = clamp_time(now as f64 + delay * 1000.0);
    let id = row.id();
    put_value(store, &msg_key(&id), &row.to_value())?;
    let outcome = ok_outcome(row.member("messageId"), false);
    if let Some(handoff) = handoff {
        if due_at <= now && handoff.live < ctx.config.max_inflight()? as usize && !due_waiting(store, now)? {
            // Claimed at once, as the claim would (same deadline); the shell delivers it.
            let deadline = clamp_time(now as f64 + ctx.config.delivery_timeout_ms()? as f64 + INFLIGHT_GRACE_MS as f64);
            let lease = inflight_key(deadline, &id);
            put_value(store, &lease, &Value::str(id.as_str()))?;
            put_run_reference(store, &row, Slot::Inflight(&lease))?;
            // A running loop takes it; otherwise the alarm starts one. Either way the alarm
            // is at most the loop's heartbeat (`with_heartbeat`; never the lease's deadline,
            // 5 minutes out), which recovers the message soon if this instance dies. (While
            // an alarm handler runs, the platform reads no alarm: this call may be the one
            // that writes it.)
            let beat = with_heartbeat(Some(deadline), now, true).unwrap_or(deadline);
            arm_at_most(if handoff.looping { beat } else { now }, now, alarm);
            handoff.claimed = Some(Claimed { row, lease });
            return Ok(outcome);
        }
    }
    let schedule = due_key(due_at, &id);
    put_value(store, &schedule, &Value::str(id.as_str()))?;
    put_run_reference(store, &row, Slot::Due(&schedule))?;

    // 6. Arm at most.
    arm_at_most(due_at, now, alarm);
    Ok(outcome)
}

/// Whether a `due:` entry is due at `now`: a message waiting for a slot, which a message
/// enqueued now must not overtake.
fn due_waiting(store: &mut dyn Store, now: i64) -> Result<bool, RpcError> {
    let end = format!("{DUE_PREFIX}{}", pad(now.saturating_add(1)));
    Ok(store.list_keys(&ListOptions::prefix(DUE_PREFIX).limit(1))?.first().is_some_and(|k| *k < end))
}

fn count(store: &mut dyn Store, prefix: &str) -> Result<usize, RpcError> {
    Ok(store.list(&ListOptions::prefix(prefix))?.len())
}

/// `stats()` (§5).
pub fn stats(store: &mut dyn Store, alarm: &Alarm) -> Result<Value, RpcError> {
    let pending = count(store, DUE_PREFIX)?;
    // 0.3 claims not yet converted are in flight too.
    let inflight = count(store, INFLIGHT_PREFIX)? + count(store, LEGACY_INFLIGHT_PREFIX)?;
    let dead = count(store, DLQ_PREFIX)?;
    Ok(Value::object([
        ("pending", Value::num(pending as f64)),
        ("inflight", Value::num(inflight as f64)),
        ("deadLetters", Value::num(dead as f64)),
        ("alarmAt", alarm.get().map_or(Value::Null, |t| Value::num(t as f64))),
    ]))
}

/// `listDeadLetters({limit?, cursor?}?)` (§5).
pub fn list_dead_letters(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let params = args.raw(0);
    let limit = match optional_member(params, "limit") {
        None | Some(Value::Null) => 100.0,
        Some(v) => to_number(Some(v)),
    };
    // The platform's list converts `limit + 1` to an integer and refuses values below 1.
    let list_limit = (limit + 1.0).trunc();
    if list_limit.is_nan() || list_limit < 1.0 {
        return Err(RpcError::list_limit());
    }
    let mut options = ListOptions::prefix(DLQ_PREFIX);
    // A `null` cursor is used as the string "null" (startAfter: String(cursor)).
    if let Some(cursor) = optional_member(params, "cursor") {
        options = options.start_after(to_js_string(Some(cursor)));
    }
    // At most RESPONSE_BUDGET_BYTES of dead letters beyond the first, however large the
    // limit: a page the budget cut short has `hasMore` and the cursor of its last entry.
    let want = if list_limit < 1e15 { Some(list_limit as usize) } else { None };
    let page = list_budgeted(store, &options, want, RESPONSE_BUDGET_BYTES, fetch_text, String::len)?;
    let entries = page.entries;
    let page_len = if limit <= 0.0 { 0 } else { (limit.trunc() as usize).min(entries.len()) };
    let has_more = page.truncated || (entries.len() as f64) > limit;
    let mut data = Vec::with_capacity(page_len);
    for (key, text) in entries.iter().take(page_len) {
        // The rows as the producer sent them (and the reference echoes them): without the
        // console's excerpt.
        let mut row = decode_entry(key, text)?;
        if let Value::Object(members) = &mut row {
            members.remove(LAST_ANSWER);
        }
        data.push(row);
    }
    let mut out = Map::new();
    out.insert("data".into(), Value::Array(data));
    if has_more {
        // `page.at(-1)`: undefined (member omitted) for an empty page.
        if let Some((key, _)) = page_len.checked_sub(1).and_then(|i| entries.get(i)) {
            out.insert("cursor".into(), Value::str(key.as_str()));
        }
    } else {
        out.insert("cursor".into(), Value::Null);
    }
    out.insert("hasMore".into(), Value::Bool(has_more));
    Ok(Value::Object(out))
}

/// The dead letter `redriveDeadLetter(messageId)` names: its key and row.
fn find_dead_letter(store: &mut dyn Store, wanted: Option<&Value>) -> Result<Option<(String, Row)>, RpcError> {
    for (key, text) in store.list(&ListOptions::prefix(DLQ_PREFIX))? {
        let dead = Row::from_value(&key, decode_entry(&key, &text)?)?;
        if strict_eq(dead.member("messageId"), wanted) {
            return Ok(Some((key, dead)));
        }
    }
    Ok(None)
}

/// The run of the dead letter `redriveDeadLetter` names (read before the run DO is asked).
pub fn redrive_run_id(store: &mut dyn Store, args: Args) -> Result<Option<String>, RpcError> {
    Ok(find_dead_letter(store, args.raw(0))?.and_then(|(_, row)| row.run_id()))
}

/// `redriveDeadLetter(messageId)` (§5). A dead letter of an expired run is deleted with
/// its run reference instead (`{ok:false}`).
pub fn redrive_dead_letter(
    store: &mut dyn Store,
    ctx: &Ctx,
    alarm: &mut Alarm,
    args: Args,
    lifecycle: &Lifecycle,
) -> Result<Value, RpcError> {
    let now = ctx.now;
    let not_ok = || Ok(Value::object([("ok", Value::Bool(false))]));
    if let Some((key, dead)) = find_dead_letter(store, args.raw(0))? {
        if row_run_expired(store, &dead, lifecycle)? {
            store.delete(&key)?;
            if let Some(run_id) = dead.run_id() {
                store.delete(&run_ref_key(&run_id, &dead.id()))?;
            }
            return not_ok();
        }
        let mut row = dead;
        row.remove("failedAt");
        row.remove("lastError");
        row.remove(LAST_ANSWER);
        row.remove(LOST_DELIVERIES);
        row.set("attempt", Value::num(0.0));

        if let Some(k) = row.idempotency_key() {
            let dkey = dedup_key(&k);
            let holder = get_value(store, &dkey)?;
            let other = truthy(holder.as_ref()) && !strict_eq(holder.as_ref(), row.member("messageId"));
            if other && store.get(&msg_key(&to_js_string(holder.as_ref())))?.is_some() {
                return not_ok();
            }
            if other {
                store.delete(&dkey)?;
            }
            match row.member("messageId") {
                Some(id) => put_value(store, &dkey, id)?,
                None => {
                    store.delete(&dkey)?;
                }
            }
        }

        let id = row.id();
        put_value(store, &msg_key(&id), &row.to_value())?;
        let schedule = due_key(now, &id);
        put_value(store, &schedule, &Value::str(id.as_str()))?;
        store.delete(&key)?;
        put_run_reference(store, &row, Slot::Due(&schedule))?;
        arm_at_most(now, now, alarm);
        return Ok(Value::object([("ok", Value::Bool(true))]));
    }
    not_ok()
}

/// `purgeDeadLetters()` → `{purged, hasMore}` (spec-0.4 `queue.md` §5): at most [`PAGE`]
/// dead letters (and their run references) per call; arguments are ignored.
pub fn purge_dead_letters(store: &mut dyn Store) -> Result<Value, RpcError> {
    let entries = store.list(&ListOptions::prefix(DLQ_PREFIX).limit(PAGE + 1))?;
    let page = entries.len().min(PAGE);
    for (key, text) in entries.iter().take(page) {
        store.delete(key)?;
        let dead = decode_entry(key, text)?;
        if truthy(dead.get("runId")) {
            store.delete(&run_ref_key(&to_js_string(dead.get("runId")), &to_js_string(dead.get("messageId"))))?;
        }
    }
    Ok(Value::object([("purged", Value::num(page as f64)), ("hasMore", Value::Bool(entries.len() > PAGE))]))
}

/// `v` with every invalid Date replaced by `null` (what `Date#toJSON` gives).
pub fn without_invalid_dates(v: &Value) -> Value {
    match v {
        Value::Date(None) => Value::Null,
        Value::Array(items) => Value::Array(items.iter().map(without_invalid_dates).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), without_invalid_dates(v))).collect()),
        other => other.clone(),
    }
}

/// `rearmAlarm()` (§5).
pub fn rearm_alarm(store: &mut dyn Store, ctx: &Ctx, alarm: &mut Alarm) -> Result<Value, RpcError> {
    schedule_next(store, ctx.now, alarm)?;
    Ok(Value::object([("alarmAt", alarm.get().map_or(Value::Null, |t| Value::num(t as f64)))]))
}

/// `expireRun(runId, expiredAt, options?)`: purge the run's pending, in-flight and dead
/// messages and fence the run.
///
/// * **Paged** (spec-0.4 `queue.md` §5) when `options` is given or the run's fence was
///   written by a paged call: at most `clamp(options.limit, 1..64)` (default 64)
///   references per call → `{deleted, done:false}` or `{deleted, done:true, receipt}`,
///   `deleted` cumulative; the fence keeps its first `expiredAt` and its `compactAt`.
/// * **0.3** otherwise (`../spec/queue-do.md` §5, the 0.3 golden rows): every reference in
///   one call → `{deleted}`, and the fence has no `compactAt` (read as `null`).
pub fn expire_run(store: &mut dyn Store, ctx: &Ctx, alarm: &mut Alarm, args: Args) -> Result<Value, RpcError> {
    let run_id = to_js_string(args.raw(0));
    let previous = Fence::read(store, &run_id)?;
    let options = args.present(2);
    let paged = options.is_some() || previous.as_ref().is_some_and(|f| f.paged);
    let limit = if paged { Some(expire_limit(options)) } else { None };

    let prefix = format!("{RUN_PREFIX}{run_id}:");
    let list = match limit {
        Some(l) => ListOptions::prefix(prefix).limit(l + 1),
        None => ListOptions::prefix(prefix),
    };
    let references = store.list(&list)?;
    let page = limit.map_or(references.len(), |l| references.len().min(l));
    for (key, text) in references.iter().take(page) {
        let reference = decode_entry(key, text)?;
        let message_id = to_js_string(reference.get("messageId"));
        store.delete(&msg_key(&message_id))?;
        store.delete(&legacy_inflight_key(&message_id))?;
        for slot in ["inflightKey", "dueKey", "dlqKey"] {
            if truthy(reference.get(slot)) {
                store.delete(&to_js_string(reference.get(slot)))?;
            }
        }
        release_claim(store, reference.get("idempotencyKey"), reference.get("messageId"))?;
        store.delete(key)?;
    }
    let deleted = previous.as_ref().map_or(0.0, |f| f.deleted) + page as f64;
    // An invalid Date is kept as `null`, as `JSON.stringify` keeps it in the reference
    // (instead of failing the call after the purge).
    let given_at = args.raw(1).map(without_invalid_dates);
    let fence = Fence {
        expired_at: match (&previous, paged) {
            (Some(p), true) => p.expired_at.clone(),
            _ => given_at,
        },
        deleted,
        compact_at: previous.as_ref().and_then(|f| f.compact_at),
        paged,
    };
    fence.write(store, &run_id)?;
    schedule_next(store, ctx.now, alarm)?;
    if !paged {
        return Ok(Value::object([("deleted", Value::num(deleted))]));
    }
    let done = references.len() <= page;
    let mut out = Map::new();
    out.insert("deleted".into(), Value::num(deleted));
    out.insert("done".into(), Value::Bool(done));
    if done {
        out.insert("receipt".into(), fence.receipt());
    }
    Ok(Value::Object(out))
}

/// Pin the cell to `config`'s `queueShards` (absent: pinned without one), as its first
/// enqueue does.
fn pin(store: &mut dyn Store, config: Option<&Value>, now: i64) -> Result<(), RpcError> {
    let mut cfg = Map::new();
    if let Some(shards) = member(config, "queueShards")? {
        cfg.insert("queueShards".into(), shards.clone());
    }
    cfg.insert("pinnedAt".into(), Value::num(now as f64));
    put_value(store, CFG_KEY, &Value::Object(cfg))
}

/// `pinShards(config)` → `{cell}`: the cell's pinned configuration, pinned to `config`'s
/// `queueShards` first when nothing is (as an enqueue would). Internal (the router routes
/// no such name): partition 0 of a client shard keeps the pin for all of its partitions;
/// another partition asks it before its first enqueue and keeps the answer
/// ([`adopt_pin`]), so an enqueue with another shard count is refused on every partition,
/// as one object refuses it (`crate::protocol::partition`).
pub fn pin_shards(store: &mut dyn Store, ctx: &Ctx, args: Args) -> Result<Value, RpcError> {
    if get_value(store, CFG_KEY)?.is_none() {
        pin(store, args.raw(0), ctx.now)?;
    }
    Ok(Value::object([("cell", get_value(store, CFG_KEY)?.unwrap_or(Value::Null))]))
}

/// `adoptPin(cell)` → `{pinned}`: keep partition 0's pinned configuration (a `pinShards`
/// answer) as this instance's unless it has one (`pinned`: whether it had).
pub fn adopt_pin(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let had = get_value(store, CFG_KEY)?.is_some();
    match args.raw(0) {
        Some(cell @ Value::Object(_)) if !had => put_value(store, CFG_KEY, cell)?,
        _ => {}
    }
    Ok(Value::object([("pinned", Value::Bool(had))]))
}

/// `expireReceipt(runId)` → `{receipt}`: the run's fence as `expireRun` gave it
/// (`{expiredAt, deleted}`), `null` without one. Read only. Not a wire method (the router
/// routes no such name): the partitioned queue's `acknowledgeExpireRun` reads each
/// partition's with it (`crate::partitions`).
pub fn expire_receipt(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let fence = Fence::read(store, &to_js_string(args.raw(0)))?;
    Ok(Value::object([("receipt", fence.map_or(Value::Null, |f| f.receipt()))]))
}

/// `clamp(options.limit, 1..64)`, default 64 (a non-numeric limit counts as absent).
fn expire_limit(options: Option<&Value>) -> usize {
    let raw = optional_member(options, "limit").map(|v| to_number(Some(v))).filter(|n| !n.is_nan());
    raw.map_or(EXPIRE_PAGE, |n| n.trunc().clamp(1.0, EXPIRE_PAGE as f64) as usize)
}

/// `acknowledgeExpireRun(runId, receipt)` → `{acknowledged}` (spec-0.4 `queue.md` §5): no
/// fence → `true` (already compacted); a receipt that differs from the fence → `false`;
/// else the fence becomes compactable [`FENCE_COMPACTION_GRACE_MS`] from now (once).
pub fn acknowledge_expire_run(store: &mut dyn Store, ctx: &Ctx, alarm: &mut Alarm, args: Args) -> Result<Value, RpcError> {
    let run_id = to_js_string(args.raw(0));
    let acknowledged = |v: bool| Ok(Value::object([("acknowledged", Value::Bool(v))]));
    let Some(mut fence) = Fence::read(store, &run_id)? else { return acknowledged(true) };
    let receipt = args.raw(1);
    let same_at = strict_eq(optional_member(receipt, "expiredAt"), fence.expired_at.as_ref());
    let same_count = optional_member(receipt, "deleted").and_then(Value::as_f64) == Some(fence.deleted);
    if !same_at || !same_count {
        return acknowledged(false);
    }
    if fence.compact_at.is_none() {
        let compact_at = ctx.now.saturating_add(FENCE_COMPACTION_GRACE_MS);
        fence.compact_at = Some(compact_at);
        fence.paged = true;
        fence.write(store, &run_id)?;
        let entry = Value::object([("runId", Value::str(run_id.as_str())), ("compactAt", Value::num(compact_at as f64))]);
        put_value(store, &fence_gc_key(compact_at, &run_id), &entry)?;
    }
    schedule_next(store, ctx.now, alarm)?;
    acknowledged(true)
}
