//! Test harness for the hook shards: every token and hook-id shard on in-memory stores,
//! a fake run DO answering `getLifecycleStatus`, an injected clock and simulated alarms,
//! plus the `/v1/index/hooks/*` coordinator steps of `catalog-hooks.md` §4 written
//! directly over the shards (so the shard cores are tested the way they are composed).
//!
//! Test support (feature `testing`), never part of the worker.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use super::compaction;
use super::driver::{self, ShardHost, LIFECYCLE_METHOD};
use crate::protocol::hooks::{release_entry_value, Family, Owner};
use crate::protocol::hop::Args;
use crate::protocol::lifecycle::compaction_retry;
use crate::store::alarm::{Alarm, AlarmChange};
use crate::store::{MemoryStore, Store};
pub use crate::testing::block_on;
use crate::wire::router::Binding;
use crate::wire::{RpcError, Value};

pub const T0: i64 = 1_767_323_045_000;

pub fn s(v: &str) -> Value {
    Value::str(v)
}

pub fn owner(run: &str, hook: &str) -> Owner {
    Owner::new(run, hook)
}

/// A serialized hook as the client publishes it.
pub fn hook_json(owner: &Owner, token: &str) -> String {
    format!(
        r#"{{"runId":"{}","hookId":"{}","token":"{token}","createdAt":{{"__type":"Date","iso":"2026-01-02T03:04:05.000Z"}}}}"#,
        owner.run_id, owner.hook_id
    )
}

#[derive(Default)]
pub struct Object {
    pub store: MemoryStore,
    pub alarm: Option<i64>,
}

impl Object {
    /// Run a fired alarm's pass as the shells do: one transaction, its alarm change applied
    /// after the commit; a failed pass re-arms at [`compaction_retry`].
    pub fn run_alarm(&mut self, now: i64, mut pass: impl FnMut(&mut dyn Store, i64, &mut Alarm) -> Result<usize, RpcError>) {
        let mut alarm = Alarm::unknown();
        match self.store.transaction(|store| pass(store, now, &mut alarm)) {
            Ok(_) => apply(&mut self.alarm, alarm.change()),
            Err(_) => {
                let mut retry = Alarm::unknown();
                compaction_retry(now, &mut retry);
                apply(&mut self.alarm, retry.change());
            }
        }
    }
}

pub struct World {
    pub now: Cell<i64>,
    /// `(family class, instance name)` → object.
    pub objects: RefCell<BTreeMap<(&'static str, String), Object>>,
    /// runId → lifecycle status; runs not listed answer `missing`.
    pub runs: RefCell<BTreeMap<String, String>>,
    /// Every run DO call made, as `runId.method`.
    pub run_calls: RefCell<Vec<String>>,
    /// Calls to shard instances whose name starts with this fail.
    pub failing: RefCell<Option<String>>,
}

/// One shard instance as its shell would drive it.
pub struct Host<'a> {
    pub world: &'a World,
    pub family: Family,
    pub name: String,
}

impl ShardHost for Host<'_> {
    async fn transact<T>(&self, f: impl FnOnce(&mut dyn Store, i64, &mut Alarm) -> Result<T, RpcError>) -> Result<T, RpcError> {
        if self.world.failing.borrow().as_deref().is_some_and(|p| self.name.starts_with(p)) {
            return Err(RpcError::error(format!("injected failure at {}", self.name)));
        }
        let now = self.world.now.get();
        let mut objects = self.world.objects.borrow_mut();
        let object = objects.entry((self.family.class(), self.name.clone())).or_default();
        let mut alarm = Alarm::new(object.alarm);
        let out = object.store.in_transaction(|store| f(store, now, &mut alarm));
        if out.is_ok() {
            apply(&mut object.alarm, alarm.change());
        }
        out
    }

    async fn call(&self, binding: Binding, name: &str, method: &str, _args: Vec<Value>) -> Result<Value, RpcError> {
        if binding != Binding::Runs || method != LIFECYCLE_METHOD {
            return Err(RpcError::error(format!("unexpected call {}/{name}.{method}", binding.key())));
        }
        self.world.run_calls.borrow_mut().push(format!("{name}.{method}"));
        Ok(Value::str(self.world.runs.borrow().get(name).map_or("missing", String::as_str)))
    }
}

/// Apply an alarm change to an object's alarm slot.
pub fn apply(slot: &mut Option<i64>, change: Option<AlarmChange>) {
    match change {
        Some(AlarmChange::Set(at)) => *slot = Some(at),
        Some(AlarmChange::Delete) => *slot = None,
        None => {}
    }
}

/// `{admitted:false, holder}` or the reservation of an admitted `hooks.reserve`.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    Admitted { token_claim_id: Option<String>, hook_id_claim_id: String },
    Refused(Value),
}

impl Default for World {
    fn default() -> Self {
        World::new()
    }
}

impl World {
    pub fn new() -> World {
        World {
            now: Cell::new(T0),
            objects: RefCell::new(BTreeMap::new()),
            runs: RefCell::new(BTreeMap::new()),
            run_calls: RefCell::new(Vec::new()),
            failing: RefCell::new(None),
        }
    }

    pub fn set_run(&self, run_id: &str, status: &str) {
        self.runs.borrow_mut().insert(run_id.into(), status.into());
    }

