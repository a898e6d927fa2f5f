//! The queue binding over partitions (issue #54): a client queue shard `q:<k>` served by
//! several `QueueDO` instances (`crate::protocol::partition`), answered as one.
//!
//! * `enqueue` goes to the partition of the message's dedup key ([`route_enqueue`]);
//! * the shard-wide methods go to every partition the deployment may have used
//!   (`Config::partition_cover`) and their answers are merged: `stats` (sums, the earliest
//!   alarm), `listDeadLetters` (one page over all, ordered by dead-letter key, so a cursor
//!   is stable across partitions; each partition is asked for one page, so a page costs
//!   O(partitions × page)), `redriveDeadLetter` (the one that has it), `purgeDeadLetters`,
//!   `rearmAlarm`, `expireRun` (a run is fenced on every partition; the receipt is the
//!   one object's shape, `{expiredAt, deleted}` with the counts summed) and
//!   `acknowledgeExpireRun` (each partition's own receipt, read back with the internal
//!   `expireReceipt`, checked against the one given, then acknowledged).
//!
//! With one partition nothing here runs: the router forwards as before.
//!
//! Knows the objects only through [`PartitionHost`]; no JavaScript.

#![allow(async_fn_in_trait)]

use futures_util::future::join_all;

use crate::protocol::partition::{dedup_basis, partition_name, partition_of};
use crate::queue::methods::without_invalid_dates;
use crate::queue::state::dlq_key;
use crate::wire::js::{strict_eq, to_js_string};
use crate::wire::{RpcError, Value};

/// The queue's internal method that reads a run's fence as a receipt (`crate::queue`;
/// the router routes no such method, so only the worker's own objects call it).
pub const EXPIRE_RECEIPT: &str = "expireReceipt";

/// One call of one queue instance (by name), answering its value or its error.
pub trait PartitionHost {
    async fn call(&self, instance: &str, method: &str, args: Vec<Value>) -> Result<Value, RpcError>;
}

/// The instance an `enqueue` of `args` goes to, among `count` partitions of `shard`.
pub fn route_enqueue(shard: &str, args: &[Value], count: u32) -> String {
    partition_name(shard, partition_of(&dedup_basis(args.first()), count))
}

/// Whether a method of the queue binding goes to every partition (else it is an
/// `enqueue`, or one the partition named by the caller answers itself).
pub fn fans_out(method: &str) -> bool {
    matches!(
        method,
        "stats" | "listDeadLetters" | "redriveDeadLetter" | "purgeDeadLetters" | "rearmAlarm" | "expireRun" | "acknowledgeExpireRun"
    )
}

fn num(v: &Value, member: &str) -> f64 {
    v.get(member).and_then(Value::as_f64).unwrap_or(0.0)
}

/// The earliest non-null `alarmAt` of the answers (`null` when none has one).
fn earliest_alarm(answers: &[Value]) -> Value {
    answers.iter().filter_map(|a| a.get("alarmAt").and_then(Value::as_f64)).reduce(f64::min).map_or(Value::Null, Value::num)
}

/// `stats`: the counts summed, the earliest alarm.
pub fn merge_stats(answers: &[Value]) -> Value {
    let sum = |m: &str| Value::num(answers.iter().map(|a| num(a, m)).sum::<f64>());
    Value::object([
        ("pending", sum("pending")),
        ("inflight", sum("inflight")),
        ("deadLetters", sum("deadLetters")),
        ("alarmAt", earliest_alarm(answers)),
    ])
}

