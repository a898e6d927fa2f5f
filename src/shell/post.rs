//! One delivery's HTTP POST (spec `queue-do.md` §4.2), as the queue shard and its couriers
//! make it: through the object's connection [`Gate`] (held until the response headers
//! arrive), with the delivery timeout counted from the moment the connection is made, the
//! body read only when the classification needs it (503), and a 429's `Retry-After` kept.
//!
//! Decides no queue rule: [`crate::queue::delivery::classify`] reads the [`Outcome`].

use std::rc::Rc;
use std::time::Duration;

use js_sys::{Object, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use worker::worker_sys::web_sys;

use super::gate::Gate;
use crate::queue::delivery::{needs_body, Body, Outcome, MAX_ANSWER_BODY_BYTES};

/// setTimeout's largest delay (longer ones fire at once).
const MAX_TIMER_MS: u64 = 2_147_483_647;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = fetch, catch)]
    fn global_fetch(input: &str, init: &Object) -> std::result::Result<js_sys::Promise, JsValue>;
    /// JavaScript `String(value)`.
    #[wasm_bindgen(js_name = String, catch)]
    fn js_string_raw(value: &JsValue) -> std::result::Result<js_sys::JsString, JsValue>;
}

/// `String(error)` for a thrown value (never throws itself).
pub fn error_text(value: &JsValue) -> String {
    js_string_raw(value).map(String::from).unwrap_or_else(|_| "Error".to_string())
}

/// One outbound delivery as either of its senders holds it.
pub struct Post<'a> {
    pub url: &'a str,
    pub headers: Vec<(&'a str, &'a str)>,
    pub body: &'a Body,
}

/// POST one delivery with a timeout (from the moment it has a connection); the
/// classification input.
pub async fn send(gate: &Rc<Gate>, post: &Post<'_>, timeout_ms: u64) -> Outcome {
    let pass = gate.enter(super::gate::Use::Delivery).await;
    let controller = match web_sys::AbortController::new() {
        Ok(c) => c,
        Err(e) => return Outcome::Transport(error_text(&e)),
    };
    let exchange = exchange(post, controller.signal(), pass);
    let timer = worker::Delay::from(Duration::from_millis(timeout_ms.min(MAX_TIMER_MS)));
    futures_util::pin_mut!(exchange);
    match futures_util::future::select(exchange, timer).await {
        futures_util::future::Either::Left((outcome, _)) => outcome,
        futures_util::future::Either::Right(_) => {
            controller.abort();
            Outcome::Transport("TimeoutError: The operation was aborted due to timeout".into())
        }
    }
}

async fn exchange(post: &Post<'_>, signal: web_sys::AbortSignal, pass: super::gate::Pass) -> Outcome {
    let transport = |e: JsValue| Outcome::Transport(error_text(&e));
    let init = Object::new();
    let headers = Object::new();
    let mut set = Ok(true);
    for (name, value) in &post.headers {
        set = set.and(Reflect::set(&headers, &JsValue::from_str(name), &JsValue::from_str(value)));
    }
    let body: JsValue = match post.body {
        Body::None => JsValue::UNDEFINED,
        Body::Text(t) => JsValue::from_str(t),
        Body::Bytes(b) => Uint8Array::from(b.as_slice()).into(),
    };
    set = set
        .and(Reflect::set(&init, &"method".into(), &"POST".into()))
        .and(Reflect::set(&init, &"headers".into(), &headers))
        .and(Reflect::set(&init, &"body".into(), &body))
        .and(Reflect::set(&init, &"signal".into(), &signal));
    if let Err(e) = set {
        return transport(e);
    }
    let promise = match global_fetch(post.url, &init) {
        Ok(p) => p,
        Err(e) => return transport(e),
    };
    let answered = JsFuture::from(promise).await.and_then(|r| r.dyn_into::<web_sys::Response>());
    // The headers are in (or the request failed): the connection no longer waits.
    drop(pass);
    let response = match answered {
        Ok(r) => r,
        Err(e) => return transport(e),
    };
    let status = response.status();
    if status == 429 {
        let retry_after = response.headers().get("retry-after").ok().flatten();
        release(&response);
        return Outcome::Refused { retry_after };
    }
    if !needs_body(status) {
        release(&response);
        return Outcome::Response { status, body: None };
    }
    // A failure's answer (503: its `timeoutSeconds`; others: the excerpt kept with the
    // message), at most MAX_ANSWER_BODY_BYTES of it.
    let body = match response.array_buffer() {
        Ok(p) => JsFuture::from(p).await.ok().map(|buf| {
            let bytes = Uint8Array::new(&buf);
            bytes.subarray(0, bytes.length().min(MAX_ANSWER_BODY_BYTES as u32)).to_vec()
        }),
        Err(_) => None,
    };
    Outcome::Response { status, body }
}

/// A body not read (as in the reference) is released so the connection is freed.
fn release(response: &web_sys::Response) {
    if let Some(stream) = response.body() {
        let _ = stream.cancel();
    }
}
