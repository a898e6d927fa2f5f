//! The router's decisions (wire.md §1–4, spec-0.4 wire.md §2), as plain functions of the
//! request's method, pathname, `authorization` header and the configured secret. The wasm
//! shell feeds them and performs the I/O; everything here is tested natively.
//!
//! ## Dispatch order (one deployment for the 0.3 and the 0.4 client)
//! 1. first segment not `v1` → 404; `v1/health` (exactly) → health;
//! 2. a **health-probe path** (second segment percent-decoding to `health`: `/v1/health/x`,
//!    `/v1/he%61lth`) → 404 before authentication, the 0.3 order that the 0.3 golden rows
//!    pin byte for byte (the 0.4 reference authenticates these first: recorded as a
//!    conflict in `tests/golden-conflicts.json`);
//! 3. authenticate (0.4: every other `/v1/…` path, so `/v1/nope` is a 401 without a token);
//! 4. `v1/index/<domain>/<op>` → the index coordinator ([`Route::Index`]);
//! 5. `v1/streams/<name>/chunks` → the binary stream route ([`Route::StreamChunks`]);
//! 6. not `rpc` → 404 `unknown path`; 7. the RPC route with the union whitelist.
//!
//! Performs no I/O and knows no core's behaviour: the cores appear here only as bindings,
//! class names and method lists.

use super::check::{check, Verdict};
use super::error::{RouterError, MAX_BODY_BYTES};
use super::uri::decode_uri_component;
use super::value::decode_utf8;

/// The exact health body (the `version` constant is stale in the reference; kept).
pub const HEALTH_BODY: &str = r#"{"ok":true,"name":"world-celld","version":"0.1.0","specVersion":6}"#;

/// The RPC bindings and their DO classes: the union of the 0.3 set (`index` stays for the
/// 0.3 client) and the 0.4 set (`hook-tokens`, `hook-ids`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    Runs,
    Streams,
    Index,
    Queue,
    HookTokens,
    HookIds,
}

impl Binding {
    pub const ALL: [Binding; 6] = [Binding::Runs, Binding::Streams, Binding::Index, Binding::Queue, Binding::HookTokens, Binding::HookIds];

    pub fn from_key(key: &str) -> Option<Binding> {
        Binding::ALL.into_iter().find(|b| b.key() == key)
    }

