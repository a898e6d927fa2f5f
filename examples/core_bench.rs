//! Host timing of the run DO's `applyEvent` as the Durable Object serves it
//! (`src/shell/serve.rs`): decode the forwarded body; run the core on a read-cached,
//! write-buffered store over an in-memory one and write the buffered changes; encode the
//! answer. The bodies are the `event` workload's (`scripts/bench/cpu.mjs`): per run,
//! run_created, run_started, then step triples with 64-byte payloads.
//!
//!   cargo run --release --example core_bench [runs] [steps]     (default 400 runs, 30 steps)
//!
//! Prints µs per event by event type, the three phases, and overall. A figure of the host's
//! native code on an in-memory store, not of the worker (wasm, whose storage operations
//! cross into the platform): use it to compare changes to the core (docs/performance.md).

use std::time::Instant;

use world_celld_rs::config::Config;
use world_celld_rs::protocol::hop::{answer, decode_args, Args, Ctx};
use world_celld_rs::store::alarm::Alarm;
use world_celld_rs::store::buffered::run_buffered;
use world_celld_rs::store::cached::{Cached, ReadCache};
use world_celld_rs::store::MemoryStore;

const PAYLOAD: &str =
    "{\"__type\":\"Uint8Array\",\"data\":\"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBw==\"}";

fn event(run_id: &str, k: usize) -> (&'static str, String) {
    let (kind, data) = match k {
        0 => ("run_created", format!("{{\"eventType\":\"run_created\",\"specVersion\":6,\"eventData\":{{\"deploymentId\":\"bench\",\"workflowName\":\"bench\",\"input\":{PAYLOAD}}}}}")),
        1 => ("run_started", "{\"eventType\":\"run_started\",\"specVersion\":6}".to_string()),
        _ => {
            let step = (k - 2) / 3;
            match (k - 2) % 3 {
                0 => ("step_created", format!("{{\"eventType\":\"step_created\",\"specVersion\":6,\"correlationId\":\"step_{step}\",\"eventData\":{{\"stepName\":\"work\",\"input\":{PAYLOAD}}}}}")),
                1 => ("step_started", format!("{{\"eventType\":\"step_started\",\"specVersion\":6,\"correlationId\":\"step_{step}\"}}")),
                _ => ("step_completed", format!("{{\"eventType\":\"step_completed\",\"specVersion\":6,\"correlationId\":\"step_{step}\",\"eventData\":{{\"result\":{PAYLOAD}}}}}")),
            }
        }
    };
    (kind, format!("[{{\"runId\":\"{run_id}\",\"data\":{data},\"cleanup\":{{\"retentionMs\":0,\"queueShards\":1}}}}]"))
}

fn main() {
    let mut argv = std::env::args().skip(1).map(|a| a.parse::<usize>().expect("a number"));
    let runs = argv.next().unwrap_or(400);
    let steps = argv.next().unwrap_or(30);
    let config = Config::default();
    let mut totals: Vec<(&str, f64, usize)> = Vec::new();
    let mut all = 0.0;
    let mut count = 0;
    let mut bytes = 0usize;
    // decode, apply (the core and its buffered writes), encode
    let mut phases = [0.0f64; 3];
    for r in 0..runs {
        let run_id = format!("wrun_bench_ev_native_{r}");
        let mut store = MemoryStore::new();
        let mut cache = ReadCache::new();
        for k in 0..2 + 3 * steps {
            let (kind, body) = event(&run_id, k);
            let started = Instant::now();
            let args = decode_args(body.as_bytes()).expect("a valid body");
            let decoded = Instant::now();
            let ctx = Ctx { now: 1_764_806_400_000 + (r * 1000 + k) as i64, name: &run_id, config: &config };
            let mut alarm = Alarm::unknown();
            let out = run_buffered(&mut Cached::new(&mut store, &mut cache), |s| {
                world_celld_rs::run::call_watched(s, &ctx, &mut alarm, "applyEvent", Args(&args)).map(|(v, _)| v)
            })
            .expect("no fallback");
            let applied = Instant::now();
            let (status, reply) = answer(out);
            let took = started.elapsed().as_secs_f64() * 1e6;
            assert_eq!(status, 200, "{kind}: {reply}");
            bytes += reply.len();
            phases[0] += (decoded - started).as_secs_f64() * 1e6;
            phases[1] += (applied - decoded).as_secs_f64() * 1e6;
            phases[2] += took - (applied - started).as_secs_f64() * 1e6;
            all += took;
            count += 1;
            match totals.iter_mut().find(|t| t.0 == kind) {
                Some(t) => {
                    t.1 += took;
                    t.2 += 1;
                }
                None => totals.push((kind, took, 1)),
            }
        }
    }
    for (kind, us, n) in &totals {
        println!("{kind:>15}: {:7.2} µs ({n} events)", us / *n as f64);
    }
    let n = count as f64;
    println!("{:>15}: decode {:.2}, apply {:.2}, encode {:.2} µs", "phases", phases[0] / n, phases[1] / n, phases[2] / n);
    println!("{:>15}: {:7.2} µs per event ({count} events, {} answer bytes each)", "all", all / count as f64, bytes / count);
}
