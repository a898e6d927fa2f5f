//! How many deliveries one queue shard runs at once, and which invocation carries each:
//! the policy of delivery that scales with the app (issue #45), as plain state machines
//! the shell drives with the clock and the outcomes it sees.
//!
//! * [`Pace`]: the shard's concurrency limit, between a floor (`QUEUE_MIN_INFLIGHT`) and a
//!   ceiling (`QUEUE_MAX_INFLIGHT`). It starts at the floor (again whenever nothing runs
//!   and nothing waits: [`Pace::rest`]) and doubles every 200 ms while work waits and a
//!   delivery running has run longer than that, of a kind that takes half a second even
//!   with no more than the floor running ([`Latency::waits_outside`]: it waits on the
//!   outside world; a burst of one-second steps reaches 128 at once in about a second,
//!   while an app whose quick deliveries share its CPU stays at the floor, as the reference
//!   runs it, even when some of them take a few hundred ms); a refusal (429) sets it to
//!   what the app was running when it refused; an overload signal from the app ([`Signal::Overloaded`]: 429, a 5xx other than the
//!   runtime's `503 {timeoutSeconds}` wait, a transport error or timeout, or rising
//!   latency: [`Latency`]) halves it,
//!   at most once per round of deliveries (only a delivery started after the last cut can
//!   cut again); doubling resumes past a cut's level 10 s after it.
//! * [`Couriers`]: which courier invocations are awake. On Cloudflare one invocation has
//!   at most [`PLATFORM_CONNECTIONS`] outgoing connections waiting for response headers,
//!   and a delivery waits for headers as long as the app runs the workflow, so the shard
//!   delivers at most [`DIRECT_SLOTS`] itself and hands the rest to couriers: other
//!   instances of the queue class, each delivering at most [`COURIER_SLOTS`] in its own
//!   alarm invocation and settling back to the shard, which stays the only owner of the
//!   messages (leases, attempts, dedup, dead letters).
//!
//! Knows no storage and no platform: the shell keeps these in memory per instance (a fresh
//! instance starts again at the floor with every courier asleep).

use super::delivery::{classify, Action, Outcome};

/// Outgoing connections one invocation may have waiting for response headers on
/// Cloudflare; a seventh waits in line ("Simultaneous outgoing connections/request: 6",
/// Workers and Durable Objects platform limits). workerd does not enforce it; the shell's
/// connection gate does.
pub const PLATFORM_CONNECTIONS: usize = 6;

/// Deliveries the shard runs in its own invocation, as many as the reference's default
/// concurrency (so a shard at its floor needs no courier): its sixth connection serves
/// its lifecycle checks and courier wake-ups, one at a time.
pub const DIRECT_SLOTS: usize = PLATFORM_CONNECTIONS - 1;

/// Deliveries one courier runs at once: one connection stays free for its calls to the
/// shard.
pub const COURIER_SLOTS: usize = PLATFORM_CONNECTIONS - 1;

/// Couriers per shard: enough for the largest ceiling (128).
pub const MAX_COURIERS: usize = (crate::config::MAX_QUEUE_MAX_INFLIGHT as usize).div_ceil(COURIER_SLOTS);

/// A woken courier not heard from for this long is taken for lost (its instance died): it
/// is woken again when work waits.
pub const COURIER_STALE_MS: i64 = 60_000;
/// A busy courier asks again when one of its deliveries ends, at the latest after the
/// longest delivery timeout; silent for longer, it is taken for lost. Its loans are
/// recovered at their leases' deadlines.
pub const BUSY_COURIER_STALE_MS: i64 = crate::config::MAX_QUEUE_DELIVERY_TIMEOUT_MS as i64 + 30_000;

/// The courier instance `index` of shard `shard` (its Durable Object name).
pub fn courier_name(shard: &str, index: usize) -> String {
    format!("{shard}#courier:{index}")
}

/// What one delivery's answer says about the app's capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// The app answered (2xx, a permanent 4xx, or the runtime's own `503 {timeoutSeconds}`).
    Healthy,
    /// The app refused or failed under load: 429, other 5xx, transport error, timeout.
    Overloaded,
    /// Says nothing about load (another 4xx: a misconfigured app).
    Neutral,
}

