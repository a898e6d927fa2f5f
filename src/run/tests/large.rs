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

/// Storage operations a step event costs, counted on the store under the call: holding
/// the writes back ([`crate::store::buffered::Buffered`], the shell's default) adds no
/// read or write to what the call does on storage directly.
#[test]
fn buffered_step_events_cost_no_more_storage_operations_than_direct_ones() {
    use crate::protocol::hop::{Args, Ctx};
    use crate::store::alarm::Alarm;
    use crate::store::buffered::Buffered;
    use crate::store::{ListOptions, Store, StoreResult, Stored};

    #[derive(Default, Debug, PartialEq, Eq, Clone, Copy)]
    struct Ops {
        reads: usize,
        writes: usize,
        lists: usize,
    }
    struct Counting<'a>(&'a mut MemoryStore, Ops);
    impl Store for Counting<'_> {
        fn get_value(&mut self, key: &str) -> StoreResult<Option<Stored>> {
            self.1.reads += 1;
            self.0.get_value(key)
        }
        fn put(&mut self, key: &str, value: &str) -> StoreResult<()> {
            self.1.writes += 1;
            self.0.put(key, value)
        }
        fn put_bytes(&mut self, key: &str, value: &[u8]) -> StoreResult<()> {
            self.1.writes += 1;
            self.0.put_bytes(key, value)
        }
        fn delete(&mut self, key: &str) -> StoreResult<bool> {
            self.1.writes += 1;
            self.0.delete(key)
        }
        fn list_values(&mut self, options: &ListOptions) -> StoreResult<Vec<(String, Stored)>> {
            self.1.lists += 1;
            self.0.list_values(options)
        }
    }

    let events = [
        r#"{"eventType":"run_created","specVersion":6,"eventData":{"deploymentId":"d","workflowName":"wf","input":{"__type":"Uint8Array","data":"AQID"}}}"#,
        r#"{"eventType":"run_started","specVersion":6}"#,
        r#"{"eventType":"step_created","specVersion":6,"correlationId":"step_1","eventData":{"stepName":"work","input":{"__type":"Uint8Array","data":"AQID"}}}"#,
        r#"{"eventType":"step_started","specVersion":6,"correlationId":"step_1"}"#,
        r#"{"eventType":"step_completed","specVersion":6,"correlationId":"step_1","eventData":{"result":{"__type":"Uint8Array","data":"AQID"}}}"#,
    ];
    let run = |buffered: bool| -> (Vec<Ops>, MemoryStore) {
        let config = crate::config::Config::default();
        let mut mem = MemoryStore::new();
        let mut per_event = Vec::new();
        for (i, data) in events.iter().enumerate() {
            let ctx = Ctx { now: T0 + i as i64, name: "wrun_ops", config: &config };
            let request = v(&format!(r#"{{"runId":"wrun_ops","data":{data},"cleanup":{{"retentionMs":0,"queueShards":1}}}}"#));
            let args = [request];
            let mut alarm = Alarm::unknown();
            let mut counting = Counting(&mut mem, Ops::default());
            if buffered {
                let mut b = Buffered::new(&mut counting);
                crate::run::call(&mut b, &ctx, &mut alarm, "applyEvent", Args(&args)).expect("applied");
                b.flush().expect("flushed");
            } else {
                crate::run::call(&mut counting, &ctx, &mut alarm, "applyEvent", Args(&args)).expect("applied");
            }
            per_event.push(counting.1);
        }
        (per_event, mem)
    };
    let (direct, direct_store) = run(false);
    let (buffered, buffered_store) = run(true);
    assert_eq!(direct_store.data, buffered_store.data, "the same records");
    for (i, (d, b)) in direct.iter().zip(&buffered).enumerate() {
        assert!(b.reads <= d.reads && b.writes <= d.writes && b.lists <= d.lists, "event {i}: buffered {b:?}, direct {d:?}");
    }
    // The step events' cost, as docs/performance.md quotes it.
    let step: Vec<_> = buffered[2..].iter().map(|o| (o.reads, o.writes)).collect();
    assert!(step.iter().all(|&(r, w)| r <= 6 && w <= 5), "{step:?}");
}
