//! `JSON.parse(text, uint8ArrayReviver)` as the reference runs it on serialized hooks
//! (the "shared" codec of `wire.md` §6), including V8's exact `SyntaxError` messages.
//!
//! The index only needs the `runId` and `hookId` of a stored hook, but a stored value that
//! is not valid JSON makes the reference throw V8's `SyntaxError`, and those texts reach the
//! wire (golden `index-do` seq 82). The parser works on UTF-16 code units, as V8 does, so
//! positions and context snippets match; it is iterative, so nesting depth is bounded only
//! by the input size.
//!
//! Reviver (applied bottom-up, like `JSON.parse`'s): `{"__type":"Uint8Array","data":<string>}`
//! → bytes (via `atob`), `{"__uint8array":true,"data":[…]}` → bytes, and a string under one of
//! the five date keys that parses as a date → Date.
//!
//! Knows no record: the index, the catalog and the hook shards read the members they need.

use crate::wire::date::{self, DATE_KEYS};
use crate::wire::{base64, js, Map, RpcError, Value};

/// V8 provides context only for sources at least this long (2 × 10 + 1 code units).
const MIN_LENGTH_FOR_CONTEXT: usize = 21;
const CONTEXT_CHARS: usize = 10;
/// V8's reviver walk is recursive, so a deeply nested hook fails with a `RangeError` there;
/// this bound keeps our own recursive consumers (drop, encode) far from the stack limit.
const MAX_DEPTH: usize = 1000;

/// Parse `text` like `JSON.parse(text, uint8ArrayReviver)`.
pub fn parse_shared(text: &str) -> Result<Value, RpcError> {
    let src: Vec<u16> = text.encode_utf16().collect();
    Parser { src: &src, pos: 0 }.parse()
}

enum Frame {
    Array(Vec<Value>, String),
    /// Members so far, the key being parsed now, and the key this object sits under.
    Object(Map, String, String),
}

struct Parser<'a> {
    src: &'a [u16],
    pos: usize,
}

const QUOTE: u16 = b'"' as u16;

fn unit(c: u8) -> u16 {
    u16::from(c)
}

