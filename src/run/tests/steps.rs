//! Steps: creation, start (attempts, retryAfter / TOO_EARLY), completion, failure,
//! retry, the lazy start and the terminal-state guards.

use super::*;

const CREATE_S1: &str = r#"{"eventType":"step_created","specVersion":6,"correlationId":"s1","eventData":{"stepName":"st","input":{"__type":"Uint8Array","data":"CQ=="}}}"#;

#[test]
fn step_lifecycle() {
    let mut h = Harness::new();
    h.start_run();
    let created = h.apply(CREATE_S1);
    assert_eq!(s(&created, "step.status"), "pending");
    assert_eq!(at(&created, "step.attempt"), Some(&Value::num(0)));
    assert!(at(&created, "run").is_none() && at(&created, "maxEvents").is_none());
    assert_eq!(json(at(&created, "step.input").unwrap()), r#"{"__type":"Uint8Array","data":"CQ=="}"#);
    assert!(h.keys().iter().any(|k| k.starts_with("stepcreated:") && k.ends_with(":s1")));

    let started = h.apply(r#"{"eventType":"step_started","correlationId":"s1","eventData":{"attempt":1}}"#);
    assert_eq!(s(&started, "step.status"), "running");
    assert_eq!(at(&started, "step.attempt"), Some(&Value::num(1)));
    assert_eq!(at(&started, "step.startedAt"), at(&started, "step.updatedAt"));

    let retrying = h.apply(r#"{"eventType":"step_retrying","correlationId":"s1","eventData":{"error":"flaky","retryAfter":{"__type":"Date","iso":"2000-01-01T00:00:00.000Z"}}}"#);
    assert_eq!(s(&retrying, "step.status"), "pending");
    assert_eq!(json(at(&retrying, "step.error").unwrap()), r#"{"message":"flaky"}"#);
    assert_eq!(at(&retrying, "step.attempt"), Some(&Value::num(1)), "retrying keeps the attempt");
    assert_eq!(json(at(&retrying, "step.retryAfter").unwrap()), r#"{"__type":"Date","iso":"2000-01-01T00:00:00.000Z"}"#);

    let restarted = h.apply(r#"{"eventType":"step_started","correlationId":"s1"}"#);
    assert_eq!(at(&restarted, "step.attempt"), Some(&Value::num(2)));
    assert!(at(&restarted, "step.retryAfter").is_none());
    assert_eq!(at(&restarted, "step.startedAt"), at(&started, "step.startedAt"), "startedAt kept");
    // Starting a running step again is allowed.
    let again = h.apply(r#"{"eventType":"step_started","correlationId":"s1"}"#);
    assert_eq!(at(&again, "step.attempt"), Some(&Value::num(3)));

    let done = h.apply(
        r#"{"eventType":"step_completed","correlationId":"s1","eventData":{"result":{"__type":"Uint8Array","data":"AQ=="},"ttfs":5}}"#,
    );
    assert_eq!(s(&done, "step.status"), "completed");
    assert_eq!(json(at(&done, "step.output").unwrap()), r#"{"__type":"Uint8Array","data":"AQ=="}"#);
    assert_eq!(json(at(&done, "step.error").unwrap()), r#"{"message":"flaky"}"#, "previous error kept");
    assert_eq!(at(&done, "step.completedAt"), at(&done, "event.createdAt"));
    assert_eq!(at(&h.read("getStep", vec![v(r#""s1""#)]), "value"), at(&done, "step"));

    for t in ["step_started", "step_completed", "step_failed", "step_retrying"] {
        let out = h.apply(&format!(r#"{{"eventType":"{t}","correlationId":"s1","eventData":{{"result":1,"error":1}}}}"#));
        assert_fail(&out, "ENTITY_CONFLICT", r#"Cannot modify step in terminal state "completed""#);
    }
    // A lazy start of an existing step is a conflict first.
    let lazy = h.apply(r#"{"eventType":"step_started","correlationId":"s1","eventData":{"stepName":"st","input":1}}"#);
    assert_fail(&lazy, "ENTITY_CONFLICT", r#"Step "s1" already exists"#);
    assert_fail(&h.apply(CREATE_S1), "ENTITY_CONFLICT", r#"Step "s1" already exists"#);
}

#[test]
fn step_failed_keeps_message_and_stack() {
    let mut h = Harness::new();
    h.start_run();
    h.apply(CREATE_S1);
    let out =
        h.apply(r#"{"eventType":"step_failed","correlationId":"s1","eventData":{"error":{"message":"m","stack":"at x","code":"C"}}}"#);
    assert_eq!(json(at(&out, "step.error").unwrap()), r#"{"code":"C","message":"m","stack":"at x"}"#);
    assert_eq!(s(&out, "step.status"), "failed");
}

#[test]
fn too_early_reports_seconds() {
    let mut h = Harness::new();
    h.start_run();
    h.apply(CREATE_S1);
    let due = crate::wire::date::iso(h.now + 1500);
    h.apply(&format!(r#"{{"eventType":"step_retrying","correlationId":"s1","eventData":{{"error":"e","retryAfter":"{due}"}}}}"#));
    let out = h.apply(r#"{"eventType":"step_started","correlationId":"s1"}"#);
    assert_fail(&out, "TOO_EARLY", r#"Cannot start step "s1": retryAfter timestamp has not been reached yet"#);
    assert_eq!(at(&out, "retryAfterSeconds"), Some(&Value::num(2)));
    h.tick(2000);
    assert_eq!(s(&h.apply(r#"{"eventType":"step_started","correlationId":"s1"}"#), "step.status"), "running");
}

#[test]
fn step_retrying_without_retry_after_clears_it() {
    let mut h = Harness::new();
    h.start_run();
    h.apply(CREATE_S1);
    h.apply(r#"{"eventType":"step_retrying","correlationId":"s1","eventData":{"error":"e","retryAfter":"2099-01-01T00:00:00.000Z"}}"#);
    let out = h.apply(r#"{"eventType":"step_retrying","correlationId":"s1","eventData":{"error":"e","retryAfter":0}}"#);
    assert!(at(&out, "step.retryAfter").is_none());
}

#[test]
fn lazy_start_creates_the_step_with_a_synthetic_event() {
    let mut h = Harness::new();
    h.start_run();
    let out = h.apply_with(
        r#"{"eventType":"step_started","specVersion":6,"correlationId":"step_1","eventData":{"stepName":"st","input":{"__type":"Uint8Array","data":"CQ=="},"attempt":1}}"#,
        r#""params":{"eventCount":2}"#,
    );
    assert_eq!(at(&out, "stepCreated"), Some(&Value::Bool(true)));
    assert_eq!(s(&out, "event.eventId"), "evnt_00000000000000000000000004");
    assert_eq!(json(at(&out, "event.eventData").unwrap()), r#"{"attempt":1,"stepName":"st"}"#);
    assert_eq!(s(&out, "step.status"), "running");
    assert_eq!(at(&out, "step.attempt"), Some(&Value::num(1)));
    // The stale writer learns the synthetic step_created at slot 3.
    assert_eq!(at(&out, "events").and_then(Value::as_array).map(Vec::len), Some(1));
    assert_eq!(s(&out, "events.0.eventType"), "step_created");
    assert_eq!(json(at(&out, "events.0.eventData").unwrap()), r#"{"input":{"__type":"Uint8Array","data":"CQ=="},"stepName":"st"}"#);
    assert_eq!(at(&out, "cursor"), Some(&Value::Null));
    assert_eq!(at(&out, "hasMore"), Some(&Value::Bool(false)));
    assert_eq!(h.event_types(), ["run_created", "run_started", "step_created", "step_started"]);
    // Replaying the lazy start is a conflict.
    let again = h.apply(r#"{"eventType":"step_started","correlationId":"step_1","eventData":{"stepName":"st","input":1}}"#);
    assert_fail(&again, "ENTITY_CONFLICT", r#"Step "step_1" already exists"#);
}

#[test]
fn lazy_start_with_workflow_name_and_empty_step_name() {
    let mut h = Harness::new();
    h.start_run();
    h.apply(r#"{"eventType":"step_started","correlationId":"a","eventData":{"stepName":"st","workflowName":"wf","input":null}}"#);
    let events = h.events();
    assert_eq!(json(at(&events[2], "eventData").unwrap()), r#"{"input":null,"stepName":"st","workflowName":"wf"}"#);
    // Empty stepName: counts as creation but creates nothing.
    let out = h.apply(r#"{"eventType":"step_started","correlationId":"b","eventData":{"stepName":"","input":1}}"#);
    assert_fail(&out, "STEP_NOT_FOUND", r#"Step "b" not found"#);
}

#[test]
fn non_running_step_on_terminal_run() {
    let mut h = Harness::new();
    h.start_run();
    h.apply(CREATE_S1);
    h.apply(r#"{"eventType":"step_created","correlationId":"s2","eventData":{"stepName":"st","input":1}}"#);
    h.apply(r#"{"eventType":"step_started","correlationId":"s2"}"#);
    h.apply(r#"{"eventType":"run_completed","eventData":{}}"#);
    let msg = r#"Cannot modify non-running step on run in terminal state "completed""#;
    assert_fail(&h.apply(r#"{"eventType":"step_started","correlationId":"s1"}"#), "RUN_EXPIRED", msg);
    assert_fail(&h.apply(r#"{"eventType":"step_failed","correlationId":"s1","eventData":{"error":"e"}}"#), "RUN_EXPIRED", msg);
    // step_completed / step_retrying do not read the run: a pending step still moves.
    assert_eq!(s(&h.apply(r#"{"eventType":"step_retrying","correlationId":"s1","eventData":{"error":"e"}}"#), "step.status"), "pending");
    // The in-flight step may still finish.
    assert_eq!(s(&h.apply(r#"{"eventType":"step_completed","correlationId":"s2","eventData":{"result":1}}"#), "step.status"), "completed");
}

#[test]
fn eventcount_rules() {
    let mut h = Harness::new();
    h.start_run();
    // Slot 3 with eventCount 1 reports slot 2.
    let out = h.apply_with(CREATE_S1, r#""params":{"eventCount":1}"#);
    assert_eq!(at(&out, "events").and_then(Value::as_array).map(Vec::len), Some(1));
    assert_eq!(s(&out, "events.0.eventId"), "evnt_00000000000000000000000002");
    // Up to date: no page.
    let out = h.apply_with(
        r#"{"eventType":"step_created","correlationId":"s2","eventData":{"stepName":"n","input":1}}"#,
        r#""params":{"eventCount":3}"#,
    );
    assert!(at(&out, "events").is_none());
    // A fractional count throws only when a report is needed, and rolls back.
    let before = h.store.data.clone();
    let e = h.request(r#"{"runId":"wrun_A","data":{"eventType":"step_created","correlationId":"s9","eventData":{"stepName":"bad","input":1}},"params":{"eventCount":1.5}}"#).unwrap_err();
    assert_eq!(e, RpcError::range_error("Invalid event slot: 1.5"));
    assert_eq!(h.store.data, before);
    let out = h.apply_with(
        r#"{"eventType":"step_created","correlationId":"s9","eventData":{"stepName":"n","input":1}}"#,
        r#""params":{"eventCount":4.5}"#,
    );
    assert!(at(&out, "events").is_none(), "slot 5 <= 4.5 + 1");
    // sinceCursor wins over eventCount; "" means from the beginning.
    let out = h.apply_with(
        r#"{"eventType":"step_created","correlationId":"s10","eventData":{"stepName":"n","input":1}}"#,
        r#""params":{"eventCount":0,"sinceCursor":""}"#,
    );
    assert_eq!(at(&out, "events").and_then(Value::as_array).map(Vec::len), Some(6));
    assert_eq!(at(&out, "hasMore"), Some(&Value::Bool(false)));
    let out = h.apply_with(
        r#"{"eventType":"step_created","correlationId":"s11","eventData":{"stepName":"n","input":1}}"#,
        r#""params":{"sinceCursor":"evnt_00000000000000000000000005"}"#,
    );
    let ids: Vec<&str> = at(&out, "events").and_then(Value::as_array).unwrap().iter().map(|e| s(e, "eventId")).collect();
    assert_eq!(ids, ["evnt_00000000000000000000000006", "evnt_00000000000000000000000007"]);
}

/// What one sequential step costs in storage rows written on the run DO (the figure the
/// README's cost estimate uses): keys added, changed or deleted by step_created,
/// step_started and step_completed, each a row write on SQLite-backed storage.
#[test]
fn a_step_writes_a_bounded_number_of_rows() {
    let mut h = Harness::new();
    h.start_run();
    let snapshot = |h: &Harness| -> std::collections::BTreeMap<String, Option<String>> {
        h.store.keys().into_iter().map(|k| (k.to_string(), h.store.text(k).map(str::to_string))).collect()
    };
    let before = snapshot(&h);
    h.apply(CREATE_S1);
    h.apply(r#"{"eventType":"step_started","correlationId":"s1","eventData":{"attempt":1}}"#);
    h.apply(r#"{"eventType":"step_completed","correlationId":"s1","eventData":{"result":{"__type":"Uint8Array","data":"AQ=="}}}"#);
    let after = snapshot(&h);
    let changed = before.keys().chain(after.keys()).collect::<std::collections::BTreeSet<_>>();
    let rows = changed.into_iter().filter(|k| before.get(*k) != after.get(*k)).count();
    // Three events, the step record, the step index and the counters; well under a dozen.
    assert!((4..=12).contains(&rows), "{rows} rows written by one step");
    println!("rows written by one step (distinct keys): {rows}");
}
