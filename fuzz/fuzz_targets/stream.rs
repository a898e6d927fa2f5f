//! `StreamDO` core ([`world_celld_rs::stream::call`]), both roles on one store, driven by
//! arbitrary call sequences. Checks after every call: no panic, every stored value decodes
//! (`meta`, chunks, their sizes, registry entries), the chunk and chunk-size keys are exactly
//! `0 … count-1` of `meta`,
//! a successful `writeChunk` returns the previous count,
//! and the reads (`getInfo`, `getChunks`, `listStreams`) agree with storage and never
//! report corrupt storage.
#![no_main]

use fuzz_support::arbitrary::{Result, Unstructured};
use fuzz_support::*;
use libfuzzer_sys::fuzz_target;
use world_celld_rs::config::Config;
use world_celld_rs::hop::{Args, Ctx};
use world_celld_rs::store::{slot, MemoryStore};
use world_celld_rs::stream::{self, keys, records::StreamMeta, records::StreamState};
use world_celld_rs::wire::router::Binding;
use world_celld_rs::wire::{RpcError, Value};

const GEN: ValueGen = ValueGen {
    keys: &["startIndex", "limit", "cursor", "__type", "data", "iso"],
    strings: &["wrun_A", "wrun_B", "s1", "s2", "stream:x", "", "chunk:000000000000", "0", "1"],
};
const RUNS: &[&str] = &["wrun_A", "wrun_A", "wrun_B"];

fn build(u: &mut Unstructured, method: &'static str) -> Result<Vec<Value>> {
    let run = GEN.id_or_value(u, RUNS)?;
    Ok(match method {
        "writeChunk" => {
            let chunk =
                if u.ratio(7, 8)? { Value::Bytes(u.arbitrary::<&[u8]>()?.iter().copied().take(64).collect()) } else { GEN.value(u, 2)? };
            vec![run, chunk]
        }
        "getChunks" => {
            let range = object_with!(u, vec![("startIndex", Value::Number(GEN.number(u)?)), ("limit", Value::Number(GEN.number(u)?))])?;
            if u.ratio(7, 8)? {
                vec![range]
            } else {
                vec![GEN.value(u, 1)?]
            }
        }
        "registerStream" => vec![run, GEN.id_or_value(u, &["s1", "s2", "s3"])?],
        "expireRegistry" | "expireStream" => vec![run, Value::Number(GEN.number(u)?)],
        "getInfo" | "listStreams" => vec![],
        _ => vec![run],
    })
}

struct Harness {
    store: MemoryStore,
    now: i64,
    config: Config,
}

impl Harness {
    fn call(&mut self, method: &str, args: &[Value]) -> std::result::Result<Value, RpcError> {
        let ctx = Ctx { now: self.now, name: "stream:fuzz", config: &self.config };
        self.store.transaction(|s| stream::call(s, &ctx, method, Args(args)))
    }

    fn meta(&mut self) -> StreamMeta {
        StreamMeta::load(&mut self.store).unwrap_or_else(|e| panic!("meta does not decode: {e:?}"))
    }

    /// A read outside a transaction (reads write nothing; `last` checks that).
    fn read(&mut self, method: &str, args: &[Value]) -> std::result::Result<Value, RpcError> {
        let ctx = Ctx { now: self.now, name: "stream:fuzz", config: &self.config };
        stream::call(&mut self.store, &ctx, method, Args(args))
    }

    fn check(&mut self, last: bool) {
        if last {
            check_stored(
                &self.store,
                |key, text| {
                    if key == keys::META {
                        StreamMeta::parse(text).map(|_| ()).map_err(|e| e.message)
                    } else if key.starts_with(keys::CHUNK_SIZE_PREFIX) {
                        text.parse::<u64>().map(|_| ()).map_err(|e| e.to_string())
                    } else {
                        slot::decode(key, text).map(|_| ()).map_err(|e| e.message)
                    }
                },
                |key| key.starts_with(keys::CHUNK_PREFIX),
            );
        }
        let meta = self.meta();
        let chunks = keys_under(&self.store, keys::CHUNK_PREFIX);
        let want: Vec<String> = (0..meta.count).map(keys::chunk).collect();
        assert_eq!(chunks, want, "chunk keys are not 0..{}", meta.count);
        let sizes = keys_under(&self.store, keys::CHUNK_SIZE_PREFIX);
        let want: Vec<String> = (0..meta.count).map(keys::chunk_size).collect();
        assert_eq!(sizes, want, "chunk-size keys are not 0..{}", meta.count);

        let before = last.then(|| self.store.data.clone());
        let info = self.read("getInfo", &[]);
        assert_not_corrupt("getInfo", &info);
        if let Ok(info) = &info {
            assert_eq!(info.get("tailIndex"), Some(&Value::Number(meta.tail_index() as f64)));
            assert_eq!(info.get("done"), Some(&Value::Bool(meta.state == StreamState::Closed)));
        }
        let page = self.read("getChunks", &[Value::object([("startIndex", Value::num(0))])]);
        assert_not_corrupt("getChunks", &page);
        if let Ok(page) = &page {
            if let Some(Value::Array(got)) = page.get("chunks") {
                assert!(got.len() as u64 <= meta.count, "getChunks returned more chunks than exist");
            }
        }
        let names = self.read("listStreams", &[]);
        assert_not_corrupt("listStreams", &names);
        if let Ok(Value::Array(names)) = &names {
            let stored: Vec<Value> = keys_under(&self.store, keys::STREAM_PREFIX)
                .iter()
                .map(|k| Value::str(k.strip_prefix(keys::STREAM_PREFIX).unwrap_or(k)))
                .collect();
            assert_eq!(names, &stored, "listStreams disagrees with storage");
        }
        if let Some(before) = before {
            assert!(self.store.data == before, "a read changed storage");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let mut h = Harness { store: MemoryStore::new(), now: T0, config: Config::default() };
    let mut build = build;
    while let Ok(Some(op)) = next_op(&mut u, Binding::Streams, &mut build) {
        if let Op::Call { method, args, .. } = op {
            if !method.is_empty() {
                let count = h.meta().count;
                let result = h.call(method, &args);
                assert_not_corrupt(method, &result);
                if let (Ok(index), "writeChunk") = (&result, method) {
                    assert_eq!(index, &Value::Number(count as f64), "writeChunk index");
                }
            }
        }
        h.now += clock_step(&mut u);
        h.check(false);
    }
    h.check(true);
});
