//! The RPC value model and its tagged-JSON codec (spec `wire.md` §6).
//!
//! [`Value`] is what a JavaScript structured value looks like on the wire: JSON plus
//! `Date` (`{"__type":"Date","iso":…}`) and byte arrays (`{"__type":"Uint8Array","data":…}`),
//! at any depth. "Absent" is not a value: an absent object member is simply not in the map,
//! and callers use `Option<&Value>` for it.
//!
//! Knows nothing of storage, methods or routes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{base64, date};

/// Object members. Member order is not significant on the wire, so a sorted map is used.
pub type Map = BTreeMap<String, Value>;

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Value>),
    Object(Map),
    /// Epoch milliseconds; `None` is JavaScript's invalid Date.
    Date(Option<i64>),
    Bytes(Vec<u8>),
    /// A stored record's text, answered as it is: it stands for the object it decodes to,
    /// and the encoder writes it unchanged. Only reads make one ([`Value::stored`]), only
    /// for an object whose text is already the encoder's output
    /// ([`crate::wire::canonical`]); elsewhere it behaves as its decoded object.
    Json(Box<str>),
}

/// Why a body failed to decode. Both map to `400 malformed rpc body`.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeError(pub String);

impl Value {
    pub fn str(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }
    pub fn date(ms: i64) -> Value {
        Value::Date(Some(ms))
    }
    pub fn num(n: impl Into<f64>) -> Value {
        Value::Number(n.into())
    }
    pub fn object<K: Into<String>>(members: impl IntoIterator<Item = (K, Value)>) -> Value {
        Value::Object(members.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }
    /// A stored record's text for an answer, as it is ([`Value::Json`]), when it is an
    /// object in the encoder's exact form; else the text back (`Err`): decode it as usual.
    pub fn stored(text: String) -> Result<Value, String> {
        if text.starts_with('{') && super::canonical::is_wire_form(&text) {
            Ok(Value::Json(text.into_boxed_str()))
        } else {
            Err(text)
        }
    }

    /// The value itself, with a [`Value::Json`] decoded (which cannot fail: its text was
    /// checked when it was made).
    pub fn decoded(&self) -> std::borrow::Cow<'_, Value> {
        match self {
            Value::Json(text) => std::borrow::Cow::Owned(Value::parse(text).unwrap_or(Value::Null)),
            other => std::borrow::Cow::Borrowed(other),
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(*n),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
    pub fn as_object(&self) -> Option<&Map> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }
    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
    /// Member lookup on an object; `None` for absent members and non-objects.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_object().and_then(|m| m.get(key))
    }
    /// Member lookup treating JSON `null` like an absent member.
    pub fn get_present(&self, key: &str) -> Option<&Value> {
        self.get(key).filter(|v| !v.is_null())
    }

    /// Parse a tagged-JSON document (the whole text), reviving tags bottom-up in one pass
    /// (no intermediate JSON tree). Like `JSON.parse`, a number beyond the range of a
    /// double is ±Infinity; nesting deeper than [`MAX_DEPTH`] is refused.
    pub fn parse(text: &str) -> Result<Value, DecodeError> {
        let text = replace_lone_surrogates(text);
        parse_revived(&text, true)
    }

    /// Like [`Value::parse`] but reviving only the two tag forms, not date-like strings
    /// under the date keys.
    pub fn parse_tags(text: &str) -> Result<Value, DecodeError> {
        parse_revived(text, false)
    }

    /// The value an object becomes once its members are decoded: a Date or byte array for
    /// the two tag forms, else the object itself.
    fn from_members(map: Map) -> Result<Value, DecodeError> {
        Ok(match (map.get("__type").and_then(Value::as_str), map.get("iso"), map.get("data")) {
            (Some("Date"), Some(Value::String(iso)), _) => Value::Date(date::parse_date(iso)),
            // `iso` is not a date key, so it is still a string here unless it came from a
            // nested tag; a non-string `iso` or `data` leaves the object alone.
            (Some("Uint8Array"), _, Some(Value::String(data))) => {
                Value::Bytes(base64::decode(data).ok_or_else(|| DecodeError("invalid base64 in Uint8Array tag".into()))?)
            }
            _ => Value::Object(map),
        })
    }

    /// Encode as tagged JSON. Fails only for an invalid Date (JavaScript's
    /// `RangeError: Invalid time value`).
    pub fn to_json(&self) -> Result<String, InvalidDate> {
        let mut out = String::new();
        self.write_json(&mut out)?;
        Ok(out)
    }

