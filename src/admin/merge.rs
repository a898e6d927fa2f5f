//! The admin answers of a client queue shard spread over partitions (issue #54): one
//! health row and one dead-letter listing for the whole client shard, from each
//! partition's own (`crate::protocol::partition`), so an operator reads `q:0` as the
//! clients name it, whatever `QUEUE_PARTITIONS` is.
//!
//! Counts are summed; the oldest due age, the latest `since` and the earliest alarm are
//! the partitions' extreme; answer times cannot be merged exactly from percentiles, so a
//! kind's p50 is the partitions' p50 weighted by their counts (the weighted median) and
//! its p95 the highest partition's (an upper bound). Each partition's own figures stay in
//! `partitions` (name, counts, pace, deliveries in the minutes shown), an unreachable one
//! with its error.
//!
//! Knows the answers' shapes (`crate::queue::admin`, the queue's metrics); performs no I/O.

use std::collections::BTreeMap;

use crate::partitions::merge_dead_letters;
use crate::wire::{Map, Value};

fn num(v: Option<&Value>) -> f64 {
    v.and_then(Value::as_f64).unwrap_or(0.0)
}

fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

/// The sum of `path` over `answers`.
fn sum(answers: &[&Value], path: &[&str]) -> Value {
    Value::num(answers.iter().map(|a| num(at(a, path))).sum::<f64>())
}

/// The least or greatest number at `path` (`null` when none has one).
fn extreme(answers: &[&Value], path: &[&str], greatest: bool) -> Value {
    let values = answers.iter().filter_map(|a| at(a, path).and_then(Value::as_f64));
    let best = if greatest {
        values.fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    } else {
        values.fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.min(v))))
    };
    best.map_or(Value::Null, Value::num)
}

/// A kind's answer times over the partitions: its count, each partition's (p50, count),
/// the highest p95.
type KindSum = (f64, Vec<(f64, f64)>, Option<f64>);

/// The partitions' `deliveries` as one: minutes summed by their start, totals and
/// failures by status summed, kinds merged (see the module's note on percentiles).
fn merge_deliveries(answers: &[&Value]) -> Value {
    let d: Vec<&Value> = answers.iter().filter_map(|a| a.get("deliveries")).collect();
    let mut minutes: BTreeMap<i64, [f64; 4]> = BTreeMap::new();
    let mut failures: BTreeMap<String, f64> = BTreeMap::new();
    let mut kinds: BTreeMap<String, KindSum> = BTreeMap::new();
    for one in &d {
        for m in one.get("minutes").and_then(Value::as_array).into_iter().flatten() {
            let slot = minutes.entry(num(m.get("at")) as i64).or_default();
            for (i, k) in ["delivered", "failed", "refused", "deadLettered"].iter().enumerate() {
                slot[i] += num(m.get(k));
            }
        }
        if let Some(Value::Object(f)) = one.get("failuresByStatus") {
            for (label, n) in f {
                *failures.entry(label.clone()).or_default() += num(Some(n));
            }
        }
        for k in one.get("kinds").and_then(Value::as_array).into_iter().flatten() {
            let name = k.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
            let count = num(k.get("count"));
            let entry = kinds.entry(name).or_insert((0.0, Vec::new(), None));
            entry.0 += count;
            if let Some(p50) = k.get("p50Ms").and_then(Value::as_f64) {
                entry.1.push((p50, count));
            }
            if let Some(p95) = k.get("p95Ms").and_then(Value::as_f64) {
                entry.2 = Some(entry.2.map_or(p95, |m: f64| m.max(p95)));
            }
        }
    }
    // The most recent minutes, as many as one partition reports.
    let keep = d.iter().filter_map(|one| one.get("minutes").and_then(Value::as_array).map(Vec::len)).max().unwrap_or(0);
    let skip = minutes.len().saturating_sub(keep);
    let minutes = minutes
        .into_iter()
        .skip(skip)
        .map(|(start, [delivered, failed, refused, dead])| {
            Value::object([
                ("at", Value::num(start as f64)),
                ("delivered", Value::num(delivered)),
                ("failed", Value::num(failed)),
                ("refused", Value::num(refused)),
                ("deadLettered", Value::num(dead)),
            ])
        })
        .collect();
    let mut kinds: Vec<(String, KindSum)> = kinds.into_iter().collect();
    kinds.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0).then_with(|| a.0.cmp(&b.0)));
    let kinds = kinds
        .into_iter()
        .map(|(name, (count, mut p50s, p95))| {
            Value::object([
                ("kind", Value::String(name)),
                ("count", Value::num(count)),
                ("p50Ms", weighted_median(&mut p50s).map_or(Value::Null, Value::num)),
                ("p95Ms", p95.map_or(Value::Null, Value::num)),
            ])
        })
        .collect();
    Value::object([
        ("since", extreme(&d, &["since"], false)),
        ("minutes", Value::Array(minutes)),
        ("refused", sum(&d, &["refused"])),
        ("deadLettered", sum(&d, &["deadLettered"])),
        ("failuresByStatus", Value::Object(failures.into_iter().map(|(k, n)| (k, Value::num(n))).collect::<Map>())),
        ("kinds", Value::Array(kinds)),
    ])
}

