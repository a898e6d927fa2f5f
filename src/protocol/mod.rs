//! What one object asks another, written once for both sides: the router → Durable Object
//! hop ([`hop`]: the call, its body decode, the per-call context), shard addressing
//! ([`shard`]: FNV-1a and the frozen instance names), the index shards' lifecycle constants
//! and compaction ([`lifecycle`]), and the lifecycle leases a run grants its holders
//! ([`leases`]).
//!
//! Imports only `wire`, `store` and `config`: no core, front door or shell. The cores know
//! each other only through this layer.

pub mod hop;
pub mod leases;
pub mod lifecycle;
pub mod shard;
