//! Guard order on a missing run, thrown errors (and their rollback), dense slots.

use super::*;
use crate::store::Store;

#[test]
fn missing_run_answers_in_guard_order() {
    let mut h = Harness::new();
    let not_found = r#"Workflow run "wrun_A" not found"#;
    for data in [
        r#"{"eventType":"run_completed","eventData":{"output":1}}"#,
        r#"{"eventType":"run_failed","eventData":{"error":1}}"#,
        r#"{"eventType":"run_cancelled"}"#,
        r#"{"eventType":"step_created","correlationId":"s","eventData":{"stepName":"n","input":1}}"#,
        r#"{"eventType":"hook_created","correlationId":"h","eventData":{"token":"t"}}"#,
        r#"{"eventType":"wait_created","correlationId":"w","eventData":{"resumeAt":1}}"#,
        r#"{"eventType":"wait_completed","correlationId":"w"}"#,
        r#"{"eventType":"attr_set","eventData":{"changes":[],"writer":{"type":"workflow"}}}"#,
        r#"{"eventType":"bogus_event","correlationId":"c"}"#,
        r#"{"eventType":"hook_received","eventData":{"payload":1}}"#,
    ] {
        assert_fail(&h.apply(data), "RUN_NOT_FOUND", not_found);
    }
    // Step events check the step first; step_completed / step_retrying never read the run.
    for t in ["step_started", "step_completed", "step_failed", "step_retrying"] {
        let out = h.apply(&format!(r#"{{"eventType":"{t}","correlationId":"st1","eventData":{{"result":1,"error":"e"}}}}"#));
        assert_fail(&out, "STEP_NOT_FOUND", r#"Step "st1" not found"#);
    }
    for t in ["hook_received", "hook_disposed"] {
        let out = h.apply(&format!(r#"{{"eventType":"{t}","correlationId":"hk1","eventData":{{"payload":1}}}}"#));
        assert_fail(&out, "HOOK_NOT_FOUND", r#"Hook "hk1" not found"#);
    }
    // A missing correlationId is interpolated the JavaScript way.
    assert_fail(&h.apply(r#"{"eventType":"step_started"}"#), "STEP_NOT_FOUND", r#"Step "undefined" not found"#);
    assert!(h.keys().is_empty(), "failures write nothing");
}

#[test]
fn thrown_errors_roll_back_and_take_no_slot() {
    let mut h = Harness::new();
    h.start_run();
    let before = h.store.data.clone();
    let e = h.apply_err(r#"{"eventType":"bogus_event","specVersion":6,"correlationId":"c1","eventData":{"x":1}}"#);
    assert_eq!(
        e.message,
        "ZodError: [\n  {\n    \"code\": \"invalid_union\",\n    \"errors\": [],\n    \"note\": \"No matching discriminator\",\n    \"discriminator\": \"eventType\",\n    \"path\": [\n      \"eventType\"\n    ],\n    \"message\": \"Invalid input\"\n  }\n]"
    );
    let e = h.apply_err(r#"{"eventType":"run_completed","specVersion":6}"#);
    assert_eq!(e, RpcError::type_error("Cannot read properties of undefined (reading 'output')"));
    let e = h.apply_err(r#"{"eventType":"run_failed","eventData":null}"#);
    assert_eq!(e, RpcError::type_error("Cannot read properties of null (reading 'error')"));
    let e = h.apply_err(
        r#"{"eventType":"step_created","specVersion":6,"eventData":{"stepName":"s","input":{"__type":"Uint8Array","data":"AQ=="}}}"#,
    );
    assert_eq!(zod_message(&e), "[\n  {\n    \"expected\": \"string\",\n    \"code\": \"invalid_type\",\n    \"path\": [\n      \"stepId\"\n    ],\n    \"message\": \"Invalid input: expected string, received undefined\"\n  }\n]");
    let e = h.apply_err(r#"{"eventType":"hook_received"}"#);
    assert!(zod_message(&e).contains("\"eventData\""));
    assert_eq!(h.store.data, before, "nothing written by thrown calls");
    let next = h.apply(r#"{"eventType":"run_cancelled"}"#);
    assert_eq!(s(&next, "event.eventId"), "evnt_00000000000000000000000003", "no slot consumed");
}

#[test]
fn malformed_requests_throw_type_errors() {
    let mut h = Harness::new();
    assert_eq!(
        h.call("applyEvent", vec![]).unwrap_err(),
        RpcError::type_error("Cannot read properties of undefined (reading 'specVersion')")
    );
    assert_eq!(
        h.request(r#"{"runId":"wrun_A"}"#).unwrap_err(),
        RpcError::type_error("Cannot read properties of undefined (reading 'specVersion')")
    );
    assert_eq!(
        h.request(r#"{"runId":"wrun_A","data":null}"#).unwrap_err(),
        RpcError::type_error("Cannot read properties of null (reading 'specVersion')")
    );
    // attr_set with a correlationId but no writer reads `writer.type`.
    h.create_run();
    let e = h.apply_err(r#"{"eventType":"attr_set","correlationId":"a","eventData":{"changes":[{"key":"z","value":"1"}]}}"#);
    assert_eq!(e, RpcError::type_error("Cannot read properties of undefined (reading 'type')"));
    let e = h.apply_err(r#"{"eventType":"attr_set","eventData":{"writer":{"type":"workflow"}}}"#);
    assert_eq!(e, RpcError::type_error("changes is not iterable"));
    let e = h.apply_err(r#"{"eventType":"hook_created","correlationId":"h"}"#);
    assert_eq!(e, RpcError::type_error("Cannot read properties of undefined (reading 'token')"));
}

#[test]
fn event_ids_are_dense_slots_counted_by_the_last_event_key() {
    let mut h = Harness::new();
    h.start_run();
    // The counter row is written by the run's first call only (the reference rewrites it on
    // every call); the slots continue from the greatest event key.
    assert_eq!(h.store.text("event_sequence"), Some("1"));
    for i in 0..10 {
        h.apply(&format!(r#"{{"eventType":"step_created","correlationId":"s{i}","eventData":{{"stepName":"n","input":1}}}}"#));
        // A failure in between takes no slot.
        assert_eq!(
            s(
                &h.apply(&format!(r#"{{"eventType":"step_created","correlationId":"s{i}","eventData":{{"stepName":"n","input":1}}}}"#)),
                "code"
            ),
            "ENTITY_CONFLICT"
        );
    }
    let ids: Vec<String> = h.events().iter().map(|e| s(e, "eventId").to_string()).collect();
    let want: Vec<String> = (1..=12).map(|i| format!("evnt_{i:026}")).collect();
    assert_eq!(ids, want);
    assert_eq!(h.store.text("event_sequence"), Some("1"), "no counter write after the first call");
}

#[test]
fn a_successful_call_leaves_the_counter_row_as_the_reference_does() {
    let mut h = Harness::new();
    h.create_run();
    h.store.data.remove("event_sequence");
    // A replay appends nothing but writes the missing row (the run's cleanup counts it).
    h.create_run();
    assert_eq!(h.store.text("event_sequence"), Some("1"));
    // A failure writes nothing.
    h.store.data.remove("event_sequence");
    h.apply(r#"{"eventType":"step_started","correlationId":"missing"}"#);
    assert_eq!(h.store.text("event_sequence"), None);
}

#[test]
fn a_counter_stored_ahead_of_the_log_stays_a_floor() {
    // A run of an earlier build stored its counter on every call; where it is ahead of the
    // last event key (it never is in our logs, but nothing may ever reuse a slot), the next
    // slot follows it.
    let mut h = Harness::new();
    h.start_run();
    h.store.put("event_sequence", "20").unwrap();
    let out = h.apply(r#"{"eventType":"step_created","correlationId":"s1","eventData":{"stepName":"n","input":1}}"#);
    assert_eq!(s(&out, "event.eventId"), format!("evnt_{:026}", 21));
    assert_eq!(h.store.text("event_sequence"), Some("20"));
}

#[test]
fn a_log_whose_last_key_is_no_slot_keeps_saving_the_counter() {
    let mut h = Harness::new();
    h.start_run();
    // An event key that is not a slot id sorts after every slot id.
    h.store.put("event:evnt_01J0000000000000000000000Z", "{}").unwrap();
    h.store.put("event_sequence", "2").unwrap();
    let out = h.apply(r#"{"eventType":"step_created","correlationId":"s1","eventData":{"stepName":"n","input":1}}"#);
    assert_eq!(s(&out, "event.eventId"), format!("evnt_{:026}", 3));
    assert_eq!(h.store.text("event_sequence"), Some("3"));
}
