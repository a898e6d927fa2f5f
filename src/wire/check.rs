//! The router's body check without building the argument tree: the same verdicts as
//! [`Value::parse`](super::Value::parse) (malformed JSON, undecodable `Uint8Array` tag,
//! top-level kind) at a fraction of the cost, since the Durable Object parses the
//! forwarded text again anyway. It also enforces [`MAX_VALUES`] and, like the codec,
//! [`MAX_DEPTH`] levels of nesting, and reads numbers beyond a double's range as
//! `JSON.parse` does (±Infinity).
//!
//! Builds no values and knows no binding's methods.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::base64;
use super::value::MAX_DEPTH;

/// Most JSON values (of any kind, at any depth) one request body may hold. A Durable
/// Object decodes the body into a tree of values inside the isolate's 128 MB, so a 32 MiB
/// body of tiny values (`[[],[],…]`, ~11 million of them) would exhaust it; real calls
/// carry a few hundred values, and payloads travel as single base64 strings.
pub const MAX_VALUES: usize = 1_000_000;

/// The verdict on a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Decodes, and is an array at the top level.
    Array,
    /// Decodes, but is not an array.
    NotArray,
    /// Would not decode (JSON syntax, or a `Uint8Array` tag whose data is not base64).
    Malformed,
    /// More than [`MAX_VALUES`] values.
    TooManyValues,
}

/// Values still allowed, and whether the limit was hit.
struct Budget {
    left: Cell<usize>,
    exceeded: Cell<bool>,
}

impl Budget {
    fn take<E: de::Error>(&self) -> Result<(), E> {
        match self.left.get().checked_sub(1) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => {
                self.exceeded.set(true);
                Err(E::custom("too many values"))
            }
        }
    }
}

/// Checks one value (inside `depth` arrays and objects); answers whether it was an array.
#[derive(Clone, Copy)]
struct Check<'b> {
    budget: &'b Budget,
    depth: usize,
}

impl Check<'_> {
    /// Entering an array or object: counts it, refuses the level past [`MAX_DEPTH`], and
    /// gives the checker of its members.
    fn enter<E: de::Error>(self) -> Result<Self, E> {
        self.budget.take()?;
        if self.depth >= MAX_DEPTH {
            return Err(E::custom("nesting too deep"));
        }
        Ok(Check { budget: self.budget, depth: self.depth + 1 })
    }
}

/// Checks one member value, keeping it if it is a string (a tag's `__type` or `data`).
#[derive(Clone, Copy)]
struct Member<'b>(Check<'b>);

enum MemberValue<'a> {
    Str(Cow<'a, str>),
    Other,
}

impl<'de> DeserializeSeed<'de> for Check<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Check<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        self.budget.take().map(|_| false)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
        self.budget.take().map(|_| false)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
        self.budget.take().map(|_| false)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        self.budget.take().map(|_| false)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<bool, E> {
        self.budget.take().map(|_| false)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        self.budget.take().map(|_| false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        let inner = self.enter()?;
        while seq.next_element_seed(inner)?.is_some() {}
        Ok(true)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let inner = self.enter()?;
        // Duplicate keys: the last one wins, as in JSON.parse.
        let mut is_bytes_tag = false;
        let mut data: Option<MemberValue<'de>> = None;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "__type" => {
                    let v = map.next_value_seed(Member(inner))?;
                    is_bytes_tag = matches!(&v, MemberValue::Str(s) if s == "Uint8Array");
                }
                "data" => data = Some(map.next_value_seed(Member(inner))?),
                _ => {
                    map.next_value_seed(inner)?;
                }
            }
        }
        if let (true, Some(MemberValue::Str(text))) = (is_bytes_tag, &data) {
            if !base64::is_valid(text) {
                return Err(de::Error::custom("invalid base64 in Uint8Array tag"));
            }
        }
        Ok(false)
    }
}

impl<'de> DeserializeSeed<'de> for Member<'_> {
    type Value = MemberValue<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Member<'_> {
    type Value = MemberValue<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
        self.0.budget.take().map(|_| MemberValue::Str(Cow::Borrowed(s)))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        self.0.budget.take().map(|_| MemberValue::Str(Cow::Owned(s.to_string())))
    }
    fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
        self.0.budget.take().map(|_| MemberValue::Str(Cow::Owned(s)))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        self.0.budget.take().map(|_| MemberValue::Other)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        self.0.budget.take().map(|_| MemberValue::Other)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        self.0.budget.take().map(|_| MemberValue::Other)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        self.0.budget.take().map(|_| MemberValue::Other)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.0.budget.take().map(|_| MemberValue::Other)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.0.visit_seq(seq).map(|_| MemberValue::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.0.visit_map(map).map(|_| MemberValue::Other)
    }
}

/// Check a whole document.
pub fn check(text: &str) -> Verdict {
    check_with_limit(text, MAX_VALUES)
}

fn check_with_limit(text: &str, limit: usize) -> Verdict {
    let text = super::value::replace_lone_surrogates(text);
    match check_text(&text, limit) {
        // Numbers beyond a double's range are ±Infinity for `JSON.parse`, as in the codec.
        Verdict::Malformed => match super::value::mask_infinite_numbers(&text) {
            Some((masked, _)) => check_text(&masked, limit),
            None => Verdict::Malformed,
        },
        verdict => verdict,
    }
}

