//! IndexDO behaviour tests: the `tests.md` index checklist, the hook-token lifecycle of
//! `index-do.md` §3, the recorded `list` quirks, and the native golden replay.

use super::call;
use crate::config::Config;
use crate::protocol::hop::{Args, Ctx};
use crate::store::MemoryStore;
use crate::wire::{RpcError, Value};

struct Index {
    store: MemoryStore,
    config: Config,
    now: i64,
}

impl Index {
    fn new() -> Self {
        Index { store: MemoryStore::new(), config: Config::default(), now: 1_767_323_045_678 }
    }

    fn call(&mut self, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        let ctx = Ctx { now: self.now, name: "index", config: &self.config };
        self.store.transaction(|s| call(s, &ctx, method, Args(&args)))
    }

    fn ok(&mut self, method: &str, args: Vec<Value>) -> Value {
        self.call(method, args).unwrap_or_else(|e| panic!("{method}: {e:?}"))
    }

    fn err(&mut self, method: &str, args: Vec<Value>) -> RpcError {
        self.call(method, args).expect_err(method)
    }

    fn put(&mut self, key: &str, value: &str) {
        assert_eq!(self.ok("put", vec![s(key), s(value)]), Value::Null);
    }

    fn get(&mut self, key: &str) -> Value {
        self.ok("get", vec![s(key)])
    }

    fn list(&mut self, options: Value) -> Value {
        self.ok("list", vec![options])
    }
}

fn s(v: &str) -> Value {
    Value::str(v)
}
fn owner(run: &str, hook: &str) -> Value {
    Value::object([("runId", s(run)), ("hookId", s(hook))])
}
fn opts(members: &[(&str, Value)]) -> Value {
    Value::object(members.iter().cloned())
}
fn page(keys: &[&str], complete: bool, cursor: Option<&str>) -> Value {
    let mut m = vec![
        ("keys", Value::Array(keys.iter().map(|k| Value::object([("name", s(k))])).collect())),
        ("list_complete", Value::Bool(complete)),
    ];
    if let Some(c) = cursor {
        m.push(("cursor", s(c)));
    }
    Value::object(m)
}
fn claimed() -> Value {
    Value::object([("claimed", Value::Bool(true))])
}
fn held_by(holder: Value) -> Value {
    Value::object([("claimed", Value::Bool(false)), ("holder", holder)])
}

#[test]
fn get_put_delete_roundtrip() {
    let mut ix = Index::new();
    assert_eq!(ix.get("golden:a"), Value::Null);
    ix.put("golden:a", "v1");
    assert_eq!(ix.get("golden:a"), s("v1"));
    ix.put("golden:a", "{\"json\":\"text\"}");
    assert_eq!(ix.get("golden:a"), s("{\"json\":\"text\"}"));
    assert_eq!(ix.ok("delete", vec![s("golden:a")]), Value::Null);
    assert_eq!(ix.get("golden:a"), Value::Null);
    assert_eq!(ix.ok("delete", vec![s("golden:none")]), Value::Null);
    ix.put("e", "");
    assert_eq!(ix.get("e"), s(""));
    ix.put("golden:ü/κ", "välue \u{0} nul");
    assert_eq!(ix.get("golden:ü/κ"), s("välue \u{0} nul"));
    // Values come back as stored, typed.
    let typed = Value::object([("d", Value::date(5)), ("b", Value::Bytes(vec![1, 2]))]);
    ix.ok("put", vec![s("t"), typed.clone()]);
    assert_eq!(ix.get("t"), typed);
    // An invalid Date is stored and fails only when a response would contain it.
    ix.ok("put", vec![s("bad-date"), Value::Date(None)]);
    assert_eq!(ix.get("bad-date"), Value::Date(None));
    // Keys are coerced like the platform does; undefined values are refused.
    ix.ok("put", vec![Value::num(5), s("five")]);
    assert_eq!(ix.get("5"), s("five"));
    assert_eq!(ix.err("put", vec![s("k")]), RpcError::type_error("put() called with undefined value."));
    assert_eq!(ix.ok("get", vec![]), Value::Null);
}

