//! The 0.3 `index.list` over the run catalog: which listings fan out to the 16 catalog
//! shards, what each shard is asked, and the merge of their pages back into one 0.3 page.
//!
//! The 0.3 contract (`spec/index-do.md` §2) is kept where a client can see it:
//! * `limit` default 1000 with JavaScript's arithmetic: the storage read is `limit + 1`
//!   (so a limit that makes it ≤ 0 is `TypeError: List limit must be positive.`), the
//!   page is `slice(0, limit)`;
//! * a `null` cursor is the string `"null"` (only an absent cursor means "from the start");
//! * `keys` carries names only, `cursor` is the last returned name and is omitted when the
//!   listing is complete.
//!
//! One difference: a merged page holds at most 1000 names (a shard returns at most
//! 1001), so a larger limit is served 1000 at a time — the page then reports
//! `list_complete: false` with a cursor, and paging continues gap-free. The 0.3 client
//! never asks for more than 1000.
//!
//! Makes no call and knows no shard's storage.

use crate::protocol::shard;
use crate::store::js_args::to_storage_int;
use crate::wire::{js, RpcError, Value};

use crate::protocol::calls::Target;

/// 0.3 default page size.
pub const DEFAULT_LIMIT: f64 = 1000.0;
/// Largest merged page (each shard returns at most `MAX_MERGED + 1` names).
pub const MAX_MERGED: usize = 1000;

/// The key families the run catalog holds for the facade (the 0.3 `correlation:` keys too).
pub const CATALOG_FAMILIES: [&str; 3] = ["run:", "runall:", "correlation:"];

/// Prefixes whose keys live in the run catalog alone.
pub fn is_catalog_prefix(prefix: &str) -> bool {
    CATALOG_FAMILIES.iter().any(|f| prefix.starts_with(f))
}

/// The catalog families a prefix shorter than a family covers: all three for `""`, `run:`/`runall:` for `r`…`run`, `correlation:` for `c`…`correlation`;
/// empty for a prefix that names no family.
pub fn covered_families(prefix: &str) -> Vec<&'static str> {
    CATALOG_FAMILIES.iter().copied().filter(|f| f.starts_with(prefix) && *f != prefix).collect()
}

/// A listing served by merging shard pages.
#[derive(Debug, Clone, PartialEq)]
pub struct MergedList {
    /// Where to send `list(options)`, all in parallel: the 16 catalog shards, and the
    /// archive too while legacy entries may remain there.
    pub sources: Vec<Target>,
    /// The one argument of every source's `list`.
    pub options: Value,
    /// Further `list` calls with their own argument: for a prefix shorter than a catalog
    /// family (`""`, `r`, …), each covered family on every shard.
    pub extra: Vec<(Target, Value)>,
    /// Names in the merged page, at most.
    pub limit: usize,
    pub reverse: bool,
    /// Entries keep their `value` (the 0.4 `/v1/index/runs/list` page); the 0.3 page
    /// carries names only.
    pub with_values: bool,
}

/// Where a 0.3 `list` goes.
#[derive(Debug, Clone, PartialEq)]
pub enum ListRoute {
    /// A `run:`/`runall:` prefix: merge shard pages.
    Merged(MergedList),
    /// Any other prefix (including none): the archive alone, unchanged.
    Archive,
}

/// Decide a 0.3 `list(options?)`. `with_archive` adds the archive as a source (read-through
/// until the one-time migration has moved every run key into the catalog).
pub fn plan(options: Option<&Value>, with_archive: bool) -> Result<ListRoute, RpcError> {
    // `options?.member`: anything but an object has none of these members.
    let options = options.and_then(Value::as_object);
    let member = |name: &str| options.and_then(|m| m.get(name));
    let present = |name: &str| member(name).filter(|v| !v.is_null());

    let prefix = present("prefix").map(|p| js::to_js_string(Some(p))).unwrap_or_default();
    // A prefix shorter than a family (`""`, `r`, `ru`, …) spans catalog families and the
    // archive's other keys: the archive with the prefix, plus each covered family on every
    // shard. (Hook records, on the hook shards, are not listed: no client lists them.)
    let covered = covered_families(&prefix);
    if !is_catalog_prefix(&prefix) && covered.is_empty() {
        return Ok(ListRoute::Archive);
    }
    let default_limit = Value::Number(DEFAULT_LIMIT);
    let limit = present("limit").unwrap_or(&default_limit);
    let asked = to_storage_int(Some(&plus_one(limit)))?;
    let asked = usize::try_from(asked).ok().filter(|&n| n > 0).ok_or_else(RpcError::list_limit)?;
    let merged = page_len(js::to_number(Some(limit)), asked).min(MAX_MERGED);
    let reverse = js::truthy(member("reverse"));

    let mut shard_options =
        vec![("prefix", Value::String(prefix)), ("limit", Value::num(merged as f64 + 1.0)), ("reverse", Value::Bool(reverse))];
    // A present cursor, `null` included, is a bound (`String(null)` is "null").
    if let Some(cursor) = member("cursor") {
        shard_options.push(("cursor", Value::String(js::to_js_string(Some(cursor)))));
    }
    let options = Value::object(shard_options);
    if !covered.is_empty() {
        let extra = covered
            .iter()
            .flat_map(|family| {
                let mut family_options = options.clone();
                if let Value::Object(members) = &mut family_options {
                    members.insert("prefix".into(), Value::str(*family));
                }
                shard::all_run_catalogs().into_iter().map(move |name| (Target::Catalog(name), family_options.clone()))
            })
            .collect();
        return Ok(ListRoute::Merged(MergedList {
            sources: vec![Target::Archive],
            options,
            extra,
            limit: merged,
            reverse,
            with_values: false,
        }));
    }
    let mut sources: Vec<Target> = shard::all_run_catalogs().into_iter().map(Target::Catalog).collect();
    if with_archive {
        sources.push(Target::Archive);
    }
    Ok(ListRoute::Merged(MergedList { sources, options, extra: Vec::new(), limit: merged, reverse, with_values: false }))
}

