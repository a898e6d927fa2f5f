//! QueueDO behaviour, one file per behaviour, over two harnesses: [`sim`] (one queue and a
//! scripted delivery target, the 0.3 checklist) and [`run_sim`] (the queue as the shell
//! serves it, with the lifecycle checks against a fake run DO fleet, the 0.4 additions).

mod run_sim;
mod sim;

mod claims;
mod dead_letters;
mod delivery;
mod enqueue;
mod expiry;
mod handoff;
mod hostile;
mod lifecycle_leases;

/// The clock both harnesses start at.
const T0: i64 = 1_800_000_000_000;