#[test]
fn prefix_listing_and_pagination() {
    let mut ix = Index::new();
    for i in 1..=5 {
        ix.put(&format!("run:wf:{i}"), "x");
    }
    ix.put("run:wf2:1", "x");
    ix.put("runall:1", "x");
    ix.put("other", "x");
    let l = |ix: &mut Index, o| ix.list(o);
    assert_eq!(
        l(&mut ix, opts(&[("prefix", s("run:wf:"))])),
        page(&["run:wf:1", "run:wf:2", "run:wf:3", "run:wf:4", "run:wf:5"], true, None)
    );
    let p1 = l(&mut ix, opts(&[("prefix", s("run:wf:")), ("limit", Value::num(2))]));
    assert_eq!(p1, page(&["run:wf:1", "run:wf:2"], false, Some("run:wf:2")));
    let p2 = l(&mut ix, opts(&[("prefix", s("run:wf:")), ("limit", Value::num(2)), ("cursor", s("run:wf:2"))]));
    assert_eq!(p2, page(&["run:wf:3", "run:wf:4"], false, Some("run:wf:4")));
    let p3 = l(&mut ix, opts(&[("prefix", s("run:wf:")), ("limit", Value::num(2)), ("cursor", s("run:wf:4"))]));
    assert_eq!(p3, page(&["run:wf:5"], true, None));
    // Exactly `limit` remaining → complete, no cursor.
    let exact = l(&mut ix, opts(&[("prefix", s("run:wf:")), ("limit", Value::num(5))]));
    assert_eq!(exact, page(&["run:wf:1", "run:wf:2", "run:wf:3", "run:wf:4", "run:wf:5"], true, None));
    // `run:wf` (no colon) also matches other workflows starting with "wf".
    let loose = l(&mut ix, opts(&[("prefix", s("run:wf")), ("limit", Value::num(10))]));
    assert_eq!(loose.get("keys").unwrap().as_array().unwrap().len(), 6);
    // Reverse pages.
    let r1 = l(&mut ix, opts(&[("prefix", s("run:wf:")), ("limit", Value::num(2)), ("reverse", Value::Bool(true))]));
    assert_eq!(r1, page(&["run:wf:5", "run:wf:4"], false, Some("run:wf:4")));
    let r3 =
        l(&mut ix, opts(&[("prefix", s("run:wf:")), ("limit", Value::num(3)), ("reverse", Value::Bool(true)), ("cursor", s("run:wf:3"))]));
    assert_eq!(r3, page(&["run:wf:2", "run:wf:1"], true, None));
}

#[test]
fn fifteen_keys_limit_ten() {
    let mut ix = Index::new();
    for i in 0..15 {
        ix.put(&format!("run:big:{i:02}"), "x");
    }
    let p = ix.list(opts(&[("prefix", s("run:big:")), ("limit", Value::num(10))]));
    assert_eq!(p.get("keys").unwrap().as_array().unwrap().len(), 10);
    assert_eq!(p.get("list_complete"), Some(&Value::Bool(false)));
    assert_eq!(p.get("cursor"), Some(&s("run:big:09")));
}

