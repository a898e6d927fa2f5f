//! Retention (spec-0.4 `retention.md`): the cleanup record's admin methods, maximum-age
//! enforcement, and the paged phase machine. Scheduling on a terminal `applyEvent` lives in
//! [`super::retention`]; the fences that keep an expired run unreadable in [`super::fence`].
//!
//! Everything here is synchronous storage work, one transaction per function. The pages
//! that call other Durable Objects (index, streams, queues, terminal hook releases) are
//! driven by [`driver`], which alternates these transactions with the calls through a
//! [`driver::CleanupHost`] that the wasm shell (or a native test) provides.
//!
//! Dual-version rules (spec-0.4 README, proposed design): records carry the 0.4 members
//! (`status`, `reason`, `generation`; a missing generation reads as 0) and are **kept**
//! after tombstoning, embedded in the tombstone as well, so `getCleanupStatus`,
//! `scheduleCleanup` and `rearmCleanup` answer with the final record as 0.3 did.
//!
//! Calls no other object: that is [`driver`]'s, through its host.

pub mod driver;
pub mod index_phase;
pub mod phases;
mod record;
pub mod terminal;

pub use record::{CleanupArgs, Phase};

use super::keys;
use super::records::{cleanup_record, generation, is_terminal_run_status, stamp_run_state, Reason, Record};
use crate::store::alarm::Alarm;
use crate::store::{get_json, Store};
use crate::wire::js::time_clip;
use crate::wire::{RpcError, Value};

/// `getCleanupStatus()`: the record; else the tombstone's embedded record; else `null`.
pub fn get_status(store: &mut dyn Store) -> Result<Value, RpcError> {
    if let Some(record) = Record::load(store, keys::RETENTION_CLEANUP)? {
        return Ok(record.into_value());
    }
    let tombstone = Record::load(store, keys::RETENTION_TOMBSTONE)?;
    Ok(tombstone.and_then(|t| t.get("cleanup").cloned()).unwrap_or(Value::Null))
}

/// `scheduleCleanup({retentionMs, queueShards})`: explicit backfill for a terminal run.
pub fn schedule(store: &mut dyn Store, now: i64, args: &CleanupArgs, alarm: &mut Alarm) -> Result<Value, RpcError> {
    let existing = Record::load(store, keys::RETENTION_CLEANUP)?;
    // `retentionMs` that is not a positive number (NaN included) schedules nothing.
    if args.retention_ms.is_nan() || args.retention_ms <= 0.0 {
        return Ok(existing.map_or(Value::Null, Record::into_value));
    }
    if let Some(record) = existing {
        return Ok(record.into_value());
    }
    if store.get(keys::RETENTION_TOMBSTONE)?.is_some() {
        return Ok(Value::Null);
    }
    let Some(run) = Record::load(store, keys::RUN)?.filter(|r| is_terminal_run_status(r.status())) else {
        return Ok(Value::Null);
    };
    let completed = run.date("completedAt").unwrap_or_default() as f64;
    let Some(due) = time_clip(completed + args.retention_ms) else {
        return Err(RpcError::range_error("Invalid time value"));
    };
    let mut run = run;
    run.0.insert("expiredAt".into(), Value::date(due));
    run.save(store, keys::RUN)?;
    // No default here (unlike scheduling inside applyEvent): an absent member stays absent.
    let record = Record(cleanup_record(&run, Reason::Manual, due, args.queue_shards.clone()));
    record.save(store, keys::RETENTION_CLEANUP)?;
    let terminal_pending = store.get(keys::TERMINAL_CLEANUP)?.is_some();
    alarm.set(if terminal_pending || due <= now { now + 1 } else { due });
    Ok(record.into_value())
}

/// `rearmCleanup()`: recover an abandoned alarm (a pending terminal cleanup first). The
/// record is returned unchanged.
pub fn rearm(store: &mut dyn Store, now: i64, alarm: &mut Alarm) -> Result<Value, RpcError> {
    let record = Record::load(store, keys::RETENTION_CLEANUP)?;
    if store.get(keys::TERMINAL_CLEANUP)?.is_some() {
        alarm.set(now + 1);
    } else {
        match record.as_ref().filter(|r| Phase::of(r) != Some(Phase::Tombstoned)) {
            None => alarm.delete(),
            Some(r) => alarm.set((now + 1).max(r.date("dueAt").unwrap_or(i64::MIN))),
        }
    }
    Ok(record.map_or(Value::Null, Record::into_value))
}

/// `cleanupNow` step 2: move `dueAt` (and the run's `expiredAt`) to now and arm the alarm,
/// unless the run is already tombstoned.
pub fn expedite(store: &mut dyn Store, now: i64, alarm: &mut Alarm) -> Result<(), RpcError> {
    let Some(mut record) = Record::load(store, keys::RETENTION_CLEANUP)? else { return Ok(()) };
    if Phase::of(&record) == Some(Phase::Tombstoned) {
        return Ok(());
    }
    record.0.insert("dueAt".into(), Value::date(now));
    record.0.insert("generation".into(), Value::num(generation(&record) + 1.0));
    record.save(store, keys::RETENTION_CLEANUP)?;
    if let Some(mut run) = Record::load(store, keys::RUN)? {
        run.0.insert("expiredAt".into(), Value::date(now));
        run.save(store, keys::RUN)?;
    }
    alarm.set(now + 1);
    Ok(())
}

/// The record's phase, if any.
pub fn current_phase(store: &mut dyn Store) -> Result<Option<Phase>, RpcError> {
    Ok(Record::load(store, keys::RETENTION_CLEANUP)?.as_ref().and_then(Phase::of))
}

