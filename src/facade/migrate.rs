//! The one-time migration of the archive (issue #9, "In-place upgrade"; spec-0.4 README,
//! "One-time migration of the archive"): a resumable, bounded pager over the entries the
//! pre-upgrade IndexDO wrote to IndexDO `index`, moving each to the shard that serves it
//! now. The Worker's `scheduled` handler runs one [`step`] per cron tick.
//!
//! | archive key | becomes |
//! | --- | --- |
//! | `run:…:<runId>`, `runall:…:<runId>`, `correlation:…:<runId>` | `upsertKey` on the run's catalog shard (refused behind its fence); skipped when the run is expired |
//! | `hook:<token>` / `hookid:<hookId>` | `legacyPublish` on the token / hook-id shard (which releases instead when the run has ended) |
//! | `hookclaim:<token>` | a leased claim: `reserve(token, owner, legacy claim id)` on the token shard, unless the run has ended |
//!
//! Every entry is **copied, then deleted** from the archive, so it blocks (token
//! uniqueness) and resolves (read-through, [`super::archive`]) at every moment: first from
//! the archive, for a while from both, then from the shard. An entry whose move fails (an
//! unreadable record, another owner's record on the shard) stays in the archive, where
//! the read-through still honours it, and is counted in `kept`.
//!
//! Progress lives in the archive under [`STATE_KEY`]: the family being walked and the last
//! key handled (the 0.3 `list` cursor is "strictly after"). A step handles at most `budget`
//! entries (each 3–4 Durable Object calls) and saves the state after every page, so an
//! interrupted step resumes where the last saved page ended; entries are idempotent to
//! move twice.
//!
//! Knows the objects only through [`FacadeHost`].

#![allow(async_fn_in_trait)]

use super::driver::FacadeHost;
use super::hooks::legacy_claim_id;
use super::{refuses_put, upsert_args, UPSERT_KEY};
use crate::protocol::calls::Target;
use crate::protocol::hooks::{Owner, LEGACY_PUBLISH};
use crate::protocol::shard;
use crate::wire::{js, RpcError, Value};

/// The archive key holding the migration's progress.
pub const STATE_KEY: &str = "celld-migration:v1";
/// The archive families moved, in order.
pub const FAMILIES: [&str; 6] = ["run:", "runall:", "correlation:", "hook:", "hookid:", "hookclaim:"];
/// Entries listed per archive page.
pub const PAGE: usize = 32;

/// The saved progress.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct State {
    /// Index into [`FAMILIES`]; `FAMILIES.len()` when done.
    pub family: usize,
    /// The last key handled in that family.
    pub cursor: Option<String>,
    pub moved: f64,
    pub skipped: f64,
    pub kept: f64,
}

impl State {
    pub fn done(&self) -> bool {
        self.family >= FAMILIES.len()
    }

    pub fn from_value(v: &Value) -> State {
        let num = |k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        State {
            family: v.get("family").and_then(Value::as_f64).map_or(0, |f| f.clamp(0.0, FAMILIES.len() as f64) as usize),
            cursor: v.get("cursor").and_then(Value::as_str).map(str::to_string),
            moved: num("moved"),
            skipped: num("skipped"),
            kept: num("kept"),
        }
    }

    pub fn to_value(&self) -> Value {
        Value::object([
            ("version", Value::num(1)),
            ("family", Value::num(self.family as f64)),
            ("cursor", self.cursor.clone().map_or(Value::Null, Value::String)),
            ("done", Value::Bool(self.done())),
            ("moved", Value::num(self.moved)),
            ("skipped", Value::num(self.skipped)),
            ("kept", Value::num(self.kept)),
        ])
    }
}

/// What became of one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Copied to its shard and deleted from the archive.
    Moved,
    /// Dead (its run expired or ended): deleted from the archive without a copy.
    Skipped,
    /// Left in the archive (see the module docs).
    Kept,
}

async fn archive<H: FacadeHost>(host: &H, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
    host.call(&Target::Archive, method, args).await
}

/// Move one archive entry (`family` is its prefix).
pub async fn move_entry<H: FacadeHost>(host: &H, family: &str, key: &str) -> Result<Outcome, RpcError> {
    let value = archive(host, "get", vec![Value::str(key)]).await?;
    if value.is_null() {
        return Ok(Outcome::Skipped);
    }
    let natural = &key[family.len()..];
    let outcome = match family {
        "hook:" | "hookid:" => {
            let Value::String(serialized) = &value else { return Ok(Outcome::Kept) };
            let Ok(owner) = Owner::from_serialized(serialized) else { return Ok(Outcome::Kept) };
            let target =
                if family == "hook:" { Target::HookTokens(shard::hook_token(natural)) } else { Target::HookIds(shard::hook_id(natural)) };
            let args = vec![Value::str(natural), value.clone(), owner.to_value()];
            match host.call(&target, LEGACY_PUBLISH, args).await {
                Ok(answer) if answer.get("stored") == Some(&Value::Bool(true)) => Outcome::Moved,
                Ok(_) => Outcome::Skipped,
                Err(_) => return Ok(Outcome::Kept),
            }
        }
        "hookclaim:" => {
            let owner = match js::member(Some(&value), "owner") {
                Ok(owner) => Owner::from_arg(owner),
                Err(e) => Err(e),
            };
            let Ok(owner) = owner else { return Ok(Outcome::Kept) };
            if !super::archive::alive(&host.lifecycle_status(&owner.run_id).await?) {
                Outcome::Skipped
            } else {
                let target = Target::HookTokens(shard::hook_token(natural));
                let args = vec![Value::str(natural), owner.to_value(), Value::String(legacy_claim_id(&owner))];
                let answer = host.call(&target, "reserve", args).await?;
                // Refused: the token is held on the shard already, which wins.
                if answer.get("claimed") == Some(&Value::Bool(true)) {
                    Outcome::Moved
                } else {
                    Outcome::Skipped
                }
            }
        }
        _ => {
            let run_id = key.rsplit(':').next().unwrap_or_default();
            if refuses_put(&host.lifecycle_status(run_id).await?) {
                Outcome::Skipped
            } else {
                let target = Target::Catalog(shard::run_catalog(run_id));
                match host.call(&target, UPSERT_KEY, upsert_args(run_id.to_string(), key.to_string(), value.clone())).await {
                    Ok(answer) if answer.get("stored") == Some(&Value::Bool(true)) => Outcome::Moved,
                    Ok(_) => Outcome::Skipped,
                    Err(_) => return Ok(Outcome::Kept),
                }
            }
        }
    };
    archive(host, "delete", vec![Value::str(key)]).await?;
    Ok(outcome)
}

