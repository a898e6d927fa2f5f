//! The sharded index end to end: the 0.4 `/v1/index/*` coordinator
//! ([`world_celld_rs::coordinator::call`]), the 0.3 `index` facade
//! ([`world_celld_rs::facade::driver::call`], with and without the archive read-through) and
//! the hook shards' `get` (the one shard method on `/v1/rpc`), all over the in-memory fleet
//! of real cores (`facade::testing::Fleet`: 16 catalog shards, the hook-token and hook-id
//! shards with their alarms, the archive, run statuses), driven by arbitrary sequences of
//! operations, run status changes and alarm firings.
//!
//! Input: operations until the input runs out, each a tag byte, then
//! * `tag < 0x20` — a coordinator operation (`IndexOp::ALL[tag % 7]`) whose argument list
//!   is decoded from raw bytes (two length bytes, big endian, then the body) as the router
//!   would, then one byte picking the claim id `hooks.reserve` proposes;
//! * `0x20 ≤ tag < 0x40` — a 0.3 `index` method (one byte: its index in the whitelist)
//!   with a raw body in the same form (the archive read-through on for odd tags);
//! * `0x40 ≤ tag < 0x90` — a coordinator operation (`tag % 7`) with generated arguments;
//! * `0x90 ≤ tag < 0xC0` — a 0.3 `index` method with generated arguments (archive: odd);
//! * `0xC0 ≤ tag < 0xD0` — a hook shard `get` (token shard for even tags, hook-id odd);
//! * `0xD0 ≤ tag < 0xE0` — run `RUNS[k / 4]` gets lifecycle status `STATUSES[k % 4]`,
//!   `k = (tag - 0xD0) % 12`;
//! * `tag ≥ 0xE0` — the earliest alarm of any shard fires;
//!
//! The seeds (`scripts/fuzz-seeds.mjs`) are the golden files' `/v1/index/*` requests (0.4,
//! with their run ids renamed into `RUNS`, made active first) and `index` calls (0.3).
//!
//! then one byte advances the clock.
//!
//! Checks after every step: no panic, no "corrupt" error; on every hook shard a key is never
//! both published and claimed, every claim has exactly its own deadline entry and every
//! deadline entry its claim, and an alarm is set while deadline entries exist; on every
//! catalog shard the fence and compaction records decode, every fence has its compaction
//! entry, and an alarm is set while compaction entries exist. Per operation: a run commit
//! or a 0.3 `putOwned` behind the run's expiry fence changes no catalog entry, and a hook
//! shard `get` answers a hook only while its owner's run is `active`, and the same in its
//! step form (`get_step`, the run DO asked between the steps as the shell's class does).
#![no_main]

use std::collections::BTreeMap;

use fuzz_support::arbitrary::{Result, Unstructured};
use fuzz_support::*;
use libfuzzer_sys::fuzz_target;
use world_celld_rs::catalog::records::{ExpiryFence, ExpiryGc};
use world_celld_rs::catalog::{self, keys as catalog_keys};
use world_celld_rs::coordinator;
use world_celld_rs::facade::testing::Fleet;
use world_celld_rs::hook_shard::driver as hook_driver;
use world_celld_rs::hook_shard::driver::GetStep;
use world_celld_rs::hook_shard::keys::{self as hook_keys, CLAIM_DEADLINE_PREFIX, CLAIM_PREFIX};
use world_celld_rs::hook_shard::records::{Claim, Deadline};
use world_celld_rs::hook_shard::testing::Host;
use world_celld_rs::hook_shard::visibility::Visibility;
use world_celld_rs::protocol::hooks::{Family, Owner};
use world_celld_rs::protocol::hop::Args;
use world_celld_rs::protocol::lifecycle::MAX_RUN_INDEX_PUBLICATION_LIFETIME_MS as LEASE;
use world_celld_rs::store::Stored;
use world_celld_rs::testing::block_on;
use world_celld_rs::wire::router::{Binding, IndexOp};
use world_celld_rs::wire::uri::decode_uri_component;
use world_celld_rs::wire::{js, RpcError, Value};

