//! Native tests of the run core: every guard and outcome of `run-do.md` and the
//! run-related checklists of `tests.md`, driven through [`crate::run::call`] over a
//! [`MemoryStore`] with the shell's transaction semantics.

mod guards;
mod hooks;
mod large;
mod pages;
mod retention;
mod runs;
mod spec_versions;
mod steps;
mod waits_attrs;

use crate::config::Config;
use crate::protocol::hop::{Args, Ctx};
use crate::store::alarm::{Alarm, AlarmChange};
use crate::store::MemoryStore;
use crate::wire::{RpcError, Value};

/// 2026-01-02T03:04:05.678Z
pub const T0: i64 = 1_767_323_045_678;

pub struct Harness {
    pub store: MemoryStore,
    pub now: i64,
    pub config: Config,
    pub run_id: String,
    /// The alarm change the last successful call asked for.
    pub alarm: Option<AlarmChange>,
}

pub fn v(text: &str) -> Value {
    Value::parse(text).unwrap_or_else(|e| panic!("bad test JSON {text}: {e:?}"))
}

pub fn json(value: &Value) -> String {
    value.to_json().expect("encodable")
}

impl Harness {
    pub fn new() -> Harness {
        Harness { store: MemoryStore::new(), now: T0, config: Config::default(), run_id: "wrun_A".into(), alarm: None }
    }

    /// Advance the clock (every call gets its own millisecond, like the recordings).
    pub fn tick(&mut self, ms: i64) {
        self.now += ms;
    }

    pub fn call(&mut self, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        self.now += 1;
        let ctx = Ctx { now: self.now, name: &self.run_id.clone(), config: &self.config.clone() };
        let mut alarm = Alarm::unknown();
        let out = self.store.transaction(|s| crate::run::call(s, &ctx, &mut alarm, method, Args(&args)));
        if out.is_ok() {
            self.alarm = alarm.change();
        }
        out.map(crate::wire::value::expand_stored)
    }

    /// The alarm time the last successful call set, if it set one (cleared on read).
    pub fn take_alarm(&mut self) -> Option<i64> {
        match self.alarm.take() {
            Some(AlarmChange::Set(at)) => Some(at),
            _ => None,
        }
    }

    /// `applyEvent` with a full request object (JSON text).
    pub fn request(&mut self, request: &str) -> Result<Value, RpcError> {
        self.call("applyEvent", vec![v(request)])
    }

    /// `applyEvent` of `data` (JSON text) with optional extra request members.
    pub fn apply_with(&mut self, data: &str, extra: &str) -> Value {
        let extra = if extra.is_empty() { String::new() } else { format!(",{extra}") };
        let req = format!(r#"{{"runId":"{}","data":{data}{extra},"cleanup":{{"retentionMs":0,"queueShards":1}}}}"#, self.run_id);
        self.request(&req).unwrap_or_else(|e| panic!("applyEvent threw {e:?} for {data}"))
    }

    pub fn apply(&mut self, data: &str) -> Value {
        self.apply_with(data, "")
    }

    pub fn apply_err(&mut self, data: &str) -> RpcError {
        let req = format!(r#"{{"runId":"{}","data":{data},"cleanup":{{"retentionMs":0,"queueShards":1}}}}"#, self.run_id);
        match self.request(&req) {
            Err(e) => e,
            Ok(v) => panic!("expected a thrown error, got {}", json(&v)),
        }
    }

    pub fn create_run(&mut self) -> Value {
        self.apply(r#"{"eventType":"run_created","specVersion":6,"eventData":{"deploymentId":"dep","workflowName":"wf","input":{"__type":"Uint8Array","data":"AQID"}}}"#)
    }

    pub fn start_run(&mut self) -> Value {
        self.create_run();
        self.apply_with(r#"{"eventType":"run_started","specVersion":6}"#, r#""params":{"skipPreload":true}"#)
    }

    pub fn read(&mut self, method: &str, args: Vec<Value>) -> Value {
        self.call(method, args).unwrap_or_else(|e| panic!("{method} threw {e:?}"))
    }

    pub fn events(&mut self) -> Vec<Value> {
        let page = self.read("listEvents", vec![v(r#"{"limit":1000}"#)]);
        page.get("value").and_then(|p| p.get("data")).and_then(Value::as_array).cloned().unwrap_or_default()
    }

    pub fn event_types(&mut self) -> Vec<String> {
        self.events().iter().map(|e| e.get("eventType").and_then(Value::as_str).unwrap_or("?").to_string()).collect()
    }

    pub fn keys(&self) -> Vec<String> {
        self.store.keys().into_iter().map(str::to_string).collect()
    }
}

/// Member path lookup: `at(&v, "event.eventId")`.
pub fn at<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(value, |cur, seg| match seg.parse::<usize>() {
        Ok(i) => cur.as_array().and_then(|a| a.get(i)),
        Err(_) => cur.get(seg),
    })
}

pub fn s<'a>(value: &'a Value, path: &str) -> &'a str {
    at(value, path).and_then(Value::as_str).unwrap_or_else(|| panic!("no string at {path} in {}", json(value)))
}

/// Assert a failure outcome.
pub fn assert_fail(outcome: &Value, code: &str, message: &str) {
    assert_eq!(at(outcome, "ok"), Some(&Value::Bool(false)), "{}", json(outcome));
    assert_eq!(s(outcome, "code"), code, "{}", json(outcome));
    assert_eq!(s(outcome, "message"), message);
}

pub fn assert_ok(outcome: &Value) {
    assert_eq!(at(outcome, "ok"), Some(&Value::Bool(true)), "{}", json(outcome));
}

pub fn zod_message(e: &RpcError) -> &str {
    assert_eq!(e.name, "Error");
    e.message.strip_prefix("ZodError: ").unwrap_or_else(|| panic!("not a ZodError: {}", e.message))
}