fn check_text(text: &str, limit: usize) -> Verdict {
    let budget = Budget { left: Cell::new(limit), exceeded: Cell::new(false) };
    let mut de = serde_json::Deserializer::from_str(text);
    // The checker bounds nesting itself ([`MAX_DEPTH`]), refusing the level past it before
    // descending.
    de.disable_recursion_limit();
    let result = Check { budget: &budget, depth: 0 }.deserialize(&mut de).and_then(|is_array| de.end().map(|_| is_array));
    match result {
        _ if budget.exceeded.get() => Verdict::TooManyValues,
        Ok(true) => Verdict::Array,
        Ok(false) => Verdict::NotArray,
        Err(_) => Verdict::Malformed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Value;

    /// The verdict of the full parse, for comparison.
    fn parse_verdict(text: &str) -> Verdict {
        match Value::parse(text) {
            Ok(Value::Array(_)) => Verdict::Array,
            Ok(_) => Verdict::NotArray,
            Err(_) => Verdict::Malformed,
        }
    }

    #[test]
    fn agrees_with_the_full_parse() {
        let cases = [
            "",
            "[",
            "]",
            "[]",
            "{}",
            "null",
            "1",
            "\"x\"",
            "[1,2",
            "[1] x",
            " [1] ",
            "[1,]",
            r#"[{"__type":"Uint8Array","data":"AQID"}]"#,
            r#"[{"__type":"Uint8Array","data":"!!"}]"#,
            r#"[{"data":"!!","__type":"Uint8Array"}]"#,
            r#"[{"__type":"Uint8Array","data":5}]"#,
            r#"[{"__type":"Uint8Array"}]"#,
            r#"[{"__type":"Date","data":"!!"}]"#,
            r#"[{"__type":"Uint8Array","data":"!!","__type":"x"}]"#,
            r#"[{"__type":"x","data":"!!","__type":"Uint8Array"}]"#,
            r#"[{"__type":"Uint8Array","data":"!!","data":"AQ=="}]"#,
            r#"[{"a":{"b":[{"__type":"Uint8Array","data":"A"}]}}]"#,
            r#"[{"a":{"b":[{"__type":"Uint8Array","data":"AQ"}]}}]"#,
            r#"[{"__type":"Uint8Array","data":" A Q = = "}]"#,
            r#"[{"__type":"Uint8Array","data":"AQ\u003d\u003d"}]"#,
            r#"[{"__type":"Uint8Array","data":{"__type":"Uint8Array","data":"!!"}}]"#,
            r#"[{"__type":"Uint8Array","data":["!!"]}]"#,
            r#"["\ud800"]"#,
            r#"["\ud8"]"#,
            "[\"\\u00e9\"]",
            "[1e400]",
            "[-1e400,\"1e400\",{\"a\":1e999}]",
            "[1e400",
            "[01e400]",
            "[1e-400]",
            "[-0]",
            r#"{"__type":"Uint8Array","data":"AQID"}"#,
        ];
        for text in cases {
            assert_eq!(check(text), parse_verdict(text), "{text}");
        }
        let big = format!("[{}]", "9".repeat(10_000));
        assert_eq!(check(&big), Verdict::Array);
        assert_eq!(parse_verdict(&big), Verdict::Array);
    }

    #[test]
    fn nesting_limit_is_exactly_max_depth() {
        let arrays = |d: usize| format!("{}{}", "[".repeat(d), "]".repeat(d));
        let objects = |d: usize| format!("[{}1{}]", r#"{"a":"#.repeat(d - 1), "}".repeat(d - 1));
        let tags = |d: usize| format!("[{}{{\"__type\":\"Uint8Array\",\"data\":\"AQ==\"}}{}]", "[".repeat(d - 2), "]".repeat(d - 2));
        for text in [arrays(128), objects(128), tags(128)] {
            assert_eq!(check(&text), Verdict::Array);
            assert_eq!(parse_verdict(&text), Verdict::Array);
        }
        for text in [arrays(129), objects(129), tags(129), arrays(1_000_000)] {
            assert_eq!(check(&text), Verdict::Malformed);
            assert_eq!(parse_verdict(&text), Verdict::Malformed);
        }
    }

    #[test]
    fn counts_every_value_at_any_depth() {
        // [ {a:1, b:[2,3]}, "x" ] holds 7 values.
        let text = r#"[{"a":1,"b":[2,3]},"x"]"#;
        assert_eq!(check_with_limit(text, 7), Verdict::Array);
        assert_eq!(check_with_limit(text, 6), Verdict::TooManyValues);
        let tag = r#"[{"__type":"Uint8Array","data":"AQID"}]"#;
        assert_eq!(check_with_limit(tag, 4), Verdict::Array);
        assert_eq!(check_with_limit(tag, 3), Verdict::TooManyValues);
        let many = format!("[{}0]", "0,".repeat(MAX_VALUES));
        assert_eq!(check(&many), Verdict::TooManyValues);
        let fits = format!("[{}0]", "0,".repeat(MAX_VALUES - 2));
        assert_eq!(check(&fits), Verdict::Array);
    }
}
