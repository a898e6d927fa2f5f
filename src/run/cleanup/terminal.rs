//! Terminal cleanup (spec-0.4 `retention.md` §3): started by `applyEvent` on every outcome
//! carrying a terminal run, it pages the run's hooks, hook markers and waits out of the run
//! DO, releasing their index entries in the hook shards (owner-checked, idempotent), one
//! page per alarm.
//!
//! Hooks admitted through the 0.3 `index` binding are deleted inline by the terminal
//! transition and reported in `releasedHooks` (0.3 semantics); hooks admitted with a 0.4
//! `hookClaimId` are deleted inline too but left to this cleanup to release (0.4's
//! `releasedHooks: []`). Their `retention:hook:` markers are what the `markers` phase
//! releases — for both kinds, so a lost client follow-up cannot leave a token blocked —
//! and then deletes, as 0.4 does (a later retention `index` phase finds none; hook entries
//! a pre-upgrade archive still holds for the run are hidden once it is terminal and dropped
//! by the archive migration). The `hooks` phase usually finds nothing; it is kept for hooks
//! the inline delete did not reach (data of an older release).
//!
//! Plans the releases as [`crate::protocol`] calls; knows nothing of the hook shards'
//! storage and makes no call itself.

use serde::{Deserialize, Serialize};

use super::record::backoff;
use crate::protocol::calls::{ShardCall, Target};
use crate::protocol::hooks::{release_entry_value, Family, Owner};
use crate::run::keys;
use crate::run::records::Record;
use crate::store::alarm::Alarm;
use crate::store::{get_json, put_json, ListOptions, Store};
use crate::wire::js::to_js_string;
use crate::wire::{RpcError, Value};

/// Hooks (or hook markers) one page releases.
pub const HOOK_PAGE: usize = 64;
/// Waits one page deletes.
pub const WAIT_PAGE: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TerminalPhase {
    Hooks,
    Markers,
    Waits,
}

impl TerminalPhase {
    /// The phase after this one (`waits` is the last: it deletes the record).
    fn next(self) -> TerminalPhase {
        match self {
            TerminalPhase::Hooks => TerminalPhase::Markers,
            TerminalPhase::Markers | TerminalPhase::Waits => TerminalPhase::Waits,
        }
    }
}

/// `terminal:cleanup`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminalRecord {
    pub version: u32,
    pub run_id: String,
    pub phase: TerminalPhase,
    pub generation: u64,
    pub attempts: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Epoch ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempt_at: Option<i64>,
}

/// A terminal page that calls the hook shards.
#[derive(Debug, Clone, PartialEq)]
pub struct TerminalPage {
    pub phase: TerminalPhase,
    pub generation: u64,
    /// The releases to make.
    pub calls: Vec<ShardCall>,
    /// The keys to delete once they are made.
    pub keys: Vec<String>,
    /// Whether this page ends its phase.
    pub last: bool,
}

/// What [`plan`] did with an existing record.
#[derive(Debug, Clone, PartialEq)]
pub enum TerminalPlan {
    /// Nothing (more) to call now: the page, if any, was done in the plan's transaction.
    Done,
    /// A page that calls the hook shards.
    Page(TerminalPage),
}

/// Create the record if absent (applyEvent, terminal outcome) and arm the alarm at now + 1.
///
/// Unless there is nothing to page: with no record yet and no `hook:`, `retention:hook:` or
/// `wait:` key left (a run that never had a hook or a wait; the terminal transition
/// deletes hooks and waits inline), every phase would find nothing, so no record is
/// written and the alarm is left as it is. The reference writes the record anyway and pays
/// three alarm invocations (one per empty phase) to delete it again; nothing outside the
/// object can tell the difference (the record is internal, the alarm it would take is
/// followed by the retention alarm `schedule` already set). A record that exists is
/// restarted as before.
pub fn start(store: &mut dyn Store, run_id: &str, now: i64, alarm: &mut Alarm) -> Result<(), RpcError> {
    if store.get(keys::TERMINAL_CLEANUP)?.is_none() {
        if nothing_to_page(store)? {
            return Ok(());
        }
        let record = TerminalRecord {
            version: 1,
            run_id: run_id.to_string(),
            phase: TerminalPhase::Hooks,
            generation: 0,
            attempts: 0,
            last_error: None,
            last_attempt_at: None,
        };
        put_json(store, keys::TERMINAL_CLEANUP, &record)?;
    }
    alarm.set(now + 1);
    Ok(())
}

