//! The operator's front door (`/v1/admin/…`, docs/operations.md "The queue console"):
//! which request an admin path and query make, checked before anything is read or
//! changed, and how its errors look on the wire. The shell (`src/shell/admin.rs`) performs
//! the hops to the queue shards; their answers are the shards' own.
//!
//! | method and path | what it does |
//! | --- | --- |
//! | `GET /v1/admin/queues[?shard=q:N]` | health of every declared shard (or one) |
//! | `GET /v1/admin/queues/<shard>/dead-letters[?limit=1..100&cursor=…]` | a page of dead letters, summarized |
//! | `POST /v1/admin/queues/<shard>/dead-letters/<messageId>/redrive` | redrive one |
//! | `POST /v1/admin/queues/<shard>/redrive-all` | redrive a page ([`REDRIVE_PAGE`]); `hasMore` says call again |
//! | `POST /v1/admin/queues/<shard>/purge` | purge a page of dead letters (the queue's `purgeDeadLetters`) |
//! | `POST /v1/admin/queues/<shard>/rearm` | the queue's `rearmAlarm` |
//!
//! The shards a deployment has are `q:0` … `q:<N-1>`, N = `WORKFLOW_RETENTION_QUEUE_SHARDS`
//! (the clients' `queueShards`, default 1). With queue partitions a shard's route answers
//! for all of its partitions (the shell asks each and [`merge`] makes one answer; a
//! redrive goes to the partition that holds the message), and each partition `q:<k>~<p>`
//! (p from 1 below the partitions shard-wide calls reach, `Config::partition_cover`) can
//! be named on its own; any other shard is unknown (404).
//!
//! Knows the queue only by its method names; performs no I/O.

pub mod merge;

use crate::protocol::partition::{partition_name, split_partition};
use crate::queue::admin::{check_page, MAX_DEAD_LETTER_PAGE};
use crate::wire::uri::decode_uri_component;

/// Queue instances the health answer asks at most: client shards × partitions (more
/// shards are asked one at a time, `?shard=`).
pub const MAX_HEALTH_SHARDS: u32 = 64;
/// Dead letters one `redrive-all` call redrives: each is a call to the shard, and one
/// invocation makes at most 50 subrequests on the Workers Free plan (Workers limits,
/// "Subrequests"), the list included.
pub const REDRIVE_PAGE: usize = 20;
/// The default dead-letter page.
pub const DEFAULT_PAGE: usize = 50;

/// Internal QueueDO methods the admin routes call (not routable over `/v1/rpc`).
pub const HEALTH_METHOD: &str = "adminHealth";
pub const DEAD_LETTERS_METHOD: &str = "adminDeadLetters";

/// A checked admin request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminRequest {
    Health { shards: Vec<String> },
    DeadLetters { shard: String, limit: usize, cursor: Option<String> },
    Redrive { shard: String, message_id: String },
    RedriveAll { shard: String },
    Purge { shard: String },
    Rearm { shard: String },
}

/// Why an admin request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminError {
    NotFound(String),
    MethodNotAllowed {
        allowed: &'static str,
    },
    BadRequest(String),
    UnknownShard(String),
    /// `WORKFLOW_RETENTION_QUEUE_SHARDS` is not a valid count.
    Config(String),
}

impl AdminError {
    pub fn status(&self) -> u16 {
        match self {
            AdminError::NotFound(_) | AdminError::UnknownShard(_) => 404,
            AdminError::MethodNotAllowed { .. } => 405,
            AdminError::BadRequest(_) => 400,
            AdminError::Config(_) => 500,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            AdminError::NotFound(_) => "NotFound",
            AdminError::MethodNotAllowed { .. } => "MethodNotAllowed",
            AdminError::BadRequest(_) => "BadRequest",
            AdminError::UnknownShard(_) => "UnknownShard",
            AdminError::Config(_) => "ConfigError",
        }
    }

