//! Everything that touches `worker` / `wasm-bindgen`: the Worker `fetch` entry (router
//! I/O), the four Durable Object classes, the storage adapter and environment access.

mod alarm;
mod call;
mod entry;
mod env;
mod kv;
mod objects;
mod queue_do;
mod run_do;
mod serve;
