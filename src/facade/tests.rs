//! The facade table case by case, the merged `list` against real catalog shards (0.3
//! cursor quirks, UTF-8 order, gap-free paging), and the legacy hook methods executed
//! against the real hook shard cores.

use super::hooks::{legacy_claim_id, LegacyHook, Reserve};
use super::list::{merge, MergedList};
use super::testing::exec;
use super::*;
use crate::hook_shard::testing::{hook_json, owner, s, World};
use crate::protocol::calls::{ShardCall, Target};
use crate::protocol::hooks::Family;
use crate::testing::block_on;

const T0: i64 = 1_767_323_045_000;

fn opts(members: &[(&str, Value)]) -> Value {
    Value::object(members.iter().cloned())
}

// ---- the table --------------------------------------------------------------------------

#[test]
fn get_routes_by_key_family() {
    let Ok(Route::RunGet { key, order }) = route("get", &[s("run:wf:0000000000001:wrun_same")], false) else { panic!("run get") };
    assert_eq!(key, "run:wf:0000000000001:wrun_same");
    assert_eq!(order.len(), 16);
    assert_eq!(order.first(), Some(&Target::Catalog("run-catalog:v1:0e".into())), "the home shard first");
    let Ok(Route::RunGet { order, .. }) = route("get", &[s("runall:0000000000001:wrun_same")], true) else { panic!("runall get") };
    assert_eq!((order.len(), order.last()), (17, Some(&Target::Archive)), "archive last while migrating");

    assert_eq!(
        route("get", &[s("hook:token_same")], false),
        Ok(Route::HookGet { target: Target::HookTokens("hook-token:v1:11".into()), key: "token_same".into() })
    );
    assert_eq!(
        route("get", &[s("hookid:hook_same")], false),
        Ok(Route::HookGet { target: Target::HookIds("hook-id:v1:19".into()), key: "hook_same".into() })
    );
    let Ok(Route::RunGet { order, .. }) = route("get", &[s("correlation:c%201:1:evnt_1:wrun_same")], true) else {
        panic!("correlation get")
    };
    assert_eq!(order.first(), Some(&Target::Catalog("run-catalog:v1:0e".into())), "correlation keys: the run's shard first");
    for other in ["hookclaim:tok", "expired:wrun_1", "kv:a", "golden:a", "run", ""] {
        assert_eq!(route("get", &[s(other)], true), Ok(Route::Archive), "{other}");
    }
    assert_eq!(route("get", &[], false), Ok(Route::Archive), "undefined → \"undefined\"");
}

