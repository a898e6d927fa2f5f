//! `QueueDO` class: the queue core's RPC methods plus the alarm loop that delivers
//! messages over HTTP (spec `queue-do.md` §4).
//!
//! * **RPC**: `rpcCall` (synchronous, one buffered call from the alarm the class read; a
//!   run it must ask about first is asked by the class between two calls, status 3 in
//!   `serve.rs`), or `rpcAsync` (a fresh instance's first call, and the fallbacks): read
//!   the alarm if the method needs it, ask, run the core method in one `transactionSync`,
//!   then apply the alarm change right after the commit (the platform's alarm API is
//!   asynchronous and not part of the KV transaction; the set is issued before anything
//!   else can run, so no other call observes the gap).
//! * **Alarm**: a claim transaction ([`claim`]), then one HTTP POST per claimed message,
//!   concurrently, each settled in its own transaction as it finishes ([`settle`]). The
//!   handler awaits its deliveries (the object stays alive until they settle) and, while
//!   any are running, keeps claiming: whenever a delivery settles, when an RPC arms the
//!   alarm earlier (an enqueue), and when the next due time arrives, up to a per-invocation
//!   delivery budget (subrequest limits). It returns once nothing is in flight; every
//!   transition has re-armed the alarm to the next due time or in-flight deadline, so work
//!   survives eviction and restarts.
//! * An `enqueue` may claim its own message ([`Handoff`]): the guard that marks it live is
//!   taken in the same synchronous call, and the loop delivers it like a claimed message:
//!   the running one, kicked, or, with none running, one the class starts right after the
//!   call ([`QueueObject::deliver_now`]) rather than at the alarm the enqueue armed for
//!   now. That alarm still fires and stays open until the loop ends, and runs the loop
//!   itself if the start failed.
//! * Deliveries of a previous instance (the process died mid-delivery) leave `inflight:`
//!   entries that this instance does not own; the claim puts them back on the schedule at
//!   once (see [`claim`]'s `is_live`).
//!
//! Decides no queue rule ([`crate::queue`] does): it makes the requests and applies the
//! alarm changes.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use js_sys::Array;
use wasm_bindgen::prelude::*;
use worker::worker_sys::DurableObjectState;
use worker::Env;

use super::alarm::apply_alarm;
use super::call::call_env;
use super::courier::{Courier, Ended};
use super::env::config;
use super::gate::{Gate, Use};
use super::kv::{in_transaction, read_only, run_sync, ObjectStorage, Writes};
use super::post::{send, Post};
use super::serve::{
    alarm_slot, args_or_refusal, asked_answer, class_alarm, fallback_reply, go_async, lease_holder_reply, lifecycle_ask_reply, now_ms,
    result_reply,
};
use crate::admin::{DEAD_LETTERS_METHOD, HEALTH_METHOD};
use crate::config::Config;
use crate::protocol::hop::{Args, Ctx};
use crate::protocol::leases::HolderName;
use crate::protocol::partition::{share, split_partition};
use crate::queue::courier::{decode_report, encode_item, is_courier_method, SYNC_METHOD, WAKE_METHOD};
use crate::queue::delivery::{
    build_request, call_alarm_change, claim_at_most, classify, drop_expired, lease_deadline, settle, with_heartbeat, Action, ClaimMemo,
    Claimed, Handoff, MemoWatch, Outcome, Rearm, Settled,
};
use crate::queue::driver::{
    self, LifecycleCache, QueueHost, HELD_METHOD, LEASE_METHOD, LIFECYCLE_METHOD, MISSING_RUNS_BINDING, REVOKE_METHOD,
};
use crate::queue::metrics::{Counted, Metrics};
use crate::queue::pace::{
    courier_name, parse_courier_name, signal_of, Couriers, Latency, Pace, COURIER_SLOTS, DIRECT_SLOTS, GROW_AFTER_MS,
};
use crate::queue::state::{CFG_KEY, INFLIGHT_PREFIX, LEGACY_INFLIGHT_PREFIX};
use crate::queue::{self, Lifecycle};
use crate::queue::{admin as queue_admin, logs};
use crate::store::alarm::{written_at, Alarm, AlarmChange};
use crate::store::buffered::Fallback;
use crate::store::{ListOptions, Store};
use crate::wire::js::to_js_string;
use crate::wire::router::Binding;
use crate::wire::{RpcError, Value};

/// While deliveries run, look for newly due work at least this often.
const MAX_IDLE_WAIT_MS: i64 = 30_000;
/// Stop claiming new work in one alarm invocation after this long (alarm handlers have a
/// wall-clock limit); what is left is picked up by the next alarm.
const CLAIM_BUDGET_MS: i64 = 5 * 60 * 1000;
/// At most this many deliveries (outbound subrequests) per alarm invocation: the platform
/// limits subrequests per invocation (50 on the Workers Free plan). When the budget is
/// spent the loop finishes its running deliveries and returns; the alarm, armed for the
/// remaining due work, starts a fresh invocation.
const MAX_DELIVERIES_PER_ALARM: usize = 48;

/// Wakes a running alarm loop (an RPC armed the alarm earlier than it planned for).
#[derive(Default)]
struct Kick {
    fired: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Kick {
    fn fire(&self) {
        self.fired.set(true);
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }
    fn poll(&self, cx: &mut Context<'_>) -> bool {
        if self.fired.replace(false) {
            return true;
        }
        *self.waker.borrow_mut() = Some(cx.waker().clone());
        false
    }
}

/// Wakes the alarm invocations that wait for the running loop to end ([`QueueObject::alarm`]
/// while a loop that an `enqueue` started runs).
#[derive(Default)]
struct LoopEnd {
    ended: Cell<u64>,
    waiters: RefCell<Vec<Waker>>,
}

impl LoopEnd {
    fn notify(&self) {
        self.ended.set(self.ended.get().wrapping_add(1));
        for w in self.waiters.borrow_mut().drain(..) {
            w.wake();
        }
    }