impl Parser<'_> {
    fn peek(&self) -> Option<u16> {
        self.src.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(c) if c == unit(b' ') || c == unit(b'\t') || c == unit(b'\n') || c == unit(b'\r')) {
            self.pos += 1;
        }
    }

    fn is(&self, c: u8) -> bool {
        self.peek() == Some(unit(c))
    }

    fn digit(&self) -> bool {
        matches!(self.peek(), Some(c) if (unit(b'0')..=unit(b'9')).contains(&c))
    }

    fn parse(mut self) -> Result<Value, RpcError> {
        let mut stack: Vec<Frame> = Vec::new();
        let mut key = String::new();
        'value: loop {
            // Parse one value; containers push a frame and continue with their first element.
            self.skip_ws();
            let mut value = match self.peek() {
                Some(c) if c == QUOTE => Value::String(self.string()?),
                Some(c) if c == unit(b'-') || (unit(b'0')..=unit(b'9')).contains(&c) => self.number()?,
                Some(c) if c == unit(b't') => self.literal("true", Value::Bool(true))?,
                Some(c) if c == unit(b'f') => self.literal("false", Value::Bool(false))?,
                Some(c) if c == unit(b'n') => self.literal("null", Value::Null)?,
                Some(c) if c == unit(b'[') => {
                    self.pos += 1;
                    self.skip_ws();
                    if self.is(b']') {
                        self.pos += 1;
                        Value::Array(Vec::new())
                    } else {
                        check_depth(&stack)?;
                        stack.push(Frame::Array(Vec::new(), std::mem::take(&mut key)));
                        key = "0".into();
                        continue 'value;
                    }
                }
                Some(c) if c == unit(b'{') => {
                    self.pos += 1;
                    self.skip_ws();
                    if self.is(b'}') {
                        self.pos += 1;
                        Value::Object(Map::new())
                    } else {
                        let first = self.property_key("Expected property name or '}'")?;
                        check_depth(&stack)?;
                        stack.push(Frame::Object(Map::new(), first.clone(), std::mem::take(&mut key)));
                        key = first;
                        continue 'value;
                    }
                }
                _ => return Err(self.unexpected_token()),
            };
            // Hand the finished value to its container, closing containers as they end.
            loop {
                value = revive(&key, value)?;
                let Some(frame) = stack.pop() else {
                    self.skip_ws();
                    if self.peek().is_some() {
                        return Err(self.at_position("Unexpected non-whitespace character after JSON"));
                    }
                    return Ok(value);
                };
                self.skip_ws();
                match frame {
                    Frame::Array(mut items, outer) => {
                        items.push(value);
                        if self.is(b',') {
                            self.pos += 1;
                            key = items.len().to_string();
                            stack.push(Frame::Array(items, outer));
                            continue 'value;
                        }
                        if !self.is(b']') {
                            return Err(self.at("Expected ',' or ']' after array element"));
                        }
                        self.pos += 1;
                        value = Value::Array(items);
                        key = outer;
                    }
                    Frame::Object(mut map, member, outer) => {
                        map.insert(member, value);
                        if self.is(b',') {
                            self.pos += 1;
                            self.skip_ws();
                            let next = self.property_key("Expected double-quoted property name")?;
                            stack.push(Frame::Object(map, next.clone(), outer));
                            key = next;
                            continue 'value;
                        }
                        if !self.is(b'}') {
                            return Err(self.at("Expected ',' or '}' after property value"));
                        }
                        self.pos += 1;
                        value = Value::Object(map);
                        key = outer;
                    }
                }
            }
        }
    }

    /// A property name and its colon; `missing` is the message when no string starts here.
    fn property_key(&mut self, missing: &str) -> Result<String, RpcError> {
        if self.peek() != Some(QUOTE) {
            return Err(self.at(missing));
        }
        let name = self.string()?;
        self.skip_ws();
        if !self.is(b':') {
            return Err(self.at("Expected ':' after property name"));
        }
        self.pos += 1;
        Ok(name)
    }

    fn literal(&mut self, word: &str, value: Value) -> Result<Value, RpcError> {
        for expected in word.bytes() {
            if self.peek() != Some(unit(expected)) {
                return Err(self.unexpected_token());
            }
            self.pos += 1;
        }
        Ok(value)
    }

    fn number(&mut self) -> Result<Value, RpcError> {
        let start = self.pos;
        if self.is(b'-') {
            self.pos += 1;
            if !self.digit() {
                return Err(self.at("No number after minus sign"));
            }
        }
        if self.is(b'0') {
            self.pos += 1;
            if self.digit() {
                return Err(self.at("Unexpected number"));
            }
        } else {
            while self.digit() {
                self.pos += 1;
            }
        }
        if self.is(b'.') {
            self.pos += 1;
            if !self.digit() {
                return Err(self.at("Unterminated fractional number"));
            }
            while self.digit() {
                self.pos += 1;
            }
        }
        if self.is(b'e') || self.is(b'E') {
            self.pos += 1;
            if self.is(b'+') || self.is(b'-') {
                self.pos += 1;
            }
            if !self.digit() {
                return Err(self.at("Exponent part is missing a number"));
            }
            while self.digit() {
                self.pos += 1;
            }
        }
        let lexeme = String::from_utf16_lossy(self.src.get(start..self.pos).unwrap_or(&[]));
        Ok(Value::Number(lexeme.parse::<f64>().unwrap_or(f64::NAN)))
    }

    /// A string literal starting at the opening quote. Lone surrogates become U+FFFD.
    fn string(&mut self) -> Result<String, RpcError> {
        self.pos += 1;
        let mut units: Vec<u16> = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.at("Unterminated string"));
            };
            if c == QUOTE {
                self.pos += 1;
                return Ok(String::from_utf16_lossy(&units));
            }
            if c < 0x20 {
                return Err(self.at("Bad control character in string literal"));
            }
            if c != unit(b'\\') {
                units.push(c);
                self.pos += 1;
                continue;
            }
            self.pos += 1;
            let Some(esc) = self.peek() else {
                return Err(self.at("Unterminated string"));
            };
            let simple = match u8::try_from(esc).unwrap_or(0) {
                b'"' => Some(unit(b'"')),
                b'\\' => Some(unit(b'\\')),
                b'/' => Some(unit(b'/')),
                b'b' => Some(0x08),
                b'f' => Some(0x0c),
                b'n' => Some(unit(b'\n')),
                b'r' => Some(unit(b'\r')),
                b't' => Some(unit(b'\t')),
                b'u' => None,
                _ => return Err(self.at("Bad escaped character")),
            };
            self.pos += 1;
            match simple {
                Some(u) => units.push(u),
                None => {
                    let mut code: u16 = 0;
                    for _ in 0..4 {
                        let hex = self.peek().and_then(|h| char::from_u32(u32::from(h))).and_then(|h| h.to_digit(16));
                        let Some(d) = hex else {
                            return Err(self.at("Bad Unicode escape"));
                        };
                        code = code.wrapping_mul(16).wrapping_add(u16::try_from(d).unwrap_or(0));
                        self.pos += 1;
                    }
                    units.push(code);
                }
            }
        }
    }

    /// An error message of the "… in JSON at position N (line L column C)" family.
    fn at(&self, what: &str) -> RpcError {
        self.at_position(&format!("{what} in JSON"))
    }

    /// `<what> at position N (line L column C)`.
    fn at_position(&self, what: &str) -> RpcError {
        let (line, column) = self.line_column();
        RpcError::custom("SyntaxError", &format!("{what} at position {} (line {line} column {column})", self.pos))
    }

    fn line_column(&self) -> (usize, usize) {
        let mut line = 1;
        let mut line_start = 0;
        let mut i = 0;
        while i < self.pos {
            let c = self.src.get(i).copied().unwrap_or(0);
            if c == unit(b'\r') && i + 1 < self.pos && self.src.get(i + 1) == Some(&unit(b'\n')) {
                i += 1;
            }
            let c = self.src.get(i).copied().unwrap_or(0);
            if c == unit(b'\r') || c == unit(b'\n') {
                line += 1;
                line_start = i + 1;
            }
            i += 1;
        }
        (line, self.pos.saturating_sub(line_start) + 1)
    }

    /// V8's message for an unexpected token at the cursor, chosen by the token's kind.
    fn unexpected_token(&self) -> RpcError {
        let Some(c) = self.peek() else {
            return RpcError::custom("SyntaxError", "Unexpected end of JSON input");
        };
        if c == QUOTE {
            return self.at("Unexpected string");
        }
        if c == unit(b'-') || (unit(b'0')..=unit(b'9')).contains(&c) {
            return self.at("Unexpected number");
        }
        let whole = String::from_utf16_lossy(self.src);
        if matches!(whole.as_str(), "undefined" | "NaN" | "Infinity" | "[object Object]") {
            return RpcError::custom("SyntaxError", &format!("\"{whole}\" is not valid JSON"));
        }
        let token = String::from_utf16_lossy(&[c]);
        let len = self.src.len();
        let pos = self.pos;
        let snippet = |from: usize, to: usize| String::from_utf16_lossy(self.src.get(from..to.min(len)).unwrap_or(&[]));
        let message = if len < MIN_LENGTH_FOR_CONTEXT {
            format!("Unexpected token '{token}', \"{whole}\" is not valid JSON")
        } else if pos < CONTEXT_CHARS {
            format!("Unexpected token '{token}', \"{}\"... is not valid JSON", snippet(0, pos + CONTEXT_CHARS))
        } else if pos < len - CONTEXT_CHARS {
            format!("Unexpected token '{token}', ...\"{}\"... is not valid JSON", snippet(pos - CONTEXT_CHARS, pos + CONTEXT_CHARS))
        } else {
            format!("Unexpected token '{token}', ...\"{}\" is not valid JSON", snippet(pos - CONTEXT_CHARS, len))
        };
        RpcError::custom("SyntaxError", &message)
    }
}

