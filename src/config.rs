//! Deploy-time variables (spec README "Worker configuration"), parsed once per call from
//! whatever the shell's environment lookup returns.
//!
//! Knows no core and nothing of the platform: the shell hands it the environment's strings.

/// Everything the four DOs and the router read from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Bearer secret; `None` (absent or empty) fails closed.
    pub world_secret: Option<String>,
    /// Sent as `x-workflow-callback-secret` on deliveries when set (non-empty).
    pub callback_secret: Option<String>,
    pub queue_max_attempts: u32,
    /// The most deliveries one queue shard runs at once (the ceiling of its pace,
    /// `crate::queue::pace`).
    pub queue_max_inflight: u32,
    /// `QUEUE_MIN_INFLIGHT`: the floor an overloaded app's signals cut the pace to.
    pub queue_min_inflight: u32,
    pub queue_delivery_timeout_ms: u64,
    /// Raw `WORKFLOW_MAX_EVENTS`; the run core applies `getMaxEventsPerRun`'s rules.
    pub workflow_max_events: Option<String>,
    /// Raw `WORKFLOW_CORRELATION_INDEX` (see [`Config::correlation_index`]).
    pub correlation_index: Option<String>,
    /// Raw `WORKFLOW_INDEX_ARCHIVE` (see [`Config::index_archive`]).
    pub index_archive: Option<String>,
    /// Raw `QUEUE_PARTITIONS` (see [`Config::queue_partitions`]).
    pub queue_partitions: Option<String>,
    /// Raw `QUEUE_PARTITIONS_PREVIOUS` (see [`Config::partition_cover`]).
    pub queue_partitions_previous: Option<String>,
}

pub const DEFAULT_QUEUE_MAX_ATTEMPTS: u32 = 5;
/// The ceiling of a shard's concurrent deliveries: a burst of 100 one-second workflows is
/// delivered at once (the reference runs 5).
pub const DEFAULT_QUEUE_MAX_INFLIGHT: u32 = 128;
/// The floor: the reference's fixed concurrency.
pub const DEFAULT_QUEUE_MIN_INFLIGHT: u32 = 5;
pub const DEFAULT_QUEUE_DELIVERY_TIMEOUT_MS: u64 = 300_000;

impl Default for Config {
    fn default() -> Self {
        Config {
            world_secret: None,
            callback_secret: None,
            queue_max_attempts: DEFAULT_QUEUE_MAX_ATTEMPTS,
            queue_max_inflight: DEFAULT_QUEUE_MAX_INFLIGHT,
            queue_min_inflight: DEFAULT_QUEUE_MIN_INFLIGHT,
            queue_delivery_timeout_ms: DEFAULT_QUEUE_DELIVERY_TIMEOUT_MS,
            workflow_max_events: None,
            correlation_index: None,
            index_archive: None,
            queue_partitions: None,
            queue_partitions_previous: None,
        }
    }
}

/// The most partitions a client queue shard may have (`QUEUE_PARTITIONS`).
pub const MAX_QUEUE_PARTITIONS: u32 = 16;
/// The partitions a client queue shard has when `QUEUE_PARTITIONS` is unset (issue #54,
/// chosen by measurement: docs/performance.md, "How far one deployment goes").
pub const DEFAULT_QUEUE_PARTITIONS: u32 = 16;
/// Largest `QUEUE_MAX_INFLIGHT` (spec-0.4 `queue.md` §2).
pub const MAX_QUEUE_MAX_INFLIGHT: u32 = 128;
/// Largest `QUEUE_DELIVERY_TIMEOUT_MS`.
pub const MAX_QUEUE_DELIVERY_TIMEOUT_MS: u64 = 300_000;

/// A deploy-time variable outside its bounds (the queue throws it as an `Error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigError {
    QueueMaxInflight,
    QueueDeliveryTimeout,
    CorrelationIndex,
    IndexArchive,
    QueuePartitions,
}

