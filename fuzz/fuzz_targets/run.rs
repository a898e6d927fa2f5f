//! `WorkflowRunDO` core ([`world_celld_rs::run::call`]) driven by arbitrary call sequences
//! against the memory store with an injected clock. Checks after every call: no panic,
//! every stored record decodes, event ids are dense (`event:evnt_1 … evnt_<sequence>`,
//! nothing else under `event:`), the events a successful call appends take the
//! next slots (as many new `event:` keys as the sequence moved), and the reads never report corrupt storage.
#![no_main]

use fuzz_support::arbitrary::{Result, Unstructured};
use fuzz_support::*;
use libfuzzer_sys::fuzz_target;
use world_celld_rs::config::Config;
use world_celld_rs::protocol::hop::{Args, Ctx};
use world_celld_rs::run;
use world_celld_rs::store::alarm::{Alarm, AlarmChange};
use world_celld_rs::store::MemoryStore;
use world_celld_rs::wire::router::Binding;
use world_celld_rs::wire::Value;

const RUN_ID: &str = "wrun_A";

const EVENT_TYPES: &[&str] = &[
    "run_created",
    "run_started",
    "run_completed",
    "run_failed",
    "run_cancelled",
    "step_created",
    "step_started",
    "step_completed",
    "step_failed",
    "step_retrying",
    "hook_created",
    "hook_received",
    "hook_disposed",
    "hook_conflict",
    "wait_created",
    "wait_completed",
    "attr_set",
];

const GEN: ValueGen = ValueGen {
    keys: &[
        "deploymentId",
        "workflowName",
        "input",
        "output",
        "result",
        "error",
        "errorCode",
        "stepName",
        "attempt",
        "retryAfter",
        "token",
        "metadata",
        "payload",
        "resumeAt",
        "changes",
        "writer",
        "type",
        "key",
        "value",
        "conflictingRunId",
        "message",
        "stack",
        "code",
        "isWebhook",
        "executionContext",
        "createdAt",
        "limit",
        "cursor",
        "sortOrder",
        "resolveData",
    ],
    strings: &[
        RUN_ID,
        "wrun_B",
        "s1",
        "s2",
        "h1",
        "w1",
        "tok",
        "tok2",
        "workflow",
        "step",
        "desc",
        "asc",
        "evnt_00000000000000000000000001",
        "evnt_00000000000000000000000002",
        "2026-01-02T03:04:05.678Z",
        "2099-01-01T00:00:00.000Z",
        "dep",
        "wf",
        "k",
        "v",
        "",
    ],
};

const CORRELATION: &[&str] = &["s1", "s2", "h1", "h2", "w1", "w2"];

fn event_data(u: &mut Unstructured, event_type: &str) -> Result<Value> {
    let v = |u: &mut Unstructured| GEN.value(u, 2);
    let bytes = |u: &mut Unstructured| -> Result<Value> { Ok(Value::Bytes(u.arbitrary::<&[u8]>()?.iter().copied().take(16).collect())) };
    let members: Vec<(&str, Value)> = match event_type {
        "run_created" => vec![("deploymentId", Value::str("dep")), ("workflowName", Value::str("wf")), ("input", bytes(u)?)],
        "run_completed" => vec![("output", bytes(u)?)],
        "run_failed" | "step_failed" | "step_retrying" => {
            vec![("error", v(u)?), ("errorCode", v(u)?), ("retryAfter", Value::Date(GEN.date(u)?))]
        }
        "step_created" => vec![("stepName", Value::str("st")), ("input", bytes(u)?)],
        "step_started" => vec![("attempt", Value::Number(GEN.number(u)?))],
        "step_completed" => vec![("result", bytes(u)?)],
        "hook_created" => vec![("token", GEN.id_or_value(u, &["tok", "tok2"])?), ("metadata", v(u)?), ("isWebhook", v(u)?)],
        "hook_received" => vec![("payload", bytes(u)?)],
        "hook_conflict" => vec![("token", GEN.id_or_value(u, &["tok", "tok2"])?), ("conflictingRunId", Value::str("wrun_B"))],
        "wait_created" => vec![("resumeAt", Value::Date(GEN.date(u)?))],
        "attr_set" => vec![
            ("changes", Value::Array(vec![Value::object([("key", GEN.value(u, 0)?), ("value", v(u)?)])])),
            ("writer", Value::object([("type", Value::str(*u.choose(&["workflow", "step", "x"])?))])),
        ],
        _ => Vec::new(),
    };
    let mut data = object_with!(u, members)?;
    if u.ratio(1, 8)? {
        if let (Value::Object(m), Value::Object(extra)) = (&mut data, Value::Object(GEN.object(u, 1)?)) {
            m.extend(extra);
        }
    }
    Ok(data)
}

