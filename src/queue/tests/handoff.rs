//! An `enqueue` that claims its own message when the shell offers a free slot
//! ([`Handoff`]): what it stores instead of a `due:` entry, when it declines, and how the
//! rest of the queue (claims, settlement, expiry) treats the lease it writes.

use super::sim::*;
use super::T0;
use crate::queue::delivery::{claim, Claimed, Handoff};
use crate::queue::state::{INFLIGHT_GRACE_MS, LOST_DELIVERIES};
use crate::queue::*;
use crate::wire::Value;

impl Sim {
    /// `enqueue` with the shell's offer: `live` deliveries running, a loop running or not.
    fn enqueue_offered(&mut self, req: Value, live: usize, looping: bool) -> (Value, Option<Claimed>) {
        let mut alarm = Alarm::new(self.alarm);
        let config = self.config.clone();
        let ctx = Ctx { now: self.now, name: "q:0", config: &config };
        let mut handoff = Handoff { live, looping, claimed: None };
        let out = self
            .store
            .transaction(|s| {
                call_checked(s, &ctx, &mut alarm, "enqueue", Args(std::slice::from_ref(&req)), &Lifecycle::unknown(), Some(&mut handoff))
            })
            .expect("enqueue");
        self.apply(&alarm);
        (out, handoff.claimed)
    }
}

fn with_run(id: &str, run: &str) -> Value {
    with(request(id), "runId", Value::str(run))
}

fn deadline() -> i64 {
    T0 + crate::config::DEFAULT_QUEUE_DELIVERY_TIMEOUT_MS as i64 + INFLIGHT_GRACE_MS
}