#[test]
fn list_argument_quirks() {
    let mut ix = Index::new();
    for k in ["kv:1", "kv:2", "kv:3", "kw:1"] {
        ix.put(k, "x");
    }
    let everything = page(&["kv:1", "kv:2", "kv:3", "kw:1"], true, None);
    assert_eq!(ix.ok("list", vec![]), everything);
    assert_eq!(ix.list(Value::Null), everything);
    assert_eq!(ix.list(opts(&[])), everything);
    assert_eq!(ix.list(s("not options")), everything);
    // An empty cursor counts as none, also in reverse (`workflow inspect runs` sends `""`;
    // the reference lists nothing below it).
    assert_eq!(ix.list(opts(&[("cursor", s(""))])), everything);
    let newest = ix.list(opts(&[("prefix", s("kv:")), ("cursor", s("")), ("reverse", Value::Bool(true)), ("limit", Value::num(2))]));
    assert_eq!(newest, page(&["kv:3", "kv:2"], false, Some("kv:2")));
    // limit 0: reads one key, returns none, not complete, and no cursor.
    assert_eq!(ix.list(opts(&[("prefix", s("kv:")), ("limit", Value::num(0))])), page(&[], false, None));
    // Negative limits reach the platform's list-limit error.
    assert_eq!(ix.err("list", vec![opts(&[("limit", Value::num(-1))])]), RpcError::type_error("List limit must be positive."));
    assert_eq!(ix.err("list", vec![opts(&[("limit", Value::num(-5))])]), RpcError::type_error("List limit must be positive."));
    // null members default, except the cursor: a null cursor is the string "null".
    assert_eq!(ix.list(opts(&[("prefix", s("kv:")), ("cursor", Value::Null)])), page(&[], true, None));
    assert_eq!(
        ix.list(opts(&[("limit", Value::num(2)), ("reverse", Value::Bool(true)), ("cursor", Value::Null)])),
        page(&["kw:1", "kv:3"], false, Some("kv:3"))
    );
    let nulls = opts(&[("prefix", Value::Null), ("limit", Value::Null), ("reverse", Value::Null)]);
    assert_eq!(ix.list(nulls), everything);
    // A string limit concatenates: "1" + 1 = "11" keys asked, one returned.
    assert_eq!(ix.list(opts(&[("limit", s("1"))])), page(&["kv:1"], false, Some("kv:1")));
    // A cursor that is not a key, and a cursor without prefix.
    assert_eq!(ix.list(opts(&[("prefix", s("kv:")), ("cursor", s("kv:1x"))])), page(&["kv:2", "kv:3"], true, None));
    assert_eq!(ix.list(opts(&[("cursor", s("kv:2")), ("limit", Value::num(3))])), page(&["kv:3", "kw:1"], true, None));
    // Fractional limits: storage truncates limit + 1, slice truncates limit.
    assert_eq!(ix.list(opts(&[("limit", Value::num(1.5))])), page(&["kv:1"], false, Some("kv:1")));
    // Huge limits: the platform's int32 range.
    assert!(ix.err("list", vec![opts(&[("limit", Value::num(2_147_483_647.0))])]).message.starts_with("Value out of range."));
}

#[test]
fn put_owned_and_expire_run() {
    let mut ix = Index::new();
    let run_key = "run:wf-ix:0946684800000:wrun_ix";
    assert_eq!(ix.ok("putOwned", vec![s("wrun_ix"), s(run_key), s("{}")]), Value::object([("stored", Value::Bool(true))]));
    ix.ok("putOwned", vec![s("wrun_ix"), s("runall:0946684800000:wrun_ix"), s("{}")]);
    ix.ok("putOwned", vec![s("wrun_other"), s("run:wf:0946684800001:wrun_other"), s("{}")]);
    let req = Value::object([
        ("runId", s("wrun_ix")),
        ("keys", Value::Array(vec![s(run_key), s(run_key), s("runall:0946684800000:wrun_ix"), s("missing")])),
        ("hooks", Value::Array(vec![])),
        ("expiredAt", Value::num(946_684_800_000.0)),
    ]);
    assert_eq!(ix.ok("expireRun", vec![req.clone()]), Value::object([("deleted", Value::num(2))]));
    assert_eq!(ix.get(run_key), Value::Null);
    assert_eq!(ix.get("expired:wrun_ix"), Value::num(946_684_800_000.0));
    assert_eq!(ix.ok("putOwned", vec![s("wrun_ix"), s(run_key), s("again")]), Value::object([("stored", Value::Bool(false))]));
    assert_eq!(ix.get(run_key), Value::Null);
    // Idempotent in effect.
    assert_eq!(ix.ok("expireRun", vec![req]), Value::object([("deleted", Value::num(0))]));
    // Other runs are untouched.
    assert_eq!(ix.get("run:wf:0946684800001:wrun_other"), s("{}"));
}