/// The signal of one delivery's outcome.
pub fn signal_of(outcome: &Outcome) -> Signal {
    match outcome {
        Outcome::Transport(_) | Outcome::Refused { .. } => Signal::Overloaded,
        Outcome::Response { status: 200..=299, .. } => Signal::Healthy,
        Outcome::Response { status: 503, .. } => match classify(outcome) {
            Action::Redeliver { .. } => Signal::Healthy,
            _ => Signal::Overloaded,
        },
        Outcome::Response { status: 429 | 500..=599, .. } => Signal::Overloaded,
        Outcome::Response { .. } => Signal::Neutral,
    }
}

/// The shard's concurrency limit ([module docs](self)).
#[derive(Debug, Clone, PartialEq)]
pub struct Pace {
    limit: f64,
    floor: f64,
    ceiling: f64,
    /// Doubling stops here: the ceiling until the first cut, then the limit that cut left.
    threshold: f64,
    /// When the last cut happened: only deliveries started after it cut again.
    cut_at: Option<i64>,
    /// When the limit last doubled.
    grown_at: Option<i64>,
}

/// How long the oldest delivery running has run, with work waiting, before the limit
/// doubles ([`Pace::grow`]).
pub const GROW_AFTER_MS: i64 = 200;
/// How long after a cut the limit may double past what the cut left.
pub const PROBE_AFTER_MS: i64 = 10_000;

/// Latency samples kept per kind of delivery ([`Latency`]).
const RECENT: usize = 8;
/// Kinds of delivery tracked at most (a new kind past this replaces the oldest one).
const MAX_KINDS: usize = 256;
/// Answers per kind the usual latency is taken from ([`Latency`]).
const HISTORY: usize = 64;

/// What answer times say, per kind of delivery (its queue name and path: one workflow's
/// flow or step deliveries).
///
/// Whether a kind waits on the outside world ([`Latency::waits_outside`]): the median of
/// its last [`RECENT`] *quiet* answers (sent with no more than the pace's floor running)
/// took [`SLOW_KIND_MS`] or more, or too few quiet answers are known yet. Only then does a
/// long delivery of the kind make the pace grow: one of an app that shares its CPU is
/// slow because others run beside it (more at once would make every one slower), and a
/// kind's answers at a higher pace would say so about the pace, not about the kind.
///
/// Rising latency: the app is overloaded when even the fastest of the last [`RECENT`]
/// answers of a kind took more than four times, and 250 ms more than, its usual quick
/// answer: the first quartile of its last [`HISTORY`] (2xx answers only, as the shell feeds
/// it: a refusal or the runtime's `503` wait comes back in milliseconds). A quartile, not
/// the fastest: a workflow whose flow deliveries run its steps inline (seconds) and now and
/// then find the run busy (milliseconds) is not slowing down. A CPU-bound app whose deliveries share its cores
/// slows every delivery down as more run at once; steps that wait on the outside world take
/// as long at any concurrency, and a kind whose answers vary keeps fast ones among its
/// recent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latency {
    kinds: Vec<Kind>,
}

#[derive(Debug, Clone, PartialEq)]
struct Kind {
    key: String,
    /// The last [`HISTORY`] answers, oldest first.
    history: std::collections::VecDeque<i64>,
    recent: Vec<i64>,
    next: usize,
    /// The last [`RECENT`] quiet answers (sent with no more than the floor running), oldest first.
    quiet: std::collections::VecDeque<i64>,
}

/// Quiet answers a kind needs before they can say it does not wait on the outside world.
const QUIET_KNOWN: usize = 3;
/// A kind whose quiet answers take this long (median) waits on the outside world. Not
/// shorter: through the 0.3.0 client the eight deliveries of a `Promise.all` of ten quick
/// steps each took 190–300 ms with five running (measured 2026-12-07), all of it the
/// app's CPU (the steps' replays), and running all eight at once made the run 1.2× slower.
pub const SLOW_KIND_MS: i64 = 500;

