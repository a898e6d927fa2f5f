//! The algorithm HookTokenDO and HookIdDO share (spec-0.4 `catalog-hooks.md` §3),
//! written once over a key [`Family`]: [`crate::hook_token`] and [`crate::hook_id`] are
//! this module with the family fixed.
//!
//! A shard (`hook-token:v1:XX` / `hook-id:v1:XX`, [`crate::protocol::shard`]) owns the natural keys
//! hashing to it. Per key it holds at most one published record (the serialized hook) and
//! one claim (a reservation with a lease of 2 101 800 ms), plus the claim's entry in a
//! time-ordered deadline index that the alarm compacts.
//!
//! Files:
//! * [`claims`] — `reserve`, `releaseClaim`, `releaseBatch` (one transaction each), and
//!   our internal `claimOf` for the 0.3 facade;
//! * [`publish`] — the storage step of `finalize` / `publish`;
//! * [`driver`] — `get` and `finalize` / `publish`, which ask the owner's run DO
//!   `getLifecycleStatus()` first, generic over a [`driver::ShardHost`];
//! * [`visibility`] — which methods ask the run DO first, and which statuses then let a
//!   hook be read or published;
//! * [`compaction`] — the alarm; [`keys`] and [`records`] — keys and stored records.
//!
//! What differs between the two classes ([`Family`]), the owner and the release entries
//! callers send are [`crate::protocol::hooks`].
//!
//! ## Alarm contract
//! `reserve` arms the alarm at a new claim's expiry unless an earlier one is set (the
//! shell passes the current alarm, [`Alarm::new`], for the methods [`reads_alarm`] names).
//! When it fires the shell runs [`compaction::alarm`] in one transaction with
//! [`Alarm::unknown`]; on failure it sets [`crate::protocol::lifecycle::compaction_retry`].
//!
//! Knows no caller (the coordinator, the facade, the run's cleanup) and nothing of the
//! platform; the run DO is asked only through [`driver::ShardHost`].

pub mod claims;
pub mod compaction;
pub mod driver;
pub mod keys;
pub mod publish;
pub mod records;
pub mod visibility;

#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;

use crate::protocol::hooks::Family;
use crate::protocol::hop::Args;
use crate::store::alarm::Alarm;
use crate::store::Store;
use crate::wire::{RpcError, Value};

/// Does `method` need the current alarm time (the shell then reads it first)?
pub fn reads_alarm(method: &str) -> bool {
    ALARM_READERS.contains(&method)
}

/// The methods that arm the alarm at most (only if none is earlier), so start from the
/// current one: the shell reads it before the call.
pub const ALARM_READERS: [&str; 1] = ["reserve"];

/// Dispatch one transactional method (inside one storage transaction). The
/// lifecycle-checked methods (`get`, `finalize`/`publish`) need the run DO and are
/// dispatched by [`driver::call`]; here they are refused.
pub fn call(store: &mut dyn Store, family: Family, now: i64, alarm: &mut Alarm, method: &str, args: Args) -> Result<Value, RpcError> {
    match method {
        "reserve" => claims::reserve(store, family, now, alarm, args),
        "releaseClaim" => claims::release_claim(store, args),
        "releaseBatch" => claims::release_batch(store, family, args),
        "legacyReleaseBatch" => claims::legacy_release_batch(store, family, args),
        "claimOf" => claims::claim_of(store, now, args),
        m if visibility::is_lifecycle_checked(family, m) => {
            Err(RpcError::error(format!("{}.{m} asks the run DO: dispatch it with hook_shard::driver::call", family.class())))
        }
        other => Err(RpcError::type_error(format!("{}.{other} is not a function", family.class()))),
    }
}
