//! Lifecycle leases: how a QueueDO shard learns, with one hop per run instead of one per
//! enqueue, that a run will not be expired before a given instant (ours; the reference
//! asks `getLifecycleStatus()` before every run-guarded queue mutation, spec-0.4
//! `queue.md` §3).
//!
//! * **Grant** (`leaseLifecycle(holder, kind?)`, internal): the lifecycle status, plus for
//!   a run that exists and is not expired `leaseUntil` = min(now + [`LEASE_MS`](crate::protocol::leases::LEASE_MS) (for a
//!   catalog shard [`CATALOG_LEASE_MS`]), the retained cleanup record's `dueAt`). A queue
//!   shard's grant is stored as `lifecycle-lease:<holder>` = `{runId, until}` (the
//!   longest one granted to that holder). A run-catalog shard's (`kind` `"catalog"`,
//!   [`HolderKind::Catalog`]) is not stored: only the run's own catalog shard gets one, so
//!   the holder is known without a record, and a grant costs no write. A missing run gets
//!   no lease and writes nothing: it could be created at any time.
//! * **Revoke**: any transaction of this run that writes its cleanup record or tombstone
//!   (terminal retention, `scheduleCleanup`, `cleanupNow`, `enforceRetention`, the cleanup
//!   pages) runs under [`Watch`]. When the write moved the expiry instant before a stored
//!   lease's `until`, the same transaction deletes that lease; when it moved the expiry
//!   earlier, to before now + [`CATALOG_LEASE_MS`] (so a catalog lease granted up to now
//!   may run past it), the run's catalog shard is owed a revocation too. The shell, after
//!   the commit and before answering, calls each holder's `revokeLifecycleLease(runId)` on
//!   its kind's namespace.
//!
//! So a holder that trusts its lease only until `until` sees what `getLifecycleStatus()`
//! would have told it, except for a call that races the revoking call itself (the
//! reference's check, made outside the queue's transaction, has the same race). If the
//! revocation call fails, the holder keeps its lease until `until` (at most [`LEASE_MS`](crate::protocol::leases::LEASE_MS));
//! a message it accepts meanwhile is still deleted by the run's `expireRun` (the queue
//! fence is compacted only 330 s after the run acknowledged it, longer than any lease),
//! so nothing leaks either way. The same holds for a catalog shard (`crate::catalog::lease`:
//! its fence is kept 20 minutes, longer than [`CATALOG_LEASE_MS`]).
//!
//! Knows no holder: whom to revoke is a [`crate::protocol::leases::HolderKind`] and a name,
//! and the shell makes the call.

use serde::{Deserialize, Serialize};

use super::fence::{lifecycle_status_of, retention_state, RetentionState};
use super::keys;
use crate::protocol::leases::{HolderKind, CATALOG_LEASE_MS, LEASE_METHOD};
use crate::store::{put_json, ListOptions, Store, StoreResult, Stored};
use crate::wire::{RpcError, Value};

/// Storage prefix of the leases granted to QueueDO shards (`lifecycle-lease:<holder>`).
pub const LEASE_PREFIX: &str = "lifecycle-lease:";
/// Leases shorter than this are not worth a write: the holder asks again.
pub const MIN_LEASE_MS: i64 = 1_000;
/// Longest holder name accepted (a QueueDO instance name).
pub const MAX_HOLDER_LEN: usize = 512;
/// Most queue-shard leases one run keeps (one per shard that asked; the client uses a
/// handful). Past it, no new holder gets a lease (it keeps asking every time).
pub const MAX_LEASES: usize = 256;

fn lease_key(holder: &str) -> String {
    format!("{LEASE_PREFIX}{holder}")
}

/// A stored lease (`lifecycle-lease:<holder>`). Read leniently: a member that does not
/// parse is absent.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Lease {
    #[serde(rename = "runId", default, deserialize_with = "lenient")]
    run_id: Option<String>,
    /// Epoch ms.
    #[serde(default, deserialize_with = "lenient")]
    until: Option<i64>,
}

fn lenient<'de, D: serde::Deserializer<'de>, T: serde::de::DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    Ok(serde_json::Value::deserialize(d).ok().and_then(|v| serde_json::from_value(v).ok()))
}

