//! `QueueDO` core ([`world_celld_rs::queue::call`]) plus the alarm loop's storage steps
//! ([`claim_at_most`], [`settle`], re-arming exactly or earlier only) driven by arbitrary sequences of calls, alarm passes,
//! delivery outcomes and instance restarts, with the shell's alarm handling (read before
//! the call, applied after commit; the platform clears an alarm when it fires) and its
//! claim memo (`ClaimMemo`: every store watched, forgotten on restart; a paged expiry's
//! receipt is sometimes acknowledged, which writes a fence-compaction entry). Each claim's
//! alarm is compared with listing every family again, which a stale memo would miss.
//!
//! An `enqueue` is sometimes offered the shell's `Handoff`; a message it claims joins the
//! instance's running deliveries.
//!
//! Checks after every step: no panic, every stored value decodes, `stats` counts equal the
//! stored `due:`/`inflight:`/`dlq:` entries, every message row is scheduled (a `due:` entry
//! naming it or an `inflight:` entry), and no lost wake-up: while anything is scheduled or
//! in flight, an alarm is set no later than the earliest due time or deadline (or just
//! after the step's clock reading, when that is already past).
#![no_main]

use fuzz_support::arbitrary::{Result, Unstructured};
use fuzz_support::*;
use libfuzzer_sys::fuzz_target;
use std::cell::RefCell;
use world_celld_rs::config::Config;
use world_celld_rs::protocol::hop::{Args, Ctx};
use world_celld_rs::queue;

use world_celld_rs::queue::delivery::{claim_at_most, classify, settle, ClaimMemo, Claimed, Handoff, MemoWatch, Outcome, Rearm};
use world_celld_rs::queue::state::{clamp_time, schedule_next, Lifecycle, DLQ_PREFIX, DUE_PREFIX, INFLIGHT_PREFIX, MSG_PREFIX};
use world_celld_rs::store::alarm::{Alarm, AlarmChange};
use world_celld_rs::store::MemoryStore;
use world_celld_rs::wire::router::Binding;
use world_celld_rs::wire::{RpcError, Value};

const GEN: ValueGen = ValueGen {
    keys: &[
        "messageId",
        "queueName",
        "pathname",
        "body",
        "runId",
        "idempotencyKey",
        "delaySeconds",
        "config",
        "limit",
        "cursor",
        "timeoutSeconds",
    ],
    strings: &[
        "msg_1",
        "msg_2",
        "msg_3",
        "wrun_A",
        "wrun_B",
        "k1",
        "k2",
        "flow",
        "step",
        "__wkf_workflow_x",
        "http://app.internal:3000",
        "",
    ],
};
const IDS: &[&str] = &["msg_1", "msg_2", "msg_3", "msg_4"];
const RUNS: &[&str] = &["wrun_A", "wrun_B"];
/// Deliveries one alarm invocation may start (the shell's budget).
const MAX_PER_ALARM: usize = 48;

fn build(u: &mut Unstructured, method: &'static str) -> Result<Vec<Value>> {
    Ok(match method {
        "enqueue" => {
            let shards = if u.ratio(15, 16)? { Value::num(1) } else { GEN.value(u, 0)? };
            let config = Value::object([("targetBaseUrl", Value::str("http://app.internal:3000")), ("queueShards", shards)]);
            let delay = if u.ratio(1, 2)? { Value::num(0) } else { Value::Number(GEN.number(u)?) };
            vec![object_with!(
                u,
                vec![
                    ("messageId", GEN.id_or_value(u, IDS)?),
                    ("queueName", Value::str("__wkf_workflow_x")),
                    ("pathname", Value::str("flow")),
                    ("body", GEN.value(u, 1)?),
                    ("runId", GEN.id_or_value(u, RUNS)?),
                    ("idempotencyKey", GEN.id_or_value(u, &["k1", "k2"])?),
                    ("delaySeconds", delay),
                    ("config", config),
                ],
            )?]
        }
        "listDeadLetters" => vec![object_with!(u, vec![("limit", Value::Number(GEN.number(u)?)), ("cursor", GEN.value(u, 0)?)])?],
        "redriveDeadLetter" => vec![GEN.id_or_value(u, IDS)?],
        // With options (0.4) the answer carries the receipt the harness may acknowledge.
        "expireRun" if u.ratio(1, 2)? => {
            vec![GEN.id_or_value(u, RUNS)?, Value::Number(GEN.number(u)?), Value::object([("limit", Value::num(2))])]
        }
        "expireRun" => vec![GEN.id_or_value(u, RUNS)?, Value::Number(GEN.number(u)?)],
        _ => vec![],
    })
}