/// Whether every phase would find nothing: no key under the prefixes the pages list.
fn nothing_to_page(store: &mut dyn Store) -> Result<bool, RpcError> {
    for prefix in [keys::HOOK_PREFIX, keys::RETENTION_HOOK_PREFIX, keys::WAIT_PREFIX] {
        if !store.list_keys(&ListOptions::prefix(prefix).limit(1))?.is_empty() {
            return Ok(false);
        }
    }
    Ok(true)
}

pub fn load(store: &mut dyn Store) -> Result<Option<TerminalRecord>, RpcError> {
    get_json(store, keys::TERMINAL_CLEANUP)
}

/// The owner-checked `releaseBatch` calls for `hooks` (`(hookId, token)`), grouped by
/// shard, on both hook families.
pub fn release_calls(run_id: &str, hooks: &[(String, String)]) -> Vec<ShardCall> {
    let mut batches: std::collections::BTreeMap<Target, Vec<Value>> = std::collections::BTreeMap::new();
    for (hook_id, token) in hooks {
        let owner = Owner::new(run_id, hook_id.as_str());
        batches.entry(Target::HookTokens(crate::protocol::shard::hook_token(token))).or_default().push(release_entry_value(
            Family::Token,
            token,
            &owner,
        ));
        batches.entry(Target::HookIds(crate::protocol::shard::hook_id(hook_id))).or_default().push(release_entry_value(
            Family::Id,
            hook_id,
            &owner,
        ));
    }
    batches.into_iter().map(|(target, entries)| ShardCall { target, method: "releaseBatch", args: vec![Value::Array(entries)] }).collect()
}

fn pair(v: &Value) -> (String, String) {
    (to_js_string(v.get("hookId")), to_js_string(v.get("token")))
}

/// Plan a terminal page when the record exists (`None` otherwise). The `waits` phase is done
/// here (storage only).
///
/// A `hooks` or `markers` phase with nothing left to list moves on to the next phase in the
/// same transaction (the record stored in its new phase with the page that follows, as a
/// finished page would have stored it), instead of spending an alarm on an empty page:
/// after the terminal transition's inline delete the `hooks` phase almost always finds
/// nothing. Only the number of alarms differs from the reference's one page per alarm;
/// what each page does, and in what order, does not.
pub fn plan(store: &mut dyn Store, now: i64, alarm: &mut Alarm) -> Result<Option<TerminalPlan>, RpcError> {
    let Some(mut record) = load(store)? else { return Ok(None) };
    let mut moved = false;
    loop {
        let prefix = match record.phase {
            TerminalPhase::Hooks => keys::HOOK_PREFIX,
            TerminalPhase::Markers => keys::RETENTION_HOOK_PREFIX,
            TerminalPhase::Waits => {
                waits(store, now, alarm, record)?;
                return Ok(Some(TerminalPlan::Done));
            }
        };
        let listed = store.list(&ListOptions::prefix(prefix).limit(HOOK_PAGE + 1))?;
        if listed.is_empty() {
            let next = record.phase.next();
            record = advance(record, next);
            moved = true;
            continue;
        }
        if moved {
            put_json(store, keys::TERMINAL_CLEANUP, &record)?;
        }
        let last = listed.len() <= HOOK_PAGE;
        let mut hooks = Vec::new();
        let mut doomed = Vec::new();
        for (key, text) in listed.into_iter().take(HOOK_PAGE) {
            if record.phase == TerminalPhase::Hooks {
                let hook = match Value::parse(&text) {
                    Ok(Value::Object(m)) => Record(m),
                    _ => return Err(RpcError::error(format!("corrupt record at {key}"))),
                };
                let (hook_id, token) = pair(&hook.clone().into_value());
                if let Some(created) = hook.date("createdAt") {
                    doomed.push(keys::created(keys::HOOK_CREATED_PREFIX, created, &hook_id));
                }
                hooks.push((hook_id, token));
            } else {
                let marker = Value::parse(&text).map_err(|e| RpcError::error(format!("corrupt record at {key}: {}", e.0)))?;
                hooks.push(pair(&marker));
            }
            doomed.push(key);
        }
        let calls = release_calls(&record.run_id, &hooks);
        return Ok(Some(TerminalPlan::Page(TerminalPage {
            phase: record.phase,
            generation: record.generation,
            calls,
            keys: doomed,
            last,
        })));
    }
}