    pub fn key(self) -> &'static str {
        match self {
            Binding::Runs => "runs",
            Binding::Streams => "streams",
            Binding::Index => "index",
            Binding::Queue => "queue",
            Binding::HookTokens => "hook-tokens",
            Binding::HookIds => "hook-ids",
        }
    }

    pub fn class_name(self) -> &'static str {
        match self {
            Binding::Runs => "WorkflowRunDO",
            Binding::Streams => "StreamDO",
            Binding::Index => "IndexDO",
            Binding::Queue => "QueueDO",
            Binding::HookTokens => "HookTokenDO",
            Binding::HookIds => "HookIdDO",
        }
    }

    /// The environment binding name, taken from wrangler.toml at build time (build.rs
    /// checks that the hook shard classes are bound under these names).
    pub fn env_name(self) -> &'static str {
        match self {
            Binding::HookTokens => "WORKFLOW_HOOK_TOKENS",
            Binding::HookIds => "WORKFLOW_HOOK_IDS",
            _ => crate::DO_ENV_BINDINGS.iter().find(|(class, _)| *class == self.class_name()).map(|(_, env)| *env).unwrap_or(""),
        }
    }

    /// The whitelist (wire.md §7, spec-0.4 wire.md §7): the methods a client may call on
    /// `/v1/rpc/<binding>/…`. Nothing else is callable; the cores dispatch more methods than
    /// these (internal ones, reached only by a hop). Each list keeps its order: the fuzz
    /// seeds name methods by index (`scripts/fuzz-seeds.mjs` reads the lists here).
    ///
    /// * `runs` (`WorkflowRunDO`): 0.3's eleven, then 0.4's `getLifecycleStatus` and
    ///   `resolveHookTokenClaim`. `enforceRetention` (the cron sweep's) is internal.
    /// * `streams` (`StreamDO`): the 0.3 order first, then 0.4's additions. 0.3 clients still
    ///   call `writeChunk`/`getChunks`/`getInfo` (issue #10; the 0.4 golden rows that expect
    ///   them refused are listed in `tests/golden-conflicts.json`); `writeChunks` /
    ///   `readChunks` are reached only through the binary route
    ///   (`/v1/streams/<name>/chunks`), never over RPC.
    /// * `index` (`IndexDO`): every method of the 0.3 class.
    /// * `queue` (`QueueDO`): the 0.4 set.
    /// * `hook-tokens`, `hook-ids`: only the lifecycle-checked read; the rest of the class
    ///   is internal.
    pub fn methods(self) -> &'static [&'static str] {
        match self {
            Binding::Runs => &[
                "applyEvent",
                "getLifecycleStatus",
                "getRun",
                "getStep",
                "getEvent",
                "listEvents",
                "listSteps",
                "listHooks",
                "getCleanupStatus",
                "scheduleCleanup",
                "cleanupNow",
                "rearmCleanup",
                "resolveHookTokenClaim",
            ],
            Binding::Streams => &[
                "writeChunk",
                "closeStream",
                "getChunks",
                "getInfo",
                "registerStream",
                "listStreams",
                "expireRegistry",
                "finalizeRegistry",
                "expireStream",
                "failStream",
            ],
            Binding::Index => &[
                "get",
                "put",
                "delete",
                "putOwned",
                "expireRun",
                "list",
                "reserveHookToken",
                "finalizeHookIndexes",
                "releaseHookToken",
                "deleteHookIndexes",
            ],
            Binding::Queue => &[
                "enqueue",
                "stats",
                "listDeadLetters",
                "redriveDeadLetter",
                "purgeDeadLetters",
                "rearmAlarm",
                "expireRun",
                "acknowledgeExpireRun",
            ],
            Binding::HookTokens | Binding::HookIds => &["get"],
        }
    }
}

/// Where a request goes once its path and credentials are checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Health,
    /// An authenticated, whitelisted RPC; the body still has to be read and checked.
    Rpc {
        binding: Binding,
        encoded_name: String,
        method: String,
    },
    /// An authenticated `/v1/index/<domain>/<op>` (the segments verbatim).
    Index {
        domain: String,
        op: String,
    },
    /// An authenticated `/v1/streams/<segment>/chunks` (the segment as received).
    StreamChunks {
        segment: String,
    },
    /// An authenticated `/v1/admin/…` request: the admin front door checks the rest
    /// ([`crate::admin`]).
    Admin,
    /// A file of the operator console (`/console`, `/console/<file>`): static, served
    /// without authentication (it holds no secret and asks for one).
    Console(ConsoleFile),
}

/// The operator console's files (`src/shell/console/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsoleFile {
    Page,
    Script,
    Style,
}

impl ConsoleFile {
    /// The file a path names after `/console`: none (or `/`) is the page.
    fn of(rest: &[&str]) -> Option<ConsoleFile> {
        match rest {
            [] | ["index.html"] => Some(ConsoleFile::Page),
            ["console.js"] => Some(ConsoleFile::Script),
            ["console.css"] => Some(ConsoleFile::Style),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ConsoleFile::Page => "page",
            ConsoleFile::Script => "script",
            ConsoleFile::Style => "style",
        }
    }
}

/// Is the second path segment a spelling of `health` (percent-decoded)? Such paths keep
/// the 0.3 order: their 404 comes before authentication.
fn is_health_probe(segment: &str) -> bool {
    segment == "health" || decode_uri_component(segment).is_some_and(|s| s == "health")
}

/// The bearer secrets a request may carry: `WORLD_SECRET` and, during a rotation,
/// `WORLD_SECRET_PREVIOUS` (operations.md, "Rotating the secret"). An empty one is as if
/// absent; without a current one every authenticated route fails closed, whatever the
/// previous one is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Secrets<'a> {
    pub current: Option<&'a str>,
    pub previous: Option<&'a str>,
}

impl<'a> Secrets<'a> {
    /// `WORLD_SECRET` and `WORLD_SECRET_PREVIOUS` as the environment holds them.
    pub fn new(current: Option<&'a str>, previous: Option<&'a str>) -> Self {
        Secrets { current, previous }
    }
}

