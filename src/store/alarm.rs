//! The object's alarm as one core call sees and changes it (QueueDO, RunDO): the shell
//! reads the current alarm before the call's storage transaction and applies the
//! [`AlarmChange`] the call reports right after the transaction commits (the platform's
//! alarm API is not part of `transactionSync`).
//!
//! Knows no core's alarm policy and nothing of the platform's alarm API.

/// The latest alarm time a core sets (2262-04-11T23:47:16Z). The platform's alarm API
/// converts the time to signed 64-bit nanoseconds and throws `TypeError: This API doesn't
/// support dates after 2189.` past [`PLATFORM_LIMIT_MS`]; every time a core schedules
/// (queue delays, 503 `timeoutSeconds`, retention) is clamped to this first, so no call
/// answers an error from the alarm write after its transaction committed. It also keeps
/// the queue's 13-digit time keys ordered like the times they encode.
pub const MAX_ALARM_MS: i64 = 9_223_372_036_000;

/// The first epoch ms the platform's alarm API refuses: `i64::MAX` nanoseconds.
pub const PLATFORM_LIMIT_MS: i64 = i64::MAX / 1_000_000;
const _: () = assert!(MAX_ALARM_MS < PLATFORM_LIMIT_MS);

/// What a core call wants done with the object's alarm after its transaction commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlarmChange {
    Set(i64),
    Delete,
}

/// An alarm time as written at `now` (see [`AlarmChange::as_written`]).
pub fn written_at(at: i64, now: i64) -> i64 {
    at.max(now.saturating_add(1)).min(MAX_ALARM_MS)
}

impl AlarmChange {
    /// The alarm time this change leaves (`None`: no alarm).
    pub fn time(self) -> Option<i64> {
        match self {
            AlarmChange::Set(at) => Some(at),
            AlarmChange::Delete => None,
        }
    }

    /// The change that leaves `time` (`None`: delete the alarm).
    pub fn to(time: Option<i64>) -> Self {
        time.map_or(AlarmChange::Delete, AlarmChange::Set)
    }

    /// The change as the shell writes it at `now`: a time at or before `now` (work already
    /// due) becomes `now + 1`, which fires as soon.
    ///
    /// Why: on workerd, an alarm set while an alarm handler runs to a time at or before that
    /// handler's own scheduled time is often lost — storage keeps the time, the scheduler
    /// drops it, and it never fires (`tests/platform-alarm.test.mjs` measures it: 7-10 in
    /// 10). Inside a handler `Date.now()` is at or after its scheduled time, so `now + 1`
    /// is always later. A queue shard whose delivery loop wrote such a time kept no alarm
    /// at all, and after a restart nothing recovered its deliveries (the chaos stalls,
    /// `docs/testing.md`).
    pub fn as_written(self, now: i64) -> Self {
        match self {
            AlarmChange::Set(at) => AlarmChange::Set(written_at(at, now)),
            AlarmChange::Delete => AlarmChange::Delete,
        }
    }
}

/// The object's alarm as one core call sees and changes it. The shell reads the current
/// alarm before the transaction and applies [`Alarm::change`] right after it commits
/// (nothing when the call failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Alarm {
    initial: Option<i64>,
    current: Option<i64>,
    touched: bool,
    known: bool,
}

impl Alarm {
    /// The alarm as read before the call.
    pub fn new(current: Option<i64>) -> Self {
        Alarm { initial: current, current, touched: false, known: true }
    }
    /// The alarm as read before the call, but any decision is written even when it
    /// equals that value (`rearmAlarm`, the recovery hatch, always re-writes).
    pub fn forced(current: Option<i64>) -> Self {
        Alarm { initial: current, current, touched: false, known: false }
    }
    /// For calls that only write the alarm (claim, settle): the current value is not
    /// read, and whatever they decide is always applied.
    pub fn unknown() -> Self {
        Alarm { initial: None, current: None, touched: false, known: false }
    }
    pub fn get(&self) -> Option<i64> {
        self.current
    }
    pub fn set(&mut self, at: i64) {
        self.current = Some(at.clamp(0, MAX_ALARM_MS));
        self.touched = true;
    }
    pub fn delete(&mut self) {
        self.current = None;
        self.touched = true;
    }
    /// The change to apply, if any (a write of the value already in place is skipped,
    /// except for [`Alarm::unknown`] alarms).
    pub fn change(&self) -> Option<AlarmChange> {
        if !self.touched || (self.known && self.initial == self.current) {
            return None;
        }
        Some(match self.current {
            Some(t) => AlarmChange::Set(t),
            None => AlarmChange::Delete,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alarm_times_stay_inside_what_the_platform_accepts() {
        assert_eq!(PLATFORM_LIMIT_MS, 9_223_372_036_854);
        for at in [i64::MAX, 10_000_000_000_000, PLATFORM_LIMIT_MS, MAX_ALARM_MS + 1] {
            let mut a = Alarm::unknown();
            a.set(at);
            assert_eq!(a.change(), Some(AlarmChange::Set(MAX_ALARM_MS)), "{at}");
        }
        let mut a = Alarm::unknown();
        a.set(-5);
        assert_eq!(a.change(), Some(AlarmChange::Set(0)));
    }

    #[test]
    fn an_alarm_is_never_written_at_or_before_now() {
        assert_eq!(AlarmChange::Set(5).as_written(100), AlarmChange::Set(101));
        assert_eq!(AlarmChange::Set(100).as_written(100), AlarmChange::Set(101));
        assert_eq!(AlarmChange::Set(101).as_written(100), AlarmChange::Set(101));
        assert_eq!(AlarmChange::Set(5_000).as_written(100), AlarmChange::Set(5_000));
        assert_eq!(AlarmChange::Delete.as_written(100), AlarmChange::Delete);
        assert_eq!(AlarmChange::Set(MAX_ALARM_MS).as_written(MAX_ALARM_MS), AlarmChange::Set(MAX_ALARM_MS));
    }

    #[test]
    fn alarm_changes() {
        let mut a = Alarm::new(Some(10));
        assert_eq!(a.change(), None);
        a.set(10);
        assert_eq!(a.change(), None);
        a.set(11);
        assert_eq!(a.change(), Some(AlarmChange::Set(11)));
        let mut u = Alarm::unknown();
        u.delete();
        assert_eq!(u.change(), Some(AlarmChange::Delete));
        let mut n = Alarm::new(None);
        n.delete();
        assert_eq!(n.change(), None);
        let mut f = Alarm::forced(Some(7));
        assert_eq!(f.change(), None);
        f.set(7);
        assert_eq!(f.change(), Some(AlarmChange::Set(7)));
    }
}