    pub fn write_json(&self, out: &mut String) -> Result<(), InvalidDate> {
        self.write_json_with(out, false)
    }

    /// Tagged JSON that cannot fail (for storage, which must keep any value): like
    /// [`Value::write_json`], but an invalid Date is written with an unparseable `iso`
    /// (`{"__type":"Date","iso":"Invalid Date"}`), which decodes back to an invalid Date.
    pub fn write_json_keeping_invalid_dates(&self, out: &mut String) {
        // The only error is an invalid Date, which this mode writes instead.
        let _ = self.write_json_with(out, true);
    }

    fn write_json_with(&self, out: &mut String, keep_invalid_dates: bool) -> Result<(), InvalidDate> {
        match self {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => write_number(out, *n),
            Value::String(s) => write_string(out, s),
            Value::Array(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write_json_with(out, keep_invalid_dates)?;
                }
                out.push(']');
            }
            Value::Object(map) => {
                out.push('{');
                for (i, (k, v)) in map.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_string(out, k);
                    out.push(':');
                    v.write_json_with(out, keep_invalid_dates)?;
                }
                out.push('}');
            }
            Value::Date(ms) => {
                let iso = match ms.and_then(date::to_iso) {
                    Some(iso) => iso,
                    None if keep_invalid_dates => "Invalid Date".to_string(),
                    None => return Err(InvalidDate),
                };
                out.push_str("{\"__type\":\"Date\",\"iso\":\"");
                out.push_str(&iso);
                out.push_str("\"}");
            }
            Value::Bytes(b) => {
                out.push_str("{\"__type\":\"Uint8Array\",\"data\":\"");
                out.push_str(&base64::encode(b));
                out.push_str("\"}");
            }
            Value::Json(text) => out.push_str(text),
        }
        Ok(())
    }
}

/// Deepest nesting of arrays and objects a document may have: a top-level array is level
/// 1, so `[[1]]` has 2 levels. Each level costs native stack while decoding and later
/// while encoding or dropping the tree.
pub const MAX_DEPTH: usize = 128;

/// Runs the codec's visitor over `text`; if it fails only because some numbers lie beyond
/// the range of a double, runs it again on the text with those numbers masked.
fn parse_revived(text: &str, dates: bool) -> Result<Value, DecodeError> {
    parse_counted(text, dates, None).map_err(|e| match e {
        ParseFailure::Malformed(e) => e,
        ParseFailure::TooManyValues => DecodeError("too many values".into()),
    })
}

/// Why a counted parse failed.
#[derive(Debug, Clone, PartialEq)]
pub enum ParseFailure {
    /// More values than the limit (the parse stopped there).
    TooManyValues,
    Malformed(DecodeError),
}

/// [`Value::parse`] that gives up once the document holds more than `max_values` values
/// (of any kind, at any depth): one pass that both checks and decodes a request body,
/// with the verdicts of [`super::check::check`].
pub fn parse_at_most(text: &str, max_values: usize) -> Result<Value, ParseFailure> {
    let text = replace_lone_surrogates(text);
    parse_counted(&text, true, Some(max_values))
}

fn parse_counted(text: &str, dates: bool, max_values: Option<usize>) -> Result<Value, ParseFailure> {
    let run = |text: &str, infinities: &Infinities| {
        use serde::de::DeserializeSeed;
        let budget = max_values.map(|n| ValueBudget { left: std::cell::Cell::new(n), exceeded: std::cell::Cell::new(false) });
        let mut de = serde_json::Deserializer::from_str(text);
        // Depth is bounded by the visitor ([`MAX_DEPTH`]), which refuses the level past it
        // before descending.
        de.disable_recursion_limit();
        let seed = Revive { date_key: false, dates, depth: 0, infinities, budget: budget.as_ref() };
        let result = seed.deserialize(&mut de).and_then(|value| de.end().map(|()| value));
        match result {
            _ if budget.as_ref().is_some_and(|b| b.exceeded.get()) => Err(ParseFailure::TooManyValues),
            Ok(value) => Ok(value),
            Err(e) => Err(ParseFailure::Malformed(DecodeError(e.to_string()))),
        }
    };
    match run(text, &Infinities::default()) {
        Err(ParseFailure::Malformed(e)) => match mask_infinite_numbers(text) {
            Some((masked, infinities)) => run(&masked, &infinities),
            None => Err(ParseFailure::Malformed(e)),
        },
        other => other,
    }
}

