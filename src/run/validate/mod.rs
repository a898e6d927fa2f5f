//! Validation equivalent to the reference's: zod schemas ([`zod`], [`schemas`]) and the
//! attribute rules ([`attributes`]). A failed schema parse becomes `RpcError::zod` with
//! zod's pretty-printed issue list.
//!
//! Knows no storage and no event's effect: only whether a value is acceptable.

pub mod attributes;
pub mod schemas;
pub mod zod;

use crate::wire::{Map, RpcError, Value};

/// Parse `value` with `schema`, returning the parsed object (stripped and coerced).
pub fn parse_object(schema: &zod::Schema, value: Map) -> Result<Map, RpcError> {
    let input = Value::Object(value);
    match schema.parse(Some(&input)) {
        Ok(Some(Value::Object(m))) => Ok(m),
        Ok(_) => Err(RpcError::error("schema produced a non-object")),
        Err(issues) => Err(RpcError::zod(&zod::render(&issues))),
    }
}

/// `compact()`: drop top-level `null` members (world-celld's shallow helper).
pub fn compact(mut m: Map) -> Map {
    m.retain(|_, v| !v.is_null());
    m
}

#[cfg(test)]
mod tests;
