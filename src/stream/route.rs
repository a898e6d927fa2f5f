//! The decisions of the binary stream route `GET|POST /v1/streams/<name>/chunks` (spec-0.4
//! `wire.md` §5), after authentication (the router's): plain functions of the request's
//! method, path segment, query and headers, tested natively. The JavaScript route
//! (`src/shell/stream_route.mjs`) only reads the request, makes the hop and answers.
//!
//! Performs no I/O.

use super::protocol::{self, ProtocolError, ReadParams};
use crate::wire::error::error_body;
use crate::wire::router::decode_name;
use crate::wire::RouterError;

/// Why the route refuses a request before (or instead of) the StreamDO.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteError {
    /// `WORKFLOW_STREAMS` is not bound.
    MissingBinding,
    /// An invalid percent-escape in the name (the reference lets a `URIError` escape as a
    /// bare 500; we answer the RPC route's 400, as the 0.3 router does).
    MalformedName,
    RunIdRequired,
    MethodNotAllowed,
    UnsupportedMediaType,
    PayloadTooLarge,
    Protocol(ProtocolError),
}

impl RouteError {
    pub fn status(&self) -> u16 {
        match self {
            RouteError::MissingBinding => 500,
            RouteError::MalformedName | RouteError::RunIdRequired | RouteError::Protocol(_) => 400,
            RouteError::MethodNotAllowed => 405,
            RouteError::UnsupportedMediaType => 415,
            RouteError::PayloadTooLarge => 413,
        }
    }

    pub fn body(&self) -> String {
        match self {
            RouteError::MissingBinding => RouterError::MissingBinding(STREAMS_ENV).body(),
            RouteError::MalformedName => RouterError::MalformedName.body(),
            RouteError::RunIdRequired => error_body("BadRequest", "runId is required"),
            RouteError::MethodNotAllowed => error_body("MethodNotAllowed", "expected GET or POST"),
            RouteError::UnsupportedMediaType => error_body("UnsupportedMediaType", protocol::CONTENT_TYPE),
            RouteError::PayloadTooLarge => error_body("PayloadTooLarge", &format!("body exceeds {} bytes", protocol::MAX_WRITE_BODY_BYTES)),
            RouteError::Protocol(p) => error_body(ProtocolError::NAME, &p.message()),
        }
    }
}

/// The namespace of the StreamDO.
pub const STREAMS_ENV: &str = "WORKFLOW_STREAMS";

/// What the route does with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamRoute {
    /// Read the body (at most [`protocol::MAX_WRITE_BODY_BYTES`]), check the frame
    /// ([`check_frame`]) and append it to instance `name`.
    Write { name: String, run_id: String },
    /// Read from instance `name`.
    Read { name: String, run_id: String, params: ReadParams },
}

/// The request as the route sees it.
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamRequest<'a> {
    pub method: &'a str,
    /// The third path segment, still percent-encoded.
    pub segment: &'a str,
    /// The `runId` query parameter (URLSearchParams-decoded), `None` when absent.
    pub run_id: Option<&'a str>,
    pub content_type: Option<&'a str>,
    pub content_length: Option<&'a str>,
    pub has_binding: bool,
    /// `startIndex, maxChunks, maxBytes, waitMs` as received.
    pub query: [Option<&'a str>; 4],
}

/// The route's decision, in the reference's order: binding, name, `runId`, method, then per
/// method the content type and length (POST) or the parameters (GET).
pub fn decide(r: &StreamRequest) -> Result<StreamRoute, RouteError> {
    if !r.has_binding {
        return Err(RouteError::MissingBinding);
    }
    let name = decode_name(r.segment).map_err(|_| RouteError::MalformedName)?;
    let run_id = r.run_id.filter(|s| !s.is_empty()).ok_or(RouteError::RunIdRequired)?.to_string();
    match r.method {
        "POST" => {
            if !r.content_type.is_some_and(|t| t.starts_with(protocol::CONTENT_TYPE)) {
                return Err(RouteError::UnsupportedMediaType);
            }
            if content_length_too_large(r.content_length) {
                return Err(RouteError::PayloadTooLarge);
            }
            Ok(StreamRoute::Write { name, run_id })
        }
        "GET" => {
            let params = protocol::parse_read_params(r.query).map_err(RouteError::Protocol)?;
            Ok(StreamRoute::Read { name, run_id, params })
        }
        _ => Err(RouteError::MethodNotAllowed),
    }
}