const GEN: ValueGen = ValueGen {
    keys: &[
        "runId",
        "hookId",
        "token",
        "keys",
        "hooks",
        "expiredAt",
        "prefix",
        "limit",
        "cursor",
        "reverse",
        "workflowName",
        "createdAt",
        "status",
        "tokenClaimId",
        "hookIdClaimId",
    ],
    strings: &["wrun_A", "wrun_B", "h1", "h2", "tok", "tok2", "run:", "runall:", "correlation:", "hook:tok", "hookid:h1", "wf", ""],
};
const RUNS: &[&str] = &["wrun_A", "wrun_B", "wrun_C"];
const HOOKS: &[&str] = &["h1", "h2", "h3"];
const TOKENS: &[&str] = &["tok", "tok2", "tok 3"];
const WORKFLOWS: &[&str] = &["wf", "wf:x"];
const STATUSES: &[&str] = &["active", "terminal", "expired", "missing"];
const CLAIM_IDS: &[&str] = &["11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222", "legacy"];
const CREATED: &[i64] = &[T0, T0 + 1, 946_684_800_000];
const PREFIXES: &[&str] = &["runall:", "run:", "run:wf:", "run:wf:x:", "correlation:", "", "r", "hook:", "kv:"];

struct Harness {
    fleet: Fleet,
    /// Reservations `hooks.reserve` answered, replayed by finalize / release-reservation.
    reservations: Vec<Value>,
}

fn owner(u: &mut Unstructured) -> Result<Value> {
    GEN.owner(u, RUNS, HOOKS)
}

fn serialized(u: &mut Unstructured, owner: &Value, token: &Value) -> Result<Value> {
    GEN.serialized_hook(u, owner, token)
}

fn created_at(u: &mut Unstructured) -> Result<i64> {
    Ok(*u.choose(CREATED)?)
}

/// A run key of one of the pool's runs, or anything.
fn run_key(u: &mut Unstructured) -> Result<Value> {
    let run = *u.choose(RUNS)?;
    let at = world_celld_rs::protocol::lifecycle::pad13(created_at(u)?);
    Ok(match u.int_in_range(0..=4)? {
        0 => Value::String(format!("run:{}:{at}:{run}", u.choose(WORKFLOWS)?)),
        1 => Value::String(format!("runall:{at}:{run}")),
        2 => Value::String(format!("correlation:c{}:{at}:evnt_1:{run}", u.int_in_range(0..=2)?)),
        3 => Value::str("kv:a"),
        _ => GEN.id_or_value(u, &["hook:tok", "hookid:h1", "expired:wrun_A", "run:"])?,
    })
}

fn hook_refs(u: &mut Unstructured) -> Result<Value> {
    let n = u.int_in_range(0..=3)?;
    let hooks = (0..n)
        .map(|_| Ok(Value::object([("hookId", GEN.id_or_value(u, HOOKS)?), ("token", GEN.id_or_value(u, TOKENS)?)])))
        .collect::<Result<Vec<_>>>()?;
    Ok(Value::Array(hooks))
}

/// `{runId, keys, hooks, expiredAt}`: the 0.4 `runs.expire` and the 0.3 `index.expireRun`.
fn expire_request(u: &mut Unstructured) -> Result<Value> {
    let keys = (0..u.int_in_range(0..=3)?).map(|_| run_key(u)).collect::<Result<Vec<_>>>()?;
    object_with!(
        u,
        vec![
            ("runId", GEN.id_or_value(u, RUNS)?),
            ("keys", Value::Array(keys)),
            ("hooks", hook_refs(u)?),
            ("expiredAt", Value::Number(GEN.number(u)?)),
        ],
    )
}

fn list_options(u: &mut Unstructured) -> Result<Value> {
    object_with!(
        u,
        vec![
            ("prefix", GEN.id_or_value(u, PREFIXES)?),
            ("limit", Value::Number(GEN.number(u)?)),
            ("cursor", if u.ratio(1, 2)? { run_key(u)? } else { GEN.value(u, 0)? }),
            ("reverse", Value::Bool(u.arbitrary()?)),
        ],
    )
}

impl Harness {
    fn reservation(&self, u: &mut Unstructured) -> Result<Value> {
        if !self.reservations.is_empty() && u.ratio(3, 4)? {
            Ok(u.choose(&self.reservations)?.clone())
        } else {
            object_with!(u, vec![("tokenClaimId", GEN.id_or_value(u, CLAIM_IDS)?), ("hookIdClaimId", GEN.id_or_value(u, CLAIM_IDS)?)])
        }
    }

