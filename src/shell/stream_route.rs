//! The binary stream route's wasm side (`stream_route.mjs`): the route's decisions
//! ([`crate::stream::route`]) and the StreamDO's binary methods (`writeChunks` and the
//! `readChunks` snapshot; the long-poll wait is the JavaScript class's).

use js_sys::Array;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsValue;

use super::kv::{run_sync, Writes};
use super::objects::StreamObject;
use super::serve::{fallback_reply, reply};
use crate::stream::chunks::read_snapshot;
use crate::stream::protocol::{ProtocolError, ReadParams};
use crate::stream::route::{check_frame, decide, RouteError, StreamRequest, StreamRoute};
use crate::wire::RpcError;

fn answer(e: &RouteError) -> Array {
    Array::of3(&JsValue::from_str("A"), &JsValue::from(e.status()), &JsValue::from_str(&e.body()))
}

/// The route's decision: `["A", status, body]` (answer now), `["W", name, runId]` (read the
/// body, check it with `streamFrameError`, append it), or `["R", name, runId, startIndex,
/// maxChunks, maxBytes, waitMs]` (read).
#[allow(clippy::too_many_arguments)]
#[wasm_bindgen(js_name = streamRoute)]
pub fn stream_route(
    method: &str,
    segment: &str,
    run_id: Option<String>,
    content_type: Option<String>,
    content_length: Option<String>,
    has_binding: bool,
    start_index: Option<String>,
    max_chunks: Option<String>,
    max_bytes: Option<String>,
    wait_ms: Option<String>,
) -> Array {
    let request = StreamRequest {
        method,
        segment,
        run_id: run_id.as_deref(),
        content_type: content_type.as_deref(),
        content_length: content_length.as_deref(),
        has_binding,
        query: [start_index.as_deref(), max_chunks.as_deref(), max_bytes.as_deref(), wait_ms.as_deref()],
    };
    match decide(&request) {
        Err(e) => answer(&e),
        Ok(StreamRoute::Write { name, run_id }) => Array::of3(&"W".into(), &name.into(), &run_id.into()),
        Ok(StreamRoute::Read { name, run_id, params }) => {
            let out = Array::of3(&"R".into(), &name.into(), &run_id.into());
            for n in [params.start_index, params.max_chunks, params.max_bytes, params.wait_ms] {
                out.push(&JsValue::from(n));
            }
            out
        }
    }
}

/// The answer for a write body that is not a valid batch (`["A", status, body]`), or `null`.
#[wasm_bindgen(js_name = streamFrameError)]
pub fn stream_frame_error(body: &[u8]) -> JsValue {
    check_frame(body).map_or(JsValue::NULL, |e| answer(&e).into())
}

/// The answer for a write body over the limit (counted while streaming).
#[wasm_bindgen(js_name = streamTooLarge)]
pub fn stream_too_large() -> Array {
    answer(&RouteError::PayloadTooLarge)
}

/// A DO error as the route answers it: 400 for a protocol error, else 500.
fn refusal(e: &RpcError) -> Array {
    let status = if e.name == ProtocolError::NAME { 400 } else { 500 };
    reply(status, e.body().as_bytes(), f64::NAN)
}

#[wasm_bindgen(js_class = StreamObject)]
impl StreamObject {
    /// Append a `WCSW` batch: `[200, ack]` or the error (its writes held back until it
    /// succeeds; statuses 1 and 2 as for `rpcCall`, see `serve.rs`).
    #[wasm_bindgen(js_name = writeChunks)]
    pub fn write_chunks(&self, run_id: &str, body: &[u8], direct: bool) -> Array {
        match run_sync(self.storage(), Writes::writing(direct), |store| crate::stream::write_frame(store, run_id, body)) {
            Ok(Ok(ack)) => reply(200, &ack, f64::NAN),
            Ok(Err(e)) => refusal(&e),
            Err(fallback) => fallback_reply(&fallback),
        }
    }

    /// One read snapshot (it may backfill 0.3 chunk sizes, written as for `rpcCall`):
    /// `[200, WCSR frame]`, the error, or `[0]` when `mayWait` and the stream is idle (the
    /// class waits for the next change, then calls again without `mayWait`).
    #[allow(clippy::too_many_arguments)]
    #[wasm_bindgen(js_name = readChunks)]
    pub fn read_chunks(
        &self,
        run_id: &str,
        start_index: u32,
        max_chunks: u32,
        max_bytes: u32,
        wait_ms: u32,
        timed_out: bool,
        may_wait: bool,
        direct: bool,
    ) -> Array {
        let params = ReadParams { start_index, max_chunks, max_bytes, wait_ms };
        let outcome = run_sync(self.storage(), Writes::writing(direct), |store| {
            let snapshot = read_snapshot(store, run_id, &params)?;
            if may_wait && snapshot.idle(&params) {
                return Ok(None);
            }
            snapshot.frame(&params, timed_out).map(Some)
        });
        match outcome {
            Ok(Ok(None)) => reply(0, &[], f64::NAN),
            Ok(Ok(Some(frame))) => reply(200, &frame, f64::NAN),
            Ok(Err(e)) => refusal(&e),
            Err(fallback) => fallback_reply(&fallback),
        }
    }
}
