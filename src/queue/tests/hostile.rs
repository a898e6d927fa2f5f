//! Hostile input: odd stored rows, odd arguments and huge timeouts answer or throw, never
//! panic, and leave storage decodable.

use super::sim::*;
use super::T0;
use crate::queue::delivery::{Body, Outcome};
use crate::queue::*;

use crate::wire::Value;

#[test]
fn hostile_rows_do_not_panic() {
    let mut sim = Sim::new();
    let weird = Value::object([
        ("messageId", Value::num(5.0)),
        ("queueName", Value::Array(vec![Value::num(1.0), Value::Null])),
        ("body", Value::Bytes(vec![0, 255])),
        ("runId", Value::object([("a", Value::Null)])),
        ("idempotencyKey", Value::num(7.0)),
        ("delaySeconds", Value::Bool(true)),
        ("config", Value::object([("queueShards", Value::str("1"))])),
    ]);
    let out = sim.enqueue(weird.clone());
    assert_eq!(out.get("messageId"), Some(&Value::num(5.0)));
    assert_eq!(sim.enqueue(weird).get("deduped"), Some(&Value::Bool(true)));
    sim.run_until(T0 + 5_000, &mut |_| ok());
    let req = &sim.sent[0].1;
    assert_eq!(req.url, "undefined/.well-known/workflow/v1/undefined");
    assert_eq!(header(req, "x-vqs-queue-name"), Some("1,"));
    assert_eq!(header(req, "x-vqs-message-id"), Some("5"));
    assert_eq!(req.body, Body::Bytes(vec![0, 255]));
    assert_eq!(sim.keys(), ["cfg"]);
    // Unknown method and odd admin arguments.
    assert!(sim.rpc("alarm", vec![]).is_err());
    assert_eq!(sim.ok_rpc("expireRun", vec![]).to_json().unwrap(), r#"{"deleted":0}"#);
    assert!(sim.rpc("listDeadLetters", vec![Value::object([("limit", Value::num(1e300))])]).is_ok());
    assert!(sim.rpc("listDeadLetters", vec![Value::object([("limit", Value::num(0.5))])]).is_ok());
    assert!(sim.rpc("listDeadLetters", vec![Value::object([("limit", Value::str("x"))])]).is_err());
}

#[test]
fn huge_timeouts_do_not_overflow() {
    let mut sim = Sim::new();
    sim.enqueue(request("m1"));
    sim.now += 1;
    sim.alarm = None;
    let rows = sim.claim_only();
    assert_eq!(rows.len(), 1);
    sim.settle_row(&rows[0], &busy(r#"{"timeoutSeconds":1e300}"#));
    assert_eq!(sim.alarm, Some(state::MAX_TIME_MS));
    let mut sim = Sim::new();
    sim.config.queue_max_attempts = u32::MAX;
    sim.enqueue(request("m1"));
    sim.run_until(T0 + 3_600_000, &mut |_| status(500));
    // 2, 4, 8, 16, 32, then 60 s apart.
    let gaps: Vec<i64> = sim.sent.windows(2).map(|w| w[1].0 - w[0].0).take(7).collect();
    assert_eq!(gaps, [2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]);
}

/// Deterministic hostile inputs: every method with every combination of odd arguments,
/// and odd delivery outcomes, must answer (Ok or a thrown error), never panic, and keep
/// storage decodable.
#[test]
fn hostile_arguments_never_panic() {
    let odd = || {
        vec![
            Value::Null,
            Value::Bool(true),
            Value::num(-1.0),
            Value::num(0.5),
            Value::num(1e308),
            Value::num(-1e308),
            Value::str(""),
            Value::str("due:"),
            Value::str("\u{0}\u{FFFF}"),
            Value::Array(vec![Value::Null, Value::Array(vec![])]),
            Value::Date(None),
            Value::Date(Some(-8_640_000_000_000_000)),
            Value::Bytes(vec![]),
            Value::object([("limit", Value::num(-0.5)), ("cursor", Value::num(3.0))]),
            Value::object([("limit", Value::Bool(true)), ("cursor", Value::Array(vec![]))]),
            Value::object([("limit", Value::num(f64::MAX))]),
        ]
    };
    let mut requests = vec![request("ok")];
    for (i, v) in odd().into_iter().enumerate() {
        for member in ["messageId", "queueName", "pathname", "body", "runId", "idempotencyKey", "delaySeconds", "config"] {
            requests.push(with(request(&format!("m{i}")), member, v.clone()));
        }
        let cfg = Value::object([("targetBaseUrl", v.clone()), ("queueShards", Value::num(1.0))]);
        requests.push(with(request(&format!("c{i}")), "config", cfg));
    }
    requests.extend(odd());
    let methods =
        ["enqueue", "stats", "listDeadLetters", "redriveDeadLetter", "purgeDeadLetters", "rearmAlarm", "expireRun", "constructor", ""];
    let outcomes = [
        ok(),
        status(0),
        status(u16::MAX),
        busy(""),
        busy("{\"timeoutSeconds\":1e308}"),
        busy("{\"timeoutSeconds\":-1e308}"),
        busy(&"[".repeat(10_000)),
        Outcome::Transport(String::new()),
    ];
    let mut sim = Sim::new();
    sim.config.queue_max_attempts = 2;
    for (n, req) in requests.iter().enumerate() {
        let _ = sim.rpc("enqueue", vec![req.clone()]);
        for m in methods {
            for a in odd() {
                let _ = sim.rpc(m, vec![a.clone(), a]);
            }
        }
        sim.now += 1;
        sim.alarm = Some(sim.now);
        let mut k = n;
        sim.run_until(sim.now + 120_000, &mut |_| {
            k += 1;
            outcomes[k % outcomes.len()].clone()
        });
    }
    // Everything stored still decodes.
    for (key, value) in sim.store.data.clone() {
        assert!(value.as_text().is_some_and(|text| Value::parse(text).is_ok()), "{key}");
    }
}