/// The record in phase `next`: a new generation, failures forgotten.
fn advance(record: TerminalRecord, next: TerminalPhase) -> TerminalRecord {
    TerminalRecord { phase: next, generation: record.generation + 1, attempts: 0, last_error: None, ..record }
}

/// The `waits` phase (storage only): delete up to [`WAIT_PAGE`] `wait:` keys; when none
/// remain, delete the record and hand the alarm back to retention (its due time, if a
/// record not yet tombstoned exists) or clear it; else store the record (a new
/// generation) and come back at now + 1. `record` need not be stored yet.
fn waits(store: &mut dyn Store, now: i64, alarm: &mut Alarm, record: TerminalRecord) -> Result<(), RpcError> {
    let listed = store.list_keys(&ListOptions::prefix(keys::WAIT_PREFIX).limit(WAIT_PAGE + 1))?;
    for k in listed.iter().take(WAIT_PAGE) {
        store.delete(k)?;
    }
    if listed.len() > WAIT_PAGE {
        put_json(store, keys::TERMINAL_CLEANUP, &advance(record, TerminalPhase::Waits))?;
        alarm.set(now + 1);
        return Ok(());
    }
    store.delete(keys::TERMINAL_CLEANUP)?;
    let retention = Record::load(store, keys::RETENTION_CLEANUP)?;
    match retention.filter(|r| r.str("phase") != Some("tombstoned")) {
        Some(r) => alarm.set((now + 1).max(r.date("dueAt").unwrap_or(i64::MIN))),
        None => alarm.delete(),
    }
    Ok(())
}

/// After a `hooks` / `markers` page's releases: delete its keys, move on when it was the
/// last page of its phase. The last `markers` page runs the `waits` phase's first page in
/// the same transaction (storage only, like the plan's), so a run whose hooks the terminal
/// transition deleted inline takes one alarm in all.
pub fn commit(store: &mut dyn Store, now: i64, alarm: &mut Alarm, page: &TerminalPage) -> Result<(), RpcError> {
    let Some(record) = load(store)?.filter(|r| r.phase == page.phase && r.generation == page.generation) else { return Ok(()) };
    for k in &page.keys {
        store.delete(k)?;
    }
    let next = if page.last { page.phase.next() } else { page.phase };
    if next == TerminalPhase::Waits {
        // Stored by `waits` only if it has to come back (usually it deletes the record).
        waits(store, now, alarm, advance(record, next))?;
    } else {
        put_json(store, keys::TERMINAL_CLEANUP, &advance(record, next))?;
        alarm.set(now + 1);
    }
    Ok(())
}

/// A failed terminal page: same backoff as retention; stale generations are ignored.
pub fn record_failure(store: &mut dyn Store, now: i64, page: &TerminalPage, message: &str, alarm: &mut Alarm) -> Result<(), RpcError> {
    let Some(record) = load(store)?.filter(|r| r.phase == page.phase && r.generation == page.generation) else { return Ok(()) };
    let attempts = record.attempts + 1;
    put_json(
        store,
        keys::TERMINAL_CLEANUP,
        &TerminalRecord {
            generation: record.generation + 1,
            attempts,
            last_error: Some(message.to_string()),
            last_attempt_at: Some(now),
            ..record
        },
    )?;
    alarm.set(now.saturating_add(backoff(attempts as f64)));
    Ok(())
}
