//! The operator console's static files (`GET /console`, `/console/console.js`,
//! `/console/console.css`; the page itself is `src/shell/console/`), compiled into the
//! worker so that it works offline (`wrangler dev`) and needs nothing from elsewhere.
//!
//! Served with headers that keep it to itself: a Content-Security-Policy allowing only this
//! origin's script, style and API (no inline script, no framing), no referrer, no MIME
//! sniffing, and no caching of an old page after an upgrade. The page holds no secret: it
//! asks the operator for one and keeps it for the tab (docs/operations.md).
//!
//! Decides nothing else: the router names the file.

use js_sys::Array;
use wasm_bindgen::prelude::*;

const PAGE: &str = include_str!("console/index.html");
const SCRIPT: &str = include_str!("console/console.js");
const STYLE: &str = include_str!("console/console.css");

/// The Content-Security-Policy of every console file.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; \
                       frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// `[status, body, headers]` for a console file named as the router names it (`page`,
/// `script`, `style`); `headers` is an array of `[name, value]` pairs.
#[wasm_bindgen(js_name = consoleFile)]
pub fn console_file(name: &str) -> Array {
    let (body, content_type) = match name {
        "page" => (PAGE, "text/html; charset=utf-8"),
        "script" => (SCRIPT, "text/javascript; charset=utf-8"),
        "style" => (STYLE, "text/css; charset=utf-8"),
        _ => ("not found", "text/plain; charset=utf-8"),
    };
    let status = if name == "page" || name == "script" || name == "style" { 200 } else { 404 };
    let headers = Array::new();
    for (k, v) in [
        ("content-type", content_type),
        ("content-security-policy", CSP),
        ("x-frame-options", "DENY"),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("cache-control", "no-store"),
        ("cross-origin-opener-policy", "same-origin"),
    ] {
        headers.push(&Array::of2(&k.into(), &v.into()));
    }
    Array::of3(&JsValue::from(status), &JsValue::from_str(body), &headers)
}
