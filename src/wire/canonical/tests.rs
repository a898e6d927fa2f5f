use super::*;
use crate::wire::{Map, Value};

/// What the check promises for a text it accepts: both decoders a read uses (the codec's
/// `Value::parse`, and serde's, which `get_json` uses) give a value the encoder writes as
/// that very text.
fn assert_round_trip(text: &str) {
    let parsed = Value::parse(text).unwrap_or_else(|e| panic!("accepted but not parseable: {text}: {e:?}"));
    assert_eq!(parsed.to_json().as_deref(), Ok(text), "Value::parse of an accepted text");
    let serde: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("accepted but not decodable: {text}: {e}"));
    assert_eq!(serde.to_json().as_deref(), Ok(text), "serde decoding of an accepted text");
}

#[test]
fn accepts_what_the_encoder_writes() {
    for text in [
        r#"{}"#,
        r#"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#,
        r#"{"createdAt":{"__type":"Date","iso":"2026-12-03T09:12:53.177Z"},"eventId":"evnt_1"}"#,
        r#"{"data":{"__type":"Uint8Array","data":"BwcH"},"e":{"__type":"Uint8Array","data":""},"f":{"__type":"Uint8Array","data":"AQ=="}}"#,
        r#"{"n":-123456789012345,"z":0}"#,
        r#"{"s":"quote \" backslash \\ nl \n cr \r tab \t bs \b ff \f nul \u0000 us \u001f del  é ☃ 😀"}"#,
        r#"{"":1,"A":2,"Z":3,"a":4}"#,
        r#"{"nested":[[[{"x":[]}]]]}"#,
    ] {
        assert!(is_wire_form(text), "should accept {text}");
        assert_round_trip(text);
    }
}

#[test]
fn refuses_anything_else() {
    for text in [
        r#"{"a":1.5}"#,                                                      // fraction
        r#"{"a":1e3}"#,                                                      // exponent
        r#"{"a":1234567890123456}"#,                                         // 16 digits
        r#"{"a":-0}"#,                                                       // negative zero
        r#"{"a":01}"#,                                                       // leading zero
        r#"{"b":1,"a":2}"#,                                                  // unsorted
        r#"{"a":1,"a":2}"#,                                                  // duplicate
        r#"{"a\"b":1}"#,                                                     // escaped key
        r#"{ "a":1}"#,                                                       // whitespace
        r#"{"a":1} "#,                                                       // trailing whitespace
        r#"{"a":"\/"}"#,                                                     // escape the encoder never writes
        r#"{"a":"\u0041"}"#,                                                 // \u for a printable character
        r#"{"a":"\u000a"}"#,                                                 // \u where a short escape exists
        r#"{"a":"\u001F"}"#,                                                 // upper-case hex
        r#"{"a":"\ud800"}"#,                                                 // lone surrogate escape
        "{\"a\":\"\u{1}\"}",                                                 // raw control character
        r#"{"createdAt":"2026-12-03T09:12:53.177Z"}"#,                       // a string under a date key
        r#"{"retryAfter":"soon"}"#,                                          // any string under a date key
        r#"{"d":{"__type":"Date","iso":"2026-13-03T09:12:53.177Z"}}"#,       // invalid date
        r#"{"d":{"__type":"Date","iso":"Invalid Date"}}"#,                   // kept invalid date
        r#"{"d":{"__type":"Date","iso":"2026-12-03T09:12:53Z"}}"#,           // not toISOString's form
        r#"{"d":{"__type":"Date","iso":"2026-12-03T09:12:53.177Z","x":1}}"#, // extra member
        r#"{"d":{"__type":"Uint8Array","data":"BwcI="}}"#,                   // bad length
        r#"{"d":{"__type":"Uint8Array","data":"AR=="}}"#,                    // non-zero padding bits
        r#"{"d":{"__type":"Uint8Array","data":"A Q=="}}"#,                   // space
        r#"{"d":{"__type":"Other"}}"#,                                       // other tag
        r#"{"A":1,"__type":"Date","iso":"2026-12-03T09:12:53.177Z"}"#,       // tag not first
        r#"{"a":1"#,                                                         // truncated
        r#"{"a":1}}"#,                                                       // trailing bytes
        r#"{"a":tru}"#,
        r#"{"a":}"#,
        r#"{"a",1}"#,
        r#"{,}"#,
        r#"[1,]"#,
        r#"{"a":[1 2]}"#,
    ] {
        assert!(!is_wire_form(text), "should refuse {text}");
    }
    let deep = format!("{}{}", "[".repeat(MAX_NESTING + 1), "]".repeat(MAX_NESTING + 1));
    assert!(!is_wire_form(&deep));
    let deep_ok = format!("{}{}", "[".repeat(MAX_NESTING), "]".repeat(MAX_NESTING));
    assert!(is_wire_form(&deep_ok));
}

