//! StreamDO behaviour tests: the `tests.md` checklists (router stream row, streamer,
//! retention storage expectations) and edge cases of argument handling.

use super::call;
use crate::config::Config;
use crate::protocol::hop::{Args, Ctx};
use crate::store::{MemoryStore, Store, Stored};
use crate::wire::{RpcError, Value};

/// One StreamDO instance with its storage.
struct Instance {
    name: String,
    store: MemoryStore,
    config: Config,
}

impl Instance {
    fn new(name: &str) -> Self {
        Instance { name: name.into(), store: MemoryStore::new(), config: Config::default() }
    }

    fn call(&mut self, method: &str, args: Vec<Value>) -> Result<Value, RpcError> {
        let ctx = Ctx { now: 1_000, name: &self.name, config: &self.config };
        self.store.transaction(|s| call(s, &ctx, method, Args(&args)))
    }

    fn ok(&mut self, method: &str, args: Vec<Value>) -> Value {
        self.call(method, args).unwrap_or_else(|e| panic!("{method}: {e:?}"))
    }

    fn err(&mut self, method: &str, args: Vec<Value>) -> RpcError {
        self.call(method, args).expect_err(method)
    }
}

fn s(v: &str) -> Value {
    Value::str(v)
}
fn bytes(b: &[u8]) -> Value {
    Value::Bytes(b.to_vec())
}
fn range(start: f64, limit: Option<f64>) -> Value {
    let mut m = vec![("startIndex", Value::num(start))];
    if let Some(l) = limit {
        m.push(("limit", Value::num(l)));
    }
    Value::object(m)
}
fn info(tail: f64, done: bool) -> Value {
    Value::object([("tailIndex", Value::num(tail)), ("done", Value::Bool(done))])
}
fn page(chunks: Vec<Value>, done: bool, tail: f64) -> Value {
    Value::object([("chunks", Value::Array(chunks)), ("done", Value::Bool(done)), ("tailIndex", Value::num(tail))])
}