impl<'a> From<Option<&'a str>> for Secrets<'a> {
    /// One secret, no rotation in progress.
    fn from(current: Option<&'a str>) -> Self {
        Secrets { current, previous: None }
    }
}

/// Decide the route from the HTTP method, the pathname as received (percent-encoded), the
/// `authorization` header and the secrets ([`Secrets`]).
pub fn route<'s>(method: &str, pathname: &str, authorization: Option<&str>, secrets: impl Into<Secrets<'s>>) -> Result<Route, RouterError> {
    let secrets = secrets.into();
    let segments: Vec<&str> = pathname.split('/').filter(|s| !s.is_empty()).collect();
    let unknown = || RouterError::UnknownPath(pathname.to_string());
    if segments.first() == Some(&"console") {
        let file = ConsoleFile::of(&segments[1..]).ok_or_else(unknown)?;
        return if matches!(method, "GET" | "HEAD") { Ok(Route::Console(file)) } else { Err(RouterError::ExpectedGet) };
    }
    if segments.first() != Some(&"v1") {
        return Err(unknown());
    }
    match segments.get(1) {
        Some(&"health") if segments.len() == 2 => return Ok(Route::Health),
        Some(second) if is_health_probe(second) => return Err(unknown()),
        _ => {}
    }
    authenticate(authorization, secrets)?;
    match (segments.get(1), segments.len()) {
        (Some(&"index"), 4) => return Ok(Route::Index { domain: segments[2].to_string(), op: segments[3].to_string() }),
        (Some(&"streams"), 4) if segments[3] == "chunks" => return Ok(Route::StreamChunks { segment: segments[2].to_string() }),
        (Some(&"admin"), _) => return Ok(Route::Admin),
        (Some(&"rpc"), _) => {}
        _ => return Err(unknown()),
    }
    if method != "POST" || segments.len() != 5 {
        return Err(RouterError::ExpectedRpcShape);
    }
    let (binding_key, encoded_name, method_name) = (segments[2], segments[3], segments[4]);
    let binding = Binding::from_key(binding_key).ok_or_else(|| RouterError::UnknownBinding(binding_key.to_string()))?;
    if !binding.methods().contains(&method_name) {
        return Err(RouterError::UnknownMethod { binding: binding_key.to_string(), method: method_name.to_string() });
    }
    Ok(Route::Rpc { binding, encoded_name: encoded_name.to_string(), method: method_name.to_string() })
}

/// The seven operations of `POST /v1/index/{runs|hooks}/{op}`, served by the index
/// coordinator ([`crate::coordinator`]). The order of [`IndexOp::ALL`] is fixed: the fuzz
/// seeds name operations by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexOp {
    RunsList,
    RunsCommit,
    RunsExpire,
    HooksReserve,
    HooksFinalize,
    HooksReleaseReservation,
    HooksRelease,
}

impl IndexOp {
    pub const ALL: [IndexOp; 7] = [
        IndexOp::RunsList,
        IndexOp::RunsCommit,
        IndexOp::RunsExpire,
        IndexOp::HooksReserve,
        IndexOp::HooksFinalize,
        IndexOp::HooksReleaseReservation,
        IndexOp::HooksRelease,
    ];

    /// `<domain>.<operation>`.
    pub fn name(self) -> &'static str {
        match self {
            IndexOp::RunsList => "runs.list",
            IndexOp::RunsCommit => "runs.commit",
            IndexOp::RunsExpire => "runs.expire",
            IndexOp::HooksReserve => "hooks.reserve",
            IndexOp::HooksFinalize => "hooks.finalize",
            IndexOp::HooksReleaseReservation => "hooks.release-reservation",
            IndexOp::HooksRelease => "hooks.release",
        }
    }

    /// The operation of a path's domain and operation segments, verbatim (no decoding).
    pub fn parse(domain: &str, op: &str) -> Option<IndexOp> {
        IndexOp::ALL.into_iter().find(|o| o.name().split_once('.') == Some((domain, op)))
    }

    /// The operation of its [`IndexOp::name`].
    pub fn from_name(name: &str) -> Option<IndexOp> {
        IndexOp::ALL.into_iter().find(|o| o.name() == name)
    }
}

