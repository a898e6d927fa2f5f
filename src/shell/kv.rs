//! The [`Store`] trait over a SQLite-backed object's synchronous KV API
//! (`ctx.storage.kv`), and each object's storage ([`ObjectStorage`]: the platform's
//! storage, its KV API, and the object's [`ReadCache`]). [`run_sync`] runs one synchronous
//! core call on it (its writes held back until it succeeds, see [`Writes`]);
//! [`in_transaction`], used between the awaits of the asynchronous paths, runs one inside
//! `ctx.storage.transactionSync`, rolled back when it returns `Err`. Neither API is wrapped
//! by the `worker` crate, so they are bound here.
//!
//! Knows no core's keys.

use std::cell::{Cell, RefCell};
use std::ops::Deref;

use js_sys::{Function, Object, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use worker::worker_sys::DurableObjectState;
use worker::{State, Storage};

use crate::store::buffered::{run_buffered, Fallback};
use crate::store::cached::{Cached, ReadCache};
use crate::store::read_only::ReadOnly;
use crate::store::{ListOptions, Store, StoreResult, Stored};
use crate::wire::RpcError;

#[wasm_bindgen]
extern "C" {
    /// `ctx.storage.kv` (SyncKvStorage).
    #[wasm_bindgen(extends = Object)]
    pub type SyncKv;
    #[wasm_bindgen(method, catch, js_name = get)]
    fn kv_get(this: &SyncKv, key: &str) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = put)]
    fn kv_put(this: &SyncKv, key: &str, value: &JsValue) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = delete)]
    fn kv_delete(this: &SyncKv, key: &str) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = list)]
    fn kv_list(this: &SyncKv, options: &Object) -> Result<JsValue, JsValue>;

    /// The raw `ctx.storage` object, for what the crate does not wrap.
    #[wasm_bindgen(extends = Object)]
    pub type RawStorage;
    #[wasm_bindgen(method, getter)]
    fn kv(this: &RawStorage) -> SyncKv;
    #[wasm_bindgen(method, catch, js_name = transactionSync)]
    fn transaction_sync(this: &RawStorage, f: &Function) -> Result<JsValue, JsValue>;
}

/// A thrown JavaScript value as an [`RpcError`] (name and message kept).
pub fn js_error(e: &JsValue) -> RpcError {
    let field = |k: &str| Reflect::get(e, &JsValue::from_str(k)).ok().and_then(|v| v.as_string());
    match (field("name"), field("message")) {
        (Some(name), Some(message)) => RpcError::custom(&name, &message),
        _ => RpcError::error(e.as_string().unwrap_or_else(|| format!("{e:?}"))),
    }
}

/// [`Store`] on `ctx.storage.kv`. Text values are stored as JavaScript strings, bytes as a
/// `Uint8Array` (which the platform stores and returns as is).
pub struct KvStore<'a> {
    kv: &'a SyncKv,
}

/// A value read back from storage: a string is text, a `Uint8Array` bytes, `undefined` (or
/// `null`) absent. We store nothing else.
fn stored(key: &str, v: JsValue) -> StoreResult<Option<Stored>> {
    if let Some(text) = v.as_string() {
        Ok(Some(Stored::Text(text)))
    } else if let Some(bytes) = v.dyn_ref::<Uint8Array>() {
        Ok(Some(Stored::Bytes(bytes.to_vec())))
    } else if v.is_undefined() || v.is_null() {
        Ok(None)
    } else {
        Err(RpcError::error(format!("unexpected stored value at {key}")))
    }
}

