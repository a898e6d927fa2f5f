//! Reading deploy-time variables and namespaces from the Worker/DO environment.

use js_sys::Reflect;
use wasm_bindgen::JsValue;
use worker::{Env, ObjectNamespace};

use crate::config::Config;

/// A string variable or secret, if set.
pub fn var(env: &Env, name: &str) -> Option<String> {
    Reflect::get(env, &JsValue::from_str(name)).ok().and_then(|v| v.as_string())
}

pub fn config(env: &Env) -> Config {
    Config::from_lookup(|name| var(env, name))
}

/// A Durable Object namespace binding, if the environment has it.
pub fn namespace(env: &Env, name: &str) -> Option<ObjectNamespace> {
    let present = Reflect::get(env, &JsValue::from_str(name)).map(|v| !v.is_undefined() && !v.is_null()).unwrap_or(false);
    if present {
        env.durable_object(name).ok()
    } else {
        None
    }
}