#[test]
fn expire_run_deletes_only_owned_hook_entries() {
    let mut ix = Index::new();
    let hook = |run: &str, id: &str| s(&format!("{{\"runId\":\"{run}\",\"hookId\":\"{id}\"}}"));
    ix.ok("finalizeHookIndexes", vec![s("tok-a"), s("hk-a"), hook("wrun_x", "hk-a"), owner("wrun_x", "hk-a")]);
    ix.ok("reserveHookToken", vec![s("tok-b"), owner("wrun_x", "hk-b")]);
    ix.ok("finalizeHookIndexes", vec![s("tok-c"), s("hk-c"), hook("wrun_y", "hk-c"), owner("wrun_y", "hk-c")]);
    let req = Value::object([
        ("runId", s("wrun_x")),
        ("keys", Value::Array(vec![])),
        (
            "hooks",
            Value::Array(vec![
                Value::object([("hookId", s("hk-a")), ("token", s("tok-a"))]),
                Value::object([("hookId", s("hk-b")), ("token", s("tok-b"))]),
                Value::object([("hookId", s("hk-c")), ("token", s("tok-c"))]),
            ]),
        ),
        ("expiredAt", Value::num(1)),
    ]);
    assert_eq!(ix.ok("expireRun", vec![req]), Value::object([("deleted", Value::num(3))]));
    assert_eq!(ix.store.keys(), ["expired:wrun_x", "hook:tok-c", "hookid:hk-c"]);
    // Finalizing for an expired run publishes nothing and drops only the caller's claim.
    ix.ok("finalizeHookIndexes", vec![s("tok-d"), s("hk-d"), hook("wrun_x", "hk-d"), owner("wrun_x", "hk-d")]);
    assert_eq!(ix.get("hook:tok-d"), Value::Null);
}

#[test]
fn expire_run_argument_errors() {
    let mut ix = Index::new();
    assert_eq!(ix.err("expireRun", vec![]), RpcError::type_error("Cannot read properties of undefined (reading 'runId')"));
    let no_hooks = Value::object([("runId", s("r")), ("expiredAt", Value::num(1))]);
    assert_eq!(ix.err("expireRun", vec![no_hooks]), RpcError::type_error("request.hooks is not iterable"));
    let no_fence = Value::object([("runId", s("r")), ("hooks", Value::Array(vec![]))]);
    assert_eq!(ix.err("expireRun", vec![no_fence]), RpcError::type_error("put() called with undefined value."));
    let bad_keys =
        Value::object([("runId", s("r")), ("keys", Value::num(5)), ("hooks", Value::Array(vec![])), ("expiredAt", Value::num(1))]);
    assert_eq!(
        ix.err("expireRun", vec![bad_keys]),
        RpcError::type_error("number 5 is not iterable (cannot read property Symbol(Symbol.iterator))")
    );
    // Nothing of the failed calls remains (not even the fence).
    assert!(ix.store.keys().is_empty());
}