#[test]
fn canonical_base64() {
    for bytes in [&b""[..], b"a", b"ab", b"abc", b"abcd", &[0xff, 0xfe, 0x00]] {
        assert!(base64::is_canonical(base64::encode(bytes).as_bytes()));
    }
    for text in ["A", "AB==", "AQ", "AR==", "AQI=", "AQJ=", "====", "A===", "AB=C", "AB\nC"] {
        let canonical = base64::decode(text).is_some_and(|b| base64::encode(&b) == text);
        assert_eq!(base64::is_canonical(text.as_bytes()), canonical, "{text}");
    }
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

const KEYS: [&str; 14] =
    ["a", "B", "__type", "iso", "data", "createdAt", "updatedAt", "retryAfter", "eventId", "", "é", "x\"y", "k\n", "Z"];
const STRINGS: [&str; 12] = [
    "",
    "plain",
    "Date",
    "Uint8Array",
    "2026-12-03T09:12:53.177Z",
    "2026-12-03",
    "AQ==",
    "quote\" back\\ nl\n ctl\u{1} del\u{7f}",
    "\u{2028}☃😀",
    "Invalid Date",
    "{\"__type\":\"Date\"}",
    "1e21",
];
const NUMBERS: [f64; 14] =
    [0.0, -0.0, 1.0, -7.0, 42.5, 1e15, 999_999_999_999_999.0, 1e16, 9_007_199_254_740_993.0, 1e21, 1e-7, 0.1, f64::NAN, f64::INFINITY];

fn value(rng: &mut Rng, depth: u32) -> Value {
    let kinds = if depth >= 4 { 6 } else { 9 };
    match rng.below(kinds) {
        0 => Value::Null,
        1 => Value::Bool(rng.below(2) == 1),
        2 => Value::Number(*rng.pick(&NUMBERS)),
        3 => Value::str(*rng.pick(&STRINGS)),
        4 => Value::Date(if rng.below(8) == 0 { None } else { Some(rng.below(4_000_000_000_000) as i64 - 100_000_000_000) }),
        5 => Value::Bytes((0..rng.below(7)).map(|_| rng.next() as u8).collect()),
        6 => Value::Array((0..rng.below(4)).map(|_| value(rng, depth + 1)).collect()),
        _ => {
            let mut m = Map::new();
            for _ in 0..rng.below(5) {
                m.insert(rng.pick(&KEYS).to_string(), value(rng, depth + 1));
            }
            Value::Object(m)
        }
    }
}

/// Every stored form a record can have (serde's, which storage writes, and the encoder's
/// keeping invalid dates), for many random values: whenever the check accepts one, both
/// decoders give it back byte for byte. And it does accept most of them, so the check is
/// not vacuous.
#[test]
fn accepted_stored_forms_round_trip() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut accepted, mut total) = (0, 0);
    for _ in 0..40_000 {
        let mut m = Map::new();
        for _ in 0..rng.below(6) {
            m.insert(rng.pick(&KEYS).to_string(), value(&mut rng, 1));
        }
        let v = Value::Object(m);
        let mut keeping = String::new();
        v.write_json_keeping_invalid_dates(&mut keeping);
        for text in [serde_json::to_string(&v).ok(), Some(keeping)].into_iter().flatten() {
            total += 1;
            if is_wire_form(&text) {
                accepted += 1;
                assert_round_trip(&text);
            }
        }
    }
    assert!(accepted * 4 > total, "accepted {accepted} of {total}");
}

/// Texts mutated a byte at a time from accepted ones: whatever the check still accepts
/// round-trips (the check never lets a text through that decodes to something else).
#[test]
fn accepted_mutations_round_trip() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let alphabet = br#"{}[]",:\-0159eE.atrufnl_ AQ=zZ/u"#;
    let mut accepted = 0;
    for _ in 0..20_000 {
        let mut m = Map::new();
        for _ in 0..1 + rng.below(4) {
            m.insert(rng.pick(&KEYS).to_string(), value(&mut rng, 2));
        }
        let Ok(text) = serde_json::to_string(&Value::Object(m)) else { continue };
        let mut bytes = text.into_bytes();
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(bytes.len() as u64) as usize;
            match rng.below(3) {
                0 => bytes[at] = *rng.pick(alphabet),
                1 => bytes.insert(at, *rng.pick(alphabet)),
                _ => {
                    bytes.remove(at);
                }
            }
        }
        let Ok(text) = String::from_utf8(bytes) else { continue };
        if is_wire_form(&text) {
            accepted += 1;
            assert_round_trip(&text);
        }
    }
    assert!(accepted > 100, "accepted {accepted}");
}

/// A record stored by the run DO (an event as `applyEvent` writes it) is accepted.
#[test]
fn a_stored_event_is_accepted() {
    let text = r#"{"correlationId":"s0","createdAt":{"__type":"Date","iso":"2026-12-03T09:12:59.470Z"},"eventData":{"input":{"__type":"Uint8Array","data":"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBw=="},"stepName":"work"},"eventId":"evnt_00000000000000000000000003","eventType":"step_created","runId":"wrun_cnt_1","specVersion":6}"#;
    assert!(is_wire_form(text));
    assert_round_trip(text);
}