impl Lease {
    fn load(store: &mut dyn Store, key: &str) -> StoreResult<Option<Lease>> {
        Ok(store.get(key)?.map(|text| serde_json::from_str(&text).unwrap_or_default()))
    }
}

/// The instant from which the run counts as expired, as far as `state` says:
/// `Some(t ≤ now)` when it already is, `Some(dueAt)` for a retained cleanup record due
/// later, `None` when no cleanup is planned.
fn expires_at(state: &RetentionState, now: i64) -> Option<i64> {
    if state.tombstone.is_some() {
        return Some(now);
    }
    state.cleanup.as_ref().map(|r| r.date("dueAt").unwrap_or(now))
}

/// `leaseLifecycle(holder, kind?)` → `{status, leaseUntil}` (`leaseUntil` null when no
/// lease).
pub fn grant(store: &mut dyn Store, now: i64, run_id: &str, holder: Option<&str>, kind: Option<&Value>) -> Result<Value, RpcError> {
    let holder = match holder {
        Some(h) if !h.is_empty() && h.len() <= MAX_HOLDER_LEN => h,
        _ => return Err(RpcError::error(format!("{LEASE_METHOD}: holder must be a non-empty string of at most {MAX_HOLDER_LEN} bytes"))),
    };
    let kind = HolderKind::from_arg(kind)?;
    let state = retention_state(store, now)?;
    let status = lifecycle_status_of(store, &state)?;
    let leasable = matches!(status.as_str(), Some("active" | "terminal"));
    let until = match (leasable, expires_at(&state, now)) {
        (false, _) => None,
        (true, None) => Some(now + kind.lease_ms()),
        (true, Some(due)) => Some((now + kind.lease_ms()).min(due)),
    }
    .filter(|u| *u >= now + MIN_LEASE_MS);
    let Some(until) = until else {
        return Ok(Value::object([("status", status), ("leaseUntil", Value::Null)]));
    };
    if kind == HolderKind::Catalog {
        // Only the run's own catalog shard holds a catalog lease (the revocation's target).
        let until = (holder == crate::protocol::shard::run_catalog(run_id)).then_some(until);
        return Ok(Value::object([("status", status), ("leaseUntil", until.map_or(Value::Null, |u| Value::num(u as f64)))]));
    }
    let key = lease_key(holder);
    let stored = Lease::load(store, &key)?.and_then(|l| l.until);
    if stored.is_none() && store.list_keys(&ListOptions::prefix(LEASE_PREFIX).limit(MAX_LEASES))?.len() >= MAX_LEASES {
        return Ok(Value::object([("status", status), ("leaseUntil", Value::Null)]));
    }
    // The stored lease must cover every instant granted to this holder.
    let keep = stored.map_or(until, |s| s.max(until));
    if stored != Some(keep) {
        put_json(store, &key, &Lease { run_id: Some(run_id.to_string()), until: Some(keep) })?;
    }
    Ok(Value::object([("status", status), ("leaseUntil", Value::num(until as f64))]))
}

/// A lease to call off after the commit: `holder.revokeLifecycleLease(run_id)` in the
/// namespace of `kind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revocation {
    pub kind: HolderKind,
    pub holder: String,
    pub run_id: String,
}

/// The leases the current state contradicts (their `until` is after the instant the run
/// now expires), deleted here; stale leases are deleted too. Call at the end of a
/// transaction that wrote the cleanup record or the tombstone.
pub fn contradicted(store: &mut dyn Store, now: i64) -> StoreResult<Vec<Revocation>> {
    let state = retention_state(store, now)?;
    let Some(expires) = expires_at(&state, now) else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for (key, value) in store.list(&ListOptions::prefix(LEASE_PREFIX))? {
        let lease: Lease = serde_json::from_str(&value).unwrap_or_default();
        match lease.until {
            Some(u) if u <= now => {}
            Some(u) if u <= expires => continue,
            _ => {
                if let Some(run_id) = lease.run_id {
                    out.push(Revocation { kind: HolderKind::Queue, holder: key[LEASE_PREFIX.len()..].to_string(), run_id });
                }
            }
        }
        store.delete(&key)?;
    }
    Ok(out)
}

/// The run's expiry as it was before a watched transaction first wrote it.
#[derive(Debug, Clone, Copy)]
struct Before {
    expired: bool,
    expires: Option<i64>,
}

