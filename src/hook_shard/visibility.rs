//! Which methods of a hook shard ask the owner's run DO first, and which run lifecycle
//! statuses then let a hook be read or published ([`Visibility`]): the reference's rule
//! for `get` and `finalize`/`publish`, the 0.3 facade's for `legacyGet`/`legacyPublish`.
//!
//! Makes no call: [`super::driver`] asks the run DO.

use crate::protocol::hooks::{Family, LEGACY_GET, LEGACY_PUBLISH};
use crate::wire::Value;

/// The lifecycle status that means "active".
pub const ACTIVE: &str = "active";

/// Which run lifecycle statuses let a hook be read and published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// The reference's rule (`get`, `finalize`/`publish`): `"active"` only.
    Active,
    /// The 0.3 facade's (`legacyGet`, `legacyPublish`): anything but `"terminal"` and
    /// `"expired"`. The 0.3 IndexDO checked no lifecycle, and its contract (and golden
    /// recordings) include hooks indexed for a run the run DO does not hold (`"missing"`);
    /// an ended run still hides its hooks.
    NotEnded,
}

/// Whether a lifecycle status lets a hook be read and published under `visibility`.
pub(super) fn visible(status: &Value, visibility: Visibility) -> bool {
    match visibility {
        Visibility::Active => status.as_str() == Some(ACTIVE),
        Visibility::NotEnded => !matches!(status.as_str(), Some("terminal" | "expired")),
    }
}

/// The read method (`get` or `legacyGet`) with its visibility rule, `None` for any other.
pub fn read_visibility(method: &str) -> Option<Visibility> {
    match method {
        "get" => Some(Visibility::Active),
        LEGACY_GET => Some(Visibility::NotEnded),
        _ => None,
    }
}

/// The visibility rule of a publication method (`legacyPublish`: the 0.3 facade's; the
/// reference's `finalize`/`publish`: active only), `None` for any other method.
pub fn publication_visibility(family: Family, method: &str) -> Option<Visibility> {
    if method == LEGACY_PUBLISH {
        Some(Visibility::NotEnded)
    } else if method == family.publish_method() {
        Some(Visibility::Active)
    } else {
        None
    }
}

/// Is `method` one of the lifecycle-checked methods (which need [`super::driver::call`] and a host)?
pub fn is_lifecycle_checked(family: Family, method: &str) -> bool {
    read_visibility(method).is_some() || publication_visibility(family, method).is_some()
}
