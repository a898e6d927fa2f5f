//! Deploy-time variables (spec README "Worker configuration"), parsed once per call from
//! whatever the shell's environment lookup returns.

/// Everything the four DOs and the router read from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Bearer secret; `None` (absent or empty) fails closed.
    pub world_secret: Option<String>,
    /// Sent as `x-workflow-callback-secret` on deliveries when set (non-empty).
    pub callback_secret: Option<String>,
    pub queue_max_attempts: u32,
    pub queue_max_inflight: u32,
    pub queue_delivery_timeout_ms: u64,
    /// Raw `WORKFLOW_MAX_EVENTS`; the run core applies `getMaxEventsPerRun`'s rules.
    pub workflow_max_events: Option<String>,
}

pub const DEFAULT_QUEUE_MAX_ATTEMPTS: u32 = 5;
pub const DEFAULT_QUEUE_MAX_INFLIGHT: u32 = 5;
pub const DEFAULT_QUEUE_DELIVERY_TIMEOUT_MS: u64 = 300_000;

impl Default for Config {
    fn default() -> Self {
        Config {
            world_secret: None,
            callback_secret: None,
            queue_max_attempts: DEFAULT_QUEUE_MAX_ATTEMPTS,
            queue_max_inflight: DEFAULT_QUEUE_MAX_INFLIGHT,
            queue_delivery_timeout_ms: DEFAULT_QUEUE_DELIVERY_TIMEOUT_MS,
            workflow_max_events: None,
        }
    }
}

impl Config {
    /// Build from an environment lookup (variable name → string value, if set).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Config {
        let non_empty = |name: &str| get(name).filter(|v| !v.is_empty());
        Config {
            world_secret: non_empty("WORLD_SECRET"),
            callback_secret: non_empty("WORKFLOW_CALLBACK_SECRET"),
            queue_max_attempts: positive_int(get("QUEUE_MAX_ATTEMPTS").as_deref())
                .and_then(|v| u32::try_from(v).ok())
                .unwrap_or(DEFAULT_QUEUE_MAX_ATTEMPTS),
            queue_max_inflight: positive_int(get("QUEUE_MAX_INFLIGHT").as_deref())
                .and_then(|v| u32::try_from(v).ok())
                .unwrap_or(DEFAULT_QUEUE_MAX_INFLIGHT),
            queue_delivery_timeout_ms: positive_int(get("QUEUE_DELIVERY_TIMEOUT_MS").as_deref())
                .unwrap_or(DEFAULT_QUEUE_DELIVERY_TIMEOUT_MS),
            workflow_max_events: get("WORKFLOW_MAX_EVENTS"),
        }
    }
}

/// JavaScript `parseInt(text, 10)` restricted to results ≥ 1: leading whitespace and sign,
/// then the leading run of digits. Missing, empty, non-numeric, zero or negative → `None`.
pub fn positive_int(text: Option<&str>) -> Option<u64> {
    let t = text?.trim_start();
    let t = t.strip_prefix('+').unwrap_or(t);
    if t.starts_with('-') {
        return None;
    }
    let digits: &str = &t[..t.bytes().take_while(u8::is_ascii_digit).count()];
    if digits.is_empty() {
        return None;
    }
    // Saturate absurdly long values instead of failing.
    let v = digits.parse::<u64>().unwrap_or(u64::MAX);
    (v >= 1).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_int_rules() {
        assert_eq!(positive_int(Some("7")), Some(7));
        assert_eq!(positive_int(Some(" 12abc")), Some(12));
        assert_eq!(positive_int(Some("+3")), Some(3));
        for bad in [None, Some(""), Some("abc"), Some("0"), Some("-4"), Some("  ")] {
            assert_eq!(positive_int(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn defaults_and_secrets() {
        let c = Config::from_lookup(|k| match k {
            "WORLD_SECRET" => Some(String::new()),
            "QUEUE_MAX_ATTEMPTS" => Some("2".into()),
            "QUEUE_MAX_INFLIGHT" => Some("0".into()),
            _ => None,
        });
        assert_eq!(c.world_secret, None);
        assert_eq!(c.queue_max_attempts, 2);
        assert_eq!(c.queue_max_inflight, DEFAULT_QUEUE_MAX_INFLIGHT);
        assert_eq!(c.queue_delivery_timeout_ms, DEFAULT_QUEUE_DELIVERY_TIMEOUT_MS);
    }
}
