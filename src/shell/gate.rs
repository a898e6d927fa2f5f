//! The connection gate: at most [`PLATFORM_CONNECTIONS`] outgoing requests of one object
//! wait for their response headers at once; a further one waits in line until one of them
//! has its headers, as Cloudflare does it ("Simultaneous outgoing connections/request: 6",
//! Workers and Durable Objects platform limits; a Durable Object's concurrent requests
//! share one I/O context, so the gate is per object, the strictest reading). workerd does
//! not enforce the limit, so without the gate local figures would not be production's.
//!
//! Also counts, for the tests and the bench: the most connections that waited at once, how
//! many had to wait in line, and how many were made.
//!
//! Decides nothing about what is sent: the queue object takes a [`Pass`] around each
//! delivery's wait for headers and each call to another object.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::{Poll, Waker};

pub use crate::queue::pace::PLATFORM_CONNECTIONS;

#[derive(Default)]
pub struct Gate {
    busy: Cell<usize>,
    waiters: RefCell<Vec<Waker>>,
    /// The most passes held at once.
    pub peak: Cell<usize>,
    /// Passes that had to wait for a free connection.
    pub queued: Cell<u64>,
    /// Passes taken.
    pub taken: Cell<u64>,
}

/// One connection's place; released when dropped (its headers arrived, or it failed).
pub struct Pass {
    gate: Rc<Gate>,
}

impl Gate {
    /// Wait for a free connection and take it.
    pub async fn enter(self: &Rc<Self>) -> Pass {
        let mut waited = false;
        std::future::poll_fn(|cx| {
            if self.busy.get() < PLATFORM_CONNECTIONS {
                let busy = self.busy.get() + 1;
                self.busy.set(busy);
                self.peak.set(self.peak.get().max(busy));
                self.taken.set(self.taken.get() + 1);
                if waited {
                    self.queued.set(self.queued.get() + 1);
                }
                return Poll::Ready(());
            }
            waited = true;
            self.waiters.borrow_mut().push(cx.waker().clone());
            Poll::Pending
        })
        .await;
        Pass { gate: self.clone() }
    }

    /// Connections waiting for headers now.
    pub fn busy(&self) -> usize {
        self.busy.get()
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        self.gate.busy.set(self.gate.busy.get().saturating_sub(1));
        // Every waiter polls again; the first to run takes the place.
        for w in self.gate.waiters.borrow_mut().drain(..) {
            w.wake();
        }
    }
}