    /// Resolves at the next [`notify`](Self::notify).
    async fn wait(&self) {
        let seen = self.ended.get();
        std::future::poll_fn(|cx| {
            if self.ended.get() != seen {
                return Poll::Ready(());
            }
            self.waiters.borrow_mut().push(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

/// Ends a loop when dropped (also when the future holding it is dropped): clears the
/// looping flag and wakes the alarm invocations waiting for it.
struct EndOnDrop<'a> {
    looping: &'a Cell<bool>,
    end: &'a LoopEnd,
}

impl Drop for EndOnDrop<'_> {
    fn drop(&mut self) {
        self.looping.set(false);
        self.end.notify();
    }
}

/// Courier role: the storage key holding the instance's own name (`<shard>#courier:<i>`).
const COURIER_KEY: &str = "courier:name";
/// The instance's name as its first call gave it (shard or courier), kept for the log lines
/// of an instance its alarm wakes before any call.
const NAME_KEY: &str = "name";

/// Stop a claim phase that failed: the alarm is retried this long after.
const CLAIM_FAILURE_RETRY_MS: i64 = 1000;

/// Marks one delivery (its lease) as running in this instance while it lives.
struct LiveGuard {
    live: Rc<RefCell<HashMap<String, u32>>>,
    id: String,
}

impl LiveGuard {
    fn new(live: &Rc<RefCell<HashMap<String, u32>>>, id: String) -> Self {
        *live.borrow_mut().entry(id.clone()).or_insert(0) += 1;
        LiveGuard { live: live.clone(), id }
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        let mut live = self.live.borrow_mut();
        if let Some(n) = live.get_mut(&self.id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                live.remove(&self.id);
            }
        }
    }
}

#[wasm_bindgen(js_name = QueueObject)]
pub struct QueueObject {
    storage: ObjectStorage,
    env: Env,
    /// Runs seen expired and the lifecycle leases held (the authoritative checks skip
    /// their hop).
    lifecycle: LifecycleCache,
    /// This instance's name, learnt from its first RPC: the holder name of its leases.
    name: HolderName,
    /// The deploy-time variables, read once per instance; for a partition of a client
    /// shard, with its share of the delivery limits ([`Self::learn_name`]).
    config: RefCell<Rc<Config>>,
    /// Leases with a delivery running in this instance (a count: two claims of one
    /// message in the same millisecond share a lease).
    live: Rc<RefCell<HashMap<String, u32>>>,
    kick: Rc<Kick>,
    /// Whether a delivery loop is running in this instance (started by the alarm, or by
    /// an `enqueue` that claimed its message with none running).
    looping: Cell<bool>,
    /// Notified when the loop ends.
    loop_end: LoopEnd,
    /// The alarm as last set by this instance (the loop's next wake-up).
    planned: Cell<Option<i64>>,
    /// The alarm storage holds, as far as this instance knows (`None`: not known; else
    /// `Some(None)` for none set): what lets the delivery loop skip alarm writes.
    durable: Cell<Option<Option<i64>>>,
    /// Whether this instance checked for in-flight entries left by a previous one.
    recovered: Cell<bool>,
    /// Whether this instance holds its client shard's pinned configuration (partition 0
    /// pins it for all; another partition takes it from partition 0 before its first
    /// enqueue: [`Self::share_pin`]).
    pin_known: Cell<bool>,
    /// The alarm armed to recover the in-flight entries a previous instance left, until a
    /// claim recovers them (calls keep the alarm no later: [`call_alarm_change`]).
    recovery_due: Cell<Option<i64>>,
    /// What the claims know of the fence-compaction and 0.3 claim families (every store
    /// handed to a core is a [`MemoWatch`] over it).
    memo: RefCell<ClaimMemo>,
    /// Messages an `enqueue` claimed itself ([`Handoff`]), live from that moment, for the
    /// delivery loop to take (the running one, or the one the enqueue's alarm starts).
    handed: RefCell<Vec<(Claimed, LiveGuard)>>,
    /// Whether the running loop still takes new deliveries (its per-invocation budget).
    taking: Cell<bool>,
    /// The connection gate: at most 6 outgoing requests waiting for headers at once.
    gate: Rc<Gate>,
    /// How many deliveries may run at once (in this invocation and its couriers').
    pace: RefCell<Pace>,
    /// Answer times per kind of delivery (the pace's rising-latency signal).
    latency: RefCell<Latency>,
    /// Whether the last claim took all the pace allowed (more work may wait).
    backlog: Cell<bool>,
    /// Each delivery this instance runs itself, by lease (with the loans, the deliveries
    /// running: the pace doubles while one of a kind that waits on the outside world has run
    /// [`GROW_AFTER_MS`] and work waits).
    sent_at: RefCell<HashMap<String, Sent>>,
    /// Which couriers are awake.
    couriers: RefCell<Couriers>,
    /// Claimed deliveries waiting for a courier (or a free direct slot).
    outbox: RefCell<VecDeque<(Claimed, LiveGuard)>>,
    /// Deliveries lent to couriers, by lease.
    lent: RefCell<HashMap<String, Lent>>,
    /// Courier role: whether its loop is running, and its end.
    courier_looping: Cell<bool>,
    courier_end: LoopEnd,
    /// Courier role: a wake-up asked for a loop this instance has not started yet.
    courier_woken: Cell<bool>,
    /// Deliveries made by this instance itself and by its couriers (tests, bench).
    direct_count: Cell<u64>,
    lent_count: Cell<u64>,
    /// When the delivery loop last passed (ms; diagnosis: a loop that no longer passes).
    last_pass: Cell<i64>,
    /// When this instance was made (ms; diagnosis: an instance made afresh mid-run).
    born: i64,
    /// Diagnosis: the last alarm writes (when, the time written or -1 for none, deliveries
    /// live then, why: which path decided it), the alarm invocations and RPCs this instance
    /// served.
    alarm_writes: RefCell<VecDeque<(i64, i64, usize, &'static str)>>,
    alarms_run: Cell<u32>,
    rpcs: Cell<u32>,
    /// What the operator console shows of this shard's deliveries since the instance began.
    metrics: RefCell<Metrics>,
}

/// A delivery lent to a courier: the claim, the guard that keeps it live here, and when and
/// how it was sent (for the pace).
struct Lent {
    claimed: Claimed,
    _guard: LiveGuard,
    sent: Sent,
}

/// When a running delivery was sent, its kind (queue name and path: [`Latency`]) and
/// whether it was quiet (sent with no more than the pace's floor running).
#[derive(Clone)]
struct Sent {
    at: i64,
    kind: String,
    quiet: bool,
}

/// A delivery's kind for the pace: its queue name and path.
fn kind_of(row: &queue::Row) -> String {
    format!("{} {}", to_js_string(row.member("queueName")), to_js_string(row.member("pathname")))
}

fn log_error(what: &str, e: &RpcError) {
    worker::console_error!("QueueDO {what}: {}: {}", e.name, e.message);
}

/// One operator log line ([`logs`]): a JSON object, which Workers Logs indexes.
fn log_line(line: &str) {
    worker::console_log!("{line}");
}

/// How a settled delivery counts in the shard's [`Metrics`] (`None`: not at all).
fn counted_as(action: &Action, settled: Settled) -> Option<Counted> {
    match (action, settled) {
        (_, Settled::Stale | Settled::Purged) => None,
        (Action::Ack, _) => Some(Counted::Delivered),
        (Action::Redeliver { .. }, _) => Some(Counted::Deferred),
        (Action::Refused { .. }, _) => Some(Counted::Refused),
        (Action::Retry { reason, .. }, settled) => {
            let label = reason.strip_prefix("HTTP ").map_or_else(|| "transport".to_string(), str::to_string);
            Some(Counted::Failed { label, dead: settled == Settled::DeadLettered })
        }
    }
}

fn to_rpc(e: worker::Error) -> RpcError {
    RpcError::error(e.to_string())
}

/// What a queue call's transaction knows of the runs it must check ([`QueueObject::transact`]).
#[derive(Clone, Copy)]
enum Known<'a> {
    /// The run DOs' answers (the asynchronous path asked them all).
    Asked(&'a Lifecycle),
    /// The instance's lifecycle cache, and the run its class has just asked about with
    /// whether it is expired (the synchronous path).
    Cached(Option<(&'a str, bool)>),
}

/// A queue call's transaction: its answer, or the run to ask first (nothing written).
enum Served {
    Done(Value),
    Ask(String),
}

impl QueueObject {
    /// The arguments of this shard's `leaseLifecycle` (its name), `None` until it knows its
    /// name (it cannot hold leases yet).
    fn lease_args(&self) -> Option<Vec<Value>> {
        self.name.get().map(|holder| vec![Value::String(holder)])
    }
}

impl QueueHost for QueueObject {
    async fn lifecycle_status(&self, run_id: &str) -> std::result::Result<Value, RpcError> {
        let _pass = self.gate.enter(Use::Run).await;
        let env_name = Binding::Runs.env_name();
        call_env(&self.env, env_name, || RpcError::error(MISSING_RUNS_BINDING), run_id, LIFECYCLE_METHOD, Vec::new()).await
    }

    async fn lifecycle_lease(&self, run_id: &str) -> std::result::Result<Option<Value>, RpcError> {
        let Some(args) = self.lease_args() else { return Ok(None) };
        let _pass = self.gate.enter(Use::Run).await;
        let env_name = Binding::Runs.env_name();
        call_env(&self.env, env_name, || RpcError::error(MISSING_RUNS_BINDING), run_id, LEASE_METHOD, args).await.map(Some)
    }

    fn now(&self) -> i64 {
        now_ms()
    }
}

impl QueueObject {
    /// Apply a core call's alarm change (issued synchronously, then awaited).
    async fn apply_alarm(&self, alarm: &Alarm, why: &'static str) -> std::result::Result<(), RpcError> {
        self.apply_change(alarm.change(), why).await
    }

    /// [`Self::apply_alarm`] of a change.
    async fn apply_change(&self, change: Option<AlarmChange>, why: &'static str) -> std::result::Result<(), RpcError> {
        // As written (never at or before now), so what is noted is what storage holds.
        let change = change.map(|c| c.as_written(now_ms()));
        self.note_alarm(change, why);
        let written = apply_alarm(&self.storage, change).await;
        if written.is_err() {
            self.durable.set(None);
        }
        written
    }

    /// Note an alarm change about to be written (here or, for a synchronous call, by the
    /// class right after the call).
    fn note_alarm(&self, change: Option<AlarmChange>, why: &'static str) {
        let Some(at) = change.map(AlarmChange::time) else { return };
        self.planned.set(at);
        self.durable.set(Some(at));
        let mut writes = self.alarm_writes.borrow_mut();
        writes.push_back((now_ms(), at.unwrap_or(-1), self.live.borrow().len(), why));
        if writes.len() > 4 {
            writes.pop_front();
        }
    }

    /// The alarm change a call (not the loop) leaves: while deliveries run, no later than the
    /// heartbeat, and no later than a pending recovery ([`call_alarm_change`]).
    fn call_change(&self, alarm: &Alarm) -> Option<AlarmChange> {
        call_alarm_change(alarm.change(), now_ms(), !self.live.borrow().is_empty(), self.recovery_due.get())
    }

    /// The alarm storage holds as a core call's starting point (unknown: any decision is
    /// written).
    fn held_alarm(&self) -> Alarm {
        self.durable.get().map_or_else(Alarm::unknown, Alarm::new)
    }

    /// The alarm a delivery-loop pass computed (its exact next wake-up, always known): the
    /// loop's own wake-up follows it, but storage is written only when that moves the
    /// alarm earlier, or when `exact` (the loop's last claim) and it differs. While the
    /// loop runs, an alarm earlier than needed costs at most a spurious wake-up (which
    /// claims nothing and re-arms), and every pass that could need an earlier one (a
    /// retry, a new due message) writes it; the last claim of the loop leaves the exact
    /// alarm. Writing every pass's alarm cost a platform alarm write per claim and per
    /// settle (7 % of a delivery's CPU on Miniflare: `docs/performance.md`).
    ///
    /// While deliveries run here (or at couriers), the alarm is no later than
    /// [`with_heartbeat`]'s beat: a successor of an instance that died recovers them within
    /// seconds. Once written, a beat is not moved later while the loop runs; an alarm that
    /// fires meanwhile joins the loop and the next pass writes the next beat.
    async fn apply_loop_alarm(&self, alarm: &Alarm, exact: bool) -> std::result::Result<(), RpcError> {
        let running = !self.live.borrow().is_empty();
        let want = match alarm.change() {
            Some(change) => change.time(),
            // No decision (a claim with no room): the beat still holds while deliveries run,
            // against the alarm as last written (an enqueue's lease deadline, say).
            None if running => match self.durable.get() {
                Some(held) => held,
                None => return Ok(()),
            },
            None => return Ok(()),
        };
        if alarm.change().is_some() {
            self.planned.set(want);
        }
        // Compared as written (a due time becomes now + 1), so a pass that finds work due
        // again does not rewrite the alarm an earlier pass armed for it.
        let now = now_ms();
        let want = with_heartbeat(want, now, running).map(|at| written_at(at, now));
        let mut alarm = Alarm::unknown();
        match want {
            Some(at) => alarm.set(at),
            None => alarm.delete(),
        }
        let skip = match self.durable.get() {
            None => false,
            Some(held) if held == want => true,
            Some(None) => false,
            Some(Some(held)) => !exact && want.is_none_or(|w| w >= held),
        };
        if skip {
            return Ok(());
        }
        self.apply_alarm(&alarm, if exact { "loop, exact" } else { "loop" }).await
    }

    /// A fresh instance with `inflight:` entries and no running loop: those deliveries
    /// died with the previous instance. Arm the alarm now so they are recovered promptly
    /// instead of at their deadline.
    async fn recover_once(&self) {
        if self.recovered.replace(true) || self.looping.get() {
            return;
        }
        let storage = &self.storage;
        let name = self.name.get();
        let orphans = in_transaction(storage, |s| {
            // The instance's name, for an instance its alarm wakes before any call to name its
            // shard in the operator log ([`Self::shard_label`]); written once.
            if let Some(name) = name.as_deref() {
                if s.get(NAME_KEY)?.as_deref() != Some(name) {
                    s.put(NAME_KEY, name)?;
                }
            }
            let mut any = false;
            for prefix in [INFLIGHT_PREFIX, LEGACY_INFLIGHT_PREFIX] {
                any = any || !s.list(&ListOptions::prefix(prefix).limit(1))?.is_empty();
            }
            Ok(any)
        });
        if let Ok(true) = orphans {
            let at = written_at(now_ms(), now_ms());
            self.recovery_due.set(Some(at));
            let mut alarm = Alarm::unknown();
            alarm.set(at);
            if let Err(e) = self.apply_alarm(&alarm, "recovery").await {
                log_error("recovery alarm", &e);
            }
        }
    }

    /// The alarm a method starts from: forced for `rearmAlarm`, the current one for the
    /// methods that read it, else unknown.
    fn starting_alarm(method: &str, current: Option<i64>) -> Alarm {
        match method {
            "rearmAlarm" => Alarm::forced(current),
            m if queue::reads_alarm(m) => Alarm::new(current),
            _ => Alarm::unknown(),
        }
    }

    /// Run one core method in a transaction. After a successful call a running alarm loop
    /// is kicked: it re-claims and recomputes the alarm from storage, so it picks up new
    /// work at once and corrects any alarm this call derived from a stale read (its own
    /// alarm write is issued after this call's).
    ///
    /// `writes`: how the synchronous path reaches storage (the mode the class asked for,
    /// see [`Writes`]); `None` on the asynchronous path, where this call opens a
    /// transaction.
    ///
    /// `lifecycle`: the run DOs' answers for the runs the call must check
    /// ([`Known::Asked`], the asynchronous path), or what this instance knows and the
    /// class has just asked ([`Known::Cached`], the synchronous path), which answers
    /// [`Served::Ask`] with nothing written when a run still has to be asked.
    fn transact(
        &self,
        method: &str,
        name: &str,
        args: &[Value],
        alarm: &mut Alarm,
        writes: Option<Writes>,
        lifecycle: Known,
    ) -> std::result::Result<std::result::Result<Served, RpcError>, Fallback> {
        let config = self.config.borrow().clone();
        let ctx = Ctx { now: now_ms(), name, config: &config };
        // An enqueue may claim its message for this instance when the instance can deliver
        // it: recovered, and a loop that still takes work (or none yet, which the alarm
        // starts). Not inside the class's transaction (`Direct`), whose commit comes later.
        // Within the pace too (an app that refuses has cut it below QUEUE_MAX_INFLIGHT).
        let offer = method == "enqueue"
            && writes != Some(Writes::Direct)
            && self.recovered.get()
            && (!self.looping.get() || self.taking.get())
            && self.live.borrow().len() < self.pace.borrow().limit();
        if method == "enqueue" && self.live.borrow().len() >= self.pace.borrow().limit() {
            // Work waits beyond the pace: the loop may grow it.
            self.backlog.set(true);
        }
        let mut handoff = offer.then(|| Handoff { live: self.live.borrow().len(), looping: self.looping.get(), claimed: None });
        let handoff_ref = &mut handoff;
        let mut core = |store: &mut dyn Store| {
            let known;
            let lifecycle = match lifecycle {
                Known::Asked(l) => l,
                Known::Cached(answered) => {
                    match driver::known_lifecycle(store, &config, &self.lifecycle, method, Args(args), ctx.now, answered)? {
                        Ok(l) => known = l,
                        Err(run_id) => return Ok(Served::Ask(run_id)),
                    }
                    &known
                }
            };
            queue::call_checked(store, &ctx, alarm, method, Args(args), lifecycle, handoff_ref.as_mut()).map(Served::Done)
        };
        let memo = &self.memo;
        let watched = move |store: &mut dyn Store| core(&mut MemoWatch::new(store, memo));
        let outcome = match writes {
            Some(writes) => run_sync(&self.storage, writes, watched),
            None => Ok(in_transaction(&self.storage, watched)),
        };
        if let (Ok(Ok(Served::Done(_))), Some(Handoff { claimed: Some(claimed), .. })) = (&outcome, handoff) {
            // Live before anything else runs: no claim may take it for lost.
            let guard = LiveGuard::new(&self.live, claimed.lease.clone());
            self.handed.borrow_mut().push((claimed, guard));
        }
        let kicks = matches!(method, "enqueue" | "redriveDeadLetter" | "rearmAlarm" | "expireRun" | "acknowledgeExpireRun");
        if self.looping.get() && matches!(outcome, Ok(Ok(Served::Done(_)))) && kicks {
            self.kick.fire();
        }
        outcome
    }

    async fn rpc(&self, method: &str, name: &str, body: &[u8]) -> Array {
        self.rpcs.set(self.rpcs.get() + 1);
        self.learn_name(name);
        let args = match args_or_refusal(body) {
            Ok(a) => a,
            Err(refusal) => return refusal,
        };
        if method == HEALTH_METHOD {
            let alarm = self.storage.get_alarm().await.map_err(to_rpc);
            return result_reply(alarm.and_then(|at| self.health(name, at)), f64::NAN);
        }
        if let Some(answer) = self.admin_answer(method, &args) {
            return result_reply(answer, f64::NAN);
        }
        self.recover_once().await;
        if is_courier_method(method) {
            let result = if method == SYNC_METHOD { self.courier_sync(&args).await } else { self.courier_wake(name).await };
            return result_reply(result, f64::NAN);
        }
        let current = if queue::reads_alarm(method) {
            match self.storage.get_alarm().await {
                Ok(a) => a,
                Err(e) => return result_reply(Err(to_rpc(e)), f64::NAN),
            }
        } else {
            None
        };
        if method == "enqueue" {
            if let Err(e) = self.share_pin(name, &args).await {
                return result_reply(Err(e), f64::NAN);
            }
        }
        let lifecycle = match self.ask_lifecycle(method, &args).await {
            Ok(l) => l,
            Err(e) => return result_reply(Err(e), f64::NAN),
        };
        let mut alarm = Self::starting_alarm(method, current);
        let result = match self.transact(method, name, &args, &mut alarm, None, Known::Asked(&lifecycle)) {
            Ok(Ok(Served::Done(v))) => self.apply_change(self.call_change(&alarm), "call").await.map(|()| v),
            Ok(Ok(Served::Ask(_))) => Err(RpcError::error("queue lifecycle check did not run")),
            Ok(Err(e)) => Err(e),
            // Not produced without a mode (`in_transaction` above).
            Err(_) => Err(RpcError::error("queue call did not run in its transaction")),
        };
        result_reply(result, f64::NAN)
    }

    /// A partition other than 0 takes its client shard's pinned configuration from
    /// partition 0 before its first enqueue (`pinShards`, which pins it first when nothing
    /// is), so that the enqueue's shard-count check compares with the one pin of the
    /// whole client shard: once in an instance's life, nothing when it has one.
    async fn share_pin(&self, name: &str, args: &[Value]) -> std::result::Result<(), RpcError> {
        let (shard, p) = split_partition(name);
        if self.pin_known.get() || p == 0 || parse_courier_name(name).is_some() {
            return Ok(());
        }
        if read_only(&self.storage, |s| Ok(s.get(CFG_KEY)?.is_some()))? {
            self.pin_known.set(true);
            return Ok(());
        }
        // A request that is not an object is refused by the enqueue itself.
        let Some(Value::Object(request)) = args.first() else { return Ok(()) };
        let config = request.get("config").cloned().unwrap_or(Value::Null);
        let missing = || RpcError::error(format!("missing binding {}", Binding::Queue.env_name()));
        let answer = {
            let _pass = self.gate.enter(Use::Queue).await;
            call_env(&self.env, Binding::Queue.env_name(), missing, shard, queue::PIN_METHOD, vec![config]).await?
        };
        let cell = answer.get("cell").cloned().unwrap_or(Value::Null);
        in_transaction(&self.storage, |s| queue::methods::adopt_pin(s, Args(&[cell])))?;
        self.pin_known.set(true);
        Ok(())
    }

    /// The run DOs' answers for the runs `method` must check (a read, then the hops).
    async fn ask_lifecycle(&self, method: &str, args: &[Value]) -> std::result::Result<Lifecycle, RpcError> {
        // Reads only: no transaction needed.
        let config = self.config.borrow().clone();
        let runs = read_only(&self.storage, |s| driver::runs_to_check(s, &config, method, Args(args)))?;
        driver::ask(self, &self.lifecycle, &runs).await
    }

    /// The run check before a delivery / retry / rescheduling of `row` (a failed call
    /// counts as "not expired", logged).
    async fn check_row(&self, row: &queue::Row) -> Lifecycle {
        driver::check_row(self, &self.lifecycle, row).await.unwrap_or_else(|e| {
            log_error("lifecycle check", &e);
            Lifecycle::unknown()
        })
    }

    /// This shard's name for the log lines: learnt from a call, else as a call stored it
    /// ([`NAME_KEY`]), else empty.
    fn shard_label(&self) -> String {
        self.name.get().or_else(|| read_only(&self.storage, |s| s.get(NAME_KEY)).ok().flatten()).unwrap_or_default()
    }

    /// The operator console's dead-letter page (`adminDeadLetters(limit, cursor)`, an
    /// internal method reached only through `/v1/admin/…`); `None` for any other method.
    fn admin_answer(&self, method: &str, args: &[Value]) -> Option<std::result::Result<Value, RpcError>> {
        match method {
            DEAD_LETTERS_METHOD => {
                let limit = args.first().and_then(Value::as_f64).filter(|n| n.fract() == 0.0 && *n >= 0.0 && *n <= 1e6).unwrap_or(0.0);
                let cursor = args.get(1).and_then(Value::as_str);
                Some(read_only(&self.storage, |s| queue_admin::dead_letters(s, limit as usize, cursor)))
            }
            _ => None,
        }
    }

    /// `adminHealth()` (internal, `/v1/admin/queues`): this shard's counts from storage
    /// ([`queue_admin::health`]) and its alarm, with what the instance knows in memory (pace,
    /// couriers, deliveries since it began).
    fn health(&self, name: &str, alarm: Option<i64>) -> std::result::Result<Value, RpcError> {
        let now = now_ms();
        let stored = read_only(&self.storage, |s| queue_admin::health(s, now))?;
        let pace = self.pace.borrow();
        let alarm = alarm.map_or(Value::Null, |at| Value::num(at as f64));
        Ok(Value::object([
            ("shard", Value::str(name)),
            ("since", Value::num(self.born as f64)),
            ("messages", stored.get("messages").cloned().unwrap_or(Value::Null)),
            ("oldestDueAgeMs", stored.get("oldestDueAgeMs").cloned().unwrap_or(Value::Null)),
            ("alarmAt", alarm),
            ("running", Value::num(self.live.borrow().len() as f64)),
            (
                "pace",
                Value::object([
                    ("now", Value::num(pace.limit() as f64)),
                    ("floor", Value::num(pace.floor() as f64)),
                    ("ceiling", Value::num(pace.ceiling() as f64)),
                ]),
            ),
            ("couriersAwake", Value::num(self.couriers.borrow().awake() as f64)),
            ("deliveries", self.metrics.borrow().snapshot(now)),
        ]))
    }

    fn is_live(&self, lease: &str) -> bool {
        self.live.borrow().get(lease).is_some_and(|n| *n > 0)
    }

    /// One claim transaction. Each claimed message comes with the guard that marks its
    /// delivery as running in this instance until it is dropped. A failed claim phase
    /// sets the alarm to now + 1000 ms.
    async fn claim_pass(&self, cfg: &Config, limit: usize, exact: bool) -> std::result::Result<Vec<(Claimed, LiveGuard)>, RpcError> {
        let storage = &self.storage;
        let mut alarm = Alarm::unknown();
        let now = now_ms();
        let mut memo = self.memo.borrow().clone();
        let claimed = in_transaction(storage, |s| {
            claim_at_most(&mut MemoWatch::new(s, &self.memo), now, cfg, &mut alarm, &|lease| self.is_live(lease), limit, &mut memo)
        });
        // What the claim listed holds even when it rolled back (see `ClaimMemo`).
        *self.memo.borrow_mut() = memo;
        let claims = match claimed {
            Ok(c) => {
                // It recovered what a previous instance left (the rest, if any, it rearmed for).
                self.recovery_due.set(None);
                let recovered = self.memo.borrow().recovered;
                if recovered > 0 {
                    log_line(&logs::claims_recovered(&self.shard_label(), recovered));
                }
                c
            }
            Err(e) => {
                let mut retry = Alarm::unknown();
                retry.set(now.saturating_add(CLAIM_FAILURE_RETRY_MS));
                if let Err(e) = self.apply_alarm(&retry, "failed claim").await {
                    log_error("alarm after a failed claim", &e);
                }
                return Err(e);
            }
        };
        let claimed: Vec<(Claimed, LiveGuard)> = claims
            .into_iter()
            .map(|c| {
                let guard = LiveGuard::new(&self.live, c.lease.clone());
                (c, guard)
            })
            .collect();
        if let Err(e) = self.apply_loop_alarm(&alarm, exact).await {
            log_error("alarm after claim", &e);
        }
        Ok(claimed)
    }

    /// The run check before a delivery: a message of a run its run DO reports expired is
    /// dropped (true) instead of sent.
    async fn dropped_expired(&self, claimed: &Claimed) -> bool {
        let before = self.check_row(&claimed.row).await;
        if !claimed.row.run_id().is_some_and(|r| before.reports_expired(&r)) {
            return false;
        }
        let mut alarm = self.held_alarm();
        match in_transaction(&self.storage, |s| {
            drop_expired(&mut MemoWatch::new(s, &self.memo), now_ms(), claimed, Rearm::Earlier, &mut alarm)
        }) {
            Ok(_) => {
                if let Err(e) = self.apply_loop_alarm(&alarm, false).await {
                    log_error("alarm after an expired drop", &e);
                }
            }
            Err(e) => log_error("expired drop", &e),
        }
        true
    }

    /// A delivery sent now: whether it is quiet (no more than the pace's floor running,
    /// itself included).
    fn sending(&self, row: &queue::Row) -> Sent {
        let running = self.sent_at.borrow().len() + self.lent.borrow().len();
        Sent { at: now_ms(), kind: kind_of(row), quiet: running < self.pace.borrow().floor() }
    }

    /// Settle one delivery's outcome (a retry or 503 rescheduling asks the run again) and
    /// feed the pace. The guard is dropped by the caller afterwards.
    async fn settle_outcome(&self, claimed: &Claimed, sent: &Sent, outcome: &Outcome) {
        let cfg = self.config.borrow().clone();
        let action = classify(outcome);
        let lifecycle = if action == Action::Ack { Lifecycle::unknown() } else { self.check_row(&claimed.row).await };
        let now = now_ms();
        let started = sent.at;
        // Only work the app did counts for latency (2xx): a refusal, an error or the
        // runtime's `503 {timeoutSeconds}` wait comes back in milliseconds.
        let signal = signal_of(outcome);
        let served = matches!(outcome, Outcome::Response { status: 200..=299, .. });
        let rising = served && self.latency.borrow_mut().rising(&sent.kind, now.saturating_sub(started), sent.quiet);
        let before = self.pace.borrow().limit();
        if let Outcome::Refused { .. } = outcome {
            // Sent and not answered, this one left out.
            let in_flight = self.live.borrow().len().saturating_sub(self.outbox.borrow().len() + 1);
            self.pace.borrow_mut().refused(in_flight, now);
        } else {
            self.pace.borrow_mut().observe_answer(signal, rising, started, now);
        }
        let after = self.pace.borrow().limit();
        let shard = self.shard_label();
        if after < before {
            let reason = match outcome {
                Outcome::Refused { .. } => "refused (429)".to_string(),
                Outcome::Transport(_) => "transport error or timeout".to_string(),
                Outcome::Response { status, .. } if !(200..=299).contains(status) => format!("HTTP {status}"),
                Outcome::Response { .. } => "rising latency".to_string(),
            };
            log_line(&logs::pace_cut(&shard, before, after, &reason));
        }
        // Only a retry moves the alarm (earlier); the loop's next claim computes it exactly.
        let mut alarm = self.held_alarm();
        let settled = in_transaction(&self.storage, |s| {
            settle(&mut MemoWatch::new(s, &self.memo), now, &cfg, claimed, &action, &lifecycle, Rearm::Earlier, &mut alarm)
        });
        match settled {
            Ok(settled) => {
                if let Some(counted) = counted_as(&action, settled) {
                    self.metrics.borrow_mut().record(now, &sent.kind, now.saturating_sub(started), &counted);
                }
                for line in logs::settled(&shard, &claimed.row, &action, settled, now) {
                    log_line(&line);
                }
                if let Err(e) = self.apply_loop_alarm(&alarm, false).await {
                    log_error("alarm after delivery", &e);
                }
            }
            // The message stays in flight; the next claim (or its deadline) recovers it.
            Err(e) => log_error("settle", &e),
        }
    }

    /// Deliver one claimed message in this invocation and settle the outcome. A message of
    /// a run its run DO reports expired is dropped before the POST.
    async fn deliver(&self, claimed: Claimed, guard: LiveGuard, cfg: Rc<Config>) {
        if self.dropped_expired(&claimed).await {
            drop(guard);
            return;
        }
        self.direct_count.set(self.direct_count.get() + 1);
        let request = build_request(&claimed.row, &cfg);
        let timeout = cfg.queue_delivery_timeout_ms.min(crate::config::MAX_QUEUE_DELIVERY_TIMEOUT_MS);
        let post =
            Post { url: &request.url, headers: request.headers.iter().map(|(k, v)| (*k, v.as_str())).collect(), body: &request.body };
        let sent = self.sending(&claimed.row);
        self.sent_at.borrow_mut().insert(claimed.lease.clone(), sent.clone());
        let outcome = send(&self.gate, &post, timeout).await;
        self.sent_at.borrow_mut().remove(&claimed.lease);
        self.settle_outcome(&claimed, &sent, &outcome).await;
        drop(guard);
    }

    /// Put handed-over messages no courier took back on the schedule, due now, with no
    /// attempt or loss counted (a 503 `{timeoutSeconds: 0}` settlement): the loop that
    /// claimed them is ending.
    async fn unclaim_outbox(&self) {
        let left: Vec<(Claimed, LiveGuard)> = self.outbox.borrow_mut().drain(..).collect();
        for (claimed, guard) in left {
            let sent = Sent { at: now_ms(), kind: kind_of(&claimed.row), quiet: false };
            self.settle_outcome(&claimed, &sent, &Outcome::Response { status: 503, body: Some(br#"{"timeoutSeconds":0}"#.to_vec()) }).await;
            drop(guard);
        }
    }

    /// Wake couriers for the handed-over messages waiting (as many as they need).
    /// Returns how many calls it made.
    async fn wake_couriers(&self) -> usize {
        let Some(shard) = self.name.get() else { return 0 };
        let woken = self.couriers.borrow_mut().to_wake(self.outbox.borrow().len(), now_ms());
        for (index, silent) in self.couriers.borrow_mut().take_lost() {
            log_line(&logs::courier_lost(&shard, index, silent));
        }
        let calls = woken.iter().map(|&index| {
            let name = courier_name(&shard, index);
            async move {
                let _pass = self.gate.enter(Use::Queue).await;
                let env_name = Binding::Queue.env_name();
                let woke =
                    call_env(&self.env, env_name, || RpcError::error("missing binding WORKFLOW_QUEUE"), &name, WAKE_METHOD, Vec::new())
                        .await;
                if let Err(e) = woke {
                    log_error(&format!("courier {name} wake-up"), &e);
                    self.couriers.borrow_mut().failed(index);
                }
            }
        });
        let count = woken.len();
        futures_util::future::join_all(calls).await;
        count
    }

    /// `courierSync(index, reports, want, running)` from courier `index`: settle the
    /// deliveries it reports, lend it up to `want` more, and note whether it is done.
    async fn courier_sync(&self, args: &[Value]) -> std::result::Result<Value, RpcError> {
        let number = |i: usize| args.get(i).and_then(Value::as_f64).filter(|n| n.is_finite() && *n >= 0.0).map(|n| n as usize);
        let (Some(index), Some(want), Some(running)) = (number(0), number(2), number(3)) else {
            return Err(RpcError::type_error("courierSync(index, reports, want, running)"));
        };
        for report in args.get(1).and_then(Value::as_array).into_iter().flatten() {
            let Some((lease, outcome)) = decode_report(report) else { continue };
            // Unknown: lent by an earlier instance; its claim is recovered as lost.
            let Some(lent) = self.lent.borrow_mut().remove(&lease) else { continue };
            self.settle_outcome(&lent.claimed, &lent.sent, &outcome).await;
        }
        let mut items = Vec::new();
        while items.len() < want.min(COURIER_SLOTS) {
            let Some((claimed, guard)) = self.outbox.borrow_mut().pop_front() else { break };
            if self.dropped_expired(&claimed).await {
                continue;
            }
            items.push(encode_item(&claimed.lease, &build_request(&claimed.row, &self.config.borrow())));
            self.lent_count.set(self.lent_count.get() + 1);
            let sent = self.sending(&claimed.row);
            self.lent.borrow_mut().insert(claimed.lease.clone(), Lent { claimed, _guard: guard, sent });
        }
        let done = items.is_empty() && running == 0;
        self.couriers.borrow_mut().heard(index, now_ms(), done);
        if self.looping.get() {
            self.kick.fire();
        }
        let more = !self.outbox.borrow().is_empty();
        Ok(Value::object([("items", Value::Array(items)), ("more", Value::Bool(more))]))
    }

    /// Courier role: `courierWake()` from its shard. Notes the shard (once, in storage, so
    /// that an alarm on a fresh instance knows it) and arms the alarm, which runs the loop
    /// if the one the class starts after this call does not.
    async fn courier_wake(&self, name: &str) -> std::result::Result<Value, RpcError> {
        if parse_courier_name(name).is_none() {
            return Err(RpcError::type_error(format!("{name} is not a courier")));
        }
        let stored = read_only(&self.storage, |s| s.get(COURIER_KEY))?;
        if stored.as_deref() != Some(name) {
            in_transaction(&self.storage, |s| s.put(COURIER_KEY, name))?;
        }
        if !self.courier_looping.get() {
            self.courier_woken.set(true);
            let mut alarm = Alarm::unknown();
            alarm.set(now_ms());
            self.apply_alarm(&alarm, "courier wake").await?;
        }
        Ok(Value::Bool(true))
    }

    /// Courier role: this instance's shard and index, from its name or (a fresh instance
    /// woken by its alarm) storage.
    fn courier_role(&self) -> Option<(String, usize)> {
        let name = self.name.get().or_else(|| read_only(&self.storage, |s| s.get(COURIER_KEY)).ok().flatten())?;
        parse_courier_name(&name).map(|(shard, index)| (shard.to_string(), index))
    }

    /// Remember this instance's name (its first call's); a partition of a client shard
    /// (`QUEUE_PARTITIONS` above 1) then runs its share of `QUEUE_MAX_INFLIGHT` and
    /// `QUEUE_MIN_INFLIGHT` ([`crate::protocol::partition::share`]), so the deployment's
    /// limits stay the operator's. Couriers carry what their shard lends and keep theirs.
    fn learn_name(&self, name: &str) {
        if self.name.get().is_some() || name.is_empty() {
            return;
        }
        self.name.learn(name);
        if parse_courier_name(name).is_some() {
            return;
        }
        let cfg = config(&self.env);
        let Ok(count) = cfg.queue_partitions() else { return };
        let (_, p) = split_partition(name);
        if count <= 1 && p == 0 {
            return;
        }
        let max = share(cfg.max_inflight().unwrap_or(1), count, p);
        let min = share(cfg.queue_min_inflight, count, p).min(max);
        *self.pace.borrow_mut() = Pace::new(min, max);
        *self.config.borrow_mut() = Rc::new(Config { queue_max_inflight: max, queue_min_inflight: min, ..cfg });
    }

    /// Courier role: run the loop once (the wake-up's, or the alarm's).
    async fn courier_loop(&self) {
        let Some((shard, index)) = self.courier_role() else { return };
        self.courier_woken.set(false);
        self.courier_looping.set(true);
        let _end = EndOnDrop { looping: &self.courier_looping, end: &self.courier_end };
        let timeout = self.config.borrow().queue_delivery_timeout_ms.min(crate::config::MAX_QUEUE_DELIVERY_TIMEOUT_MS);
        let courier = Courier { env: &self.env, gate: &self.gate, shard: &shard, index, timeout_ms: timeout };
        match courier.run().await {
            Ended::Idle | Ended::Budget => {}
            Ended::Unreachable => worker::console_error!("courier {shard}#{index}: shard unreachable, ending"),
        }
    }

    /// The delivery loop. `from_alarm`: the platform runs the alarm (what storage holds is
    /// not known, and the loop claims first); else an `enqueue` started it for the message
    /// it claimed, whose alarm (armed now) is left to fire and join the loop: the first
    /// pass only takes the handed messages, so no exact claim alarm replaces that one.
    async fn run_loop(&self, from_alarm: bool) -> std::result::Result<(), JsValue> {
        let cfg = self.config.borrow().clone();
        let started = now_ms();
        let mut running: FuturesUnordered<Pin<Box<dyn Future<Output = ()> + '_>>> = FuturesUnordered::new();
        let mut first = true;
        let mut delivered = 0usize;
        if from_alarm {
            self.durable.set(None);
        }
        loop {
            self.last_pass.set(now_ms());
            let can_claim = now_ms().saturating_sub(started) < CLAIM_BUDGET_MS && delivered < MAX_DELIVERIES_PER_ALARM;
            let idle = |running: usize| running == 0 && self.outbox.borrow().is_empty() && self.lent.borrow().is_empty();
            let mut claimed = Vec::new();
            if can_claim && (from_alarm || !first) {
                // As many as the pace allows beside those running here and at couriers.
                let room = self.pace.borrow().limit().saturating_sub(self.live.borrow().len());
                // With nothing running this claim may be the loop's last: its alarm is exact.
                match self.claim_pass(&cfg, room, idle(running.len())).await {
                    Ok(rows) => {
                        if room > 0 {
                            self.backlog.set(rows.len() == room);
                        }
                        claimed = rows;
                    }
                    // Storage failure in the first claim: let the platform retry the alarm.
                    Err(e) if first => {
                        log_error("claim", &e);
                        return Err(JsValue::from_str(&format!("{}: {}", e.name, e.message)));
                    }
                    Err(e) => log_error("claim", &e),
                }
            }
            claimed.extend(self.handed.borrow_mut().drain(..));
            self.outbox.borrow_mut().extend(claimed);
            // The first few in this invocation (a run's first step starts as soon as
            // before), the rest by couriers, each in an invocation of its own.
            while running.len() < DIRECT_SLOTS && delivered < MAX_DELIVERIES_PER_ALARM {
                let Some((claimed, guard)) = self.outbox.borrow_mut().pop_front() else { break };
                delivered += 1;
                running.push(Box::pin(self.deliver(claimed, guard, cfg.clone())));
            }
            // A courier that died holds its loans until their leases' deadlines.
            let now = now_ms();
            self.lent.borrow_mut().retain(|lease, _| lease_deadline(lease) > now);
            if !self.outbox.borrow().is_empty() {
                if delivered < MAX_DELIVERIES_PER_ALARM {
                    delivered += self.wake_couriers().await;
                } else if self.couriers.borrow().awake() == 0 {
                    // No call left in this invocation and no courier to take them: due
                    // again at once, for the next invocation.
                    self.unclaim_outbox().await;
                }
            }
            self.taking.set(now_ms().saturating_sub(started) < CLAIM_BUDGET_MS && delivered < MAX_DELIVERIES_PER_ALARM);
            first = false;
            if idle(running.len()) {
                // At rest: the next burst starts again at the floor.
                if !self.backlog.get() {
                    self.pace.borrow_mut().rest();
                }
                break;
            }
            // Work waits and a delivery running has run a while, of a kind that takes that
            // long even when few run: they wait on the outside world, so the pace may double
            // (the next pass claims the room).
            let growing = self.backlog.get() && can_claim;
            let now = now_ms();
            // Looked at only when work waits (the loop passes once per settled delivery).
            let waiting_outside = || {
                let latency = self.latency.borrow();
                let long = |s: &Sent| now.saturating_sub(s.at) >= GROW_AFTER_MS && latency.waits_outside(&s.kind);
                self.sent_at.borrow().values().any(long) || self.lent.borrow().values().any(|l| long(&l.sent))
            };
            if growing && waiting_outside() {
                self.pace.borrow_mut().grow(now);
            }
            // Wait for a delivery to settle, a kick (an enqueue, a courier's report), or
            // (when a slot is free) the next planned wake-up. With every slot busy only a
            // settled delivery frees room; the idle wait still looks at the couriers.
            let full = !can_claim || self.live.borrow().len() >= self.pace.borrow().limit();
            let wait_ms = match self.planned.get() {
                _ if full && growing => GROW_AFTER_MS,
                Some(at) if !full => at.saturating_sub(now_ms()).clamp(1, MAX_IDLE_WAIT_MS),
                _ => MAX_IDLE_WAIT_MS,
            };
            let mut timer = Some(worker::Delay::from(Duration::from_millis(wait_ms as u64)));
            let kick = self.kick.clone();
            std::future::poll_fn(|cx| {
                let mut woke = false;
                while let Poll::Ready(Some(())) = running.poll_next_unpin(cx) {
                    woke = true;
                }
                let timer_fired = timer.as_mut().is_some_and(|t| Pin::new(t).poll(cx).is_ready());
                if kick.poll(cx) || timer_fired {
                    woke = true;
                }
                if woke {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            })
            .await;
        }
        Ok(())
    }
}

#[wasm_bindgen(js_class = QueueObject)]
impl QueueObject {
    #[wasm_bindgen(constructor)]
    pub fn new(state: DurableObjectState, env: Env) -> QueueObject {
        let cfg = config(&env);
        QueueObject {
            storage: ObjectStorage::of(state),
            env: env.clone(),
            lifecycle: LifecycleCache::default(),
            name: HolderName::default(),
            live: Rc::new(RefCell::new(HashMap::new())),
            kick: Rc::new(Kick::default()),
            looping: Cell::new(false),
            loop_end: LoopEnd::default(),
            planned: Cell::new(None),
            durable: Cell::new(None),
            recovered: Cell::new(false),
            pin_known: Cell::new(false),
            recovery_due: Cell::new(None),
            memo: RefCell::new(ClaimMemo::default()),
            handed: RefCell::new(Vec::new()),
            taking: Cell::new(false),
            gate: Rc::new(Gate::default()),
            pace: RefCell::new(Pace::new(cfg.queue_min_inflight, cfg.max_inflight().unwrap_or(1))),
            latency: RefCell::new(Latency::default()),
            backlog: Cell::new(false),
            sent_at: RefCell::new(HashMap::new()),
            couriers: RefCell::new(Couriers::default()),
            outbox: RefCell::new(VecDeque::new()),
            lent: RefCell::new(HashMap::new()),
            courier_looping: Cell::new(false),
            courier_end: LoopEnd::default(),
            courier_woken: Cell::new(false),
            direct_count: Cell::new(0),
            lent_count: Cell::new(0),
            last_pass: Cell::new(0),
            born: now_ms(),
            alarm_writes: RefCell::new(VecDeque::new()),
            alarms_run: Cell::new(0),
            rpcs: Cell::new(0),
            metrics: RefCell::new(Metrics::new(now_ms())),
            config: RefCell::new(Rc::new(cfg)),
        }
    }

    /// The methods for which `rpcCall` needs the current alarm, comma-separated (read once
    /// by the class).
    #[wasm_bindgen(js_name = alarmReaders)]
    pub fn alarm_readers() -> String {
        queue::ALARM_READERS.join(",")
    }

    /// One RPC served synchronously: `[status, body, alarm]` (see `serve.rs`); status 3 when
    /// a run must be asked first (its lifecycle lease, as `run_is_expired` asks; nothing
    /// written), `asked` being the class's answer to that ask on the next call; status 0
    /// until this instance has looked for deliveries a previous one left in flight
    /// (`rpcAsync` does that first). `current` is the alarm the class read before the call
    /// for the [`alarm readers`](Self::alarm_readers) (`-1` none set), else `NaN`.
    #[wasm_bindgen(js_name = rpcCall)]
    pub fn rpc_call(&self, method: &str, name: &str, body: &[u8], direct: bool, current: f64, asked: JsValue) -> Array {
        self.rpcs.set(self.rpcs.get() + 1);
        if let Some(reply) = lease_holder_reply(&self.lifecycle, method, body) {
            return reply;
        }
        self.learn_name(name);
        let current = class_alarm(current);
        // The couriers' methods await other objects and storage, the health reads the alarm:
        // the asynchronous path.
        if is_courier_method(method)
            || method == HEALTH_METHOD
            || !self.recovered.get()
            || (method == "enqueue" && !self.pin_known.get() && split_partition(name).1 > 0)
            || (queue::reads_alarm(method) && current.is_none())
        {
            return go_async();
        }
        let args = match args_or_refusal(body) {
            Ok(a) => a,
            Err(refusal) => return refusal,
        };
        if let Some(answer) = self.admin_answer(method, &args) {
            return result_reply(answer, f64::NAN);
        }
        // The answer to the previous step's ask, taken as `run_is_expired` takes one after
        // its await (a lease kept unless a revocation came in since the tag's epoch).
        let asked = asked_answer(&asked, Binding::Runs.env_name()).map(|a| a.into_lifecycle(&self.lifecycle, now_ms()));
        let answered = match asked.transpose() {
            Ok(answered) => answered,
            Err(e) => return result_reply(Err(e), f64::NAN),
        };
        let answered = answered.as_ref().map(|(run_id, expired)| (run_id.as_str(), *expired));
        let mut alarm = Self::starting_alarm(method, current.flatten());
        let writes = Writes::of(method, &queue::READ_ONLY, direct);
        let result = match self.transact(method, name, &args, &mut alarm, Some(writes), Known::Cached(answered)) {
            Ok(Ok(Served::Done(v))) => Ok(v),
            // A run must be asked first: nothing was written; the class asks it.
            Ok(Ok(Served::Ask(run_id))) => return lifecycle_ask_reply(&self.lifecycle, &run_id, self.lease_args()),
            Ok(Err(e)) => Err(e),
            Err(fallback) => return fallback_reply(&fallback),
        };
        let change = self.call_change(&alarm).map(|c| c.as_written(now_ms()));
        if result.is_ok() {
            // The class writes it right after this call (and calls `forgetAlarm` if that fails).
            self.note_alarm(change, "sync call");
        }
        result_reply(result, alarm_slot(change))
    }

    /// The methods that never write, comma-separated (see `serve.rs`).
    #[wasm_bindgen(js_name = readOnly)]
    pub fn read_only() -> String {
        // The lease methods touch no storage.
        let mut methods = queue::READ_ONLY.to_vec();
        methods.extend([REVOKE_METHOD, HELD_METHOD]);
        methods.join(",")
    }

    /// One RPC: `[status, body, alarm]` (the alarm already applied; see `serve.rs`).
    #[wasm_bindgen(js_name = rpcAsync)]
    pub async fn rpc_async(&self, method: String, name: String, body: Vec<u8>) -> Array {
        self.rpc(&method, &name, &body).await
    }

    /// Diagnosis (`CELLD_TRACE_ALARMS`, entry.mjs): why the alarm about to be written was
    /// decided — the last noted write's reason, with the deliveries live and whether the loop
    /// runs.
    #[wasm_bindgen(js_name = alarmWhy)]
    pub fn alarm_why(&self) -> String {
        let why = self.alarm_writes.borrow().back().map_or("unnoted", |w| w.3);
        format!("{why}; live {}; looping {}; durable {:?}", self.live.borrow().len(), self.looping.get(), self.durable.get())
    }

    /// The class could not write the alarm a synchronous call asked for: what storage
    /// holds is no longer known.
    #[wasm_bindgen(js_name = forgetAlarm)]
    pub fn forget_alarm(&self) {
        self.durable.set(None);
    }

    /// The delivery loop. Throws only when its first claim fails (the platform retries).
    pub async fn alarm(&self) -> std::result::Result<(), JsValue> {
        self.alarms_run.set(self.alarms_run.get() + 1);
        // An instance its alarm woke knows its name from storage (a partition's share).
        if self.name.get().is_none() {
            if let Ok(Some(name)) = read_only(&self.storage, |s| s.get(NAME_KEY)) {
                self.learn_name(&name);
            }
        }
        if self.courier_role().is_some() {
            // A courier: its loop (the one its wake-up started, if running).
            if self.courier_looping.get() {
                self.courier_end.wait().await;
            } else {
                self.courier_loop().await;
            }
            return Ok(());
        }
        if self.looping.get() {
            // A loop is already running in this instance (an enqueue started it): let it
            // pick up the work and write its next alarm (the platform counts this
            // invocation's as handled), and keep this invocation open until it ends, so the
            // deliveries run inside an alarm handler as the loop's own do.
            self.durable.set(None);
            self.kick.fire();
            self.loop_end.wait().await;
            return Ok(());
        }
        self.recovered.set(true);
        self.looping.set(true);
        let _end = EndOnDrop { looping: &self.looping, end: &self.loop_end };
        self.run_loop(true).await
    }

    /// Courier role: whether a wake-up asked for a loop not yet running (the class then
    /// calls [`courier_run`](Self::courier_run) after answering it).
    #[wasm_bindgen(js_name = startsCourier)]
    pub fn starts_courier(&self) -> bool {
        self.courier_woken.get() && !self.courier_looping.get()
    }

    /// Courier role: the loop, started by the class right after the wake-up that asked for
    /// it (the alarm the wake-up armed waits for it, or runs it if this start failed).
    #[wasm_bindgen(js_name = courierRun)]
    pub async fn courier_run(&self) {
        if self.starts_courier() {
            self.courier_loop().await;
        }
    }

    /// Internal (tests and the bench): what this instance's deliveries asked of the
    /// platform, as JSON: `peakConnections` (the most outgoing requests waiting for
    /// headers at once, never above 6), `queuedConnections` (those that waited for a
    /// place), `connections`, `direct` (deliveries made here), `lent` (given to couriers),
    /// `pace` (the concurrency limit now), `awakeCouriers`; and for a diagnosis:
    /// `bornAgoMs` (since this instance was made), `recovered`, `alarmsRun`, `rpcs` (a
    /// synchronous call that falls back to the asynchronous path counts twice),
    /// `alarmWrites` (the last four: [ms ago, ms ahead of then or -1, deliveries live, why]),
    /// `looping` (a delivery or courier loop),
    /// `lastPassAgoMs` (since the delivery loop's last pass, -1 for never), `live`,
    /// `sending`, `lending`, `outbox`, `held` (the connections waiting for headers, by
    /// use) and `oldestHeldMs`.
    #[wasm_bindgen(js_name = deliveryStats)]
    pub fn delivery_stats(&self) -> String {
        let (held, oldest) = self.gate.held();
        let stats = Value::object([
            ("peakConnections", Value::num(self.gate.peak.get() as f64)),
            ("queuedConnections", Value::num(self.gate.queued.get() as f64)),
            ("connections", Value::num(self.gate.taken.get() as f64)),
            ("busyConnections", Value::num(self.gate.busy() as f64)),
            ("direct", Value::num(self.direct_count.get() as f64)),
            ("lent", Value::num(self.lent_count.get() as f64)),
            ("pace", Value::num(self.pace.borrow().limit() as f64)),
            ("awakeCouriers", Value::num(self.couriers.borrow().awake() as f64)),
            ("bornAgoMs", Value::num((now_ms() - self.born) as f64)),
            ("recovered", Value::Bool(self.recovered.get())),
            ("alarmsRun", Value::num(f64::from(self.alarms_run.get()))),
            ("rpcs", Value::num(f64::from(self.rpcs.get()))),
            (
                "alarmWrites",
                Value::Array(
                    self.alarm_writes
                        .borrow()
                        .iter()
                        .map(|&(when, at, live, why)| {
                            let ago = now_ms() - when;
                            let ahead = if at < 0 { -1.0 } else { (at - when) as f64 };
                            Value::Array(vec![Value::num(ago as f64), Value::num(ahead), Value::num(live as f64), Value::str(why)])
                        })
                        .collect(),
                ),
            ),
            ("looping", Value::Bool(self.looping.get() || self.courier_looping.get())),
            ("lastPassAgoMs", Value::num(if self.last_pass.get() > 0 { (now_ms() - self.last_pass.get()) as f64 } else { -1.0 })),
            ("live", Value::num(self.live.borrow().len() as f64)),
            ("sending", Value::num(self.sent_at.borrow().len() as f64)),
            ("lending", Value::num(self.lent.borrow().len() as f64)),
            ("outbox", Value::num(self.outbox.borrow().len() as f64)),
            ("held", Value::object(held.iter().map(|(u, n)| (u.name(), Value::num(*n as f64))))),
            ("oldestHeldMs", Value::num(oldest.round())),
        ]);
        stats.to_json().unwrap_or_default()
    }

    /// Whether a call just handed this instance a message with no loop running
    /// ([`Handoff`]): the class then calls [`deliver_now`](Self::deliver_now).
    #[wasm_bindgen(js_name = startsDelivery)]
    pub fn starts_delivery(&self) -> bool {
        !self.looping.get() && !self.handed.borrow().is_empty()
    }

    /// Start the delivery loop for the handed messages now, instead of at the alarm the
    /// enqueue armed (which still fires, and waits for this loop; see [`alarm`](Self::alarm)).
    /// Saves the alarm's scheduling between an enqueue and its delivery.
    #[wasm_bindgen(js_name = deliverNow)]
    pub async fn deliver_now(&self) -> std::result::Result<(), JsValue> {
        if !self.starts_delivery() {
            return Ok(());
        }
        self.looping.set(true);
        let _end = EndOnDrop { looping: &self.looping, end: &self.loop_end };
        self.run_loop(false).await
    }
}
