//! In-flight claims: deadline-ordered claim leases, recovery of lost and orphaned claims,
//! 0.3 claims converted, and the shell's claim memo.

use super::run_sim::*;
use super::sim::*;
use super::T0;
use crate::queue::delivery::{build_request, claim, ClaimMemo, Outcome, Settled};

use crate::queue::state::{self, FENCE_COMPACTION_GRACE_MS};
use crate::queue::*;
use crate::store::Stored;
use crate::wire::Value;

/// A 0.3 in-flight claim as 0.3 stored it: `inflight:<id>` = deadline, the row, and a run
/// reference still pointing at the deleted schedule entry.
fn legacy_claim(sim: &mut RunSim, id: &str, run: &str, deadline: i64) {
    let row = format!(
        r#"{{"messageId":"{id}","queueName":"q","pathname":"flow","body":"{{}}","runId":"{run}","targetBaseUrl":"http://app","attempt":0,"enqueuedAt":1}}"#
    );
    sim.store.data.insert(format!("msg:{id}"), Stored::Text(row));
    sim.store.data.insert(format!("inflight:{id}"), Stored::Text(deadline.to_string()));
    sim.store.data.insert(format!("run:{run}:{id}"), Stored::Text(format!(r#"{{"messageId":"{id}","dueKey":"due:0000000000001:{id}"}}"#)));
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

#[test]
fn lost_inflight_claim_is_swept_and_reclaimed_in_one_pass() {
    let mut sim = Sim::new();
    sim.enqueue(request("m1"));
    sim.now += 1;
    sim.alarm = None;
    assert_eq!(sim.claim_only().len(), 1); // the delivery "dies" with the isolate
    assert_eq!(sim.stats(), (0.0, 1.0, 0.0, Some(T0 + 1 + 330_000)));
    sim.now = T0 + 1 + 330_000;
    let delivered = sim.fire(&mut |_| ok());
    assert_eq!(delivered, 1);
    assert_eq!(sim.fire(&mut |_| ok()), 0);
    assert_eq!(sim.keys(), ["cfg"]);
}

#[test]
fn orphaned_inflight_entries_of_a_dead_instance_are_recovered_at_once() {
    let mut sim = Sim::new();
    sim.enqueue(with(request("m1"), "runId", Value::str("wrun_1")));
    sim.now += 1;
    assert_eq!(sim.claim_only().len(), 1);
    // A fresh instance: no delivery of m1 runs here.
    let mut alarm = Alarm::unknown();
    let config = sim.config.clone();
    let now = sim.now + 5;
    let rows = sim.store.transaction(|s| claim(s, now, &config, &mut alarm, &|_| false)).unwrap();
    assert_eq!(rows.len(), 1);
    // Recovered and claimed again in the same pass, under a new lease.
    let reference = state::get_value(&mut sim.store, "run:wrun_1:m1").unwrap().unwrap();
    assert_eq!(rows[0].lease, format!("inflight-deadline:{}:m1", now + 330_000));
    assert_eq!(reference.get("inflightKey"), Some(&Value::str(rows[0].lease.as_str())));
    assert_eq!(reference.get("dueKey"), None);
    // ... while a live delivery's entry is kept.
    let rows = sim.store.transaction(|s| claim(s, now, &config, &mut alarm, &|_| true)).unwrap();
    assert!(rows.is_empty());
    assert_eq!(sim.stats().1, 1.0);
}

#[test]
fn claim_keys_are_deadline_ordered_leases() {
    let mut sim = RunSim::new();
    sim.ok("enqueue", vec![message("m1", Some("wrun_a"))]);
    sim.ok("enqueue", vec![message("m2", None)]);
    sim.now += 1;
    let claimed = sim.claim(&|_| true).unwrap();
    let deadline = state::pad(T0 + 1 + DEADLINE);
    assert_eq!(
        claimed.iter().map(|c| c.lease.clone()).collect::<Vec<_>>(),
        [format!("inflight-deadline:{deadline}:m1"), format!("inflight-deadline:{deadline}:m2")]
    );
    assert_eq!(sim.alarm, Some(T0 + 1 + DEADLINE));
    assert_eq!(sim.store.text(&claimed[0].lease), Some(r#""m1""#));
    let reference = state::get_value(&mut sim.store, "run:wrun_a:m1").unwrap().unwrap();
    assert_eq!(json(&reference), format!(r#"{{"inflightKey":"inflight-deadline:{deadline}:m1","messageId":"m1"}}"#));
    assert!(sim.ok("stats", vec![]).contains(r#""inflight":2"#));
    // Acks leave only cfg.
    for c in &claimed {
        assert_eq!(sim.deliver(c, ok200()), Settled::Acked);
    }
    assert_eq!(sim.keys(), ["cfg"]);
    assert_eq!(sim.alarm, None);
}

#[test]
fn a_late_answer_for_a_recovered_claim_changes_nothing() {
    let mut sim = RunSim::new();
    sim.ok("enqueue", vec![keyed(message("m1", Some("wrun_a")), "k")]);
    sim.now += 1;
    let first = sim.claim(&|_| true).unwrap().remove(0);
    // Lost: after its deadline the claim is recovered and claimed again (a new lease).
    sim.now = T0 + 1 + DEADLINE;
    let second = sim.claim(&|_| true).unwrap().remove(0);
    assert_ne!(first.lease, second.lease);
    // The first delivery answers late (500): stale, nothing changes.
    let before = sim.keys();
    assert_eq!(sim.deliver(&first, Some(Outcome::Response { status: 500, body: None })), Settled::Stale);
    assert_eq!(sim.keys(), before);
    assert_eq!(sim.deliver(&second, ok200()), Settled::Acked);
    assert_eq!(sim.keys(), ["cfg"]);
}

#[test]
fn recovery_is_paged() {
    let mut sim = RunSim::new();
    sim.config.queue_max_inflight = 128;
    for i in 0..130 {
        sim.ok("enqueue", vec![message(&format!("m{i:03}"), None)]);
    }
    sim.now += 1;
    assert_eq!(sim.claim(&|_| true).unwrap().len(), 128);
    assert_eq!(sim.claim(&|_| true).unwrap().len(), 0);
    sim.now += 1;
    assert_eq!(sim.claim(&|_| true).unwrap().len(), 0); // still full
                                                        // A fresh instance: none of the 128 is live; one page recovers (and re-claims) them.
    let claimed = sim.claim(&|_| false).unwrap();
    assert_eq!(claimed.len(), 128);
    assert!(claimed.iter().all(|c| c.lease.contains(&state::pad(sim.now + DEADLINE))));
}

#[test]
fn legacy_claims_are_converted_and_recovered() {
    let mut sim = RunSim::new();
    legacy_claim(&mut sim, "old1", "wrun_a", T0 + 50_000);
    legacy_claim(&mut sim, "old2", "wrun_a", T0 - 5);
    assert!(sim.ok("stats", vec![]).contains(r#""inflight":2"#));
    assert_eq!(sim.ok("rearmAlarm", vec![]), format!(r#"{{"alarmAt":{}}}"#, T0 + 1));
    // The reference's deadline-only recovery: old2's deadline passed, old1's did not.
    let claimed = sim.claim(&|_| true).unwrap();
    assert_eq!(claimed.iter().map(|c| c.row.id()).collect::<Vec<_>>(), ["old2"]);
    assert!(sim.keys_with("inflight:").is_empty());
    let old1 = format!("inflight-deadline:{}:old1", state::pad(T0 + 50_000));
    assert!(sim.keys().contains(&old1));
    let reference = state::get_value(&mut sim.store, "run:wrun_a:old1").unwrap().unwrap();
    assert_eq!(reference.get("inflightKey"), Some(&Value::str(old1.as_str())));
    assert_eq!(sim.alarm, Some(T0 + 50_000));
    sim.now = T0 + 50_000;
    assert_eq!(sim.claim(&|_| true).unwrap().len(), 1);
}

#[test]
fn legacy_conversion_is_one_page_per_alarm() {
    let mut sim = RunSim::new();
    for i in 0..130 {
        legacy_claim(&mut sim, &format!("old{i:03}"), "wrun_a", T0 + 99_000);
    }
    assert!(sim.claim(&|_| true).unwrap().is_empty());
    assert_eq!(sim.keys_with("inflight:").len(), 2);
    assert_eq!(sim.alarm, Some(T0 + 1));
    sim.claim(&|_| true).unwrap();
    assert!(sim.keys_with("inflight:").is_empty());
    assert_eq!(sim.keys_with("inflight-deadline:").len(), 130);
    // expireRun also finds converted and unconverted claims.
    legacy_claim(&mut sim, "late", "wrun_a", T0);
    assert_eq!(sim.ok("expireRun", vec![Value::str("wrun_a"), Value::num(1.0), no_options()]), r#"{"deleted":64,"done":false}"#);
    sim.ok("expireRun", vec![Value::str("wrun_a"), Value::num(1.0)]);
    sim.ok("expireRun", vec![Value::str("wrun_a"), Value::num(1.0)]);
    assert_eq!(sim.keys(), ["expired-run:wrun_a"]);
}

/// The shell's claims remember the fence-compaction and 0.3 claim families between them
/// (`ClaimMemo`, every write watched by `MemoWatch`): over random sequences of enqueues,
/// expiries and their acknowledgements, clock steps past the fences' grace, claims,
/// deliveries and restarts, a queue with the memo answers, stores and arms exactly what the
/// core alone does, and most of its claims start knowing both families.
#[test]
fn claims_with_the_memo_are_the_claims_without_it() {
    const RUNS: [&str; 3] = ["wrun_a", "wrun_b", "wrun_c"];
    let (mut claims, mut known) = (0, 0);
    for seed in 1..=150u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let (mut plain, mut memo) = (RunSim::new(), RunSim::with_memo());
        // Now and then more than one conversion page (128) of them.
        let legacy = if seed % 10 == 0 { 130 } else { rng.below(3) };
        for sim in [&mut plain, &mut memo] {
            for run in RUNS {
                sim.runs.set(run, "active");
            }
            // Pre-upgrade data: 0.3 claims (nothing writes them any more).
            for i in 0..legacy {
                legacy_claim(sim, &format!("old{i}"), RUNS[i as usize % 3], T0 + 40_000 * (i % 3) as i64);
            }
        }
        for step in 0..120 {
            let op = rng.below(11);
            let outcomes: Vec<u64> = (0..8).map(|_| rng.below(3)).collect();
            let (id, run, delay) = (format!("m{}", rng.below(8)), RUNS[rng.below(3) as usize], [0.0, 0.0, 1.0, 5.0][rng.below(4) as usize]);
            let advance = [1, 1000, 30_000, FENCE_COMPACTION_GRACE_MS + 1][rng.below(4) as usize];
            let mut answers = Vec::new();
            for sim in [&mut plain, &mut memo] {
                let answer = match op {
                    0..=3 => format!("{:?}", sim.rpc("enqueue", vec![delayed(message(&id, Some(run)), delay)])),
                    4 => {
                        let expired = sim.rpc("expireRun", vec![Value::str(run), Value::num(1.0), no_options()]);
                        let receipt = expired.as_ref().ok().and_then(|v| v.get("receipt")).cloned();
                        let acked = receipt.map(|r| sim.rpc("acknowledgeExpireRun", vec![Value::str(run), r]));
                        format!("{expired:?} {acked:?}")
                    }
                    5 => {
                        sim.now += advance;
                        String::new()
                    }
                    6..=8 => {
                        sim.now = sim.now.max(sim.alarm.unwrap_or(sim.now));
                        if let Some(memo) = &sim.memo {
                            let m = memo.borrow();
                            claims += 1;
                            known += usize::from(m.legacy_empty && m.fence_first.is_some());
                        }
                        let claimed = sim.claim(&|_| true);
                        let settled: Vec<String> = claimed
                            .iter()
                            .flatten()
                            .zip(&outcomes)
                            .map(|(c, o)| {
                                let outcome = [
                                    ok200(),
                                    Some(Outcome::Response { status: 503, body: None }),
                                    Some(Outcome::Response { status: 500, body: None }),
                                ];
                                format!("{:?}", sim.deliver(c, outcome[*o as usize].clone()))
                            })
                            .collect();
                        format!("{claimed:?} {settled:?}")
                    }
                    9 => {
                        if let Some(m) = &sim.memo {
                            *m.borrow_mut() = ClaimMemo::default();
                        }
                        String::new()
                    }
                    _ => format!("{:?}", sim.rpc("stats", vec![])),
                };
                answers.push((answer, sim.alarm, sim.store.data.clone()));
            }
            assert_eq!(answers[0], answers[1], "seed {seed}, step {step}, op {op}");
        }
    }
    assert!(known * 2 > claims, "the memo answered {known} of {claims} claims");
}

/// The delivery a dead instance lost may have reached the app and run there: its
/// redelivery must not say attempt 1 (runtime 5.0.0-beta.42 takes attempt 1 for a
/// message's first delivery and then skips the run's event log, running completed steps
/// again). It says 2, then 3 after a second loss; losses never dead-letter the message.
#[test]
fn a_redelivery_after_a_lost_delivery_is_never_attempt_1() {
    let mut sim = Sim::new();
    sim.config.queue_max_attempts = 2;
    sim.enqueue(with(request("m1"), "runId", Value::str("wrun_1")));
    sim.now += 1;
    let config = sim.config.clone();
    let mut alarm = Alarm::unknown();
    let first = sim.claim_only();
    assert_eq!(header(&build_request(&first[0].row, &config), "x-vqs-message-attempt"), Some("1"));
    // Two instances die in turn with the delivery in flight; each next instance recovers it.
    for lost in 1..=2 {
        sim.now += 5;
        let now = sim.now;
        let rows = sim.store.transaction(|s| claim(s, now, &config, &mut alarm, &|_| false)).unwrap();
        assert_eq!(rows.len(), 1);
        let expected = (lost + 1).to_string();
        assert_eq!(header(&build_request(&rows[0].row, &config), "x-vqs-message-attempt"), Some(expected.as_str()));
        let row = state::get_row(&mut sim.store, "m1").unwrap().unwrap();
        assert_eq!(row.attempt(), 0.0, "a lost delivery is not a failure");
        assert_eq!(row.lost_deliveries(), f64::from(lost));
    }
    // The same goes for a claim whose deadline passed in a live instance.
    sim.now += 330_000;
    let now = sim.now;
    let rows = sim.store.transaction(|s| claim(s, now, &config, &mut alarm, &|_| true)).unwrap();
    assert_eq!(header(&build_request(&rows[0].row, &config), "x-vqs-message-attempt"), Some("4"));
    // One real failure with QUEUE_MAX_ATTEMPTS 2 retries (losses did not use up attempts);
    // the retry is attempt 5 on the wire.
    assert_eq!(sim.settle_row(&rows[0], &status(500)), Settled::Retrying);
    let row = state::get_row(&mut sim.store, "m1").unwrap().unwrap();
    assert_eq!((row.attempt(), row.lost_deliveries()), (1.0, 3.0));
    assert_eq!(header(&build_request(&row, &config), "x-vqs-message-attempt"), Some("5"));
    // A redriven dead letter starts again at attempt 1.
    sim.run_until(sim.now + 100_000, &mut |_| status(500));
    assert_eq!(sim.stats().2, 1.0);
    sim.ok_rpc("redriveDeadLetter", vec![Value::str("m1")]);
    let row = state::get_row(&mut sim.store, "m1").unwrap().unwrap();
    assert_eq!((row.attempt(), row.lost_deliveries()), (0.0, 0.0));
    assert_eq!(header(&build_request(&row, &config), "x-vqs-message-attempt"), Some("1"));
}