/// What the router does with a request before it reads the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Answer at once (health, or an error that precedes the body).
    Answer(u16, String),
    /// Read the body (size-limited); answer its error if it has one, else this one. The
    /// reference checks the body before it decodes the name, so a request that is wrong in
    /// both answers the body's error.
    AfterBody(RouterError),
    /// Forward the body to the instance `name` (decoded) of `binding`.
    Forward { binding: Binding, name: String, method: String },
    /// Read the body (size-limited, parsed before anything else) and run this index
    /// coordinator operation over it ([`crate::coordinator`]).
    Index(IndexOp),
    /// Hand the request to the binary stream route, with its `{name}` segment as received.
    StreamChunks(String),
    /// Hand the request (method, path, query) to the admin front door ([`crate::admin`]).
    Admin,
    /// Serve a console file.
    Console(ConsoleFile),
}

/// The router's whole decision before the body: [`route`], the `content-length` limit and
/// the instance name (wire.md §1–4). The binding's presence in the environment is the
/// shell's to check (after the body, as [`RouterError::MissingBinding`]).
pub fn decide<'s>(
    method: &str,
    pathname: &str,
    authorization: Option<&str>,
    secrets: impl Into<Secrets<'s>>,
    content_length: Option<&str>,
) -> Decision {
    let refuse = |e: RouterError| Decision::Answer(e.status(), e.body());
    match route(method, pathname, authorization, secrets) {
        Ok(Route::Health) => Decision::Answer(200, HEALTH_BODY.to_string()),
        Ok(Route::StreamChunks { segment }) => Decision::StreamChunks(segment),
        Ok(Route::Admin) => Decision::Admin,
        Ok(Route::Console(file)) => Decision::Console(file),
        // spec-0.4 wire.md §4: method, size, body, then the operation name.
        Ok(Route::Index { .. }) if method != "POST" => refuse(RouterError::ExpectedPost),
        Ok(Route::Index { .. } | Route::Rpc { .. }) if content_length_too_large(content_length) => refuse(RouterError::PayloadTooLarge),
        Ok(Route::Index { domain, op }) => match IndexOp::parse(&domain, &op) {
            Some(op) => Decision::Index(op),
            None => Decision::AfterBody(RouterError::UnknownIndexOperation(format!("{domain}.{op}"))),
        },
        Ok(Route::Rpc { binding, encoded_name, method }) => match decode_name(&encoded_name) {
            Ok(name) => Decision::Forward { binding, name, method },
            Err(e) => Decision::AfterBody(e),
        },
        Err(e) => refuse(e),
    }
}

/// The router's verdict on a body it must check itself (before answering an error that
/// comes after the body check): `None` for a well-formed argument array.
pub fn body_error(bytes: &[u8]) -> Option<RouterError> {
    check_body(bytes).err()
}

/// Bearer authentication (wire.md §3): fail closed without a current secret, exact
/// `Bearer ` prefix, untrimmed token, constant-time comparison. During a rotation the token
/// may be the previous secret instead; both are compared whatever the first comparison
/// gives, so the time taken does not tell which one matched.
pub fn authenticate<'s>(authorization: Option<&str>, secrets: impl Into<Secrets<'s>>) -> Result<(), RouterError> {
    let secrets = secrets.into();
    let secret = secrets.current.filter(|s| !s.is_empty()).ok_or(RouterError::NotConfigured)?;
    let token = authorization.and_then(|h| h.strip_prefix("Bearer ")).unwrap_or("");
    let current = constant_time_eq(token.as_bytes(), secret.as_bytes());
    let previous = secrets.previous.filter(|s| !s.is_empty()).is_some_and(|p| constant_time_eq(token.as_bytes(), p.as_bytes()));
    if !token.is_empty() && (current | previous) {
        Ok(())
    } else {
        Err(RouterError::Unauthorized)
    }
}

