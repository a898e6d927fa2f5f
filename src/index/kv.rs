//! The key/value half of the IndexDO (`index-do.md` §2): `get`, `put`, `delete`,
//! `putOwned` and the KV-style ordered `list`.
//!
//! Calls no other object.

use crate::protocol::hop::Args;
use crate::store::page::{list_budgeted, RESPONSE_BUDGET_BYTES};
use crate::store::{js_args, ListOptions, Store, StoreResult, Stored};
use crate::wire::{js, RpcError, Value};

use super::keys;
use super::records::{read, write};

/// Default page size of `list` (not clamped: any positive limit is honoured).
pub const DEFAULT_LIST_LIMIT: f64 = 1000.0;

/// `get(key)` → the stored value (typed as stored) or `null`.
pub fn get(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let key = js_args::storage_key(args.raw(0), "key")?;
    Ok(read(store, &key)?.unwrap_or(Value::Null))
}

/// `put(key, value)` → `null`; unconditional.
pub fn put(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let key = js_args::storage_key(args.raw(0), "key")?;
    write(store, &key, args.raw(1))?;
    Ok(Value::Null)
}

/// `delete(key)` → `null`; absent keys are fine.
pub fn delete(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    let key = js_args::storage_key(args.raw(0), "key")?;
    store.delete(&key)?;
    Ok(Value::Null)
}

/// `putOwned(runId, key, value)` → `{stored}`: refused once `expired:<runId>` exists, so a
/// delayed write cannot resurrect an expired run's index entries.
pub fn put_owned(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    if read(store, &keys::expired(args.raw(0)))?.is_some() {
        return Ok(stored(false));
    }
    let key = js_args::storage_key(args.raw(1), "key")?;
    write(store, &key, args.raw(2))?;
    Ok(stored(true))
}

fn stored(yes: bool) -> Value {
    Value::object([("stored", Value::Bool(yes))])
}

/// `list({prefix?, cursor?, limit?, reverse?}?)` → `{keys: [{name}], list_complete, cursor?}`.
///
/// Reproduces the reference, including its JavaScript arithmetic: it asks storage
/// for `limit + 1` keys (so a negative limit, or a string limit that concatenates to one,
/// hits the platform's `List limit must be positive.`), a `null` cursor is the string
/// `"null"` (only an absent cursor means "from the start"), and `cursor` is the last returned
/// name when the listing is not complete, omitted otherwise. One difference: an empty
/// cursor in reverse counts as none (the reference lists nothing below `""`).
pub fn list(store: &mut dyn Store, args: Args) -> Result<Value, RpcError> {
    // `options?.member`: anything but an object has none of these members.
    let options = args.raw(0).and_then(Value::as_object);
    let member = |name: &str| options.and_then(|m| m.get(name));
    let present = |name: &str| member(name).filter(|v| !v.is_null());

    let prefix = present("prefix").map(|p| js::to_js_string(Some(p))).unwrap_or_default();
    let default_limit = Value::Number(DEFAULT_LIST_LIMIT);
    let limit = present("limit").unwrap_or(&default_limit);
    let reverse = js::truthy(member("reverse"));
    let cursor = member("cursor").map(|c| js::to_js_string(Some(c)));

    let asked = js_args::to_storage_int(Some(&plus_one(limit)))?;
    let asked = usize::try_from(asked).ok().filter(|&n| n > 0).ok_or_else(RpcError::list_limit)?;
    let mut options = ListOptions { reverse, ..Default::default() };
    if !prefix.is_empty() {
        options.prefix = Some(prefix);
    }
    if reverse {
        // An empty cursor counts as none (see `crate::catalog::list`): the 0.3 client
        // passes `workflow inspect runs`' `cursor: ""` through.
        options.end = cursor.filter(|c| !c.is_empty());
    } else {
        options.start_after = cursor;
    }
    // Storage hands over values with the keys: at most RESPONSE_BUDGET_BYTES of entries
    // (keys and values) are read per call, however large the limit. A listing the budget
    // cut short is incomplete, with the cursor of its last name.
    let page = list_budgeted(store, &options, Some(asked), RESPONSE_BUDGET_BYTES, fetch_sizes, |n| *n)?;
    let entries = page.entries;

    let page_len = if page.truncated { entries.len() } else { slice_end(js::to_number(Some(limit)), entries.len()) };
    let complete = !page.truncated && (entries.len() as f64) <= js::to_number(Some(limit));
    let page: Vec<&String> = entries.iter().take(page_len).map(|(k, _)| k).collect();
    let mut result = vec![
        ("keys", Value::Array(page.iter().map(|k| Value::object([("name", Value::str(k.as_str()))])).collect())),
        ("list_complete", Value::Bool(complete)),
    ];
    if !complete {
        if let Some(last) = page.last() {
            result.push(("cursor", Value::str(last.as_str())));
        }
    }
    Ok(Value::object(result))
}

/// Keys with the size of their entry (the value is not kept).
fn fetch_sizes(key: &str, value: Stored) -> StoreResult<usize> {
    Ok(key.len() + 16 + value_bytes(&value))
}

fn value_bytes(value: &Stored) -> usize {
    match value {
        Stored::Bytes(b) => b.len(),
        Stored::Text(t) => t.len(),
    }
}

/// JavaScript `limit + 1`: numeric for numbers and booleans, string concatenation for
/// everything else (strings, and objects after `ToPrimitive`).
fn plus_one(limit: &Value) -> Value {
    match limit {
        Value::Number(n) => Value::Number(n + 1.0),
        Value::Bool(b) => Value::Number(f64::from(u8::from(*b)) + 1.0),
        other => Value::String(js::to_js_string(Some(other)) + "1"),
    }
}

/// The end index `Array.prototype.slice(0, end)` uses for an array of `len` elements.
fn slice_end(end: f64, len: usize) -> usize {
    if end.is_nan() {
        return 0;
    }
    let end = end.trunc();
    let len_f = len as f64;
    let resolved = if end < 0.0 { (len_f + end).max(0.0) } else { end.min(len_f) };
    // `resolved` is an integer in 0..=len here.
    usize::try_from(resolved as u64).unwrap_or(len).min(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn js_arithmetic_of_limits() {
        assert_eq!(plus_one(&Value::num(2)), Value::num(3));
        assert_eq!(plus_one(&Value::str("5")), Value::str("51"));
        assert_eq!(plus_one(&Value::Bool(true)), Value::num(2));
        assert_eq!(slice_end(2.0, 5), 2);
        assert_eq!(slice_end(9.0, 5), 5);
        assert_eq!(slice_end(-1.0, 5), 4);
        assert_eq!(slice_end(f64::NAN, 5), 0);
        assert_eq!(slice_end(f64::INFINITY, 5), 5);
    }
}
