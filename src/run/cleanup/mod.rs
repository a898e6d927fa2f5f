//! Terminal-run retention: the cleanup record's admin methods and the phase machine
//! (spec `retention.md`). Scheduling on a terminal `applyEvent` lives in
//! [`super::retention`]; the fences that keep an expired run unreadable in
//! [`super::fence`].
//!
//! Everything here is synchronous storage work, one transaction per function. The phases
//! that call other Durable Objects (index, streams, queues) are driven by [`driver`],
//! which alternates these transactions with the DO-to-DO calls through a
//! [`driver::CleanupHost`] that the wasm shell (or a native test) provides.

pub mod driver;
pub mod index_phase;
mod phases;
mod record;

pub use phases::{change_phase, finish_queues, next_step, record_failure, store_deleted_streams, store_queue_progress, Step};
pub use record::{CleanupArgs, Phase};

use super::keys;
use super::records::{cleanup_record, is_terminal_run_status, Record};
use crate::store::alarm::Alarm;
use crate::store::Store;
use crate::wire::js::time_clip;
use crate::wire::{RpcError, Value};

/// `getCleanupStatus()`: the record or `null`.
pub fn get_status(store: &mut dyn Store) -> Result<Value, RpcError> {
    Ok(Record::load(store, keys::RETENTION_CLEANUP)?.map_or(Value::Null, Record::into_value))
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
    let mut record = cleanup_record(&run, due, args.queue_shards.clone().unwrap_or(Value::Null));
    if args.queue_shards.is_none() {
        // No default here (unlike scheduling inside applyEvent): an absent member stays absent.
        record.remove("queueShards");
    }
    let record = Record(record);
    record.save(store, keys::RETENTION_CLEANUP)?;
    alarm.set(if due <= now { now + 1 } else { due });
    Ok(record.into_value())
}

/// `rearmCleanup()`: recover an abandoned alarm. The record is returned unchanged.
pub fn rearm(store: &mut dyn Store, now: i64, alarm: &mut Alarm) -> Result<Value, RpcError> {
    let Some(record) = Record::load(store, keys::RETENTION_CLEANUP)? else { return Ok(Value::Null) };
    if Phase::of(&record) == Some(Phase::Tombstoned) {
        alarm.delete();
    } else {
        let due = record.date("dueAt").unwrap_or(i64::MIN);
        alarm.set((now + 1).max(due));
    }
    Ok(record.into_value())
}

/// `cleanupNow` step 2: move `dueAt` (and the run's `expiredAt`) to now and arm the alarm,
/// unless the run is already tombstoned.
pub fn expedite(store: &mut dyn Store, now: i64, alarm: &mut Alarm) -> Result<(), RpcError> {
    let Some(mut record) = Record::load(store, keys::RETENTION_CLEANUP)? else { return Ok(()) };
    if Phase::of(&record) == Some(Phase::Tombstoned) {
        return Ok(());
    }
    record.0.insert("dueAt".into(), Value::date(now));
    record.save(store, keys::RETENTION_CLEANUP)?;
    if let Some(mut run) = Record::load(store, keys::RUN)? {
        run.0.insert("expiredAt".into(), Value::date(now));
        run.save(store, keys::RUN)?;
    }
    alarm.set(now + 1);
    Ok(())
}

#[cfg(test)]
mod tests;
