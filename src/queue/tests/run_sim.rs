//! The 0.4 harness: one queue instance served as the shell serves it, with the lifecycle
//! checks through [`crate::queue::driver`] against a fake run DO fleet ([`Runs`]), and
//! optionally the shell's claim memo (spec-0.4 `queue.md`, `tests.md`).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use crate::config::Config;
use crate::queue::delivery::{
    claim, claim_at_most, classify, drop_expired, settle, ClaimMemo, Claimed, MemoWatch, Outcome, Rearm, Settled,
};
use crate::queue::driver::{self, LifecycleCache, QueueHost};
use crate::queue::*;
use crate::store::alarm::AlarmChange;
use crate::store::{MemoryStore, Store};
use crate::testing::block_on;
use crate::wire::Value;

use super::T0;

pub(super) const DEADLINE: i64 = 330_000;

/// A fake run DO fleet: runId → lifecycle status (unlisted: `missing`), with a call log.
#[derive(Default)]
pub(super) struct Runs {
    pub(super) status: RefCell<BTreeMap<String, String>>,
    pub(super) calls: RefCell<Vec<String>>,
    pub(super) failing: RefCell<bool>,
    /// When set, the fleet grants leases of this length to runs that are not expired or
    /// missing (as `leaseLifecycle` does); else this holder cannot lease.
    pub(super) lease_ms: Cell<Option<i64>>,
    pub(super) now: Cell<i64>,
}

impl Runs {
    pub(super) fn set(&self, run: &str, status: &str) {
        self.status.borrow_mut().insert(run.into(), status.into());
    }
    pub(super) fn calls(&self) -> usize {
        self.calls.borrow().len()
    }
}

impl QueueHost for Runs {
    async fn lifecycle_status(&self, run_id: &str) -> Result<Value, RpcError> {
        self.calls.borrow_mut().push(run_id.to_string());
        if *self.failing.borrow() {
            return Err(RpcError::error(driver::MISSING_RUNS_BINDING));
        }
        Ok(Value::str(self.status.borrow().get(run_id).map_or("missing", String::as_str)))
    }

    async fn lifecycle_lease(&self, run_id: &str) -> Result<Option<Value>, RpcError> {
        let Some(ms) = self.lease_ms.get() else { return Ok(None) };
        let status = self.lifecycle_status(run_id).await?;
        let until = match status.as_str() {
            Some("active" | "terminal") => Value::num((self.now.get() + ms) as f64),
            _ => Value::Null,
        };
        Ok(Some(Value::object([("status", status), ("leaseUntil", until)])))
    }

    fn now(&self) -> i64 {
        self.now.get()
    }
}

pub(super) struct RunSim {
    pub(super) store: MemoryStore,
    pub(super) alarm: Option<i64>,
    pub(super) now: i64,
    pub(super) config: Config,
    pub(super) runs: Runs,
    pub(super) cache: LifecycleCache,
    /// As the shell keeps it (`RunSim::with_memo`): every store goes through a [`MemoWatch`]
    /// and claims skip what the memo knows. `None`: the core alone, listing everything.
    pub(super) memo: Option<RefCell<ClaimMemo>>,
}

pub(super) fn message(id: &str, run: Option<&str>) -> Value {
    let mut m = crate::wire::Map::new();
    m.insert("messageId".into(), Value::str(id));
    m.insert("queueName".into(), Value::str("__wkf_workflow_x"));
    m.insert("pathname".into(), Value::str("flow"));
    m.insert("body".into(), Value::str("{}"));
    if let Some(r) = run {
        m.insert("runId".into(), Value::str(r));
    }
    m.insert("config".into(), Value::object([("targetBaseUrl", Value::str("http://app")), ("queueShards", Value::num(1.0))]));
    Value::Object(m)
}

pub(super) fn delayed(mut v: Value, seconds: f64) -> Value {
    if let Value::Object(m) = &mut v {
        m.insert("delaySeconds".into(), Value::num(seconds));
    }
    v
}

pub(super) fn keyed(mut v: Value, key: &str) -> Value {
    if let Value::Object(m) = &mut v {
        m.insert("idempotencyKey".into(), Value::str(key));
    }
    v
}

/// `{}`: the paged call with default options.
pub(super) fn no_options() -> Value {
    Value::Object(crate::wire::Map::new())
}

pub(super) fn json(v: &Value) -> String {
    v.to_json().unwrap()
}

impl RunSim {
    pub(super) fn new() -> RunSim {
        RunSim {
            store: MemoryStore::new(),
            alarm: None,
            now: T0,
            // The reference's QUEUE_MAX_INFLIGHT (our deployment default is 128).
            config: Config { queue_max_inflight: 5, ..Config::default() },
            runs: Runs::default(),
            cache: LifecycleCache::default(),
            memo: None,
        }
    }

    pub(super) fn with_memo() -> RunSim {
        RunSim { memo: Some(RefCell::new(ClaimMemo::default())), ..RunSim::new() }
    }

    /// One transaction on the store, through the memo's watch when there is one.
    pub(super) fn tx<T>(&mut self, mut f: impl FnMut(&mut dyn Store) -> Result<T, RpcError>) -> Result<T, RpcError> {
        let RunSim { store, memo, .. } = self;
        match memo {
            Some(memo) => store.transaction(|s| f(&mut MemoWatch::new(s, memo))),
            None => store.transaction(f),
        }
    }

