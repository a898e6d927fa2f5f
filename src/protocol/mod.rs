//! What one object asks another, written once for both sides:
//!
//! * [`hop`] — the router → Durable Object call, its one-pass body decode and the per-call
//!   context ([`hop::Ctx`], [`hop::Args`]) every core method receives;
//! * [`shard`] — shard addressing: FNV-1a and the frozen instance names;
//! * [`partition`] — queue partitions: which instance of a client queue shard holds a
//!   message, and each partition's share of the deployment-wide delivery limits;
//! * [`calls`] — the cross-object call: [`calls::Target`] (archive, catalog or hook shard
//!   instance) and [`calls::ShardCall`];
//! * [`hooks`] — the hook shards as callers see them: [`hooks::Family`], the owner, the
//!   release entries;
//! * [`expiry`] — the calls that expire a run in the sharded index (the 0.3 facade's
//!   `expireRun` and the run DO's retention `index` phase send the same);
//! * [`lifecycle`] — the index shards' lifecycle constants, time keys and paged compaction;
//! * [`leases`] — lifecycle leases: what a run grants ([`leases::HolderKind`], the lease
//!   lengths) and what a holder keeps ([`leases::LifecycleCache`]).
//!
//! Imports only `wire`, `store` and `config`: no core, front door or shell. The cores know
//! each other only through this layer.

pub mod calls;
pub mod expiry;
pub mod hooks;
pub mod hop;
pub mod leases;
pub mod lifecycle;
pub mod partition;
pub mod shard;
