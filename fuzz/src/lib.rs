//! Shared pieces of the fuzz targets: the operation stream every dispatcher target reads,
//! wire-reachable argument values, and the storage checks.
//!
//! ## Input format of the dispatcher targets (`run`, `stream`, `index`, `queue`)
//!
//! A sequence of operations until the input runs out. Each operation starts with a tag
//! byte:
//!
//! * `tag < 0x30` — a **raw call**: one byte picks the method (`index % methods.len()` of
//!   the binding's whitelist, [`Binding::methods`]), two bytes give a length (big endian),
//!   then that many bytes of request body (UTF-8, lossy). The body is decoded like the
//!   router's DO hop does ([`Value::parse`]); an array is the argument list, any other
//!   value a single argument; an undecodable body is skipped. The seed corpus
//!   (`scripts/fuzz-seeds.mjs`) writes the golden files' requests in this form.
//! * `0x30 ≤ tag < 0xE0` — a **structured call**: one byte picks the method, then the
//!   target builds the arguments from the input ([`ValueGen`]), with member names and
//!   strings drawn from small pools so that ids collide and state builds up.
//! * `tag ≥ 0xE0` — a **target-specific event** (the queue's alarm pass, a restart).
//!
//! After the operation one byte advances the injected clock ([`clock_step`]).

use arbitrary::{Result, Unstructured};
use world_celld_rs::store::{record, MemoryStore, Stored};
use world_celld_rs::wire::router::Binding;
use world_celld_rs::wire::{Map, Value};

pub use arbitrary;
pub use world_celld_rs::wire::Value as WireValue;

/// 2026-01-02T03:04:05.678Z, the clock's start.
pub const T0: i64 = 1_767_323_045_678;

/// Tags below this are raw calls.
pub const RAW_TAG_END: u8 = 0x30;
/// Tags from this on are target-specific events.
pub const EVENT_TAG: u8 = 0xE0;

/// One decoded operation.
#[derive(Debug)]
pub enum Op {
    Call {
        method: &'static str,
        args: Vec<Value>,
        raw: bool,
    },
    /// A target-specific event; the byte is the tag.
    Event(u8),
}

/// Read the next operation (`None` at the end of the input). `build` makes the arguments
/// of a structured call.
pub fn next_op(
    u: &mut Unstructured,
    binding: Binding,
    build: &mut dyn FnMut(&mut Unstructured, &'static str) -> Result<Vec<Value>>,
) -> Result<Option<Op>> {
    if u.is_empty() {
        return Ok(None);
    }
    let tag: u8 = u.arbitrary()?;
    if tag >= EVENT_TAG {
        return Ok(Some(Op::Event(tag)));
    }
    let methods = binding.methods();
    let method = methods[usize::from(u.arbitrary::<u8>()?) % methods.len()];
    if tag < RAW_TAG_END {
        let len_bytes = u.bytes(2.min(u.len()))?;
        let len = len_bytes.iter().fold(0usize, |acc, b| acc * 256 + usize::from(*b));
        let body = u.bytes(len.min(u.len()))?;
        let text = world_celld_rs::wire::value::decode_utf8(body);
        return Ok(Some(match Value::parse(&text) {
            Ok(Value::Array(args)) => Op::Call { method, args, raw: true },
            Ok(other) => Op::Call { method, args: vec![other], raw: true },
            Err(_) => Op::Call { method: "", args: Vec::new(), raw: true },
        }));
    }
    let args = build(u, method)?;
    Ok(Some(Op::Call { method, args: wire(args), raw: false }))
}

/// How far one operation moves the clock: mostly milliseconds, sometimes minutes to days.
pub fn clock_step(u: &mut Unstructured) -> i64 {
    let b: u8 = u.arbitrary().unwrap_or(1);
    match b {
        0..=199 => i64::from(b),
        200..=239 => i64::from(b - 199) * 60_000,
        _ => i64::from(b - 239) * 86_400_000,
    }
}

/// The arguments as the DO would see them after the hop: encoded by the router's codec
/// and decoded again, so only wire-reachable values reach a core.
pub fn wire(args: Vec<Value>) -> Vec<Value> {
    let mut text = String::new();
    Value::Array(args).write_json_keeping_invalid_dates(&mut text);
    match Value::parse(&text) {
        Ok(Value::Array(args)) => args,
        other => panic!("generated arguments do not survive the codec: {text} -> {other:?}"),
    }
}

/// Numbers worth hitting: boundaries of slots, limits, dates and JavaScript integers.
const NUMBERS: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    2.0,
    3.0,
    0.5,
    1.5,
    6.0,
    10.0,
    100.0,
    1000.0,
    25_000.0,
    1e9,
    1e15,
    1e21,
    1e300,
    -1e300,
    4_294_967_296.0,
    9_007_199_254_740_991.0,
    9_007_199_254_740_993.0,
    9_999_999_999_999.0,
    7.4e9,
    1e12,
    8.64e15,
    f64::MAX,
    f64::MIN_POSITIVE,
    T0 as f64,
];