impl ConfigError {
    pub fn message(self) -> &'static str {
        match self {
            ConfigError::QueueMaxInflight => "QUEUE_MAX_INFLIGHT must be at most 128",
            ConfigError::QueueDeliveryTimeout => "QUEUE_DELIVERY_TIMEOUT_MS must be at most 300000",
            ConfigError::CorrelationIndex => "WORKFLOW_CORRELATION_INDEX must be \"on\" or \"off\"",
            ConfigError::IndexArchive => "WORKFLOW_INDEX_ARCHIVE must be \"auto\" or \"none\"",
            ConfigError::QueuePartitions => "QUEUE_PARTITIONS and QUEUE_PARTITIONS_PREVIOUS must be integers from 1 to 16",
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

    /// `WORKFLOW_CORRELATION_INDEX`: whether the 0.3 client's `correlation:` index keys are
    /// kept. `off` (the default, also when unset or `""`): the facade answers their
    /// `putOwned` with `{"stored":true}` without a hop, and the run DO writes no
    /// `retention:index:` marker for them: spec-0.4 README's facade ("accept and discard,
    /// since nothing reads them"; the 0.3.0 client's `listByCorrelationId` scans the run's
    /// events). `on`: they are stored on the run's catalog shard, readable with the raw
    /// index `get`/`list`, and expired with the run, as the 0.3.0 reference did (its golden
    /// files are replayed so). Any other value is refused.
    pub fn correlation_index(&self) -> Result<bool, ConfigError> {
        match self.correlation_index.as_deref() {
            None | Some("" | "off") => Ok(false),
            Some("on") => Ok(true),
            Some(_) => Err(ConfigError::CorrelationIndex),
        }
    }

    /// `WORKFLOW_INDEX_ARCHIVE`: whether IndexDO `index` may hold a pre-upgrade archive.
    /// `auto` (the default, also when unset or `""`): it is asked once per isolate, and
    /// again every 30 s until its migration is done (a deployment that never had one is
    /// read as done at that first ask: `crate::facade::migrate::read_state`), and only by
    /// the calls that read it (0.3 `get`, `list`, hook reservations and cleanup, a run's
    /// expiry), never by a run's start, steps or completion. `none`: the deployment never
    /// ran a release before the sharded index (it was first deployed from this one), and
    /// no run, listing, hook or expiry touches the object. Any other value is refused.
    pub fn index_archive(&self) -> Result<bool, ConfigError> {
        match self.index_archive.as_deref() {
            None | Some("" | "auto") => Ok(true),
            Some("none") => Ok(false),
            Some(_) => Err(ConfigError::IndexArchive),
        }
    }

    /// The instances each client queue shard is spread over
    /// (`crate::protocol::partition`): `QUEUE_PARTITIONS` ([`DEFAULT_QUEUE_PARTITIONS`]
    /// when unset or `""`, at most [`MAX_QUEUE_PARTITIONS`]), never
    /// more than `QUEUE_MAX_INFLIGHT`. Enqueues go to these. Anything else is refused.
    pub fn queue_partitions(&self) -> Result<u32, ConfigError> {
        let n = partition_count(self.queue_partitions.as_deref(), DEFAULT_QUEUE_PARTITIONS)?;
        // Each partition runs at least one delivery and the total stays the operator's.
        Ok(n.min(self.max_inflight().unwrap_or(1).max(1)).max(1))
    }

    /// The partitions a shard-wide call (stats, dead letters, a run's expiry, …) reaches:
    /// `QUEUE_PARTITIONS`, or `QUEUE_PARTITIONS_PREVIOUS` when that is more, so that after
    /// the count was lowered the messages the higher partitions still hold are counted,
    /// listed and fenced until they are delivered.
    pub fn partition_cover(&self) -> Result<u32, ConfigError> {
        let previous = partition_count(self.queue_partitions_previous.as_deref(), 1)?;
        Ok(self.queue_partitions()?.max(previous))
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
            queue_min_inflight: positive_int(get("QUEUE_MIN_INFLIGHT").as_deref())
                .map(|v| u32::try_from(v).unwrap_or(u32::MAX))
                .unwrap_or(DEFAULT_QUEUE_MIN_INFLIGHT),
            queue_delivery_timeout_ms: positive_int(get("QUEUE_DELIVERY_TIMEOUT_MS").as_deref())
                .unwrap_or(DEFAULT_QUEUE_DELIVERY_TIMEOUT_MS),
            workflow_max_events: get("WORKFLOW_MAX_EVENTS"),
            correlation_index: get("WORKFLOW_CORRELATION_INDEX"),
            index_archive: get("WORKFLOW_INDEX_ARCHIVE"),
            queue_partitions: get("QUEUE_PARTITIONS"),
            queue_partitions_previous: get("QUEUE_PARTITIONS_PREVIOUS"),
        }
    }
}