fn outcome(u: &mut Unstructured) -> Result<Outcome> {
    Ok(match u.arbitrary::<u8>()? % 8 {
        0..=2 => Outcome::Response { status: 200, body: None },
        3 => Outcome::Response { status: *u.choose(&[404, 409, 410, 422, 500, 429, 302])?, body: None },
        4 => Outcome::Transport("TypeError: fetch failed".into()),
        5 => Outcome::Response { status: 503, body: None },
        _ => {
            let body = if u.ratio(3, 4)? {
                format!("{{\"timeoutSeconds\":{}}}", world_celld_rs::wire::number::number_to_string(GEN.number(u)?))
            } else {
                short_string(u)?
            };
            Outcome::Response { status: 503, body: Some(body.into_bytes()) }
        }
    })
}

struct Harness {
    store: MemoryStore,
    now: i64,
    /// The clock reading of the last step (an overdue alarm is moved just after it).
    step_now: i64,
    alarm: Option<i64>,
    config: Config,
    /// Deliveries running in this instance (claimed, not settled).
    running: Vec<Claimed>,
    /// What this instance's claims know (as the shell keeps it): every store goes through
    /// a `MemoWatch` over it; a restart forgets it.
    memo: RefCell<ClaimMemo>,
}

impl Harness {
    fn apply(&mut self, alarm: &Alarm) {
        match alarm.change() {
            Some(AlarmChange::Set(t)) => self.alarm = Some(t),
            Some(AlarmChange::Delete) => self.alarm = None,
            None => {}
        }
    }

    /// One RPC; an `enqueue` with `offer` gets the shell's [`Handoff`] (this instance's
    /// running deliveries, a loop running or not), and a message it claims runs here.
    fn call(&mut self, method: &str, args: &[Value], offer: Option<bool>) -> std::result::Result<Value, RpcError> {
        let ctx = Ctx { now: self.now, name: "q:0", config: &self.config };
        let mut alarm = match method {
            "rearmAlarm" => Alarm::forced(self.alarm),
            m if queue::reads_alarm(m) => Alarm::new(self.alarm),
            _ => Alarm::unknown(),
        };
        self.step_now = self.now;
        let memo = &self.memo;
        let mut handoff = offer.map(|looping| Handoff { live: self.running.len(), looping, claimed: None });
        let out = self.store.transaction(|s| {
            queue::call_checked(&mut MemoWatch::new(s, memo), &ctx, &mut alarm, method, Args(args), &Lifecycle::unknown(), handoff.as_mut())
        });
        if out.is_ok() {
            self.apply(&alarm);
            if let Some(claimed) = handoff.and_then(|h| h.claimed) {
                assert!(self.running.len() < self.config.queue_max_inflight as usize, "an enqueue claimed past the in-flight cap");
                self.running.push(claimed);
            }
        }
        out
    }