impl Latency {
    /// Record one answer of kind `key` that took `ms`, `quiet` when it was sent with no
    /// more than the pace's floor running; whether latency has risen.
    pub fn rising(&mut self, key: &str, ms: i64, quiet: bool) -> bool {
        let ms = ms.max(0);
        let at = match self.kinds.iter().position(|k| k.key == key) {
            Some(i) => i,
            None => {
                if self.kinds.len() >= MAX_KINDS {
                    self.kinds.remove(0);
                }
                self.kinds.push(Kind {
                    key: key.to_string(),
                    history: Default::default(),
                    recent: Vec::new(),
                    next: 0,
                    quiet: Default::default(),
                });
                self.kinds.len() - 1
            }
        };
        let kind = &mut self.kinds[at];
        if kind.history.len() == HISTORY {
            kind.history.pop_front();
        }
        kind.history.push_back(ms);
        if kind.recent.len() < RECENT {
            kind.recent.push(ms);
        } else {
            kind.recent[kind.next] = ms;
        }
        kind.next = (kind.next + 1) % RECENT;
        if quiet {
            if kind.quiet.len() == RECENT {
                kind.quiet.pop_front();
            }
            kind.quiet.push_back(ms);
        }
        let fastest_recent = kind.recent.iter().copied().min().unwrap_or(ms);
        // The kind's usual quick answer: the first quartile of its history.
        let mut sorted: Vec<i64> = kind.history.iter().copied().collect();
        sorted.sort_unstable();
        let usual = sorted.get(sorted.len() / 4).copied().unwrap_or(ms);
        kind.recent.len() == RECENT && fastest_recent > (usual * 4).max(usual + 250)
    }

    /// Whether a long delivery of kind `key` says the app waits on the outside world (the
    /// [type docs](Latency)): the median of its quiet answers is [`SLOW_KIND_MS`] or more,
    /// or fewer than [`QUIET_KNOWN`] are known.
    pub fn waits_outside(&self, key: &str) -> bool {
        let Some(kind) = self.kinds.iter().find(|k| k.key == key) else { return true };
        if kind.quiet.len() < QUIET_KNOWN {
            return true;
        }
        let mut sorted: Vec<i64> = kind.quiet.iter().copied().collect();
        sorted.sort_unstable();
        sorted[sorted.len() / 2] >= SLOW_KIND_MS
    }
}

/// The share of the limit kept by a cut.
const CUT: f64 = 0.5;

impl Pace {
    /// Start at `floor` (clamped to 1..=ceiling).
    pub fn new(floor: u32, ceiling: u32) -> Pace {
        let ceiling = f64::from(ceiling.max(1));
        let floor = f64::from(floor.max(1)).min(ceiling);
        Pace { limit: floor, floor, ceiling, threshold: ceiling, cut_at: None, grown_at: None }
    }

    /// Work waits and the oldest delivery running has run for [`GROW_AFTER_MS`]: the
    /// deliveries wait on something outside the app's CPU, so double the limit (at most
    /// once per [`GROW_AFTER_MS`], not within that of a cut, and only up to what the last
    /// cut left until [`PROBE_AFTER_MS`] after it).
    pub fn grow(&mut self, now: i64) {
        let since = |at: Option<i64>| at.is_none_or(|t| now.saturating_sub(t) >= GROW_AFTER_MS);
        // Long after the last cut, probe past it again.
        if self.cut_at.is_some_and(|cut| now.saturating_sub(cut) >= PROBE_AFTER_MS) {
            self.threshold = self.ceiling;
        }
        if self.limit < self.threshold && since(self.grown_at) && since(self.cut_at) {
            self.limit = (self.limit * 2.0).min(self.threshold).min(self.ceiling);
            self.grown_at = Some(now);
        }
    }

    /// The most deliveries it ever allows (`QUEUE_MAX_INFLIGHT`).
    pub fn ceiling(&self) -> usize {
        self.ceiling as usize
    }

    /// How many deliveries may run at once now.
    pub fn limit(&self) -> usize {
        self.limit.floor() as usize
    }

    /// Nothing runs and nothing waits: the next burst starts again at the floor (what a
    /// fresh instance does), so a pace grown for one burst never carries over to quick
    /// deliveries of the next; what the last cut left still bounds the doubling until
    /// [`PROBE_AFTER_MS`] after it.
    pub fn rest(&mut self) {
        self.limit = self.floor;
        self.grown_at = None;
    }

    /// The floor: a delivery sent with no more than this many running is quiet ([`Latency`]).
    pub fn floor(&self) -> usize {
        self.floor as usize
    }

    /// A 429: the app took the deliveries still running and refused this one, so it takes
    /// about `in_flight` at once (those sent and not yet answered, this one left out). The
    /// limit drops to that (never below the floor) at every refusal, and doubling waits.
    pub fn refused(&mut self, in_flight: usize, now: i64) {
        self.limit = self.limit.min(in_flight as f64).max(self.floor);
        self.threshold = self.limit;
        self.cut_at = Some(now);
    }