    pub fn message(&self) -> String {
        match self {
            AdminError::NotFound(path) => format!("unknown admin path: {path}"),
            AdminError::MethodNotAllowed { allowed } => format!("method not allowed; use {allowed}"),
            AdminError::BadRequest(m) | AdminError::Config(m) => m.clone(),
            AdminError::UnknownShard(shard) => {
                format!("unknown queue shard: {shard} (the shards are q:0 … q:N-1, N = WORKFLOW_RETENTION_QUEUE_SHARDS)")
            }
        }
    }

    /// `{"error":{"name","message"}}`.
    pub fn body(&self) -> String {
        serde_json::json!({"error": {"name": self.name(), "message": self.message()}}).to_string()
    }
}

/// Whether a `redrive-all` call says to call again: the listing had more than its page, and
/// this call redrove at least one. Each call lists from the first dead letter, so one that
/// cannot be redriven (another message holds its idempotency key, or the shard failed) is
/// listed again; a page of only those would have the caller call forever. (One whose run
/// expired is deleted instead, and not listed again.)
pub fn more_to_redrive(listed_more: bool, redriven: usize) -> bool {
    listed_more && redriven > 0
}

/// The query's parameters, percent-decoded (`+` is a space); a malformed escape is refused.
fn query(search: &str) -> Result<Vec<(String, String)>, AdminError> {
    let bad = || AdminError::BadRequest("malformed query string".into());
    search
        .trim_start_matches('?')
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let decode = |s: &str| decode_uri_component(&s.replace('+', " ")).ok_or_else(bad);
            Ok((decode(k)?, decode(v)?))
        })
        .collect()
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Result<Option<&'a str>, AdminError> {
    let mut found = params.iter().filter(|(k, _)| k == name);
    let first = found.next().map(|(_, v)| v.as_str());
    if found.next().is_some() {
        return Err(AdminError::BadRequest(format!("{name} is given more than once")));
    }
    Ok(first)
}

/// `q:N` with N below the declared count, or its partition `q:N~P` with P below
/// `partitions`.
fn known_shard(shard: &str, count: u32, partitions: u32) -> Result<String, AdminError> {
    let (client, p) = split_partition(shard);
    let n = client.strip_prefix("q:").filter(|n| !n.is_empty() && n.len() <= 10 && n.bytes().all(|b| b.is_ascii_digit()));
    match n.and_then(|n| n.parse::<u32>().ok()) {
        Some(i) if i < count && p < partitions.max(1) && partition_name(&format!("q:{i}"), p) == shard => Ok(shard.to_string()),
        _ => Err(AdminError::UnknownShard(shard.chars().take(64).collect())),
    }
}

fn want(method: &str, allowed: &'static str) -> Result<(), AdminError> {
    if method == allowed {
        Ok(())
    } else {
        Err(AdminError::MethodNotAllowed { allowed })
    }
}