    fn coordinator_args(&self, u: &mut Unstructured, op: IndexOp) -> Result<Vec<Value>> {
        let now = self.fleet.world.now.get();
        Ok(match op {
            IndexOp::RunsList => vec![list_options(u)?],
            IndexOp::RunsCommit => {
                let run_id = GEN.id_or_value(u, RUNS)?;
                let run = object_with!(
                    u,
                    vec![
                        ("runId", run_id.clone()),
                        ("workflowName", GEN.id_or_value(u, WORKFLOWS)?),
                        ("status", Value::str("pending")),
                        ("createdAt", Value::Date(Some(created_at(u)?))),
                    ],
                )?;
                let metadata = Value::String(format!(r#"{{"runId":{}}}"#, run_id.to_json().unwrap_or_default()));
                let lease = match u.int_in_range(0..=4)? {
                    0 => Value::num((now + LEASE) as f64),
                    1 => Value::num((now + LEASE + 1) as f64),
                    2 => Value::num(now as f64),
                    3 => Value::num((now + 1) as f64),
                    _ => Value::Number(GEN.number(u)?),
                };
                vec![run, if u.ratio(15, 16)? { metadata } else { GEN.value(u, 1)? }, lease]
            }
            IndexOp::RunsExpire => vec![expire_request(u)?],
            IndexOp::HooksReserve => vec![GEN.id_or_value(u, TOKENS)?, owner(u)?],
            IndexOp::HooksFinalize => {
                let (token, o) = (GEN.id_or_value(u, TOKENS)?, owner(u)?);
                let hook_id = if u.ratio(7, 8)? { o.get("hookId").cloned().unwrap_or(Value::Null) } else { GEN.id_or_value(u, HOOKS)? };
                let s = serialized(u, &o, &token)?;
                vec![token, hook_id, s, o, self.reservation(u)?]
            }
            IndexOp::HooksReleaseReservation => vec![GEN.id_or_value(u, TOKENS)?, owner(u)?, self.reservation(u)?],
            IndexOp::HooksRelease => vec![object_with!(u, vec![("runId", GEN.id_or_value(u, RUNS)?), ("hooks", hook_refs(u)?)])?],
        })
    }

    fn index_args(&self, u: &mut Unstructured, method: &str) -> Result<Vec<Value>> {
        let token = GEN.id_or_value(u, TOKENS)?;
        Ok(match method {
            "get" | "delete" => vec![if u.ratio(1, 2)? { run_key(u)? } else { Value::String(format!("hook:{}", u.choose(TOKENS)?)) }],
            "put" => vec![run_key(u)?, GEN.value(u, 1)?],
            "putOwned" => {
                let run_id = GEN.id_or_value(u, RUNS)?;
                vec![run_id, run_key(u)?, Value::String(format!(r#"{{"n":{}}}"#, u.int_in_range(0..=9)?))]
            }
            "list" => vec![list_options(u)?],
            "reserveHookToken" | "releaseHookToken" => vec![token, owner(u)?],
            "finalizeHookIndexes" => {
                let o = owner(u)?;
                let hook_id = o.get("hookId").cloned().unwrap_or(Value::Null);
                let s = serialized(u, &o, &token)?;
                vec![token, hook_id, s, o]
            }
            "deleteHookIndexes" => {
                let o = owner(u)?;
                vec![token, o.get("hookId").cloned().unwrap_or(Value::Null), o]
            }
            "expireRun" => vec![expire_request(u)?],
            _ => vec![GEN.value(u, 2)?],
        })
    }

    /// The catalog shard a commit / `putOwned` of `run_id` goes to holds its fence.
    fn fenced(&self, run_id: Option<&Value>) -> bool {
        let shard = world_celld_rs::protocol::shard::run_catalog(&run_id.map(|v| js::to_js_string(Some(v))).unwrap_or_default());
        let objects = self.fleet.world.objects.borrow();
        objects.get(&(catalog::CLASS, shard)).is_some_and(|o| o.store.data.contains_key(&catalog_keys::expired(&js::to_js_string(run_id))))
    }

    fn catalog_snapshot(&self) -> BTreeMap<String, String> {
        let objects = self.fleet.world.objects.borrow();
        objects
            .iter()
            .filter(|((class, _), _)| *class == catalog::CLASS)
            .flat_map(|((_, name), o)| o.store.data.iter().map(move |(k, v)| (format!("{name}/{k}"), format!("{v:?}"))))
            .collect()
    }

    fn coordinator(&mut self, op: IndexOp, args: Vec<Value>, claim_id: &str) {
        let fenced = match op {
            IndexOp::RunsCommit => self.fenced(js::member(args.first(), "runId").ok().flatten()),
            _ => false,
        };
        let before = fenced.then(|| self.catalog_snapshot());
        let result = block_on(coordinator::call(&self.fleet, op, &args, claim_id));
        assert_not_corrupt(op.name(), &result);
        if let Some(before) = before {
            assert_eq!(before, self.catalog_snapshot(), "a commit behind the run's fence changed the catalog: {result:?}");
        }
        if let (IndexOp::HooksReserve, Ok(answer)) = (op, &result) {
            if answer.get("admitted") == Some(&Value::Bool(true)) && self.reservations.len() < 8 {
                self.reservations.push(answer.clone());
            }
        }
    }

    fn index(&mut self, method: &str, args: Vec<Value>, with_archive: bool) {
        let fenced = method == "putOwned"
            && args.get(1).and_then(Value::as_str).is_some_and(catalog_keys::is_catalog_key)
            && self.fenced(args.first());
        let before = fenced.then(|| self.catalog_snapshot());
        let result = self.fleet.index_with(method, args, with_archive);
        assert_not_corrupt(method, &result);
        if let Some(before) = before {
            assert_eq!(before, self.catalog_snapshot(), "a putOwned behind the run's fence changed the catalog: {result:?}");
        }
    }

    fn hook_get(&self, family: Family, key: Value) {
        let name = family.shard(&js::to_js_string(Some(&key)));
        let host = Host { world: &self.fleet.world, family, name };
        let result = block_on(hook_driver::call(&host, family, "get", Args(&[key.clone()])));
        assert_not_corrupt("get", &result);
        // The shell's step form (`get_step`, the run DO asked between the steps) answers
        // the same.
        let stepped = {
            let mut objects = self.fleet.world.objects.borrow_mut();
            let object = objects.entry((family.class(), host.name.clone())).or_default();
            let args = [key];
            let mut step = |asked: Option<(&str, &std::result::Result<Value, RpcError>)>| {
                object.store.in_transaction(|store| hook_driver::get_step(store, family, Visibility::Active, Args(&args), asked))
            };
            match step(None) {
                Ok(GetStep::Ask(run_id)) => {
                    let status = Ok(Value::str(self.fleet.world.runs.borrow().get(&run_id).map_or("missing", String::as_str)));
                    match step(Some((&run_id, &status))) {
                        Ok(GetStep::Answer(v)) => Ok(v),
                        other => panic!("a second step did not answer: {other:?}"),
                    }
                }
                Ok(GetStep::Answer(v)) => Ok(v),
                Err(e) => Err(e),
            }
        };
        assert_eq!(stepped, result, "get in steps and the driver's get differ");
        if let Ok(Value::String(hook)) = &result {
            let owner = Owner::from_serialized(hook).expect("a published hook names its owner");
            let status = self.fleet.world.runs.borrow().get(&owner.run_id).cloned();
            assert_eq!(status.as_deref(), Some("active"), "get answered a hook of a run that is not active");
        }
    }

    fn check(&self) {
        let now = self.fleet.world.now.get();
        let objects = self.fleet.world.objects.borrow();
        for ((class, name), object) in objects.iter() {
            let data = &object.store.data;
            let text = |key: &str| match data.get(key) {
                Some(Stored::Text(t)) => t.clone(),
                other => panic!("{name}: {key} is not text: {other:?}"),
            };
            if *class == catalog::CLASS {
                for key in keys_under(&object.store, catalog_keys::EXPIRED_PREFIX) {
                    let fence: ExpiryFence = serde_json::from_str(&text(key)).expect("fence decodes");
                    let run_id = &key[catalog_keys::EXPIRED_PREFIX.len()..];
                    assert!(
                        data.contains_key(&catalog_keys::expiry_gc(fence.compact_at, run_id)),
                        "{name}: fence {key} has no compaction entry"
                    );
                }
                let gc = keys_under(&object.store, catalog_keys::EXPIRY_GC_PREFIX);
                for key in &gc {
                    let entry: ExpiryGc = serde_json::from_str(&text(key)).expect("compaction entry decodes");
                    assert_eq!(*key, catalog_keys::expiry_gc(entry.compact_at, &entry.run_id), "{name}: compaction entry key");
                }
                assert!(gc.is_empty() || object.alarm.is_some(), "{name}: compaction entries and no alarm (now {now})");
                continue;
            }
            let family = if *class == Family::Token.class() { Family::Token } else { Family::Id };
            let mut deadlines: Vec<&str> = keys_under(&object.store, CLAIM_DEADLINE_PREFIX);
            for key in keys_under(&object.store, CLAIM_PREFIX) {
                if key.starts_with(CLAIM_DEADLINE_PREFIX) {
                    continue;
                }
                let claim: Claim = serde_json::from_str(&text(key)).expect("claim decodes");
                let natural = decode_uri_component(&key[CLAIM_PREFIX.len()..]).expect("claim key is escaped");
                assert!(!data.contains_key(&hook_keys::record(family, &natural)), "{name}: {natural:?} is both published and claimed");
                assert_eq!(claim.deadline_key, hook_keys::deadline(claim.expires_at, &natural), "{name}: claim {key} deadline key");
                let deadline = Deadline::parse(family, &text(&claim.deadline_key)).expect("deadline decodes");
                assert_eq!(
                    (deadline.key.as_str(), deadline.claim_id.as_str()),
                    (natural.as_str(), claim.claim_id.as_str()),
                    "{name}: deadline of {key}"
                );
                deadlines.retain(|d| *d != claim.deadline_key);
            }
            assert!(deadlines.is_empty(), "{name}: deadline entries without their claim: {deadlines:?}");
            let any_deadline = !keys_under(&object.store, CLAIM_DEADLINE_PREFIX).is_empty();
            assert!(!any_deadline || object.alarm.is_some(), "{name}: claims and no alarm (now {now})");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let mut h = Harness { fleet: Fleet::new(), reservations: Vec::new() };
    let index_methods = Binding::Index.methods();
    while !u.is_empty() {
        let Ok(tag) = u.arbitrary::<u8>() else { break };
        let step = (|| -> Result<()> {
            match tag {
                0x00..=0x3F => {
                    let facade_method =
                        if tag >= 0x20 { Some(index_methods[usize::from(u.arbitrary::<u8>()?) % index_methods.len()]) } else { None };
                    let len_bytes = u.bytes(2.min(u.len()))?;
                    let len = len_bytes.iter().fold(0usize, |acc, b| acc * 256 + usize::from(*b));
                    let body = u.bytes(len.min(u.len()))?;
                    let args = match Value::parse(&world_celld_rs::wire::value::decode_utf8(body)) {
                        Ok(Value::Array(args)) => args,
                        Ok(other) => vec![other],
                        Err(_) => return Ok(()),
                    };
                    match facade_method {
                        Some(method) => h.index(method, args, tag % 2 == 1),
                        None => {
                            let claim = CLAIM_IDS[usize::from(u.arbitrary::<u8>()?) % CLAIM_IDS.len()];
                            h.coordinator(IndexOp::ALL[usize::from(tag) % IndexOp::ALL.len()], args, claim);
                        }
                    }
                }
                0x40..=0x8F => {
                    let op = IndexOp::ALL[usize::from(tag) % IndexOp::ALL.len()];
                    let args = wire(h.coordinator_args(&mut u, op)?);
                    let claim = *u.choose(CLAIM_IDS)?;
                    h.coordinator(op, args, claim);
                }
                0x90..=0xBF => {
                    let method = index_methods[usize::from(u.arbitrary::<u8>()?) % index_methods.len()];
                    let args = wire(h.index_args(&mut u, method)?);
                    h.index(method, args, tag % 2 == 1);
                }
                0xC0..=0xCF => {
                    let family = if tag % 2 == 0 { Family::Token } else { Family::Id };
                    let key = GEN.id_or_value(&mut u, if family == Family::Token { TOKENS } else { HOOKS })?;
                    h.hook_get(family, wire(vec![key]).pop().unwrap_or(Value::Null));
                }
                0xD0..=0xDF => {
                    let k = usize::from(tag - 0xD0) % (RUNS.len() * STATUSES.len());
                    h.fleet.world.set_run(RUNS[k / STATUSES.len()], STATUSES[k % STATUSES.len()]);
                }
                _ => {
                    h.fleet.fire_next();
                }
            }
            Ok(())
        })();
        if step.is_err() {
            break;
        }
        let step = clock_step(&mut u);
        h.fleet.world.now.set(h.fleet.world.now.get() + step);
        h.check();
    }
});
