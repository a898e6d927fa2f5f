//! `list(options)` (`catalog-hooks.md` §2): one shard's ordered page of `{name, value}`.
//!
//! Knows no caller: the fan-out over the 16 shards is the facade's and the coordinator's.

use crate::protocol::hop::Args;
use crate::store::{ListOptions, Store};
use crate::wire::{js, RpcError, Value};

/// The largest page a shard returns (the coordinator asks for its limit + 1 ≤ 1001).
pub const MAX_LIST_LIMIT: usize = 1001;

/// `list({prefix?, cursor?, end?, limit?, reverse?} = {})` → `{keys:[{name,value}], list_complete, cursor?}`.
///
/// * `limit`: a finite number is floored and clamped to 1..=1001; anything else is 1001.
/// * Forward: keys under `prefix` strictly after `cursor` and strictly below `end`.
/// * Reverse: descending, strictly below `cursor ?? end` (so `end` is the starting bound,
///   ignored when a cursor is given). An empty cursor counts as none: no key sorts below
///   `""`, and the DevKit's `workflow inspect runs` sends `cursor: ""` for its first page
///   (its `--cursor` flag defaults to the empty string), which the reference answers with
///   an empty list (`docs/compatibility.md`).
/// * `list_complete` = at most `limit` keys matched; `cursor` = the last returned name
///   when not complete, omitted otherwise.
pub fn list(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let options = args.raw(0);
    // `options = {}` covers an absent argument; `null` fails on the first member read.
    let read = |name: &str| -> Result<Option<&Value>, RpcError> {
        match options {
            None => Ok(None),
            some => Ok(js::member(some, name)?.filter(|v| !v.is_null())),
        }
    };
    let limit = page_limit(read("limit")?);
    let prefix = read("prefix")?.map(|p| js::to_js_string(Some(p))).unwrap_or_default();
    let cursor = read("cursor")?.map(|c| js::to_js_string(Some(c)));
    let end = read("end")?.map(|e| js::to_js_string(Some(e)));
    let reverse = js::truthy(read("reverse")?);

    let mut query = ListOptions { limit: Some(limit + 1), reverse, ..Default::default() };
    if !prefix.is_empty() {
        query.prefix = Some(prefix);
    }
    if reverse {
        query.end = cursor.filter(|c| !c.is_empty()).or(end);
    } else {
        query.start_after = cursor;
        query.end = end;
    }
    let entries = store.list(&query)?;
    let complete = entries.len() <= limit;
    let page: Vec<(String, String)> = entries.into_iter().take(limit).collect();
    let last = if complete { None } else { page.last().map(|(name, _)| name.clone()) };
    let keys = page.into_iter().map(|(name, value)| Value::object([("name", Value::String(name)), ("value", Value::String(value))]));
    let mut result = vec![("keys", Value::Array(keys.collect())), ("list_complete", Value::Bool(complete))];
    if let Some(cursor) = last {
        result.push(("cursor", Value::String(cursor)));
    }
    Ok(Value::object(result))
}

/// `min(1001, max(1, floor(limit)))` for a finite number, else 1001.
pub fn page_limit(limit: Option<&Value>) -> usize {
    match limit {
        Some(Value::Number(n)) if n.is_finite() => {
            let n = n.floor().clamp(1.0, MAX_LIST_LIMIT as f64);
            // In 1..=1001 after the clamp.
            n as usize
        }
        _ => MAX_LIST_LIMIT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits() {
        assert_eq!(page_limit(None), 1001);
        assert_eq!(page_limit(Some(&Value::num(7.9))), 7);
        assert_eq!(page_limit(Some(&Value::num(0))), 1);
        assert_eq!(page_limit(Some(&Value::num(-3))), 1);
        assert_eq!(page_limit(Some(&Value::num(5000))), 1001);
        assert_eq!(page_limit(Some(&Value::num(f64::INFINITY))), 1001);
        assert_eq!(page_limit(Some(&Value::str("5"))), 1001);
    }
}