/// Dates (epoch ms) worth hitting.
const DATES: &[i64] = &[0, T0, 946_684_800_000, 4_070_908_800_000, 8_640_000_000_000_000, -8_640_000_000_000_000, -1];

/// Builds argument values from the input.
pub struct ValueGen {
    /// Member names to use (the ones the core reads), plus whatever the input spells.
    pub keys: &'static [&'static str],
    /// Strings to use (ids, statuses, event types).
    pub strings: &'static [&'static str],
}

impl ValueGen {
    pub fn value(&self, u: &mut Unstructured, depth: u32) -> Result<Value> {
        let kind: u8 = u.arbitrary()?;
        Ok(match kind % 16 {
            0 => Value::Null,
            1 => Value::Bool(u.arbitrary()?),
            2 | 3 => Value::Number(self.number(u)?),
            4..=7 => Value::String(self.string(u)?),
            8 => Value::Date(self.date(u)?),
            9 => Value::Bytes(u.arbitrary::<&[u8]>()?.iter().copied().take(64).collect()),
            10 | 11 if depth > 0 => {
                let n = u.int_in_range(0..=4)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(u, depth - 1)?);
                }
                Value::Array(items)
            }
            12..=15 if depth > 0 => Value::Object(self.object(u, depth - 1)?),
            _ => Value::String(self.string(u)?),
        })
    }

    pub fn object(&self, u: &mut Unstructured, depth: u32) -> Result<Map> {
        let n = u.int_in_range(0..=5)?;
        let mut map = Map::new();
        for _ in 0..n {
            let key = if u.ratio(7, 8)? { self.pick(u, self.keys)?.to_string() } else { short_string(u)? };
            map.insert(key, self.value(u, depth)?);
        }
        Ok(map)
    }

    pub fn number(&self, u: &mut Unstructured) -> Result<f64> {
        Ok(match u.arbitrary::<u8>()? % 4 {
            0 | 1 => f64::from(u.int_in_range(-3i32..=40)?),
            2 => *u.choose(NUMBERS)?,
            _ => {
                let n: f64 = u.arbitrary()?;
                if n.is_finite() {
                    n
                } else {
                    0.0
                }
            }
        })
    }

    pub fn date(&self, u: &mut Unstructured) -> Result<Option<i64>> {
        Ok(match u.arbitrary::<u8>()? % 4 {
            0 => None,
            1 => Some(u.int_in_range(-8_640_000_000_000_000i64..=8_640_000_000_000_000)?),
            _ => Some(*u.choose(DATES)?),
        })
    }

    pub fn string(&self, u: &mut Unstructured) -> Result<String> {
        if u.ratio(3, 4)? {
            Ok(self.pick(u, self.strings)?.to_string())
        } else {
            short_string(u)
        }
    }

    pub fn pick(&self, u: &mut Unstructured, pool: &'static [&'static str]) -> Result<&'static str> {
        Ok(*u.choose(pool)?)
    }

    /// A hook owner `{runId, hookId}` from the pools, or occasionally any value.
    pub fn owner(&self, u: &mut Unstructured, runs: &'static [&'static str], hooks: &'static [&'static str]) -> Result<Value> {
        if u.ratio(15, 16)? {
            Ok(Value::object([("runId", Value::str(self.pick(u, runs)?)), ("hookId", Value::str(self.pick(u, hooks)?))]))
        } else {
            self.value(u, 1)
        }
    }

    /// The client's serialized hook for `owner` and `token`, or occasionally any value.
    pub fn serialized_hook(&self, u: &mut Unstructured, owner: &Value, token: &Value) -> Result<Value> {
        if u.ratio(15, 16)? {
            let mut hook = owner.as_object().cloned().unwrap_or_default();
            hook.insert("token".into(), token.clone());
            Ok(Value::str(Value::Object(hook).to_json().unwrap_or_default()))
        } else {
            self.value(u, 1)
        }
    }

    /// A string member from the pool, or occasionally any value.
    pub fn id_or_value(&self, u: &mut Unstructured, pool: &'static [&'static str]) -> Result<Value> {
        if u.ratio(15, 16)? {
            Ok(Value::str(self.pick(u, pool)?))
        } else {
            self.value(u, 1)
        }
    }
}

