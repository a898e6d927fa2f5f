//! Dead letters: listing (paged, within the response budget), redrive and purge.

use super::run_sim::*;
use super::sim::*;
use super::T0;
use crate::queue::delivery::{Outcome, Settled};
use crate::queue::state;
use crate::queue::*;
use crate::store::Store;
use crate::wire::Value;

fn page(sim: &mut Sim, params: Value) -> (Vec<String>, Option<Value>, bool) {
    let r = sim.ok_rpc("listDeadLetters", vec![params]);
    let ids =
        r.get("data").unwrap().as_array().unwrap().iter().map(|d| d.get("messageId").unwrap().as_str().unwrap().to_string()).collect();
    (ids, r.get("cursor").cloned(), r.get("hasMore").unwrap().as_bool().unwrap())
}

#[test]
fn redrive_and_purge() {
    let mut sim = Sim::new();
    sim.config.queue_max_attempts = 1;
    sim.enqueue(with(with(request("m1"), "idempotencyKey", Value::str("k")), "runId", Value::str("wrun_1")));
    sim.run_until(T0 + 10, &mut |_| status(500));
    assert_eq!(sim.stats(), (0.0, 0.0, 1.0, None));
    let r = sim.ok_rpc("redriveDeadLetter", vec![Value::str("m1")]);
    assert_eq!(r.to_json().unwrap(), r#"{"ok":true}"#);
    assert_eq!(sim.stats(), (1.0, 0.0, 0.0, Some(sim.now + 1)));
    let row = state::get_row(&mut sim.store, "m1").unwrap().unwrap();
    assert_eq!(row.member("lastError"), None);
    assert_eq!(row.member("failedAt"), None);
    assert_eq!(row.attempt(), 0.0);
    sim.run_until(T0 + 100, &mut |_| ok());
    assert_eq!(header(&sim.sent[1].1, "x-vqs-message-attempt"), Some("1"));
    assert_eq!(sim.keys(), ["cfg"]);
    assert_eq!(sim.ok_rpc("redriveDeadLetter", vec![Value::str("m1")]).to_json().unwrap(), r#"{"ok":false}"#);

    // Purge.
    sim.enqueue(with(request("m2"), "runId", Value::str("wrun_2")));
    sim.run_until(T0 + 200, &mut |_| status(500));
    assert_eq!(sim.ok_rpc("purgeDeadLetters", vec![]).to_json().unwrap(), r#"{"hasMore":false,"purged":1}"#);
    assert_eq!(sim.ok_rpc("purgeDeadLetters", vec![]).to_json().unwrap(), r#"{"hasMore":false,"purged":0}"#);
    assert_eq!(sim.keys(), ["cfg"]);
}

#[test]
fn redrive_refused_while_a_newer_message_holds_the_key() {
    let mut sim = Sim::new();
    sim.config.queue_max_attempts = 1;
    sim.enqueue(with(request("m1"), "idempotencyKey", Value::str("k")));
    sim.run_until(T0 + 10, &mut |_| status(500));
    sim.enqueue(with(with(request("m2"), "idempotencyKey", Value::str("k")), "delaySeconds", Value::num(3600.0)));
    let before = sim.store.data.clone();
    assert_eq!(sim.ok_rpc("redriveDeadLetter", vec![Value::str("m1")]).to_json().unwrap(), r#"{"ok":false}"#);
    assert_eq!(sim.store.data, before);
    assert_eq!(state::get_value(&mut sim.store, "key:k").unwrap(), Some(Value::str("m2")));
    let (p, i, d, _) = sim.stats();
    assert_eq!((p, i, d), (1.0, 0.0, 1.0));
    assert_eq!(sim.ok_rpc("redriveDeadLetter", vec![Value::str("nope")]).to_json().unwrap(), r#"{"ok":false}"#);
    assert_eq!(sim.ok_rpc("redriveDeadLetter", vec![]).to_json().unwrap(), r#"{"ok":false}"#);
}

#[test]
fn redrive_steals_a_stale_claim() {
    let mut sim = Sim::new();
    sim.config.queue_max_attempts = 1;
    sim.enqueue(with(request("m1"), "idempotencyKey", Value::str("k")));
    sim.run_until(T0 + 10, &mut |_| status(500));
    sim.store.put("key:k", "\"ghost\"").unwrap();
    assert_eq!(sim.ok_rpc("redriveDeadLetter", vec![Value::str("m1")]).to_json().unwrap(), r#"{"ok":true}"#);
    assert_eq!(state::get_value(&mut sim.store, "key:k").unwrap(), Some(Value::str("m1")));
}

#[test]
fn list_dead_letters_paging() {
    let mut sim = Sim::new();
    sim.config.queue_max_attempts = 1;
    for (i, id) in ["a", "b", "c"].iter().enumerate() {
        sim.now = T0 + (i as i64) * 10;
        sim.enqueue(request(id));
        sim.run_until(sim.now + 5, &mut |_| status(500));
    }
    let (ids, cursor, more) = page(&mut sim, Value::object([("limit", Value::num(2.0))]));
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(cursor, Some(Value::str(format!("dlq:{}:b", T0 + 11))));
    assert!(more);
    let (ids, cursor, more) = page(&mut sim, Value::object([("limit", Value::num(2.0)), ("cursor", cursor.unwrap())]));
    assert_eq!((ids, cursor, more), (vec!["c".to_string()], Some(Value::Null), false));
    // A null cursor is the string "null": past every dlq: key.
    let (ids, cursor, more) = page(&mut sim, Value::object([("limit", Value::num(1.0)), ("cursor", Value::Null)]));
    assert_eq!((ids.len(), cursor, more), (0, Some(Value::Null), false));
    let (ids, _, _) = page(&mut sim, Value::object([("limit", Value::Null)]));
    assert_eq!(ids.len(), 3);
    // limit 0: empty page, hasMore, no cursor member at all.
    let r = sim.ok_rpc("listDeadLetters", vec![Value::object([("limit", Value::num(0.0))])]);
    assert_eq!(r.to_json().unwrap(), r#"{"data":[],"hasMore":true}"#);
    let err = sim.rpc("listDeadLetters", vec![Value::object([("limit", Value::num(-1.0))])]).unwrap_err();
    assert_eq!(err, RpcError::list_limit());
    let (ids, _, _) = page(&mut sim, Value::str("nonsense"));
    assert_eq!(ids.len(), 3);
}

/// Dead letters of 2 MB payloads: a page carries at most the response budget however large
/// the limit (1e15 used to list everything), and paging by cursor yields each once.
#[test]
fn dead_letter_pages_stay_within_the_response_budget() {
    use crate::store::page::{encoded_len, RESPONSE_BUDGET_BYTES};
    let mut sim = Sim::new();
    for i in 0..6 {
        let row = Value::object([("messageId", Value::str(format!("m{i}"))), ("payload", Value::Bytes(vec![1; 2_000_000]))]);
        state::put_value(&mut sim.store, &state::dlq_key(T0 + i, &format!("m{i}")), &row).unwrap();
    }
    for limit in [Value::num(1e15), Value::num(1e300), Value::num(100.0)] {
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let mut params = vec![("limit", limit.clone())];
            params.extend(cursor.clone().map(|c| ("cursor", c)));
            let r = sim.ok_rpc("listDeadLetters", vec![Value::object(params)]);
            assert!(encoded_len(&r) <= RESPONSE_BUDGET_BYTES + 256);
            let data = r.get("data").and_then(Value::as_array).unwrap();
            assert!(!data.is_empty() && data.len() < 6);
            seen.extend(data.iter().map(|d| d.get("messageId").and_then(Value::as_str).unwrap().to_string()));
            if r.get("hasMore") != Some(&Value::Bool(true)) {
                break;
            }
            cursor = r.get("cursor").cloned();
        }
        assert_eq!(seen, ["m0", "m1", "m2", "m3", "m4", "m5"]);
    }
}

#[test]
fn redrive_drops_dead_letters_of_expired_runs() {
    let mut sim = RunSim::new();
    sim.config.queue_max_attempts = 1;
    sim.ok("enqueue", vec![keyed(message("m1", Some("wrun_a")), "k")]);
    sim.ok("enqueue", vec![message("m2", Some("wrun_b"))]);
    sim.now += 1;
    for c in sim.claim(&|_| true).unwrap() {
        assert_eq!(sim.deliver(&c, Some(Outcome::Response { status: 500, body: None })), Settled::DeadLettered);
    }
    assert_eq!(sim.keys_with("run:").len(), 2);
    sim.runs.calls.borrow_mut().clear();
    sim.runs.set("wrun_a", "expired");
    sim.runs.set("wrun_b", "terminal");
    assert_eq!(sim.ok("redriveDeadLetter", vec![Value::str("m1")]), r#"{"ok":false}"#);
    assert!(sim.keys_with("dlq:").len() == 1 && !sim.keys().contains(&"run:wrun_a:m1".to_string()));
    assert_eq!(sim.ok("redriveDeadLetter", vec![Value::str("m2")]), r#"{"ok":true}"#);
    assert_eq!(*sim.runs.calls.borrow(), ["wrun_a", "wrun_b"]);
    // Unknown ids ask nobody.
    assert_eq!(sim.ok("redriveDeadLetter", vec![Value::str("nope")]), r#"{"ok":false}"#);
    assert_eq!(sim.runs.calls(), 2);
}

#[test]
fn purge_is_bounded_to_128_per_call() {
    let mut sim = RunSim::new();
    sim.config.queue_max_inflight = 128;
    sim.config.queue_max_attempts = 1;
    for i in 0..130 {
        sim.ok("enqueue", vec![message(&format!("m{i:03}"), Some("wrun_a"))]);
    }
    sim.now += 1;
    for _ in 0..2 {
        for c in sim.claim(&|_| true).unwrap() {
            sim.deliver(&c, Some(Outcome::Response { status: 500, body: None }));
        }
    }
    assert_eq!(sim.keys_with("dlq:").len(), 130);
    assert_eq!(sim.ok("purgeDeadLetters", vec![Value::object([("limit", Value::num(1.0))])]), r#"{"hasMore":true,"purged":128}"#);
    assert_eq!(sim.ok("purgeDeadLetters", vec![]), r#"{"hasMore":false,"purged":2}"#);
    assert_eq!(sim.ok("purgeDeadLetters", vec![]), r#"{"hasMore":false,"purged":0}"#);
    assert_eq!(sim.keys(), ["cfg"]);
}

/// A 429 refusal is never a failure: with one attempt allowed, ten refusals in a row leave
/// the message pending (attempt 1 each time), each due again after the app's
/// `Retry-After`; the first real failure then dead-letters it.
#[test]
fn refusals_are_redelivered_after_retry_after_and_never_dead_lettered() {
    let mut sim = RunSim::new();
    sim.config.queue_max_attempts = 1;
    sim.ok("enqueue", vec![message("m1", Some("wrun_a"))]);
    sim.now += 1;
    for i in 0..10 {
        let claimed = sim.claim(&|_| true).unwrap();
        assert_eq!(claimed.len(), 1, "refusal {i}: due again");
        assert_eq!(claimed[0].row.next_delivery_attempt(), 1.0);
        let refused = Outcome::Refused { retry_after: Some("2".into()) };
        assert_eq!(sim.deliver(&claimed[0], Some(refused)), Settled::Redelivering);
        assert!(sim.keys_with("dlq:").is_empty());
        // Not before its Retry-After.
        sim.now += 1_999;
        assert!(sim.claim(&|_| true).unwrap().is_empty());
        sim.now += 1;
    }
    let claimed = sim.claim(&|_| true).unwrap();
    assert_eq!(sim.deliver(&claimed[0], Some(Outcome::Response { status: 500, body: None })), Settled::DeadLettered);
}
