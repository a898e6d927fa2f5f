//! Run lifecycle: creation, replay, start (idempotent, preload, skipPreload, resilient
//! bootstrap), terminal transitions and their guards. (Spec versions: `spec_versions.rs`.)

use super::*;
use crate::wire::date::iso;

#[test]
fn run_created_matches_the_spec_example() {
    let mut h = Harness::new();
    let out = h.create_run();
    let t = iso(T0 + 1);
    let lease = T0 + 1 + crate::protocol::lifecycle::MAX_RUN_INDEX_PUBLICATION_LIFETIME_MS;
    let want = format!(
        r#"{{"ok":true,"event":{{"eventType":"run_created","specVersion":6,"eventData":{{"deploymentId":"dep","workflowName":"wf","input":{{"__type":"Uint8Array","data":"AQID"}}}},"runId":"wrun_A","eventId":"evnt_00000000000000000000000001","createdAt":{{"__type":"Date","iso":"{t}"}}}},"run":{{"runId":"wrun_A","status":"pending","deploymentId":"dep","workflowName":"wf","specVersion":6,"input":{{"__type":"Uint8Array","data":"AQID"}},"attributes":{{}},"createdAt":{{"__type":"Date","iso":"{t}"}},"updatedAt":{{"__type":"Date","iso":"{t}"}}}},"releasedHooks":[],"runCreated":{{"workflowName":"wf","createdAt":{{"__type":"Date","iso":"{t}"}}}},"indexPublicationExpiresAt":{lease},"maxEvents":25000}}"#
    );
    assert_eq!(json(&out), json(&v(&want)));
}