/// Equality whose running time depends only on the length of `given` (the caller's token),
/// never on the secret's content or length.
pub fn constant_time_eq(given: &[u8], secret: &[u8]) -> bool {
    if secret.is_empty() {
        return given.is_empty();
    }
    let mut diff = (given.len() ^ secret.len()) as u64;
    for (i, b) in given.iter().enumerate() {
        diff |= u64::from(b ^ secret[i % secret.len()]);
    }
    diff == 0
}

/// Is a `content-length` header over the limit? Non-numeric values are ignored, as in
/// the reference (`Number()`: hex and exponent forms count as numbers).
pub fn content_length_too_large(header: Option<&str>) -> bool {
    let Some(text) = header.map(str::trim) else { return false };
    if !text.is_empty() && text.len() <= 15 && text.bytes().all(|c| c.is_ascii_digit()) {
        // The common form, exactly (15 digits stay below 2^53).
        return text.parse::<u64>().is_ok_and(|v| v > MAX_BODY_BYTES);
    }
    let value = if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).map(|v| v as f64).ok()
    } else if text == "Infinity" || text == "+Infinity" {
        Some(f64::INFINITY)
    } else if text.bytes().all(|c| c.is_ascii_digit() || b".eE+-".contains(&c)) {
        text.parse::<f64>().ok()
    } else {
        None
    };
    value.is_some_and(|v| v > MAX_BODY_BYTES as f64)
}

/// Check an RPC body and return the UTF-8 text that the DO hop forwards (the DO decodes
/// it into the argument array). Same verdicts as a full [`Value::parse`](super::Value::parse), without
/// building the values.
pub fn check_body(bytes: &[u8]) -> Result<String, RouterError> {
    let text = decode_utf8(bytes).into_owned();
    match check(&text) {
        Verdict::Array => Ok(text),
        Verdict::NotArray => Err(RouterError::NotAnArray),
        Verdict::Malformed => Err(RouterError::MalformedBody),
        Verdict::TooManyValues => Err(RouterError::TooManyValues),
    }
}