/// The catalog shard's revocation a transaction owes: when it moved the run's expiry
/// earlier (from none, or from a later instant), to before `now` + [`CATALOG_LEASE_MS`].
/// Catalog grants are not recorded, but each runs at most [`CATALOG_LEASE_MS`] from its
/// grant and never past the expiry then in force, which every earlier move already
/// revoked past; so a lease can outlive the new expiry only under exactly this
/// condition. Not after the run had expired (an expired run grants nothing), so the
/// cleanup pages owe nothing.
fn catalog_revocation(store: &mut dyn Store, before: Before, now: i64) -> StoreResult<Option<Revocation>> {
    if before.expired {
        return Ok(None);
    }
    let after = retention_state(store, now)?;
    let Some(expires) = expires_at(&after, now) else { return Ok(None) };
    if expires >= now.saturating_add(CATALOG_LEASE_MS) || before.expires.is_some_and(|b| b <= expires) {
        return Ok(None);
    }
    let run_id = after.tombstone.as_ref().and_then(|t| t.get("runId")).or_else(|| after.cleanup.as_ref().and_then(|c| c.get("runId")));
    Ok(run_id.and_then(Value::as_str).map(|run_id| Revocation {
        kind: HolderKind::Catalog,
        holder: crate::protocol::shard::run_catalog(run_id),
        run_id: run_id.to_string(),
    }))
}

/// A store that notes writes of the cleanup record and the tombstone: the calls after
/// which [`contradicted`] must run (and, from the expiry before the first such write,
/// whether the catalog shard's lease must be revoked).
pub struct Watch<'a> {
    inner: &'a mut dyn Store,
    now: i64,
    before: Option<Before>,
}

impl<'a> Watch<'a> {
    pub fn new(inner: &'a mut dyn Store, now: i64) -> Self {
        Watch { inner, now, before: None }
    }
    fn note(&mut self, key: &str) {
        if self.before.is_none() && (key == keys::RETENTION_CLEANUP || key == keys::RETENTION_TOMBSTONE) {
            // A record that cannot be read (being overwritten, perhaps) counts as no expiry:
            // the catalog revocation is then decided by the new state alone.
            self.before = Some(match retention_state(self.inner, self.now) {
                Ok(state) => Before { expired: state.tombstone.is_some(), expires: expires_at(&state, self.now) },
                Err(_) => Before { expired: false, expires: None },
            });
        }
    }
    /// The revocations owed after the calls made through this store.
    pub fn finish(self) -> StoreResult<Vec<Revocation>> {
        let Some(before) = self.before else { return Ok(Vec::new()) };
        let mut out = contradicted(self.inner, self.now)?;
        out.extend(catalog_revocation(self.inner, before, self.now)?);
        Ok(out)
    }
}

impl Store for Watch<'_> {
    fn get_value(&mut self, key: &str) -> StoreResult<Option<Stored>> {
        self.inner.get_value(key)
    }
    fn put(&mut self, key: &str, value: &str) -> StoreResult<()> {
        self.note(key);
        self.inner.put(key, value)
    }
    fn put_bytes(&mut self, key: &str, value: &[u8]) -> StoreResult<()> {
        self.note(key);
        self.inner.put_bytes(key, value)
    }
    fn delete(&mut self, key: &str) -> StoreResult<bool> {
        self.note(key);
        self.inner.delete(key)
    }
    fn list_values(&mut self, options: &ListOptions) -> StoreResult<Vec<(String, Stored)>> {
        self.inner.list_values(options)
    }
    fn list_visit(&mut self, options: &ListOptions, visit: &mut dyn FnMut(String, Stored) -> StoreResult<bool>) -> StoreResult<()> {
        self.inner.list_visit(options, visit)
    }
    fn contains(&mut self, key: &str) -> StoreResult<bool> {
        self.inner.contains(key)
    }
    fn last_key(&mut self, prefix: &str) -> StoreResult<Option<String>> {
        self.inner.last_key(prefix)
    }
}

/// Is `key` a lease (bookkeeping the payload phase deletes without counting)?
pub fn is_lease_key(key: &str) -> bool {
    key.starts_with(LEASE_PREFIX)
}