/// The value at which the running weight reaches half the total (`None` when empty).
fn weighted_median(values: &mut [(f64, f64)]) -> Option<f64> {
    values.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = values.iter().map(|(_, w)| w.max(0.0)).sum();
    let mut run = 0.0;
    for (v, w) in values.iter() {
        run += w.max(0.0);
        if run * 2.0 >= total {
            return Some(*v);
        }
    }
    values.last().map(|(v, _)| *v)
}

/// What a partition delivered in the minutes its health reports.
fn delivered(h: &Value) -> f64 {
    at(h, &["deliveries", "minutes"]).and_then(Value::as_array).into_iter().flatten().map(|m| num(m.get("delivered"))).sum()
}

/// One health row for client shard `shard` from its partitions' rows (in partition order;
/// `Err`: the partition could not be asked, with why). All unreachable: the row says so
/// (`error`), as one unreachable shard's row does.
pub fn merge_health(shard: &str, parts: &[(String, Result<Value, String>)]) -> Value {
    let answers: Vec<&Value> = parts.iter().filter_map(|(_, a)| a.as_ref().ok()).collect();
    let each = parts
        .iter()
        .map(|(name, a)| match a {
            Ok(h) => Value::object([
                ("shard", Value::str(name.as_str())),
                ("pending", at(h, &["messages", "pending"]).cloned().unwrap_or(Value::Null)),
                ("inflight", at(h, &["messages", "inflight"]).cloned().unwrap_or(Value::Null)),
                ("deadLetters", at(h, &["messages", "deadLetters"]).cloned().unwrap_or(Value::Null)),
                ("running", h.get("running").cloned().unwrap_or(Value::Null)),
                ("pace", at(h, &["pace", "now"]).cloned().unwrap_or(Value::Null)),
                ("delivered", Value::num(delivered(h))),
            ]),
            Err(e) => Value::object([("shard", Value::str(name.as_str())), ("error", Value::str(e.as_str()))]),
        })
        .collect();
    if answers.is_empty() {
        let why = parts.iter().find_map(|(_, a)| a.as_ref().err().cloned()).unwrap_or_else(|| "no partition answered".into());
        return Value::object([("shard", Value::str(shard)), ("error", Value::String(why)), ("partitions", Value::Array(each))]);
    }
    let capped = answers.iter().any(|a| at(a, &["messages", "capped"]) == Some(&Value::Bool(true)));
    let mut out = vec![
        ("shard", Value::str(shard)),
        ("since", extreme(&answers, &["since"], false)),
        (
            "messages",
            Value::object([
                ("pending", sum(&answers, &["messages", "pending"])),
                ("due", sum(&answers, &["messages", "due"])),
                ("inflight", sum(&answers, &["messages", "inflight"])),
                ("deadLetters", sum(&answers, &["messages", "deadLetters"])),
                ("capped", Value::Bool(capped)),
            ]),
        ),
        ("oldestDueAgeMs", extreme(&answers, &["oldestDueAgeMs"], true)),
        ("alarmAt", extreme(&answers, &["alarmAt"], false)),
        ("running", sum(&answers, &["running"])),
        (
            "pace",
            Value::object([
                ("now", sum(&answers, &["pace", "now"])),
                ("floor", sum(&answers, &["pace", "floor"])),
                ("ceiling", sum(&answers, &["pace", "ceiling"])),
            ]),
        ),
        ("couriersAwake", sum(&answers, &["couriersAwake"])),
        ("deliveries", merge_deliveries(&answers)),
        ("partitions", Value::Array(each)),
    ];
    if answers.len() < parts.len() {
        out.push(("unreachable", Value::num((parts.len() - answers.len()) as f64)));
    }
    Value::object(out)
}

/// One page of a client shard's dead letters from its partitions' pages of the same
/// `limit` and cursor (`adminDeadLetters`; a cursor is a dead-letter key, the order every
/// partition lists in, so it is stable across them): merged by key, each row naming its
/// partition (`partition`, the instance a redrive goes to).
pub fn merge_pages(limit: usize, pages: &[(String, Value)]) -> Value {
    let tagged: Vec<Value> = pages
        .iter()
        .map(|(name, page)| {
            let rows = page.get("data").and_then(Value::as_array).cloned().unwrap_or_default();
            let rows = rows
                .into_iter()
                .map(|row| match row {
                    Value::Object(mut m) => {
                        m.insert("partition".into(), Value::str(name.as_str()));
                        Value::Object(m)
                    }
                    other => other,
                })
                .collect();
            Value::object([("data", Value::Array(rows)), ("hasMore", page.get("hasMore").cloned().unwrap_or(Value::Bool(false)))])
        })
        .collect();
    let merged = merge_dead_letters(Some(&Value::object([("limit", Value::num(limit as f64))])), &tagged);
    // The page's shape as one partition answers it: `cursor` always present.
    Value::object([
        ("data", merged.get("data").cloned().unwrap_or(Value::Array(Vec::new()))),
        ("cursor", merged.get("cursor").cloned().unwrap_or(Value::Null)),
        ("hasMore", merged.get("hasMore").cloned().unwrap_or(Value::Bool(false))),
    ])
}

#[cfg(test)]
mod tests;