/// The same fan-out for the 0.4 coordinator's `/v1/index/runs/list` (`catalog-hooks.md`
/// §4): `limit` = floor of a finite `options.limit` clamped to 1..=1000 (default 1000);
/// every shard gets the caller's options with `limit + 1`; entries keep their values.
pub fn plan_runs_list(options: Option<&Value>) -> MergedList {
    let mut shard_options = options.and_then(Value::as_object).cloned().unwrap_or_default();
    let limit = match shard_options.get("limit") {
        Some(Value::Number(n)) if n.is_finite() => n.floor().clamp(1.0, MAX_MERGED as f64),
        _ => MAX_MERGED as f64,
    };
    shard_options.insert("limit".into(), Value::num(limit + 1.0));
    let reverse = js::truthy(shard_options.get("reverse"));
    MergedList {
        sources: shard::all_run_catalogs().into_iter().map(Target::Catalog).collect(),
        options: Value::Object(shard_options),
        extra: Vec::new(),
        // In 1..=1000 after the clamp.
        limit: limit as usize,
        reverse,
        with_values: true,
    }
}

/// Merge the sources' pages (in any order) into the 0.3 page: names sorted by UTF-8
/// bytes (descending when `reverse`), duplicates dropped, the first `limit` kept;
/// complete when every source was complete and no more than `limit` names remained.
pub fn merge(plan: &MergedList, pages: &[Value]) -> Result<Value, RpcError> {
    let mut entries: Vec<(String, Option<Value>)> = Vec::new();
    let mut every_complete = true;
    for page in pages {
        let keys = page.get("keys").and_then(Value::as_array).ok_or_else(malformed)?;
        for entry in keys {
            let name = entry.get("name").and_then(Value::as_str).ok_or_else(malformed)?.to_string();
            entries.push((name, entry.get("value").cloned()));
        }
        every_complete &= page.get("list_complete").and_then(Value::as_bool).ok_or_else(malformed)?;
    }
    // Rust orders strings by their UTF-8 bytes: the storage order.
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries.dedup_by(|a, b| a.0 == b.0);
    if plan.reverse {
        entries.reverse();
    }
    let complete = every_complete && entries.len() <= plan.limit;
    entries.truncate(plan.limit);
    let cursor = if complete { None } else { entries.last().map(|(name, _)| name.clone()) };
    let keys = entries
        .into_iter()
        .map(|(name, value)| {
            let mut members = vec![("name", Value::String(name))];
            if plan.with_values {
                members.push(("value", value.unwrap_or(Value::Null)));
            }
            Value::object(members)
        })
        .collect();
    let mut result = vec![("keys", Value::Array(keys)), ("list_complete", Value::Bool(complete))];
    if let Some(cursor) = cursor {
        result.push(("cursor", Value::String(cursor)));
    }
    Ok(Value::object(result))
}

fn malformed() -> RpcError {
    RpcError::error("malformed run catalog page")
}

/// JavaScript `limit + 1`: numeric for numbers and booleans, string concatenation for
/// everything else.
fn plus_one(limit: &Value) -> Value {
    match limit {
        Value::Number(n) => Value::Number(n + 1.0),
        Value::Bool(b) => Value::Number(f64::from(u8::from(*b)) + 1.0),
        other => Value::String(js::to_js_string(Some(other)) + "1"),
    }
}

/// `slice(0, limit).length` of a read of `read` names (JavaScript's slice end rules).
fn page_len(limit: f64, read: usize) -> usize {
    if limit.is_nan() {
        return 0;
    }
    let end = limit.trunc();
    let read_f = read as f64;
    let resolved = if end < 0.0 { (read_f + end).max(0.0) } else { end.min(read_f) };
    // An integer in 0..=read here.
    usize::try_from(resolved as u64).unwrap_or(read).min(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn javascript_limits() {
        assert_eq!(page_len(2.0, 3), 2);
        assert_eq!(page_len(2.5, 3), 2);
        assert_eq!(page_len(5.0, 51), 5);
        assert_eq!(page_len(f64::NAN, 3), 0);
        assert_eq!(plus_one(&Value::str("5")), Value::str("51"));
        assert_eq!(plus_one(&Value::Bool(true)), Value::num(2));
    }
}