/// Whether the record carries a failure of its current page (`lastError`).
pub fn has_failure(store: &mut dyn Store) -> Result<bool, RpcError> {
    Ok(Record::load(store, keys::RETENTION_CLEANUP)?.is_some_and(|r| r.get("lastError").is_some()))
}

/// `{retentionMs, queueShards, scheduledTime}` of `enforceRetention`.
#[derive(Debug, Clone, PartialEq)]
pub struct EnforceArgs {
    pub retention_ms: i64,
    pub queue_shards: i64,
    pub scheduled_time: i64,
}

const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

fn safe_integer(v: Option<&Value>) -> Option<i64> {
    match v {
        Some(Value::Number(n)) if n.is_finite() && n.trunc() == *n && n.abs() <= MAX_SAFE_INTEGER => Some(*n as i64),
        _ => None,
    }
}

impl EnforceArgs {
    pub fn parse(request: Option<&Value>) -> Result<EnforceArgs, RpcError> {
        let member = |k: &str| request.and_then(|r| r.get(k));
        let retention_ms = safe_integer(member("retentionMs"))
            .filter(|n| *n > 0)
            .ok_or_else(|| RpcError::error("world-celld retentionMs must be a positive safe integer"))?;
        let queue_shards = safe_integer(member("queueShards"))
            .filter(|n| *n > 0)
            .ok_or_else(|| RpcError::error("world-celld retention queueShards must be a positive safe integer"))?;
        let scheduled_time = safe_integer(member("scheduledTime"))
            .filter(|n| *n >= 0)
            .ok_or_else(|| RpcError::error("world-celld retention scheduledTime must be a non-negative safe integer"))?;
        Ok(EnforceArgs { retention_ms, queue_shards, scheduled_time })
    }
}

/// `enforceRetention`'s `state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enforced {
    Expired,
    Missing,
    NotDue,
    Scheduled,
}

impl Enforced {
    pub fn as_str(self) -> &'static str {
        match self {
            Enforced::Expired => "expired",
            Enforced::Missing => "missing",
            Enforced::NotDue => "not-due",
            Enforced::Scheduled => "scheduled",
        }
    }
}

/// What the `enforceRetention` transaction decided: `cleanup` is the final answer's member
/// when known now (`None`: run the inline pages, then read the status).
#[derive(Debug, Clone, PartialEq)]
pub struct EnforceOutcome {
    pub state: Enforced,
    pub cleanup: Option<Value>,
}

/// Latest deadline the platform's dates can hold (`8.64e15`).
const MAX_DATE_MS: i64 = 8_640_000_000_000_000;

/// The `enforceRetention` transaction (spec-0.4 `retention.md` §4 steps 1–6).
pub fn enforce(store: &mut dyn Store, now: i64, args: &EnforceArgs, alarm: &mut Alarm) -> Result<EnforceOutcome, RpcError> {
    if let Some(tombstone) = Record::load(store, keys::RETENTION_TOMBSTONE)? {
        let cleanup = tombstone.get("cleanup").cloned().unwrap_or(Value::Null);
        return Ok(EnforceOutcome { state: Enforced::Expired, cleanup: Some(cleanup) });
    }
    let Some(mut run) = Record::load(store, keys::RUN)? else {
        return Ok(EnforceOutcome { state: Enforced::Missing, cleanup: Some(Value::Null) });
    };
    let run_id = crate::wire::js::to_js_string(run.get("runId"));
    let due = run
        .date("createdAt")
        .and_then(|c| c.checked_add(args.retention_ms))
        .filter(|d| (d.unsigned_abs() as f64) <= MAX_SAFE_INTEGER && *d <= MAX_DATE_MS)
        .ok_or_else(|| RpcError::error(format!("world-celld retention deadline is out of range for {run_id}")))?;
    if due > args.scheduled_time {
        return Ok(EnforceOutcome { state: Enforced::NotDue, cleanup: Some(Value::Null) });
    }
    let stored_shards: Option<Value> = get_json(store, keys::RETENTION_QUEUE_SHARDS)?;
    let shards = safe_integer(stored_shards.as_ref()).filter(|n| *n > 0).unwrap_or(args.queue_shards);
    let record = match Record::load(store, keys::RETENTION_CLEANUP)? {
        None => {
            let record = Record(cleanup_record(&run, Reason::MaximumAge, due, Some(Value::num(shards as f64))));
            record.save(store, keys::RETENTION_CLEANUP)?;
            run.0.insert("expiredAt".into(), Value::date(due));
            run.save(store, keys::RUN)?;
            record
        }
        Some(mut record) if Phase::of(&record) == Some(Phase::Retained) && record.date("dueAt").is_none_or(|d| d > due) => {
            stamp_run_state(&mut record.0, &run);
            record.0.insert("reason".into(), Value::str(Reason::MaximumAge.as_str()));
            record.0.insert("dueAt".into(), Value::date(due));
            record.0.insert("generation".into(), Value::num(generation(&record) + 1.0));
            record.save(store, keys::RETENTION_CLEANUP)?;
            run.0.insert("expiredAt".into(), Value::date(due));
            run.save(store, keys::RUN)?;
            record
        }
        Some(record) => record,
    };
    alarm.set(now + 1);
    let state = if record.date("dueAt").is_some_and(|d| d <= now) { Enforced::Expired } else { Enforced::Scheduled };
    Ok(EnforceOutcome { state, cleanup: None })
}

#[cfg(test)]
mod tests;
