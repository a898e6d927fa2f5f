//! Native replay of the recorded 0.3 golden exchanges of one binding
//! (`shared/golden/*.jsonl`) straight through its core, one [`MemoryStore`] per instance
//! name, each call in its own transaction: the `streams` rows in the stream core's tests,
//! the `index` rows in the index core's. The authoritative replay runs over HTTP
//! (`tests/golden.test.mjs`); this one gives the same checks in `cargo test`.
//!
//! These two files contain no server-clock values in responses, so bodies are compared as
//! parsed JSON without masking.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::config::Config;
use crate::protocol::hop::{answer, Args, Ctx};
use crate::store::MemoryStore;
use crate::wire::router::{check_body, decode_name};
use crate::wire::{RpcError, Value};

type Core = fn(&mut dyn crate::store::Store, &Ctx, &str, Args) -> Result<Value, RpcError>;

/// The golden folder (`GOLDEN_DIR`, else `../shared/golden` beside the repository).
pub fn golden_dir() -> PathBuf {
    std::env::var_os("GOLDEN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("shared").join("golden"))
}

/// Replays `file`, sending rows of `binding` to `core`. Returns the failures
/// (`seq: reason`) and the number of exchanges checked; `None` when the file is missing.
pub fn replay(file: &str, binding: &str, core: Core) -> Option<(Vec<String>, usize)> {
    let text = std::fs::read_to_string(golden_dir().join(file)).ok()?;
    let config = Config::default();
    let mut stores: HashMap<String, MemoryStore> = HashMap::new();
    let mut failures = Vec::new();
    let mut checked = 0;
    for (i, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        let row: serde_json::Value = serde_json::from_str(line).expect("golden line is JSON");
        let seq = row["seq"].as_u64().unwrap_or(i as u64 + 1);
        let (Some(req), Some(res)) = (row.get("request"), row.get("response")) else { continue };
        let path = req["path"].as_str().unwrap_or_default();
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let [_, _, b, name, method] = parts.as_slice() else {
            failures.push(format!("{seq}: unexpected path {path}"));
            continue;
        };
        if *b != binding {
            continue;
        }
        checked += 1;
        let name = decode_name(name).expect("golden names decode");
        let body = req["body"].as_str().unwrap_or_default();
        let text = check_body(body.as_bytes()).expect("golden bodies are argument arrays");
        let Ok(Value::Array(args)) = Value::parse(&text) else { panic!("golden body {text} does not decode") };
        let store = stores.entry(name.clone()).or_default();
        let ctx = Ctx { now: 1_767_323_045_678 + i as i64, name: &name, config: &config };
        let result = store.transaction(|s| core(s, &ctx, method, Args(&args)));
        let (status, body) = answer(result);
        let want_status = res["status"].as_u64().unwrap_or(0);
        let want: serde_json::Value = serde_json::from_str(res["body"].as_str().unwrap_or("null")).expect("recorded body");
        let got: serde_json::Value = serde_json::from_str(&body).expect("our body is JSON");
        if u64::from(status) != want_status || !same_json(&got, &want) {
            failures.push(format!("{seq}: {method} want {want_status} {want} got {status} {got}"));
        }
    }
    Some((failures, checked))
}

/// JSON equality with numbers compared by value.
fn same_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as J;
    match (a, b) {
        (J::Number(x), J::Number(y)) => x.as_f64() == y.as_f64(),
        (J::Array(x), J::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_json(p, q)),
        (J::Object(x), J::Object(y)) => x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w))),
        _ => a == b,
    }
}