#[test]
fn hook_token_lifecycle() {
    let mut ix = Index::new();
    let (o1, o2) = (owner("wrun_t1", "h1"), owner("wrun_t2", "h2"));
    assert_eq!(ix.ok("reserveHookToken", vec![s("tok"), o1.clone()]), claimed());
    assert_eq!(ix.get("hookclaim:tok"), Value::object([("owner", o1.clone()), ("reservedAt", Value::num(ix.now as f64))]));
    assert_eq!(ix.ok("reserveHookToken", vec![s("tok"), o1.clone()]), claimed());
    assert_eq!(ix.ok("reserveHookToken", vec![s("tok"), o2.clone()]), held_by(o1.clone()));
    assert_eq!(ix.ok("reserveHookToken", vec![s("tok"), owner("wrun_t1", "h1b")]), held_by(o1.clone()));
    let hook2 = s("{\"runId\":\"wrun_t2\",\"hookId\":\"h2\"}");
    assert_eq!(
        ix.err("finalizeHookIndexes", vec![s("tok"), s("h2"), hook2.clone(), o2.clone()]),
        RpcError::error("Hook token tok is reserved by another hook")
    );
    ix.ok("releaseHookToken", vec![s("tok"), o2.clone()]);
    assert_eq!(ix.ok("reserveHookToken", vec![s("tok"), o2.clone()]), held_by(o1.clone()));
    let hook1 = s("{\"runId\":\"wrun_t1\",\"hookId\":\"h1\",\"token\":\"tok\"}");
    ix.ok("finalizeHookIndexes", vec![s("tok"), s("h1"), hook1.clone(), o1.clone()]);
    assert_eq!(ix.get("hook:tok"), hook1);
    assert_eq!(ix.get("hookid:h1"), hook1);
    assert_eq!(ix.get("hookclaim:tok"), Value::Null);
    // A published hook wins even against its own owner.
    assert_eq!(ix.ok("reserveHookToken", vec![s("tok"), o1.clone()]), held_by(o1.clone()));
    assert_eq!(
        ix.err("finalizeHookIndexes", vec![s("tok"), s("h2"), hook2, o2.clone()]),
        RpcError::error("Hook token tok is owned by another hook")
    );
    // Republish by the owner.
    let v2 = s("{\"runId\":\"wrun_t1\",\"hookId\":\"h1\",\"v\":2}");
    ix.ok("finalizeHookIndexes", vec![s("tok"), s("h1"), v2.clone(), o1.clone()]);
    ix.ok("deleteHookIndexes", vec![s("tok"), s("h1"), o2.clone()]);
    assert_eq!(ix.get("hook:tok"), v2);
    ix.ok("deleteHookIndexes", vec![s("tok"), s("h1"), o1]);
    assert_eq!(ix.get("hook:tok"), Value::Null);
    assert_eq!(ix.get("hookid:h1"), Value::Null);
    assert_eq!(ix.ok("reserveHookToken", vec![s("tok"), o2.clone()]), claimed());
    ix.ok("releaseHookToken", vec![s("tok"), o2]);
    assert!(ix.store.keys().is_empty());
}