#[test]
fn run_created_replay_returns_the_run_without_an_event() {
    let mut h = Harness::new();
    let first = h.create_run();
    let again = h.apply(r#"{"eventType":"run_created","specVersion":6,"eventData":{"deploymentId":"other","workflowName":"x","input":1}}"#);
    assert_ok(&again);
    assert_eq!(at(&again, "run"), at(&first, "run"));
    assert!(at(&again, "event").is_none() && at(&again, "runCreated").is_none());
    assert_eq!(at(&again, "maxEvents"), Some(&Value::num(25000)));
    assert_eq!(h.event_types(), ["run_created"]);
    // Even without eventData (the replay never reads it).
    assert_ok(&h.apply(r#"{"eventType":"run_created"}"#));
}

#[test]
fn run_created_keeps_execution_context_and_attributes_and_defaults_spec() {
    let mut h = Harness::new();
    let out = h.apply(r#"{"eventType":"run_created","eventData":{"deploymentId":"d","workflowName":"w","input":null,"executionContext":{"a":{"b":[1]}},"attributes":{"team":"core"},"encryptionPublicKey":"pk","junk":1},"junk":2}"#);
    assert_eq!(json(at(&out, "run.executionContext").unwrap()), r#"{"a":{"b":[1]}}"#);
    assert_eq!(json(at(&out, "run.attributes").unwrap()), r#"{"team":"core"}"#);
    assert_eq!(s(&out, "run.encryptionPublicKey"), "pk");
    assert!(at(&out, "run.input").is_none(), "top-level null input is compacted away");
    assert_eq!(at(&out, "event.eventData.input"), Some(&Value::Null), "the event keeps the nested null");
    assert!(at(&out, "event.junk").is_none() && at(&out, "event.eventData.junk").is_none());
    assert_eq!(at(&out, "event.specVersion"), Some(&Value::num(6)));
}

#[test]
fn run_started_transitions_and_preloads() {
    let mut h = Harness::new();
    h.create_run();
    let out = h.apply(r#"{"eventType":"run_started","specVersion":6,"eventData":{"input":5}}"#);
    assert_eq!(s(&out, "run.status"), "running");
    assert_eq!(at(&out, "run.startedAt"), at(&out, "run.updatedAt"));
    assert!(at(&out, "event.eventData").is_none(), "run_started never stores eventData");
    assert_eq!(s(&out, "events.1.eventId"), "evnt_00000000000000000000000002");
    // The preload's cursor is the position past its last event, where the runtime resumes.
    assert_eq!(s(&out, "cursor"), "evnt_00000000000000000000000002");
    assert_eq!(at(&out, "hasMore"), Some(&Value::Bool(false)));
    assert_eq!(at(&out, "maxEvents"), Some(&Value::num(25000)));
    assert!(at(&out, "runCreated").is_none());

    // Idempotent replay: no event, same run, preload.
    let again = h.apply(r#"{"eventType":"run_started","specVersion":6}"#);
    assert!(at(&again, "event").is_none());
    assert_eq!(at(&again, "run"), at(&out, "run"));
    assert_eq!(at(&again, "events").and_then(Value::as_array).map(Vec::len), Some(2));
    // skipPreload: maxEvents but no page.
    let skip = h.apply_with(r#"{"eventType":"run_started"}"#, r#""params":{"skipPreload":true}"#);
    assert!(at(&skip, "events").is_none() && at(&skip, "cursor").is_none() && at(&skip, "hasMore").is_none());
    assert_eq!(at(&skip, "maxEvents"), Some(&Value::num(25000)));
    // sinceCursor does not replace the preload of an event-less replay.
    let since = h.apply_with(r#"{"eventType":"run_started"}"#, r#""params":{"sinceCursor":"evnt_00000000000000000000000001"}"#);
    assert_eq!(at(&since, "events").and_then(Value::as_array).map(Vec::len), Some(2));
    assert_eq!(h.event_types(), ["run_created", "run_started"]);
}

#[test]
fn preload_size_follows_workflow_max_events() {
    let mut h = Harness::new();
    h.config.workflow_max_events = Some("1".into());
    h.create_run();
    let out = h.apply(r#"{"eventType":"run_started"}"#);
    assert_eq!(at(&out, "maxEvents"), Some(&Value::num(1)));
    assert_eq!(at(&out, "events").and_then(Value::as_array).map(Vec::len), Some(1));
    assert_eq!(s(&out, "cursor"), "evnt_00000000000000000000000001");
    assert_eq!(at(&out, "hasMore"), Some(&Value::Bool(true)));
}

#[test]
fn resilient_start_bootstraps_a_missing_run() {
    let mut h = Harness::new();
    let out = h.apply(r#"{"eventType":"run_started","specVersion":6,"eventData":{"deploymentId":"d","workflowName":"wf","input":{"__type":"Uint8Array","data":"BAI="},"executionContext":{"via":"queue"},"attributes":{"boot":"yes"}}}"#);
    assert_eq!(s(&out, "run.status"), "running");
    assert_eq!(s(&out, "runCreated.workflowName"), "wf");
    assert_eq!(s(&out, "event.eventId"), "evnt_00000000000000000000000002");
    assert_eq!(h.event_types(), ["run_created", "run_started"]);
    let events = h.events();
    assert_eq!(
        json(at(&events[0], "eventData").unwrap()),
        r#"{"attributes":{"boot":"yes"},"deploymentId":"d","executionContext":{"via":"queue"},"input":{"__type":"Uint8Array","data":"BAI="},"workflowName":"wf"}"#
    );
    assert!(at(&events[1], "eventData").is_none());
    // eventCount 0: the stale writer learns the bootstrap slot.
    let mut h = Harness::new();
    let out = h.apply_with(
        r#"{"eventType":"run_started","eventData":{"deploymentId":"d","workflowName":"wf","input":1}}"#,
        r#""params":{"eventCount":0}"#,
    );
    assert_eq!(at(&out, "events").and_then(Value::as_array).map(Vec::len), Some(1));
    assert_eq!(s(&out, "events.0.eventType"), "run_created");
    assert_eq!(at(&out, "cursor"), Some(&Value::Null));
}

#[test]
fn incomplete_bootstrap_is_run_not_found() {
    let mut h = Harness::new();
    for data in [
        r#"{"eventType":"run_started"}"#,
        r#"{"eventType":"run_started","eventData":{"deploymentId":"d","input":1}}"#,
        r#"{"eventType":"run_started","eventData":{"deploymentId":"d","workflowName":"w"}}"#,
        r#"{"eventType":"run_started","eventData":{"deploymentId":"","workflowName":"w","input":1}}"#,
    ] {
        assert_fail(&h.apply(data), "RUN_NOT_FOUND", r#"Workflow run "wrun_A" not found"#);
    }
    assert!(h.keys().is_empty());
}

#[test]
fn terminal_transitions() {
    let mut h = Harness::new();
    h.start_run();
    let out = h.apply_with(
        r#"{"eventType":"run_completed","eventData":{"output":{"__type":"Uint8Array","data":"CQk="}}}"#,
        r#""params":{"occurredAt":{"__type":"Date","iso":"2000-01-02T03:04:05.678Z"}}"#,
    );
    assert_eq!(s(&out, "run.status"), "completed");
    assert_eq!(at(&out, "run.completedAt"), at(&out, "event.createdAt"));
    assert_eq!(json(at(&out, "event.occurredAt").unwrap()), r#"{"__type":"Date","iso":"2000-01-02T03:04:05.678Z"}"#);
    assert_eq!(at(&out, "releasedHooks"), Some(&Value::Array(vec![])));

    let mut h = Harness::new();
    h.create_run();
    let out = h.apply(r#"{"eventType":"run_failed","eventData":{"error":"boom \u0000 nul","errorCode":"USER_ERROR"}}"#);
    assert_eq!(json(at(&out, "run.error").unwrap()), r#"{"code":"USER_ERROR","message":"boom \u0000 nul"}"#);
    assert!(at(&out, "run.startedAt").is_none(), "failed from pending keeps startedAt absent");

    let mut h = Harness::new();
    h.create_run();
    let out = h.apply(r#"{"eventType":"run_failed","eventData":{"error":{"__type":"Uint8Array","data":"BQ=="}}}"#);
    assert_eq!(json(at(&out, "run.error").unwrap()), r#"{"message":"Unknown error"}"#);
    assert_eq!(json(at(&out, "event.eventData.error").unwrap()), r#"{"__type":"Uint8Array","data":"BQ=="}"#);

    let mut h = Harness::new();
    h.create_run();
    let out = h.apply(r#"{"eventType":"run_failed","eventData":{"error":{"message":"m","stack":"s","code":"C","x":1}}}"#);
    assert_eq!(json(at(&out, "run.error").unwrap()), r#"{"code":"C","message":"m","stack":"s"}"#);
}

#[test]
fn terminal_run_guards() {
    let mut h = Harness::new();
    h.start_run();
    h.apply(r#"{"eventType":"run_completed","eventData":{}}"#);
    let conflict = |m: &str| m.to_string();
    assert_fail(
        &h.apply(r#"{"eventType":"run_started"}"#),
        "RUN_EXPIRED",
        r#"Workflow run "wrun_A" is already in terminal state "completed""#,
    );
    for t in ["run_completed", "run_failed", "run_cancelled"] {
        let out = h.apply(&format!(r#"{{"eventType":"{t}","eventData":{{"error":"x"}}}}"#));
        assert_fail(&out, "ENTITY_CONFLICT", &conflict(r#"Cannot transition run from terminal state "completed""#));
    }
    let creation = r#"Cannot create new entities on run in terminal state "completed""#;
    assert_fail(
        &h.apply(r#"{"eventType":"step_created","correlationId":"s","eventData":{"stepName":"n","input":1}}"#),
        "ENTITY_CONFLICT",
        creation,
    );
    assert_fail(
        &h.apply(r#"{"eventType":"step_started","correlationId":"s","eventData":{"stepName":"n","input":1}}"#),
        "ENTITY_CONFLICT",
        creation,
    );
    assert_fail(
        &h.apply(r#"{"eventType":"step_started","correlationId":"s","eventData":{"stepName":"","input":null}}"#),
        "ENTITY_CONFLICT",
        creation,
    );
    assert_fail(&h.apply(r#"{"eventType":"hook_created","correlationId":"h","eventData":{"token":"t"}}"#), "ENTITY_CONFLICT", creation);
    assert_fail(&h.apply(r#"{"eventType":"wait_created","correlationId":"w","eventData":{"resumeAt":1}}"#), "ENTITY_CONFLICT", creation);
    assert_fail(
        &h.apply(r#"{"eventType":"attr_set","eventData":{"changes":[],"writer":{"type":"workflow"}}}"#),
        "ENTITY_CONFLICT",
        r#"Cannot set attributes on run in terminal state "completed""#,
    );
    // Non-creation events continue to their own checks.
    assert_fail(&h.apply(r#"{"eventType":"step_started","correlationId":"s"}"#), "STEP_NOT_FOUND", r#"Step "s" not found"#);
    assert_fail(&h.apply(r#"{"eventType":"wait_completed","correlationId":"w"}"#), "WAIT_NOT_FOUND", r#"Wait "w" not found"#);
    assert_fail(&h.apply(r#"{"eventType":"hook_disposed","correlationId":"h"}"#), "HOOK_NOT_FOUND", r#"Hook "h" not found"#);
    assert_eq!(h.events().len(), 3);
}

#[test]
fn repeated_cancel_appends_every_time() {
    let mut h = Harness::new();
    h.create_run();
    let first = h.apply(r#"{"eventType":"run_cancelled","eventData":{"cancelReason":"user asked"}}"#);
    assert_eq!(s(&first, "run.status"), "cancelled");
    let second = h.apply(r#"{"eventType":"run_cancelled"}"#);
    assert_eq!(s(&second, "event.eventId"), "evnt_00000000000000000000000003");
    assert_eq!(at(&second, "run"), at(&first, "run"), "the run is returned unchanged");
    assert_eq!(at(&second, "maxEvents"), Some(&Value::num(25000)));
    h.apply(r#"{"eventType":"run_cancelled"}"#);
    assert_eq!(h.event_types(), ["run_created", "run_cancelled", "run_cancelled", "run_cancelled"]);
}

#[test]
fn cancel_reason_limit() {
    let mut h = Harness::new();
    h.create_run();
    let long = "x".repeat(513);
    let e = h.apply_err(&format!(r#"{{"eventType":"run_cancelled","eventData":{{"cancelReason":"{long}"}}}}"#));
    assert!(zod_message(&e).contains("\"too_big\""), "{}", e.message);
    assert_eq!(s(&h.read("getRun", vec![]), "value.status"), "pending", "nothing written");
    let ok = h.apply(&format!(r#"{{"eventType":"run_cancelled","eventData":{{"cancelReason":"{}"}}}}"#, "y".repeat(512)));
    assert_eq!(s(&ok, "run.status"), "cancelled");
}