impl Store for KvStore<'_> {
    fn get_value(&mut self, key: &str) -> StoreResult<Option<Stored>> {
        let v = self.kv.kv_get(key).map_err(|e| js_error(&e))?;
        stored(key, v)
    }

    fn put(&mut self, key: &str, value: &str) -> StoreResult<()> {
        self.kv.kv_put(key, &JsValue::from_str(value)).map_err(|e| js_error(&e))?;
        Ok(())
    }

    fn put_bytes(&mut self, key: &str, value: &[u8]) -> StoreResult<()> {
        // `from` copies the bytes out of wasm memory into a fresh JavaScript array.
        self.kv.kv_put(key, &Uint8Array::from(value)).map_err(|e| js_error(&e))?;
        Ok(())
    }

    fn delete(&mut self, key: &str) -> StoreResult<bool> {
        let v = self.kv.kv_delete(key).map_err(|e| js_error(&e))?;
        Ok(v.as_bool().unwrap_or(false))
    }

    fn contains(&mut self, key: &str) -> StoreResult<bool> {
        // The value stays in JavaScript: no copy into wasm memory.
        let v = self.kv.kv_get(key).map_err(|e| js_error(&e))?;
        Ok(!(v.is_undefined() || v.is_null()))
    }

    fn list_values(&mut self, o: &ListOptions) -> StoreResult<Vec<(String, Stored)>> {
        let mut out = Vec::new();
        self.list_visit(o, &mut |key, value| {
            out.push((key, value));
            Ok(true)
        })?;
        Ok(out)
    }

    /// One platform listing whose entries are read as `visit` asks for them: the sync KV
    /// API's iterator is a cursor over SQLite that loads each value on `next()`, so a
    /// caller that stops early never loads the rest.
    fn list_visit(&mut self, o: &ListOptions, visit: &mut dyn FnMut(String, Stored) -> StoreResult<bool>) -> StoreResult<()> {
        for entry in self.entries(o)? {
            let entry = entry.map_err(|e| js_error(&e))?;
            let pair: js_sys::Array = entry.unchecked_into();
            let key = pair.get(0).as_string().unwrap_or_default();
            let value = stored(&key, pair.get(1))?.ok_or_else(|| RpcError::error(format!("storage list returned no value at {key}")))?;
            if !visit(key, value)? {
                break;
            }
        }
        Ok(())
    }

    /// One reverse listing of one entry; its value stays in JavaScript.
    fn last_key(&mut self, prefix: &str) -> StoreResult<Option<String>> {
        match self.entries(&ListOptions::prefix(prefix).reverse(true).limit(1))?.next() {
            Some(entry) => Ok(entry.map_err(|e| js_error(&e))?.unchecked_into::<js_sys::Array>().get(0).as_string()),
            None => Ok(None),
        }
    }
}

impl KvStore<'_> {
    /// The platform listing for `o`: an iterator of `[key, value]` pairs, each value
    /// loaded when its pair is taken.
    fn entries(&self, o: &ListOptions) -> StoreResult<js_sys::IntoIter> {
        let opts = Object::new();
        let set = |k: &str, v: JsValue| Reflect::set(&opts, &JsValue::from_str(k), &v).map(|_| ());
        let mut r = Ok(());
        for (k, v) in [("prefix", &o.prefix), ("start", &o.start), ("startAfter", &o.start_after), ("end", &o.end)] {
            if let Some(v) = v {
                r = r.and(set(k, JsValue::from_str(v)));
            }
        }
        if o.reverse {
            r = r.and(set("reverse", JsValue::TRUE));
        }
        if let Some(limit) = o.limit {
            r = r.and(set("limit", JsValue::from_f64(limit as f64)));
        }
        r.map_err(|e| js_error(&e))?;
        let iterable = self.kv.kv_list(&opts).map_err(|e| js_error(&e))?;
        js_sys::try_iter(&iterable).map_err(|e| js_error(&e))?.ok_or_else(|| RpcError::error("storage list did not return an iterable"))
    }
}

/// How a synchronous call (`rpcCall`, the binary stream methods) reaches storage. The
/// JavaScript class picks the mode (`entry.mjs`, `RustObject.rpc`):
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// A read-only method: no transaction, and a store that refuses writes
    /// ([`ReadOnly`]). A synchronous call cannot interleave with another, so a transaction
    /// would only add its cost.
    Refused,
    /// The default for writing methods: no transaction; the writes are held in memory
    /// ([`Buffered`]) and written in one burst once the call has succeeded, which the
    /// platform's implicit transaction commits all together.
    Buffered,
    /// The call again, inside the `transactionSync` the class opened, writing directly:
    /// for the rare call with a write too large to buffer ([`Fallback::Transaction`]).
    Direct,
}

impl Writes {
    /// The mode of `method`: [`Writes::Refused`] for one of the core's `read_only`
    /// methods, else [`Writes::writing`].
    pub fn of(method: &str, read_only: &[&str], direct: bool) -> Writes {
        if read_only.contains(&method) {
            Writes::Refused
        } else {
            Writes::writing(direct)
        }
    }

    /// A writing call's mode: buffered, or direct when the class asks (`direct`).
    pub fn writing(direct: bool) -> Writes {
        if direct {
            Writes::Direct
        } else {
            Writes::Buffered
        }
    }
}

/// One object's storage: the platform's [`Storage`] (what the alarm calls use, through
/// `Deref`), its synchronous KV API, read once, and the object's [`ReadCache`], which the
/// calls of [`run_sync`] and [`read_only`] read through and every other path empties
/// after its writes (see `crate::store::cached`).
pub struct ObjectStorage {
    storage: Storage,
    kv: SyncKv,
    cache: RefCell<ReadCache>,
    /// Set when a call had to run without the cache because it was in use (no path does
    /// that: calls on one object never nest; this only keeps such a bug from reading
    /// stale values). The cache is emptied before its next use.
    stale: Cell<bool>,
}

impl Deref for ObjectStorage {
    type Target = Storage;
    fn deref(&self) -> &Storage {
        &self.storage
    }
}