    /// The platform fires the alarm (clearing it) and the handler claims.
    fn alarm_pass(&mut self, u: &mut Unstructured) {
        let Some(at) = self.alarm.take() else { return };
        self.now = self.now.max(at);
        self.step_now = self.now;
        let mut alarm = Alarm::unknown();
        // Liveness is by lease: the exact in-flight key of a running delivery.
        let running: Vec<String> = self.running.iter().map(|c| c.lease.clone()).collect();
        let is_live = |lease: &str| running.iter().any(|r| r == lease);
        let (now, config) = (self.now, self.config.clone());
        let mut known = self.memo.borrow().clone();
        let memo = &self.memo;
        let claimed = self
            .store
            .transaction(|s| claim_at_most(&mut MemoWatch::new(s, memo), now, &config, &mut alarm, &is_live, MAX_PER_ALARM, &mut known));
        *self.memo.borrow_mut() = known;
        match claimed {
            Ok(rows) => {
                // The claim computes its alarm from what it listed (`WakeHints`): the same
                // as listing everything again, or now + 1 when it filled its room.
                let mut exact = Alarm::unknown();
                schedule_next(&mut self.store, now, &mut exact).unwrap_or_else(|e| panic!("schedule_next: {e:?}"));
                match (alarm.change(), exact.change()) {
                    (a, b) if a == b => {}
                    (Some(AlarmChange::Set(a)), Some(AlarmChange::Set(b))) if a == now + 1 && a <= b => {}
                    (Some(AlarmChange::Set(a)), Some(AlarmChange::Delete)) if a == now + 1 => {}
                    (a, b) => panic!("claim set the alarm {a:?}, listing everything gives {b:?}"),
                }
                self.apply(&alarm);
                assert!(rows.len() <= config.queue_max_inflight as usize, "claimed past the in-flight cap");
                for row in rows {
                    if u.ratio(3, 4).unwrap_or(true) {
                        self.settle(row, u);
                    } else {
                        self.running.push(row);
                    }
                }
            }
            Err(e) => panic!("claim failed: {e:?}"),
        }
    }

    fn settle(&mut self, claimed: Claimed, u: &mut Unstructured) {
        let action = classify(&outcome(u).unwrap_or(Outcome::Response { status: 200, body: None }));
        // Both ways of re-arming: exact (four lists), or earlier only, from the alarm in
        // place (the shell's delivery loop); the no-lost-wake-up check holds for both.
        let (rearm, mut alarm) =
            if u.ratio(1, 2).unwrap_or(true) { (Rearm::Exact, Alarm::unknown()) } else { (Rearm::Earlier, Alarm::new(self.alarm)) };
        let (now, config) = (self.now, self.config.clone());
        self.step_now = self.now;
        let memo = &self.memo;
        match self.store.transaction(|s| {
            settle(&mut MemoWatch::new(s, memo), now, &config, &claimed, &action, &Lifecycle::unknown(), rearm, &mut alarm)
        }) {
            Ok(_) => self.apply(&alarm),
            Err(e) => panic!("settle failed: {e:?}"),
        }
    }

    fn count(&self, prefix: &str) -> usize {
        keys_under(&self.store, prefix).len()
    }

