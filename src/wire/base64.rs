//! Standard base64 (RFC 4648 alphabet, `=` padding) as the codec's `Uint8Array` tag uses it.
//! Decoding follows the browser `atob` rules the reference relies on: ASCII whitespace is
//! ignored, padding may be missing, and anything else outside the alphabet is an error.
//!
//! Knows nothing of the codec's tags or of JSON.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub fn encode(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(bytes.len().div_ceil(3) * 4);
    let sym = |n: u32, shift: u32| ALPHABET[((n >> shift) & 63) as usize];
    let mut chunks = bytes.chunks_exact(3);
    for c in &mut chunks {
        let n = (u32::from(c[0]) << 16) | (u32::from(c[1]) << 8) | u32::from(c[2]);
        out.extend_from_slice(&[sym(n, 18), sym(n, 12), sym(n, 6), sym(n, 0)]);
    }
    match *chunks.remainder() {
        [a] => {
            let n = u32::from(a) << 16;
            out.extend_from_slice(&[sym(n, 18), sym(n, 12), b'=', b'=']);
        }
        [a, b] => {
            let n = (u32::from(a) << 16) | (u32::from(b) << 8);
            out.extend_from_slice(&[sym(n, 18), sym(n, 12), sym(n, 6), b'=']);
        }
        _ => {}
    }
    // Only alphabet bytes were pushed.
    String::from_utf8(out).unwrap_or_default()
}

/// Sextet value of each byte; `INVALID` outside the alphabet.
const INVALID: u8 = 0xFF;
const DECODE: [u8; 256] = {
    let mut t = [INVALID; 256];
    let mut i = 0;
    while i < 64 {
        t[ALPHABET[i] as usize] = i as u8;
        i += 1;
    }
    t
};

fn is_ascii_whitespace(c: u8) -> bool {
    matches!(c, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ')
}

/// The symbols of `text` as `atob` sees them: ASCII whitespace dropped, then up to two
/// trailing `=` removed when the length is a multiple of 4. `None` for an impossible
/// length. (Alphabet membership is checked by the callers.)
fn symbols(text: &str) -> Option<std::borrow::Cow<'_, [u8]>> {
    let raw = text.as_bytes();
    // Canonical input (the usual case) is used in place; anything with whitespace is
    // compacted first.
    let mut data: std::borrow::Cow<'_, [u8]> = if raw.iter().any(|&c| is_ascii_whitespace(c)) {
        std::borrow::Cow::Owned(raw.iter().copied().filter(|&c| !is_ascii_whitespace(c)).collect())
    } else {
        std::borrow::Cow::Borrowed(raw)
    };
    if data.len().is_multiple_of(4) {
        let mut len = data.len();
        for _ in 0..2 {
            if len > 0 && data.get(len - 1) == Some(&b'=') {
                len -= 1;
            }
        }
        data = match data {
            std::borrow::Cow::Borrowed(b) => std::borrow::Cow::Borrowed(b.get(..len).unwrap_or_default()),
            std::borrow::Cow::Owned(mut v) => {
                v.truncate(len);
                std::borrow::Cow::Owned(v)
            }
        };
    }
    if data.len() % 4 == 1 {
        return None;
    }
    Some(data)
}

/// Whether `text` is exactly what [`encode`] writes for the bytes it decodes to: a
/// multiple of 4 symbols of the alphabet, at most two `=` at the end, and zero bits in the
/// last symbol's part that padding leaves unused.
pub fn is_canonical(text: &[u8]) -> bool {
    if !text.len().is_multiple_of(4) {
        return false;
    }
    let pad = text.iter().rev().take(2).take_while(|&&c| c == b'=').count();
    let data = &text[..text.len() - pad];
    if !data.iter().all(|&c| DECODE[usize::from(c)] <= 63) {
        return false;
    }
    let unused_mask = match pad {
        0 => 0,
        1 => 0b11,
        _ => 0b1111,
    };
    data.last().is_none_or(|&c| DECODE[usize::from(c)] & unused_mask == 0)
}

/// Whether `atob` would accept `text` (without decoding it).
pub fn is_valid(text: &str) -> bool {
    symbols(text).is_some_and(|data| data.iter().all(|&c| DECODE[usize::from(c)] <= 63))
}

/// `atob`-compatible decoding; `None` when the text is not base64.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    decode_canonical(text.as_bytes()).or_else(|| decode_general(text))
}

