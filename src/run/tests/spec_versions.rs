//! Spec versions (issue #32): events and runs from 6 (the floor, what the clients declare)
//! through 7 (`SPEC_VERSION_SUPPORTS_SEALED_LOG`, what runtime 5.0.0-beta.55 stamps on most
//! events) are served and stored as sent; anything else is `RUN_NOT_SUPPORTED`.

use super::*;
use crate::run::records::Record;

const CREATED_AT_7: &str = r#"{"eventType":"run_created","specVersion":7,"eventData":{"deploymentId":"dep","workflowName":"wf","input":{"__type":"Uint8Array","data":"AQID"}}}"#;

fn stored_run(h: &mut Harness) -> Record {
    Record::load(&mut h.store, "run").unwrap().expect("a stored run")
}

fn set_stored_run_version(h: &mut Harness, version: Option<Value>) {
    let mut run = stored_run(h);
    match version {
        Some(v) => run.0.insert("specVersion".into(), v),
        None => run.0.remove("specVersion"),
    };
    run.save(&mut h.store, "run").unwrap();
}

fn spec(value: &Value, path: &str) -> Option<f64> {
    match at(value, path) {
        Some(Value::Number(n)) => Some(*n),
        other => panic!("no number at {path}: {other:?} in {}", json(value)),
    }
}