/// `Number(content-length) > 8389632` (a non-numeric header is ignored).
fn content_length_too_large(header: Option<&str>) -> bool {
    header.is_some_and(|h| crate::wire::js::string_to_number(h) > protocol::MAX_WRITE_BODY_BYTES as f64)
}

/// The write body's verdict before the hop: `None` for a valid `WCSW` batch.
pub fn check_frame(body: &[u8]) -> Option<RouteError> {
    protocol::decode_write(body).err().map(RouteError::Protocol)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(method: &'a str, run_id: Option<&'a str>) -> StreamRequest<'a> {
        StreamRequest {
            method,
            segment: "stream%3Arouter-s",
            run_id,
            content_type: Some(protocol::CONTENT_TYPE),
            content_length: None,
            has_binding: true,
            query: [Some("0"), Some("32"), Some("8388608"), Some("0")],
        }
    }

    #[test]
    fn order_and_answers() {
        let e = |r: StreamRequest| decide(&r).unwrap_err();
        assert_eq!(e(StreamRequest { has_binding: false, ..req("GET", None) }), RouteError::MissingBinding);
        assert_eq!(
            RouteError::MissingBinding.body(),
            r#"{"error":{"name":"WorldMisconfigured","message":"missing binding: WORKFLOW_STREAMS"}}"#
        );
        assert_eq!(e(StreamRequest { segment: "%E0", ..req("GET", Some("r")) }), RouteError::MalformedName);
        // runId precedes the method check.
        assert_eq!(e(req("PUT", None)), RouteError::RunIdRequired);
        assert_eq!(e(req("GET", Some(""))), RouteError::RunIdRequired);
        assert_eq!(RouteError::RunIdRequired.body(), r#"{"error":{"name":"BadRequest","message":"runId is required"}}"#);
        for m in ["PUT", "DELETE", "HEAD", "get"] {
            assert_eq!(e(req(m, Some("r"))), RouteError::MethodNotAllowed, "{m}");
        }
        assert_eq!(RouteError::MethodNotAllowed.status(), 405);
        for t in [None, Some("application/json"), Some("APPLICATION/VND.WORLD-CELLD.STREAM-BATCH.V1")] {
            assert_eq!(e(StreamRequest { content_type: t, ..req("POST", Some("r")) }), RouteError::UnsupportedMediaType);
        }
        assert_eq!(
            RouteError::UnsupportedMediaType.body(),
            r#"{"error":{"name":"UnsupportedMediaType","message":"application/vnd.world-celld.stream-batch.v1"}}"#
        );
        let ok =
            StreamRequest { content_type: Some("application/vnd.world-celld.stream-batch.v1; charset=binary"), ..req("POST", Some("r")) };
        assert_eq!(decide(&ok), Ok(StreamRoute::Write { name: "stream:router-s".into(), run_id: "r".into() }));
        assert_eq!(e(StreamRequest { content_length: Some("8389633"), ..req("POST", Some("r")) }), RouteError::PayloadTooLarge);
        assert_eq!(RouteError::PayloadTooLarge.body(), r#"{"error":{"name":"PayloadTooLarge","message":"body exceeds 8389632 bytes"}}"#);
        assert!(decide(&StreamRequest { content_length: Some("8389632"), ..req("POST", Some("r")) }).is_ok());
        assert_eq!(
            decide(&req("GET", Some(" "))),
            Ok(StreamRoute::Read {
                name: "stream:router-s".into(),
                run_id: " ".into(),
                params: ReadParams { start_index: 0, max_chunks: 32, max_bytes: 8_388_608, wait_ms: 0 }
            })
        );
        let bad = StreamRequest { query: [Some("0"), Some("1"), Some("1048575"), Some("0")], ..req("GET", Some("r")) };
        assert_eq!(
            e(bad).body(),
            r#"{"error":{"name":"StreamProtocolError","message":"maxBytes must be an integer between 1048576 and 8388608"}}"#
        );
        assert_eq!(check_frame(b"").map(|e| e.status()), Some(400));
        assert_eq!(check_frame(&protocol::encode_write(&[b"x"])), None);
    }
}
