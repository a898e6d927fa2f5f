//! Read methods and pagination.

use super::*;

fn page(h: &mut Harness, method: &str, params: &str) -> Value {
    let out = h.read(method, vec![v(params)]);
    assert_ok(&out);
    out.get("value").cloned().unwrap()
}

fn ids(p: &Value, member: &str) -> Vec<String> {
    p.get("data").and_then(Value::as_array).unwrap().iter().map(|e| s(e, member).to_string()).collect()
}

#[test]
fn empty_and_missing() {
    let mut h = Harness::new();
    assert_eq!(json(&h.read("getRun", vec![])), r#"{"ok":true,"value":null}"#);
    assert_eq!(json(&h.read("getStep", vec![v(r#""s""#)])), r#"{"ok":true,"value":null}"#);
    assert_eq!(json(&h.read("getEvent", vec![v(r#""not-an-event""#)])), r#"{"ok":true,"value":null}"#);
    for m in ["listEvents", "listSteps", "listHooks"] {
        assert_eq!(json(&h.read(m, vec![])), r#"{"ok":true,"value":{"cursor":null,"data":[],"hasMore":false}}"#);
        assert_eq!(json(&h.read(m, vec![Value::Null])), r#"{"ok":true,"value":{"cursor":null,"data":[],"hasMore":false}}"#);
    }
    assert!(h.keys().is_empty(), "reads write nothing");
}

#[test]
fn event_pages_asc_and_desc() {
    let mut h = Harness::new();
    h.start_run();
    for i in 0..6 {
        h.apply(&format!(r#"{{"eventType":"step_created","correlationId":"s{i}","eventData":{{"stepName":"n","input":1}}}}"#));
    }
    let mut seen = Vec::new();
    let mut cursor = Value::Null;
    loop {
        let p = page(&mut h, "listEvents", &format!(r#"{{"limit":3,"cursor":{}}}"#, json(&cursor)));
        seen.extend(ids(&p, "eventId"));
        cursor = p.get("cursor").cloned().unwrap();
        // Every page that returned events carries the cursor of its last one, the last
        // page too (the position past it, where the runtime resumes).
        assert_eq!(cursor.as_str(), seen.last().map(String::as_str));
        if p.get("hasMore") != Some(&Value::Bool(true)) {
            break;
        }
    }
    assert_eq!(seen.len(), 8);
    // From the last page's cursor: nothing newer, an empty page with a null cursor.
    let after = page(&mut h, "listEvents", &format!(r#"{{"limit":3,"cursor":{}}}"#, json(&cursor)));
    assert_eq!(json(&after), r#"{"cursor":null,"data":[],"hasMore":false}"#);
    // A newer event is listed from it.
    h.apply(r#"{"eventType":"step_created","correlationId":"s9","eventData":{"stepName":"n","input":1}}"#);
    let newer = page(&mut h, "listEvents", &format!(r#"{{"limit":3,"cursor":{}}}"#, json(&cursor)));
    assert_eq!(ids(&newer, "eventId"), ["evnt_00000000000000000000000009"]);
    assert_eq!(newer.get("cursor").and_then(Value::as_str), Some("evnt_00000000000000000000000009"));
    let desc = page(&mut h, "listEvents", r#"{"limit":3,"sortOrder":"desc"}"#);
    assert_eq!(ids(&desc, "eventId")[0], "evnt_00000000000000000000000009");
    let desc2 = page(&mut h, "listEvents", &format!(r#"{{"limit":3,"sortOrder":"desc","cursor":{}}}"#, json(desc.get("cursor").unwrap())));
    assert_eq!(ids(&desc2, "eventId")[0], "evnt_00000000000000000000000006");
    // Unknown sortOrder lists ascending; empty cursor means no cursor.
    let p = page(&mut h, "listEvents", r#"{"limit":2,"sortOrder":"sideways","cursor":""}"#);
    assert_eq!(ids(&p, "eventId"), ["evnt_00000000000000000000000001", "evnt_00000000000000000000000002"]);
    // limit 0: empty page that may report hasMore with a null cursor.
    let p = page(&mut h, "listEvents", r#"{"limit":0}"#);
    assert_eq!(json(&p), r#"{"cursor":null,"data":[],"hasMore":true}"#);
    // A negative limit reaches the platform's refusal.
    assert_eq!(h.call("listEvents", vec![v(r#"{"limit":-1}"#)]).unwrap_err(), RpcError::list_limit());
    // Default limit 100.
    assert_eq!(ids(&page(&mut h, "listEvents", "{}"), "eventId").len(), 9);
    let one = h.read("getEvent", vec![v(r#""evnt_00000000000000000000000001""#)]);
    assert_eq!(s(&one, "value.eventType"), "run_created");
}

#[test]
fn steps_and_hooks_list_in_creation_order() {
    let mut h = Harness::new();
    h.start_run();
    for id in ["z-first", "z-second", "a-third"] {
        h.tick(5);
        h.apply(&format!(r#"{{"eventType":"step_created","correlationId":"{id}","eventData":{{"stepName":"n","input":1}}}}"#));
        h.apply_with(
            &format!(r#"{{"eventType":"hook_created","correlationId":"{id}","eventData":{{"token":"t-{id}"}}}}"#),
            r#""tokenHolder":null"#,
        );
    }
    let asc = page(&mut h, "listSteps", "{}");
    assert_eq!(ids(&asc, "stepId"), ["z-first", "z-second", "a-third"]);
    let desc = page(&mut h, "listHooks", r#"{"sortOrder":"desc"}"#);
    assert_eq!(ids(&desc, "hookId"), ["a-third", "z-second", "z-first"]);
    let p1 = page(&mut h, "listSteps", r#"{"limit":2}"#);
    let cursor = s(&p1, "cursor").to_string();
    assert!(cursor.ends_with(":z-second") && cursor.len() == 24 + 1 + 8, "{cursor}");
    let p2 = page(&mut h, "listSteps", &format!(r#"{{"limit":2,"cursor":"{cursor}"}}"#));
    assert_eq!(ids(&p2, "stepId"), ["a-third"]);
    assert_eq!(p2.get("hasMore"), Some(&Value::Bool(false)));
    let back = page(&mut h, "listSteps", &format!(r#"{{"limit":5,"sortOrder":"desc","cursor":"{cursor}"}}"#));
    assert_eq!(ids(&back, "stepId"), ["z-first"]);
}

#[test]
fn same_millisecond_creations_list_by_id() {
    let mut h = Harness::new();
    h.start_run();
    // One call can only create one step; force equal times by freezing the clock.
    for id in ["b", "a", "c"] {
        h.now -= 1;
        h.apply(&format!(r#"{{"eventType":"step_created","correlationId":"{id}","eventData":{{"stepName":"n","input":1}}}}"#));
    }
    let p = page(&mut h, "listSteps", "{}");
    assert_eq!(ids(&p, "stepId"), ["a", "b", "c"]);
}
