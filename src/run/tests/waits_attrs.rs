//! Waits and attributes.

use super::*;

#[test]
fn wait_lifecycle() {
    let mut h = Harness::new();
    h.start_run();
    let out = h.apply(r#"{"eventType":"wait_created","correlationId":"wait-a","eventData":{"resumeAt":"2099-01-01T00:00:00.000Z"}}"#);
    assert_eq!(s(&out, "wait.waitId"), "wrun_A-wait-a");
    assert_eq!(s(&out, "wait.status"), "waiting");
    assert_eq!(json(at(&out, "wait.resumeAt").unwrap()), r#"{"__type":"Date","iso":"2099-01-01T00:00:00.000Z"}"#);
    assert_eq!(json(at(&out, "event.eventData.resumeAt").unwrap()), r#"{"__type":"Date","iso":"2099-01-01T00:00:00.000Z"}"#);
    assert_fail(
        &h.apply(r#"{"eventType":"wait_created","correlationId":"wait-a","eventData":{"resumeAt":1}}"#),
        "ENTITY_CONFLICT",
        r#"Wait "wait-a" already exists"#,
    );
    let done = h.apply(r#"{"eventType":"wait_completed","correlationId":"wait-a"}"#);
    assert_eq!(s(&done, "wait.status"), "completed");
    assert_eq!(at(&done, "wait.createdAt"), at(&out, "wait.createdAt"));
    assert_eq!(at(&done, "wait.resumeAt"), at(&out, "wait.resumeAt"));
    assert_fail(
        &h.apply(r#"{"eventType":"wait_completed","correlationId":"wait-a"}"#),
        "ENTITY_CONFLICT",
        r#"Wait "wait-a" already completed"#,
    );
    assert_fail(
        &h.apply(r#"{"eventType":"wait_created","correlationId":"wait-a","eventData":{"resumeAt":1}}"#),
        "ENTITY_CONFLICT",
        r#"Wait "wait-a" already exists"#,
    );
    assert_fail(&h.apply(r#"{"eventType":"wait_completed","correlationId":"nope"}"#), "WAIT_NOT_FOUND", r#"Wait "nope" not found"#);
    // A new resumeAt on completion replaces the old one.
    h.apply(r#"{"eventType":"wait_created","correlationId":"b","eventData":{"resumeAt":0}}"#);
    let out = h.apply(r#"{"eventType":"wait_completed","correlationId":"b","eventData":{"resumeAt":"2000-01-01T00:00:00.000Z"}}"#);
    assert_eq!(json(at(&out, "wait.resumeAt").unwrap()), r#"{"__type":"Date","iso":"2000-01-01T00:00:00.000Z"}"#);
}

#[test]
fn wait_validation_messages() {
    let mut h = Harness::new();
    h.start_run();
    let e = h.apply_err(r#"{"eventType":"wait_created","correlationId":"w3","eventData":{}}"#);
    assert!(zod_message(&e).contains("\"eventData\",\n      \"resumeAt\""), "{}", e.message);
    let e = h.apply_err(r#"{"eventType":"wait_created","correlationId":"w3","eventData":{"resumeAt":"not a date"}}"#);
    assert_eq!(zod_message(&e), "[\n  {\n    \"expected\": \"date\",\n    \"code\": \"invalid_type\",\n    \"received\": \"Invalid Date\",\n    \"path\": [\n      \"resumeAt\"\n    ],\n    \"message\": \"Invalid input: expected date, received Date\"\n  }\n]");
    let e = h.apply_err(r#"{"eventType":"wait_created","correlationId":"w3"}"#);
    assert_eq!(e, RpcError::type_error("Cannot read properties of undefined (reading 'resumeAt')"));
}

fn attr(h: &mut Harness, changes: &str, extra: &str) -> Result<Value, RpcError> {
    let req = format!(
        r#"{{"runId":"wrun_A","data":{{"eventType":"attr_set","specVersion":6{extra},"eventData":{{"changes":{changes},"writer":{{"type":"workflow"}}}}}}}}"#
    );
    h.request(&req)
}

#[test]
fn attribute_rules_and_messages() {
    let mut h = Harness::new();
    h.start_run();
    let reserved = r#"Attribute key "$y" starts with reserved prefix "$" — that namespace is reserved for framework/library code. Set { allowReservedAttributes: true } only if your caller is framework-level."#;
    let cases: Vec<(String, String)> = vec![
        (r#"[{"key":"$y","value":"r"}]"#.into(), reserved.into()),
        (r#"[{"key":"","value":"v"}]"#.into(), "Attribute key must not be empty".into()),
        (
            format!(r#"[{{"key":"{}","value":"v"}}]"#, "k".repeat(257)),
            format!("Attribute key length 257 exceeds limit 256: \"{}\"…", "k".repeat(32)),
        ),
        (format!(r#"[{{"key":"big","value":"{}x"}}]"#, "é".repeat(128)), "Attribute value byte length 257 exceeds limit 256".into()),
        (
            r#"[{"key":"dup","value":"1"},{"key":"dup","value":"2"}]"#.into(),
            r#"Attribute key "dup" appears more than once in the same batch"#.into(),
        ),
        (r#"[{"key":"n","value":5}]"#.into(), "Attribute value must be a string or null, got number".into()),
        (r#"[{"key":5,"value":"v"}]"#.into(), "Attribute key must be a string, got number".into()),
        (r#"[{"value":"v"}]"#.into(), "Attribute key must be a string, got undefined".into()),
        (
            r#"[{"key":"q\"x","value":"v"},{"key":"q\"x","value":"v"}]"#.into(),
            r#"Attribute key "q\"x" appears more than once in the same batch"#.into(),
        ),
    ];
    for (changes, message) in cases {
        let e = attr(&mut h, &changes, "").unwrap_err();
        assert_eq!(e, RpcError::attribute(&message), "{changes}");
    }
    let e = attr(&mut h, r#"[{"key":"","value":"v"},null]"#, "").unwrap_err();
    assert_eq!(e, RpcError::attribute("Attribute key must not be empty"), "validation reaches the null element later");
    let e = attr(&mut h, r#"[null]"#, "").unwrap_err();
    assert_eq!(e, RpcError::type_error("Cannot read properties of null (reading 'key')"));
    // allowReservedAttributes must be literally true (validated by the event schema).
    let e = h.apply_err(r#"{"eventType":"attr_set","eventData":{"changes":[{"key":"f","value":"v"}],"writer":{"type":"workflow"},"allowReservedAttributes":false}}"#);
    assert!(zod_message(&e).contains("Invalid input: expected true"));
    let ok = h.apply(r#"{"eventType":"attr_set","eventData":{"changes":[{"key":"$x","value":"v"}],"writer":{"type":"workflow"},"allowReservedAttributes":true}}"#);
    assert_eq!(json(at(&ok, "run.attributes").unwrap()), r#"{"$x":"v"}"#);
}

#[test]
fn attribute_cap_counts_the_merge() {
    let mut h = Harness::new();
    h.start_run();
    let batch = |from: usize, to: usize| {
        format!("[{}]", (from..to).map(|i| format!(r#"{{"key":"k{i}","value":"v"}}"#)).collect::<Vec<_>>().join(","))
    };
    assert_ok(&attr(&mut h, &batch(0, 64), "").unwrap());
    // Updating existing keys at the cap is fine; adding is not; deleting makes room.
    assert_ok(&attr(&mut h, &batch(0, 10), "").unwrap());
    let e = attr(&mut h, &batch(60, 67), "").unwrap_err();
    assert_eq!(e, RpcError::attribute("Run attribute count would exceed limit 64 (post-merge 67)"));
    assert_ok(&attr(&mut h, r#"[{"key":"k0","value":null},{"key":"new","value":"v"}]"#, "").unwrap());
    let run = h.read("getRun", vec![]);
    let attrs = at(&run, "value.attributes").and_then(Value::as_object).unwrap();
    assert_eq!(attrs.len(), 64);
    assert!(attrs.contains_key("new") && !attrs.contains_key("k0"));
    // run_created validates without existing keys.
    let mut h2 = Harness::new();
    let many = format!("{{{}}}", (0..65).map(|i| format!(r#""a{i}":"v""#)).collect::<Vec<_>>().join(","));
    let e = h2.apply_err(&format!(
        r#"{{"eventType":"run_created","eventData":{{"deploymentId":"d","workflowName":"w","input":1,"attributes":{many}}}}}"#
    ));
    assert_eq!(e, RpcError::attribute("Run attribute count would exceed limit 64 (post-merge 65)"));
    let e = h2.apply_err(
        r#"{"eventType":"run_created","eventData":{"deploymentId":"d","workflowName":"w","input":1,"attributes":{"$rootRunId":"r"}}}"#,
    );
    assert!(e.message.starts_with("AttributeValidationError: Attribute key \"$rootRunId\""));
    assert!(h2.keys().is_empty());
}

#[test]
fn workflow_attr_sets_are_deduplicated_by_correlation_id() {
    let mut h = Harness::new();
    h.start_run();
    let first = attr(&mut h, r#"[{"key":"region","value":"us-west"}]"#, r#","correlationId":"attr-1""#).unwrap();
    assert_eq!(json(at(&first, "run.attributes").unwrap()), r#"{"region":"us-west"}"#);
    assert_eq!(at(&first, "maxEvents"), Some(&Value::num(25000)));
    let again = attr(&mut h, r#"[{"key":"region","value":"eu"}]"#, r#","correlationId":"attr-1""#).unwrap();
    assert_fail(&again, "ENTITY_CONFLICT", r#"Attribute event "attr-1" already exists"#);
    // Step-authored attr_sets are not deduplicated.
    for _ in 0..2 {
        let out = h.apply(r#"{"eventType":"attr_set","correlationId":"attr-2","eventData":{"changes":[{"key":"s","value":"1"}],"writer":{"type":"step","stepId":"st","attempt":1}}}"#);
        assert_ok(&out);
    }
    assert_eq!(h.event_types().iter().filter(|t| *t == "attr_set").count(), 3);
    let run = h.read("getRun", vec![]);
    assert_eq!(json(at(&run, "value.attributes").unwrap()), r#"{"region":"us-west","s":"1"}"#);
}
