//! The router's decisions as the JavaScript entry (`entry.mjs`) calls them: one call
//! before the body ([`route`]), and the answers it needs after (body errors, a missing
//! binding, a failed hop). Every answer is a string the entry can use without further
//! calls: `A<status><body>` (answer), `B<status><body>` (read and check the body first,
//! then answer this), `F<ENV>\n<method>\n<name>` (forward the body to instance `name`
//! of namespace `env[ENV]`), or `X<ENV>\n<method>` (the 0.3 `index` instance `index`:
//! serve the body with `facadeCall`, over the index shards; `ENV` is the archive's
//! namespace, which must be bound as for a forward), `I<op>` (`/v1/index/*`: read the body
//! and run the coordinator operation `op`, e.g. `runs.list`, with `indexPlan` /
//! `indexCall`), or `S<segment>` (`/v1/streams/<segment>/chunks`, authenticated: hand the
//! request to `streamChunks` of `stream_route.mjs`, which reads its own body), `M`
//! (`/v1/admin/…`, authenticated: hand method, path and query to `adminCall`) or `C<file>`
//! (a console file: `consoleFile`).
//!
//! Decides nothing itself: [`crate::wire::router`] does.

use wasm_bindgen::prelude::*;

use crate::wire::router::{body_error, decide, Binding, Decision, Secrets};
use crate::wire::RouterError;

#[wasm_bindgen(start)]
fn start() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            // Kept where the entry can read it after the trap (`globalThis.__celldPanic`):
            // the panic's message and place, for a diagnosis of the reset that follows.
            let text = format!("{} {info}", js_sys::Date::new_0().to_iso_string());
            let _ = js_sys::Reflect::set(&js_sys::global(), &JsValue::from_str("__celldPanic"), &JsValue::from_str(&text));
            console_error_panic_hook::hook(info);
        }));
    });
}

fn encode(kind: char, e: &RouterError) -> String {
    format!("{kind}{}{}", e.status(), e.body())
}

/// The decision before the body (see the module docs).
#[wasm_bindgen]
pub fn route(
    method: &str,
    pathname: &str,
    authorization: Option<String>,
    secret: Option<String>,
    previous: Option<String>,
    content_length: Option<String>,
) -> String {
    let secrets = Secrets::new(secret.as_deref(), previous.as_deref());
    match decide(method, pathname, authorization.as_deref(), secrets, content_length.as_deref()) {
        Decision::Answer(status, body) => format!("A{status}{body}"),
        Decision::AfterBody(e) => encode('B', &e),
        Decision::Forward { binding: Binding::Index, name, method } if name == crate::protocol::calls::ARCHIVE_INSTANCE => {
            format!("X{}\n{method}", Binding::Index.env_name())
        }
        Decision::Forward { binding, name, method } => format!("F{}\n{method}\n{name}", binding.env_name()),
        Decision::Index(op) => format!("I{}", op.name()),
        Decision::StreamChunks(segment) => format!("S{segment}"),
        Decision::Admin => "M".into(),
        Decision::Console(file) => format!("C{}", file.name()),
    }
}

/// The answer for a body's error, or an empty string for a well-formed argument array.
#[wasm_bindgen(js_name = bodyError)]
pub fn body_error_answer(body: &[u8]) -> String {
    body_error(body).map(|e| encode('A', &e)).unwrap_or_default()
}

/// The answer for a body over the size limit (counted while streaming).
#[wasm_bindgen(js_name = tooLarge)]
pub fn too_large() -> String {
    encode('A', &RouterError::PayloadTooLarge)
}

/// The answer when the environment lacks the namespace `env` (checked after the body).
#[wasm_bindgen(js_name = missingBinding)]
pub fn missing_binding(env: &str) -> String {
    let binding = Binding::ALL.into_iter().find(|b| b.env_name() == env);
    encode('A', &RouterError::MissingBinding(binding.map_or("", Binding::env_name)))
}

/// The answer when the hop itself failed (the instance could not be reached).
#[wasm_bindgen(js_name = hopFailed)]
pub fn hop_failed(message: &str) -> String {
    encode('A', &RouterError::Internal(message.to_string()))
}