#[test]
fn a_message_due_now_with_a_free_slot_is_claimed_in_its_enqueue() {
    let mut sim = Sim::new();
    let (out, claimed) = sim.enqueue_offered(with_run("m1", "wrun_a"), 0, false);
    assert_eq!(out.to_json().unwrap(), r#"{"deduped":false,"messageId":"m1","ok":true}"#);
    let claimed = claimed.expect("claimed");
    let lease = format!("inflight-deadline:{deadline:013}:m1", deadline = deadline());
    assert_eq!(claimed.lease, lease);
    assert_eq!(claimed.row.member("attempt"), Some(&Value::num(0.0)));
    // No `due:` entry: the message, its lease, and the run reference naming the lease.
    assert_eq!(sim.keys(), ["cfg", lease.as_str(), "msg:m1", "run:wrun_a:m1"]);
    let reference = sim.store.data.get("run:wrun_a:m1").and_then(|v| v.as_text()).unwrap_or_default().to_string();
    assert!(reference.contains(&lease), "{reference}");
    // No loop runs: the alarm is armed now, to start one.
    assert_eq!(sim.alarm, Some(T0 + 1));
    assert_eq!(sim.stats(), (0.0, 1.0, 0.0, Some(T0 + 1)));
    // Delivered and acknowledged like any claim: nothing of the message is left.
    sim.settle_row(&claimed, &ok());
    assert_eq!(sim.keys(), ["cfg"]);
}

#[test]
fn with_a_loop_running_the_alarm_only_backs_up_the_lease() {
    let mut sim = Sim::new();
    let (_, claimed) = sim.enqueue_offered(request("m1"), 2, true);
    assert!(claimed.is_some());
    // Not the lease's deadline (5 minutes out): the heartbeat, so that a successor of an
    // instance that dies recovers the message within seconds.
    assert!(deadline() > T0 + crate::queue::delivery::HEARTBEAT_MS);
    assert_eq!(sim.alarm, Some(T0 + crate::queue::delivery::HEARTBEAT_MS));
    // An earlier alarm stays.
    sim.alarm = Some(T0 + 500);
    let (_, claimed) = sim.enqueue_offered(request("m2"), 3, true);
    assert!(claimed.is_some());
    assert_eq!(sim.alarm, Some(T0 + 500));
}

#[test]
fn the_enqueue_declines_when_the_message_must_wait() {
    let mut sim = Sim::new();
    sim.config.queue_max_inflight = 2;
    // Every slot taken.
    let (_, claimed) = sim.enqueue_offered(request("m1"), 2, true);
    assert!(claimed.is_none());
    assert_eq!(sim.stats().0, 1.0);
    // A slot free, but m1 is due and waits for one: m2 does not overtake it.
    let (_, claimed) = sim.enqueue_offered(request("m2"), 1, true);
    assert!(claimed.is_none());
    let order: Vec<String> = sim.claim_only().iter().map(|c| c.row.id()).collect();
    assert_eq!(order, ["m1", "m2"]);
    // A delayed message.
    let (_, claimed) = sim.enqueue_offered(with(request("m3"), "delaySeconds", Value::num(1.0)), 0, false);
    assert!(claimed.is_none());
    assert_eq!(sim.keys().iter().filter(|k| k.starts_with("due:")).count(), 1);
    // A message deduplicated by its key: nothing new to claim.
    let (_, first) = sim.enqueue_offered(with(request("m4"), "idempotencyKey", Value::str("k")), 0, false);
    assert!(first.is_some());
    let (out, again) = sim.enqueue_offered(with(request("m5"), "idempotencyKey", Value::str("k")), 1, false);
    assert_eq!(out.get("deduped"), Some(&Value::Bool(true)));
    assert!(again.is_none());
}

#[test]
fn a_later_due_entry_does_not_hold_back_a_message_due_now() {
    let mut sim = Sim::new();
    sim.enqueue(with(request("m1"), "delaySeconds", Value::num(60.0)));
    let (_, claimed) = sim.enqueue_offered(request("m2"), 0, false);
    assert_eq!(claimed.map(|c| c.row.id()).as_deref(), Some("m2"));
}

#[test]
fn a_claim_leaves_a_live_handed_lease_alone_and_recovers_a_dead_one() {
    let mut sim = Sim::new();
    let (_, claimed) = sim.enqueue_offered(request("m1"), 0, false);
    let lease = claimed.unwrap().lease;
    // The shell marked it live: a claim counts it active and takes nothing.
    sim.now += 1;
    let mut alarm = Alarm::unknown();
    let config = sim.config.clone();
    let now = sim.now;
    let live = |l: &str| l == lease;
    assert!(sim.store.transaction(|s| claim(s, now, &config, &mut alarm, &live)).unwrap().is_empty());
    assert!(sim.keys().contains(&lease));
    // The instance died before delivering it: the next one recovers it as a lost delivery.
    let again = sim.store.transaction(|s| claim(s, now, &config, &mut alarm, &|_| false)).unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].row.member(LOST_DELIVERIES), Some(&Value::num(1.0)));
}

#[test]
fn expiring_the_run_deletes_a_handed_message_and_its_late_settlement_does_nothing() {
    let mut sim = Sim::new();
    let (_, claimed) = sim.enqueue_offered(with_run("m1", "wrun_x"), 0, false);
    let claimed = claimed.unwrap();
    let r = sim.ok_rpc("expireRun", vec![Value::str("wrun_x"), Value::num(1.0)]);
    assert_eq!(r.to_json().unwrap(), r#"{"deleted":1}"#);
    sim.settle_row(&claimed, &ok());
    assert!(sim.keys().iter().all(|k| !k.starts_with("msg:") && !k.starts_with("inflight")), "{:?}", sim.keys());
}

#[test]
fn an_expired_run_is_refused_before_any_claim() {
    let mut sim = Sim::new();
    sim.ok_rpc("expireRun", vec![Value::str("wrun_x"), Value::num(1.0)]);
    let (out, claimed) = sim.enqueue_offered(with_run("m1", "wrun_x"), 0, false);
    assert_eq!(out.get("code"), Some(&Value::str("RUN_EXPIRED")));
    assert!(claimed.is_none());
}
