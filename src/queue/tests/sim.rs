//! The 0.3 harness: one queue instance on an in-memory store, an injected clock, a
//! simulated alarm and a scripted delivery target (the reference's `test/queue-do.test.ts`
//! checklist, spec tests.md). No lifecycle checks: see [`super::run_sim`].

use crate::config::Config;
use crate::queue::delivery::{build_request, claim, classify, settle, Claimed, OutboundRequest, Outcome, Rearm, Settled};
use crate::queue::*;
use crate::store::alarm::AlarmChange;
use crate::store::MemoryStore;
use crate::wire::Value;

use super::T0;

pub(super) struct Sim {
    pub(super) store: MemoryStore,
    pub(super) alarm: Option<i64>,
    pub(super) now: i64,
    pub(super) config: Config,
    /// Every delivery request made, with the time it was made.
    pub(super) sent: Vec<(i64, OutboundRequest)>,
}

pub(super) fn ok() -> Outcome {
    Outcome::Response { status: 200, body: None }
}

pub(super) fn status(s: u16) -> Outcome {
    Outcome::Response { status: s, body: None }
}

pub(super) fn busy(body: &str) -> Outcome {
    Outcome::Response { status: 503, body: Some(body.as_bytes().to_vec()) }
}

pub(super) fn request(id: &str) -> Value {
    Value::object([
        ("messageId", Value::str(id)),
        ("queueName", Value::str("__wkf_workflow_x")),
        ("pathname", Value::str("flow")),
        ("body", Value::str(format!("{{\"id\":\"{id}\"}}"))),
        ("config", Value::object([("targetBaseUrl", Value::str("http://app.internal:3000")), ("queueShards", Value::num(1.0))])),
    ])
}

pub(super) fn with(mut v: Value, key: &str, member: Value) -> Value {
    if let Value::Object(m) = &mut v {
        m.insert(key.into(), member);
    }
    v
}

pub(super) fn header<'a>(r: &'a OutboundRequest, name: &str) -> Option<&'a str> {
    r.headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str())
}

impl Sim {
    pub(super) fn new() -> Sim {
        Sim {
            store: MemoryStore::new(),
            alarm: None,
            now: T0, // The reference's QUEUE_MAX_INFLIGHT (our deployment default is 128).
            config: Config { queue_max_inflight: 5, ..Config::default() },
            sent: Vec::new(),
        }
    }

    pub(super) fn apply(&mut self, alarm: &Alarm) {
        match alarm.change() {
            Some(AlarmChange::Set(t)) => self.alarm = Some(t),
            Some(AlarmChange::Delete) => self.alarm = None,
            None => {}
        }
    }

    pub(super) fn rpc(&mut self, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        let mut alarm = Alarm::new(self.alarm);
        let config = self.config.clone();
        let ctx = Ctx { now: self.now, name: "q:0", config: &config };
        let r = self.store.transaction(|s| call(s, &ctx, &mut alarm, method, Args(&args)));
        if r.is_ok() {
            self.apply(&alarm);
        }
        r
    }

    pub(super) fn ok_rpc(&mut self, method: &str, args: Vec<Value>) -> Value {
        self.rpc(method, args).expect("rpc")
    }

    pub(super) fn enqueue(&mut self, req: Value) -> Value {
        self.ok_rpc("enqueue", vec![req])
    }

    pub(super) fn stats(&mut self) -> (f64, f64, f64, Option<i64>) {
        let s = self.ok_rpc("stats", vec![]);
        let n = |k: &str| s.get(k).and_then(Value::as_f64).unwrap();
        (n("pending"), n("inflight"), n("deadLetters"), s.get("alarmAt").and_then(Value::as_f64).map(|t| t as i64))
    }

    /// Claim (as the alarm handler does) without delivering.
    pub(super) fn claim_only(&mut self) -> Vec<Claimed> {
        let mut alarm = Alarm::unknown();
        let config = self.config.clone();
        let now = self.now;
        let rows = self.store.transaction(|s| claim(s, now, &config, &mut alarm, &|_| true)).unwrap();
        self.apply(&alarm);
        rows
    }

    pub(super) fn settle_row(&mut self, claimed: &Claimed, outcome: &Outcome) -> Settled {
        self.settle_checked(claimed, outcome, &Lifecycle::unknown())
    }

    pub(super) fn settle_checked(&mut self, claimed: &Claimed, outcome: &Outcome, lifecycle: &Lifecycle) -> Settled {
        let mut alarm = Alarm::unknown();
        let config = self.config.clone();
        let now = self.now;
        let action = classify(outcome);
        let r = self.store.transaction(|s| settle(s, now, &config, claimed, &action, lifecycle, Rearm::Exact, &mut alarm)).unwrap();
        self.apply(&alarm);
        r
    }

    /// Fire the alarm if it is due: claim, deliver each claimed row, settle.
    pub(super) fn fire(&mut self, respond: &mut dyn FnMut(&OutboundRequest) -> Outcome) -> usize {
        match self.alarm {
            Some(t) if t <= self.now => {}
            _ => return 0,
        }
        self.alarm = None; // the platform consumes the alarm when it runs the handler
        let rows = self.claim_only();
        for row in &rows {
            let req = build_request(&row.row, &self.config);
            let outcome = respond(&req);
            self.sent.push((self.now, req));
            self.settle_row(row, &outcome);
        }
        rows.len()
    }

    /// Advance the clock to `until`, firing every alarm on the way at its time.
    pub(super) fn run_until(&mut self, until: i64, respond: &mut dyn FnMut(&OutboundRequest) -> Outcome) {
        loop {
            match self.alarm {
                Some(t) if t <= until => {
                    self.now = self.now.max(t);
                    self.fire(respond);
                }
                _ => break,
            }
        }
        self.now = self.now.max(until);
    }

    pub(super) fn keys(&self) -> Vec<String> {
        self.store.keys().into_iter().map(str::to_string).collect()
    }
}

pub(super) fn ids(sim: &Sim) -> Vec<String> {
    sim.sent.iter().map(|(_, r)| header(r, "x-vqs-message-id").unwrap().to_string()).collect()
}
