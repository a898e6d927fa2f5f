//! Standard base64 (RFC 4648 alphabet, `=` padding) as the codec's `Uint8Array` tag uses it.
//! Decoding follows the browser `atob` rules the reference relies on: ASCII whitespace is
//! ignored, padding may be missing, and anything else outside the alphabet is an error.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let sym = |shift: u32| char::from(ALPHABET[((n >> shift) & 63) as usize]);
        out.push(sym(18));
        out.push(sym(12));
        out.push(if chunk.len() > 1 { sym(6) } else { '=' });
        out.push(if chunk.len() > 2 { sym(0) } else { '=' });
    }
    out
}

fn sextet(c: u8) -> Option<u32> {
    Some(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    } as u32)
}

/// `atob`-compatible decoding; `None` when the text is not base64.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let mut data: Vec<u8> =
        text.bytes().filter(|c| !matches!(c, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ')).collect();
    if data.len() % 4 == 0 {
        for _ in 0..2 {
            if data.last() == Some(&b'=') {
                data.pop();
            }
        }
    }
    if data.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(data.len() / 4 * 3 + 2);
    let mut acc = 0u32;
    let mut bits = 0u32;
    for c in data {
        acc = (acc << 6) | sextet(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn rejects_non_base64() {
        for bad in ["A", "AQ=D", "A*==", "AQID=", "!!!!", "AQ==="] {
            assert!(decode(bad).is_none(), "{bad}");
        }
    }
}
