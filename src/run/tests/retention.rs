//! Expiry fencing, retention markers and automatic cleanup scheduling.

use super::*;
use crate::wire::date::iso;

fn retained(h: &mut Harness, retention_ms: u64, shards: &str) -> Value {
    h.create_run();
    let req = format!(
        r#"{{"runId":"wrun_A","data":{{"eventType":"run_failed","eventData":{{"error":{{"__type":"Uint8Array","data":"BQ=="}},"errorCode":"USER_ERROR"}}}},"cleanup":{{"retentionMs":{retention_ms},"queueShards":{shards}}}}}"#
    );
    h.request(&req).unwrap()
}

#[test]
fn terminal_outcome_schedules_cleanup() {
    let mut h = Harness::new();
    let out = retained(&mut h, 1000, "2");
    let completed = at(&out, "run.completedAt").cloned().unwrap();
    let Value::Date(Some(completed_ms)) = completed else { panic!() };
    assert_eq!(at(&out, "run.expiredAt"), Some(&Value::date(completed_ms + 1000)));
    assert_eq!(json(at(&out, "run.error").unwrap()), r#"{"code":"USER_ERROR","message":"Unknown error"}"#);
    // No hook, marker or wait: no terminal cleanup to page (`terminal::start`), so the alarm
    // is the retention deadline.
    assert_eq!(h.take_alarm(), Some(completed_ms + 1000));
    assert_eq!(h.store.text("terminal:cleanup"), None);
    assert_eq!(h.store.text("retention:queue-shards"), None, "the run was created with retention off");
    let record = Value::parse(h.store.text("retention:cleanup").unwrap()).unwrap();
    let want = format!(
        r#"{{"version":1,"runId":"wrun_A","workflowName":"wf","createdAt":{{"__type":"Date","iso":"{}"}},"status":"failed","completedAt":{{"__type":"Date","iso":"{}"}},"terminalStatus":"failed","reason":"terminal-retention","dueAt":{{"__type":"Date","iso":"{}"}},"queueShards":2,"phase":"retained","generation":0,"attempts":0,"deletedPayloadKeys":0,"deletedStreams":0,"deletedQueueMessages":0}}"#,
        iso(T0 + 1),
        iso(completed_ms),
        iso(completed_ms + 1000)
    );
    assert_eq!(json(&record), json(&v(&want)));
    assert_eq!(at(&h.read("getRun", vec![]), "value.expiredAt"), Some(&Value::date(completed_ms + 1000)));
}

#[test]
fn no_scheduling_without_retention_or_twice() {
    let mut h = Harness::new();
    retained(&mut h, 0, "1");
    assert!(!h.keys().contains(&"retention:cleanup".to_string()));
    assert!(!h.keys().contains(&"terminal:cleanup".to_string()), "nothing for a terminal cleanup to page");
    // A repeated cancel carries a terminal run: scheduled once, then left alone.
    let mut h = Harness::new();
    h.create_run();
    let req = |ms: u64| {
        format!(r#"{{"runId":"wrun_A","data":{{"eventType":"run_cancelled"}},"cleanup":{{"retentionMs":{ms},"queueShards":null}}}}"#)
    };
    h.request(&req(0)).unwrap();
    let out = h.request(&req(60_000)).unwrap();
    assert!(at(&out, "run.expiredAt").is_some());
    let record = h.store.text("retention:cleanup").unwrap().to_string();
    assert!(record.contains(r#""queueShards":1"#), "{record}");
    h.request(&req(5)).unwrap();
    assert_eq!(h.store.text("retention:cleanup"), Some(record.as_str()));
}

#[test]
fn reads_and_writes_are_fenced_once_due() {
    let mut h = Harness::new();
    retained(&mut h, 1000, "1");
    // Before dueAt: readable.
    assert_ok(&h.read("getRun", vec![]));
    h.tick(1000);
    let expected_due = {
        let rec = Value::parse(h.store.text("retention:cleanup").unwrap()).unwrap();
        rec.get("dueAt").cloned().unwrap()
    };
    let Value::Date(Some(due)) = expected_due else { panic!() };
    for (m, args) in [
        ("getRun", vec![]),
        ("getStep", vec![v(r#""s""#)]),
        ("getEvent", vec![v(r#""e""#)]),
        ("listEvents", vec![]),
        ("listSteps", vec![]),
        ("listHooks", vec![]),
    ] {
        let out = h.read(m, args);
        assert_fail(&out, "RUN_EXPIRED", &format!(r#"Workflow run "wrun_A" expired at {}"#, iso(due)));
        let t = at(&out, "tombstone").unwrap();
        let mut cleanup = Value::parse(h.store.text("retention:cleanup").unwrap()).unwrap();
        if let Value::Object(m) = &mut cleanup {
            m.insert("phase".into(), Value::str("tombstoned"));
            m.insert("tombstonedAt".into(), Value::date(due));
        }
        assert_eq!(
            json(t),
            json(&v(&format!(
                r#"{{"version":1,"runId":"wrun_A","status":"failed","terminalStatus":"failed","completedAt":{},"expiredAt":{{"__type":"Date","iso":"{d}"}},"tombstonedAt":{{"__type":"Date","iso":"{d}"}},"cleanup":{}}}"#,
                json(at(t, "completedAt").unwrap()),
                json(&cleanup),
                d = iso(due)
            )))
        );
    }
    let out = h.apply(r#"{"eventType":"run_started"}"#);
    assert_fail(&out, "RUN_EXPIRED", &format!(r#"Workflow run "wrun_A" expired at {}"#, iso(due)));
    assert!(at(&out, "tombstone").is_none());
}

#[test]
fn stored_tombstone_and_later_phases_fence() {
    let mut h = Harness::new();
    h.create_run();
    // A cleanup record past `retained` fences even before its due time.
    h.store.data.insert(
        "retention:cleanup".into(),
        r#"{"version":1,"runId":"wrun_A","terminalStatus":"completed","completedAt":{"__type":"Date","iso":"2099-01-01T00:00:00.000Z"},"dueAt":{"__type":"Date","iso":"2099-01-01T00:00:01.000Z"},"phase":"index","tombstonedAt":{"__type":"Date","iso":"2099-01-01T00:00:02.000Z"}}"#.into(),
    );
    let out = h.read("getRun", vec![]);
    assert_eq!(s(&out, "message"), r#"Workflow run "wrun_A" expired at 2099-01-01T00:00:01.000Z"#);
    assert_eq!(json(at(&out, "tombstone.tombstonedAt").unwrap()), r#"{"__type":"Date","iso":"2099-01-01T00:00:02.000Z"}"#);
    h.store.data.insert(
        "retention:tombstone".into(),
        r#"{"version":1,"runId":"wrun_T","terminalStatus":"completed","completedAt":{"__type":"Date","iso":"2000-01-01T00:00:00.000Z"},"expiredAt":{"__type":"Date","iso":"2000-01-01T00:00:01.000Z"},"tombstonedAt":{"__type":"Date","iso":"2000-01-01T00:00:02.000Z"}}"#.into(),
    );
    let out = h.read("listEvents", vec![]);
    assert_eq!(s(&out, "message"), r#"Workflow run "wrun_T" expired at 2000-01-01T00:00:01.000Z"#);
    let out = h.apply(r#"{"eventType":"run_started"}"#);
    assert_eq!(s(&out, "message"), r#"Workflow run "wrun_A" expired at 2000-01-01T00:00:01.000Z"#);
}

#[test]
fn correlation_and_hook_markers() {
    let mut h = Harness::new();
    h.config.correlation_index = Some("on".into());
    h.start_run();
    let out = h.apply_with(r#"{"eventType":"hook_created","correlationId":"h/1","eventData":{"token":"t:1"}}"#, r#""tokenHolder":null"#);
    let Value::Date(Some(created)) = at(&out, "event.createdAt").cloned().unwrap() else { panic!() };
    let index_key = format!("correlation:h%2F1:{created:013}:evnt_00000000000000000000000003:wrun_A");
    let marker = format!("retention:index:{}", crate::wire::uri::encode_uri_component(&index_key));
    assert_eq!(h.store.text(&marker), Some(json(&Value::String(index_key)).as_str()));
    assert_eq!(h.store.text("retention:hook:h%2F1:t%3A1"), Some(r#"{"hookId":"h/1","token":"t:1"}"#));
    // Events without a correlationId leave no index marker.
    let before = h.keys().iter().filter(|k| k.starts_with("retention:index:")).count();
    h.apply(r#"{"eventType":"attr_set","eventData":{"changes":[],"writer":{"type":"workflow"}}}"#);
    assert_eq!(h.keys().iter().filter(|k| k.starts_with("retention:index:")).count(), before);
}

#[test]
fn no_correlation_markers_when_the_deployment_keeps_no_correlation_index() {
    let markers = |h: &Harness| h.keys().iter().filter(|k| k.starts_with("retention:index:")).count();
    let step = r#"{"eventType":"step_started","correlationId":"s1","eventData":{"stepName":"n","input":1}}"#;
    for (setting, want) in [(None, 0), (Some("on"), 2), (Some("off"), 0), (Some("bogus"), 2)] {
        let mut h = Harness::new();
        h.config.correlation_index = setting.map(str::to_string);
        h.start_run();
        h.apply(step);
        h.apply(r#"{"eventType":"step_completed","correlationId":"s1","eventData":{"result":1}}"#);
        assert_eq!(markers(&h), want, "WORKFLOW_CORRELATION_INDEX={setting:?}");
        // Hook markers do not depend on it: the hook indexes are kept either way.
        h.apply_with(r#"{"eventType":"hook_created","correlationId":"h1","eventData":{"token":"t1"}}"#, r#""tokenHolder":null"#);
        assert_eq!(h.store.text("retention:hook:h1:t1"), Some(r#"{"hookId":"h1","token":"t1"}"#), "{setting:?}");
    }
}

#[test]
fn lifecycle_status_missing_active_terminal_expired() {
    let status = |h: &mut Harness| h.read("getLifecycleStatus", vec![]).as_str().map(str::to_string);
    let mut h = Harness::new();
    assert_eq!(status(&mut h).as_deref(), Some("missing"));
    assert!(h.keys().is_empty(), "a status read writes nothing");
    h.create_run();
    assert_eq!(status(&mut h).as_deref(), Some("active"));
    h.apply_with(r#"{"eventType":"run_started","specVersion":6}"#, r#""params":{"skipPreload":true}"#);
    assert_eq!(status(&mut h).as_deref(), Some("active"));
    let mut h = Harness::new();
    retained(&mut h, 1000, "1");
    assert_eq!(status(&mut h).as_deref(), Some("terminal"));
    h.tick(1000);
    assert_eq!(status(&mut h).as_deref(), Some("expired"));
    // A stored tombstone is expired even when the run record is gone.
    let mut h = Harness::new();
    h.store.data.insert(
        "retention:tombstone".into(),
        r#"{"version":1,"runId":"wrun_A","expiredAt":{"__type":"Date","iso":"2000-01-01T00:00:01.000Z"}}"#.into(),
    );
    assert_eq!(status(&mut h).as_deref(), Some("expired"));
    // A cleanup record past `retained` is expired before its due time.
    let mut h = Harness::new();
    h.create_run();
    h.store.data.insert(
        "retention:cleanup".into(),
        r#"{"version":1,"runId":"wrun_A","dueAt":{"__type":"Date","iso":"2099-01-01T00:00:01.000Z"},"phase":"index"}"#.into(),
    );
    assert_eq!(status(&mut h).as_deref(), Some("expired"));
}
