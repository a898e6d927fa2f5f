//! Everything that touches `worker` / `wasm-bindgen`: the Worker `fetch` entry (router
//! I/O), the Durable Object classes, the 0.3 `index` facade, the storage adapter and environment access.
//!
//! The only code that knows the platform. It decides nothing a core or `wire` decides;
//! where its JavaScript decides something itself for speed, the `.mjs` file says so at that
//! place.

mod admin;
mod alarm;
mod call;
mod console;
mod courier;
mod entry;
mod env;
mod facade;
mod gate;
mod index_route;
mod kv;
mod objects;
mod partitions;
mod post;
mod queue_do;
mod run_do;
mod serve;
mod shards;
mod stream_route;
mod sweep;