/// One bounded step: at most `budget` entries, the state saved after every page. Returns
/// the state after the step.
pub async fn step<H: FacadeHost>(host: &H, budget: usize) -> Result<State, RpcError> {
    let mut state = State::from_value(&archive(host, "get", vec![Value::str(STATE_KEY)]).await?);
    let mut left = budget;
    while left > 0 && !state.done() {
        let family = FAMILIES[state.family];
        let mut options = vec![("prefix", Value::str(family)), ("limit", Value::num(left.min(PAGE) as f64))];
        if let Some(cursor) = &state.cursor {
            options.push(("cursor", Value::String(cursor.clone())));
        }
        let page = archive(host, "list", vec![Value::object(options)]).await?;
        let names: Vec<String> = page
            .get("keys")
            .and_then(Value::as_array)
            .map(|keys| keys.iter().filter_map(|k| k.get("name").and_then(Value::as_str).map(str::to_string)).collect())
            .unwrap_or_default();
        for name in &names {
            match move_entry(host, family, name).await? {
                Outcome::Moved => state.moved += 1.0,
                Outcome::Skipped => state.skipped += 1.0,
                Outcome::Kept => state.kept += 1.0,
            }
            state.cursor = Some(name.clone());
            left = left.saturating_sub(1);
        }
        if page.get("list_complete") == Some(&Value::Bool(true)) || names.is_empty() {
            state.family += 1;
            state.cursor = None;
        }
        archive(host, "put", vec![Value::str(STATE_KEY), state.to_value()]).await?;
    }
    Ok(state)
}

/// The migration's state as the facade reads it ([`MigrationCache::observe`]): the saved
/// state, except that an archive never migrated and holding no entry of any of
/// [`FAMILIES`] reads as done, so that a deployment that never had a pre-upgrade IndexDO
/// stops consulting it at an isolate's first reading, without waiting for the cron (which
/// `wrangler dev` never runs). Nothing is written (a raw `list` of everything shows no
/// key the client did not put). Costs one call, or on a never-migrated archive one list
/// per family up to the first that holds an entry.
pub async fn read_state<H: FacadeHost>(host: &H) -> Result<Value, RpcError> {
    let saved = archive(host, "get", vec![Value::str(STATE_KEY)]).await?;
    if !saved.is_null() {
        return Ok(saved);
    }
    for family in FAMILIES {
        let options = Value::object([("prefix", Value::str(family)), ("limit", Value::num(1.0))]);
        let page = archive(host, "list", vec![options]).await?;
        if page.get("keys").and_then(Value::as_array).is_none_or(|keys| !keys.is_empty()) {
            return Ok(saved);
        }
    }
    Ok(State { family: FAMILIES.len(), ..State::default() }.to_value())
}

/// How long a router isolate trusts an "archive not yet migrated" reading before asking
/// again ([`MigrationCache`]).
pub const RECHECK_MS: i64 = 30_000;

/// A router isolate's view of the migration, so that a finished migration stops the
/// archive read-through ([`super::archive`]) without a read per call: "done" is final (the
/// archive never receives index entries again), "not done" is re-read after
/// [`RECHECK_MS`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MigrationCache {
    /// When "not done" was last read (epoch ms); `None` before the first reading.
    pub checked_at: Option<i64>,
    pub done: bool,
}

impl MigrationCache {
    /// Whether the state must be read (again) before deciding.
    pub fn stale(&self, now: i64) -> bool {
        !self.done && self.checked_at.is_none_or(|at| now.saturating_sub(at) >= RECHECK_MS)
    }

    /// Record a reading of the state key's value.
    pub fn observe(&mut self, state: &Value, now: i64) {
        self.done = State::from_value(state).done();
        self.checked_at = Some(now);
    }

    /// Whether facade calls still consult the archive.
    pub fn with_archive(&self) -> bool {
        !self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_rereads_until_done_then_never() {
        let mut cache = MigrationCache::default();
        assert!(cache.stale(0) && cache.with_archive());
        cache.observe(&Value::Null, 1_000);
        assert!(!cache.stale(1_000 + RECHECK_MS - 1) && cache.with_archive());
        assert!(cache.stale(1_000 + RECHECK_MS));
        let done = State { family: FAMILIES.len(), ..State::default() }.to_value();
        cache.observe(&done, 50_000);
        assert!(!cache.with_archive());
        assert!(!cache.stale(i64::MAX), "done is final");
        let half = State { family: 2, cursor: Some("x".into()), ..State::default() };
        assert_eq!(State::from_value(&half.to_value()), half);
    }
}
