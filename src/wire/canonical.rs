//! Stored records passed to an answer as they are.
//!
//! A read answers records it loads from storage (an event, a step, a run, a hook). Decoding
//! each one into a [`Value`](crate::wire::Value) only to encode it again cost most of a `listEvents` call's
//! wasm time (docs/performance.md, item 15). The stored text is usually already what the
//! encoder would write: records are stored in the same tagged JSON (`serde_impl.rs`). So
//! [`is_wire_form`] checks, in one pass over the text and without building anything, that
//! `Value::parse(text)?.to_json()` would give `text` back byte for byte, and the answer then
//! carries the text itself ([`Value::Json`](crate::wire::Value::Json)). Any doubt answers `false`, and the caller
//! decodes as before: the check accepts a strict subset of what the encoder can write.
//!
//! Accepted, with no whitespace anywhere:
//! * `null`, `true`, `false`;
//! * integers `-?(0|[1-9][0-9]{0,14})` other than `-0` (exact in a double, and written the
//!   same by the stored form's serializer and by `JSON.stringify`); no fraction, no
//!   exponent, no longer integer (those two writers can differ there);
//! * strings whose escapes are exactly the encoder's (`\"`, `\\`, `\n`, `\r`, `\t`, `\b`,
//!   `\f`, and `\u00xx` in lower case for the other control characters), with no raw
//!   control character;
//! * arrays; objects whose keys contain no backslash and are in strictly increasing byte
//!   order (as the decoder's sorted map writes them: so no duplicate either);
//! * no string value directly under one of the [`DATE_KEYS`] (the decoder would revive a
//!   date-like one as a Date);
//! * an object with a `__type` key only as exactly `{"__type":"Date","iso":<iso>}`, `<iso>`
//!   a valid date in `toISOString` form, or `{"__type":"Uint8Array","data":<base64>}` with
//!   canonical base64 (what the encoder writes for a Date and for bytes);
//! * at most [`MAX_NESTING`] levels of arrays and objects.
//!
//! Knows no record type, only the form of the text.

use super::base64;
use super::date::{self, DATE_KEYS};

/// Deepest nesting accepted (below the decoder's own limit, so nothing it refuses passes).
pub const MAX_NESTING: usize = 64;

/// Whether `text` is exactly the encoder's output for the value it decodes to (see the
/// module documentation). `false` means "not known": decode it.
pub fn is_wire_form(text: &str) -> bool {
    let mut s = Scan { b: text.as_bytes(), i: 0, depth: 0 };
    s.value(false) && s.i == s.b.len()
}

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
    depth: usize,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, lit: &[u8]) -> bool {
        if self.b[self.i..].starts_with(lit) {
            self.i += lit.len();
            true
        } else {
            false
        }
    }

    /// One value; `date_key`: it is the member of one of the [`DATE_KEYS`].
    fn value(&mut self, date_key: bool) -> bool {
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => !date_key && self.string().is_some(),
            Some(b'n') => self.eat(b"null"),
            Some(b't') => self.eat(b"true"),
            Some(b'f') => self.eat(b"false"),
            Some(b'-' | b'0'..=b'9') => self.integer(),
            _ => false,
        }
    }

    fn integer(&mut self) -> bool {
        let negative = self.eat(b"-");
        let start = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        let digits = &self.b[start..self.i];
        let plain = match digits {
            [b'0'] => !negative,
            [b'1'..=b'9', ..] => digits.len() <= 15,
            _ => false,
        };
        plain && !matches!(self.peek(), Some(b'.' | b'e' | b'E'))
    }

    /// A string in the encoder's escaping: its raw text between the quotes.
    fn string(&mut self) -> Option<&'a [u8]> {
        let b = self.b;
        self.i += 1;
        let start = self.i;
        loop {
            let c = *b.get(self.i)?;
            match c {
                b'"' => {
                    self.i += 1;
                    return Some(&b[start..self.i - 1]);
                }
                0..=0x1f => return None,
                b'\\' => {
                    let esc = *b.get(self.i + 1)?;
                    match esc {
                        b'"' | b'\\' | b'n' | b'r' | b't' | b'b' | b'f' => self.i += 2,
                        b'u' => {
                            let hex = b.get(self.i + 2..self.i + 6)?;
                            let code = match hex {
                                [b'0', b'0', h @ (b'0' | b'1'), l @ (b'0'..=b'9' | b'a'..=b'f')] => {
                                    (u32::from(*h - b'0') << 4) | char::from(*l).to_digit(16)?
                                }
                                _ => return None,
                            };
                            // The short escapes have their own form.
                            if matches!(code, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) {
                                return None;
                            }
                            self.i += 6;
                        }
                        _ => return None,
                    }
                }
                _ => self.i += 1,
            }
        }
    }

    /// The members of an array or object after its opening byte: `item`s separated by
    /// commas up to `close` (none at all is allowed), one nesting level deeper.
    fn items(&mut self, close: u8, mut item: impl FnMut(&mut Self) -> bool) -> bool {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return false;
        }
        self.i += 1;
        if self.eat(&[close]) {
            self.depth -= 1;
            return true;
        }
        loop {
            if !item(self) {
                return false;
            }
            if self.eat(&[close]) {
                self.depth -= 1;
                return true;
            }
            if !self.eat(b",") {
                return false;
            }
        }
    }

    fn array(&mut self) -> bool {
        self.items(b']', |s| s.value(false))
    }

    fn object(&mut self) -> bool {
        if self.b[self.i..].starts_with(b"{\"__type\":") {
            return self.depth < MAX_NESTING && self.tagged();
        }
        let mut previous: Option<&[u8]> = None;
        self.items(b'}', |s| {
            if s.peek() != Some(b'"') {
                return false;
            }
            let Some(key) = s.string() else { return false };
            // Sorted, no duplicate, no escape (so the raw bytes are the key's bytes), and
            // no `__type` past the first member (only the tag forms may have it).
            if key.contains(&b'\\') || key == b"__type" || previous.is_some_and(|p| p >= key) {
                return false;
            }
            previous = Some(key);
            let date_key = DATE_KEYS.iter().any(|k| k.as_bytes() == key);
            s.eat(b":") && s.value(date_key)
        })
    }

    /// `{"__type":"Date","iso":…}` or `{"__type":"Uint8Array","data":…}`, exactly as the
    /// encoder writes them.
    fn tagged(&mut self) -> bool {
        let ok = if self.eat(b"{\"__type\":\"Date\",\"iso\":\"") {
            self.i -= 1;
            self.string()
                .and_then(|iso| std::str::from_utf8(iso).ok())
                .is_some_and(|iso| iso.len() == 24 && date::parse_date(iso).and_then(date::to_iso).is_some_and(|back| back == iso))
        } else if self.eat(b"{\"__type\":\"Uint8Array\",\"data\":\"") {
            self.i -= 1;
            self.string().is_some_and(base64::is_canonical)
        } else {
            false
        };
        ok && self.eat(b"}")
    }
}

#[cfg(test)]
mod tests;
