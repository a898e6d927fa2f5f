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