    /// Take one delivery's answer: its signal, and for a healthy one whether its kind's
    /// latency has risen ([`Latency`]), which counts as overload.
    pub fn observe_answer(&mut self, signal: Signal, rising: bool, started: i64, now: i64) {
        let signal = if signal == Signal::Healthy && rising { Signal::Overloaded } else { signal };
        self.observe(signal, started, now);
    }

    /// Take one delivery's signal: `started` is when that delivery was sent, `now` when
    /// it was answered.
    pub fn observe(&mut self, signal: Signal, started: i64, now: i64) {
        match signal {
            // Growth is [`Pace::grow`]'s: more answers per second of quick deliveries ask
            // nothing more of the app's CPU than it serves now.
            Signal::Healthy => {}
            Signal::Overloaded => {
                if self.cut_at.is_none_or(|cut| started >= cut) {
                    self.limit = (self.limit * CUT).max(self.floor);
                    self.threshold = self.limit;
                    self.cut_at = Some(now);
                }
            }
            Signal::Neutral => {}
        }
    }
}

/// One courier's state as the shard knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Courier {
    Asleep,
    /// Woken at this time, not heard from yet: it will ask for [`COURIER_SLOTS`].
    Woken(i64),
    /// Heard from at this time, not done: it asks again when one of its deliveries ends.
    Busy(i64),
}

/// Which couriers are awake ([module docs](self)).
#[derive(Debug, Clone, PartialEq)]
pub struct Couriers {
    state: Vec<Courier>,
    /// Couriers taken for lost (silent past their stale time) and how long they had been
    /// silent, until [`Couriers::take_lost`] (the operator log's `courier.lost`).
    lost: Vec<(usize, i64)>,
}

impl Default for Couriers {
    fn default() -> Self {
        Couriers { state: vec![Courier::Asleep; MAX_COURIERS], lost: Vec::new() }
    }
}

impl Couriers {
    /// The couriers to wake for `waiting` handed-over messages no courier has taken yet:
    /// those woken and not yet heard from take [`COURIER_SLOTS`] each; a busy one asks
    /// again only when a delivery of its own ends, so it counts for none. Lowest index
    /// first; they count as woken from now. A courier silent past its stale time
    /// ([`COURIER_STALE_MS`], [`BUSY_COURIER_STALE_MS`]) counts as asleep.
    pub fn to_wake(&mut self, waiting: usize, now: i64) -> Vec<usize> {
        for (index, c) in self.state.iter_mut().enumerate() {
            let (stale, since) = match c {
                Courier::Woken(at) => (now.saturating_sub(*at) > COURIER_STALE_MS, *at),
                Courier::Busy(at) => (now.saturating_sub(*at) > BUSY_COURIER_STALE_MS, *at),
                Courier::Asleep => (false, now),
            };
            if stale {
                *c = Courier::Asleep;
                if self.lost.len() < MAX_COURIERS {
                    self.lost.push((index, now.saturating_sub(since)));
                }
            }
        }
        let coming = self.state.iter().filter(|c| matches!(c, Courier::Woken(_))).count() * COURIER_SLOTS;
        let needed = waiting.saturating_sub(coming).div_ceil(COURIER_SLOTS);
        let mut woken = Vec::new();
        for (index, c) in self.state.iter_mut().enumerate() {
            if woken.len() == needed {
                break;
            }
            if *c == Courier::Asleep {
                *c = Courier::Woken(now);
                woken.push(index);
            }
        }
        woken
    }

    /// Courier `index` called: `done` when it has nothing running and got nothing (it
    /// ends its invocation), else it is busy.
    pub fn heard(&mut self, index: usize, now: i64, done: bool) {
        if let Some(c) = self.state.get_mut(index) {
            *c = if done { Courier::Asleep } else { Courier::Busy(now) };
        }
    }

    /// A wake-up that failed: the courier is asleep.
    pub fn failed(&mut self, index: usize) {
        if let Some(c) = self.state.get_mut(index) {
            *c = Courier::Asleep;
        }
    }

    /// The couriers taken for lost since the last call, with how long each had been silent.
    pub fn take_lost(&mut self) -> Vec<(usize, i64)> {
        std::mem::take(&mut self.lost)
    }

    /// How many are awake (woken or busy).
    pub fn awake(&self) -> usize {
        self.state.iter().filter(|c| **c != Courier::Asleep).count()
    }
}

