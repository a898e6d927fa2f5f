//! `StreamDO` core ([`world_celld_rs::stream::call`]), both roles on one store, driven by
//! arbitrary call sequences. Checks after every call: no panic, every stored value decodes
//! (`meta`, chunks, registry entries), the chunk keys are exactly `0 … count-1` of `meta`
//! and no `chunk-size:` key is ever written,
//! a successful `writeChunk` returns the previous count,
//! and the reads (`getInfo`, `getChunks`, `listStreams`) agree with storage and never
//! report corrupt storage.
//!
//! Events (tags `≥ 0xE0`, `fuzz/src/lib.rs`) drive the 0.4 binary route's StreamDO steps:
//! `0xE0–0xEF` a write (`stream::write_frame`) of a `WCSW` body, generated or raw bytes;
//! `0xF0–0xFF` a read (`chunks::read_snapshot`, then its `WCSR` frame). Checks: an accepted
//! body is a valid frame, its acknowledgement names the previous count and the batch size,
//! and a read of the new chunks returns exactly the batch; a read returns the chunks from
//! `startIndex` up to `maxChunks` (none once expired), and its frame encodes.
#![no_main]

use fuzz_support::arbitrary::{Result, Unstructured};
use fuzz_support::*;
use libfuzzer_sys::fuzz_target;
use world_celld_rs::config::Config;
use world_celld_rs::protocol::hop::{Args, Ctx};
use world_celld_rs::store::{slot, MemoryStore};
use world_celld_rs::stream::chunks::{read_snapshot, Snapshot};
use world_celld_rs::stream::protocol::{self, ReadParams, MAX_READ_BYTES, MIN_READ_BYTES};
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
        assert!(sizes.is_empty(), "chunk-size keys were written: {sizes:?}");

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

impl Harness {
    fn snapshot(&mut self, run: &str, params: &ReadParams) -> std::result::Result<Snapshot, RpcError> {
        self.store.transaction(|s| read_snapshot(s, run, params))
    }

    /// A binary write: a frame of generated chunks (sometimes none), or raw bytes.
    fn binary_write(&mut self, u: &mut Unstructured) -> Result<()> {
        let run = *u.choose(RUNS)?;
        let body: Vec<u8> = if u.ratio(3, 4)? {
            let n = u.int_in_range(0..=5)?;
            let chunks =
                (0..n).map(|_| Ok(u.arbitrary::<&[u8]>()?.iter().copied().take(48).collect())).collect::<Result<Vec<Vec<u8>>>>()?;
            protocol::encode_write(&chunks.iter().map(Vec::as_slice).collect::<Vec<_>>())
        } else {
            u.arbitrary::<&[u8]>()?.iter().copied().take(256).collect()
        };
        let count = self.meta().count;
        let result = self.store.transaction(|s| stream::write_frame(s, run, &body));
        assert_not_corrupt("writeChunks", &result.as_ref().map(|_| Value::Null).map_err(Clone::clone));
        if let Ok(ack) = result {
            let ranges = protocol::decode_write(&body).expect("an accepted body is a valid frame");
            assert_eq!(ack, protocol::encode_ack(count as u32, ranges.len() as u16), "acknowledgement");
            assert_eq!(self.meta().count, count + ranges.len() as u64, "count after the write");
            let params = ReadParams { start_index: count as u32, max_chunks: 32, max_bytes: MAX_READ_BYTES, wait_ms: 0 };
            let read = self.snapshot(run, &params).expect("the writer reads its chunks");
            let written: Vec<&[u8]> = ranges.into_iter().map(|r| &body[r]).collect();
            assert_eq!(read.chunks.iter().map(Vec::as_slice).collect::<Vec<_>>(), written, "read back");
        }
        Ok(())
    }

    /// A binary read of up to `maxChunks` from `startIndex` (no waiting).
    fn binary_read(&mut self, u: &mut Unstructured) -> Result<()> {
        let run = *u.choose(RUNS)?;
        let meta = self.meta();
        let top = u32::try_from(meta.count).unwrap_or(u32::MAX).saturating_add(2);
        let params = ReadParams {
            start_index: u.int_in_range(0..=top)?,
            max_chunks: u.int_in_range(0..=protocol::MAX_READ_CHUNKS)?,
            max_bytes: *u.choose(&[MIN_READ_BYTES, MAX_READ_BYTES])?,
            wait_ms: 0,
        };
        let result = self.snapshot(run, &params);
        assert_not_corrupt("readChunks", &result.as_ref().map(|_| Value::Null).map_err(Clone::clone));
        if let Ok(snapshot) = result {
            // The fuzzer's chunks are small: the byte budget never cuts a page short.
            let want = if meta.state == StreamState::Expired {
                0
            } else {
                meta.count.saturating_sub(u64::from(params.start_index)).min(u64::from(params.max_chunks))
            };
            assert_eq!(snapshot.chunks.len() as u64, want, "chunks read from {}", params.start_index);
            assert_eq!(snapshot.tail_index, meta.tail_index(), "tail index");
            snapshot.frame(&params, false).expect("a read frame encodes");
        }
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let mut h = Harness { store: MemoryStore::new(), now: T0, config: Config::default() };
    let mut build = build;
    while let Ok(Some(op)) = next_op(&mut u, Binding::Streams, &mut build) {
        match op {
            Op::Call { method, args, .. } if !method.is_empty() => {
                let count = h.meta().count;
                let result = h.call(method, &args);
                assert_not_corrupt(method, &result);
                if let (Ok(index), "writeChunk") = (&result, method) {
                    assert_eq!(index, &Value::Number(count as f64), "writeChunk index");
                }
            }
            Op::Event(tag) => {
                let step = if tag < 0xF0 { h.binary_write(&mut u) } else { h.binary_read(&mut u) };
                if step.is_err() {
                    break;
                }
            }
            Op::Call { .. } => {}
        }
        h.now += clock_step(&mut u);
        h.check(false);
    }
    h.check(true);
});
