//! Packed records: how a JSON record too large for a stored string is kept.
//!
//! Records are JSON text (tagged form, so byte payloads are base64, 4/3 of their size).
//! The platform refuses a value over about 2.1 MB, so a record carrying a payload of
//! 1.6 MB or more would fail as text although the reference, which keeps raw bytes,
//! stores it. Records above [`PACK_ABOVE`] bytes of text that hold byte arrays are
//! therefore stored as bytes: [`MAGIC`], then the record in a small binary form with raw
//! byte arrays. Reading ([`unpack`]) turns them back into the same JSON text, so the
//! string API of [`super::Store`] serves both forms.
//!
//! Binary form, one value: a kind byte, then `0` null, `1` false, `2` true, `3` number
//! (f64 LE), `4` string / `9` bytes (u32 LE length + bytes), `5` array (u32 count +
//! values), `6` object (u32 count + (u32 key length, key, value)…), `7` Date (i64 LE ms),
//! `8` invalid Date.
//!
//! Knows no record's schema, only its size and its byte arrays.

use crate::wire::{Map, Value};

/// Leading bytes of a packed record (a NUL cannot begin JSON text).
pub const MAGIC: &[u8] = b"\0wcr1";
/// Records whose JSON text is larger than this are packed when it pays.
pub const PACK_ABOVE: usize = 1 << 20;
/// Nesting a packed record may have (parsed records nest at most 128 deep).
const MAX_DEPTH: usize = 512;

pub fn is_packed(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// The packed form of a record's JSON text, when it is large and holds byte arrays.
pub fn pack(text: &str) -> Option<Vec<u8>> {
    if text.len() <= PACK_ABOVE || !text.contains("\"Uint8Array\"") {
        return None;
    }
    let value = Value::parse_tags(text).ok()?;
    let mut out = Vec::with_capacity(text.len() * 3 / 4 + MAGIC.len());
    out.extend_from_slice(MAGIC);
    write(&mut out, &value);
    Some(out)
}

/// The JSON text of a packed record; `None` when the bytes are not a valid one.
pub fn unpack(bytes: &[u8]) -> Option<String> {
    let mut r = Reader { b: bytes.get(MAGIC.len()..)?, i: 0 };
    if !is_packed(bytes) {
        return None;
    }
    let value = r.value(0)?;
    if r.i != r.b.len() {
        return None;
    }
    let mut text = String::new();
    value.write_json_keeping_invalid_dates(&mut text);
    Some(text)
}

fn write_len(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

fn write(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.push(0),
        Value::Bool(false) => out.push(1),
        Value::Bool(true) => out.push(2),
        Value::Number(n) => {
            out.push(3);
            out.extend_from_slice(&n.to_le_bytes());
        }
        Value::String(s) => {
            out.push(4);
            write_len(out, s.len());
            out.extend_from_slice(s.as_bytes());
        }
        Value::Array(items) => {
            out.push(5);
            write_len(out, items.len());
            for item in items {
                write(out, item);
            }
        }
        Value::Object(map) => {
            out.push(6);
            write_len(out, map.len());
            for (k, v) in map {
                write_len(out, k.len());
                out.extend_from_slice(k.as_bytes());
                write(out, v);
            }
        }
        Value::Date(Some(ms)) => {
            out.push(7);
            out.extend_from_slice(&ms.to_le_bytes());
        }
        Value::Date(None) => out.push(8),
        Value::Bytes(b) => {
            out.push(9);
            write_len(out, b.len());
            out.extend_from_slice(b);
        }
        // Packing starts from decoded text, which holds none; written as what it stands for.
        Value::Json(_) => write(out, &v.decoded()),
    }
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.i.checked_add(n)?;
        let s = self.b.get(self.i..end)?;
        self.i = end;
        Some(s)
    }
    fn byte(&mut self) -> Option<u8> {
        self.take(1).and_then(|s| s.first().copied())
    }
    fn len(&mut self) -> Option<usize> {
        let s = self.take(4)?;
        Some(u32::from_le_bytes(s.try_into().ok()?) as usize)
    }
    fn eight(&mut self) -> Option<[u8; 8]> {
        self.take(8)?.try_into().ok()
    }
    fn string(&mut self) -> Option<String> {
        let n = self.len()?;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        Some(match self.byte()? {
            0 => Value::Null,
            1 => Value::Bool(false),
            2 => Value::Bool(true),
            3 => Value::Number(f64::from_le_bytes(self.eight()?)),
            4 => Value::String(self.string()?),
            5 => {
                let n = self.len()?;
                // Every value takes at least one byte: a count beyond the rest is corrupt.
                let mut items = Vec::with_capacity(n.min(self.b.len().saturating_sub(self.i)));
                for _ in 0..n {
                    items.push(self.value(depth + 1)?);
                }
                Value::Array(items)
            }
            6 => {
                let n = self.len()?;
                let mut map = Map::new();
                for _ in 0..n {
                    let k = self.string()?;
                    let v = self.value(depth + 1)?;
                    map.insert(k, v);
                }
                Value::Object(map)
            }
            7 => Value::Date(Some(i64::from_le_bytes(self.eight()?))),
            8 => Value::Date(None),
            9 => {
                let n = self.len()?;
                Value::Bytes(self.take(n)?.to_vec())
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn big_record() -> Value {
        Value::object([
            ("eventId", Value::str("evnt_00000000000000000000000002")),
            ("createdAt", Value::date(1_767_323_045_678)),
            ("eventData", Value::object([("input", Value::Bytes((0..1_600_000u32).map(|i| (i * 7) as u8).collect()))])),
            ("list", Value::Array(vec![Value::Null, Value::Bool(true), Value::num(-1.5), Value::str("é\u{0}"), Value::Date(None)])),
            ("stringDate", Value::object([("createdAt", Value::str("2026-01-02T03:04:05.678Z"))])),
        ])
    }

    #[test]
    fn large_records_with_bytes_pack_and_unpack_to_the_same_text() {
        let mut text = String::new();
        big_record().write_json_keeping_invalid_dates(&mut text);
        let packed = pack(&text).expect("packed");
        assert!(is_packed(&packed));
        assert!(packed.len() < text.len() * 4 / 5, "{} vs {}", packed.len(), text.len());
        assert_eq!(unpack(&packed).unwrap(), text);
    }

    #[test]
    fn small_or_byteless_records_stay_text() {
        assert_eq!(pack(r#"{"a":{"__type":"Uint8Array","data":"AQID"}}"#), None);
        let long = format!(r#"{{"a":"{}"}}"#, "x".repeat(PACK_ABOVE));
        assert_eq!(pack(&long), None);
    }

    #[test]
    fn corrupt_packs_are_refused() {
        let mut text = String::new();
        big_record().write_json_keeping_invalid_dates(&mut text);
        let packed = pack(&text).unwrap();
        for cut in [0, MAGIC.len(), MAGIC.len() + 1, packed.len() / 2, packed.len() - 1] {
            assert_eq!(unpack(&packed[..cut]), None, "cut at {cut}");
        }
        let mut extra = packed.clone();
        extra.push(0);
        assert_eq!(unpack(&extra), None);
        let mut bad = MAGIC.to_vec();
        bad.extend_from_slice(&[5, 255, 255, 255, 255]);
        assert_eq!(unpack(&bad), None);
        assert_eq!(unpack(b"\0wcr1\x0a"), None);
    }
}