/// The usual input — alphabet symbols, then up to two `=` when the length is a multiple
/// of 4 — decoded in one pass into an output of exact size, with one validity check at
/// the end. `None` for anything else (whitespace, bad symbols, bad lengths), which
/// [`decode_general`] then decides.
fn decode_canonical(raw: &[u8]) -> Option<Vec<u8>> {
    let mut len = raw.len();
    if len.is_multiple_of(4) {
        for _ in 0..2 {
            if len > 0 && raw[len - 1] == b'=' {
                len -= 1;
            }
        }
    }
    let data = &raw[..len];
    let tail = match len % 4 {
        0 => 0,
        2 => 1,
        3 => 2,
        _ => return None,
    };
    let quads = len / 4;
    let mut out = vec![0u8; quads * 3 + tail];
    // Every sextet is OR-ed in: an `INVALID` (0xFF) one sets the high bits.
    let mut seen = 0u8;
    for (q, o) in data.chunks_exact(4).zip(out.chunks_exact_mut(3)) {
        let (a, b, c, d) = (DECODE[usize::from(q[0])], DECODE[usize::from(q[1])], DECODE[usize::from(q[2])], DECODE[usize::from(q[3])]);
        seen |= a | b | c | d;
        let n = (u32::from(a) << 18) | (u32::from(b) << 12) | (u32::from(c) << 6) | u32::from(d);
        o[0] = (n >> 16) as u8;
        o[1] = (n >> 8) as u8;
        o[2] = n as u8;
    }
    let rest = &data[quads * 4..];
    let mut acc = 0u32;
    for &c in rest {
        let v = DECODE[usize::from(c)];
        seen |= v;
        acc = (acc << 6) | u32::from(v & 63);
    }
    let end = &mut out[quads * 3..];
    match rest.len() {
        2 => end[0] = (acc >> 4) as u8,
        3 => {
            end[0] = (acc >> 10) as u8;
            end[1] = (acc >> 2) as u8;
        }
        _ => {}
    }
    (seen <= 63).then_some(out)
}

/// `atob` with whitespace and every other case [`decode_canonical`] leaves out.
fn decode_general(text: &str) -> Option<Vec<u8>> {
    let data = symbols(text)?;
    let mut out = Vec::with_capacity(data.len() / 4 * 3 + 2);
    let mut quads = data.chunks_exact(4);
    for q in &mut quads {
        let (a, b, c, d) = (DECODE[q[0] as usize], DECODE[q[1] as usize], DECODE[q[2] as usize], DECODE[q[3] as usize]);
        if (a | b | c | d) == INVALID || a > 63 || b > 63 || c > 63 || d > 63 {
            return None;
        }
        let n = (u32::from(a) << 18) | (u32::from(b) << 12) | (u32::from(c) << 6) | u32::from(d);
        out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8]);
    }
    let rest = quads.remainder();
    let mut acc = 0u32;
    for &c in rest {
        let v = DECODE[c as usize];
        if v > 63 {
            return None;
        }
        acc = (acc << 6) | u32::from(v);
    }
    match rest.len() {
        2 => out.push((acc >> 4) as u8),
        3 => out.extend_from_slice(&[(acc >> 10) as u8, (acc >> 2) as u8]),
        _ => {}
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-pass decoder agrees with the general `atob` path on every input: canonical
    /// or not, padded or not, with whitespace, stray `=`, bytes outside the alphabet.
    #[test]
    fn canonical_fast_path_agrees_with_the_general_path() {
        let symbols = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/= \n\t-_.";
        let mut rng = crate::testing::xorshift(0x2545_F491_4F6C_DD1D);
        let mut next = || rng(u64::MAX);
        for round in 0..20_000 {
            let len = (next() % 24) as usize;
            // Mostly alphabet symbols (so most inputs are valid), sometimes anything.
            let text: String = (0..len)
                .map(|_| {
                    let r = next();
                    let pick = if round % 3 == 0 { r % symbols.len() as u64 } else { r % 64 };
                    symbols[pick as usize] as char
                })
                .collect();
            for t in [text.clone(), format!("{text}="), format!("{text}==")] {
                assert_eq!(decode(&t), decode_general(&t), "{t:?}");
            }
        }
        for bytes in [&b""[..], b"a", b"ab", b"abc", b"abcd", &[0u8, 255, 7, 128, 64][..]] {
            assert_eq!(decode_canonical(encode(bytes).as_bytes()).as_deref(), Some(bytes));
        }
    }

    #[test]
    fn roundtrip_and_padding() {
        assert_eq!(encode(b""), "");
        assert_eq!(encode(&[1, 2, 3]), "AQID");
        assert_eq!(encode(&[1, 2]), "AQI=");
        assert_eq!(encode(&[1]), "AQ==");
        assert_eq!(encode(&[0xff, 0xfe, 0xfd, 0xfc]), "//79/A==");
        assert_eq!(decode("AQID").unwrap(), vec![1, 2, 3]);
        assert_eq!(decode("AQI").unwrap(), vec![1, 2]);
        assert_eq!(decode("AQ==").unwrap(), vec![1]);
        assert_eq!(decode(" AQ\nID ").unwrap(), vec![1, 2, 3]);
        assert_eq!(decode("").unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn roundtrips_every_length_with_and_without_padding_or_whitespace() {
        let mut seed = 0x1234_5678u32;
        for len in 0usize..200 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    (seed >> 16) as u8
                })
                .collect();
            let text = encode(&bytes);
            assert_eq!(text.len(), len.div_ceil(3) * 4);
            assert_eq!(decode(&text).unwrap(), bytes);
            assert_eq!(decode(text.trim_end_matches('=')).unwrap(), bytes);
            let spaced: String = text.chars().flat_map(|c| [c, ' ']).collect();
            assert_eq!(decode(&spaced).unwrap(), bytes);
        }
    }

    #[test]
    fn rejects_non_base64() {
        for bad in ["A", "AQ=D", "A*==", "AQID=", "!!!!", "AQ==="] {
            assert!(decode(bad).is_none(), "{bad}");
            assert!(!is_valid(bad), "{bad}");
        }
    }
}
