//! Helpers shared by the native tests.
//!
//! Imports nothing of ours, so any layer's tests may use it.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Drive `f` to completion on this thread. The tests' fakes answer at once, so the
/// future never waits on anything but itself.
pub fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// A xorshift64 generator from `seed` (not 0): each call answers the next value below
/// `n` (`u64::MAX` for the raw value). Deterministic, so a failing random test fails the
/// same way every run.
pub fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        if n == u64::MAX {
            seed
        } else {
            seed % n
        }
    }
}
