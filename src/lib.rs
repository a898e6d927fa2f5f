//! # world-celld-rs
//!
//! The server half of a Workflow DevKit "World", wire-compatible with the
//! `@ewhauser/world-celld` 0.3.0 client, as a Rust/wasm Cloudflare Worker with seven
//! Durable Object classes (the four of 0.3 and the three index shards).
//!
//! ## Layers
//! Each module imports only from the layers below it (checked by `scripts/check-layers.mjs`
//! in CI, together with the absence of any circle of file imports):
//!
//! 0. [`wire`] — the public HTTP protocol: the tagged-JSON [`wire::Value`] codec, JavaScript
//!    number/date/URI/value semantics ([`wire::js`], [`wire::json_parse`]), the router's
//!    decisions and tables ([`wire::router`]: bindings, method whitelists, `/v1/index`
//!    operations; the allocation-free body check [`wire::check`]) and the error table.
//! 1. [`store`] — the synchronous key/value [`store::Store`] trait every DO core runs on
//!    (one call = one transaction), the object's alarm as one call sees it
//!    ([`store::alarm`]), how arbitrary values are kept ([`store::slot`]), and the stores
//!    built on it (buffered, cached, paged, in-memory); [`config`] — deployment variables.
//! 2. [`protocol`] — what one object asks another: the router → DO hop and the per-call
//!    context ([`protocol::hop`]), shard addressing ([`protocol::shard`]), the cross-object
//!    call ([`protocol::calls`]), the hook shards as callers see them
//!    ([`protocol::hooks`]), the run expiry calls ([`protocol::expiry`]), lifecycle
//!    constants and leases ([`protocol::lifecycle`], [`protocol::leases`]).
//! 3. The cores, each a state machine over `Store` that knows the others only through
//!    `protocol`: [`run`] (`WorkflowRunDO`), [`stream`] (`StreamDO`), [`queue`]
//!    (`QueueDO`), [`index`] (the 0.3 `IndexDO`, now the archive), [`catalog`]
//!    (`RunCatalogDO`), and the hook shards ([`hook_shard`], served as [`hook_token`]
//!    `HookTokenDO` and [`hook_id`] `HookIdDO`). The parts that need I/O are split into
//!    storage steps and a driver generic over its host (the queue's claim → deliver →
//!    settle loop, the run's retention cleanup [`run::cleanup::driver`], the hook shards'
//!    lifecycle checks), which native tests run against the real cores.
//! 4. The front doors: [`admin`] (the operator's `/v1/admin/…` routes), [`facade`] (the 0.3 `index` binding over the shards, and the
//!    archive migration), [`coordinator`] (the 0.4 `/v1/index/*` operations),
//!    [`partitions`] (the queue binding over a client shard's partitions) and
//!    [`sweep`] (the hourly maximum-age retention sweep).
//! 5. `shell` (wasm only) — the platform adapter: the JavaScript entry (`entry.mjs`: the
//!    router's I/O and the `DurableObject` classes) and the Rust behind it (the router's
//!    exported decisions, one object per class, the storage adapter over `ctx.storage.kv`,
//!    alarms and outbound fetch).
//!
//! Only `shell` knows about wasm; `cargo test` exercises everything else natively.

pub mod admin;
pub mod catalog;
pub mod config;
pub mod coordinator;
pub mod facade;
pub mod hook_id;
pub mod hook_shard;
pub mod hook_token;
pub mod index;
pub mod partitions;
pub mod protocol;
pub mod queue;
pub mod run;
pub mod store;
pub mod stream;
pub mod sweep;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;
pub mod wire;

#[cfg(target_arch = "wasm32")]
mod shell;

include!(concat!(env!("OUT_DIR"), "/do_bindings.rs"));
