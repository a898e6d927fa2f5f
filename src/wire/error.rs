//! Errors as they travel on the wire: `{"error":{"name","message"}}` with a status code.
//!
//! [`RpcError`] is what a Durable Object method "throws". The router turns it into HTTP 500
//! exactly as the deployed reference does (wire.md §5): built-in JavaScript error names
//! survive, any other name becomes `Error` with `"<name>: "` prefixed to the message.
//! [`RouterError`] is the router's own table of failures.
//!
//! Knows no core: which method fails, and why, is the caller's.

use super::value::write_string;

/// JavaScript's built-in error constructors: their names survive the DO → router hop.
const BUILTIN_ERROR_NAMES: [&str; 8] =
    ["Error", "TypeError", "RangeError", "SyntaxError", "ReferenceError", "EvalError", "URIError", "AggregateError"];

/// A thrown DO error, already in its deployed wire form (see [`RpcError::custom`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    pub name: String,
    pub message: String,
}

impl RpcError {
    /// A plain `Error`.
    pub fn error(message: impl Into<String>) -> Self {
        RpcError { name: "Error".into(), message: message.into() }
    }
    pub fn type_error(message: impl Into<String>) -> Self {
        RpcError { name: "TypeError".into(), message: message.into() }
    }
    pub fn range_error(message: impl Into<String>) -> Self {
        RpcError { name: "RangeError".into(), message: message.into() }
    }
    /// An error class of the reference's own (e.g. `ZodError`, `AttributeValidationError`):
    /// on workerd it reaches the router as `Error` with `"<name>: "` prefixed.
    pub fn custom(name: &str, message: &str) -> Self {
        if BUILTIN_ERROR_NAMES.contains(&name) {
            RpcError { name: name.into(), message: message.into() }
        } else {
            RpcError { name: "Error".into(), message: format!("{name}: {message}") }
        }
    }
    /// zod's `ZodError`; `issues_json` is the pretty-printed issue list.
    pub fn zod(issues_json: &str) -> Self {
        Self::custom("ZodError", issues_json)
    }
    pub fn attribute(message: &str) -> Self {
        Self::custom("AttributeValidationError", message)
    }
    /// The list call of the platform refuses limits below one.
    pub fn list_limit() -> Self {
        Self::type_error("List limit must be positive.")
    }
    /// A response value held an invalid Date.
    pub fn invalid_time() -> Self {
        Self::range_error("Invalid time value")
    }
    pub fn body(&self) -> String {
        error_body(&self.name, &self.message)
    }
}

impl From<super::value::InvalidDate> for RpcError {
    fn from(_: super::value::InvalidDate) -> Self {
        RpcError::invalid_time()
    }
}

/// `{"error":{"name":…,"message":…}}`.
pub fn error_body(name: &str, message: &str) -> String {
    let mut out = String::from("{\"error\":{\"name\":");
    write_string(&mut out, name);
    out.push_str(",\"message\":");
    write_string(&mut out, message);
    out.push_str("}}");
    out
}

/// The router's own failures (wire.md §5, "Complete router error table").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouterError {
    UnknownPath(String),
    NotConfigured,
    Unauthorized,
    ExpectedRpcShape,
    UnknownBinding(String),
    UnknownMethod {
        binding: String,
        method: String,
    },
    PayloadTooLarge,
    /// Our limit: more JSON values than [`super::check::MAX_VALUES`] (a body the DO could
    /// not decode within the isolate's memory).
    TooManyValues,
    MalformedBody,
    NotAnArray,
    /// Our fix of a reference quirk: an invalid percent-escape in the DO name
    /// (the reference lets `URIError` escape as an uncaught 500).
    MalformedName,
    MissingBinding(&'static str),
    /// `/v1/index/*` with another HTTP method than POST (spec-0.4 wire.md §4).
    ExpectedPost,
    /// A console file (`/console…`) with another HTTP method than GET or HEAD.
    ExpectedGet,
    /// `/v1/index/<domain>/<op>` naming no coordinator operation (`<domain>.<op>`, verbatim).
    UnknownIndexOperation(String),
    /// The DO could not be reached or answered something we did not send.
    Internal(String),
}

pub const MAX_BODY_BYTES: u64 = 33_554_432;

impl RouterError {
    pub fn status(&self) -> u16 {
        match self {
            RouterError::UnknownPath(_)
            | RouterError::ExpectedRpcShape
            | RouterError::UnknownBinding(_)
            | RouterError::UnknownMethod { .. }
            | RouterError::UnknownIndexOperation(_) => 404,
            RouterError::ExpectedPost | RouterError::ExpectedGet => 405,
            RouterError::NotConfigured => 503,
            RouterError::Unauthorized => 401,
            RouterError::PayloadTooLarge | RouterError::TooManyValues => 413,
            RouterError::MalformedBody | RouterError::NotAnArray | RouterError::MalformedName => 400,
            RouterError::MissingBinding(_) | RouterError::Internal(_) => 500,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            RouterError::UnknownPath(_)
            | RouterError::ExpectedRpcShape
            | RouterError::UnknownBinding(_)
            | RouterError::UnknownMethod { .. }
            | RouterError::UnknownIndexOperation(_) => "NotFound",
            RouterError::ExpectedPost | RouterError::ExpectedGet => "MethodNotAllowed",
            RouterError::NotConfigured => "WorldNotConfigured",
            RouterError::Unauthorized => "Unauthorized",
            RouterError::PayloadTooLarge | RouterError::TooManyValues => "PayloadTooLarge",
            RouterError::MalformedBody | RouterError::NotAnArray | RouterError::MalformedName => "BadRequest",
            RouterError::MissingBinding(_) => "WorldMisconfigured",
            RouterError::Internal(_) => "Error",
        }
    }