/// A short arbitrary string (at most 24 characters).
pub fn short_string(u: &mut Unstructured) -> Result<String> {
    let s: &str = u.arbitrary()?;
    Ok(s.chars().take(24).collect())
}

/// Build an object from `(member, value)` pairs, leaving each member out with a small
/// probability so that absent members are explored too. `object_with!(u, vec![…])`
/// evaluates the members (which may read `u`) before deciding.
#[macro_export]
macro_rules! object_with {
    ($u:expr, vec![$($m:expr),* $(,)?] $(,)?) => {{
        let members: Vec<(&str, $crate::WireValue)> = vec![$($m),*];
        $crate::object_from($u, members)
    }};
    ($u:expr, $members:expr) => {{
        let members: Vec<(&str, $crate::WireValue)> = $members;
        $crate::object_from($u, members)
    }};
}

/// See [`object_with!`].
pub fn object_from(u: &mut Unstructured, members: Vec<(&str, Value)>) -> Result<Value> {
    let mut map = Map::new();
    for (k, v) in members {
        if u.ratio(15, 16)? {
            map.insert(k.to_string(), v);
        }
    }
    Ok(Value::Object(map))
}

/// Every stored value decodes with the decoder its core reads it with. `text` decodes a
/// text value (or the text of a packed record) at its key.
pub fn check_stored(
    store: &MemoryStore,
    mut text: impl FnMut(&str, &str) -> std::result::Result<(), String>,
    bytes_ok: impl Fn(&str) -> bool,
) {
    for (key, stored) in &store.data {
        match stored {
            Stored::Text(t) => {
                if let Err(e) = text(key, t) {
                    panic!("stored value at {key:?} does not decode: {e}\n{t}");
                }
            }
            // Raw bytes where the core keeps raw bytes (stream chunks), whatever they hold.
            Stored::Bytes(_) if bytes_ok(key) => {}
            Stored::Bytes(b) if record::is_packed(b) => {
                let t = record::unpack(b).unwrap_or_else(|| panic!("packed record at {key:?} does not unpack"));
                if let Err(e) = text(key, &t) {
                    panic!("packed record at {key:?} does not decode: {e}");
                }
            }
            Stored::Bytes(_) => panic!("unexpected raw bytes at {key:?}"),
        }
    }
}

/// Keys under `prefix`.
pub fn keys_under<'s>(store: &'s MemoryStore, prefix: &str) -> Vec<&'s str> {
    store
        .data
        .range::<str, _>((std::ops::Bound::Included(prefix), std::ops::Bound::Unbounded))
        .map(|(k, _)| k.as_str())
        .take_while(|k| k.starts_with(prefix))
        .collect()
}

/// An error a core must never answer: one that says the stored state is broken.
pub fn assert_not_corrupt(method: &str, result: &std::result::Result<Value, world_celld_rs::wire::RpcError>) {
    if let Err(e) = result {
        assert!(!e.message.contains("corrupt"), "{method} reports corrupt storage: {e:?}");
    }
}
