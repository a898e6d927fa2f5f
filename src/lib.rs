//! # world-celld-rs
//!
//! The server half of a Workflow DevKit "World", wire-compatible with the
//! `@ewhauser/world-celld` 0.3.0 client, as a Rust/wasm Cloudflare Worker with four
//! Durable Object classes.
//!
//! ## Map
//! * [`wire`] — the public HTTP protocol: tagged-JSON [`wire::Value`] codec, JavaScript
//!   date/URI rules, the router's decisions ([`wire::router`]) and the error table.
//! * [`store`] — the synchronous key/value [`store::Store`] trait every DO core runs on
//!   (one call = one transaction), and the in-memory store the native tests use.
//! * [`hop`] — the private router → DO request shape and the per-call context
//!   ([`hop::Ctx`]: one clock reading, instance name, [`config::Config`]).
//! * [`stream`], [`index`], [`run`], [`queue`] — the behaviour of `StreamDO`, `IndexDO`,
//!   `WorkflowRunDO` and `QueueDO`, as plain Rust over `Store`.
//! * `shell` (wasm only) — everything that touches `worker`/`wasm-bindgen`: the fetch
//!   entry, the four DO classes, the storage adapter over `ctx.storage.kv` inside
//!   `transactionSync`, alarms and outbound fetch.
//!
//! Only `shell` knows about wasm; `cargo test` exercises everything else natively.

pub mod config;
pub mod hop;
pub mod index;
pub mod queue;
pub mod run;
pub mod store;
pub mod stream;
pub mod wire;

#[cfg(target_arch = "wasm32")]
mod shell;

include!(concat!(env!("OUT_DIR"), "/do_bindings.rs"));
