//! The cleanup record's phase, the retry backoff after a failed page (retention and
//! terminal cleanup alike) and the admin methods' argument.
//!
//! Calls no other object.

use crate::protocol::hop::Args;
use crate::run::records::Record;
use crate::wire::{RpcError, Value};

/// Retry delay cap after a failed page.
pub const MAX_RETRY_DELAY_MS: i64 = 3_600_000;

/// `min(1 h, 1000 · 2^min(attempts − 1, 12))`.
pub fn backoff(attempts: f64) -> i64 {
    let exponent = (attempts - 1.0).clamp(0.0, 12.0) as u32;
    (1000i64 << exponent).min(MAX_RETRY_DELAY_MS)
}

/// `retained` → `index` → `streams` → `queues` → `payload` → `tombstoned`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Retained,
    Index,
    Streams,
    Queues,
    Payload,
    Tombstoned,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Retained => "retained",
            Phase::Index => "index",
            Phase::Streams => "streams",
            Phase::Queues => "queues",
            Phase::Payload => "payload",
            Phase::Tombstoned => "tombstoned",
        }
    }

    pub fn parse(name: &str) -> Option<Phase> {
        [Phase::Retained, Phase::Index, Phase::Streams, Phase::Queues, Phase::Payload, Phase::Tombstoned]
            .into_iter()
            .find(|p| p.name() == name)
    }

    pub fn of(record: &Record) -> Option<Phase> {
        record.str("phase").and_then(Phase::parse)
    }
}

/// `{retentionMs, queueShards}` of `scheduleCleanup` / `cleanupNow`.
#[derive(Debug, Clone, PartialEq)]
pub struct CleanupArgs {
    /// NaN when absent or not a number (then nothing is scheduled).
    pub retention_ms: f64,
    /// As sent; `None` when absent.
    pub queue_shards: Option<Value>,
}

impl CleanupArgs {
    /// The first argument; a missing one fails as the reference's member read does.
    pub fn parse(args: Args) -> Result<CleanupArgs, RpcError> {
        let arg = match args.raw(0) {
            None => return Err(RpcError::type_error("Cannot read properties of undefined (reading 'retentionMs')")),
            Some(Value::Null) => return Err(RpcError::type_error("Cannot read properties of null (reading 'retentionMs')")),
            Some(v) => v,
        };
        Ok(CleanupArgs {
            retention_ms: arg.get("retentionMs").and_then(Value::as_f64).unwrap_or(f64::NAN),
            queue_shards: arg.get("queueShards").cloned(),
        })
    }
}