fn check_depth(stack: &[Frame]) -> Result<(), RpcError> {
    if stack.len() >= MAX_DEPTH {
        return Err(RpcError::range_error("Maximum call stack size exceeded"));
    }
    Ok(())
}

/// The shared codec's `uint8ArrayReviver` for one finished value under `key`.
fn revive(key: &str, value: Value) -> Result<Value, RpcError> {
    if let Value::Object(map) = &value {
        if let (Some(Value::String(t)), Some(Value::String(data))) = (map.get("__type"), map.get("data")) {
            if t == "Uint8Array" {
                return base64::decode(data).map(Value::Bytes).ok_or_else(|| {
                    RpcError::custom(
                        "InvalidCharacterError",
                        "atob() called with invalid base64-encoded data. (Only whitespace, '+', '/', alphanumeric ASCII, and up to two terminal '=' signs when the input data length is divisible by 4 are allowed.)",
                    )
                });
            }
        }
        if let (Some(Value::Bool(true)), Some(Value::Array(items))) = (map.get("__uint8array"), map.get("data")) {
            return Ok(Value::Bytes(items.iter().map(|v| to_uint8(js::to_number(Some(v)))).collect()));
        }
    }
    if let Value::String(s) = &value {
        if DATE_KEYS.contains(&key) {
            if let Some(ms) = date::parse_date(s) {
                return Ok(Value::Date(Some(ms)));
            }
        }
    }
    Ok(value)
}