/// Values a counted parse may still decode, and whether it ran out.
pub(crate) struct ValueBudget {
    left: std::cell::Cell<usize>,
    exceeded: std::cell::Cell<bool>,
}

/// Numbers of a document that are ±Infinity for `JSON.parse` (`1e400`, a 400-digit
/// integer), by their position among all numbers of the document in text order, which is
/// the order a visitor sees them in. `next` counts the numbers seen so far.
#[derive(Default)]
pub(crate) struct Infinities {
    at: Vec<(usize, f64)>,
    next: std::cell::Cell<usize>,
}

impl Infinities {
    /// The value of the next number of the document, given as `n` by the parser.
    fn number(&self, n: f64) -> f64 {
        let index = self.next.get();
        self.next.set(index + 1);
        match self.at.binary_search_by_key(&index, |&(i, _)| i) {
            Ok(found) => self.at.get(found).map_or(n, |&(_, inf)| inf),
            Err(_) => n,
        }
    }
}

/// serde_json refuses numbers beyond the range of a double, where `JSON.parse` reads
/// ±Infinity. The text with each such number (a valid JSON number token outside a string)
/// replaced by `0`, and where they were; `None` if there is none. Malformed text stays
/// malformed: only well-formed number tokens are touched.
pub(crate) fn mask_infinite_numbers(text: &str) -> Option<(String, Infinities)> {
    let b = text.as_bytes();
    let mut masked = String::new();
    let mut at = Vec::new();
    let (mut i, mut copied, mut ordinal) = (0, 0, 0);
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => {
                i += 1;
                while let Some(&c) = b.get(i) {
                    i += if c == b'\\' { 2 } else { 1 };
                    if c == b'"' {
                        break;
                    }
                }
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                i += 1;
                while b.get(i).is_some_and(|c| matches!(c, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')) {
                    i += 1;
                }
                let token = text.get(start..i).unwrap_or("");
                if is_json_number(token) {
                    if let Some(inf) = token.parse::<f64>().ok().filter(|n| n.is_infinite()) {
                        masked.push_str(text.get(copied..start).unwrap_or(""));
                        masked.push('0');
                        copied = i;
                        at.push((ordinal, inf));
                    }
                    ordinal += 1;
                }
            }
            _ => i += 1,
        }
    }
    if at.is_empty() {
        return None;
    }
    masked.push_str(text.get(copied..).unwrap_or(""));
    Some((masked, Infinities { at, next: std::cell::Cell::new(0) }))
}

/// Whether `t` is a number in JSON's grammar: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
fn is_json_number(t: &str) -> bool {
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let t = t.strip_prefix('-').unwrap_or(t);
    let int = digits(t);
    if int == 0 || (int > 1 && t.starts_with('0')) {
        return false;
    }
    let mut rest = t.get(int..).unwrap_or("");
    if let Some(frac) = rest.strip_prefix('.') {
        let n = digits(frac);
        if n == 0 {
            return false;
        }
        rest = frac.get(n..).unwrap_or("");
    }
    if let Some(exp) = rest.strip_prefix(['e', 'E']) {
        let exp = exp.strip_prefix(['+', '-']).unwrap_or(exp);
        let n = digits(exp);
        if n == 0 {
            return false;
        }
        rest = exp.get(n..).unwrap_or("");
    }
    rest.is_empty()
}

/// `JSON.parse` accepts `\uD800`-style escapes of unpaired UTF-16 surrogates; Rust strings
/// cannot hold them (and serde_json refuses them). Rewrite each unpaired surrogate escape
/// to `\uFFFD`, the replacement character, so such bodies decode instead of failing.
/// Backslashes only occur inside JSON strings, so escapes are found without tracking
/// string boundaries.
pub fn replace_lone_surrogates(text: &str) -> std::borrow::Cow<'_, str> {
    fn unit_at(b: &[u8], i: usize) -> Option<u16> {
        if b.get(i) != Some(&b'\\') || b.get(i + 1) != Some(&b'u') {
            return None;
        }
        let hex = std::str::from_utf8(b.get(i + 2..i + 6)?).ok()?;
        u16::from_str_radix(hex, 16).ok()
    }
    let b = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    // Jump from backslash to backslash (most bodies have few or none).
    while let Some(offset) = b.get(i..).and_then(|rest| find_byte(rest, b'\\')) {
        i += offset;
        let Some(unit) = unit_at(b, i) else {
            i += 2; // any other escape, e.g. `\\`
            continue;
        };
        let paired = (0xD800..0xDC00).contains(&unit) && unit_at(b, i + 6).is_some_and(|lo| (0xDC00..0xE000).contains(&lo));
        if paired {
            i += 12;
        } else if (0xD800..0xE000).contains(&unit) {
            let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
            o.push_str(&text[copied..i]);
            o.push_str("\\uFFFD");
            i += 6;
            copied = i;
        } else {
            i += 6;
        }
    }
    match out {
        None => std::borrow::Cow::Borrowed(text),
        Some(mut o) => {
            o.push_str(&text[copied..]);
            std::borrow::Cow::Owned(o)
        }
    }
}

