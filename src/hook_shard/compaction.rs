//! The hook shard alarm (`catalog-hooks.md` §3): compaction of abandoned claims.
//!
//! Calls no other object.

use super::keys::{self, CLAIM_DEADLINE_PREFIX};
use super::records::{Claim, Deadline};
use crate::protocol::hooks::Family;
use crate::protocol::lifecycle::compact_due;
use crate::store::alarm::Alarm;
use crate::store::{get_json, Store};
use crate::wire::RpcError;

/// One pass over the due `claim-deadline:` entries (≤ 128): each entry is deleted, and
/// its claim too when the claim still carries the entry's claim id and has expired.
/// Re-arms per [`crate::protocol::lifecycle::compact_due`]; returns how many entries were handled.
pub fn alarm(store: &mut dyn Store, family: Family, now: i64, alarm: &mut Alarm) -> Result<usize, RpcError> {
    let due_time = match family {
        Family::Token => token_deadline_time,
        Family::Id => id_deadline_time,
    };
    compact_due(store, CLAIM_DEADLINE_PREFIX, now, alarm, due_time, |store, deadline_key, value| {
        if let Some(deadline) = Deadline::parse(family, value) {
            let claim_key = keys::claim(&deadline.key);
            let claim: Option<Claim> = get_json(store, &claim_key)?;
            if claim.is_some_and(|claim| claim.claim_id == deadline.claim_id && claim.expires_at <= now) {
                store.delete(&claim_key)?;
            }
        }
        store.delete(deadline_key)?;
        Ok(())
    })
}

fn token_deadline_time(value: &str) -> Option<i64> {
    Deadline::parse(Family::Token, value).map(|d| d.expires_at)
}

fn id_deadline_time(value: &str) -> Option<i64> {
    Deadline::parse(Family::Id, value).map(|d| d.expires_at)
}