/// The request an authenticated `/v1/admin/…` path makes: `pathname` as received
/// (percent-encoded segments), `search` the query string (with or without its `?`),
/// `shards` the parsed `WORKFLOW_RETENTION_QUEUE_SHARDS` (or why it is not valid),
/// `partitions` the queue partitions each has (1: none).
pub fn parse(method: &str, pathname: &str, search: &str, shards: Result<u32, String>, partitions: u32) -> Result<AdminRequest, AdminError> {
    let segments: Vec<&str> = pathname.split('/').filter(|s| !s.is_empty()).collect();
    let not_found = || AdminError::NotFound(pathname.chars().take(200).collect());
    if segments.get(..3) != Some(&["v1", "admin", "queues"][..]) {
        return Err(not_found());
    }
    let params = query(search)?;
    let count = shards.map_err(AdminError::Config)?;
    let decoded = |s: &str| decode_uri_component(s).ok_or_else(|| AdminError::BadRequest("malformed path segment".into()));
    let rest = &segments[3..];
    if rest.is_empty() {
        want(method, "GET")?;
        return Ok(AdminRequest::Health {
            shards: match param(&params, "shard")? {
                Some(one) => vec![known_shard(one, count, partitions)?],
                // Each client shard is one row, its partitions asked one by one.
                None => (0..count).map(|i| format!("q:{i}")).take((MAX_HEALTH_SHARDS / partitions.max(1)).max(1) as usize).collect(),
            },
        });
    }
    let shard = known_shard(&decoded(rest[0])?, count, partitions)?;
    match rest[1..] {
        ["dead-letters"] => {
            want(method, "GET")?;
            let limit = match param(&params, "limit")? {
                None => DEFAULT_PAGE,
                Some(text) => text
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=MAX_DEAD_LETTER_PAGE).contains(n))
                    .ok_or_else(|| AdminError::BadRequest(format!("limit must be an integer between 1 and {MAX_DEAD_LETTER_PAGE}")))?,
            };
            let cursor = param(&params, "cursor")?.filter(|c| !c.is_empty()).map(str::to_string);
            check_page(limit, cursor.as_deref()).map_err(AdminError::BadRequest)?;
            Ok(AdminRequest::DeadLetters { shard, limit, cursor })
        }
        ["dead-letters", id, "redrive"] => {
            want(method, "POST")?;
            let message_id = decoded(id)?;
            if message_id.is_empty() || message_id.len() > 512 {
                return Err(AdminError::BadRequest("malformed message id".into()));
            }
            Ok(AdminRequest::Redrive { shard, message_id })
        }
        ["redrive-all"] => want(method, "POST").map(|()| AdminRequest::RedriveAll { shard }),
        ["purge"] => want(method, "POST").map(|()| AdminRequest::Purge { shard }),
        ["rearm"] => want(method, "POST").map(|()| AdminRequest::Rearm { shard }),
        _ => Err(not_found()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(method: &str, path: &str, search: &str) -> Result<AdminRequest, AdminError> {
        parse(method, path, search, Ok(2), 1)
    }

    #[test]
    fn health_of_the_declared_shards() {
        assert_eq!(p("GET", "/v1/admin/queues", ""), Ok(AdminRequest::Health { shards: vec!["q:0".into(), "q:1".into()] }));
        assert_eq!(p("GET", "/v1/admin/queues/", "?shard=q%3A1"), Ok(AdminRequest::Health { shards: vec!["q:1".into()] }));
        assert_eq!(
            parse("GET", "/v1/admin/queues", "", Ok(1000), 1).map(|r| matches!(r, AdminRequest::Health { shards } if shards.len() == 64)),
            Ok(true)
        );
        assert_eq!(p("POST", "/v1/admin/queues", "").unwrap_err().status(), 405);
    }

    #[test]
    fn a_shard_answers_for_its_partitions_and_each_can_be_named() {
        let health = parse("GET", "/v1/admin/queues", "", Ok(2), 3).unwrap();
        assert_eq!(health, AdminRequest::Health { shards: vec!["q:0".into(), "q:1".into()] });
        let capped = parse("GET", "/v1/admin/queues", "", Ok(100), 16).unwrap();
        assert_eq!(capped, AdminRequest::Health { shards: (0..4).map(|i| format!("q:{i}")).collect() }, "64 instances: 4 shards of 16");
        assert_eq!(parse("GET", "/v1/admin/queues", "?shard=q%3A1~2", Ok(2), 3), Ok(AdminRequest::Health { shards: vec!["q:1~2".into()] }));
        assert_eq!(parse("POST", "/v1/admin/queues/q%3A1~2/purge", "", Ok(2), 3), Ok(AdminRequest::Purge { shard: "q:1~2".into() }));
        for unknown in ["q%3A1~3", "q%3A0~0", "q%3A0~01", "q%3A2~1"] {
            let e = parse("POST", &format!("/v1/admin/queues/{unknown}/purge"), "", Ok(2), 3).unwrap_err();
            assert_eq!(e.status(), 404, "{unknown}");
        }
    }

    #[test]
    fn unknown_shards_and_paths() {
        for shard in ["q:2", "q:01", "q:00", "q:", "x", "q:-1", "q:99999999999", "q:1 "] {
            let e = p("GET", "/v1/admin/queues", &format!("shard={}", shard.replace(':', "%3A").replace(' ', "%20"))).unwrap_err();
            assert_eq!((e.status(), e.name()), (404, "UnknownShard"), "{shard}");
        }
        assert_eq!(p("GET", "/v1/admin/queues/q%3A7/dead-letters", "").unwrap_err().name(), "UnknownShard");
        assert_eq!(p("GET", "/v1/admin/nope", "").unwrap_err().status(), 404);
        assert_eq!(p("GET", "/v1/admin/queues/q%3A0/nope", "").unwrap_err().status(), 404);
        assert_eq!(p("GET", "/v1/admin/queues/q%3A0/dead-letters/x/redrive/more", "").unwrap_err().status(), 404);
        let bad = parse("GET", "/v1/admin/queues", "", Err("WORKFLOW_RETENTION_QUEUE_SHARDS must be …".into()), 1).unwrap_err();
        assert_eq!(bad.status(), 500);
    }

    #[test]
    fn dead_letter_pages_are_checked() {
        assert_eq!(
            p("GET", "/v1/admin/queues/q%3A0/dead-letters", ""),
            Ok(AdminRequest::DeadLetters { shard: "q:0".into(), limit: DEFAULT_PAGE, cursor: None })
        );
        let cursor = "dlq:0000000001000:msg_1";
        assert_eq!(
            p("GET", "/v1/admin/queues/q:0/dead-letters", &format!("limit=5&cursor={}", cursor.replace(':', "%3A"))),
            Ok(AdminRequest::DeadLetters { shard: "q:0".into(), limit: 5, cursor: Some(cursor.into()) })
        );
        for search in [
            "limit=0",
            "limit=101",
            "limit=1e9",
            "limit=99999999999999999999999",
            "limit=-1",
            "limit=x",
            "cursor=nope",
            "cursor=%E0%A4%A",
            "limit=1&limit=2",
        ] {
            let e = p("GET", "/v1/admin/queues/q%3A0/dead-letters", search).unwrap_err();
            assert_eq!(e.status(), 400, "{search}");
            assert!(e.body().contains("\"BadRequest\""), "{search}");
        }
        assert_eq!(p("POST", "/v1/admin/queues/q%3A0/dead-letters", "").unwrap_err().status(), 405);
    }

    #[test]
    fn redrive_all_stops_when_a_page_makes_no_progress() {
        assert!(more_to_redrive(true, 1));
        assert!(!more_to_redrive(true, 0), "a page of dead letters that stay: stop, do not list them again forever");
        assert!(!more_to_redrive(false, 20));
    }

    #[test]
    fn actions() {
        assert_eq!(
            p("POST", "/v1/admin/queues/q%3A1/dead-letters/msg%2F1/redrive", ""),
            Ok(AdminRequest::Redrive { shard: "q:1".into(), message_id: "msg/1".into() })
        );
        assert_eq!(p("POST", "/v1/admin/queues/q%3A0/redrive-all", ""), Ok(AdminRequest::RedriveAll { shard: "q:0".into() }));
        assert_eq!(p("POST", "/v1/admin/queues/q%3A0/purge", ""), Ok(AdminRequest::Purge { shard: "q:0".into() }));
        assert_eq!(p("POST", "/v1/admin/queues/q%3A0/rearm", ""), Ok(AdminRequest::Rearm { shard: "q:0".into() }));
        for path in ["/v1/admin/queues/q%3A0/purge", "/v1/admin/queues/q%3A0/rearm", "/v1/admin/queues/q%3A0/redrive-all"] {
            assert_eq!(p("GET", path, "").unwrap_err().status(), 405, "{path}");
        }
        assert_eq!(p("POST", "/v1/admin/queues/q%3A0/dead-letters/%E0%A4%A/redrive", "").unwrap_err().status(), 400);
    }
}