    fn check(&mut self, last: bool) {
        if last {
            check_stored(&self.store, |_, text| Value::parse(text).map(|_| ()).map_err(|e| e.0), |_| false);
        }

        let ctx = Ctx { now: self.now, name: "q:0", config: &self.config };
        let mut alarm = Alarm::new(self.alarm);
        let stats = queue::call(&mut self.store, &ctx, &mut alarm, "stats", Args(&[])).unwrap_or_else(|e| panic!("stats failed: {e:?}"));
        assert_eq!(alarm.change(), None, "stats moved the alarm");
        for (member, prefix) in [("pending", DUE_PREFIX), ("inflight", INFLIGHT_PREFIX), ("deadLetters", DLQ_PREFIX)] {
            assert_eq!(stats.get(member), Some(&Value::num(self.count(prefix) as f64)), "stats.{member}");
        }
        let dead = queue::call(&mut self.store, &ctx, &mut alarm, "listDeadLetters", Args(&[Value::object([("limit", Value::num(1000))])]));
        assert_not_corrupt("listDeadLetters", &dead);

        // Every message row is scheduled or in flight.
        let scheduled: Vec<String> = self
            .store
            .data
            .iter()
            .filter(|(k, _)| k.starts_with(DUE_PREFIX))
            .filter_map(|(_, v)| v.as_text().and_then(|t| Value::parse(t).ok()))
            .map(|v| world_celld_rs::wire::js::to_js_string(Some(&v)))
            .collect();
        // In-flight claims: `inflight-deadline:<pad13(deadline)>:<messageId>`.
        let claims: Vec<(i64, String)> = keys_under(&self.store, INFLIGHT_PREFIX)
            .iter()
            .map(|k| {
                let rest = &k[INFLIGHT_PREFIX.len()..];
                let (deadline, id) = rest.split_once(':').unwrap_or_else(|| panic!("malformed claim key {k:?}"));
                (deadline.parse::<i64>().unwrap_or_else(|_| panic!("claim deadline in {k:?}")), id.to_string())
            })
            .collect();
        for key in keys_under(&self.store, MSG_PREFIX) {
            let id = &key[MSG_PREFIX.len()..];
            assert!(
                scheduled.iter().any(|s| s == id) || claims.iter().any(|(_, c)| c == id),
                "message {id:?} is neither scheduled nor in flight"
            );
        }

        // No lost wake-up.
        let earliest_due =
            keys_under(&self.store, DUE_PREFIX).first().map(|k| k[DUE_PREFIX.len()..DUE_PREFIX.len() + 13].parse::<i64>().unwrap());
        let earliest_deadline = claims.iter().map(|(deadline, _)| clamp_time(*deadline as f64)).min();
        let wake = [earliest_due, earliest_deadline].into_iter().flatten().min();
        if let Some(wake) = wake {
            let alarm = self.alarm.unwrap_or_else(|| panic!("work is scheduled at {wake} but no alarm is set"));
            assert!(
                alarm <= wake.max(self.step_now + 1),
                "alarm {alarm} is later than the next wake-up {wake} (step at {})",
                self.step_now
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let config = Config { queue_max_attempts: 2, ..Config::default() };
    let mut h =
        Harness { store: MemoryStore::new(), now: T0, step_now: T0, alarm: None, config, running: Vec::new(), memo: RefCell::default() };
    let mut build = build;
    while let Ok(Some(op)) = next_op(&mut u, Binding::Queue, &mut build) {
        match op {
            Op::Call { method, args, .. } if !method.is_empty() => {
                let offer = if method == "enqueue" && u.ratio(1, 2).unwrap_or(false) { Some(u.ratio(1, 2).unwrap_or(false)) } else { None };
                let result = h.call(method, &args, offer);
                assert_not_corrupt(method, &result);
                // A paged expiry's receipt, acknowledged: a fence-compaction entry.
                if let Some(receipt) = result.as_ref().ok().and_then(|v| v.get("receipt")).cloned() {
                    if u.ratio(1, 2).unwrap_or(false) {
                        let run = args.first().cloned().unwrap_or(Value::Null);
                        let acked = h.call("acknowledgeExpireRun", &[run, receipt], None);
                        assert_not_corrupt("acknowledgeExpireRun", &acked);
                    }
                }
            }
            Op::Call { .. } => {}
            Op::Event(tag) if tag < 0xF0 => h.alarm_pass(&mut u),
            Op::Event(tag) if tag < 0xF8 => {
                if !h.running.is_empty() {
                    let row = h.running.remove(0);
                    h.settle(row, &mut u);
                }
            }
            // The instance dies: its deliveries never settle, and what it knew is gone.
            Op::Event(_) => {
                h.running.clear();
                h.memo = RefCell::new(ClaimMemo::default());
            }
        }
        h.now += clock_step(&mut u);
        h.check(false);
    }
    h.check(true);
});
