//! `StreamDO` and `IndexDO`: objects whose every method is synchronous core code run in
//! one transaction. The JavaScript classes of `entry.mjs` (which extend `DurableObject`)
//! hold one of these per instance and forward `call(method, name, body)` to `rpcCall`.
//! (`WorkflowRunDO`, with its retention alarm and DO-to-DO calls, lives in `run_do.rs`;
//! `QueueDO`, which delivers over HTTP from its alarm, in `queue_do.rs`.)
//!
//! Decides nothing: the cores do.

use js_sys::Array;
use wasm_bindgen::prelude::*;
use worker::worker_sys::DurableObjectState;
use worker::Env;

use super::env::config;
use super::kv::ObjectStorage;
use super::serve::{args_or_refusal, serve_sync};
use crate::config::Config;
use crate::protocol::hop::{Args, Ctx};
use crate::store::alarm::Alarm;
use crate::store::Store;
use crate::wire::{RpcError, Value};

/// What the synchronous objects keep per instance: storage and the configuration, read
/// once.
struct Object {
    storage: ObjectStorage,
    config: Config,
}

impl Object {
    fn new(state: DurableObjectState, env: &Env) -> Self {
        Object { storage: ObjectStorage::of(state), config: config(env) }
    }
}

type SyncCore = fn(&mut dyn Store, &Ctx, &str, Args) -> Result<Value, RpcError>;

fn serve(object: &Object, core: SyncCore, read_only: &[&str], method: &str, name: &str, body: &[u8], direct: bool) -> Array {
    serve_sync(&object.storage, read_only, &object.config, method, name, body, direct, |store, ctx, _alarm: &mut Alarm, m, args| {
        core(store, ctx, m, args)
    })
}

#[wasm_bindgen(js_name = StreamObject)]
pub struct StreamObject(Object);

impl StreamObject {
    /// The instance's storage (for the binary methods of `stream_route.rs`).
    pub(super) fn storage(&self) -> &ObjectStorage {
        &self.0.storage
    }
}

#[wasm_bindgen(js_class = StreamObject)]
impl StreamObject {
    /// The methods that never write, comma-separated (see `serve.rs`).
    #[wasm_bindgen(js_name = readOnly)]
    pub fn read_only() -> String {
        crate::stream::READ_ONLY.join(",")
    }

    #[wasm_bindgen(constructor)]
    pub fn new(state: DurableObjectState, env: Env) -> StreamObject {
        StreamObject(Object::new(state, &env))
    }

    /// One RPC: `[status, body, alarm]` (see `serve.rs`).
    #[wasm_bindgen(js_name = rpcCall)]
    pub fn rpc_call(&self, method: &str, name: &str, body: &[u8], direct: bool) -> Array {
        serve(&self.0, crate::stream::call, &crate::stream::READ_ONLY, method, name, body, direct)
    }

    /// How long the class holds a successful 0.3 `getChunks` answer `reply` to the call
    /// `body` before reading again (0: answer now): [`crate::stream::chunks::legacy_hold_ms`].
    #[wasm_bindgen(js_name = legacyHoldMs)]
    pub fn legacy_hold_ms(body: &[u8], reply: &[u8]) -> u32 {
        let (Ok(args), Ok(answer)) = (args_or_refusal(body), Value::parse(&String::from_utf8_lossy(reply))) else { return 0 };
        crate::stream::chunks::legacy_hold_ms(&args, &answer)
    }
}

#[wasm_bindgen(js_name = IndexObject)]
pub struct IndexObject(Object);

#[wasm_bindgen(js_class = IndexObject)]
impl IndexObject {
    /// The methods that never write, comma-separated (see `serve.rs`).
    #[wasm_bindgen(js_name = readOnly)]
    pub fn read_only() -> String {
        crate::index::READ_ONLY.join(",")
    }

    #[wasm_bindgen(constructor)]
    pub fn new(state: DurableObjectState, env: Env) -> IndexObject {
        IndexObject(Object::new(state, &env))
    }

    /// One RPC: `[status, body, alarm]` (see `serve.rs`).
    #[wasm_bindgen(js_name = rpcCall)]
    pub fn rpc_call(&self, method: &str, name: &str, body: &[u8], direct: bool) -> Array {
        serve(&self.0, crate::index::call, &crate::index::READ_ONLY, method, name, body, direct)
    }
}
