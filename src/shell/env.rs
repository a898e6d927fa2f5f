//! Reading deploy-time variables and namespaces from the Worker/DO environment.
//!
//! Knows no core.

use js_sys::Reflect;
use wasm_bindgen::JsValue;
use worker::Env;

use crate::config::Config;

/// A string variable or secret, if set.
pub fn var(env: &Env, name: &str) -> Option<String> {
    Reflect::get(env, &JsValue::from_str(name)).ok().and_then(|v| v.as_string())
}

/// The configuration (read once per object instance).
pub fn config(env: &Env) -> Config {
    Config::from_lookup(|name| var(env, name))
}

/// A Durable Object namespace binding, if the environment has it.
pub fn namespace(env: &Env, name: &str) -> Option<JsValue> {
    Reflect::get(env, &JsValue::from_str(name)).ok().filter(|v| !v.is_undefined() && !v.is_null())
}