#[test]
fn put_owned_routes_by_key_family() {
    let meta = s(r#"{"runId":"wrun_same"}"#);
    assert_eq!(
        route("putOwned", &[s("wrun_same"), s("runall:0000000000001:wrun_same"), meta.clone()], false),
        Ok(Route::PutRun {
            target: Target::Catalog("run-catalog:v1:0e".into()),
            run_id: "wrun_same".into(),
            key: "runall:0000000000001:wrun_same".into(),
            value: meta.clone(),
        })
    );
    assert_eq!(
        route("putOwned", &[s("wrun_same"), s("correlation:c:1:e:wrun_same"), meta.clone()], false),
        Ok(Route::PutKey {
            target: Target::Catalog("run-catalog:v1:0e".into()),
            run_id: "wrun_same".into(),
            key: "correlation:c:1:e:wrun_same".into(),
            value: meta.clone(),
        })
    );
    assert_eq!(route("putOwned", &[s("wrun_same"), s("kv:x"), meta], false), Ok(Route::Archive));
    assert!(refuses_put(&s("expired")));
    assert!(!refuses_put(&s("terminal")) && !refuses_put(&s("active")) && !refuses_put(&s("missing")));
}

#[test]
fn correlation_puts_are_discarded_only_when_the_index_is_off() {
    use crate::config::ConfigError;
    let put = |value: Value| route("putOwned", &[s("wrun_same"), s("correlation:c:1:e:wrun_same"), value], false).unwrap();
    let meta = s(r#"{"runId":"wrun_same","eventId":"e"}"#);
    assert_eq!(discarded_put(&put(meta.clone()), Ok(true)), None, "on: stored on the catalog shard");
    assert_eq!(discarded_put(&put(meta.clone()), Ok(false)), Some(Ok(Value::object([("stored", Value::Bool(true))]))));
    assert_eq!(
        discarded_put(&put(Value::num(1)), Ok(false)),
        Some(Err(RpcError::type_error("Run catalog metadata must be a string"))),
        "bad input is refused as the shard would refuse it"
    );
    assert_eq!(
        discarded_put(&put(meta.clone()), Err(ConfigError::CorrelationIndex)),
        Some(Err(RpcError::error(r#"WORKFLOW_CORRELATION_INDEX must be "on" or "off""#)))
    );
    // Run keys and every other call are routed whatever the setting.
    let run_key = route("putOwned", &[s("wrun_same"), s("runall:0000000000001:wrun_same"), meta.clone()], false).unwrap();
    assert_eq!(discarded_put(&run_key, Ok(false)), None);
    let get = route("get", &[s("correlation:c:1:e:wrun_same")], false).unwrap();
    assert_eq!(discarded_put(&get, Ok(false)), None);
}

#[test]
fn archive_methods_and_unknown_ones() {
    let request = opts(&[("runId", s("wrun_1"))]);
    assert_eq!(route("expireRun", std::slice::from_ref(&request), false), Ok(Route::ExpireRun(request)));
    for method in ["put", "delete"] {
        assert_eq!(route(method, &[s("run:wf:1:wrun_1"), s("v")], false), Ok(Route::Archive), "{method}");
    }
    assert_eq!(route("list", &[opts(&[("prefix", s("kv:"))])], true), Ok(Route::Archive));
    // No prefix: everything — the archive, and each catalog family on every shard.
    let Ok(Route::List(plan)) = route("list", &[], true) else { panic!("no prefix lists the catalog too") };
    assert_eq!((plan.sources.clone(), plan.extra.len()), (vec![Target::Archive], 3 * 16));
    assert_eq!(route("nope", &[], false), Err(RpcError::type_error("IndexDO.nope is not a function")));
}

#[test]
fn hook_methods_use_the_deterministic_legacy_claim() {
    let me = owner("wrun/1", "hook:1");
    assert_eq!(legacy_claim_id(&me), "legacy:wrun%2F1:hook%3A1");
    let Ok(Route::ReserveHookToken(hook)) = route("reserveHookToken", &[s("tok"), me.to_value()], false) else { panic!() };
    assert_eq!((hook.token.as_str(), hook.hook_id.as_str(), hook.claim_id.as_str()), ("tok", "hook:1", "legacy:wrun%2F1:hook%3A1"));
    assert_eq!(hook.reserve_token().target, Target::HookTokens(crate::protocol::shard::hook_token("tok")));
    assert_eq!(hook.reserve_hook_id().target, Target::HookIds(crate::protocol::shard::hook_id("hook:1")));
    let Ok(Route::FinalizeHookIndexes { hook, serialized }) =
        route("finalizeHookIndexes", &[s("tok"), s("other_id"), s("{}"), me.to_value()], false)
    else {
        panic!()
    };
    assert_eq!((hook.hook_id.as_str(), serialized), ("other_id", s("{}")));
    assert!(matches!(route("releaseHookToken", &[s("tok"), me.to_value()], false), Ok(Route::ReleaseHookToken(_))));
    let Ok(Route::DeleteHookIndexes(hook)) = route("deleteHookIndexes", &[s("tok"), s("h2"), me.to_value()], false) else { panic!() };
    let calls = hook.delete_indexes();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls.get(1).map(|c| c.target.clone()), Some(Target::HookIds(crate::protocol::shard::hook_id("h2"))));
    assert_eq!(route("reserveHookToken", &[s("tok")], false).unwrap_err().message, "Cannot read properties of undefined (reading 'runId')");
}

#[test]
fn targets_name_their_bindings() {
    assert_eq!((Target::Archive.env_binding(), Target::Archive.instance()), ("WORKFLOW_INDEX", "index"));
    assert_eq!(Target::Catalog("run-catalog:v1:00".into()).env_binding(), "WORKFLOW_RUN_CATALOG");
    assert_eq!(Target::HookTokens("x".into()).env_binding(), "WORKFLOW_HOOK_TOKENS");
    assert_eq!(Target::HookIds("hook-id:v1:00".into()).instance(), "hook-id:v1:00");
}

// ---- list over real catalog shards ------------------------------------------------------

/// The catalog shards and the archive of a [`Fleet`], called directly.
struct Catalogs {
    fleet: Fleet,
}

impl Catalogs {
    fn new() -> Catalogs {
        Catalogs { fleet: Fleet::new() }
    }

    fn shard_call(&mut self, name: &str, method: &str, args: Vec<Value>) -> Value {
        self.fleet.catalog_call(name, method, &args).unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn archive_call(&mut self, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        self.fleet.archive_call(method, args)
    }

    /// How many catalog shards hold anything.
    fn shards_used(&self) -> usize {
        let objects = self.fleet.world.objects.borrow();
        objects.iter().filter(|((class, _), o)| *class == crate::catalog::CLASS && !o.store.data.is_empty()).count()
    }

    /// The 0.3 `putOwned` through the facade (the run is active).
    fn put_owned(&mut self, run_id: &str, key: &str) {
        let args = [s(run_id), s(key), s(&format!(r#"{{"runId":"{run_id}"}}"#))];
        match route("putOwned", &args, false) {
            Ok(Route::PutRun { target, run_id, key, value }) => {
                let answer = self.shard_call(target.instance(), "upsertKey", vec![s(&run_id), s(&key), value]);
                assert_eq!(answer.get("stored"), Some(&Value::Bool(true)));
            }
            other => panic!("{other:?}"),
        }
    }

    /// The 0.3 `list` through the facade.
    fn list(&mut self, options: Value, with_archive: bool) -> Result<Value, RpcError> {
        match route("list", std::slice::from_ref(&options), with_archive)? {
            Route::List(plan) => {
                let calls: Vec<(Target, Value)> =
                    plan.sources.iter().map(|t| (t.clone(), plan.options.clone())).chain(plan.extra.iter().cloned()).collect();
                let pages: Vec<Value> = calls
                    .into_iter()
                    .map(|(target, options)| match target {
                        Target::Archive => self.archive_call("list", vec![options]),
                        other => Ok(self.shard_call(other.instance(), "list", vec![options])),
                    })
                    .collect::<Result<_, _>>()?;
                merge(&plan, &pages)
            }
            Route::Archive => self.archive_call("list", vec![options]),
            other => panic!("{other:?}"),
        }
    }

    /// The 0.3 `get` through the facade.
    fn get(&mut self, key: &str) -> Value {
        let Ok(Route::RunGet { key, order }) = route("get", &[s(key)], true) else { panic!("not a run key") };
        for target in order {
            let hit = match target {
                Target::Archive => self.archive_call("get", vec![s(&key)]).ok().filter(|v| !v.is_null()),
                other => run_get_hit(&key, &self.shard_call(other.instance(), "list", vec![run_get_options(&key)])),
            };
            if let Some(value) = hit {
                return value;
            }
        }
        Value::Null
    }
}

fn names(page: &Value) -> Vec<String> {
    let keys = page.get("keys").and_then(Value::as_array).cloned().unwrap_or_default();
    keys.iter().map(|k| k.get("name").and_then(Value::as_str).unwrap_or("?").to_string()).collect()
}

fn filled(n: usize) -> (Catalogs, Vec<String>) {
    let mut c = Catalogs::new();
    let mut all = Vec::new();
    for i in 0..n {
        let run = format!("wrun_{i:03}");
        let key = format!("runall:{:013}:{run}", 1000 + i);
        c.put_owned(&run, &key);
        c.put_owned(&run, &format!("run:wf:{:013}:{run}", 1000 + i));
        all.push(key);
    }
    (c, all)
}

#[test]
fn merged_pagination_is_gap_free_forward_and_reverse() {
    let (mut c, all) = filled(40);
    assert!(c.shards_used() > 8, "runs spread over the shards");
    for reverse in [false, true] {
        let mut seen = Vec::new();
        let mut cursor: Option<Value> = None;
        loop {
            let mut o = vec![("prefix", s("runall:")), ("limit", Value::num(7)), ("reverse", Value::Bool(reverse))];
            if let Some(c) = cursor.take() {
                o.push(("cursor", c));
            }
            let page = c.list(opts(&o), false).unwrap_or_else(|e| panic!("{e:?}"));
            let got = names(&page);
            assert!(got.len() <= 7);
            seen.extend(got.iter().cloned());
            if page.get("list_complete") == Some(&Value::Bool(true)) {
                assert_eq!(page.get("cursor"), None);
                break;
            }
            assert_eq!(page.get("cursor").cloned(), got.last().map(|n| s(n)), "cursor = last name");
            cursor = page.get("cursor").cloned();
        }
        let mut expected = all.clone();
        if reverse {
            expected.reverse();
        }
        assert_eq!(seen, expected, "reverse={reverse}");
    }
    // Values are not part of the 0.3 page.
    let page = c.list(opts(&[("prefix", s("run:wf:")), ("limit", Value::num(1))]), false).unwrap_or(Value::Null);
    assert_eq!(
        page.get("keys").and_then(Value::as_array).and_then(|k| k.first()).cloned(),
        Some(Value::object([("name", s("run:wf:0000000001000:wrun_000"))]))
    );
}

#[test]
fn exactly_limit_remaining_is_complete_and_default_limit_is_1000() {
    let (mut c, all) = filled(5);
    let page = c.list(opts(&[("prefix", s("runall:")), ("limit", Value::num(5))]), false).unwrap_or(Value::Null);
    assert_eq!((names(&page), page.get("list_complete"), page.get("cursor")), (all.clone(), Some(&Value::Bool(true)), None));
    let page = c.list(opts(&[("prefix", s("runall:")), ("limit", Value::Null)]), false).unwrap_or(Value::Null);
    assert_eq!(names(&page).len(), 5);
    let Ok(Route::List(plan)) = route("list", &[opts(&[("prefix", s("runall:"))])], false) else { panic!() };
    assert_eq!((plan.limit, plan.options.get("limit")), (1000, Some(&Value::num(1001))));
    let Ok(Route::List(plan)) = route("list", &[opts(&[("prefix", s("runall:")), ("limit", Value::num(5000))])], false) else { panic!() };
    assert_eq!(plan.limit, 1000, "served 1000 at a time");
}

#[test]
fn zero_negative_and_string_limits_follow_javascript() {
    let (mut c, _) = filled(3);
    let zero = c.list(opts(&[("prefix", s("runall:")), ("limit", Value::num(0))]), false).unwrap_or(Value::Null);
    assert_eq!(zero, Value::object([("keys", Value::Array(vec![])), ("list_complete", Value::Bool(false))]));
    assert_eq!(c.list(opts(&[("prefix", s("runall:")), ("limit", Value::num(-1))]), false), Err(RpcError::list_limit()));
    assert_eq!(c.list(opts(&[("prefix", s("runall:")), ("limit", s("-5"))]), false), Err(RpcError::list_limit()));
    let two = c.list(opts(&[("prefix", s("runall:")), ("limit", s("2"))]), false).unwrap_or(Value::Null);
    assert_eq!((names(&two).len(), two.get("list_complete")), (2, Some(&Value::Bool(false))));
    let frac = c.list(opts(&[("prefix", s("runall:")), ("limit", Value::num(2.5))]), false).unwrap_or(Value::Null);
    assert_eq!(names(&frac).len(), 2);
}

#[test]
fn a_null_cursor_is_the_string_null() {
    let (mut c, all) = filled(3);
    // Every `runall:` key sorts above "null": forward lists them all, reverse none.
    let forward = c.list(opts(&[("prefix", s("runall:")), ("cursor", Value::Null)]), false).unwrap_or(Value::Null);
    assert_eq!(names(&forward), all);
    let back =
        c.list(opts(&[("prefix", s("runall:")), ("cursor", Value::Null), ("reverse", Value::Bool(true))]), false).unwrap_or(Value::Null);
    assert_eq!(back, Value::object([("keys", Value::Array(vec![])), ("list_complete", Value::Bool(true))]));
    let Ok(Route::List(plan)) = route("list", &[opts(&[("prefix", s("run:")), ("cursor", Value::Null)])], false) else { panic!() };
    assert_eq!(plan.options.get("cursor"), Some(&s("null")));
    let Ok(Route::List(plan)) = route("list", &[opts(&[("prefix", s("run:"))])], false) else { panic!() };
    assert_eq!(plan.options.get("cursor"), None, "only an absent cursor means from the start");
}

#[test]
fn merge_order_is_utf8_bytes() {
    let mut c = Catalogs::new();
    for (run, wf) in [("wrun_a", "a"), ("wrun_b", "B"), ("wrun_c", "\u{e000}"), ("wrun_d", "\u{1f600}")] {
        c.put_owned(run, &format!("run:{wf}:0000000000001:{run}"));
    }
    let page = c.list(opts(&[("prefix", s("run:"))]), false).unwrap_or(Value::Null);
    assert_eq!(
        names(&page),
        [
            "run:B:0000000000001:wrun_b",
            "run:a:0000000000001:wrun_a",
            "run:\u{e000}:0000000000001:wrun_c",
            "run:\u{1f600}:0000000000001:wrun_d"
        ]
    );
}

#[test]
fn the_archive_is_read_through_while_migrating() {
    let (mut c, _) = filled(2);
    let legacy = "runall:0000000000500:wrun_legacy";
    c.archive_call("put", vec![s(legacy), s(r#"{"runId":"wrun_legacy"}"#)]).ok();
    let with = c.list(opts(&[("prefix", s("runall:"))]), true).unwrap_or(Value::Null);
    assert_eq!(names(&with).first().map(String::as_str), Some(legacy));
    assert_eq!(names(&with).len(), 3);
    let without = c.list(opts(&[("prefix", s("runall:"))]), false).unwrap_or(Value::Null);
    assert_eq!(names(&without).len(), 2);
    assert_eq!(c.get(legacy), s(r#"{"runId":"wrun_legacy"}"#));
    assert_eq!(c.get("runall:0000000001001:wrun_001"), s(r#"{"runId":"wrun_001"}"#));
    assert_eq!(c.get("runall:0000000001001:wrun_404"), Value::Null);
}

#[test]
fn a_run_get_finds_keys_on_a_foreign_shard_by_fanning_out() {
    let mut c = Catalogs::new();
    // A key whose trailing id is not the runId it was put under lives on that runId's shard.
    let (run, key) = ("wrun_same", "run:wf:0000000000001:wrun_other");
    c.put_owned(run, key);
    assert_ne!(crate::protocol::shard::run_catalog("wrun_other"), crate::protocol::shard::run_catalog(run));
    assert_eq!(c.get(key), s(r#"{"runId":"wrun_same"}"#));
}

#[test]
fn merge_rejects_malformed_pages_and_drops_duplicates() {
    let plan = MergedList { sources: vec![], options: Value::Null, extra: vec![], limit: 10, reverse: false, with_values: false };
    assert_eq!(merge(&plan, &[Value::Null]).unwrap_err().message, "malformed run catalog page");
    let page =
        Value::object([("keys", Value::Array(vec![Value::object([("name", s("runall:1"))])])), ("list_complete", Value::Bool(true))]);
    let merged = merge(&plan, &[page.clone(), page]).unwrap_or(Value::Null);
    assert_eq!(names(&merged), ["runall:1"]);
}

// ---- the hook methods over the real hook shards ------------------------------------------

/// The facade's `reserveHookToken`, driven step by step.
fn reserve(w: &World, token: &str, who: &crate::protocol::hooks::Owner) -> Result<Value, RpcError> {
    let Ok(Route::ReserveHookToken(hook)) = route("reserveHookToken", &[s(token), who.to_value()], false) else { panic!() };
    match hook.after_token(&exec(w, &hook.reserve_token())?)? {
        Reserve::Answer(answer) => Ok(answer),
        Reserve::ReserveHookId => match exec(w, &hook.reserve_hook_id()) {
            Ok(answer) => {
                let (cleanup, answer) = hook.after_hook_id(&answer)?;
                cleanup.iter().for_each(|c| drop(exec(w, c)));
                Ok(answer)
            }
            Err(e) => {
                hook.after_hook_id_error().iter().for_each(|c| drop(exec(w, c)));
                Err(e)
            }
        },
    }
}

fn finalize(w: &World, token: &str, who: &crate::protocol::hooks::Owner) -> Result<Value, RpcError> {
    let serialized = s(&hook_json(who, token));
    let args = [s(token), s(&who.hook_id), serialized, who.to_value()];
    let Ok(Route::FinalizeHookIndexes { hook, serialized }) = route("finalizeHookIndexes", &args, false) else { panic!() };
    if LegacyHook::token_stored(&exec(w, &hook.finalize_token(&serialized, &Value::Null))?) {
        exec(w, &hook.publish_hook_id(&serialized, &Value::Null))?;
    }
    Ok(Value::Null)
}

fn lookup(w: &World, key: &str) -> Value {
    let Ok(Route::HookGet { target, key }) = route("get", &[s(key)], false) else { panic!() };
    exec(w, &ShardCall { target, method: "get", args: vec![s(&key)] }).unwrap_or_else(|e| panic!("{e:?}"))
}

fn claimed() -> Result<Value, RpcError> {
    Ok(Value::object([("claimed", Value::Bool(true))]))
}

fn held_by(holder: &crate::protocol::hooks::Owner) -> Result<Value, RpcError> {
    Ok(Value::object([("claimed", Value::Bool(false)), ("holder", holder.to_value())]))
}

#[test]
fn the_03_hook_lifecycle_over_the_shards() {
    let w = World::new();
    let (a, b) = (owner("wrun_a", "hook_a"), owner("wrun_b", "hook_b"));
    w.set_run("wrun_a", "active");
    w.set_run("wrun_b", "active");
    assert_eq!(reserve(&w, "tok", &a), claimed());
    assert_eq!(reserve(&w, "tok", &a), claimed(), "the same owner reserves again (its leftover claim is fine)");
    assert_eq!(reserve(&w, "tok", &b), held_by(&a));
    assert_eq!(finalize(&w, "tok", &a), Ok(Value::Null));
    assert_eq!(lookup(&w, "hook:tok"), s(&hook_json(&a, "tok")));
    assert_eq!(lookup(&w, "hookid:hook_a"), s(&hook_json(&a, "tok")));
    assert_eq!(reserve(&w, "tok", &a), held_by(&a), "a published token is held even against its owner (0.3 rule)");
    // A terminal run's token no longer resolves.
    w.set_run("wrun_a", "terminal");
    assert_eq!(lookup(&w, "hook:tok"), Value::Null);
    // deleteHookIndexes frees the token for another run.
    let Ok(Route::DeleteHookIndexes(hook)) = route("deleteHookIndexes", &[s("tok"), s("hook_a"), a.to_value()], false) else { panic!() };
    for call in hook.delete_indexes() {
        assert_eq!(exec(&w, &call), Ok(Value::object([("deleted", Value::num(1))])));
    }
    assert_eq!(reserve(&w, "tok", &b), claimed());
}

#[test]
fn release_hook_token_drops_the_legacy_claims_on_both_shards() {
    let w = World::new();
    let (a, b) = (owner("wrun_a", "hook_a"), owner("wrun_b", "hook_b"));
    assert_eq!(reserve(&w, "tok", &a), claimed());
    let Ok(Route::ReleaseHookToken(hook)) = route("releaseHookToken", &[s("tok"), a.to_value()], false) else { panic!() };
    for call in hook.release_reservation() {
        assert_eq!(exec(&w, &call), Ok(Value::Null));
    }
    assert!(w.keys(Family::Token, "tok").is_empty() && w.keys(Family::Id, "hook_a").is_empty());
    assert_eq!(reserve(&w, "tok", &b), claimed());
}

#[test]
fn a_hook_id_held_elsewhere_refuses_and_releases_the_token_claim() {
    let w = World::new();
    let (a, b) = (owner("wrun_a", "hook_same"), owner("wrun_b", "hook_same"));
    assert_eq!(reserve(&w, "tok_a", &a), claimed());
    assert_eq!(reserve(&w, "tok_b", &b), held_by(&a));
    assert!(w.keys(Family::Token, "tok_b").is_empty());
    // A failing hook-id shard releases the token claim and rethrows.
    *w.failing.borrow_mut() = Some(Family::Id.shard("hook_c"));
    assert!(reserve(&w, "tok_c", &owner("wrun_c", "hook_c")).is_err());
    *w.failing.borrow_mut() = None;
    assert!(w.keys(Family::Token, "tok_c").is_empty());
}

#[test]
fn a_put_for_an_expired_run_is_refused_before_the_catalog() {
    let Ok(Route::PutRun { .. }) = route("putOwned", &[s("wrun_x"), s("run:wf:1:wrun_x"), s("{}")], false) else { panic!() };
    assert!(refuses_put(&s("expired")));
    // The catalog's own fence refuses too (the lifecycle check can race the expiry).
    let mut c = Catalogs::new();
    let home = crate::protocol::shard::run_catalog("wrun_x");
    let keys = Value::Array(vec![s("run:wf:1:wrun_x"), s("runall:1:wrun_x")]);
    c.shard_call(&home, "expireRun", vec![s("wrun_x"), keys, Value::num(T0 as f64)]);
    let answer = c.shard_call(&home, "upsertKey", vec![s("wrun_x"), s("run:wf:1:wrun_x"), s("{}")]);
    assert_eq!(answer, Value::object([("stored", Value::Bool(false))]));
}

// ---- the driver, end to end over every real core -----------------------------------------

use super::testing::Fleet;

#[test]
fn driver_serves_the_03_client_sequence() {
    let f = Fleet::new();
    let me = owner("wrun_same", "hook_same");
    f.world.set_run("wrun_same", "active");
    let meta = s(r#"{"runId":"wrun_same","createdAt":"2026-01-02T03:04:05.000Z","status":"pending"}"#);
    let run_key = "run:wf:1767323045000:wrun_same";
    let all_key = "runall:1767323045000:wrun_same";
    for key in [run_key, all_key] {
        assert_eq!(f.index("putOwned", vec![s("wrun_same"), s(key), meta.clone()]), Ok(Value::object([("stored", Value::Bool(true))])));
    }
    assert_eq!(
        f.index("putOwned", vec![s("wrun_same"), s("correlation:c:1:e:wrun_same"), s("{}")]),
        Ok(Value::object([("stored", Value::Bool(true))]))
    );
    f.calls.borrow_mut().clear();
    let page = f.index("list", vec![opts(&[("prefix", s("runall:")), ("limit", Value::num(50))])]).unwrap_or(Value::Null);
    assert_eq!(
        page,
        Value::object([("keys", Value::Array(vec![Value::object([("name", s(all_key))])])), ("list_complete", Value::Bool(true))])
    );
    assert_eq!(f.calls.borrow().len(), 17, "16 catalog shards and the archive");
    f.calls.borrow_mut().clear();
    assert_eq!(f.index("get", vec![s(all_key)]), Ok(meta.clone()));
    assert_eq!(*f.calls.borrow(), ["WORKFLOW_RUN_CATALOG/run-catalog:v1:0e.list"], "one call: the home shard");

    // Hooks: reserve, finalize, read by token and by id, delete.
    assert_eq!(f.index("reserveHookToken", vec![s("token_same"), me.to_value()]), Ok(Value::object([("claimed", Value::Bool(true))])));
    let serialized = s(&hook_json(&me, "token_same"));
    f.world.run_calls.borrow_mut().clear();
    assert_eq!(f.index("finalizeHookIndexes", vec![s("token_same"), s("hook_same"), serialized.clone(), me.to_value()]), Ok(Value::Null));
    let asks = [format!("{}.getLifecycleStatus", me.run_id)];
    assert_eq!(*f.world.run_calls.borrow(), asks, "one lifecycle read for both publications");
    assert_eq!(f.index("get", vec![s("hook:token_same")]), Ok(serialized.clone()));
    assert_eq!(f.index("get", vec![s("hookid:hook_same")]), Ok(serialized));
    assert_eq!(f.index("deleteHookIndexes", vec![s("token_same"), s("hook_same"), me.to_value()]), Ok(Value::Null));
    assert_eq!(f.index("get", vec![s("hook:token_same")]), Ok(Value::Null));
    assert_eq!(f.index("releaseHookToken", vec![s("token_same"), me.to_value()]), Ok(Value::Null));

    // Arbitrary keys stay in the archive.
    assert_eq!(f.index("put", vec![s("kv:a"), s("1")]), Ok(Value::Null));
    assert_eq!(f.index("get", vec![s("kv:a")]), Ok(s("1")));
    assert_eq!(
        f.index("list", vec![opts(&[("prefix", s("kv:"))])]),
        Ok(Value::object([("keys", Value::Array(vec![Value::object([("name", s("kv:a"))])])), ("list_complete", Value::Bool(true))]))
    );
}

#[test]
fn driver_refuses_puts_for_expired_runs_and_falls_back_on_get_misses() {
    let f = Fleet::new();
    f.world.set_run("wrun_x", "expired");
    assert_eq!(f.index("putOwned", vec![s("wrun_x"), s("runall:1:wrun_x"), s("{}")]), Ok(Value::object([("stored", Value::Bool(false))])));
    assert!(f.catalog_keys().is_empty());
    // A legacy entry only the archive holds.
    f.index("put", vec![s("runall:0000000000001:wrun_old"), s("{\"runId\":\"wrun_old\"}")]).ok();
    f.calls.borrow_mut().clear();
    assert_eq!(f.index("get", vec![s("runall:0000000000001:wrun_old")]), Ok(s("{\"runId\":\"wrun_old\"}")));
    assert_eq!(f.calls.borrow().len(), 17, "home, the other 15, the archive");
    assert_eq!(f.index("get", vec![s("runall:0000000000001:wrun_none")]), Ok(Value::Null));
}

#[test]
fn driver_releases_the_token_claim_when_the_hook_id_is_held() {
    let f = Fleet::new();
    let (a, b) = (owner("wrun_a", "hook_same"), owner("wrun_b", "hook_same"));
    assert_eq!(f.index("reserveHookToken", vec![s("tok_a"), a.to_value()]), Ok(Value::object([("claimed", Value::Bool(true))])));
    let refused = f.index("reserveHookToken", vec![s("tok_b"), b.to_value()]);
    assert_eq!(refused, Ok(Value::object([("claimed", Value::Bool(false)), ("holder", a.to_value())])));
    assert!(f.world.keys(Family::Token, "tok_b").is_empty());
}

#[test]
fn the_04_runs_list_merge_keeps_values_and_clamps() {
    use super::list::plan_runs_list;
    let (mut c, all) = filled(9);
    let plan = plan_runs_list(Some(&opts(&[("prefix", s("runall:")), ("limit", Value::num(4.7)), ("extra", s("kept"))])));
    assert_eq!((plan.limit, plan.sources.len()), (4, 16));
    assert_eq!(plan.options.get("limit"), Some(&Value::num(5)));
    assert_eq!(plan.options.get("extra"), Some(&s("kept")), "the caller's options pass through");
    assert_eq!(plan_runs_list(None).limit, 1000);
    assert_eq!(plan_runs_list(Some(&opts(&[("limit", Value::num(0))]))).limit, 1);
    assert_eq!(plan_runs_list(Some(&opts(&[("limit", Value::num(1e9))]))).limit, 1000);
    assert_eq!(plan_runs_list(Some(&opts(&[("limit", s("7"))]))).limit, 1000);
    let pages: Vec<Value> = plan.sources.iter().map(|t| c.shard_call(t.instance(), "list", vec![plan.options.clone()])).collect();
    let page = merge(&plan, &pages).unwrap_or(Value::Null);
    assert_eq!(names(&page), all.get(..4).unwrap_or_default());
    assert_eq!(page.get("cursor"), all.get(3).map(|n| s(n)).as_ref());
    let first = page.get("keys").and_then(Value::as_array).and_then(|k| k.first()).cloned();
    assert_eq!(first.and_then(|e| e.get("value").cloned()), Some(s(r#"{"runId":"wrun_000"}"#)));
}

#[test]
fn driver_finalize_adopts_the_owners_claim_made_under_another_id() {
    let f = Fleet::new();
    let (a, b) = (owner("wrun_a", "hook_a"), owner("wrun_b", "hook_b"));
    f.world.set_run("wrun_a", "active");
    f.world.set_run("wrun_b", "active");
    // The same run reserved through the 0.4 coordinator (random claim id) …
    assert!(matches!(f.world.admit("tok", &a, "random-uuid"), Ok(crate::hook_shard::testing::Admission::Admitted { .. })));
    // … and is finalized by a 0.3 client.
    let serialized = s(&hook_json(&a, "tok"));
    assert_eq!(f.index("finalizeHookIndexes", vec![s("tok"), s("hook_a"), serialized.clone(), a.to_value()]), Ok(Value::Null));
    assert_eq!(f.index("get", vec![s("hook:tok")]), Ok(serialized.clone()));
    assert_eq!(f.index("get", vec![s("hookid:hook_a")]), Ok(serialized));
    // Another owner's claim is never adopted.
    let c = owner("wrun_a", "hook_c");
    assert!(matches!(f.world.admit("tok2", &c, "x"), Ok(crate::hook_shard::testing::Admission::Admitted { .. })));
    let theirs = f.index("finalizeHookIndexes", vec![s("tok2"), s("hook_b"), s(&hook_json(&b, "tok2")), b.to_value()]);
    assert_eq!(theirs, Err(RpcError::error("Hook token tok2 is reserved by another hook")));
}

#[test]
fn driver_hooks_of_missing_runs_stay_visible_and_ended_runs_hide_them() {
    // The 0.3 IndexDO checked no lifecycle: hooks indexed for a run the run DO does not
    // hold are served (the golden index-do scenario relies on it); terminal and expired
    // runs hide theirs, as the 0.4 shards do.
    let f = Fleet::new();
    let me = owner("wrun_ghost", "hook_g");
    let serialized = s(&hook_json(&me, "tok_g"));
    assert_eq!(f.index("reserveHookToken", vec![s("tok_g"), me.to_value()]), Ok(Value::object([("claimed", Value::Bool(true))])));
    assert_eq!(f.index("finalizeHookIndexes", vec![s("tok_g"), s("hook_g"), serialized.clone(), me.to_value()]), Ok(Value::Null));
    assert_eq!(f.index("get", vec![s("hook:tok_g")]), Ok(serialized.clone()));
    assert_eq!(f.index("get", vec![s("hookid:hook_g")]), Ok(serialized.clone()));
    // A published hook refuses even its own owner (0.3 rule).
    assert_eq!(
        f.index("reserveHookToken", vec![s("tok_g"), me.to_value()]),
        Ok(Value::object([("claimed", Value::Bool(false)), ("holder", me.to_value())]))
    );
    for status in ["terminal", "expired"] {
        f.world.set_run("wrun_ghost", status);
        assert_eq!(f.index("get", vec![s("hook:tok_g")]), Ok(Value::Null), "{status}");
        assert_eq!(f.index("get", vec![s("hookid:hook_g")]), Ok(Value::Null), "{status}");
    }
}

#[test]
fn driver_expire_run_counts_as_03_and_fences_the_catalog() {
    let f = Fleet::new();
    let run = "wrun_ix";
    let key = "run:wf-ix:0946684800000:wrun_ix";
    let corr = "correlation:c%201:0946684800000:evnt_1:wrun_ix";
    assert_eq!(f.index("putOwned", vec![s(run), s(key), s("{}")]), Ok(Value::object([("stored", Value::Bool(true))])));
    assert_eq!(f.index("putOwned", vec![s(run), s(corr), s("{}")]), Ok(Value::object([("stored", Value::Bool(true))])));
    assert_eq!(f.index("put", vec![s("kv:1"), s("x")]), Ok(Value::Null));
    // A finalized hook (records on both shards) and an open reservation (claims on both).
    let h1 = owner(run, "hk-1");
    f.index("reserveHookToken", vec![s("tok-1"), h1.to_value()]).unwrap();
    f.index("finalizeHookIndexes", vec![s("tok-1"), s("hk-1"), s(&hook_json(&h1, "tok-1")), h1.to_value()]).unwrap();
    f.index("reserveHookToken", vec![s("tok-2"), owner(run, "hk-2").to_value()]).unwrap();
    let hook = |h: &str, t: &str| opts(&[("hookId", s(h)), ("token", s(t))]);
    let request = opts(&[
        ("runId", s(run)),
        ("keys", Value::Array(vec![s(key), s(key), s("kv:1"), s("missing:key")])),
        ("hooks", Value::Array(vec![hook("hk-1", "tok-1"), hook("hk-2", "tok-2")])),
        ("expiredAt", Value::num(946_684_800_000.0)),
    ]);
    // 0.3's count: run key + kv:1 + hook:tok-1 + hookid:hk-1 + hookclaim:tok-2.
    assert_eq!(f.index("expireRun", vec![request.clone()]), Ok(Value::object([("deleted", Value::num(5))])));
    assert_eq!(f.index("get", vec![s(key)]), Ok(Value::Null));
    assert_eq!(f.index("get", vec![s(corr)]), Ok(s("{}")), "not listed: kept");
    assert_eq!(f.index("get", vec![s("hook:tok-1")]), Ok(Value::Null));
    assert_eq!(f.index("putOwned", vec![s(run), s(key), s("again")]), Ok(Value::object([("stored", Value::Bool(false))])));
    assert_eq!(f.index("expireRun", vec![request]), Ok(Value::object([("deleted", Value::num(0))])), "idempotent");
    // The archive validates first: its errors are the answer, nothing else is called.
    f.calls.borrow_mut().clear();
    let bad = opts(&[("runId", s(run)), ("expiredAt", Value::num(1.0))]);
    assert_eq!(f.index("expireRun", vec![bad]), Err(RpcError::type_error("request.hooks is not iterable")));
    assert_eq!(*f.calls.borrow(), ["WORKFLOW_INDEX/index.expireRun"]);
}

#[test]
fn driver_finalize_follows_the_03_rules() {
    let f = Fleet::new();
    let a = owner("wrun_t1", "h1");
    let b = owner("wrun_t2", "h2");
    let ser = |o: &Owner, t: &str| s(&hook_json(o, t));
    // Without a reservation: stored (0.3 finalize needs no claim).
    assert_eq!(f.index("finalizeHookIndexes", vec![s("tok-a"), s("h1"), ser(&a, "tok-a"), a.to_value()]), Ok(Value::Null));
    assert_eq!(f.index("get", vec![s("hook:tok-a")]), Ok(ser(&a, "tok-a")));
    // Another owner's claim or record refuses.
    let c = owner("wrun_t1", "h3");
    assert_eq!(f.index("reserveHookToken", vec![s("tok-b"), c.to_value()]), Ok(Value::object([("claimed", Value::Bool(true))])));
    let err = f.index("finalizeHookIndexes", vec![s("tok-b"), s("h2"), ser(&b, "tok-b"), b.to_value()]).unwrap_err();
    assert_eq!(err.message, "Hook token tok-b is reserved by another hook");
    let err = f.index("finalizeHookIndexes", vec![s("tok-a"), s("h2"), ser(&b, "tok-a"), b.to_value()]).unwrap_err();
    assert_eq!(err.message, "Hook token tok-a is owned by another hook");
    // A run the run DO does not hold but whose catalog is fenced: ignored, claim dropped.
    let request =
        opts(&[("runId", s("wrun_t1")), ("keys", Value::Array(vec![])), ("hooks", Value::Array(vec![])), ("expiredAt", Value::num(1.0))]);
    f.index("expireRun", vec![request]).unwrap();
    assert_eq!(f.index("finalizeHookIndexes", vec![s("tok-b"), s("h3"), ser(&c, "tok-b"), c.to_value()]), Ok(Value::Null));
    assert_eq!(f.index("get", vec![s("hook:tok-b")]), Ok(Value::Null));
    assert_eq!(f.index("reserveHookToken", vec![s("tok-b"), b.to_value()]), Ok(Value::object([("claimed", Value::Bool(true))])));
    // A terminal run: released, not published.
    f.world.set_run("wrun_t2", "terminal");
    assert_eq!(f.index("finalizeHookIndexes", vec![s("tok-b"), s("h2"), ser(&b, "tok-b"), b.to_value()]), Ok(Value::Null));
    assert_eq!(f.index("get", vec![s("hook:tok-b")]), Ok(Value::Null));
}

#[test]
fn driver_reads_through_to_pre_upgrade_hooks_and_they_keep_blocking() {
    let f = Fleet::new();
    let old = owner("wrun_old", "hk_old");
    let serialized = s(&hook_json(&old, "tok_old"));
    // Written by the pre-upgrade IndexDO: a published hook and an open claim.
    let pre = |method: &str, args: Vec<Value>| f.archive_call(method, args).unwrap();
    pre("finalizeHookIndexes", vec![s("tok_old"), s("hk_old"), serialized.clone(), old.to_value()]);
    let claimant = owner("wrun_claim", "hk_claim");
    assert_eq!(pre("reserveHookToken", vec![s("tok_claimed"), claimant.to_value()]), Value::object([("claimed", Value::Bool(true))]));
    f.world.set_run("wrun_old", "active");
    f.world.set_run("wrun_claim", "active");

    assert_eq!(f.index("get", vec![s("hook:tok_old")]), Ok(serialized.clone()));
    assert_eq!(f.index("get", vec![s("hookid:hk_old")]), Ok(serialized.clone()));
    let other = owner("wrun_new", "hk_new");
    let refused = |holder: &Owner| Ok(Value::object([("claimed", Value::Bool(false)), ("holder", holder.to_value())]));
    assert_eq!(f.index("reserveHookToken", vec![s("tok_old"), other.to_value()]), refused(&old));
    assert_eq!(f.index("reserveHookToken", vec![s("tok_old"), old.to_value()]), refused(&old), "even its owner (0.3)");
    assert_eq!(f.index("reserveHookToken", vec![s("tok_claimed"), other.to_value()]), refused(&claimant));
    assert_eq!(
        f.index("reserveHookToken", vec![s("tok_claimed"), claimant.to_value()]),
        Ok(Value::object([("claimed", Value::Bool(true))]))
    );

    // An ended run's pre-upgrade entries neither resolve nor block.
    f.world.set_run("wrun_old", "terminal");
    assert_eq!(f.index("get", vec![s("hook:tok_old")]), Ok(Value::Null));
    assert_eq!(f.index("reserveHookToken", vec![s("tok_old"), other.to_value()]), Ok(Value::object([("claimed", Value::Bool(true))])));

    // Releases reach the archive too.
    f.world.set_run("wrun_old", "active");
    assert_eq!(f.index("deleteHookIndexes", vec![s("tok_old"), s("hk_old"), old.to_value()]), Ok(Value::Null));
    assert_eq!(pre("get", vec![s("hook:tok_old")]), Value::Null);
    assert_eq!(f.index("get", vec![s("hookid:hk_old")]), Ok(Value::Null));
    assert_eq!(f.index("releaseHookToken", vec![s("tok_claimed"), claimant.to_value()]), Ok(Value::Null));
    assert_eq!(pre("get", vec![s("hookclaim:tok_claimed")]), Value::Null);
}

#[test]
fn migration_moves_every_live_archive_entry_resumably() {
    use super::migrate::{step, STATE_KEY};
    let f = Fleet::new();
    let pre = |method: &str, args: Vec<Value>| f.archive_call(method, args).unwrap();
    // Pre-upgrade data: runs (one expired), correlation keys, hooks, an open claim, a test key.
    let mut run_keys = Vec::new();
    for i in 0..5 {
        let run = format!("wrun_m{i}");
        f.world.set_run(&run, "active");
        for key in [format!("run:wf:000000000000{i}:{run}"), format!("runall:000000000000{i}:{run}"), format!("correlation:c:1:e:{run}")] {
            pre("putOwned", vec![s(&run), s(&key), s(&format!(r#"{{"runId":"{run}"}}"#))]);
            run_keys.push(key);
        }
    }
    f.world.set_run("wrun_gone", "expired");
    pre("putOwned", vec![s("wrun_gone"), s("runall:0000000000009:wrun_gone"), s("{}")]);
    let hooked = owner("wrun_m0", "hk_m");
    let serialized = s(&hook_json(&hooked, "tok_m"));
    pre("finalizeHookIndexes", vec![s("tok_m"), s("hk_m"), serialized.clone(), hooked.to_value()]);
    let claimant = owner("wrun_m1", "hk_c");
    pre("reserveHookToken", vec![s("tok_c"), claimant.to_value()]);
    pre("put", vec![s("kv:keep"), s("1")]);

    // Visible through the facade before the migration…
    assert_eq!(f.index("get", vec![s("hook:tok_m")]), Ok(serialized.clone()));
    assert_eq!(
        f.index("list", vec![opts(&[("prefix", s("runall:"))])]).map(|p| p.get("keys").and_then(Value::as_array).map(Vec::len)),
        Ok(Some(6))
    );

    // …and during it: steps of 4 entries (an interrupted cron resumes from the saved state).
    let mut steps = 0;
    loop {
        let state = block_on(step(&f, 4)).unwrap();
        steps += 1;
        assert_eq!(f.index("get", vec![s("hook:tok_m")]), Ok(serialized.clone()), "resolves at every step");
        let other = owner("wrun_thief", "hk_t");
        let answer = f.index("reserveHookToken", vec![s("tok_c"), other.to_value()]).unwrap();
        assert_eq!(answer.get("claimed"), Some(&Value::Bool(false)), "the claim blocks at every step");
        if state.done() {
            assert_eq!((state.moved, state.skipped, state.kept), (18.0, 1.0, 0.0), "15 run keys, 2 hook records, 1 claim, 1 expired");
            break;
        }
        assert!(steps < 20, "the migration does not finish");
    }
    assert!(steps >= 5, "bounded: {steps} steps");

    // Afterwards the archive holds no live entry; everything resolves from the shards.
    let left = pre("list", vec![]);
    let names: Vec<String> = left
        .get("keys")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .filter_map(|k| k.get("name").and_then(Value::as_str).map(str::to_string))
        .collect();
    assert_eq!(names, [STATE_KEY.to_string(), "kv:keep".to_string()]);
    for key in &run_keys {
        assert_eq!(f.index("get", vec![s(key)]), Ok(s(&format!(r#"{{"runId":"{}"}}"#, key.rsplit(':').next().unwrap()))), "{key}");
    }
    assert_eq!(f.index("get", vec![s("runall:0000000000009:wrun_gone")]), Ok(Value::Null));
    assert_eq!(f.index("get", vec![s("hook:tok_m")]), Ok(serialized.clone()));
    assert_eq!(f.index("get", vec![s("hookid:hk_m")]), Ok(serialized));
    assert_eq!(
        f.index("reserveHookToken", vec![s("tok_c"), owner("wrun_thief", "hk_t").to_value()]).unwrap().get("claimed"),
        Some(&Value::Bool(false))
    );
    let done = block_on(step(&f, 4)).unwrap();
    assert!(done.done() && done.moved == 18.0, "a finished migration stays finished");
}

#[test]
fn short_prefixes_list_the_catalog_families_they_cover_and_the_archive() {
    let (mut c, _) = filled(12);
    // Keys only the archive holds: arbitrary ones, including one beside the run families.
    for key in ["alpha", "rho", "zeta"] {
        c.archive_call("put", vec![s(key), s("{}")]).unwrap_or_else(|e| panic!("{e:?}"));
    }
    let mut everything: Vec<String> = (0..12)
        .flat_map(|i| [format!("run:wf:{:013}:wrun_{i:03}", 1000 + i), format!("runall:{:013}:wrun_{i:03}", 1000 + i)])
        .chain(["alpha", "rho", "zeta"].map(String::from))
        .collect();
    everything.sort();
    for (prefix, want) in [
        ("", everything.clone()),
        ("r", everything.iter().filter(|k| k.starts_with('r')).cloned().collect::<Vec<_>>()),
        ("run", everything.iter().filter(|k| k.starts_with("run")).cloned().collect()),
        ("c", vec![]),
        ("z", vec!["zeta".to_string()]),
    ] {
        for reverse in [false, true] {
            let mut seen = Vec::new();
            let mut cursor: Option<Value> = None;
            for _ in 0..50 {
                let mut o = vec![("prefix", s(prefix)), ("limit", Value::num(5)), ("reverse", Value::Bool(reverse))];
                if let Some(c) = cursor.take() {
                    o.push(("cursor", c));
                }
                let page = c.list(opts(&o), false).unwrap_or_else(|e| panic!("{e:?}"));
                seen.extend(names(&page));
                if page.get("list_complete") == Some(&Value::Bool(true)) {
                    break;
                }
                cursor = page.get("cursor").cloned();
            }
            let mut expected = want.clone();
            if reverse {
                expected.reverse();
            }
            assert_eq!(seen, expected, "prefix {prefix:?} reverse={reverse}");
        }
    }
    // A prefix that names no catalog family stays an archive call.
    assert!(matches!(route("list", &[opts(&[("prefix", s("hook:"))])], false), Ok(Route::Archive)));
    assert!(matches!(route("list", &[opts(&[("prefix", s("x"))])], false), Ok(Route::Archive)));
}

#[test]
fn the_refusal_of_a_run_key_put() {
    assert!(refuses_put(&Value::str("expired")));
    for live in ["active", "terminal", "missing"] {
        assert!(!refuses_put(&Value::str(live)));
    }
    assert!(!refuses_put(&Value::Null));
    assert_eq!(refused_put().to_json().unwrap(), r#"{"stored":false}"#);
}

#[test]
fn a_fresh_deployment_is_marked_migrated_at_the_first_reading() {
    use super::migrate::{read_state, State, STATE_KEY};
    // Nothing in the archive: done at once (the cron never ran), and nothing written.
    let f = Fleet::new();
    let state = block_on(read_state(&f)).unwrap();
    assert!(State::from_value(&state).done());
    assert_eq!(f.archive_call("get", vec![s(STATE_KEY)]).unwrap(), Value::Null);
    // A pre-upgrade entry of any family: not done, nothing written.
    for key in ["run:wf:0000000000001:wrun_a", "hookclaim:tok_z"] {
        let f = Fleet::new();
        f.archive_call("put", vec![s(key), s("{}")]).unwrap();
        let state = block_on(read_state(&f)).unwrap();
        assert!(state.is_null() && !State::from_value(&state).done(), "{key}");
        assert_eq!(f.archive_call("get", vec![s(STATE_KEY)]).unwrap(), Value::Null);
    }
    // Only keys of no migrated family (an expiry fence of the reference): done.
    let f = Fleet::new();
    f.archive_call("put", vec![s("expired:wrun_old"), Value::num(5.0)]).unwrap();
    assert!(State::from_value(&block_on(read_state(&f)).unwrap()).done());
    // A migration under way: its saved state as it is.
    let f = Fleet::new();
    let half = State { family: 2, cursor: Some("correlation:x".into()), ..State::default() }.to_value();
    f.archive_call("put", vec![s(STATE_KEY), half.clone()]).unwrap();
    f.archive_call("put", vec![s("hook:tok"), s("{}")]).unwrap();
    assert_eq!(block_on(read_state(&f)).unwrap(), half);
}

#[test]
fn a_runs_start_never_asks_about_the_archive_and_its_expiry_skips_a_migrated_one() {
    // What asks whether the archive is in use: reads, hook reservations, expiry; not a
    // run's putOwned (its start and status changes) nor a finalize.
    for method in ["putOwned", "finalizeHookIndexes", "put", "delete"] {
        assert!(!archive_matters(method), "{method}");
    }
    for method in ["get", "list", "reserveHookToken", "releaseHookToken", "deleteHookIndexes", "expireRun"] {
        assert!(archive_matters(method), "{method}");
    }
    // expireRun without the archive: the shards' share, the archive untouched, the same
    // answer; a bad request is refused as the archive refused it.
    let f = Fleet::new();
    f.world.set_run("wrun_x", "active");
    f.index_with("putOwned", vec![s("wrun_x"), s("runall:0000000000001:wrun_x"), s("{}")], false).unwrap();
    let request = opts(&[
        ("runId", s("wrun_x")),
        ("keys", Value::Array(vec![s("runall:0000000000001:wrun_x")])),
        ("hooks", Value::Array(vec![])),
        ("expiredAt", Value::num(7.0)),
    ]);
    assert_eq!(f.index_with("expireRun", vec![request], false), Ok(Value::object([("deleted", Value::num(1.0))])));
    assert_eq!(
        f.archive_call("list", vec![]).unwrap().get("keys").and_then(Value::as_array).map(Vec::len),
        Some(0),
        "the archive holds nothing"
    );
    let both =
        |req: Vec<Value>| (Fleet::new().index_with("expireRun", req.clone(), true), Fleet::new().index_with("expireRun", req, false));
    let keys = || Value::Array(vec![s("runall:0000000000001:wrun_y")]);
    let bad_hooks = [Value::num(5.0), Value::Null];
    let mut bad: Vec<Vec<Value>> = vec![vec![], vec![Value::Null], vec![opts(&[("runId", s("wrun_y"))])]];
    bad.extend(
        bad_hooks
            .into_iter()
            .map(|h| vec![opts(&[("runId", s("wrun_y")), ("keys", keys()), ("hooks", h), ("expiredAt", Value::num(1.0))])]),
    );
    bad.push(vec![opts(&[("runId", s("wrun_y")), ("keys", keys()), ("hooks", Value::Array(vec![]))])]);
    for bad in bad {
        let (with, without) = both(bad.clone());
        assert!(with.is_err(), "{bad:?}");
        assert_eq!(with, without, "{bad:?}");
    }
    // A key the facade keeps in the archive (no catalog family) is expired there.
    let f = Fleet::new();
    f.index_with("put", vec![s("kv:1"), s("1")], false).unwrap();
    let request = opts(&[
        ("runId", s("wrun_z")),
        ("keys", Value::Array(vec![s("kv:1"), s("runall:0000000000001:wrun_z")])),
        ("hooks", Value::Array(vec![])),
        ("expiredAt", Value::num(7.0)),
    ]);
    assert_eq!(f.index_with("expireRun", vec![request], false), Ok(Value::object([("deleted", Value::num(1.0))])));
    assert_eq!(f.archive_call("get", vec![s("kv:1")]).unwrap(), Value::Null);
}