    pub fn host(&self, family: Family, key: &str) -> Host<'_> {
        Host { world: self, family, name: family.shard(key) }
    }

    /// Any method on the shard owning `key`.
    pub fn call(&self, family: Family, key: &str, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        block_on(driver::call(&self.host(family, key), family, method, Args(&args)))
    }

    pub fn get(&self, family: Family, key: &str) -> Value {
        self.call(family, key, "get", vec![s(key)]).unwrap_or_else(|e| panic!("get: {e:?}"))
    }

    pub fn reserve(&self, family: Family, key: &str, owner: &Owner, proposed: &str) -> Result<Value, RpcError> {
        self.call(family, key, "reserve", vec![s(key), owner.to_value(), s(proposed)])
    }

    pub fn publish(&self, family: Family, key: &str, owner: &Owner, token: &str, claim_id: Option<&str>) -> Result<Value, RpcError> {
        let mut args = vec![s(key), s(&hook_json(owner, token)), owner.to_value()];
        if let Some(id) = claim_id {
            args.push(s(id));
        }
        self.call(family, key, family.publish_method(), args)
    }

    pub fn release_claim(&self, family: Family, key: &str, owner: &Owner, claim_id: &str) -> Result<Value, RpcError> {
        self.call(family, key, "releaseClaim", vec![s(key), owner.to_value(), s(claim_id)])
    }

    pub fn release_batch(&self, family: Family, shard_key: &str, entries: &[(&str, &Owner)]) -> Result<Value, RpcError> {
        let batch = entries.iter().map(|(key, owner)| release_entry_value(family, key, owner)).collect();
        self.call(family, shard_key, "releaseBatch", vec![Value::Array(batch)])
    }

    /// The keys of the shard owning `key`.
    pub fn keys(&self, family: Family, key: &str) -> Vec<String> {
        let objects = self.objects.borrow();
        objects.get(&(family.class(), family.shard(key))).map(|o| o.store.data.keys().cloned().collect()).unwrap_or_default()
    }

    pub fn alarm(&self, family: Family, key: &str) -> Option<i64> {
        self.objects.borrow().get(&(family.class(), family.shard(key))).and_then(|o| o.alarm)
    }

    /// Fire the alarm of the shard owning `key` when set (advancing the clock to it).
    pub fn fire(&self, family: Family, key: &str) -> bool {
        let mut objects = self.objects.borrow_mut();
        let Some(object) = objects.get_mut(&(family.class(), family.shard(key))) else { return false };
        let Some(at) = object.alarm.take() else { return false };
        self.now.set(self.now.get().max(at));
        object.run_alarm(self.now.get(), |store, now, alarm| compaction::alarm(store, family, now, alarm));
        true
    }

    /// A shard restart: the in-memory instance is gone, storage and alarm persist (a no-op
    /// for these cores, which keep no instance state; kept to state what is tested).
    pub fn restart(&self) {}

    // ---- the `/v1/index/hooks/*` coordinator steps (catalog-hooks.md §4) ----------------

    /// `hooks.reserve(token, owner)` with the given fresh claim id.
    pub fn admit(&self, token: &str, owner: &Owner, proposed: &str) -> Result<Admission, RpcError> {
        let answer = self.reserve(Family::Token, token, owner, proposed)?;
        let token_claim_id = claim_id(&answer);
        if token_claim_id.is_none() {
            let holder = answer.get("holder").cloned().unwrap_or(Value::Null);
            if holder != owner.to_value() {
                return Ok(Admission::Refused(holder));
            }
        }
        let id_proposed = token_claim_id.clone().unwrap_or_else(|| proposed.to_string());
        let release_token = |world: &World| {
            if let Some(id) = &token_claim_id {
                let _ = world.release_claim(Family::Token, token, owner, id);
            }
        };
        let by_id = match self.reserve(Family::Id, &owner.hook_id, owner, &id_proposed) {
            Ok(answer) => answer,
            Err(e) => {
                release_token(self);
                let _ = self.release_claim(Family::Id, &owner.hook_id, owner, &id_proposed);
                return Err(e);
            }
        };
        match claim_id(&by_id) {
            Some(hook_id_claim_id) => Ok(Admission::Admitted { token_claim_id, hook_id_claim_id }),
            None => {
                release_token(self);
                Ok(Admission::Refused(by_id.get("holder").cloned().unwrap_or(Value::Null)))
            }
        }
    }

    /// `hooks.finalize(token, hookId, serialized, owner, reservation)`.
    pub fn finalize(&self, token: &str, owner: &Owner, reservation: &Admission) -> Result<(), RpcError> {
        let (token_claim, id_claim) = match reservation {
            Admission::Admitted { token_claim_id, hook_id_claim_id } => (token_claim_id.as_deref(), Some(hook_id_claim_id.as_str())),
            Admission::Refused(_) => (None, None),
        };
        let by_token = self.publish(Family::Token, token, owner, token, token_claim)?;
        if by_token.get("stored") == Some(&Value::Bool(true)) {
            self.publish(Family::Id, &owner.hook_id, owner, token, id_claim)?;
        }
        Ok(())
    }
}

fn claim_id(answer: &Value) -> Option<String> {
    (answer.get("claimed") == Some(&Value::Bool(true))).then(|| answer.get("claimId").and_then(Value::as_str).map(str::to_string))?
}
