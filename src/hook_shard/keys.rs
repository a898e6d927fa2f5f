//! Hook shard key formats (`catalog-hooks.md` §3). The natural key is always
//! `encodeURIComponent`-escaped (0.3.0 IndexDO stored `hook:<token>` raw).
//!
//! Formats only: no storage access.

use crate::protocol::hooks::Family;
use crate::protocol::lifecycle::pad13;
use crate::wire::uri::encode_uri_component;

pub const CLAIM_PREFIX: &str = "claim:";
pub const CLAIM_DEADLINE_PREFIX: &str = "claim-deadline:";

/// `hook:<enc(token)>` / `hookid:<enc(hookId)>` — the published serialized hook.
pub fn record(family: Family, key: &str) -> String {
    format!("{}{}", family.record_prefix(), encode_uri_component(key))
}

/// `claim:<enc(K)>` — the reservation.
pub fn claim(key: &str) -> String {
    format!("{CLAIM_PREFIX}{}", encode_uri_component(key))
}

/// `claim-deadline:<pad13(expiresAt)>:<enc(K)>` — the time-ordered lease index.
pub fn deadline(expires_at: i64, key: &str) -> String {
    format!("{CLAIM_DEADLINE_PREFIX}{}:{}", pad13(expires_at), encode_uri_component(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(record(Family::Token, "tok en/1"), "hook:tok%20en%2F1");
        assert_eq!(record(Family::Id, "h:1"), "hookid:h%3A1");
        assert_eq!(claim("café"), "claim:caf%C3%A9");
        assert_eq!(deadline(42, "t"), "claim-deadline:0000000000042:t");
    }
}