impl ObjectStorage {
    /// The storage of the instance whose state the platform hands the constructor.
    pub fn of(state: DurableObjectState) -> Self {
        let storage = State::from(state).storage();
        let raw: &RawStorage = storage.as_raw().unchecked_ref();
        let kv = raw.kv();
        ObjectStorage { storage, kv, cache: RefCell::new(ReadCache::new()), stale: Cell::new(false) }
    }

    fn raw(&self) -> &RawStorage {
        self.storage.as_raw().unchecked_ref()
    }

    fn kv_store(&self) -> KvStore<'_> {
        KvStore { kv: &self.kv }
    }

    /// `f` on the KV store read through the cache.
    fn cached<T>(&self, f: impl FnOnce(&mut dyn Store) -> T) -> T {
        let mut kv = self.kv_store();
        match self.cache.try_borrow_mut() {
            Ok(mut cache) => {
                if self.stale.replace(false) {
                    cache.clear();
                }
                f(&mut Cached::new(&mut kv, &mut cache))
            }
            Err(_) => {
                self.stale.set(true);
                f(&mut kv)
            }
        }
    }

    /// Forget what the cache holds: writes bypassed it.
    fn invalidate(&self) {
        match self.cache.try_borrow_mut() {
            Ok(mut cache) => cache.clear(),
            Err(_) => self.stale.set(true),
        }
    }
}

/// Run `f` on the object's storage in the given mode (see [`Writes`]): its result, or,
/// for a buffered call, what the class must do instead ([`Fallback`]: call again inside a
/// transaction, or abort the object). Reads and buffered writes go through the object's
/// cache; direct writes (inside a transaction that may roll back) bypass it and empty it.
pub fn run_sync<T>(
    storage: &ObjectStorage,
    writes: Writes,
    f: impl FnOnce(&mut dyn Store) -> Result<T, RpcError>,
) -> Result<Result<T, RpcError>, Fallback> {
    match writes {
        Writes::Refused => Ok(read_only(storage, f)),
        Writes::Direct => {
            let out = f(&mut storage.kv_store());
            storage.invalidate();
            Ok(out)
        }
        Writes::Buffered => {
            let out = storage.cached(|store| run_buffered(store, f));
            if matches!(out, Err(Fallback::Abort(_))) {
                // Some of the writes may be in storage: the object is aborted anyway.
                storage.invalidate();
            }
            out
        }
    }
}

/// Run `f` on the object's storage with no transaction, on a store that refuses writes.
pub fn read_only<T>(storage: &ObjectStorage, f: impl FnOnce(&mut dyn Store) -> Result<T, RpcError>) -> Result<T, RpcError> {
    storage.cached(|store| f(&mut ReadOnly(store)))
}

/// Run `f` over the object's storage as one synchronous transaction. `Err` rolls back
/// every write `f` made. The writes bypass the object's cache, which is emptied after.
pub fn in_transaction<T>(storage: &ObjectStorage, f: impl FnOnce(&mut dyn Store) -> Result<T, RpcError>) -> Result<T, RpcError> {
    let out = transaction(storage, f);
    storage.invalidate();
    out
}

fn transaction<T>(storage: &ObjectStorage, f: impl FnOnce(&mut dyn Store) -> Result<T, RpcError>) -> Result<T, RpcError> {
    let raw = storage.raw();
    let mut store = storage.kv_store();
    let outcome: RefCell<Option<Result<T, RpcError>>> = RefCell::new(None);
    let mut f = Some(f);
    {
        let body = || -> Result<JsValue, JsValue> {
            let Some(f) = f.take() else { return Ok(JsValue::UNDEFINED) };
            let result = f(&mut store);
            let failed = result.is_err();
            *outcome.borrow_mut() = Some(result);
            // Throwing makes transactionSync roll the transaction back.
            if failed {
                Err(JsValue::from_str("world-celld-rs: rollback"))
            } else {
                Ok(JsValue::UNDEFINED)
            }
        };
        let boxed: Box<dyn FnMut() -> Result<JsValue, JsValue> + '_> = Box::new(body);
        // SAFETY: `transactionSync` calls the function synchronously and never keeps it:
        // the closure is dropped at the end of this block, before anything it borrows
        // (`f`, `store`, `outcome`) goes out of scope, so extending its lifetime to
        // 'static for wasm-bindgen's `Closure` is never observable.
        let boxed: Box<dyn FnMut() -> Result<JsValue, JsValue> + 'static> = unsafe { std::mem::transmute(boxed) };
        let closure = Closure::wrap(boxed);
        let call = raw.transaction_sync(closure.as_ref().unchecked_ref());
        drop(closure);
        if let Err(e) = call {
            if outcome.borrow().is_none() {
                return Err(js_error(&e));
            }
        }
    }
    outcome.into_inner().unwrap_or_else(|| Err(RpcError::error("storage transaction did not run")))
}