/// `listDeadLetters({limit?, cursor?})`: each partition's page of the same options, merged
/// by dead-letter key (`dlq:<failedAt>:<messageId>`, the order one partition lists in):
/// the first `limit` rows (100 when absent), `hasMore` when a partition has more or rows
/// are left over, the cursor the key of the last row given (as one partition gives it).
pub fn merge_dead_letters(params: Option<&Value>, pages: &[Value]) -> Value {
    let limit = match params.and_then(|p| p.get("limit")) {
        None | Some(Value::Null) => 100.0,
        Some(v) => crate::wire::js::to_number(Some(v)),
    };
    let mut rows: Vec<(String, Value)> = pages
        .iter()
        .flat_map(|p| p.get("data").and_then(Value::as_array).cloned().unwrap_or_default())
        .map(|row| {
            let at = row.get("failedAt").and_then(Value::as_f64).unwrap_or(0.0) as i64;
            (dlq_key(at, &to_js_string(row.get("messageId"))), row)
        })
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let page_len = if limit > 0.0 { (limit.trunc() as usize).min(rows.len()) } else { 0 };
    let has_more = pages.iter().any(|p| p.get("hasMore") == Some(&Value::Bool(true))) || rows.len() > page_len;
    let cursor = if has_more { page_len.checked_sub(1).map(|i| Value::str(rows[i].0.as_str())) } else { Some(Value::Null) };
    rows.truncate(page_len);
    let mut members = vec![("data", Value::Array(rows.into_iter().map(|(_, row)| row).collect()))];
    if let Some(cursor) = cursor {
        members.push(("cursor", cursor));
    }
    members.push(("hasMore", Value::Bool(has_more)));
    Value::object(members)
}

/// `redriveDeadLetter`: `{ok: true}` when a partition redrove it.
pub fn merge_redrive(answers: &[Value]) -> Value {
    let ok = answers.iter().any(|a| a.get("ok") == Some(&Value::Bool(true)));
    Value::object([("ok", Value::Bool(ok))])
}

/// `purgeDeadLetters`: the purged summed, `hasMore` when a partition has more.
pub fn merge_purge(answers: &[Value]) -> Value {
    let more = answers.iter().any(|a| a.get("hasMore") == Some(&Value::Bool(true)));
    Value::object([("purged", Value::num(answers.iter().map(|a| num(a, "purged")).sum::<f64>())), ("hasMore", Value::Bool(more))])
}

/// `rearmAlarm`: the earliest alarm.
pub fn merge_rearm(answers: &[Value]) -> Value {
    Value::object([("alarmAt", earliest_alarm(answers))])
}

/// The receipt member of a merged receipt as the build before wire-shaped receipts wrote
/// it: each partition's own receipt, in partition order (still acknowledged as such).
pub const RECEIPT_PARTITIONS: &str = "partitions";

/// `expireRun`: the deleted counts summed; in the paged form `done` once every partition
/// is, with the receipt one object would give: `{expiredAt, deleted}`, `deleted` summed
/// and `expiredAt` partition 0's (every partition keeps the first one it was given, and a
/// run's expiry reaches all of them together).
pub fn merge_expire(answers: &[Value]) -> Value {
    let deleted = Value::num(answers.iter().map(|a| num(a, "deleted")).sum::<f64>());
    if answers.iter().any(|a| a.get("done").is_none()) {
        return Value::object([("deleted", deleted)]);
    }
    let done = answers.iter().all(|a| a.get("done") == Some(&Value::Bool(true)));
    let mut members = vec![("deleted", deleted.clone()), ("done", Value::Bool(done))];
    if done {
        let receipts: Vec<&Value> = answers.iter().filter_map(|a| a.get("receipt")).collect();
        let mut receipt = vec![("deleted", Value::num(receipts.iter().map(|r| num(r, "deleted")).sum::<f64>()))];
        if let Some(at) = receipts.first().and_then(|r| r.get("expiredAt")) {
            receipt.push(("expiredAt", at.clone()));
        }
        members.push(("receipt", Value::object(receipt)));
    }
    Value::object(members)
}

/// `acknowledgeExpireRun(runId, receipt)` with a receipt of the older merged shape
/// ([`RECEIPT_PARTITIONS`]): the calls, one per partition whose receipt it holds; `None`
/// for any other receipt (see [`ack_plan`]).
pub fn ack_calls(shard: &str, args: &[Value]) -> Option<Vec<(String, Vec<Value>)>> {
    let run_id = args.first().cloned().unwrap_or(Value::Null);
    let each = args.get(1)?.get(RECEIPT_PARTITIONS)?.as_array()?;
    Some(
        each.iter()
            .enumerate()
            .filter(|(_, r)| !r.is_null())
            .map(|(p, r)| (partition_name(shard, p as u32), vec![run_id.clone(), r.clone()]))
            .collect(),
    )
}