/// The courier index in a courier's name (`<shard>#courier:<i>`), and its shard.
pub fn parse_courier_name(name: &str) -> Option<(&str, usize)> {
    let (shard, index) = name.rsplit_once("#courier:")?;
    let index: usize = index.parse().ok()?;
    (index < MAX_COURIERS && !shard.is_empty()).then_some((shard, index))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pace_doubles_while_work_waits_cuts_once_per_round_and_grows_back() {
        let mut p = Pace::new(5, 128);
        assert_eq!(p.limit(), 5);
        let mut seen = Vec::new();
        for t in (0..=1400).step_by(100) {
            p.grow(t);
            seen.push(p.limit());
        }
        assert_eq!(seen, [10, 10, 20, 20, 40, 40, 80, 80, 128, 128, 128, 128, 128, 128, 128]);
        // A burst of refusals of deliveries all started before the first cut: one cut.
        for _ in 0..50 {
            p.observe(Signal::Overloaded, 0, 10);
        }
        assert_eq!(p.limit(), 64);
        // Refusals of deliveries started after that cut cut again, once per round.
        for round in 1..=20 {
            let t = 10 * round;
            p.observe(Signal::Overloaded, t, t + 10);
        }
        assert_eq!(p.limit(), 5, "never below the floor");
        // Healthy answers alone do not grow it; doubling stops at what the last cut left
        // until 10 s after it, then probes on.
        for _ in 0..1000 {
            p.observe(Signal::Healthy, 500, 600);
        }
        assert_eq!(p.limit(), 5);
        p.grow(5_000);
        assert_eq!(p.limit(), 5, "the cut left 5");
        let probed: Vec<usize> = (0..7)
            .map(|i| {
                p.grow(10_210 + i * GROW_AFTER_MS);
                p.limit()
            })
            .collect();
        assert_eq!(probed, [10, 20, 40, 80, 128, 128, 128], "never above the ceiling");
        p.observe(Signal::Overloaded, 20_000, 20_000);
        assert_eq!(p.limit(), 64);
        p.grow(20_500);
        assert_eq!(p.limit(), 64);
        p.observe(Signal::Neutral, 20_600, 20_700);
        assert_eq!(p.limit(), 64);
        // A floor above the ceiling is the ceiling.
        let mut q = Pace::new(50, 10);
        q.observe(Signal::Overloaded, 0, 1);
        assert_eq!(q.limit(), 10);
        assert_eq!(Pace::new(0, 0).limit(), 1);
    }

    /// An app that refuses above 20 at once: the limit the cuts settle at stays at or
    /// below 20 while refusals go on, from a start of 128.
    #[test]
    fn pace_settles_under_a_refusing_app() {
        let mut p = Pace::new(5, 128);
        let mut now = 0i64;
        let mut refused = 0;
        for _ in 0..200 {
            // One round: work waits and runs long, so it may double; `limit` deliveries
            // started now, those past 20 refused while the first 20 run.
            p.grow(now);
            let limit = p.limit();
            now += 100;
            for i in 0..limit {
                if i < 20 {
                    p.observe(Signal::Healthy, now - 100, now);
                } else {
                    refused += 1;
                    p.refused(20, now);
                }
            }
        }
        assert_eq!(p.limit(), 20, "settled at {}", p.limit());
        // A probe every 10 s (20 refusals each): 20 s of rounds, two probes.
        assert!(refused <= 3 * 108, "refusals only while it finds the level and when it probes: {refused}");
    }

    #[test]
    fn latency_rises_when_even_the_fastest_recent_answers_slow_down() {
        let mut l = Latency::default();
        // Steps that wait a second on the outside world: steady, never rising.
        for i in 0..50 {
            assert!(!l.rising("__wkf_workflow_io step", 1000 + (i % 7) * 40, false));
        }
        // A CPU-bound kind: fast while few run, then every answer slow.
        for _ in 0..8 {
            assert!(!l.rising("__wkf_workflow_par step", 15, false));
        }
        let slow: Vec<bool> = (0..8).map(|_| l.rising("__wkf_workflow_par step", 900, false)).collect();
        assert_eq!(slow, [false, false, false, false, false, false, false, true], "rising once the last 8 are all slow");
        // One fast answer among the recent ones: not rising.
        assert!(!l.rising("__wkf_workflow_par step", 20, false));
        // Mostly long answers with a short one now and then (even the first): not rising.
        assert!(!l.rising("__wkf_workflow_inline flow", 30, false));
        for i in 0..100 {
            assert!(!l.rising("__wkf_workflow_inline flow", if i % 13 == 0 { 30 } else { 3000 }, false), "answer {i}");
        }
        // Kinds are separate: a slow flow does not make steps rise.
        for _ in 0..8 {
            assert!(!l.rising("__wkf_workflow_seq flow", 3000, false));
        }
        // Bounded number of kinds.
        for i in 0..(MAX_KINDS + 10) {
            l.rising(&format!("k{i}"), 1, false);
        }
        assert_eq!(l.kinds.len(), MAX_KINDS);
        let mut p = Pace::new(40, 128);
        p.observe_answer(Signal::Healthy, true, 0, 1);
        assert_eq!(p.limit(), 40, "not below the floor");
        let mut p = Pace::new(5, 128);
        (0..5).for_each(|i| p.grow(i * GROW_AFTER_MS));
        assert_eq!(p.limit(), 128);
        p.observe_answer(Signal::Healthy, true, 0, 1);
        assert_eq!(p.limit(), 64);
        p.observe_answer(Signal::Healthy, false, 2, 3);
        assert_eq!(p.limit(), 64);
    }

    /// Measured 2026-12-07 through the 0.3.0 client (par50: 50 parallel steps, the app on
    /// the same 2 cores): with 5 running, deliveries took 22–90 ms, a few 170–310 ms; with
    /// the pace doubled to 40 on those few, every one took 100–620 ms and the run was 1.28×
    /// slower. Quick kinds with a slow answer now and then do not grow the pace.
    #[test]
    fn only_kinds_slow_when_quiet_wait_on_the_outside_world() {
        let mut l = Latency::default();
        assert!(l.waits_outside("new"), "unknown: a first burst may grow");
        for ms in [22, 35, 45, 90] {
            l.rising("par step", ms, true);
        }
        assert!(!l.waits_outside("par step"));
        // Its slow answers at a higher pace are not quiet: they change nothing.
        for _ in 0..20 {
            l.rising("par step", 400, false);
        }
        assert!(!l.waits_outside("par step"));
        // A slow quiet answer now and then: the median stays quick.
        for ms in [300, 40, 280, 50, 35] {
            l.rising("par step", ms, true);
        }
        assert!(!l.waits_outside("par step"));
        // Quick kinds whose answers wait on the app's CPU at the floor: below 500 ms.
        for ms in [190, 240, 300, 250] {
            l.rising("par10 step", ms, true);
        }
        assert!(!l.waits_outside("par10 step"));
        // Two quiet answers are not enough to judge.
        l.rising("io step", 5, true);
        l.rising("io step", 5, true);
        assert!(l.waits_outside("io step"));
        // Steps that wait a second at the floor.
        for i in 0..8 {
            l.rising("io step", 500 + i * 10, true);
        }
        assert!(l.waits_outside("io step"));
        // A flow that runs its steps inline, now and then quick: the median is long.
        for i in 0..8 {
            l.rising("inline flow", if i % 3 == 0 { 30 } else { 3000 }, true);
        }
        assert!(l.waits_outside("inline flow"));
        assert_eq!(Pace::new(7, 128).floor(), 7);
        assert_eq!(Pace::new(70, 20).floor(), 20);
    }

    #[test]
    fn at_rest_the_pace_starts_again_at_the_floor_below_the_last_cut() {
        let mut p = Pace::new(5, 128);
        (0..5).for_each(|i| p.grow(i * GROW_AFTER_MS));
        assert_eq!(p.limit(), 128);
        p.rest();
        assert_eq!(p.limit(), 5);
        p.grow(1_000);
        assert_eq!(p.limit(), 10, "grows again at once");
        p.grow(1_200);
        p.grow(1_400);
        assert_eq!(p.limit(), 40);
        p.refused(20, 2_000);
        assert_eq!(p.limit(), 20);
        p.rest();
        let after: Vec<usize> = (0..4)
            .map(|i| {
                p.grow(3_000 + i * GROW_AFTER_MS);
                p.limit()
            })
            .collect();
        assert_eq!(after, [10, 20, 20, 20], "up to what the refusal left");
        p.grow(12_000);
        assert_eq!(p.limit(), 40, "probing past it 10 s after the cut");
    }

    #[test]
    fn a_refusal_sets_the_limit_to_what_the_app_was_running() {
        let mut p = Pace::new(5, 128);
        (0..4).for_each(|i| p.grow(i * GROW_AFTER_MS));
        assert_eq!(p.limit(), 80);
        // 40 sent, the app takes 20: the refusals come back while 39, 38, … 20 still run.
        for in_flight in (20..40).rev() {
            p.refused(in_flight, 1_000);
        }
        assert_eq!(p.limit(), 20);
        p.grow(1_100);
        assert_eq!(p.limit(), 20, "no doubling right after a refusal, nor past it");
        p.grow(5_000);
        assert_eq!(p.limit(), 20);
        p.refused(0, 6_000);
        assert_eq!(p.limit(), 5, "never below the floor");
    }

    #[test]
    fn signals() {
        let r = |status: u16, body: Option<&str>| Outcome::Response { status, body: body.map(|b| b.as_bytes().to_vec()) };
        assert_eq!(signal_of(&r(200, None)), Signal::Healthy);
        assert_eq!(signal_of(&r(204, None)), Signal::Healthy);
        assert_eq!(signal_of(&r(503, Some(r#"{"timeoutSeconds":2}"#))), Signal::Healthy, "the runtime's wait");
        assert_eq!(signal_of(&r(503, None)), Signal::Overloaded);
        assert_eq!(signal_of(&r(500, None)), Signal::Overloaded);
        assert_eq!(signal_of(&r(429, None)), Signal::Overloaded);
        assert_eq!(signal_of(&Outcome::Refused { retry_after: None }), Signal::Overloaded);
        assert_eq!(signal_of(&Outcome::Transport("TimeoutError".into())), Signal::Overloaded);
        assert_eq!(signal_of(&r(404, None)), Signal::Neutral);
        assert_eq!(signal_of(&r(401, None)), Signal::Neutral);
    }

    #[test]
    fn couriers_wake_as_the_backlog_needs_and_sleep_when_done() {
        let mut c = Couriers::default();
        assert_eq!(c.to_wake(0, 0), Vec::<usize>::new());
        assert_eq!(c.to_wake(11, 0), vec![0, 1, 2]);
        // The same backlog again: the woken ones will take it.
        assert_eq!(c.to_wake(11, 5), Vec::<usize>::new());
        assert_eq!(c.to_wake(16, 5), vec![3]);
        // Heard from and busy: new work needs new couriers.
        for i in 0..4 {
            c.heard(i, 10, false);
        }
        assert_eq!(c.to_wake(6, 10), vec![4, 5]);
        c.heard(1, 10, true);
        assert_eq!(c.awake(), 5);
        assert_eq!(c.to_wake(20, 10), vec![1, 6]);
        c.failed(0);
        assert_eq!(c.awake(), 6);
        // Never more than there are.
        assert_eq!(c.to_wake(10_000, 20).len(), MAX_COURIERS - 6);
        assert_eq!(c.awake(), MAX_COURIERS);
        // Woken and silent past the stale time: woken again; busy ones last longer.
        c.heard(2, 20, false);
        let again = c.to_wake(10_000, 20 + COURIER_STALE_MS + 1);
        assert_eq!(again.len(), MAX_COURIERS - 2, "the woken ones, not the two busy ones");
        assert!(!again.contains(&2));
        // Each taken for lost once, with how long it had been silent (the operator log).
        let lost = c.take_lost();
        assert_eq!(lost.len(), MAX_COURIERS - 2);
        assert!(lost.iter().all(|(i, silent)| *i != 2 && *silent > COURIER_STALE_MS));
        assert!(c.take_lost().is_empty());
        assert_eq!(c.to_wake(10_000, 20 + BUSY_COURIER_STALE_MS + 1).len(), MAX_COURIERS);
        assert_eq!(c.take_lost().iter().filter(|(i, _)| *i == 2).count(), 1, "the busy one, later");
        c.heard(999, 0, true);
    }

    #[test]
    fn courier_names_and_refusal_delays() {
        assert_eq!(courier_name("q:0", 3), "q:0#courier:3");
        assert_eq!(parse_courier_name("q:0#courier:3"), Some(("q:0", 3)));
        assert_eq!(parse_courier_name("a#courier:b#courier:25"), Some(("a#courier:b", 25)));
        assert_eq!(parse_courier_name("q:0#courier:26"), None);
        assert_eq!(parse_courier_name("#courier:1"), None);
        assert_eq!(parse_courier_name("q:0"), None);
        assert_eq!(MAX_COURIERS, 26);
    }
}