/// A partition count: `default` when unset or `""`, else an integer from 1 to 16.
fn partition_count(raw: Option<&str>, default: u32) -> Result<u32, ConfigError> {
    match raw.map(str::trim) {
        None | Some("") => Ok(default),
        Some(v) => v.parse::<u32>().ok().filter(|n| (1..=MAX_QUEUE_PARTITIONS).contains(n)).ok_or(ConfigError::QueuePartitions),
    }
}

/// The fleet-wide maximum-age retention policy (spec-0.4 `retention.md` §5), read by the
/// hourly cron sweep. Parsed per occurrence; a bad value fails the occurrence (as the
/// reference throws) rather than the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionSettings {
    /// `WORKFLOW_RETENTION_MS`: 0 disables the sweep.
    pub retention_ms: i64,
    /// `WORKFLOW_RETENTION_BATCH_SIZE`: catalog entries admitted per occurrence.
    pub batch_size: i64,
    /// `WORKFLOW_RETENTION_QUEUE_SHARDS`: fallback for runs without a stored `queueShards`.
    pub queue_shards: i64,
}

pub const DEFAULT_RETENTION_BATCH_SIZE: i64 = 128;
pub const MAX_RETENTION_BATCH_SIZE: i64 = 1000;
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// Why a retention variable was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError {
    pub name: &'static str,
    pub min: i64,
    pub max: i64,
}

impl SettingError {
    pub fn message(&self) -> String {
        format!("world-celld: {} must be an integer between {} and {}", self.name, self.min, self.max)
    }
}

/// One variable: the default when absent or `""`, else `Number(raw)`, which must be a safe
/// integer in `min..=max`.
pub fn integer_setting(raw: Option<&str>, name: &'static str, default: i64, min: i64, max: i64) -> Result<i64, SettingError> {
    let Some(raw) = raw.filter(|r| !r.is_empty()) else { return Ok(default) };
    let n = crate::wire::js::string_to_number(raw);
    if n.is_finite() && n.trunc() == n && n >= min as f64 && n <= max as f64 {
        Ok(n as i64)
    } else {
        Err(SettingError { name, min, max })
    }
}

impl RetentionSettings {
    /// `WORKFLOW_RETENTION_MS` alone (the sweep reads the other two only when enabled).
    pub fn retention_ms(get: &impl Fn(&str) -> Option<String>) -> Result<i64, SettingError> {
        integer_setting(get("WORKFLOW_RETENTION_MS").as_deref(), "WORKFLOW_RETENTION_MS", 0, 0, MAX_SAFE_INTEGER)
    }

    /// All three.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<RetentionSettings, SettingError> {
        let retention_ms = Self::retention_ms(&get)?;
        let batch_size = integer_setting(
            get("WORKFLOW_RETENTION_BATCH_SIZE").as_deref(),
            "WORKFLOW_RETENTION_BATCH_SIZE",
            DEFAULT_RETENTION_BATCH_SIZE,
            1,
            MAX_RETENTION_BATCH_SIZE,
        )?;
        let queue_shards =
            integer_setting(get("WORKFLOW_RETENTION_QUEUE_SHARDS").as_deref(), "WORKFLOW_RETENTION_QUEUE_SHARDS", 1, 1, MAX_SAFE_INTEGER)?;
        Ok(RetentionSettings { retention_ms, batch_size, queue_shards })
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
    fn queue_partitions_setting() {
        let of = |p: Option<&str>, prev: Option<&str>, max: u32| Config {
            queue_partitions: p.map(str::to_string),
            queue_partitions_previous: prev.map(str::to_string),
            queue_max_inflight: max,
            ..Config::default()
        };
        assert_eq!(of(None, None, 128).queue_partitions(), Ok(DEFAULT_QUEUE_PARTITIONS));
        assert_eq!(of(Some(""), None, 128).queue_partitions(), Ok(DEFAULT_QUEUE_PARTITIONS));
        assert_eq!(
            of(None, None, 6).queue_partitions(),
            Ok(DEFAULT_QUEUE_PARTITIONS.min(6)),
            "the default, never more than QUEUE_MAX_INFLIGHT"
        );
        assert_eq!(of(Some("1"), None, 128).partition_cover(), Ok(1), "one object: the layout before partitions");
        assert_eq!(of(Some("1"), Some(""), 128).partition_cover(), Ok(1));
        assert_eq!(of(Some("1"), Some("16"), 128).partition_cover(), Ok(16));
        assert_eq!(of(Some("4"), None, 128).queue_partitions(), Ok(4));
        assert_eq!(of(Some("8"), None, 3).queue_partitions(), Ok(3), "never more than QUEUE_MAX_INFLIGHT");
        for bad in ["0", "17", "x", "-1", "2.5"] {
            assert_eq!(of(Some(bad), None, 128).queue_partitions(), Err(ConfigError::QueuePartitions), "{bad}");
            assert_eq!(of(Some("2"), Some(bad), 128).partition_cover(), Err(ConfigError::QueuePartitions), "{bad}");
        }
        assert_eq!(of(Some("2"), Some("8"), 128).partition_cover(), Ok(8));
        assert_eq!(of(Some("8"), Some("2"), 128).partition_cover(), Ok(8));
        assert_eq!(of(Some("4"), None, 128).partition_cover(), Ok(4));
    }