/// `acknowledgeExpireRun(runId, receipt)` given each partition's own receipt (`null`: no
/// fence there, never written or already compacted), as `expireReceipt` reads them: the
/// partitions to acknowledge, each with its own receipt, when the given receipt is theirs
/// together (every fence's `expiredAt` the given one, and their counts summing to the
/// given count, or to at most it when a partition has no fence: compacted since, it
/// counted the rest); `None` when it is not
/// (a fence moved on since the receipt was given): answered `{acknowledged:false}`, as one
/// object answers a receipt that differs from its fence.
pub fn ack_plan(receipt: Option<&Value>, own: &[Value]) -> Option<Vec<(u32, Value)>> {
    let given = |member: &str| receipt.and_then(|r| r.get(member));
    let fenced: Vec<(u32, &Value)> = own.iter().enumerate().filter(|(_, r)| !r.is_null()).map(|(p, r)| (p as u32, r)).collect();
    let count = given("deleted").and_then(Value::as_f64)?;
    let sum: f64 = fenced.iter().map(|(_, r)| num(r, "deleted")).sum();
    let same_at = fenced.iter().all(|(_, r)| strict_eq(r.get("expiredAt"), given("expiredAt")));
    let counted = if fenced.len() == own.len() { sum == count } else { sum <= count };
    (same_at && counted).then(|| fenced.into_iter().map(|(p, r)| (p, r.clone())).collect())
}

/// `acknowledgeExpireRun`: acknowledged when every partition acknowledged its receipt.
pub fn merge_ack(answers: &[Value]) -> Value {
    let all = answers.iter().all(|a| a.get("acknowledged") == Some(&Value::Bool(true)));
    Value::object([("acknowledged", Value::Bool(all))])
}

/// One call of the queue binding on client shard `shard` spread over `count` partitions
/// for enqueues and `cover` for the shard-wide methods. Any other method goes to
/// partition 0 as it is. An error of any partition is the call's error.
pub async fn call<H: PartitionHost>(
    host: &H,
    shard: &str,
    method: &str,
    args: Vec<Value>,
    count: u32,
    cover: u32,
) -> Result<Value, RpcError> {
    if method == "enqueue" {
        return host.call(&route_enqueue(shard, &args, count), method, args).await;
    }
    if !fans_out(method) {
        return host.call(shard, method, args).await;
    }
    let names: Vec<String> = (0..cover.max(1)).map(|p| partition_name(shard, p)).collect();
    if method == "acknowledgeExpireRun" {
        let calls = match ack_calls(shard, &args) {
            Some(calls) => calls,
            None => {
                let run_id = args.first().cloned().unwrap_or(Value::Null);
                let own = join_all(names.iter().map(|name| host.call(name, EXPIRE_RECEIPT, vec![run_id.clone()]))).await;
                let own: Vec<Value> =
                    own.into_iter().map(|a| a.map(|a| a.get("receipt").cloned().unwrap_or(Value::Null))).collect::<Result<_, _>>()?;
                let Some(plan) = ack_plan(args.get(1), &own) else {
                    return Ok(Value::object([("acknowledged", Value::Bool(false))]));
                };
                plan.into_iter().map(|(p, r)| (partition_name(shard, p), vec![run_id.clone(), r])).collect()
            }
        };
        let answers = join_all(calls.iter().map(|(instance, a)| host.call(instance, method, a.clone()))).await;
        return Ok(merge_ack(&answers.into_iter().collect::<Result<Vec<_>, _>>()?));
    }
    // An invalid Date cannot be sent on (`Date#toISOString` throws); each partition reads
    // it as `null` (`expiredAt` kept as `JSON.stringify` keeps it), so it is sent so.
    let args: Vec<Value> = if method == "expireRun" { args.iter().map(without_invalid_dates).collect() } else { args };
    let answers = join_all(names.iter().map(|name| host.call(name, method, args.clone()))).await;
    let answers = answers.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(match method {
        "stats" => merge_stats(&answers),
        "listDeadLetters" => merge_dead_letters(args.first(), &answers),
        "redriveDeadLetter" => merge_redrive(&answers),
        "purgeDeadLetters" => merge_purge(&answers),
        "rearmAlarm" => merge_rearm(&answers),
        _ => merge_expire(&answers),
    })
}

#[cfg(test)]
mod tests;
