//! # world-celld-rs
//!
//! The server half of a Workflow DevKit "World", wire-compatible with the
//! `@ewhauser/world-celld` 0.3.0 client, as a Rust/wasm Cloudflare Worker with seven
//! Durable Object classes (the four of 0.3 and the three index shards).
//!
//! ## Map
//! * [`wire`] — the public HTTP protocol: tagged-JSON [`wire::Value`] codec, JavaScript
//!   date/URI/value semantics ([`wire::js`]), the router's decisions ([`wire::router`],
//!   with the allocation-free body check [`wire::check`]) and the error table.
//! * [`store`] — the synchronous key/value [`store::Store`] trait every DO core runs on
//!   (one call = one transaction), the object's alarm as one call sees it
//!   ([`store::alarm`]), how arbitrary values are kept ([`store::slot`]), and the
//!   in-memory store the native tests use.
//! * [`protocol::hop`] — the private router → DO call (JavaScript RPC `rpc(method, name, body)`),
//!   the DO's one-pass body decode, and the per-call context ([`protocol::hop::Ctx`]: one clock
//!   reading, instance name, [`config::Config`]).
//! * [`stream`], [`index`], [`run`], [`queue`] — the behaviour of `StreamDO`, `IndexDO`,
//!   `WorkflowRunDO` and `QueueDO`, as plain Rust over `Store`. The parts that need I/O
//!   are split into storage steps and a driver generic over its host: the queue's
//!   claim → deliver → settle loop, and the run's retention cleanup
//!   ([`run::cleanup::driver`]), which native tests run against the real cores.
//! * [`protocol::shard`], [`protocol::lifecycle`], [`catalog`], [`hook_shard`], [`hook_token`], [`hook_id`] —
//!   the sharded index (`RunCatalogDO`, `HookTokenDO`, `HookIdDO`), and [`facade`], the
//!   0.3 `index` binding over it.
//! * `shell` (wasm only) — the platform adapter: the JavaScript entry (`entry.mjs`: the
//!   router's I/O and the `DurableObject` classes) and the Rust behind it (the router's
//!   exported decisions, one object per class, the storage adapter over `ctx.storage.kv`,
//!   alarms and outbound fetch).
//!
//! Only `shell` knows about wasm; `cargo test` exercises everything else natively.

pub mod catalog;
pub mod config;
pub mod coordinator;
pub mod facade;
pub mod hook_id;
pub mod hook_shard;
pub mod hook_token;
pub mod index;
pub mod protocol;
pub mod queue;
pub mod run;
pub mod store;
pub mod stream;
pub mod sweep;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod wire;

#[cfg(target_arch = "wasm32")]
mod shell;

include!(concat!(env!("OUT_DIR"), "/do_bindings.rs"));