    #[test]
    fn index_archive_setting() {
        let of = |v: Option<&str>| Config { index_archive: v.map(str::to_string), ..Config::default() };
        for auto in [None, Some(""), Some("auto")] {
            assert_eq!(of(auto).index_archive(), Ok(true), "{auto:?}");
        }
        assert_eq!(of(Some("none")).index_archive(), Ok(false));
        assert_eq!(of(Some("off")).index_archive(), Err(ConfigError::IndexArchive));
    }

    #[test]
    fn correlation_index_setting() {
        let of = |v: Option<&'static str>| {
            Config::from_lookup(move |k| (k == "WORKFLOW_CORRELATION_INDEX").then_some(v).flatten().map(String::from))
        };
        for off in [None, Some(""), Some("off")] {
            assert_eq!(of(off).correlation_index(), Ok(false), "{off:?}");
        }
        assert_eq!(of(Some("on")).correlation_index(), Ok(true));
        for bad in ["OFF", "false", "0", " off"] {
            assert_eq!(of(Some(bad)).correlation_index(), Err(ConfigError::CorrelationIndex), "{bad}");
        }
    }

    #[test]
    fn retention_settings() {
        let none = RetentionSettings::from_lookup(|_| None).unwrap();
        assert_eq!(none, RetentionSettings { retention_ms: 0, batch_size: 128, queue_shards: 1 });
        let set = |ms: &'static str, batch: &'static str, shards: &'static str| {
            RetentionSettings::from_lookup(move |k| match k {
                "WORKFLOW_RETENTION_MS" => Some(ms.into()),
                "WORKFLOW_RETENTION_BATCH_SIZE" => Some(batch.into()),
                "WORKFLOW_RETENTION_QUEUE_SHARDS" => Some(shards.into()),
                _ => None,
            })
        };
        assert_eq!(
            set("7776000000", "", "4").unwrap(),
            RetentionSettings { retention_ms: 7_776_000_000, batch_size: 128, queue_shards: 4 }
        );
        assert_eq!(set(" 5e3 ", "1000", "0x2").unwrap(), RetentionSettings { retention_ms: 5000, batch_size: 1000, queue_shards: 2 });
        for (ms, batch, shards, name) in [
            ("-1", "1", "1", "WORKFLOW_RETENTION_MS"),
            ("1.5", "1", "1", "WORKFLOW_RETENTION_MS"),
            ("abc", "1", "1", "WORKFLOW_RETENTION_MS"),
            ("9007199254740992", "1", "1", "WORKFLOW_RETENTION_MS"),
            ("1", "0", "1", "WORKFLOW_RETENTION_BATCH_SIZE"),
            ("1", "1001", "1", "WORKFLOW_RETENTION_BATCH_SIZE"),
            ("1", "1", "0", "WORKFLOW_RETENTION_QUEUE_SHARDS"),
        ] {
            let err = set(ms, batch, shards).unwrap_err();
            assert_eq!(err.name, name, "{ms} {batch} {shards}");
        }
        assert_eq!(
            set("1", "0", "1").unwrap_err().message(),
            "world-celld: WORKFLOW_RETENTION_BATCH_SIZE must be an integer between 1 and 1000"
        );
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