#[test]
fn writes_get_dense_indexes_and_keep_exact_bytes() {
    let mut st = Instance::new("stream:wire-stream");
    assert_eq!(st.ok("writeChunk", vec![s("r1"), bytes(b"hello ")]), Value::num(0));
    assert_eq!(st.ok("writeChunk", vec![s("r1"), bytes(&[0xF0, 0x9F])]), Value::num(1));
    assert_eq!(st.ok("getInfo", vec![]), info(1.0, false));
    assert_eq!(st.ok("closeStream", vec![s("r1")]), Value::Null);
    assert_eq!(st.ok("getInfo", vec![]), info(1.0, true));
    assert_eq!(st.ok("getChunks", vec![range(0.0, Some(3.0))]), page(vec![bytes(b"hello "), bytes(&[0xF0, 0x9F])], true, 1.0));
    let e = st.err("writeChunk", vec![s("r1"), bytes(b"late")]);
    assert_eq!(e, RpcError::error("Cannot write to a closed stream"));
    // Storage layout: meta + one payload row per chunk (no `chunk-size:` row, unlike the
    // reference), 12-digit indexes, bytes as raw bytes.
    assert_eq!(st.store.keys(), ["chunk:000000000000", "chunk:000000000001", "meta"]);
    assert_eq!(st.store.data["chunk:000000000001"], Stored::Bytes(vec![0xF0, 0x9F]));
    assert_eq!(st.store.data["meta"], r#"{"count":2,"state":"closed","ownerRunId":"r1"}"#);
}

#[test]
fn empty_chunks_close_and_unknown_streams() {
    let mut st = Instance::new("stream:e");
    assert_eq!(st.ok("getInfo", vec![]), info(-1.0, false));
    assert_eq!(st.ok("getChunks", vec![range(0.0, Some(5.0))]), page(vec![], false, -1.0));
    st.ok("closeStream", vec![s("r")]);
    st.ok("closeStream", vec![s("r")]);
    assert_eq!(st.ok("getInfo", vec![]), info(-1.0, true));
    let mut e = Instance::new("stream:empty-chunk");
    assert_eq!(e.ok("writeChunk", vec![s("r"), bytes(b"")]), Value::num(0));
    assert_eq!(e.ok("getInfo", vec![]), info(0.0, false));
    assert_eq!(e.ok("getChunks", vec![range(0.0, None)]), page(vec![bytes(b"")], false, 0.0));
}

#[test]
fn positive_and_negative_start_positions() {
    let mut st = Instance::new("stream:x");
    for w in ["zero", "one", "two"] {
        st.ok("writeChunk", vec![s("r"), bytes(w.as_bytes())]);
    }
    let from1 = st.ok("getChunks", vec![range(1.0, Some(32.0))]);
    assert_eq!(from1, page(vec![bytes(b"one"), bytes(b"two")], false, 2.0));
    // Negative start indexes are clamped to 0 by the DO (the client resolves −2 via getInfo).
    assert_eq!(st.ok("getChunks", vec![range(-5.0, None)]).get("chunks").unwrap().as_array().unwrap().len(), 3);
    // Paged reads (the client asks for limit + 1).
    assert_eq!(st.ok("getChunks", vec![range(0.0, Some(2.0))]), page(vec![bytes(b"zero"), bytes(b"one")], false, 2.0));
    assert_eq!(st.ok("getChunks", vec![range(3.0, Some(2.0))]), page(vec![], false, 2.0));
}

#[test]
fn get_chunks_argument_quirks() {
    let mut st = Instance::new("stream:q");
    for i in 0..3u8 {
        st.ok("writeChunk", vec![s("r"), bytes(&[i])]);
    }
    let limit_err = RpcError::type_error("List limit must be positive.");
    assert_eq!(st.err("getChunks", vec![Value::object([("startIndex", Value::num(1)), ("limit", Value::Null)])]), limit_err);
    assert_eq!(st.err("getChunks", vec![range(0.0, Some(0.0))]), limit_err);
    assert_eq!(st.err("getChunks", vec![range(0.0, Some(-3.0))]), limit_err);
    assert_eq!(st.err("getChunks", vec![]), RpcError::type_error("Cannot read properties of undefined (reading 'startIndex')"));
    assert_eq!(st.err("getChunks", vec![Value::Null]), RpcError::type_error("Cannot read properties of null (reading 'startIndex')"));
    let all = page(vec![bytes(&[0]), bytes(&[1]), bytes(&[2])], false, 2.0);
    // startIndex null → Math.max(0, null) = 0.
    assert_eq!(st.ok("getChunks", vec![Value::object([("startIndex", Value::Null)])]), all);
    // A non-integer start builds the key "chunk:0000000001.5" (the reference's
    // `String(n).padStart(12, "0")`), which sorts after chunk:000000000002 and before
    // chunk:000000000100: nothing of these three chunks.
    assert_eq!(st.ok("getChunks", vec![range(1.5, None)]), page(vec![], false, 2.0));
    // NaN-like starts sort after every digit: nothing.
    assert_eq!(st.ok("getChunks", vec![Value::object([("startIndex", s("abc"))])]), page(vec![], false, 2.0));
    // A numeric string start and limit are coerced like JavaScript does.
    let coerced = Value::object([("startIndex", s("1")), ("limit", s("1"))]);
    assert_eq!(st.ok("getChunks", vec![coerced]), page(vec![bytes(&[1])], false, 2.0));
    // Fractional limits truncate; huge ones are the platform's int32 range error.
    assert_eq!(st.ok("getChunks", vec![range(0.0, Some(1.9))]), page(vec![bytes(&[0])], false, 2.0));
    assert!(st.err("getChunks", vec![range(0.0, Some(1e10))]).message.starts_with("Value out of range."));
    // Huge and infinite starts are fine (nothing there).
    for start in [1e21, f64::MAX] {
        assert_eq!(st.ok("getChunks", vec![range(start, None)]), page(vec![], false, 2.0));
    }
    // A non-object argument has no members: start NaN, no limit.
    assert_eq!(st.ok("getChunks", vec![Value::num(5)]), page(vec![], false, 2.0));
}

#[test]
fn ownership_and_legacy_values() {
    let mut st = Instance::new("stream:o");
    st.ok("writeChunk", vec![s("a"), bytes(b"x")]);
    let owned = RpcError::error("Stream is owned by workflow run \"a\"");
    assert_eq!(st.err("writeChunk", vec![s("b"), bytes(b"y")]), owned);
    assert_eq!(st.err("closeStream", vec![s("b")]), owned);
    assert_eq!(st.err("expireStream", vec![s("b"), Value::num(1)]), owned);
    // Closing claims ownership too.
    let mut c = Instance::new("stream:c");
    c.ok("closeStream", vec![s("a")]);
    assert_eq!(c.err("closeStream", vec![s("b")]), owned);
    // Legacy JSON chunk values are stored and returned as given.
    let mut j = Instance::new("stream:json");
    let legacy = Value::Array(vec![Value::num(1), Value::num(2), Value::num(3)]);
    j.ok("writeChunk", vec![s("a"), legacy.clone()]);
    j.ok("writeChunk", vec![s("a"), Value::Null]);
    assert_eq!(j.ok("getChunks", vec![range(0.0, Some(5.0))]), page(vec![legacy, Value::Null], false, 1.0));
    // A missing chunk is the platform's refusal to store undefined; nothing is written.
    assert_eq!(j.err("writeChunk", vec![s("a")]), RpcError::type_error("put() called with undefined value."));
    assert_eq!(j.ok("getInfo", vec![]), info(1.0, false));
    // runIds must be strings.
    assert_eq!(j.err("writeChunk", vec![Value::num(1), bytes(b"")]), RpcError::type_error("runId must be a string"));
    assert_eq!(j.err("closeStream", vec![]), RpcError::type_error("runId must be a string"));
}

#[test]
fn expiry_fences_reads_and_writes() {
    let mut st = Instance::new("stream:ex");
    st.ok("writeChunk", vec![s("a"), bytes(b"1")]);
    st.ok("writeChunk", vec![s("a"), bytes(b"2")]);
    let done = Value::object([("deleted", Value::Bool(true)), ("chunks", Value::num(2))]);
    assert_eq!(st.ok("expireStream", vec![s("a"), Value::num(946_684_800_000.0)]), done);
    let again = Value::object([("deleted", Value::Bool(true)), ("chunks", Value::num(0))]);
    assert_eq!(st.ok("expireStream", vec![s("a"), Value::num(946_684_800_000.0)]), again);
    assert_eq!(st.store.keys(), ["meta"]);
    assert_eq!(
        st.store.data["meta"],
        r#"{"count":0,"state":"expired","ownerRunId":"a","expiredAt":946684800000,"expiredChunkCount":2,"payloadDeleted":true}"#
    );
    let expired = RpcError::error("Stream has expired");
    assert_eq!(st.err("getInfo", vec![]), expired);
    assert_eq!(st.err("getChunks", vec![range(0.0, Some(1.0))]), expired);
    // Expired before malformed: the fence is checked first.
    assert_eq!(st.err("getChunks", vec![]), expired);
    assert_eq!(st.err("writeChunk", vec![s("b"), bytes(b"")]), RpcError::error("Workflow run \"b\" has expired"));
    assert_eq!(st.err("closeStream", vec![s("a")]), RpcError::error("Workflow run \"a\" has expired"));
    // Expiring a never-written stream leaves an owned, fenced meta.
    let mut fresh = Instance::new("stream:never");
    assert_eq!(fresh.ok("expireStream", vec![s("z"), Value::num(1)]).get("chunks"), Some(&Value::num(0)));
    assert_eq!(fresh.err("getInfo", vec![]), expired);
    // Without expiredAt the reference stores `expiredAt: undefined`: deleted but not fenced.
    let mut unfenced = Instance::new("stream:u");
    unfenced.ok("writeChunk", vec![s("a"), bytes(b"1")]);
    unfenced.ok("expireStream", vec![s("a")]);
    assert_eq!(unfenced.ok("getInfo", vec![]), info(-1.0, true));
    // A null expiredAt fences.
    let mut null_fence = Instance::new("stream:n");
    null_fence.ok("expireStream", vec![s("a"), Value::Null]);
    assert_eq!(null_fence.err("getInfo", vec![]), expired);
}

#[test]
fn registry_lifecycle() {
    let mut reg = Instance::new("run-streams:wrun_a");
    assert_eq!(reg.ok("listStreams", vec![]), Value::Array(vec![]));
    for name in ["golden-out", "golden-bin", "golden/out:1 ü", "golden-out"] {
        assert_eq!(reg.ok("registerStream", vec![s("wrun_a"), s(name)]), Value::Null);
    }
    let names = Value::Array(vec![s("golden-bin"), s("golden-out"), s("golden/out:1 ü")]);
    assert_eq!(reg.ok("listStreams", vec![]), names);
    let owned = RpcError::error("Stream registry is owned by workflow run \"wrun_a\"");
    assert_eq!(reg.err("registerStream", vec![s("wrun_b"), s("x")]), owned);
    assert_eq!(reg.err("expireRegistry", vec![s("wrun_b"), Value::num(1)]), owned);
    let not_expired = RpcError::error("Stream registry for workflow run \"wrun_a\" is not expired");
    assert_eq!(reg.err("finalizeRegistry", vec![s("wrun_a")]), not_expired);
    let streams = Value::object([("streams", names.clone())]);
    assert_eq!(reg.ok("expireRegistry", vec![s("wrun_a"), Value::num(946_684_800_000.0)]), streams);
    assert_eq!(reg.ok("expireRegistry", vec![s("wrun_a"), Value::num(946_684_800_000.0)]), streams);
    assert_eq!(reg.err("listStreams", vec![]), RpcError::error("Workflow run streams have expired"));
    assert_eq!(reg.err("registerStream", vec![s("wrun_a"), s("new")]), RpcError::error("Workflow run \"wrun_a\" has expired"));
    assert_eq!(
        reg.err("finalizeRegistry", vec![s("wrun_b")]),
        RpcError::error("Stream registry for workflow run \"wrun_b\" is not expired")
    );
    reg.ok("finalizeRegistry", vec![s("wrun_a")]);
    reg.ok("finalizeRegistry", vec![s("wrun_a")]);
    // What retention leaves behind.
    assert_eq!(reg.store.keys(), ["registry:expired", "registry:owner"]);
    // A run that never wrote a stream still gets a fenced registry.
    let mut none = Instance::new("run-streams:wrun_none");
    assert_eq!(none.ok("expireRegistry", vec![s("wrun_none"), Value::num(5)]), Value::object([("streams", Value::Array(vec![]))]));
    assert_eq!(none.store.keys(), ["registry:expired", "registry:owner"]);
    // expireRegistry needs an expiredAt (the platform refuses to store undefined) and
    // leaves nothing behind when it fails.
    let mut bad = Instance::new("run-streams:wrun_bad");
    assert_eq!(bad.err("expireRegistry", vec![s("wrun_bad")]), RpcError::type_error("put() called with undefined value."));
    assert!(bad.store.keys().is_empty());
}

#[test]
fn roles_are_not_enforced() {
    let mut reg = Instance::new("run-streams:r");
    reg.ok("registerStream", vec![s("r"), s("n")]);
    assert_eq!(reg.ok("getInfo", vec![]), info(-1.0, false));
    let mut st = Instance::new("stream:n");
    st.ok("writeChunk", vec![s("r"), bytes(b"x")]);
    assert_eq!(st.ok("listStreams", vec![]), Value::Array(vec![]));
}

#[test]
fn failed_calls_leave_no_trace() {
    let mut st = Instance::new("stream:f");
    st.store.fail_with = Some("disk on fire".into());
    assert_eq!(st.err("writeChunk", vec![s("r"), bytes(b"x")]), RpcError::error("disk on fire"));
    st.store.fail_with = None;
    assert!(st.store.keys().is_empty());
    assert_eq!(st.err("nope", vec![]), RpcError::type_error("StreamDO.nope is not a function"));
}

#[test]
fn chunks_written_as_base64_text_by_earlier_versions_still_read_and_expire() {
    let mut st = Instance::new("stream:old");
    // What the previous version left in storage: two byte chunks as `b` + base64 text.
    st.store.put("chunk:000000000000", "baGk=").unwrap();
    st.store.put("chunk:000000000001", "b").unwrap();
    st.store.put("meta", r#"{"count":2,"closed":false,"ownerRunId":"r"}"#).unwrap();
    // New writes append raw bytes; a page mixes both forms.
    assert_eq!(st.ok("writeChunk", vec![s("r"), bytes(&[0, 0xFF])]), Value::num(2));
    assert_eq!(st.store.data["chunk:000000000002"], Stored::Bytes(vec![0, 0xFF]));
    assert_eq!(st.ok("getChunks", vec![range(0.0, None)]), page(vec![bytes(b"hi"), bytes(b""), bytes(&[0, 0xFF])], false, 2.0));
    assert_eq!(st.ok("getChunks", vec![range(1.0, Some(1.0))]), page(vec![bytes(b"")], false, 2.0));
    // Expiry deletes chunks of either form.
    let done = Value::object([("deleted", Value::Bool(true)), ("chunks", Value::num(3))]);
    assert_eq!(st.ok("expireStream", vec![s("r"), Value::num(1)]), done);
    assert_eq!(st.store.keys(), ["meta"]);
}

#[test]
fn large_chunks_roundtrip() {
    let mut st = Instance::new("stream:big");
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    st.ok("writeChunk", vec![s("r"), Value::Bytes(big.clone())]);
    let got = st.ok("getChunks", vec![range(0.0, None)]);
    assert_eq!(got.get("chunks"), Some(&Value::Array(vec![Value::Bytes(big)])));
}

/// 40 chunks of 2,000,000 bytes: a page stays within the response budget (3 chunks, not
/// 32 = 81 MiB), and both client read paths still see every chunk once, in order, and
/// only take the stream for finished at its real end.
#[test]
fn pages_of_large_chunks_stay_within_the_response_budget() {
    use crate::store::page::RESPONSE_BUDGET_BYTES;
    const N: usize = 40;
    const SIZE: usize = 2_000_000;
    let mut st = Instance::new("stream:big");
    let chunk = |i: usize| {
        let mut c = vec![i as u8; SIZE];
        c[SIZE - 1] = 0xA5;
        c
    };
    for i in 0..N {
        st.ok("writeChunk", vec![s("r1"), Value::Bytes(chunk(i))]);
    }
    st.ok("closeStream", vec![s("r1")]);
    // Reads without the test store's transaction snapshot (a copy of all 80 MB per call).
    let get = |st: &mut Instance, start: usize, limit: f64| {
        let ctx = Ctx { now: 1_000, name: "stream:big", config: &st.config };
        let r = call(&mut st.store, &ctx, "getChunks", Args(&[range(start as f64, Some(limit))])).unwrap();
        let json = crate::store::page::encoded_len(&r);
        assert!(json <= RESPONSE_BUDGET_BYTES + 64, "answer of {json} bytes");
        let chunks: Vec<Vec<u8>> = r
            .get("chunks")
            .and_then(Value::as_array)
            .unwrap()
            .iter()
            .map(|c| match c {
                Value::Bytes(b) => b.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        (chunks, r.get("done").and_then(Value::as_bool).unwrap())
    };
    let (first, done) = get(&mut st, 0, 32.0);
    assert_eq!((first.len(), done), (3, false));
    let r = st.ok("getChunks", vec![range(0.0, Some(32.0))]);
    let json = r.to_json().unwrap().len();
    assert!((8_000_000..=RESPONSE_BUDGET_BYTES).contains(&json), "{json}");
    // No limit at all is bounded the same way.
    let (first, done) = get(&mut st, 0, f64::from(u32::MAX >> 2));
    assert_eq!((first.len(), done), (3, false));

    // readFromStream: getChunks({startIndex: next, limit: 32}), advance by what came back,
    // end on an empty page with done.
    let mut next = 0;
    let mut pages = 0;
    loop {
        let (chunks, done) = get(&mut st, next, 32.0);
        pages += 1;
        if chunks.is_empty() {
            assert!(done);
            break;
        }
        for c in chunks {
            assert!(c == chunk(next), "chunk {next}");
            next += 1;
        }
        assert!(pages < 100);
    }
    assert_eq!(next, N);

    // getStreamChunks(limit 32): getChunks({startIndex, limit: 33}); hasMore = more than 32
    // came back. A short page says neither hasMore nor done, until the real last page.
    let mut start = 0;
    loop {
        let (chunks, done) = get(&mut st, start, 33.0);
        let has_more = chunks.len() > 32;
        assert!(!has_more);
        for (i, c) in chunks.iter().enumerate() {
            assert!(*c == chunk(start + i), "chunk {}", start + i);
        }
        start += chunks.len();
        if start == N {
            // The last page fits (one chunk): the stream is reported done.
            assert!(done);
            break;
        }
        assert!(!done, "done reported at {start} of {N}");
    }
    // Small chunks are unaffected: one page of everything, done.
    let mut small = Instance::new("stream:small");
    for i in 0..40u8 {
        small.ok("writeChunk", vec![s("r1"), bytes(&[i; 100])]);
    }
    small.ok("closeStream", vec![s("r1")]);
    let r = small.ok("getChunks", vec![range(0.0, Some(33.0))]);
    assert_eq!(r.get("chunks").and_then(Value::as_array).map(Vec::len), Some(33));
    assert_eq!(r.get("done"), Some(&Value::Bool(true)));
}

/// `registerStream(null)` answers like the reference (200, `"undefined"` registered for the
/// owner `null`) instead of a TypeError; other non-string runIds are still refused.
#[test]
fn register_stream_takes_a_null_run_id_like_the_reference() {
    let mut reg = Instance::new("run-streams:x");
    assert_eq!(reg.ok("registerStream", vec![Value::Null]), Value::Null);
    assert_eq!(reg.ok("listStreams", vec![]), Value::Array(vec![s("undefined")]));
    assert_eq!(reg.ok("registerStream", vec![Value::Null, s("out")]), Value::Null);
    assert_eq!(reg.err("registerStream", vec![s("wrun_B"), s("x")]).message, "Stream registry is owned by workflow run \"null\"");
    assert_eq!(reg.err("registerStream", vec![Value::object([("a", s("b"))])]).message, "runId must be a string");
    assert_eq!(reg.err("registerStream", vec![]).message, "put() called with undefined value.");
    assert_eq!(reg.ok("listStreams", vec![]), Value::Array(vec![s("out"), s("undefined")]));
}

// --- 0.4 (spec-0.4 stream.md) -----------------------------------------------------------

use super::chunks::{read_snapshot, Snapshot};
use super::protocol::{encode_write, ReadParams};
use super::records::{StreamFailure, StreamState};

fn params(start: u32, max_chunks: u32, max_bytes: u32, wait_ms: u32) -> ReadParams {
    ReadParams { start_index: start, max_chunks, max_bytes, wait_ms }
}

impl Instance {
    fn write(&mut self, run: &str, chunks: &[&[u8]]) -> Result<Vec<u8>, RpcError> {
        let body = encode_write(chunks);
        self.store.transaction(|s| super::write_frame(s, run, &body)).map(|a| a.to_vec())
    }
    fn read(&mut self, run: &str, p: ReadParams) -> Result<Snapshot, RpcError> {
        self.store.transaction(|s| read_snapshot(s, run, &p))
    }
}

#[test]
fn batches_append_contiguously_and_reads_are_bounded() {
    let mut st = Instance::new("stream:b");
    assert_eq!(st.write("r", &[b"\x01\x02\x03", b"\x04"]).unwrap(), super::protocol::encode_ack(0, 2).to_vec());
    assert_eq!(st.write("r", &[b"", b"xyz"]).unwrap(), super::protocol::encode_ack(2, 2).to_vec());
    let snap = st.read("r", params(1, 32, 1 << 20, 0)).unwrap();
    assert_eq!(
        snap,
        Snapshot { state: StreamState::Open, tail_index: 3, chunks: vec![b"\x04".to_vec(), vec![], b"xyz".to_vec()], error: None }
    );
    assert_eq!(st.read("r", params(0, 2, 1 << 20, 0)).unwrap().chunks.len(), 2);
    assert_eq!(st.read("r", params(0, 0, 1 << 20, 0)).unwrap().chunks.len(), 0);
    assert!(st.read("r", params(9, 32, 1 << 20, 5)).unwrap().idle(&params(9, 32, 1 << 20, 5)));
    assert!(!st.read("r", params(9, 32, 1 << 20, 0)).unwrap().idle(&params(9, 32, 1 << 20, 0)));
    // maxBytes cuts the page at the longest prefix that fits.
    let mut big = Instance::new("stream:big2");
    let mib = vec![7u8; 1 << 20];
    big.write("r", &[&mib, b"x", &mib]).unwrap();
    assert_eq!(big.read("r", params(0, 32, 1 << 20, 0)).unwrap().chunks.len(), 1);
    assert_eq!(big.read("r", params(0, 32, (1 << 20) + 1, 0)).unwrap().chunks.len(), 2);
    // Owner checks on reads and writes.
    let owned = RpcError::error("Stream is owned by workflow run \"r\"");
    assert_eq!(st.read("x", params(0, 1, 1 << 20, 0)).unwrap_err(), owned);
    assert_eq!(st.write("x", &[b"a"]).unwrap_err(), owned);
    assert_eq!(st.read("", params(0, 1, 1 << 20, 0)).unwrap_err(), RpcError::error("Stream runId is required"));
    // A bad frame is a protocol error and writes nothing.
    let e = st.store.transaction(|s| super::write_frame(s, "r", b"WCSW")).unwrap_err();
    assert_eq!(
        (e.name.as_str(), e.message.as_str()),
        ("StreamProtocolError", "world-celld: invalid stream protocol: truncated write header")
    );
    // Legacy reads see the batches.
    assert_eq!(st.ok("getInfo", vec![]), info(3.0, false));
    assert_eq!(st.ok("writeChunk", vec![s("r"), bytes(b"L")]), Value::num(4));
    assert_eq!(st.read("r", params(4, 32, 1 << 20, 0)).unwrap().chunks, vec![b"L".to_vec()]);
}

#[test]
fn first_terminal_state_wins_and_errors_reach_readers() {
    let mut st = Instance::new("stream:t");
    st.write("r", &[b"a", b"b"]).unwrap();
    st.ok("failStream", vec![s("r"), Value::object([("name", s("MyError")), ("message", s("went wrong é"))])]);
    st.ok("closeStream", vec![s("r")]);
    st.ok("failStream", vec![s("r"), s("second")]);
    let snap = st.read("r", params(0, 32, 1 << 20, 2000)).unwrap();
    assert_eq!(snap.state, StreamState::Errored);
    assert_eq!(snap.chunks.len(), 2);
    assert_eq!(snap.error, Some(StreamFailure { name: "MyError".into(), message: "went wrong é".into() }));
    assert_eq!(st.write("r", &[b"c"]).unwrap_err(), RpcError::error("Cannot write to an errored stream"));
    // 0.3 readers get the stored message.
    assert_eq!(st.err("getInfo", vec![]), RpcError::error("went wrong é"));
    assert_eq!(st.err("getChunks", vec![range(0.0, None)]), RpcError::error("went wrong é"));
    assert_eq!(st.err("writeChunk", vec![s("r"), bytes(b"x")]), RpcError::error("Cannot write to an errored stream"));
    let mut c = Instance::new("stream:c");
    st = Instance::new("stream:c2");
    c.ok("closeStream", vec![s("r")]);
    c.ok("failStream", vec![s("r"), s("late")]);
    assert_eq!(c.read("r", params(0, 0, 1 << 20, 0)).unwrap().state, StreamState::Closed);
    // A string error; odd values are stringified.
    st.ok("failStream", vec![s("r"), s("plain failure")]);
    assert_eq!(
        st.read("r", params(0, 0, 1 << 20, 0)).unwrap().error,
        Some(StreamFailure { name: "Error".into(), message: "plain failure".into() })
    );
    let n = super::chunks::normalize_failure(Some(&Value::object([("name", s(&"n".repeat(2000))), ("message", s(&"é".repeat(5000)))])));
    assert_eq!((n.name.len(), n.message.chars().count()), (1024, 4096));
    assert_eq!(super::chunks::normalize_failure(Some(&Value::num(5))).message, "5");
}

#[test]
fn legacy_data_reads_without_writing() {
    let mut st = Instance::new("stream:legacy");
    // What 0.3 left: chunks without sizes, the 0.3 meta.
    st.store.put_bytes("chunk:000000000000", b"hi").unwrap();
    st.store.put("chunk:000000000001", "j[1,2]").unwrap();
    st.store.put("meta", r#"{"count":2,"closed":true,"ownerRunId":"r"}"#).unwrap();
    let before = st.store.data.clone();
    let snap = st.read("r", params(0, 32, 1 << 20, 0)).unwrap();
    assert_eq!((snap.state, snap.tail_index), (StreamState::Closed, 1));
    assert_eq!(snap.chunks, vec![b"hi".to_vec(), b"[1,2]".to_vec()]);
    // A read writes nothing (no size backfill).
    assert_eq!(st.store.data, before);
    // An expired 0.3 stream.
    let mut ex = Instance::new("stream:legacy-ex");
    ex.store.put("meta", r#"{"count":0,"closed":true,"ownerRunId":"r","expiredAt":5}"#).unwrap();
    assert_eq!(ex.read("r", params(0, 32, 1 << 20, 0)).unwrap().state, StreamState::Expired);
    assert_eq!(ex.err("getInfo", vec![]), RpcError::error("Stream has expired"));
    // `chunk-size:` entries that earlier versions wrote (and the reference writes) are
    // ignored, even when they disagree with the payload.
    st.store.put("chunk-size:000000000000", "\"x\"").unwrap();
    st.store.put("chunk-size:000000000001", "999").unwrap();
    assert_eq!(st.read("r", params(0, 32, 1 << 20, 0)).unwrap().chunks, vec![b"hi".to_vec(), b"[1,2]".to_vec()]);
    // A chunk missing inside the count is an error, not a short page.
    st.store.delete("chunk:000000000000").unwrap();
    assert_eq!(st.read("r", params(0, 32, 1 << 20, 0)).unwrap_err(), RpcError::error("Invalid persisted stream chunk at index 0"));
    st.store.put_bytes("chunk:000000000000", b"hi").unwrap();
    st.store.delete("chunk:000000000001").unwrap();
    assert_eq!(st.read("r", params(0, 32, 1 << 20, 0)).unwrap_err(), RpcError::error("Invalid persisted stream chunk at index 1"));
}

/// A read applies `maxBytes` over the payloads it lists: the longest prefix within the
/// budget (at least one chunk), and `maxChunks`, from any start index.
#[test]
fn reads_apply_the_byte_budget_without_size_rows() {
    let mut st = Instance::new("stream:budget");
    let chunks: Vec<Vec<u8>> = (0..6u8).map(|i| vec![i; 10 + usize::from(i)]).collect();
    let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
    st.write("r", &refs).unwrap();
    assert!(st.store.keys().iter().all(|k| !k.starts_with("chunk-size:")));
    let lens = |p: ReadParams, st: &mut Instance| st.read("r", p).unwrap().chunks.iter().map(Vec::len).collect::<Vec<_>>();
    assert_eq!(lens(params(0, 32, 21, 0), &mut st), [10, 11]);
    assert_eq!(lens(params(0, 32, 20, 0), &mut st), [10]);
    assert_eq!(lens(params(0, 32, 1, 0), &mut st), [10]);
    assert_eq!(lens(params(2, 32, 27, 0), &mut st), [12, 13]);
    assert_eq!(lens(params(3, 2, 1 << 20, 0), &mut st), [13, 14]);
    assert_eq!(lens(params(5, 32, 1 << 20, 0), &mut st), [15]);
    assert_eq!(lens(params(6, 32, 1 << 20, 0), &mut st), Vec::<usize>::new());
}

#[test]
fn expiry_pages_with_options() {
    let mut st = Instance::new("stream:p");
    let chunks: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 10]).collect();
    let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
    st.write("r", &refs).unwrap();
    let opts = |limit: f64| Value::object([("limit", Value::num(limit))]);
    let r = |d: bool, c: f64, b: f64, done: bool| {
        Value::object([("deleted", Value::Bool(d)), ("chunks", Value::num(c)), ("bytes", Value::num(b)), ("done", Value::Bool(done))])
    };
    assert_eq!(st.ok("expireStream", vec![s("r"), Value::num(7), opts(2.0)]), r(true, 2.0, 20.0, false));
    // While paging: expired, no chunks, the old tail.
    let snap = st.read("r", params(0, 32, 1 << 20, 0)).unwrap();
    assert_eq!((snap.state, snap.tail_index, snap.chunks.len()), (StreamState::Expired, 4, 0));
    assert_eq!(st.ok("expireStream", vec![s("r"), Value::num(8), opts(2.0)]), r(false, 2.0, 20.0, false));
    let byte_bound = Value::object([("limit", Value::num(64)), ("byteLimit", Value::num(1))]);
    assert_eq!(st.ok("expireStream", vec![s("r"), Value::num(8), byte_bound]), r(false, 1.0, 10.0, true));
    assert_eq!(st.ok("expireStream", vec![s("r"), Value::num(8), opts(2.0)]), r(false, 0.0, 0.0, true));
    assert_eq!(st.store.keys(), ["meta"]);
    assert_eq!(
        st.store.data["meta"],
        r#"{"count":0,"state":"expired","ownerRunId":"r","expiredAt":7,"expiredChunkCount":5,"payloadDeleted":true}"#
    );
    assert_eq!(st.read("r", params(0, 32, 1 << 20, 0)).unwrap().tail_index, -1);
    assert_eq!(st.write("r", &[b"x"]).unwrap_err(), RpcError::error("Workflow run \"r\" has expired"));
    assert_eq!(st.err("expireStream", vec![s("o"), Value::num(1), opts(1.0)]), RpcError::error("Stream is owned by workflow run \"r\""));
    // 0.3-written chunks (no sizes) page like ours, by count and by their payloads' bytes.
    let mut old = Instance::new("stream:old-p");
    old.store.put_bytes("chunk:000000000000", b"ab").unwrap();
    old.store.put_bytes("chunk:000000000001", b"c").unwrap();
    old.store.put_bytes("chunk:000000000002", b"de").unwrap();
    old.store.put("meta", r#"{"count":3,"closed":false,"ownerRunId":"r"}"#).unwrap();
    assert_eq!(old.ok("expireStream", vec![s("r"), Value::num(1), opts(1.0)]), r(true, 1.0, 2.0, false));
    assert_eq!(old.ok("expireStream", vec![s("r"), Value::num(1), opts(64.0)]), r(false, 2.0, 3.0, true));
    assert_eq!(old.store.keys(), ["meta"]);
    // Chunks written with `chunk-size:` entries (earlier versions): each page deletes the
    // entries of its chunks; the last page also those left without a chunk.
    let mut sized = Instance::new("stream:sized-p");
    for i in 0..3u64 {
        sized.store.put_bytes(&format!("chunk:{i:012}"), b"xyz").unwrap();
        sized.store.put(&format!("chunk-size:{i:012}"), "3").unwrap();
    }
    sized.store.put("chunk-size:000000000007", "3").unwrap();
    sized.store.put("meta", r#"{"count":3,"state":"open","ownerRunId":"r"}"#).unwrap();
    assert_eq!(sized.ok("expireStream", vec![s("r"), Value::num(1), opts(2.0)]), r(true, 2.0, 6.0, false));
    assert_eq!(sized.store.keys(), ["chunk-size:000000000002", "chunk-size:000000000007", "chunk:000000000002", "meta"]);
    assert_eq!(sized.ok("expireStream", vec![s("r"), Value::num(1), opts(2.0)]), r(false, 1.0, 3.0, true));
    assert_eq!(sized.store.keys(), ["meta"]);
}

#[test]
fn registry_pages_with_options_and_reads_numeric_fences() {
    let mut reg = Instance::new("run-streams:w");
    for name in ["a", "b", "c"] {
        reg.ok("registerStream", vec![s("w"), s(name)]);
    }
    let limit = Value::object([("limit", Value::num(2))]);
    let names = |n: &[&str]| Value::object([("streams", Value::Array(n.iter().map(|x| s(x)).collect()))]);
    assert_eq!(reg.ok("expireRegistry", vec![s("w"), Value::num(9), limit.clone()]), names(&["a", "b"]));
    let fin = |d: f64, done: bool| Value::object([("deleted", Value::num(d)), ("done", Value::Bool(done))]);
    let list = |n: &[&str]| Value::Array(n.iter().map(|x| s(x)).collect());
    assert_eq!(reg.ok("finalizeRegistry", vec![s("w"), list(&["a", "b", "a"])]), fin(2.0, false));
    assert_eq!(reg.ok("finalizeRegistry", vec![s("w"), list(&["a"])]), fin(2.0, false));
    assert_eq!(reg.ok("expireRegistry", vec![s("w"), Value::num(10), limit]), names(&["c"]));
    assert_eq!(reg.ok("finalizeRegistry", vec![s("w"), list(&["c"])]), fin(3.0, true));
    assert_eq!(reg.store.data["registry:expired"], r#"j{"deleted":3,"expiredAt":9}"#);
    // A 0.3 numeric fence reads as {expiredAt, deleted: 0}.
    let mut old = Instance::new("run-streams:o");
    old.store.put("registry:owner", "so").unwrap();
    old.store.put("registry:expired", "j5").unwrap();
    old.store.put("stream:x", "jtrue").unwrap();
    assert_eq!(old.ok("finalizeRegistry", vec![s("o"), list(&["x"])]), fin(1.0, true));
    assert_eq!(old.store.data["registry:expired"], r#"j{"deleted":1,"expiredAt":5}"#);
}

/// The recorded 0.3 exchanges of the `streams` binding, replayed through this core.
#[test]
fn golden_streams_replay_natively() {
    let Some((failures, checked)) = crate::tests::golden::replay("streams.jsonl", "streams", call) else {
        eprintln!("golden streams.jsonl not found under {}; skipped", crate::tests::golden::golden_dir().display());
        return;
    };
    assert_eq!(checked, 65);
    assert!(failures.is_empty(), "{} failing exchanges:\n{}", failures.len(), failures.join("\n"));
}

/// The 0.3 reader's empty read of a live stream is held; listings, finished streams and
/// pages with chunks are not.
#[test]
fn legacy_reads_held_only_for_the_reader_at_a_live_end() {
    use super::chunks::{legacy_hold_ms, LEGACY_HOLD_MS};
    let args = |limit: f64| vec![Value::object([("startIndex", Value::num(3.0)), ("limit", Value::num(limit))])];
    let answer = |chunks: Vec<Value>, done: bool| {
        Value::object([("chunks", Value::Array(chunks)), ("done", Value::Bool(done)), ("tailIndex", Value::num(2.0))])
    };
    assert_eq!(legacy_hold_ms(&args(32.0), &answer(vec![], false)), LEGACY_HOLD_MS);
    assert_eq!(legacy_hold_ms(&args(33.0), &answer(vec![], false)), 0, "the client's page listing");
    assert_eq!(legacy_hold_ms(&args(32.0), &answer(vec![], true)), 0, "closed");
    assert_eq!(legacy_hold_ms(&args(32.0), &answer(vec![Value::Bytes(vec![1])], false)), 0, "chunks to send");
    assert_eq!(legacy_hold_ms(&[], &answer(vec![], false)), 0);
    assert_eq!(legacy_hold_ms(&args(32.0), &Value::Null), 0);
}