/// ToUint8: truncate, modulo 2^8; NaN and infinities → 0.
fn to_uint8(n: f64) -> u8 {
    if !n.is_finite() {
        return 0;
    }
    let m = n.trunc().rem_euclid(256.0);
    m as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        let e = parse_shared(text).unwrap_err();
        assert_eq!(e.name, "SyntaxError", "{text}");
        e.message
    }

    /// Messages recorded from workerd's `JSON.parse` for each input.
    #[test]
    fn syntax_errors_match_v8() {
        let cases: &[(&str, &str)] = &[
            ("not json", "Unexpected token 'o', \"not json\" is not valid JSON"),
            ("", "Unexpected end of JSON input"),
            ("{", "Expected property name or '}' in JSON at position 1 (line 1 column 2)"),
            ("[", "Unexpected end of JSON input"),
            ("[1", "Expected ',' or ']' after array element in JSON at position 2 (line 1 column 3)"),
            ("{\"a\"", "Expected ':' after property name in JSON at position 4 (line 1 column 5)"),
            ("{\"a\" 1}", "Expected ':' after property name in JSON at position 5 (line 1 column 6)"),
            ("{\"a\":1", "Expected ',' or '}' after property value in JSON at position 6 (line 1 column 7)"),
            ("{\"a\":1,}", "Expected double-quoted property name in JSON at position 7 (line 1 column 8)"),
            ("[1,]", "Unexpected token ']', \"[1,]\" is not valid JSON"),
            ("[,", "Unexpected token ',', \"[,\" is not valid JSON"),
            ("01", "Unexpected number in JSON at position 1 (line 1 column 2)"),
            ("-", "No number after minus sign in JSON at position 1 (line 1 column 2)"),
            ("-a", "No number after minus sign in JSON at position 1 (line 1 column 2)"),
            ("1.", "Unterminated fractional number in JSON at position 2 (line 1 column 3)"),
            ("1.e", "Unterminated fractional number in JSON at position 2 (line 1 column 3)"),
            ("1e", "Exponent part is missing a number in JSON at position 2 (line 1 column 3)"),
            ("1e+", "Exponent part is missing a number in JSON at position 3 (line 1 column 4)"),
            ("\"abc", "Unterminated string in JSON at position 4 (line 1 column 5)"),
            ("\"a\\x\"", "Bad escaped character in JSON at position 3 (line 1 column 4)"),
            ("\"a\\u12g4\"", "Bad Unicode escape in JSON at position 6 (line 1 column 7)"),
            ("\"a\u{1}\"", "Bad control character in string literal in JSON at position 2 (line 1 column 3)"),
            ("tru", "Unexpected end of JSON input"),
            ("trux", "Unexpected token 'x', \"trux\" is not valid JSON"),
            ("nul", "Unexpected end of JSON input"),
            ("undefined", "\"undefined\" is not valid JSON"),
            ("[object Object]", "\"[object Object]\" is not valid JSON"),
            ("NaN", "\"NaN\" is not valid JSON"),
            ("Infinity", "\"Infinity\" is not valid JSON"),
            ("1 2", "Unexpected non-whitespace character after JSON at position 2 (line 1 column 3)"),
            ("{} x", "Unexpected non-whitespace character after JSON at position 3 (line 1 column 4)"),
            ("  \n  x", "Unexpected token 'x', \"  \n  x\" is not valid JSON"),
            ("{\"a\":\n1\n,\r\n\"b\" x}", "Expected ':' after property name in JSON at position 15 (line 4 column 5)"),
            ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "Unexpected token 'a', \"aaaaaaaaaa\"... is not valid JSON"),
            (
                "[1,2,3,4,5,6,7,8,9,10,11,12,13, x, 14,15,16,17,18,19,20]",
                "Unexpected token 'x', ...\"11,12,13, x, 14,15,1\"... is not valid JSON",
            ),
            (
                "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20 x]",
                "Expected ',' or ']' after array element in JSON at position 52 (line 1 column 53)",
            ),
            ("[\"😀\" x]", "Expected ',' or ']' after array element in JSON at position 6 (line 1 column 7)"),
            ("{\"a\":1 \"b\":2}", "Expected ',' or '}' after property value in JSON at position 7 (line 1 column 8)"),
            ("{1:2}", "Expected property name or '}' in JSON at position 1 (line 1 column 2)"),
            ("{\"a\":}", "Unexpected token '}', \"{\"a\":}\" is not valid JSON"),
            ("[-]", "No number after minus sign in JSON at position 2 (line 1 column 3)"),
            ("123abc", "Unexpected non-whitespace character after JSON at position 3 (line 1 column 4)"),
            ("\"\\u00\"", "Bad Unicode escape in JSON at position 5 (line 1 column 6)"),
            ("{\"a\":1,\"b\"}", "Expected ':' after property name in JSON at position 10 (line 1 column 11)"),
            ("[1,2", "Expected ',' or ']' after array element in JSON at position 4 (line 1 column 5)"),
            ("t", "Unexpected end of JSON input"),
            ("1.5e", "Exponent part is missing a number in JSON at position 4 (line 1 column 5)"),
            ("0x10", "Unexpected non-whitespace character after JSON at position 1 (line 1 column 2)"),
            ("[01]", "Unexpected number in JSON at position 2 (line 1 column 3)"),
            ("-01", "Unexpected number in JSON at position 2 (line 1 column 3)"),
            ("\"\t\"", "Bad control character in string literal in JSON at position 1 (line 1 column 2)"),
            ("{,}", "Expected property name or '}' in JSON at position 1 (line 1 column 2)"),
            ("  ", "Unexpected end of JSON input"),
        ];
        for (text, want) in cases {
            assert_eq!(err(text), *want, "input {text:?}");
        }
    }

    #[test]
    fn values_and_reviver() {
        let v = parse_shared(r#"{"runId":"r","hookId":"h","createdAt":"2026-01-02T03:04:05.678Z","b":{"__type":"Uint8Array","data":"AQI="},"l":{"__uint8array":true,"data":[1,257,-1]},"n":[1.5,-0,true,null,"\ud800"],"d":{"a":{"b":[]}}}"#).unwrap();
        assert_eq!(v.get("runId"), Some(&Value::str("r")));
        assert_eq!(v.get("createdAt"), Some(&Value::date(1_767_323_045_678)));
        assert_eq!(v.get("b"), Some(&Value::Bytes(vec![1, 2])));
        assert_eq!(v.get("l"), Some(&Value::Bytes(vec![1, 1, 255])));
        assert_eq!(
            v.get("n"),
            Some(&Value::Array(vec![Value::num(1.5), Value::num(-0.0), Value::Bool(true), Value::Null, Value::str("\u{fffd}")]))
        );
        assert_eq!(parse_shared(" [ ] ").unwrap(), Value::Array(vec![]));
        assert_eq!(parse_shared("{\"a\":1,\"a\":2}").unwrap(), Value::object([("a", Value::num(2))]));
        let bad = parse_shared(r#"{"x":{"__type":"Uint8Array","data":"!!"}}"#).unwrap_err();
        assert!(bad.message.starts_with("InvalidCharacterError: atob()"));
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let ok = "[".repeat(900) + &"]".repeat(900);
        assert!(parse_shared(&ok).is_ok());
        let deep = "[".repeat(200_000) + &"]".repeat(200_000);
        assert_eq!(parse_shared(&deep).unwrap_err(), RpcError::range_error("Maximum call stack size exceeded"));
        let open = "{\"a\":".repeat(100_000);
        assert!(parse_shared(&open).is_err());
    }
}