fn build(u: &mut Unstructured, method: &'static str) -> Result<Vec<Value>> {
    Ok(match method {
        "applyEvent" => {
            let event_type = if u.ratio(31, 32)? { Value::str(*u.choose(EVENT_TYPES)?) } else { GEN.value(u, 0)? };
            let data_event_data = event_data(u, event_type.as_str().unwrap_or(""))?;
            let data = object_with!(
                u,
                vec![
                    ("eventType", event_type),
                    ("specVersion", if u.ratio(15, 16)? { Value::num(*u.choose(&[6, 7])?) } else { GEN.value(u, 0)? }),
                    ("correlationId", GEN.id_or_value(u, CORRELATION)?),
                    ("eventData", data_event_data),
                ],
            )?;
            let mut members = vec![("runId", GEN.id_or_value(u, &[RUN_ID, RUN_ID, RUN_ID, "wrun_B"])?), ("data", data)];
            if u.ratio(1, 2)? {
                members.push(("params", Value::object([("skipPreload", Value::Bool(u.arbitrary()?))])));
            }
            members.push((
                "cleanup",
                Value::object([("retentionMs", Value::Number(GEN.number(u)?)), ("queueShards", Value::Number(GEN.number(u)?))]),
            ));
            vec![object_with!(u, members)?]
        }
        "getStep" => vec![GEN.id_or_value(u, CORRELATION)?],
        "getEvent" => vec![GEN.value(u, 1)?],
        "listEvents" | "listSteps" | "listHooks" => {
            let page = object_with!(
                u,
                vec![
                    ("limit", Value::Number(GEN.number(u)?)),
                    ("cursor", GEN.value(u, 0)?),
                    ("sortOrder", Value::str(*u.choose(&["asc", "desc"])?)),
                    ("resolveData", GEN.value(u, 0)?),
                ],
            )?;
            vec![page]
        }
        _ => {
            let n = u.int_in_range(0..=2)?;
            (0..n).map(|_| GEN.value(u, 2)).collect::<Result<_>>()?
        }
    })
}

struct Harness {
    store: MemoryStore,
    now: i64,
    alarm: Option<i64>,
    config: Config,
}

impl Harness {
    fn call(&mut self, method: &str, args: &[Value]) -> std::result::Result<Value, world_celld_rs::wire::RpcError> {
        let ctx = Ctx { now: self.now, name: RUN_ID, config: &self.config };
        let mut alarm = Alarm::new(self.alarm);
        let out = self.store.transaction(|s| run::call(s, &ctx, &mut alarm, method, Args(args)));
        if out.is_ok() {
            match alarm.change() {
                Some(AlarmChange::Set(t)) => self.alarm = Some(t),
                Some(AlarmChange::Delete) => self.alarm = None,
                None => {}
            }
        }
        out.map(world_celld_rs::wire::value::expand_stored)
    }

    /// The run's last slot: the greatest event key's (the counter a call reads), or the
    /// stored `event_sequence` row when that is ahead (it is written once per run).
    fn sequence(&self) -> u64 {
        let stored = match self.store.text("event_sequence") {
            None => 0,
            Some(t) => t.parse::<f64>().unwrap_or_else(|_| panic!("event_sequence {t:?}")) as u64,
        };
        let last = keys_under(&self.store, "event:").last().map(|k| {
            k.strip_prefix("event:evnt_").and_then(|d| d.parse::<u64>().ok()).unwrap_or_else(|| panic!("event key {k:?} is no slot"))
        });
        stored.max(last.unwrap_or(0))
    }

    /// A read outside a transaction (reads write nothing; `last` checks that).
    fn read(&mut self, method: &str, args: &[Value]) -> std::result::Result<Value, world_celld_rs::wire::RpcError> {
        let ctx = Ctx { now: self.now, name: RUN_ID, config: &self.config };
        let mut alarm = Alarm::new(self.alarm);
        // A record answered as stored must be exactly what decoding and encoding it gives.
        run::call(&mut self.store, &ctx, &mut alarm, method, Args(args)).map(world_celld_rs::wire::value::expand_stored)
    }

    fn check(&mut self, last: bool) {
        if last {
            check_stored(&self.store, |_, text| Value::parse_tags(text).map(|_| ()).map_err(|e| e.0), |_| false);
        }
        // Dense event ids: exactly evnt_1 … evnt_<sequence>.
        let seq = self.sequence();
        let events = keys_under(&self.store, "event:");
        let want: Vec<String> = (1..=seq).map(|i| format!("event:evnt_{i:026}")).collect();
        if self.store.data.contains_key("run") || !events.is_empty() {
            assert_eq!(events, want, "event keys are not dense slots 1..={seq}");
        }
        for (method, args) in [
            ("getRun", vec![]),
            ("listEvents", vec![Value::object([("limit", Value::num(1000))])]),
            ("listSteps", vec![]),
            ("listHooks", vec![]),
            ("getCleanupStatus", vec![]),
        ] {
            if !last && method != "listEvents" {
                continue;
            }
            let before = last.then(|| self.store.data.clone());
            let result = self.read(method, &args);
            assert_not_corrupt(method, &result);
            if let Some(before) = before {
                assert!(self.store.data == before, "{method} changed storage");
            }
            if method == "listEvents" {
                if let Ok(page) = &result {
                    if let Some(Value::Array(data)) = page.get("value").and_then(|p| p.get("data")) {
                        assert_eq!(data.len() as u64, seq.min(1000), "listEvents sees a different number of events");
                    }
                }
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let mut h = Harness { store: MemoryStore::new(), now: T0, alarm: None, config: Config::default() };
    let mut build = build;
    while let Ok(Some(op)) = next_op(&mut u, Binding::Runs, &mut build) {
        match op {
            Op::Call { method, args, .. } if !method.is_empty() && method != "cleanupNow" => {
                let before = h.sequence();
                let events_before = keys_under(&h.store, "event:").len();
                let result = h.call(method, &args);
                assert_not_corrupt(method, &result);
                let after = h.sequence();
                let events_after = keys_under(&h.store, "event:").len();
                // A failed call rolls back (the store's transaction); one that succeeds
                // appends its events in the next slots (one call may append several).
                if result.is_ok() {
                    assert!(after >= before, "{method} moved the sequence back: {before} -> {after}");
                    assert_eq!(events_after - events_before, (after - before) as usize, "{method}: events vs sequence");
                }
            }
            _ => {}
        }
        h.now += clock_step(&mut u);
        h.check(false);
    }
    h.check(true);
});
