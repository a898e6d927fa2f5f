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

/// Largest `QUEUE_MAX_INFLIGHT` (spec-0.4 `queue.md` §2).
pub const MAX_QUEUE_MAX_INFLIGHT: u32 = 128;
/// Largest `QUEUE_DELIVERY_TIMEOUT_MS`.
pub const MAX_QUEUE_DELIVERY_TIMEOUT_MS: u64 = 300_000;

/// A deploy-time variable outside its bounds (the queue throws it as an `Error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigError {
    QueueMaxInflight,
    QueueDeliveryTimeout,
}

impl ConfigError {
    pub fn message(self) -> &'static str {
        match self {
            ConfigError::QueueMaxInflight => "QUEUE_MAX_INFLIGHT must be at most 128",
            ConfigError::QueueDeliveryTimeout => "QUEUE_DELIVERY_TIMEOUT_MS must be at most 300000",
        }
    }
}

impl From<ConfigError> for crate::wire::RpcError {
    fn from(e: ConfigError) -> Self {
        crate::wire::RpcError::error(e.message())
    }
}

impl Config {
    /// `QUEUE_MAX_INFLIGHT`, refused above [`MAX_QUEUE_MAX_INFLIGHT`].
    pub fn max_inflight(&self) -> Result<u32, ConfigError> {
        if self.queue_max_inflight > MAX_QUEUE_MAX_INFLIGHT {
            return Err(ConfigError::QueueMaxInflight);
        }
        Ok(self.queue_max_inflight)
    }

    /// `QUEUE_DELIVERY_TIMEOUT_MS`, refused above [`MAX_QUEUE_DELIVERY_TIMEOUT_MS`].
    pub fn delivery_timeout_ms(&self) -> Result<u64, ConfigError> {
        if self.queue_delivery_timeout_ms > MAX_QUEUE_DELIVERY_TIMEOUT_MS {
            return Err(ConfigError::QueueDeliveryTimeout);
        }
        Ok(self.queue_delivery_timeout_ms)
    }

    /// Build from an environment lookup (variable name → string value, if set).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Config {
        let non_empty = |name: &str| get(name).filter(|v| !v.is_empty());
        Config {
            world_secret: non_empty("WORLD_SECRET"),
            callback_secret: non_empty("WORKFLOW_CALLBACK_SECRET"),
            queue_max_attempts: positive_int(get("QUEUE_MAX_ATTEMPTS").as_deref())
                .and_then(|v| u32::try_from(v).ok())
                .unwrap_or(DEFAULT_QUEUE_MAX_ATTEMPTS),
            // Kept as parsed (saturated), so an out-of-range value fails the bound check
            // instead of falling back to the default.
            queue_max_inflight: positive_int(get("QUEUE_MAX_INFLIGHT").as_deref())
                .map(|v| u32::try_from(v).unwrap_or(u32::MAX))
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

    #[test]
    fn queue_bounds() {
        let at = |inflight: &str, timeout: &str| {
            let (i, t) = (inflight.to_string(), timeout.to_string());
            Config::from_lookup(move |k| match k {
                "QUEUE_MAX_INFLIGHT" => Some(i.clone()),
                "QUEUE_DELIVERY_TIMEOUT_MS" => Some(t.clone()),
                _ => None,
            })
        };
        let ok = at("128", "300000");
        assert_eq!((ok.max_inflight(), ok.delivery_timeout_ms()), (Ok(128), Ok(300_000)));
        assert_eq!(at("129", "1").max_inflight(), Err(ConfigError::QueueMaxInflight));
        assert_eq!(at("99999999999999", "1").max_inflight(), Err(ConfigError::QueueMaxInflight));
        assert_eq!(at("1", "300001").delivery_timeout_ms(), Err(ConfigError::QueueDeliveryTimeout));
        assert_eq!(ConfigError::QueueMaxInflight.message(), "QUEUE_MAX_INFLIGHT must be at most 128");
        // Invalid values still fall back to the defaults.
        assert_eq!(at("abc", "-1").max_inflight(), Ok(DEFAULT_QUEUE_MAX_INFLIGHT));
    }
}
