//! The whole sharded index in memory, for the native tests and the fuzz crate (feature
//! `testing`): the 16 catalog shards, the hook shards and their run statuses (a hook-shard
//! [`World`]), and the 0.3 archive instance, each on a [`MemoryStore`] with the alarm its
//! shell would keep, served through the real cores the way the shells call them.
//! [`Fleet`] is the [`FacadeHost`] the 0.3 facade and the 0.4 coordinator run against.
//!
//! Test support (feature `testing`), never part of the worker.

use std::cell::RefCell;

use super::driver::FacadeHost;
use crate::config::Config;
use crate::hook_shard::driver as hook_driver;
use crate::hook_shard::testing::{apply, Host, World};
use crate::protocol::calls::{ShardCall, Target};
use crate::protocol::hooks::Family;
use crate::protocol::hop::{Args, Ctx};
use crate::store::alarm::Alarm;
use crate::store::MemoryStore;
use crate::testing::block_on;
use crate::wire::{RpcError, Value};

/// Catalog shards (in the world's objects, class [`crate::catalog::CLASS`]), the hook
/// shards and run statuses of [`World`], and the archive.
pub struct Fleet {
    pub world: World,
    pub archive: RefCell<MemoryStore>,
    /// Every call made, as `<env binding>/<instance>.<method>`.
    pub calls: RefCell<Vec<String>>,
}

impl Default for Fleet {
    fn default() -> Self {
        Fleet::new()
    }
}

impl FacadeHost for Fleet {
    async fn call(&self, target: &Target, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        self.calls.borrow_mut().push(format!("{}/{}.{method}", target.env_binding(), target.instance()));
        match target {
            Target::Archive => self.archive_call(method, args),
            Target::Catalog(name) => self.catalog_call(name, method, &args),
            hook => exec(&self.world, &ShardCall { target: hook.clone(), method: shard_method(method), args }),
        }
    }

    async fn lifecycle_status(&self, run_id: &str) -> Result<Value, RpcError> {
        // Recorded with the hook shards' own asks, so tests count every run DO call.
        self.world.run_calls.borrow_mut().push(format!("{run_id}.getLifecycleStatus"));
        Ok(Value::str(self.world.runs.borrow().get(run_id).map_or("missing", String::as_str)))
    }
}

/// Run a hook shard call on the world's shard, as its shell would (the driver for the
/// lifecycle-checked methods, one transaction for the others).
pub fn exec(world: &World, call: &ShardCall) -> Result<Value, RpcError> {
    let family = match &call.target {
        Target::HookTokens(_) => Family::Token,
        Target::HookIds(_) => Family::Id,
        other => return Err(RpcError::error(format!("not a hook shard: {other:?}"))),
    };
    let host = Host { world, family, name: call.target.instance().to_string() };
    block_on(hook_driver::call(&host, family, call.method, Args(&call.args)))
}

/// [`ShardCall`] names methods `'static`; the fleet forwards the ones the hook shards have
/// (anything else becomes a method they refuse).
fn shard_method(method: &str) -> &'static str {
    ["get", "reserve", "finalize", "publish", "releaseClaim", "releaseBatch", "claimOf", "legacyGet", "legacyPublish", "legacyReleaseBatch"]
        .into_iter()
        .find(|m| *m == method)
        .unwrap_or("unknown")
}

impl Fleet {
    pub fn new() -> Fleet {
        Fleet { world: World::new(), archive: RefCell::new(MemoryStore::new()), calls: RefCell::new(Vec::new()) }
    }

    /// One 0.3 `index` call through the facade, the archive read through (as while
    /// migrating).
    pub fn index(&self, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        self.index_with(method, args, true)
    }

    /// One 0.3 `index` call through the facade (`with_archive`: see [`super::route`]).
    pub fn index_with(&self, method: &str, args: Vec<Value>, with_archive: bool) -> Result<Value, RpcError> {
        block_on(super::driver::call(self, method, args, with_archive))
    }

    /// One call of the archive IndexDO (`index`).
    pub fn archive_call(&self, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        let config = Config::default();
        let ctx = Ctx { now: self.world.now.get(), name: "index", config: &config };
        self.archive.borrow_mut().transaction(|st| crate::index::call(st, &ctx, method, Args(&args)))
    }

    /// One call of a catalog shard: one transaction, seeing the current alarm when the
    /// method reads it (as the shell does), the alarm change applied after a commit.
    pub fn catalog_call(&self, name: &str, method: &str, args: &[Value]) -> Result<Value, RpcError> {
        let config = Config::default();
        let ctx = Ctx { now: self.world.now.get(), name, config: &config };
        let mut objects = self.world.objects.borrow_mut();
        let object = objects.entry((crate::catalog::CLASS, name.to_string())).or_default();
        let mut alarm = if crate::catalog::reads_alarm(method) { Alarm::new(object.alarm) } else { Alarm::unknown() };
        let out = object.store.transaction(|st| crate::catalog::call(st, &ctx, &mut alarm, method, Args(args)));
        if out.is_ok() {
            apply(&mut object.alarm, alarm.change());
        }
        out
    }

    /// Every key of every catalog shard.
    pub fn catalog_keys(&self) -> Vec<String> {
        let objects = self.world.objects.borrow();
        objects.iter().filter(|((class, _), _)| *class == crate::catalog::CLASS).flat_map(|(_, o)| o.store.data.keys().cloned()).collect()
    }

    /// Fire the earliest alarm of any catalog or hook shard (the clock moves to it when it
    /// is later); `false` when none is set.
    pub fn fire_next(&self) -> bool {
        let mut objects = self.world.objects.borrow_mut();
        let Some(((class, _), object)) = objects.iter_mut().filter(|(_, o)| o.alarm.is_some()).min_by_key(|(_, o)| o.alarm) else {
            return false;
        };
        let at = object.alarm.take().unwrap_or_default();
        self.world.now.set(self.world.now.get().max(at));
        match [Family::Token, Family::Id].into_iter().find(|f| f.class() == *class) {
            Some(family) => {
                object.run_alarm(self.world.now.get(), |store, now, alarm| crate::hook_shard::compaction::alarm(store, family, now, alarm))
            }
            None => object.run_alarm(self.world.now.get(), crate::catalog::alarm),
        }
        true
    }
}