/// Decodes one value the codec's way; `date_key` says whether it is the member of one of
/// the [`DATE_KEYS`](date::DATE_KEYS) (whose date-like strings become Dates).
pub(crate) struct Revive<'a> {
    pub date_key: bool,
    /// Whether the date-key fallback applies at all (off for re-reading our own
    /// serialized records, whose string members are never dates).
    pub dates: bool,
    /// Arrays and objects around this value.
    pub depth: usize,
    /// Numbers to read as ±Infinity.
    pub infinities: &'a Infinities,
    /// Values left to decode, when counted ([`parse_at_most`]).
    pub budget: Option<&'a ValueBudget>,
}

impl Revive<'_> {
    /// The seed for a member of the container this visitor is decoding.
    fn member(&self, date_key: bool) -> Self {
        Revive { date_key, dates: self.dates, depth: self.depth + 1, infinities: self.infinities, budget: self.budget }
    }

    /// Count one value against the budget, if any.
    fn spend<E: serde::de::Error>(&self) -> Result<(), E> {
        let Some(budget) = self.budget else { return Ok(()) };
        match budget.left.get().checked_sub(1) {
            Some(left) => {
                budget.left.set(left);
                Ok(())
            }
            None => {
                budget.exceeded.set(true);
                Err(E::custom("too many values"))
            }
        }
    }

    fn enter<E: serde::de::Error>(&self) -> Result<(), E> {
        if self.depth >= MAX_DEPTH {
            return Err(E::custom(format_args!("nesting deeper than {MAX_DEPTH} levels")));
        }
        Ok(())
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Revive<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Revive<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Null)
    }
    fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Bool(b))
    }
    fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Number(self.infinities.number(n as f64)))
    }
    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Number(self.infinities.number(n as f64)))
    }
    fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Number(self.infinities.number(n)))
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Value, E> {
        self.visit_string(s.to_string())
    }
    fn visit_string<E: serde::de::Error>(self, s: String) -> Result<Value, E> {
        self.spend()?;
        if self.date_key {
            if let Some(ms) = date::parse_date(&s) {
                return Ok(Value::Date(Some(ms)));
            }
        }
        Ok(Value::String(s))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.spend()?;
        self.enter()?;
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(v) = seq.next_element_seed(self.member(false))? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        self.spend()?;
        self.enter()?;
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            let date_key = self.dates && date::DATE_KEYS.contains(&key.as_str());
            let value = access.next_value_seed(self.member(date_key))?;
            // A duplicate key: the last one wins, as in JSON.parse.
            map.insert(key, value);
        }
        Value::from_members(map).map_err(|e| serde::de::Error::custom(e.0))
    }
}

/// An invalid Date reached the encoder.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InvalidDate;

/// JSON number text as `JSON.stringify` would give it for the values we produce:
/// integral values without a fraction, non-finite values as `null`.
pub fn write_number(out: &mut String, n: f64) {
    if !n.is_finite() {
        out.push_str("null");
    } else if n == n.trunc() && n.abs() < 9_007_199_254_740_992.0 {
        // Safe integers (the common case): exact, no fraction; -0 is "0".
        let _ = write!(out, "{}", n as i64);
    } else {
        // JSON.stringify writes Number.prototype.toString's text.
        out.push_str(&super::number::number_to_string(n));
    }
}

/// `JSON.stringify` of a string (for messages that embed a JSON string literal).
pub fn json_string(s: &str) -> String {
    let mut out = String::new();
    write_string(&mut out, s);
    out
}

/// A JSON string literal with `JSON.stringify` escaping.
pub fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Decode request bytes the way the reference router does: UTF-8 with U+FFFD for
/// invalid sequences and a leading BOM dropped. Valid UTF-8 (every client body) is
/// borrowed after one validation pass (`str::from_utf8` checks ASCII runs a word at a
/// time; the lossy decoder walks character by character).
pub fn decode_utf8(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    let bytes = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]).unwrap_or(bytes);
    match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// The index of the first `needle` in `hay`: eight bytes at a time (a SWAR zero-byte
