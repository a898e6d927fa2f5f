//! `IndexDO` core ([`world_celld_rs::index::call`]) driven by arbitrary call sequences:
//! key/value methods, hook-token reservation, publication, release and deletion, and run
//! expiry. Checks after every call: no panic, every stored value decodes, and one owner per
//! hook token: a token is never both published (`hook:<t>`) and reserved
//! (`hookclaim:<t>`), `reserveHookToken` grants a token only when it is free or already the
//! caller's, and a successful `finalizeHookIndexes` leaves the caller's hook as the only
//! entry for the token. (Raw `put`s of `hook…` keys, which can forge any state, switch the
//! ownership checks off for the rest of the input.)
#![no_main]

use fuzz_support::arbitrary::{Result, Unstructured};
use fuzz_support::*;
use libfuzzer_sys::fuzz_target;
use world_celld_rs::config::Config;
use world_celld_rs::index::{self, keys, records};
use world_celld_rs::protocol::hop::{Args, Ctx};
use world_celld_rs::store::{slot, MemoryStore};
use world_celld_rs::wire::router::Binding;
use world_celld_rs::wire::{js, RpcError, Value};

const GEN: ValueGen = ValueGen {
    keys: &["runId", "hookId", "token", "keys", "hooks", "expiredAt", "prefix", "limit", "cursor", "start", "end", "reverse", "owner"],
    strings: &[
        "wrun_A",
        "wrun_B",
        "h1",
        "h2",
        "tok",
        "tok2",
        "k:a",
        "k:b",
        "correlation:x",
        "hook:tok",
        "hookclaim:tok",
        "expired:wrun_A",
        "",
    ],
};
const TOKENS: &[&str] = &["tok", "tok2", "tok3"];
const RUNS: &[&str] = &["wrun_A", "wrun_B"];
const HOOKS: &[&str] = &["h1", "h2"];
const KEYS: &[&str] = &["k:a", "k:b", "correlation:x:1", "run:wrun_A", "expired:wrun_A", "hook:tok", "hookclaim:tok", "hookid:h1"];

fn owner(u: &mut Unstructured) -> Result<Value> {
    GEN.owner(u, RUNS, HOOKS)
}

fn serialized(u: &mut Unstructured, owner: &Value, token: &Value) -> Result<Value> {
    GEN.serialized_hook(u, owner, token)
}

fn build(u: &mut Unstructured, method: &'static str) -> Result<Vec<Value>> {
    let token = GEN.id_or_value(u, TOKENS)?;
    Ok(match method {
        "get" | "delete" => vec![GEN.id_or_value(u, KEYS)?],
        "put" => vec![GEN.id_or_value(u, KEYS)?, GEN.value(u, 2)?],
        "putOwned" => vec![GEN.id_or_value(u, RUNS)?, GEN.id_or_value(u, KEYS)?, GEN.value(u, 1)?],
        "list" => vec![object_with!(
            u,
            vec![
                ("prefix", GEN.id_or_value(u, &["k:", "hook", "", "correlation:"])?),
                ("limit", Value::Number(GEN.number(u)?)),
                ("cursor", GEN.value(u, 0)?),
                ("reverse", Value::Bool(u.arbitrary()?)),
            ],
        )?],
        "reserveHookToken" | "releaseHookToken" => vec![token, owner(u)?],
        "finalizeHookIndexes" => {
            let o = owner(u)?;
            let hook_id = o.get("hookId").cloned().unwrap_or(Value::Null);
            let s = serialized(u, &o, &token)?;
            vec![token, hook_id, s, o]
        }
        "deleteHookIndexes" => {
            let o = owner(u)?;
            let hook_id = if u.ratio(7, 8)? { o.get("hookId").cloned().unwrap_or(Value::Null) } else { GEN.id_or_value(u, HOOKS)? };
            vec![token, hook_id, o]
        }
        "expireRun" => {
            let n = u.int_in_range(0..=2)?;
            let keys = (0..n).map(|_| GEN.id_or_value(u, KEYS)).collect::<Result<Vec<_>>>()?;
            let hooks = (0..u.int_in_range(0..=2)?)
                .map(|_| Ok(Value::object([("hookId", GEN.id_or_value(u, HOOKS)?), ("token", GEN.id_or_value(u, TOKENS)?)])))
                .collect::<Result<Vec<_>>>()?;
            vec![object_with!(
                u,
                vec![
                    ("runId", GEN.id_or_value(u, RUNS)?),
                    ("keys", Value::Array(keys)),
                    ("hooks", Value::Array(hooks)),
                    ("expiredAt", Value::Number(GEN.number(u)?)),
                ],
            )?]
        }
        _ => vec![GEN.value(u, 2)?],
    })
}

