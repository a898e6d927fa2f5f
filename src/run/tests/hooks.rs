//! Hooks: creation with the IndexDO token holder, conflict events, index repair,
//! duplicates, disposal, resume-id claims, release on terminal transitions.

use super::*;

fn create_hook(h: &mut Harness, id: &str, token: &str, holder: &str) -> Value {
    h.apply_with(
        &format!(r#"{{"eventType":"hook_created","specVersion":6,"correlationId":"{id}","eventData":{{"token":"{token}","metadata":{{"__type":"Uint8Array","data":"AQ=="}}}}}}"#),
        &format!(r#""tokenHolder":{holder}"#),
    )
}

#[test]
fn hook_created_publishes_hook_to_index() {
    let mut h = Harness::new();
    h.start_run();
    let out = create_hook(&mut h, "hook_1", "tok", "null");
    assert_eq!(at(&out, "hook"), at(&out, "hookToIndex"));
    let want = format!(
        r#"{{"runId":"wrun_A","hookId":"hook_1","token":"tok","metadata":{{"__type":"Uint8Array","data":"AQ=="}},"ownerId":"","projectId":"","environment":"","createdAt":{},"specVersion":6,"isWebhook":false}}"#,
        json(at(&out, "event.createdAt").unwrap())
    );
    assert_eq!(json(at(&out, "hook").unwrap()), json(&v(&want)));
    assert!(h.keys().contains(&"hookevent:hook_1".to_string()));
    assert!(h.keys().contains(&"retention:hook:hook_1:tok".to_string()));
    let listed = h.read("listHooks", vec![]);
    assert_eq!(at(&listed, "value.data.0"), at(&out, "hook"));
}

#[test]
fn token_held_by_another_hook_appends_hook_conflict() {
    let mut h = Harness::new();
    h.run_id = "wrun_X".into();
    h.start_run();
    let out = create_hook(&mut h, "h2", "T", r#"{"runId":"wrun_other","hookId":"hx"}"#);
    assert_eq!(json(at(&out, "event.eventData").unwrap()), r#"{"conflictingRunId":"wrun_other","token":"T"}"#);
    assert_eq!(s(&out, "event.eventType"), "hook_conflict");
    assert!(at(&out, "hook").is_none() && at(&out, "hookToIndex").is_none());
    assert!(!h.keys().iter().any(|k| k.starts_with("hook:") || k.starts_with("hookevent:")));
    // The same hook id in another run also conflicts (runId differs).
    let out = create_hook(&mut h, "h3", "T", r#"{"runId":"wrun_other","hookId":"h3"}"#);
    assert_eq!(s(&out, "event.eventType"), "hook_conflict");
}

#[test]
fn replays_repair_or_conflict() {
    let mut h = Harness::new();
    h.start_run();
    let first = create_hook(&mut h, "hk", "tok", "null");
    // Index publication lost: replay with a null holder returns the hook to re-index.
    let repair = create_hook(&mut h, "hk", "tok", "null");
    assert!(at(&repair, "event").is_none());
    assert_eq!(at(&repair, "hook"), at(&first, "hook"));
    assert_eq!(at(&repair, "hookToIndex"), at(&first, "hook"));
    // Holder is this very hook: duplicate.
    let dup = create_hook(&mut h, "hk", "tok", r#"{"runId":"wrun_A","hookId":"hk"}"#);
    assert_fail(&dup, "ENTITY_CONFLICT", r#"Hook "hk" already created"#);
    // Disposed: the marker stays, re-creation is refused.
    let disposed = h.apply(r#"{"eventType":"hook_disposed","correlationId":"hk"}"#);
    assert_eq!(json(at(&disposed, "releasedHooks").unwrap()), r#"[{"hookId":"hk","token":"tok"}]"#);
    assert_fail(&create_hook(&mut h, "hk", "tok", "null"), "ENTITY_CONFLICT", r#"Hook "hk" already created"#);
    assert_eq!(at(&h.read("listHooks", vec![]), "value.data"), Some(&Value::Array(vec![])));
    assert_fail(&h.apply(r#"{"eventType":"hook_disposed","correlationId":"hk"}"#), "HOOK_NOT_FOUND", r#"Hook "hk" not found"#);
    // After the token moved elsewhere a replay gets a conflict event instead.
    let moved = create_hook(&mut h, "hk", "tok", r#"{"runId":"wrun_B","hookId":"other"}"#);
    assert_eq!(s(&moved, "event.eventType"), "hook_conflict");
}

#[test]
fn hook_received_and_resume_ids() {
    let mut h = Harness::new();
    h.start_run();
    create_hook(&mut h, "hk", "tok", "null");
    create_hook(&mut h, "hk2", "tok2", "null");
    let recv = |h: &mut Harness, hook: &str, params: &str| {
        h.apply_with(&format!(r#"{{"eventType":"hook_received","correlationId":"{hook}","eventData":{{"token":"tok","payload":{{"__type":"Uint8Array","data":"AQ=="}}}}}}"#), &format!(r#""params":{params}"#))
    };
    let plain = recv(&mut h, "hk", "{}");
    assert!(at(&plain, "event.resumeId").is_none());
    let first = recv(&mut h, "hk", r#"{"resumeId":"r1","resumePayloadDigest":"d1"}"#);
    assert_eq!(s(&first, "event.resumeId"), "r1");
    let replay = recv(&mut h, "hk", r#"{"resumeId":"r1","resumePayloadDigest":"d1"}"#);
    assert_eq!(at(&replay, "event"), at(&first, "event"));
    let replay = recv(&mut h, "hk", r#"{"resumeId":"r1"}"#);
    assert_eq!(at(&replay, "event"), at(&first, "event"), "a missing digest matches");
    assert_fail(
        &recv(&mut h, "hk", r#"{"resumeId":"r1","resumePayloadDigest":"d2"}"#),
        "ENTITY_CONFLICT",
        r#"hook_received resumeId "r1" already recorded with a different payload"#,
    );
    assert_fail(
        &recv(&mut h, "hk2", r#"{"resumeId":"r1"}"#),
        "ENTITY_CONFLICT",
        r#"hook_received resumeId "r1" already recorded for a different hook"#,
    );
    // The replay works even after the hook is gone.
    h.apply(r#"{"eventType":"hook_disposed","correlationId":"hk"}"#);
    let replay = recv(&mut h, "hk", r#"{"resumeId":"r1"}"#);
    assert_eq!(at(&replay, "event"), at(&first, "event"));
    assert_eq!(h.event_types().iter().filter(|t| *t == "hook_received").count(), 2);
    // A claim pointing at a different event.
    h.store.data.insert("hookresume:r9".into(), r#"{"hookId":"hk2","eventId":"evnt_00000000000000000000000001"}"#.into());
    assert_fail(
        &recv(&mut h, "hk2", r#"{"resumeId":"r9"}"#),
        "ENTITY_CONFLICT",
        r#"hook_received resumeId "r9" points to a different event"#,
    );
    // A claim whose event is missing is ignored.
    h.store.data.insert("hookresume:r8".into(), r#"{"hookId":"hk2","eventId":"evnt_00000000000000000000000099"}"#.into());
    assert_eq!(s(&recv(&mut h, "hk2", r#"{"resumeId":"r8"}"#), "event.resumeId"), "r8");
}

#[test]
fn client_sent_hook_conflict_is_stored() {
    let mut h = Harness::new();
    h.start_run();
    let out = h.apply(r#"{"eventType":"hook_conflict","correlationId":"h","eventData":{"token":"t"}}"#);
    assert_eq!(s(&out, "event.eventType"), "hook_conflict");
}

#[test]
fn terminal_run_releases_hooks_and_deletes_waits() {
    let mut h = Harness::new();
    h.start_run();
    create_hook(&mut h, "b", "tb", "null");
    create_hook(&mut h, "a", "ta", "null");
    h.apply(r#"{"eventType":"wait_created","correlationId":"w","eventData":{"resumeAt":"2099-01-01T00:00:00.000Z"}}"#);
    let out = h.apply(r#"{"eventType":"run_failed","eventData":{"error":"x"}}"#);
    assert_eq!(json(at(&out, "releasedHooks").unwrap()), r#"[{"hookId":"a","token":"ta"},{"hookId":"b","token":"tb"}]"#);
    let keys = h.keys();
    assert!(!keys.iter().any(|k| k.starts_with("hook:") || k.starts_with("hookcreated:") || k.starts_with("wait:")), "{keys:?}");
    assert!(keys.contains(&"hookevent:a".to_string()) && keys.contains(&"retention:hook:a:ta".to_string()));
}

fn create_claimed(h: &mut Harness, id: &str, token: &str, claim: &str) -> Value {
    h.apply_with(
        &format!(r#"{{"eventType":"hook_created","specVersion":6,"correlationId":"{id}","eventData":{{"token":"{token}"}}}}"#),
        &format!(r#""tokenHolder":null,"hookClaimId":"{claim}""#),
    )
}

#[test]
fn resolve_hook_token_claim_fences_unknown_claims() {
    let mut h = Harness::new();
    h.start_run();
    create_claimed(&mut h, "h1", "tok", "c-1");
    let resolve = |h: &mut Harness, body: &str| h.call("resolveHookTokenClaim", vec![v(body)]).unwrap();
    // The committed hook with its token: true, nothing written.
    let before = h.keys();
    assert_eq!(json(&resolve(&mut h, r#"{"hookId":"h1","token":"tok","claimId":"x:y"}"#)), r#"{"committed":true}"#);
    assert_eq!(h.keys(), before);
    // A different token, or an absent hook: false, and the claim is fenced.
    assert_eq!(json(&resolve(&mut h, r#"{"hookId":"h1","token":"other","claimId":"a b"}"#)), r#"{"committed":false}"#);
    assert!(h.keys().contains(&"hookclaimcancelled:a%20b".to_string()));
    assert_eq!(json(&resolve(&mut h, r#"{"hookId":"h-none","token":"tok-none","claimId":"fence-1"}"#)), r#"{"committed":false}"#);
    let fenced = create_claimed(&mut h, "h-none", "tok-none", "fence-1");
    assert_fail(&fenced, "HOOK_CLAIM_CANCELLED", r#"Hook reservation for "h-none" was canceled before commit"#);
    assert!(!h.keys().contains(&"hook:h-none".to_string()), "nothing committed");
    // Another claim id for the same hook commits.
    let created = create_claimed(&mut h, "h-none", "tok-none", "fence-2");
    assert_eq!(s(&created, "event.eventType"), "hook_created");
    // The fence is checked first, even before the request's eventData is read.
    let out = h.apply_with(r#"{"eventType":"hook_created","specVersion":6,"correlationId":"hx"}"#, r#""hookClaimId":"fence-1""#);
    assert_fail(&out, "HOOK_CLAIM_CANCELLED", r#"Hook reservation for "hx" was canceled before commit"#);
    // A missing argument fails on the member read.
    assert_eq!(
        h.call("resolveHookTokenClaim", vec![]).unwrap_err(),
        RpcError::type_error("Cannot read properties of undefined (reading 'hookId')")
    );
}

#[test]
fn resolve_on_an_expired_run_writes_nothing() {
    let mut h = Harness::new();
    h.create_run();
    h.request(r#"{"runId":"wrun_A","data":{"eventType":"run_cancelled"},"cleanup":{"retentionMs":1,"queueShards":1}}"#).unwrap();
    h.tick(10);
    let before = h.keys();
    let out = h.call("resolveHookTokenClaim", vec![v(r#"{"hookId":"h","token":"t","claimId":"c"}"#)]).unwrap();
    assert_eq!(json(&out), r#"{"committed":false}"#);
    assert_eq!(h.keys(), before);
}

#[test]
fn dispose_replay_comes_from_the_release_marker_of_a_claimed_hook() {
    let mut h = Harness::new();
    h.start_run();
    // 0.4 admission: the dispose leaves `hookreleased:`, a replay answers from it.
    create_claimed(&mut h, "ha1", "tok-1", "c-1");
    let disposed = h.apply(r#"{"eventType":"hook_disposed","specVersion":6,"correlationId":"ha1","eventData":{"token":"tok-1"}}"#);
    assert_eq!(json(at(&disposed, "releasedHooks").unwrap()), r#"[{"hookId":"ha1","token":"tok-1"}]"#);
    assert_eq!(h.store.text("hookreleased:ha1"), Some(r#"{"hookId":"ha1","token":"tok-1"}"#));
    let events = h.events().len();
    let replay = h.apply(r#"{"eventType":"hook_disposed","specVersion":6,"correlationId":"ha1","eventData":{"token":"tok-1"}}"#);
    assert_eq!(json(&replay), r#"{"ok":true,"releasedHooks":[{"hookId":"ha1","token":"tok-1"}]}"#);
    assert_eq!(h.events().len(), events, "no event appended");
    // hook_received still fails.
    let received = h.apply(r#"{"eventType":"hook_received","specVersion":6,"correlationId":"ha1","eventData":{"payload":null}}"#);
    assert_fail(&received, "HOOK_NOT_FOUND", r#"Hook "ha1" not found"#);
    // 0.3 admission (no claim id): no marker, a replay is HOOK_NOT_FOUND as in 0.3.
    create_hook(&mut h, "hb1", "tok-2", "null");
    h.apply(r#"{"eventType":"hook_disposed","specVersion":6,"correlationId":"hb1"}"#);
    assert_eq!(h.store.text("hookreleased:hb1"), None);
    let replay = h.apply(r#"{"eventType":"hook_disposed","specVersion":6,"correlationId":"hb1"}"#);
    assert_fail(&replay, "HOOK_NOT_FOUND", r#"Hook "hb1" not found"#);
}

#[test]
fn claimed_hooks_are_not_reported_on_terminal_transitions() {
    let mut h = Harness::new();
    h.start_run();
    create_hook(&mut h, "h03", "t03", "null");
    create_claimed(&mut h, "h04", "t04", "c04");
    let out = h.apply(r#"{"eventType":"run_completed","specVersion":6,"eventData":{"output":null}}"#);
    assert_eq!(json(at(&out, "releasedHooks").unwrap()), r#"[{"hookId":"h03","token":"t03"}]"#);
    assert!(!h.keys().iter().any(|k| k.starts_with("hook:")), "both entities deleted inline");
    assert!(h.keys().contains(&"retention:hook:h04:t04".to_string()), "its marker stays for the terminal cleanup");
    assert!(h.keys().contains(&"terminal:cleanup".to_string()));
}

#[test]
fn entity_listings_clamp_their_limit() {
    let mut h = Harness::new();
    h.start_run();
    for i in 0..3 {
        h.apply(&format!(
            r#"{{"eventType":"step_created","specVersion":6,"correlationId":"s{i}","eventData":{{"stepName":"n","input":null}}}}"#
        ));
        create_hook(&mut h, &format!("h{i}"), &format!("t{i}"), "null");
    }
    let count = |out: &Value| at(out, "value.data").and_then(Value::as_array).map_or(0, Vec::len);
    for (limit, n) in [("0", 1), ("-3", 1), ("2.5", 2), ("5000", 3), (r#""x""#, 1)] {
        assert_eq!(count(&h.read("listSteps", vec![v(&format!(r#"{{"limit":{limit}}}"#))])), n, "steps {limit}");
        assert_eq!(count(&h.read("listHooks", vec![v(&format!(r#"{{"limit":{limit}}}"#))])), n, "hooks {limit}");
    }
    let zero = h.read("listSteps", vec![v(r#"{"limit":0}"#)]);
    assert_eq!(at(&zero, "value.hasMore"), Some(&Value::Bool(true)));
    // listEvents keeps its 0.3 limit rules.
    let events = h.read("listEvents", vec![v(r#"{"limit":0}"#)]);
    assert_eq!(json(at(&events, "value").unwrap()), r#"{"cursor":null,"data":[],"hasMore":true}"#);
}