/// test), so a 64 KiB base64 string without escapes costs 8 K steps instead of 64 K.
pub fn find_byte(hay: &[u8], needle: u8) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let pattern = ONES * u64::from(needle);
    let mut words = hay.chunks_exact(8);
    let mut base = 0;
    for w in &mut words {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(w);
        let x = u64::from_le_bytes(bytes) ^ pattern;
        // Some byte of `x` is zero exactly when this is non-zero (no false positives for
        // the lowest zero byte; the exact index is found below).
        if x.wrapping_sub(ONES) & !x & HIGHS != 0 {
            return w.iter().position(|&c| c == needle).map(|i| base + i);
        }
        base += 8;
    }
    words.remainder().iter().position(|&c| c == needle).map(|i| base + i)
}

/// For native tests and the fuzz targets that inspect answers: `v` with every
/// [`Value::Json`] decoded, after checking (a panic otherwise) that the decoded value
/// encodes back to exactly that text, which is what the answer carries.
#[cfg(any(test, feature = "testing"))]
pub fn expand_stored(v: Value) -> Value {
    match v {
        Value::Json(text) => {
            let decoded = Value::parse(&text).expect("a stored answer decodes");
            assert_eq!(decoded.to_json().as_deref(), Ok(&*text), "a stored answer is the encoder's output");
            decoded
        }
        Value::Array(items) => Value::Array(items.into_iter().map(expand_stored).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, expand_stored(v))).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_byte_agrees_with_position() {
        let hay: Vec<u8> = (0..200u32).map(|i| (i * 37 % 251) as u8).collect();
        for start in 0..40 {
            for end in start..hay.len().min(start + 70) {
                for needle in [0u8, b'\\', 1, 36, 250, 255, 128] {
                    let h = &hay[start..end];
                    assert_eq!(find_byte(h, needle), h.iter().position(|&c| c == needle), "{start}..{end} {needle}");
                }
            }
        }
        assert_eq!(find_byte(b"\\\\", b'\\'), Some(0));
        assert_eq!(find_byte(b"abcdefgh\\", b'\\'), Some(8));
        assert_eq!(find_byte(&[0x80, 0x5c, 0, 0, 0, 0, 0, 0, 0], b'\\'), Some(1));
    }

    #[test]
    fn decode_utf8_borrows_valid_text_and_replaces_invalid_bytes() {
        assert!(matches!(decode_utf8(b"[1]"), std::borrow::Cow::Borrowed("[1]")));
        assert_eq!(decode_utf8(b"\xEF\xBB\xBF[\"\xC3\xA9\"]"), "[\"é\"]");
        assert_eq!(decode_utf8(b"[\"\xFF\"]"), "[\"\u{FFFD}\"]");
    }

    fn rt(text: &str) -> String {
        Value::parse(text).unwrap().to_json().unwrap()
    }

    #[test]
    fn tags_at_any_depth() {
        let text = r#"[{"a":{"__type":"Date","iso":"2026-01-02T03:04:05.678Z"},"b":[{"__type":"Uint8Array","data":"AQID"}]}]"#;
        let v = Value::parse(text).unwrap();
        let first = &v.as_array().unwrap()[0];
        assert_eq!(first.get("a"), Some(&Value::date(1_767_323_045_678)));
        assert_eq!(first.get("b").unwrap().as_array().unwrap()[0], Value::Bytes(vec![1, 2, 3]));
        assert_eq!(rt(text), text);
    }

    #[test]
    fn date_key_fallback_only_for_the_five_keys() {
        let v = Value::parse(r#"{"createdAt":"2026-01-02T03:04:05.678Z","x":"2026-01-02T03:04:05.678Z","updatedAt":"nope"}"#).unwrap();
        assert_eq!(v.get("createdAt"), Some(&Value::date(1_767_323_045_678)));
        assert_eq!(v.get("x"), Some(&Value::str("2026-01-02T03:04:05.678Z")));
        assert_eq!(v.get("updatedAt"), Some(&Value::str("nope")));
    }

    #[test]
    fn invalid_base64_fails_and_invalid_date_is_kept() {
        assert!(Value::parse(r#"[{"__type":"Uint8Array","data":"!!"}]"#).is_err());
        let v = Value::parse(r#"{"__type":"Date","iso":"garbage"}"#).unwrap();
        assert_eq!(v, Value::Date(None));
        assert_eq!(v.to_json(), Err(InvalidDate));
        // Non-string `data`/`iso` leave the object as it is.
        assert_eq!(rt(r#"{"__type":"Date","iso":5}"#), r#"{"__type":"Date","iso":5}"#);
        // The old `__uint8array` form is not recognised.
        assert_eq!(rt(r#"{"__uint8array":true,"data":[1]}"#), r#"{"__uint8array":true,"data":[1]}"#);
    }

    #[test]
    fn numbers_and_strings_like_json_stringify() {
        assert_eq!(rt("[1.0,-0,1.5,1e21,12345678901234]"), "[1,0,1.5,1e+21,12345678901234]");
        assert_eq!(rt("[0.000001,2.5e-6,1e-7,123456789012345680000,-0.5]"), "[0.000001,0.0000025,1e-7,123456789012345680000,-0.5]");
        assert_eq!(rt(r#"["\u0000\u001f\b\f\n\r\t\"\\/é\u2028"]"#), "[\"\\u0000\\u001f\\b\\f\\n\\r\\t\\\"\\\\/é\u{2028}\"]");
    }

    #[test]
    fn numbers_beyond_a_double_are_infinities_like_json_parse() {
        let v = Value::parse(r#"["k",1e400,-1e400,{"a":[2,1E+999,"1e400",-0.5e99999]},3]"#).unwrap();
        let inf = f64::INFINITY;
        let want = Value::Array(vec![
            Value::str("k"),
            Value::num(inf),
            Value::num(-inf),
            Value::object([("a", Value::Array(vec![Value::num(2), Value::num(inf), Value::str("1e400"), Value::num(-inf)]))]),
            Value::num(3),
        ]);
        assert_eq!(v, want);
        // JSON.stringify writes them as null.
        assert_eq!(v.to_json().unwrap(), r#"["k",null,null,{"a":[2,null,"1e400",null]},3]"#);
        // A 10,000-digit integer, and one in a string with an escaped quote before it.
        let big = format!("[\"\\\"\",{}, -{}]", "9".repeat(10_000), "1".repeat(400));
        assert_eq!(Value::parse(&big).unwrap(), Value::Array(vec![Value::str("\""), Value::num(inf), Value::num(-inf)]));
        // Underflow is 0, as in JSON.parse; malformed numbers stay malformed.
        assert_eq!(Value::parse("[1e-400]").unwrap(), Value::Array(vec![Value::num(0)]));
        for bad in ["[01e400]", "[1e400.]", "[1e400", "[1e400,]", "[+1e400]", "[1e400 1]", "[.1e400]", "[1e+]", "[--1e400]"] {
            assert!(Value::parse(bad).is_err(), "{bad}");
        }
    }

    /// `depth` nested arrays around a 1.
    fn nested(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn nesting_up_to_max_depth_is_accepted() {
        assert_eq!(MAX_DEPTH, 128);
        assert_eq!(rt(&nested(128)), nested(128));
        assert!(Value::parse(&nested(129)).is_err());
        let objects = |d: usize| format!("[{}1{}]", r#"{"a":"#.repeat(d - 1), "}".repeat(d - 1));
        assert_eq!(rt(&objects(128)), objects(128));
        assert!(Value::parse(&objects(129)).is_err());
        assert!(Value::parse(&nested(100_000)).is_err());
        assert!(Value::parse_tags(&nested(129)).is_err());
    }

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        assert_eq!(Value::parse(r#"["\ud800"]"#).unwrap(), Value::Array(vec![Value::str("\u{FFFD}")]));
        assert_eq!(Value::parse(r#"["a\udc00b\ud800"]"#).unwrap(), Value::Array(vec![Value::str("a\u{FFFD}b\u{FFFD}")]));
        assert_eq!(Value::parse(r#"["\ud83d\ude00"]"#).unwrap(), Value::Array(vec![Value::str("😀")]));
        assert_eq!(Value::parse(r#"["\\ud800"]"#).unwrap(), Value::Array(vec![Value::str("\\ud800")]));
        assert_eq!(Value::parse(r#"["\ud800\u0041"]"#).unwrap(), Value::Array(vec![Value::str("\u{FFFD}A")]));
        assert!(Value::parse(r#"["\ud8"]"#).is_err());
    }

    #[test]
    fn utf8_decoding_drops_bom_and_replaces() {
        assert_eq!(decode_utf8(b"\xEF\xBB\xBF[1]"), "[1]");
        assert_eq!(decode_utf8(b"[\"\xff\"]"), "[\"\u{FFFD}\"]");
    }
}