    pub fn message(&self) -> String {
        match self {
            RouterError::UnknownPath(p) => format!("unknown path: {p}"),
            RouterError::NotConfigured => "WORLD_SECRET is not configured".into(),
            RouterError::Unauthorized => "invalid or missing bearer token".into(),
            RouterError::ExpectedRpcShape => "expected POST /v1/rpc/{binding}/{name}/{method}".into(),
            RouterError::UnknownBinding(b) => format!("unknown binding: {b}"),
            RouterError::UnknownMethod { binding, method } => format!("unknown method: {binding}.{method}"),
            RouterError::PayloadTooLarge => format!("body exceeds {MAX_BODY_BYTES} bytes"),
            RouterError::TooManyValues => format!("body exceeds {} values", super::check::MAX_VALUES),
            RouterError::MalformedBody => "malformed rpc body".into(),
            RouterError::NotAnArray => "body must be an argument array".into(),
            RouterError::MalformedName => "malformed rpc name".into(),
            RouterError::MissingBinding(env) => format!("missing binding: {env}"),
            RouterError::ExpectedPost => "expected POST".into(),
            RouterError::ExpectedGet => "expected GET".into(),
            RouterError::UnknownIndexOperation(op) => format!("unknown index operation: {op}"),
            RouterError::Internal(m) => m.clone(),
        }
    }

    pub fn body(&self) -> String {
        error_body(self.name(), &self.message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_names_are_prefixed_builtins_kept() {
        assert_eq!(RpcError::zod("[]"), RpcError { name: "Error".into(), message: "ZodError: []".into() });
        assert_eq!(RpcError::custom("TypeError", "x"), RpcError::type_error("x"));
        assert_eq!(
            RpcError::attribute("Attribute key must not be empty").body(),
            r#"{"error":{"name":"Error","message":"AttributeValidationError: Attribute key must not be empty"}}"#
        );
    }

    #[test]
    fn router_table() {
        let rows = [
            (RouterError::UnknownPath("/v2/x".into()), 404, r#"{"error":{"name":"NotFound","message":"unknown path: /v2/x"}}"#),
            (RouterError::NotConfigured, 503, r#"{"error":{"name":"WorldNotConfigured","message":"WORLD_SECRET is not configured"}}"#),
            (RouterError::Unauthorized, 401, r#"{"error":{"name":"Unauthorized","message":"invalid or missing bearer token"}}"#),
            (
                RouterError::ExpectedRpcShape,
                404,
                r#"{"error":{"name":"NotFound","message":"expected POST /v1/rpc/{binding}/{name}/{method}"}}"#,
            ),
            (RouterError::UnknownBinding("x".into()), 404, r#"{"error":{"name":"NotFound","message":"unknown binding: x"}}"#),
            (
                RouterError::UnknownMethod { binding: "runs".into(), method: "fetch".into() },
                404,
                r#"{"error":{"name":"NotFound","message":"unknown method: runs.fetch"}}"#,
            ),
            (RouterError::ExpectedPost, 405, r#"{"error":{"name":"MethodNotAllowed","message":"expected POST"}}"#),
            (RouterError::ExpectedGet, 405, r#"{"error":{"name":"MethodNotAllowed","message":"expected GET"}}"#),
            (
                RouterError::UnknownIndexOperation("runs.li%73t".into()),
                404,
                r#"{"error":{"name":"NotFound","message":"unknown index operation: runs.li%73t"}}"#,
            ),
            (RouterError::PayloadTooLarge, 413, r#"{"error":{"name":"PayloadTooLarge","message":"body exceeds 33554432 bytes"}}"#),
            (RouterError::MalformedBody, 400, r#"{"error":{"name":"BadRequest","message":"malformed rpc body"}}"#),
            (RouterError::NotAnArray, 400, r#"{"error":{"name":"BadRequest","message":"body must be an argument array"}}"#),
            (
                RouterError::MissingBinding("WORKFLOW_QUEUE"),
                500,
                r#"{"error":{"name":"WorldMisconfigured","message":"missing binding: WORKFLOW_QUEUE"}}"#,
            ),
        ];
        for (e, status, body) in rows {
            assert_eq!(e.status(), status);
            assert_eq!(e.body(), body);
        }
    }
}
