//! JavaScript's `encodeURIComponent` / `decodeURIComponent`, byte-exact: storage keys and
//! DO names depend on them.
//!
//! Knows nothing of the keys and names callers build with it.

/// Every UTF-8 byte percent-encoded with upper-case hex, except `A–Z a–z 0–9 - _ . ! ~ * ' ( )`.
pub fn encode_uri_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(b"0123456789ABCDEF"[usize::from(b >> 4)]));
            out.push(char::from(b"0123456789ABCDEF"[usize::from(b & 15)]));
        }
    }
    out
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// `decodeURIComponent`: `None` where JavaScript throws `URIError` (a bad escape, or
/// escapes that do not form valid UTF-8).
pub fn decode_uri_component(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hi = hex(*b.get(i + 1)?)?;
            let lo = hex(*b.get(i + 2)?)?;
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_javascript() {
        assert_eq!(encode_uri_component("stream:foo/bar"), "stream%3Afoo%2Fbar");
        assert_eq!(encode_uri_component("a b+c&é~*'()!"), "a%20b%2Bc%26%C3%A9~*'()!");
        assert_eq!(decode_uri_component("stream%3Afoo%2Fbar").unwrap(), "stream:foo/bar");
        assert_eq!(decode_uri_component("%253A").unwrap(), "%3A");
        assert_eq!(decode_uri_component("%C3%A9").unwrap(), "é");
        assert_eq!(decode_uri_component("%"), None);
        assert_eq!(decode_uri_component("%zz"), None);
        assert_eq!(decode_uri_component("%C3"), None);
    }
}
