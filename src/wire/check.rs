//! The router's body check without building the argument tree: the same verdicts as
//! [`Value::parse`](super::Value::parse) (malformed JSON, undecodable `Uint8Array` tag,
//! top-level kind) at a fraction of the cost, since the Durable Object parses the
//! forwarded text again anyway.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use super::base64;

/// What a checked document is at its top level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Array,
    Other,
}

/// One JSON value, checked: objects are inspected for a `Uint8Array` tag whose `data`
/// must be base64.
struct Check(Shape);

/// A member value that might be a tag's `__type` or `data` string.
enum Member<'a> {
    Str(Cow<'a, str>),
    Other,
}

impl<'de> Deserialize<'de> for Member<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Member<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Member::Str(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Member::Str(Cow::Owned(s.to_string())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
                Ok(Member::Str(Cow::Owned(s)))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Member::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Member::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Member::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Member::Other)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Member::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                CheckVisitor.visit_seq(seq).map(|_| Member::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                CheckVisitor.visit_map(map).map(|_| Member::Other)
            }
        }
        d.deserialize_any(V)
    }
}

struct CheckVisitor;

impl<'de> Visitor<'de> for CheckVisitor {
    type Value = Check;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Check, E> {
        Ok(Check(Shape::Other))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Check, E> {
        Ok(Check(Shape::Other))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Check, E> {
        Ok(Check(Shape::Other))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Check, E> {
        Ok(Check(Shape::Other))
    }
    fn visit_str<E>(self, _: &str) -> Result<Check, E> {
        Ok(Check(Shape::Other))
    }
    fn visit_unit<E>(self) -> Result<Check, E> {
        Ok(Check(Shape::Other))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Check, A::Error> {
        while seq.next_element::<Check>()?.is_some() {}
        Ok(Check(Shape::Array))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Check, A::Error> {
        // Duplicate keys: the last one wins, as in JSON.parse.
        let mut tag: Option<bool> = None; // Some(true) when `__type` is "Uint8Array"
        let mut data: Option<Member<'de>> = None;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "__type" => {
                    let v = map.next_value::<Member<'de>>()?;
                    tag = Some(matches!(&v, Member::Str(s) if s == "Uint8Array"));
                }
                "data" => data = Some(map.next_value::<Member<'de>>()?),
                _ => {
                    map.next_value::<Check>()?;
                }
            }
        }
        if let (Some(true), Some(Member::Str(text))) = (tag, &data) {
            if !base64::is_valid(text) {
                return Err(de::Error::custom("invalid base64 in Uint8Array tag"));
            }
        }
        Ok(Check(Shape::Other))
    }
}

impl<'de> Deserialize<'de> for Check {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Check, D::Error> {
        d.deserialize_any(CheckVisitor)
    }
}

/// Check a whole document: `None` when [`Value::parse`](super::Value::parse) would fail.
pub fn check(text: &str) -> Option<Shape> {
    let text = super::value::replace_lone_surrogates(text);
    let mut de = serde_json::Deserializer::from_str(&text);
    let shape = Check::deserialize(&mut de).ok()?.0;
    de.end().ok()?;
    Some(shape)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Value;

    /// The verdict of the full parse, for comparison.
    fn parse_shape(text: &str) -> Option<Shape> {
        match Value::parse(text) {
            Ok(Value::Array(_)) => Some(Shape::Array),
            Ok(_) => Some(Shape::Other),
            Err(_) => None,
        }
    }

    #[test]
    fn agrees_with_the_full_parse() {
        let cases = [
            "", "[", "]", "[]", "{}", "null", "1", "\"x\"", "[1,2", "[1] x", " [1] ", "[1,]",
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
            r#"["\ud800"]"#, r#"["\ud8"]"#, "[\"\\u00e9\"]", "[1e400]", "[-0]",
            r#"{"__type":"Uint8Array","data":"AQID"}"#,
        ];
        for text in cases {
            assert_eq!(check(text), parse_shape(text), "{text}");
        }
    }
}
