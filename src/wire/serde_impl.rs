//! serde support for [`Value`], so typed storage records can embed opaque payloads.
//! The stored form is the same tagged JSON as the wire.
//!
//! Knows no record type.

use serde::de::{Deserialize, Deserializer};
use serde::ser::{Error as _, Serialize, SerializeMap, SerializeSeq, Serializer};

use super::value::Value;
use super::{base64, date};

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Number(n) if n.is_finite() && *n == n.trunc() && n.abs() < 9.007_199_254_740_992e15 => s.serialize_i64(*n as i64),
            Value::Number(n) if n.is_finite() => s.serialize_f64(*n),
            Value::Number(_) => s.serialize_unit(),
            Value::String(v) => s.serialize_str(v),
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for v in items {
                    seq.serialize_element(v)?;
                }
                seq.end()
            }
            Value::Object(map) => {
                let mut m = s.serialize_map(Some(map.len()))?;
                for (k, v) in map {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
            Value::Date(ms) => {
                let iso = ms.and_then(date::to_iso).ok_or_else(|| S::Error::custom("Invalid time value"))?;
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("__type", "Date")?;
                m.serialize_entry("iso", &iso)?;
                m.end()
            }
            Value::Bytes(b) => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("__type", "Uint8Array")?;
                m.serialize_entry("data", &base64::encode(b))?;
                m.end()
            }
            Value::Json(_) => self.decoded().serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        use serde::de::DeserializeSeed;
        let infinities = super::value::Infinities::default();
        super::value::Revive { date_key: false, dates: true, depth: 0, infinities: &infinities, budget: None }.deserialize(d)
    }
}

#[cfg(test)]
mod tests {
    use super::super::value::Value;

    #[test]
    fn stored_form_roundtrips() {
        let v = Value::object([("d", Value::date(5)), ("b", Value::Bytes(vec![1])), ("n", Value::num(2.5))]);
        let text = serde_json::to_string(&v).unwrap();
        assert_eq!(text, r#"{"b":{"__type":"Uint8Array","data":"AQ=="},"d":{"__type":"Date","iso":"1970-01-01T00:00:00.005Z"},"n":2.5}"#);
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v);
    }
}
