//! The router's decisions ([`world_celld_rs::wire::router`]) on arbitrary requests: no
//! panic, and
//! * `route` only admits a whitelisted method of a known binding, for an authenticated
//!   POST to `/v1/rpc/<binding>/<name>/<method>`; `/v1/health` needs no secret;
//! * `authenticate` admits exactly `Bearer <secret>` for a non-empty secret, and
//!   `constant_time_eq` is equality;
//! * `content_length_too_large` agrees with the number for plain decimal integers;
//! * `decode_name` inverts `encodeURIComponent`;
//! * `check_body`'s verdict agrees with the full decode ([`Value::parse`]): 200-bound
//!   text ⇔ an array, `NotAnArray` ⇔ another value, `MalformedBody` ⇔ a decode error.
//!
//! Input: method byte, path (2-byte big-endian length + bytes), authorization (flag byte,
//! length byte, bytes), secret (flag byte: none / empty / `golden-secret`),
//! content-length (flag byte, length byte, bytes), then the body (the rest).
#![no_main]

use fuzz_support::arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use world_celld_rs::wire::error::MAX_BODY_BYTES;
use world_celld_rs::wire::router::{
    authenticate, check_body, constant_time_eq, content_length_too_large, decode_name, route, Binding, Route,
};
use world_celld_rs::wire::uri::encode_uri_component;
use world_celld_rs::wire::value::decode_utf8;
use world_celld_rs::wire::{RouterError, Value};

const SECRET: &str = "golden-secret";

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn sized(u: &mut Unstructured, len_bytes: usize) -> String {
    let len = u.bytes(len_bytes.min(u.len())).unwrap_or_default().iter().fold(0usize, |a, b| a * 256 + usize::from(*b));
    lossy(u.bytes(len.min(u.len())).unwrap_or_default())
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let method = match u.arbitrary::<u8>().unwrap_or(0) % 8 {
        0..=3 => "POST".to_string(),
        4 => "GET".to_string(),
        5 => "post".to_string(),
        6 => "PUT".to_string(),
        _ => sized(&mut u, 1),
    };
    let path = sized(&mut u, 2);
    let authorization = (u.arbitrary::<u8>().unwrap_or(0) % 2 == 1).then(|| sized(&mut u, 1));
    let secret = match u.arbitrary::<u8>().unwrap_or(0) % 4 {
        0 => None,
        1 => Some(String::new()),
        _ => Some(SECRET.to_string()),
    };
    let content_length = (u.arbitrary::<u8>().unwrap_or(0) % 2 == 1).then(|| sized(&mut u, 1));
    let body = u.take_rest();

    // Authentication.
    let auth = authenticate(authorization.as_deref(), secret.as_deref());
    let expected = secret.as_deref().filter(|s| !s.is_empty()).map(|s| format!("Bearer {s}"));
    match &expected {
        None => assert_eq!(auth, Err(RouterError::NotConfigured)),
        Some(want) => assert_eq!(auth.is_ok(), authorization.as_deref() == Some(want.as_str()), "authenticate({authorization:?})"),
    }
    if let Some(a) = &authorization {
        assert_eq!(constant_time_eq(a.as_bytes(), SECRET.as_bytes()), a == SECRET);
    }

    // Routing.
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match route(&method, &path, authorization.as_deref(), secret.as_deref()) {
        Ok(Route::Health) => assert_eq!(segments, ["v1", "health"]),
        Ok(Route::Rpc { binding, encoded_name, method: m }) => {
            assert!(auth.is_ok(), "an RPC route without authentication");
            assert_eq!(method, "POST");
            assert_eq!(segments.len(), 5);
            assert_eq!(&segments[..2], ["v1", "rpc"]);
            assert_eq!(Binding::from_key(segments[2]), Some(binding));
            assert!(binding.methods().contains(&m.as_str()), "{m} is not whitelisted");
            assert_eq!(encoded_name, segments[3]);
            if let Ok(name) = decode_name(&encoded_name) {
                assert_eq!(decode_name(&encode_uri_component(&name)).as_deref(), Ok(name.as_str()));
            }
        }
        Ok(Route::Index { domain, op }) => {
            assert!(auth.is_ok(), "an index route without authentication");
            assert_eq!(segments.len(), 4);
            assert_eq!(&segments[..2], ["v1", "index"]);
            assert_eq!((domain.as_str(), op.as_str()), (segments[2], segments[3]));
        }
        Ok(Route::StreamChunks { segment }) => {
            assert!(auth.is_ok(), "a stream route without authentication");
            assert_eq!(segments.len(), 4);
            assert_eq!((segments[0], segments[1], segments[3]), ("v1", "streams", "chunks"));
            assert_eq!(segment, segments[2]);
        }
        Ok(Route::Admin) => {
            assert!(auth.is_ok(), "an admin route without authentication");
            assert_eq!(&segments[..2], ["v1", "admin"]);
        }
        // The console's files: no authentication, GET or HEAD only.
        Ok(Route::Console(_)) => {
            assert_eq!(segments.first(), Some(&"console"));
            assert!(method == "GET" || method == "HEAD", "the console answered {method}");
        }
        Err(RouterError::ExpectedGet) => assert_eq!(segments.first(), Some(&"console")),
        Err(RouterError::UnknownPath(p)) => assert_eq!(p, path),
        // 0.4 order: every /v1/<x> but health is authenticated before its 404.
        Err(RouterError::NotConfigured | RouterError::Unauthorized) => {
            assert!(auth.is_err(), "refused although authenticated: {path:?}");
            assert_eq!(segments.first(), Some(&"v1"));
        }
        Err(_) => assert!(segments.len() >= 2 && segments[0] == "v1" && segments[1] == "rpc", "an RPC-only error for {path:?}"),
    }

    // The name segment as a whole, decoded and re-encoded.
    if let Ok(name) = decode_name(&path) {
        assert_eq!(decode_name(&encode_uri_component(&name)).as_deref(), Ok(name.as_str()));
    }

    // content-length.
    if let Some(cl) = &content_length {
        let too_large = content_length_too_large(Some(cl));
        let t = cl.trim();
        if !t.is_empty() && t.len() < 19 && t.bytes().all(|b| b.is_ascii_digit()) {
            assert_eq!(too_large, t.parse::<u64>().unwrap() > MAX_BODY_BYTES as u64, "content-length {cl:?}");
        }
    }

    // The body check agrees with the full decode.
    let text = decode_utf8(body);
    let parsed = Value::parse(&text);
    match check_body(body) {
        Ok(forwarded) => {
            assert_eq!(forwarded, text, "the forwarded text is the decoded body");
            assert!(matches!(parsed, Ok(Value::Array(_))), "check_body accepted a non-array: {parsed:?}");
        }
        Err(RouterError::NotAnArray) => assert!(matches!(parsed, Ok(ref v) if !matches!(v, Value::Array(_))), "NotAnArray vs {parsed:?}"),
        Err(RouterError::MalformedBody) => assert!(parsed.is_err(), "check_body refused what parses: {text:?}"),
        Err(RouterError::TooManyValues) => {}
        Err(e) => panic!("unexpected body verdict {e:?}"),
    }
});
