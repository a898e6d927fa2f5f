//! StreamDO key formats (`stream-do.md` §1).
//!
//! Formats only: no storage access.

/// Chunk-role metadata record.
pub const META: &str = "meta";
/// Chunk-role payload keys: `chunk:<index zero-padded to 12 digits>`.
pub const CHUNK_PREFIX: &str = "chunk:";
/// Chunk-role size index: `chunk-size:<index zero-padded to 12 digits>` = byte length.
/// The reference writes one per chunk; ours writes none, and deletes those it finds on expiry.
pub const CHUNK_SIZE_PREFIX: &str = "chunk-size:";
/// Registry role: the run that owns the registry.
pub const REGISTRY_OWNER: &str = "registry:owner";
/// Registry role: the expiry fence `{expiredAt, deleted}` (0.3: the bare `expiredAt`).
pub const REGISTRY_EXPIRED: &str = "registry:expired";
/// Registry role: one key per registered stream name, value `true`.
pub const STREAM_PREFIX: &str = "stream:";

/// `chunk:<index padded to 12 digits>` for a chunk index we allocated.
pub fn chunk(index: u64) -> String {
    format!("{CHUNK_PREFIX}{index:012}")
}

/// `chunk-size:<index padded to 12 digits>`.
pub fn chunk_size(index: u64) -> String {
    format!("{CHUNK_SIZE_PREFIX}{index:012}")
}

/// The index of a `chunk:` or `chunk-size:` key (`None` for a key we did not write).
pub fn index_of(key: &str) -> Option<u64> {
    key.strip_prefix(CHUNK_SIZE_PREFIX).or_else(|| key.strip_prefix(CHUNK_PREFIX)).and_then(|d| d.parse().ok())
}

/// The key the reference builds for a read position: `String(n).padStart(12, "0")`, whatever
/// the number (`NaN`, `1.5`, `1e+21` included), so odd positions list what they list there.
pub fn chunk_at(position_text: &str) -> String {
    let pad = 12usize.saturating_sub(position_text.encode_utf16().count());
    format!("{CHUNK_PREFIX}{}{position_text}", "0".repeat(pad))
}

/// `stream:<name>` in a run's registry.
pub fn registered(name: &str) -> String {
    format!("{STREAM_PREFIX}{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(chunk(0), "chunk:000000000000");
        assert_eq!(chunk(42), "chunk:000000000042");
        assert_eq!(chunk(1_000_000_000_000), "chunk:1000000000000");
        assert_eq!(chunk_at("3"), "chunk:000000000003");
        assert_eq!(chunk_at("1.5"), "chunk:0000000001.5");
        assert_eq!(chunk_at("NaN"), "chunk:000000000NaN");
        assert_eq!(registered("a/b c"), "stream:a/b c");
        assert_eq!(chunk_size(3), "chunk-size:000000000003");
        assert_eq!(index_of("chunk-size:000000000003"), Some(3));
        assert_eq!(index_of("chunk:000000000012"), Some(12));
        assert_eq!(index_of("chunk:x"), None);
    }
}