#[test]
fn malformed_hooks_and_owners() {
    let mut ix = Index::new();
    let o = owner("wrun_t3", "h");
    ix.ok("finalizeHookIndexes", vec![s("tok-nj"), s("h"), s("not json"), o.clone()]);
    assert_eq!(
        ix.err("reserveHookToken", vec![s("tok-nj"), o.clone()]),
        RpcError { name: "SyntaxError".into(), message: "Unexpected token 'o', \"not json\" is not valid JSON".into() }
    );
    // A hook whose JSON is not an object has no owner members: an empty holder.
    ix.put("hook:num", "5");
    assert_eq!(ix.ok("reserveHookToken", vec![s("num"), o.clone()]), held_by(Value::object::<&str>([])));
    ix.put("hook:null", "null");
    assert_eq!(
        ix.err("reserveHookToken", vec![s("null"), o.clone()]),
        RpcError::type_error("Cannot read properties of null (reading 'runId')")
    );
    // A missing owner cannot be compared with an existing claim.
    ix.ok("reserveHookToken", vec![s("c"), o.clone()]);
    assert_eq!(ix.err("reserveHookToken", vec![s("c")]), RpcError::type_error("Cannot read properties of undefined (reading 'runId')"));
    assert_eq!(
        ix.err("finalizeHookIndexes", vec![s("c"), s("h"), s("{}")]),
        RpcError::type_error("Cannot read properties of undefined (reading 'runId')")
    );
    // A claim without an owner was stored, and a holder is reported as stored.
    ix.ok("reserveHookToken", vec![s("free")]);
    assert_eq!(ix.get("hookclaim:free"), Value::object([("reservedAt", Value::num(ix.now as f64))]));
    // Revived members: bytes under runId come back as bytes.
    ix.put("hook:bin", r#"{"runId":{"__type":"Uint8Array","data":"AQ=="},"hookId":"h"}"#);
    let holder = Value::object([("runId", Value::Bytes(vec![1])), ("hookId", s("h"))]);
    assert_eq!(ix.ok("reserveHookToken", vec![s("bin"), o]), held_by(holder));
    assert_eq!(ix.err("nope", vec![]), RpcError::type_error("IndexDO.nope is not a function"));
}

#[test]
fn golden_index_do_replays_natively() {
    let Some((failures, checked)) = crate::tests::golden::replay("index-do.jsonl", "index", super::call) else {
        eprintln!("golden index-do.jsonl not found; skipped");
        return;
    };
    assert_eq!(checked, 84);
    assert!(failures.is_empty(), "{} failing exchanges:\n{}", failures.len(), failures.join("\n"));
}

/// `list` reads at most the response budget of entries per call (storage hands over the
/// values with the keys): 6 keys holding 2 MB values come in several incomplete pages
/// with cursors, however large the limit, and each key once.
#[test]
fn list_reads_at_most_the_response_budget() {
    let mut ix = Index::new();
    let big = "x".repeat(2_000_000);
    for i in 0..6 {
        ix.put(&format!("k{i}"), &big);
    }
    ix.put("small", "1");
    for limit in [Value::num(2_147_483_646.0), Value::num(1000.0)] {
        let mut names = Vec::new();
        let mut cursor: Option<Value> = None;
        let mut pages = 0;
        loop {
            let mut o = vec![("limit", limit.clone())];
            o.extend(cursor.clone().map(|c| ("cursor", c)));
            let r = ix.list(opts(&o));
            let keys = r.get("keys").and_then(Value::as_array).unwrap();
            assert!(!keys.is_empty());
            names.extend(keys.iter().map(|k| k.get("name").and_then(Value::as_str).unwrap().to_string()));
            pages += 1;
            if r.get("list_complete") == Some(&Value::Bool(true)) {
                assert_eq!(r.get("cursor"), None);
                break;
            }
            cursor = r.get("cursor").cloned();
            assert_eq!(cursor.as_ref().and_then(Value::as_str), names.last().map(String::as_str));
        }
        assert_eq!(names, ["k0", "k1", "k2", "k3", "k4", "k5", "small"]);
        assert!(pages >= 2, "{pages}");
    }
}

/// Keys are coerced like `String(x)` (an object is `"[object Object]"`, as the reference
/// answers 200); a Date key is refused instead of stored under its local-time text.
#[test]
fn object_keys_coerce_and_date_keys_are_refused() {
    let mut ix = Index::new();
    let obj = Value::object([("a", s("b"))]);
    assert_eq!(ix.ok("put", vec![obj.clone(), s("v")]), Value::Null);
    assert_eq!(ix.ok("get", vec![obj.clone()]), s("v"));
    assert_eq!(ix.get("[object Object]"), s("v"));
    assert_eq!(ix.ok("delete", vec![obj.clone()]), Value::Null);
    assert_eq!(ix.ok("get", vec![obj]), Value::Null);
    let date = Value::date(1_577_836_800_000);
    assert_eq!(ix.err("put", vec![date.clone(), s("v")]), RpcError::type_error("key must be a string"));
    assert_eq!(ix.err("get", vec![date]), RpcError::type_error("key must be a string"));
    assert!(ix.store.keys().is_empty(), "{:?}", ix.store.keys());
}
