//! Shard routing of the 0.4 index classes (spec-0.4 `wire.md` §8): FNV-1a 32-bit over the
//! **UTF-8 bytes** of a natural key, and the frozen instance names derived from it.
//!
//! These names are persisted protocol: a run, token or hook id always lives on the same
//! instance, so the hash, the shard counts and the `v1` names must never change without a
//! migration. (The queue's shard hash is a different function, over UTF-16 code units.)
//!
//! Knows nothing of what the shards hold.

/// Number of `RunCatalogDO` shards (by runId).
pub const RUN_CATALOG_SHARDS: u32 = 16;
/// Number of `HookTokenDO` shards (by token).
pub const HOOK_TOKEN_SHARDS: u32 = 32;
/// Number of `HookIdDO` shards (by hookId).
pub const HOOK_ID_SHARDS: u32 = 32;

pub const RUN_CATALOG_PREFIX: &str = "run-catalog:v1:";
pub const HOOK_TOKEN_PREFIX: &str = "hook-token:v1:";
pub const HOOK_ID_PREFIX: &str = "hook-id:v1:";

const FNV_OFFSET: u32 = 0x811c_9dc5;
const FNV_PRIME: u32 = 0x0100_0193;

/// FNV-1a 32-bit over the UTF-8 encoding of `text`.
pub fn fnv1a32(text: &str) -> u32 {
    text.bytes().fold(FNV_OFFSET, |hash, byte| (hash ^ u32::from(byte)).wrapping_mul(FNV_PRIME))
}

/// `<prefix><hh>`: the shard number in lower-case hex, at least two digits (both shard
/// counts in use need exactly two).
fn shard_name(prefix: &str, shard: u32) -> String {
    format!("{prefix}{shard:02x}")
}

/// The catalog shard of a run: `run-catalog:v1:<hash(runId) mod 16>`.
pub fn run_catalog(run_id: &str) -> String {
    shard_name(RUN_CATALOG_PREFIX, fnv1a32(run_id) % RUN_CATALOG_SHARDS)
}

/// The token shard of a hook token: `hook-token:v1:<hash(token) mod 32>`.
pub fn hook_token(token: &str) -> String {
    shard_name(HOOK_TOKEN_PREFIX, fnv1a32(token) % HOOK_TOKEN_SHARDS)
}

/// The hook-ID shard of a hook id: `hook-id:v1:<hash(hookId) mod 32>`.
pub fn hook_id(hook_id: &str) -> String {
    shard_name(HOOK_ID_PREFIX, fnv1a32(hook_id) % HOOK_ID_SHARDS)
}

/// Every catalog shard name, in shard order (the fan-out of `runs.list`).
pub fn all_run_catalogs() -> Vec<String> {
    (0..RUN_CATALOG_SHARDS).map(|shard| shard_name(RUN_CATALOG_PREFIX, shard)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_vectors() {
        assert_eq!(fnv1a32("same"), 0xcd0c_4a3b);
        assert_eq!(fnv1a32("café/東京"), 0xb1a7_fdc8);
        assert_eq!(fnv1a32(""), 0x811c_9dc5);
        assert_eq!(run_catalog("wrun_same"), "run-catalog:v1:0e");
        assert_eq!(hook_token("token_same"), "hook-token:v1:11");
        assert_eq!(hook_id("hook_same"), "hook-id:v1:19");
    }

    #[test]
    fn catalog_fan_out_names() {
        let all = all_run_catalogs();
        assert_eq!(all.len(), 16);
        assert_eq!(all.first().map(String::as_str), Some("run-catalog:v1:00"));
        assert_eq!(all.last().map(String::as_str), Some("run-catalog:v1:0f"));
        assert!(all.contains(&run_catalog("wrun_anything")));
    }

    #[test]
    fn even_distribution() {
        let mut catalog = [0u32; 16];
        let mut tokens = [0u32; 32];
        let mut ids = [0u32; 32];
        for i in 0..4096 {
            let key = format!("key_{i}");
            catalog[(fnv1a32(&key) % RUN_CATALOG_SHARDS) as usize] += 1;
            tokens[(fnv1a32(&key) % HOOK_TOKEN_SHARDS) as usize] += 1;
            ids[(fnv1a32(&key) % HOOK_ID_SHARDS) as usize] += 1;
        }
        // 256 expected per catalog shard, 128 per hook shard: every shard within ±50 %.
        assert!(catalog.iter().all(|&n| (128..=384).contains(&n)), "{catalog:?}");
        assert!(tokens.iter().chain(ids.iter()).all(|&n| (64..=192).contains(&n)), "{tokens:?}");
        // The name format and the modulus agree.
        assert_eq!(hook_token("key_1"), format!("hook-token:v1:{:02x}", fnv1a32("key_1") % 32));
    }
}