struct Harness {
    store: MemoryStore,
    now: i64,
    config: Config,
    /// A raw write forged a `hook…` entry: ownership is no longer the DO's doing.
    forged: bool,
}

impl Harness {
    fn call(&mut self, method: &str, args: &[Value]) -> std::result::Result<Value, RpcError> {
        let ctx = Ctx { now: self.now, name: "index", config: &self.config };
        self.store.transaction(|s| index::call(s, &ctx, method, Args(args)))
    }

    fn read(&mut self, key: &str) -> Option<Value> {
        records::read(&mut self.store, key).unwrap_or_else(|e| panic!("{key} does not decode: {e:?}"))
    }

    fn check(&mut self, last: bool) {
        if last {
            check_stored(&self.store, |key, text| slot::decode(key, text).map(|_| ()).map_err(|e| e.message), |_| false);
        }
        if self.forged {
            return;
        }
        for claim in keys_under(&self.store, "hookclaim:") {
            let token = claim.strip_prefix("hookclaim:").unwrap_or_default();
            assert!(!self.store.data.contains_key(&format!("hook:{token}")), "token {token:?} is both published and reserved");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let mut h = Harness { store: MemoryStore::new(), now: T0, config: Config::default(), forged: false };
    let mut build = build;
    while let Ok(Some(op)) = next_op(&mut u, Binding::Index, &mut build) {
        if let Op::Call { method, args, .. } = op {
            if !method.is_empty() {
                let a = |i: usize| args.get(i);
                let token_key = |i: usize| keys::hook(a(i));
                let claim_key = |i: usize| keys::hook_claim(a(i));
                let hook_keys_before: Vec<String> = keys_under(&h.store, "hook").iter().map(|k| k.to_string()).collect();
                let (pre_hook, pre_claim) = (h.read(&token_key(0)), h.read(&claim_key(0)));
                let expired = match method {
                    "finalizeHookIndexes" => js::member(a(3), "runId").ok().map(|run| h.read(&keys::expired(run)).is_some()),
                    _ => None,
                };
                let result = h.call(method, &args);
                assert_not_corrupt(method, &result);
                match (method, &result) {
                    ("put" | "putOwned", Ok(_)) => {
                        let after: Vec<String> = keys_under(&h.store, "hook").iter().map(|k| k.to_string()).collect();
                        h.forged |= after != hook_keys_before || args.iter().any(|v| v.as_str().is_some_and(|s| s.starts_with("hook")));
                    }
                    ("reserveHookToken", Ok(answer)) if !h.forged => {
                        if answer.get("claimed") == Some(&Value::Bool(true)) {
                            assert!(pre_hook.is_none(), "reserved a published token");
                            if let Some(claim) = &pre_claim {
                                let holder = records::claim_owner(claim).expect("claim owner");
                                assert!(
                                    records::same_owner(holder, a(1)).unwrap_or(false),
                                    "reserved a token held by another owner: {holder:?} vs {:?}",
                                    a(1)
                                );
                            }
                            let now_claim = h.read(&claim_key(0)).expect("a granted claim is stored");
                            assert_eq!(records::claim_owner(&now_claim).ok().flatten(), a(1), "claim owner");
                        } else {
                            assert!(pre_hook.is_some() || pre_claim.is_some(), "refused a free token");
                        }
                    }
                    ("finalizeHookIndexes", Ok(_)) if !h.forged && expired == Some(false) => {
                        assert_eq!(h.read(&token_key(0)).as_ref(), a(2), "finalize did not publish the hook");
                        assert!(h.read(&claim_key(0)).is_none(), "finalize left a claim behind");
                        if let Some(hook) = &pre_hook {
                            let prior = records::owner_from_hook(hook).expect("published owner");
                            assert!(records::same_owner(Some(&prior), a(3)).unwrap_or(false), "finalize replaced another owner's hook");
                        }
                    }
                    _ => {}
                }
            }
        }
        h.now += clock_step(&mut u);
        h.check(false);
    }
    h.check(true);
});
