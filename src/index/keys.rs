//! IndexDO key formats (`index-do.md` §1). The DO builds keys with template literals, so a
//! non-string part is converted with JavaScript `String()` ([`js::to_js_string`]).
//!
//! Formats only: no storage access.

use crate::wire::Value;

use crate::wire::js;

/// `expired:<runId>` — the per-run fence written by `expireRun`.
pub fn expired(run_id: Option<&Value>) -> String {
    format!("expired:{}", js::to_js_string(run_id))
}

/// `hook:<token>` — the serialized hook, by token.
pub fn hook(token: Option<&Value>) -> String {
    format!("hook:{}", js::to_js_string(token))
}

/// `hookid:<hookId>` — the same serialized hook, by hook id.
pub fn hook_id(hook_id: Option<&Value>) -> String {
    format!("hookid:{}", js::to_js_string(hook_id))
}

/// `hookclaim:<token>` — a reservation `{owner, reservedAt}`.
pub fn hook_claim(token: Option<&Value>) -> String {
    format!("hookclaim:{}", js::to_js_string(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        let t = Value::str("tok");
        assert_eq!(hook(Some(&t)), "hook:tok");
        assert_eq!(hook_id(Some(&Value::str("h1"))), "hookid:h1");
        assert_eq!(hook_claim(Some(&t)), "hookclaim:tok");
        assert_eq!(expired(Some(&Value::str("wrun_1"))), "expired:wrun_1");
        assert_eq!(expired(None), "expired:undefined");
        assert_eq!(hook(Some(&Value::num(5))), "hook:5");
    }
}
