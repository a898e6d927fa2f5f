//! Payloads near the platform's value limit: byte payloads are kept raw (packed records),
//! so a run holds what the reference holds (about 2 MB per stored value).

use super::*;
use crate::store::PLATFORM_MAX_VALUE_BYTES;
use crate::wire::base64;

#[test]
fn a_step_with_a_1_9_mib_payload_is_stored_read_and_listed() {
    let mut h = Harness::new();
    h.store.max_value_bytes = Some(PLATFORM_MAX_VALUE_BYTES);
    h.create_run();
    let payload: Vec<u8> = (0..1_900_000u32).map(|i| (i % 251) as u8).collect();
    let data = base64::encode(&payload);
    // As base64 JSON text the event would be ~2.53 MB, over the limit.
    assert!(data.len() > PLATFORM_MAX_VALUE_BYTES);
    let out = h.apply(&format!(
        r#"{{"eventType":"step_created","specVersion":6,"correlationId":"big","eventData":{{"stepName":"s","input":{{"__type":"Uint8Array","data":"{data}"}}}}}}"#
    ));
    assert_eq!(at(&out, "ok"), Some(&Value::Bool(true)), "{}", json(&out).chars().take(300).collect::<String>());
    let step = h.read("getStep", vec![Value::str("big")]);
    assert_eq!(at(&step, "value.input"), Some(&Value::Bytes(payload.clone())));
    let page = h.read("listEvents", vec![v(r#"{"limit":10}"#)]);
    let events = at(&page, "value.data").and_then(Value::as_array).cloned().unwrap_or_default();
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].get("eventData").and_then(|d| d.get("input")), Some(&Value::Bytes(payload.clone())));
    // The step completes (a step holding a 1.9 MiB input and a 1.9 MiB output in one
    // value would exceed the limit here as in the reference).
    let done = h.apply(r#"{"eventType":"step_completed","specVersion":6,"correlationId":"big","eventData":{"result":{"__type":"Uint8Array","data":"AQID"}}}"#);
    assert_eq!(at(&done, "ok"), Some(&Value::Bool(true)));
    let step = h.read("getStep", vec![Value::str("big")]);
    assert_eq!(at(&step, "value.output"), Some(&Value::Bytes(vec![1, 2, 3])));
    assert_eq!(at(&step, "value.input"), Some(&Value::Bytes(payload)));
}

#[test]
fn a_payload_over_the_limit_fails_and_writes_nothing() {
    let mut h = Harness::new();
    h.store.max_value_bytes = Some(PLATFORM_MAX_VALUE_BYTES);
    h.create_run();
    let before = h.store.data.clone();
    let data = base64::encode(&vec![7u8; 2_300_000]);
    let err = h
        .request(&format!(
            r#"{{"runId":"wrun_A","data":{{"eventType":"step_created","specVersion":6,"correlationId":"big","eventData":{{"stepName":"s","input":{{"__type":"Uint8Array","data":"{data}"}}}}}},"cleanup":{{"retentionMs":0,"queueShards":1}}}}"#
        ))
        .unwrap_err();
    assert_eq!(err.message, "string or blob too big: SQLITE_TOOBIG");
    assert_eq!(h.store.data.len(), before.len());
}

/// 6 steps with 2 MB inputs (16 MB of events, 16 MB of steps): `listEvents`,
/// `listSteps` answer at most the response budget per page, even for a limit of 1e15,
/// and paging by cursor still yields every entry once.
#[test]
fn pages_of_large_events_and_steps_stay_within_the_response_budget() {
    use crate::store::page::{encoded_len, RESPONSE_BUDGET_BYTES};
    let mut h = Harness::new();
    h.create_run();
    let data = base64::encode(&vec![7u8; 2_000_000]);
    for i in 0..6 {
        h.apply(&format!(
            r#"{{"eventType":"step_created","specVersion":6,"correlationId":"s{i}","eventData":{{"stepName":"s","input":{{"__type":"Uint8Array","data":"{data}"}}}}}}"#
        ));
    }
    for (method, id, total) in [("listEvents", "eventId", 7), ("listSteps", "stepId", 6)] {
        for limit in ["1e15", "null"] {
            let mut seen: Vec<String> = Vec::new();
            let mut cursor = Value::Null;
            let mut pages = 0;
            loop {
                let out = h.read(method, vec![v(&format!(r#"{{"limit":{limit},"cursor":{}}}"#, json(&cursor)))]);
                let page = out.get("value").cloned().unwrap();
                assert!(encoded_len(&page) <= RESPONSE_BUDGET_BYTES + 256, "{method} page of {} bytes", encoded_len(&page));
                let data = page.get("data").and_then(Value::as_array).unwrap();
                assert!(!data.is_empty());
                seen.extend(data.iter().map(|e| s(e, id).to_string()));
                pages += 1;
                cursor = page.get("cursor").cloned().unwrap();
                if page.get("hasMore") != Some(&Value::Bool(true)) {
                    break;
                }
                // The event id, or the step's creation-index key `<createdAt>:<stepId>`.
                let last = seen.last().unwrap();
                assert!(cursor.as_str().is_some_and(|c| c == last || c.ends_with(&format!(":{last}"))), "{method}: {cursor:?}");
            }
            let mut unique = seen.clone();
            unique.dedup();
            assert_eq!((seen.len(), unique.len()), (total, total), "{method} {limit}: {seen:?}");
            assert!(pages >= 2, "{method} {limit}: {pages} pages");
        }
    }
}
