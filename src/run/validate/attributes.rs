//! `validateAttributeChanges` / `applyAttributeChanges` of `@workflow/world`
//! (spec `schemas.md` §8), with the exact `AttributeValidationError` messages.
//!
//! Knows no storage.

use std::collections::BTreeSet;

use crate::wire::js::{to_js_string, type_of, utf16_len};
use crate::wire::value::json_string;
use crate::wire::{Map, RpcError, Value};

pub const KEY_MAX_LENGTH: usize = 256;
pub const VALUE_MAX_BYTES: usize = 256;
pub const MAX_PER_RUN: usize = 64;

/// One requested change, as JavaScript would read `change.key` / `change.value`.
#[derive(Debug, Clone, Copy)]
pub struct Change<'a> {
    pub key: Option<&'a Value>,
    pub value: Option<&'a Value>,
    /// A `null` element: reading `change.key` throws when validation reaches it.
    pub null_element: bool,
}

/// Read a change list the way `for (const change of changes)` + `change.key` would.
/// Errors are the `TypeError`s JavaScript throws.
pub fn changes_from(changes: Option<&Value>) -> Result<Vec<Change<'_>>, RpcError> {
    let not_iterable = || RpcError::type_error("changes is not iterable");
    match changes {
        Some(Value::Array(items)) => items
            .iter()
            .map(|c| -> Result<Change<'_>, RpcError> {
                match c {
                    Value::Null => Ok(Change { key: None, value: None, null_element: true }),
                    Value::Object(m) => Ok(Change { key: m.get("key"), value: m.get("value"), null_element: false }),
                    _ => Ok(Change { key: None, value: None, null_element: false }),
                }
            })
            .collect(),
        // Strings iterate by code point; a one-character string has no `key` member.
        Some(Value::String(s)) => Ok(s.chars().map(|_| Change { key: None, value: None, null_element: false }).collect()),
        // Byte arrays iterate numbers.
        Some(Value::Bytes(b)) => Ok(b.iter().map(|_| Change { key: None, value: None, null_element: false }).collect()),
        _ => Err(not_iterable()),
    }
}

/// `Object.entries(attributes ?? {})` as changes (run creation).
pub fn changes_from_record(attributes: Option<&Value>) -> Vec<(Value, Value)> {
    match attributes {
        Some(Value::Object(m)) => crate::wire::js::own_keys(m)
            .into_iter()
            .filter_map(|k| m.get(k.as_str()).map(|v| (Value::String(k.clone()), v.clone())))
            .collect(),
        Some(Value::String(s)) => s
            .encode_utf16()
            .enumerate()
            .map(|(i, u)| (Value::String(i.to_string()), Value::String(String::from_utf16_lossy(&[u]))))
            .collect(),
        Some(Value::Array(items)) => items.iter().enumerate().map(|(i, v)| (Value::String(i.to_string()), v.clone())).collect(),
        Some(Value::Bytes(b)) => b.iter().enumerate().map(|(i, v)| (Value::String(i.to_string()), Value::num(*v))).collect(),
        _ => Vec::new(),
    }
}

fn attribute_error(message: String) -> RpcError {
    RpcError::attribute(&message)
}

/// Throw (`Err`) at the first violation, in the package's order.
pub fn validate_changes(changes: &[Change<'_>], existing_keys: Option<&BTreeSet<String>>, allow_reserved: bool) -> Result<(), RpcError> {
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let (mut adds, mut deletes) = (0usize, 0usize);
    for change in changes {
        if change.null_element {
            return Err(RpcError::type_error("Cannot read properties of null (reading 'key')"));
        }
        let key = match change.key {
            Some(Value::String(k)) => k.as_str(),
            other => return Err(attribute_error(format!("Attribute key must be a string, got {}", type_of(other)))),
        };
        if key.is_empty() {
            return Err(attribute_error("Attribute key must not be empty".into()));
        }
        let len = utf16_len(key);
        if len > KEY_MAX_LENGTH {
            let units: Vec<u16> = key.encode_utf16().take(32).collect();
            let head = String::from_utf16_lossy(&units);
            return Err(attribute_error(format!("Attribute key length {len} exceeds limit {KEY_MAX_LENGTH}: {}…", json_string(&head))));
        }
        if !allow_reserved && key.starts_with('$') {
            return Err(attribute_error(format!(
                "Attribute key {} starts with reserved prefix \"$\" — that namespace is reserved for framework/library code. Set {{ allowReservedAttributes: true }} only if your caller is framework-level.",
                json_string(key)
            )));
        }
        match change.value {
            Some(Value::Null) => {}
            Some(Value::String(v)) => {
                if v.len() > VALUE_MAX_BYTES {
                    return Err(attribute_error(format!("Attribute value byte length {} exceeds limit {VALUE_MAX_BYTES}", v.len())));
                }
            }
            other => return Err(attribute_error(format!("Attribute value must be a string or null, got {}", type_of(other)))),
        }
        if !seen.insert(key) {
            return Err(attribute_error(format!("Attribute key {} appears more than once in the same batch", json_string(key))));
        }
        let known = existing_keys.map(|e| e.contains(key));
        if matches!(change.value, Some(Value::Null)) {
            if known != Some(false) {
                deletes += 1;
            }
        } else if known != Some(true) {
            adds += 1;
        }
    }
    let existing = existing_keys.map_or(0, BTreeSet::len);
    let post = (existing + adds).saturating_sub(deletes);
    if post > MAX_PER_RUN {
        return Err(attribute_error(format!("Run attribute count would exceed limit {MAX_PER_RUN} (post-merge {post})")));
    }
    Ok(())
}

/// `allowReservedAttributes` as JavaScript reads it (truthy).
pub fn allow_reserved(v: Option<&Value>) -> bool {
    crate::wire::js::truthy(v)
}

/// Apply validated changes to a copy of `existing`.
pub fn apply_changes(existing: &Map, changes: &[Change<'_>]) -> Map {
    let mut next = existing.clone();
    for c in changes {
        let key = to_js_string(c.key);
        match c.value {
            Some(Value::Null) | None => {
                next.remove(&key);
            }
            Some(v) => {
                next.insert(key, v.clone());
            }
        }
    }
    next
}
