//! A courier's delivery loop: an instance of the queue class named
//! `<shard>#courier:<i>` ([`crate::queue::pace`]) that, in an invocation of its own, asks
//! its shard for claimed deliveries (`courierSync`), POSTs at most
//! [`COURIER_SLOTS`] of them at once through its connection gate, and reports each answer
//! back in its next call, which also asks for more. It ends when it has nothing running
//! and the shard gives it nothing (the shard then counts it asleep), or when its
//! per-invocation subrequest budget is spent (the shard wakes it again in a fresh one).
//!
//! Holds nothing durable: a courier that dies leaves its deliveries to the shard, which
//! recovers their claims at their deadline.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use worker::Env;

use super::call::call_env;
use super::gate::{Gate, Use};
use super::post::{send, Post};
use crate::queue::courier::{decode_item, encode_report, Item, SYNC_METHOD};
use crate::queue::delivery::Outcome;
use crate::queue::pace::COURIER_SLOTS;
use crate::wire::router::Binding;
use crate::wire::{RpcError, Value};

/// Subrequests (POSTs and calls to the shard) one courier invocation makes at most: the
/// platform allows 50 per invocation on the Workers Free plan (1,000 on paid plans).
const SUBREQUEST_BUDGET: usize = 48;
/// Calls to the shard that may fail in a row before the courier gives up (its deliveries'
/// claims are then recovered by the shard at their deadline).
const SYNC_ATTEMPTS: u32 = 3;

/// What one courier invocation needs.
pub struct Courier<'a> {
    pub env: &'a Env,
    pub gate: &'a Rc<Gate>,
    pub shard: &'a str,
    pub index: usize,
    pub timeout_ms: u64,
}

/// How a courier invocation ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// Nothing running and nothing given.
    Idle,
    /// Its subrequest budget is spent; the shard wakes it again when work waits.
    Budget,
    /// The shard could not be reached.
    Unreachable,
}

type Running<'a> = FuturesUnordered<Pin<Box<dyn Future<Output = (String, Outcome)> + 'a>>>;

impl Courier<'_> {
    /// The loop ([module docs](self)).
    pub async fn run(&self) -> Ended {
        let mut running: Running<'_> = FuturesUnordered::new();
        let mut reports: Vec<Value> = Vec::new();
        let mut subrequests = 0usize;
        let mut more = true;
        let mut failures = 0u32;
        loop {
            let room = COURIER_SLOTS.saturating_sub(running.len());
            // Each delivery asked for costs its POST; one call is kept for the last report.
            let want = if subrequests + room + 2 <= SUBREQUEST_BUDGET { room } else { 0 };
            if !reports.is_empty() || (want > 0 && more) {
                subrequests += 1;
                match self.sync(&reports, want, running.len()).await {
                    Ok((items, shard_has_more)) => {
                        failures = 0;
                        reports.clear();
                        more = shard_has_more;
                        for item in items {
                            subrequests += 1;
                            running.push(Box::pin(self.deliver(item)));
                        }
                    }
                    Err(e) => {
                        failures += 1;
                        worker::console_error!("courier {}#{}: courierSync failed: {}: {}", self.shard, self.index, e.name, e.message);
                        if failures >= SYNC_ATTEMPTS {
                            return Ended::Unreachable;
                        }
                        worker::Delay::from(Duration::from_millis(100 * u64::from(failures))).await;
                        continue;
                    }
                }
            }
            if running.is_empty() {
                if !reports.is_empty() {
                    continue;
                }
                return if want == 0 && more { Ended::Budget } else { Ended::Idle };
            }
            // Wait for a delivery to finish, and take every other one finished by then.
            if let Some((lease, outcome)) = running.next().await {
                reports.push(encode_report(&lease, &outcome));
            }
            while let Some(Some((lease, outcome))) = running.next().now_or_never() {
                reports.push(encode_report(&lease, &outcome));
            }
        }
    }

    async fn deliver(&self, item: Item) -> (String, Outcome) {
        let post = Post { url: &item.url, headers: item.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect(), body: &item.body };
        let outcome = send(self.gate, &post, self.timeout_ms).await;
        (item.lease, outcome)
    }

    /// Report and ask for up to `want` more: the items given, and whether the shard has
    /// more waiting.
    async fn sync(&self, reports: &[Value], want: usize, running: usize) -> Result<(Vec<Item>, bool), RpcError> {
        let args = vec![Value::num(self.index as f64), Value::Array(reports.to_vec()), Value::num(want as f64), Value::num(running as f64)];
        let answer = {
            let _pass = self.gate.enter(Use::Queue).await;
            let env_name = Binding::Queue.env_name();
            call_env(self.env, env_name, || RpcError::error("missing binding WORKFLOW_QUEUE"), self.shard, SYNC_METHOD, args).await?
        };
        let items = answer.get("items").and_then(Value::as_array).map(|items| items.iter().filter_map(decode_item).collect());
        let more = answer.get("more").and_then(Value::as_bool).unwrap_or(false);
        Ok((items.unwrap_or_default(), more))
    }
}