#[test]
fn events_at_7_on_a_run_at_6_are_accepted_and_stored_with_7() {
    let mut h = Harness::new();
    h.start_run();
    // The runtime's sequence for one step, a hook, a wait and the end, stamped 7.
    let step = h.apply(r#"{"eventType":"step_created","specVersion":7,"correlationId":"s1","eventData":{"stepName":"st","input":1}}"#);
    assert_ok(&step);
    assert_eq!(spec(&step, "event.specVersion"), Some(7.0));
    assert_eq!(spec(&step, "step.specVersion"), Some(7.0));
    let started = h.apply(r#"{"eventType":"step_started","specVersion":7,"correlationId":"s1"}"#);
    assert_eq!(s(&started, "step.status"), "running");
    let done = h.apply(r#"{"eventType":"step_completed","specVersion":7,"correlationId":"s1","eventData":{"result":2}}"#);
    assert_eq!(s(&done, "step.status"), "completed");
    let hook = h.apply_with(
        r#"{"eventType":"hook_created","specVersion":7,"correlationId":"hk","eventData":{"token":"tok7"}}"#,
        r#""tokenHolder":null"#,
    );
    assert_eq!(spec(&hook, "hook.specVersion"), Some(7.0));
    assert_eq!(spec(&hook, "hookToIndex.specVersion"), Some(7.0));
    let wait = h.apply(r#"{"eventType":"wait_created","specVersion":7,"correlationId":"w1","eventData":{"resumeAt":1}}"#);
    assert_eq!(spec(&wait, "wait.specVersion"), Some(7.0));
    assert_ok(&h.apply(r#"{"eventType":"wait_completed","specVersion":7,"correlationId":"w1"}"#));
    // A lazy step_started at 7: the step_created the DO writes carries the call's version.
    let lazy = h.apply(r#"{"eventType":"step_started","specVersion":7,"correlationId":"s2","eventData":{"stepName":"lz","input":5}}"#);
    assert_eq!(at(&lazy, "stepCreated"), Some(&Value::Bool(true)));
    assert_eq!(spec(&lazy, "step.specVersion"), Some(7.0));
    // An event without a version still counts as 6.
    assert_ok(&h.apply(r#"{"eventType":"step_completed","correlationId":"s2","eventData":{"result":3}}"#));
    let end = h.apply(r#"{"eventType":"run_completed","specVersion":7,"eventData":{"output":4}}"#);
    assert_eq!(s(&end, "run.status"), "completed");
    assert_eq!(spec(&end, "run.specVersion"), Some(6.0), "the run keeps the version it was created with");
    assert_eq!(spec(&end, "event.specVersion"), Some(7.0));

    let stored: Vec<(String, f64)> = h.events().iter().map(|e| (s(e, "eventType").to_string(), spec(e, "specVersion").unwrap())).collect();
    let want = [
        ("run_created", 6.0),
        ("run_started", 6.0),
        ("step_created", 7.0),
        ("step_started", 7.0),
        ("step_completed", 7.0),
        ("hook_created", 7.0),
        ("wait_created", 7.0),
        ("wait_completed", 7.0),
        ("step_created", 7.0),
        ("step_started", 7.0),
        ("step_completed", 6.0),
        ("run_completed", 7.0),
    ];
    let want: Vec<(String, f64)> = want.iter().map(|(t, v)| (t.to_string(), *v)).collect();
    assert_eq!(stored, want);
    assert_eq!(spec(&h.read("getRun", vec![]), "value.specVersion"), Some(6.0));
    assert_eq!(spec(&h.read("getStep", vec![Value::str("s1")]), "value.specVersion"), Some(7.0));
}

#[test]
fn a_run_created_at_7_is_served_and_its_record_carries_7() {
    let mut h = Harness::new();
    let created = h.apply(CREATED_AT_7);
    assert_ok(&created);
    assert_eq!(spec(&created, "run.specVersion"), Some(7.0));
    assert_eq!(spec(&created, "event.specVersion"), Some(7.0));
    assert_eq!(stored_run(&mut h).get("specVersion"), Some(&Value::num(7)));
    // The runtime may start it at the client's declared 6, or at 7; both are served.
    let started = h.apply(r#"{"eventType":"run_started","specVersion":6}"#);
    assert_eq!(s(&started, "run.status"), "running");
    assert_eq!(spec(&started, "run.specVersion"), Some(7.0));
    assert_eq!(spec(&started, "event.specVersion"), Some(6.0));
    assert_ok(&h.apply(r#"{"eventType":"run_started","specVersion":7}"#));
    assert_ok(&h.apply(r#"{"eventType":"step_created","specVersion":7,"correlationId":"s1","eventData":{"stepName":"st","input":1}}"#));
    let end = h.apply(r#"{"eventType":"run_completed","specVersion":7,"eventData":{"output":1}}"#);
    assert_eq!(s(&end, "run.status"), "completed");
    assert_eq!(spec(&h.read("getRun", vec![]), "value.specVersion"), Some(7.0));
    // The replay of run_created answers the stored run, still at 7.
    assert_eq!(spec(&h.apply(CREATED_AT_7), "run.specVersion"), Some(7.0));

    // Resilient start at 7: the run and its synthetic run_created carry 7.
    let mut h = Harness::new();
    let boot = h.apply(r#"{"eventType":"run_started","specVersion":7,"eventData":{"deploymentId":"d","workflowName":"wf","input":1}}"#);
    assert_eq!(s(&boot, "run.status"), "running");
    assert_eq!(spec(&boot, "run.specVersion"), Some(7.0));
    let versions: Vec<f64> = h.events().iter().map(|e| spec(e, "specVersion").unwrap()).collect();
    assert_eq!(versions, [7.0, 7.0]);
}

#[test]
fn versions_outside_6_through_7_are_refused() {
    let mut h = Harness::new();
    // Below the floor: the reference's text (golden runs-core seq 107, runs-040 seq 85).
    let out = h.apply(r#"{"eventType":"run_created","specVersion":5,"eventData":{"deploymentId":"d","workflowName":"w","input":1}}"#);
    assert_fail(&out, "RUN_NOT_SUPPORTED", r#"Run "wrun_A" uses unsupported specVersion 5; this world requires 6"#);
    assert_eq!(at(&out, "runSpecVersion"), Some(&Value::num(5)));
    // Above the ceiling.
    let out = h.apply(r#"{"eventType":"run_created","specVersion":8,"eventData":{"deploymentId":"d","workflowName":"w","input":1}}"#);
    assert_fail(&out, "RUN_NOT_SUPPORTED", r#"Run "wrun_A" uses unsupported specVersion 8; this world supports 6 through 7"#);
    assert_eq!(at(&out, "runSpecVersion"), Some(&Value::num(8)));
    // Not an integer, not a number.
    let out = h.apply(r#"{"eventType":"run_created","specVersion":6.5,"eventData":{"deploymentId":"d","workflowName":"w","input":1}}"#);
    assert_fail(&out, "RUN_NOT_SUPPORTED", r#"Run "wrun_A" uses unsupported specVersion 6.5; this world supports 6 through 7"#);
    let out = h.apply(r#"{"eventType":"run_created","specVersion":"7","eventData":{"deploymentId":"d","workflowName":"w","input":1}}"#);
    assert_fail(&out, "RUN_NOT_SUPPORTED", r#"Run "wrun_A" uses unsupported specVersion 7; this world requires 6"#);
    assert_eq!(at(&out, "runSpecVersion"), Some(&Value::str("7")));
    assert!(h.keys().is_empty(), "a failure writes nothing");
    // Unknown types and missing runs still check the version first.
    assert_eq!(s(&h.apply(r#"{"eventType":"bogus","specVersion":8}"#), "code"), "RUN_NOT_SUPPORTED");

    // On a run at 6: an event at 8 or 5 is refused and writes nothing.
    h.start_run();
    let before = h.store.data.clone();
    let out = h.apply(r#"{"eventType":"step_created","specVersion":8,"correlationId":"s1","eventData":{"stepName":"st","input":1}}"#);
    assert_fail(&out, "RUN_NOT_SUPPORTED", r#"Run "wrun_A" uses unsupported specVersion 8; this world supports 6 through 7"#);
    let out = h.apply(r#"{"eventType":"run_completed","specVersion":5,"eventData":{"output":1}}"#);
    assert_fail(&out, "RUN_NOT_SUPPORTED", r#"Run "wrun_A" uses unsupported specVersion 5; this world requires 6"#);
    assert_eq!(h.store.data, before);

    // A stored run of a version not served (written by something newer or older).
    for (version, message) in [
        (Some(Value::num(8)), r#"Run "wrun_A" uses unsupported specVersion 8; this world supports 6 through 7"#),
        (Some(Value::num(5)), r#"Run "wrun_A" uses unsupported specVersion 5; this world requires 6"#),
        (None, r#"Run "wrun_A" uses unsupported specVersion undefined; this world requires 6"#),
    ] {
        set_stored_run_version(&mut h, version.clone());
        let out = h.apply(r#"{"eventType":"step_created","specVersion":7,"correlationId":"s9","eventData":{"stepName":"st","input":1}}"#);
        assert_fail(&out, "RUN_NOT_SUPPORTED", message);
        assert_eq!(at(&out, "runSpecVersion"), version.as_ref());
    }
    set_stored_run_version(&mut h, Some(Value::num(7)));
    assert_ok(&h.apply(r#"{"eventType":"step_created","specVersion":6,"correlationId":"s9","eventData":{"stepName":"st","input":1}}"#));
}