/// The DO name from its path segment (`decodeURIComponent`). An invalid escape is a 400
/// here (the reference lets a `URIError` escape as a bare 500; wire.md allows this fix).
pub fn decode_name(encoded: &str) -> Result<String, RouterError> {
    decode_uri_component(encoded).ok_or(RouterError::MalformedName)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Option<&str> = Some("s3cret");
    const AUTH: Option<&str> = Some("Bearer s3cret");

    #[test]
    fn health_ignores_method_auth_and_empty_segments() {
        for p in ["/v1/health", "//v1/health", "/v1//health/", "/v1/health/"] {
            assert_eq!(route("DELETE", p, None, None), Ok(Route::Health), "{p}");
        }
        assert_eq!(route("GET", "/v1/health/extra", None, S), Err(RouterError::UnknownPath("/v1/health/extra".into())));
        assert_eq!(route("GET", "/", None, S), Err(RouterError::UnknownPath("/".into())));
        assert_eq!(route("GET", "/v2/x", None, S), Err(RouterError::UnknownPath("/v2/x".into())));
    }

    #[test]
    fn auth_precedes_shape_checks() {
        assert_eq!(route("GET", "/v1/rpc/x", None, S), Err(RouterError::Unauthorized));
        assert_eq!(route("GET", "/v1/rpc/x", AUTH, None), Err(RouterError::NotConfigured));
        assert_eq!(route("GET", "/v1/rpc/x", AUTH, Some("")), Err(RouterError::NotConfigured));
        assert_eq!(route("GET", "/v1/rpc/runs/a/getRun", AUTH, S), Err(RouterError::ExpectedRpcShape));
        assert_eq!(route("POST", "/v1/rpc/runs/a", AUTH, S), Err(RouterError::ExpectedRpcShape));
    }

    #[test]
    fn bearer_token_is_exact() {
        for bad in ["bearer s3cret", "Bearer s3cret ", "Bearer  s3cret", "Bearer ", "s3cret", "Bearer s3cre", "Bearer s3cretX"] {
            assert_eq!(authenticate(Some(bad), S), Err(RouterError::Unauthorized), "{bad:?}");
        }
        assert_eq!(authenticate(None, S), Err(RouterError::Unauthorized));
        assert_eq!(authenticate(AUTH, S), Ok(()));
    }

    #[test]
    fn console_and_admin_routes() {
        // The console: no secret needed, GET or HEAD only, three files.
        assert_eq!(route("GET", "/console", None, None), Ok(Route::Console(ConsoleFile::Page)));
        assert_eq!(route("HEAD", "/console/", None, S), Ok(Route::Console(ConsoleFile::Page)));
        assert_eq!(route("GET", "/console/console.js", None, S), Ok(Route::Console(ConsoleFile::Script)));
        assert_eq!(route("GET", "/console/console.css", None, S), Ok(Route::Console(ConsoleFile::Style)));
        assert_eq!(route("POST", "/console", None, S), Err(RouterError::ExpectedGet));
        assert_eq!(route("GET", "/console/x", None, S), Err(RouterError::UnknownPath("/console/x".into())));
        assert_eq!(route("GET", "/console/../v1", None, S), Err(RouterError::UnknownPath("/console/../v1".into())));
        // Admin: authenticated first, like every other /v1 path.
        assert_eq!(route("GET", "/v1/admin/queues", None, S), Err(RouterError::Unauthorized));
        assert_eq!(route("GET", "/v1/admin/queues", AUTH, None), Err(RouterError::NotConfigured));
        assert_eq!(route("GET", "/v1/admin/queues", AUTH, S), Ok(Route::Admin));
        assert_eq!(decide("POST", "/v1/admin/anything", AUTH, S, None), Decision::Admin);
        assert_eq!(decide("GET", "/console", None, None, None), Decision::Console(ConsoleFile::Page));
    }

    #[test]
    fn the_previous_secret_is_accepted_while_set() {
        let rotating = Secrets::new(Some("new"), Some("old"));
        assert_eq!(authenticate(Some("Bearer new"), rotating), Ok(()));
        assert_eq!(authenticate(Some("Bearer old"), rotating), Ok(()));
        for bad in ["Bearer ", "Bearer ol", "Bearer oldX", "Bearer new old", "old"] {
            assert_eq!(authenticate(Some(bad), rotating), Err(RouterError::Unauthorized), "{bad:?}");
        }
        // Removed (or empty): the previous secret is refused; an empty one never matches.
        assert_eq!(authenticate(Some("Bearer old"), Secrets::new(Some("new"), None)), Err(RouterError::Unauthorized));
        assert_eq!(authenticate(Some("Bearer "), Secrets::new(Some("new"), Some(""))), Err(RouterError::Unauthorized));
        assert_eq!(authenticate(None, Secrets::new(Some("new"), Some(""))), Err(RouterError::Unauthorized));
        // No current secret: closed, whatever the previous one is.
        assert_eq!(authenticate(Some("Bearer old"), Secrets::new(None, Some("old"))), Err(RouterError::NotConfigured));
        assert_eq!(authenticate(Some("Bearer old"), Secrets::new(Some(""), Some("old"))), Err(RouterError::NotConfigured));
        assert_eq!(route("POST", "/v1/rpc/runs/r/getRun", Some("Bearer old"), rotating).map(|_| ()), Ok(()));
        assert!(matches!(decide("POST", "/v1/rpc/runs/r/getRun", Some("Bearer old"), rotating, None), Decision::Forward { .. }));
    }

    #[test]
    fn bindings_and_whitelist() {
        assert_eq!(
            route("POST", "/v1/rpc/streams/stream%3Afoo/writeChunk", AUTH, S),
            Ok(Route::Rpc { binding: Binding::Streams, encoded_name: "stream%3Afoo".into(), method: "writeChunk".into() })
        );
        assert_eq!(route("POST", "/v1/rpc/nope/a/get", AUTH, S), Err(RouterError::UnknownBinding("nope".into())));
        assert_eq!(route("POST", "/v1/rpc/constructor/a/get", AUTH, S), Err(RouterError::UnknownBinding("constructor".into())));
        for m in ["fetch", "alarm", "constructor", "claimInflight", "releaseInflight"] {
            assert_eq!(
                route("POST", &format!("/v1/rpc/runs/a/{m}"), AUTH, S),
                Err(RouterError::UnknownMethod { binding: "runs".into(), method: m.into() })
            );
        }
        assert_eq!(Binding::Queue.env_name(), "WORKFLOW_QUEUE");
        assert_eq!(Binding::Runs.env_name(), "WORKFLOW_DB");
    }

    #[test]
    fn decisions_before_the_body() {
        let d = |m: &str, p: &str, cl: Option<&str>| decide(m, p, AUTH, S, cl);
        assert_eq!(d("GET", "/v1/health", None), Decision::Answer(200, HEALTH_BODY.into()));
        let e = RouterError::UnknownPath("/nope".into());
        assert_eq!(d("GET", "/nope", None), Decision::Answer(404, e.body()));
        assert_eq!(decide("POST", "/v1/rpc/runs/a/getRun", None, S, None), Decision::Answer(401, RouterError::Unauthorized.body()));
        let big = RouterError::PayloadTooLarge;
        assert_eq!(d("POST", "/v1/rpc/runs/a/getRun", Some("33554433")), Decision::Answer(413, big.body()));
        // The content-length check precedes the name: a bad name with a huge body is a 413.
        assert_eq!(d("POST", "/v1/rpc/runs/%E0%A4%A/getRun", Some("1e9")), Decision::Answer(413, big.body()));
        assert_eq!(d("POST", "/v1/rpc/runs/%E0%A4%A/getRun", None), Decision::AfterBody(RouterError::MalformedName));
        assert_eq!(
            d("POST", "/v1/rpc/streams/stream%3Afoo/getInfo", Some("2")),
            Decision::Forward { binding: Binding::Streams, name: "stream:foo".into(), method: "getInfo".into() }
        );
        assert_eq!(body_error(b"[]"), None);
        assert_eq!(body_error(b"{}"), Some(RouterError::NotAnArray));
        assert_eq!(body_error(b"[").map(|e| e.status()), Some(400));
    }

    #[test]
    fn dispatch_order_of_the_04_routes() {
        let unauthorized = Err(RouterError::Unauthorized);
        // 0.4: authentication precedes the unknown-path 404 …
        for p in ["/v1/nope", "/v1", "/v1/index/runs/list", "/v1/index/x", "/v1/streams/s/chunks", "/v1/streams/x/other", "/v1/RPC/x"] {
            assert_eq!(route("GET", p, None, S), unauthorized, "{p}");
            assert_eq!(route("GET", p, AUTH, None), Err(RouterError::NotConfigured), "{p}");
        }
        // … except for health-probe paths, which keep the 0.3 order (0.3 golden rows).
        for p in ["/v1/health/extra", "/v1/he%61lth", "/v1/health/x"] {
            assert_eq!(route("GET", p, None, None), Err(RouterError::UnknownPath(p.into())), "{p}");
        }
        let unknown = |p: &str| Err(RouterError::UnknownPath(p.into()));
        for p in [
            "/v1/nope",
            "/v1",
            "/v1/index/runs",
            "/v1/index/runs/list/x",
            "/v1/streams/stream%3Ax",
            "/v1/streams/x/other",
            "/v1/streams/a/b/chunks",
        ] {
            assert_eq!(route("POST", p, AUTH, S), unknown(p), "{p}");
        }
        assert_eq!(route("POST", "/v1/index/runs/list/", AUTH, S), Ok(Route::Index { domain: "runs".into(), op: "list".into() }));
        assert_eq!(route("HEAD", "/v1/streams/stream%3Ax/chunks", AUTH, S), Ok(Route::StreamChunks { segment: "stream%3Ax".into() }));
    }

    #[test]
    fn index_decisions() {
        let d = |m: &str, p: &str, cl: Option<&str>| decide(m, p, AUTH, S, cl);
        let not_post = RouterError::ExpectedPost;
        for m in ["GET", "PUT", "DELETE", "HEAD"] {
            assert_eq!(d(m, "/v1/index/runs/list", None), Decision::Answer(405, not_post.body()), "{m}");
        }
        assert_eq!(decide("GET", "/v1/index/runs/list", None, S, None), Decision::Answer(401, RouterError::Unauthorized.body()));
        assert_eq!(d("POST", "/v1/index/runs/list", Some("33554433")), Decision::Answer(413, RouterError::PayloadTooLarge.body()));
        assert_eq!(d("POST", "/v1/index/runs/list", Some("2")), Decision::Index(IndexOp::RunsList));
        assert_eq!(d("POST", "/v1/index/hooks/release-reservation", None), Decision::Index(IndexOp::HooksReleaseReservation));
        // The body is checked before the operation name.
        assert_eq!(d("POST", "/v1/index/runs/li%73t", None), Decision::AfterBody(RouterError::UnknownIndexOperation("runs.li%73t".into())));
        assert_eq!(d("POST", "/v1/index/Runs/list", None), Decision::AfterBody(RouterError::UnknownIndexOperation("Runs.list".into())));
        assert_eq!(d("PUT", "/v1/streams/stream%3Ax/chunks", None), Decision::StreamChunks("stream%3Ax".into()));
    }

    #[test]
    fn whitelist_is_the_union_of_both_versions() {
        let ok = |p: &str| matches!(route("POST", p, AUTH, S), Ok(Route::Rpc { .. }));
        for p in [
            "/v1/rpc/runs/r/getLifecycleStatus",
            "/v1/rpc/runs/r/resolveHookTokenClaim",
            "/v1/rpc/queue/q%3A0/acknowledgeExpireRun",
            "/v1/rpc/hook-tokens/anything/get",
            "/v1/rpc/hook-ids/hook-id%3Av1%3A19/get",
            "/v1/rpc/index/index/get",
            "/v1/rpc/streams/stream%3As/writeChunk",
            "/v1/rpc/streams/stream%3As/getChunks",
            "/v1/rpc/streams/stream%3As/getInfo",
        ] {
            assert!(ok(p), "{p}");
        }
        let not_found = |p: &str| route("POST", p, AUTH, S).map_err(|e| e.message());
        assert_eq!(not_found("/v1/rpc/run-catalog/x/upsertRun"), Err("unknown binding: run-catalog".into()));
        for (p, m) in [
            ("/v1/rpc/hook-tokens/x/finalize", "hook-tokens.finalize"),
            ("/v1/rpc/hook-tokens/x/reserve", "hook-tokens.reserve"),
            ("/v1/rpc/hook-ids/x/publish", "hook-ids.publish"),
            ("/v1/rpc/hook-ids/x/legacyGet", "hook-ids.legacyGet"),
            ("/v1/rpc/streams/s/readChunks", "streams.readChunks"),
            ("/v1/rpc/streams/s/writeChunks", "streams.writeChunks"),
            ("/v1/rpc/runs/r/enforceRetention", "runs.enforceRetention"),
        ] {
            assert_eq!(not_found(p), Err(format!("unknown method: {m}")), "{p}");
        }
        assert_eq!(Binding::HookTokens.env_name(), "WORKFLOW_HOOK_TOKENS");
        assert_eq!(Binding::HookIds.env_name(), "WORKFLOW_HOOK_IDS");
    }

    #[test]
    fn bodies() {
        assert_eq!(check_body(b"").unwrap_err(), RouterError::MalformedBody);
        assert_eq!(check_body(b"{").unwrap_err(), RouterError::MalformedBody);
        assert_eq!(check_body(b"[{\"__type\":\"Uint8Array\",\"data\":\"!\"}]").unwrap_err(), RouterError::MalformedBody);
        assert_eq!(check_body(b"{}").unwrap_err(), RouterError::NotAnArray);
        assert_eq!(check_body(b"null").unwrap_err(), RouterError::NotAnArray);
        assert_eq!(check_body(b"\xEF\xBB\xBF[1]").unwrap(), "[1]");
        assert!(content_length_too_large(Some("33554433")));
        assert!(content_length_too_large(Some("1e9")));
        assert!(content_length_too_large(Some("0x2000001")));
        assert!(!content_length_too_large(Some("33554432")));
        assert!(!content_length_too_large(Some("abc")));
        assert!(!content_length_too_large(None));
        assert_eq!(decode_name("q%3A0").unwrap(), "q:0");
        assert_eq!(decode_name("%E0%A4%A").unwrap_err(), RouterError::MalformedName);
    }
}