    pub(super) fn apply(&mut self, change: Option<AlarmChange>) {
        match change {
            Some(AlarmChange::Set(t)) => self.alarm = Some(t),
            Some(AlarmChange::Delete) => self.alarm = None,
            None => {}
        }
    }

    /// An RPC as the shell serves it: the lifecycle checks, then one transaction.
    pub(super) fn rpc(&mut self, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        let config = self.config.clone();
        let runs = driver::runs_to_check(&mut self.store, &config, method, Args(&args))?;
        self.runs.now.set(self.now);
        let lifecycle = block_on(driver::ask(&self.runs, &self.cache, &runs))?;
        let mut alarm = Alarm::new(self.alarm);
        let ctx = Ctx { now: self.now, name: "q:0", config: &config };
        let r = self.tx(|s| call_checked(s, &ctx, &mut alarm, method, Args(&args), &lifecycle, None));
        if r.is_ok() {
            self.apply(alarm.change());
        }
        r
    }

    pub(super) fn ok(&mut self, method: &str, args: Vec<Value>) -> String {
        json(&self.rpc(method, args).expect(method))
    }

    /// [`RunSim::rpc`] as the shell's synchronous path serves it: steps of
    /// `driver::known_lifecycle`, the run DO asked between them (as the JavaScript class
    /// does) and each answer taken by `LifecycleCache::answered` with the epoch of its ask.
    pub(super) fn rpc_steps(&mut self, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        let config = self.config.clone();
        self.runs.now.set(self.now);
        let mut answered: Option<(String, bool)> = None;
        for _ in 0..3 {
            let known = answered.as_ref().map(|(run, expired)| (run.as_str(), *expired));
            match driver::known_lifecycle(&mut self.store, &config, &self.cache, method, Args(&args), self.now, known)? {
                Ok(lifecycle) => {
                    let mut alarm = Alarm::new(self.alarm);
                    let ctx = Ctx { now: self.now, name: "q:0", config: &config };
                    let r = self.tx(|s| call_checked(s, &ctx, &mut alarm, method, Args(&args), &lifecycle, None));
                    if r.is_ok() {
                        self.apply(alarm.change());
                    }
                    return r;
                }
                Err(run_id) => {
                    let epoch = self.cache.epoch();
                    let (lease, answer) = match block_on(self.runs.lifecycle_lease(&run_id))? {
                        Some(answer) => (true, answer),
                        None => (false, block_on(self.runs.lifecycle_status(&run_id))?),
                    };
                    let expired = self.cache.answered(&run_id, epoch, lease, &answer, self.now);
                    answered = Some((run_id, expired));
                }
            }
        }
        panic!("{method}: still asking after three answers");
    }

    pub(super) fn claim(&mut self, live: &dyn Fn(&str) -> bool) -> Result<Vec<Claimed>, RpcError> {
        let mut alarm = Alarm::unknown();
        let (now, config) = (self.now, self.config.clone());
        let r = match &self.memo {
            None => self.store.transaction(|s| claim(s, now, &config, &mut alarm, live)),
            Some(cell) => {
                let mut memo = cell.borrow().clone();
                let RunSim { store, memo: watched, .. } = self;
                let watched = watched.as_ref().expect("a memo");
                let r = store
                    .transaction(|s| claim_at_most(&mut MemoWatch::new(s, watched), now, &config, &mut alarm, live, usize::MAX, &mut memo));
                *watched.borrow_mut() = memo;
                r
            }
        };
        if r.is_ok() {
            self.apply(alarm.change());
        }
        r
    }

    /// A delivery as the shell runs it: the pre-delivery check, then the answer, the
    /// check before a retry / reschedule, and the settlement.
    pub(super) fn deliver(&mut self, claimed: &Claimed, outcome: Option<Outcome>) -> Settled {
        self.runs.now.set(self.now);
        let before = block_on(driver::check_row(&self.runs, &self.cache, &claimed.row)).unwrap();
        let now = self.now;
        let mut alarm = Alarm::unknown();
        let settled = if claimed.row.run_id().is_some_and(|r| before.reports_expired(&r)) {
            self.tx(|s| drop_expired(s, now, claimed, Rearm::Exact, &mut alarm)).unwrap()
        } else {
            let action = classify(&outcome.expect("an answer"));
            let lifecycle = block_on(driver::check_row(&self.runs, &self.cache, &claimed.row)).unwrap();
            let config = self.config.clone();
            self.tx(|s| settle(s, now, &config, claimed, &action, &lifecycle, Rearm::Exact, &mut alarm)).unwrap()
        };
        self.apply(alarm.change());
        settled
    }

    pub(super) fn keys(&self) -> Vec<String> {
        self.store.data.keys().cloned().collect()
    }

    pub(super) fn keys_with(&self, prefix: &str) -> Vec<String> {
        self.keys().into_iter().filter(|k| k.starts_with(prefix)).collect()
    }
}

pub(super) fn ok200() -> Option<Outcome> {
    Some(Outcome::Response { status: 200, body: None })
}
