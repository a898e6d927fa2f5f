//! The connection gate: at most [`PLATFORM_CONNECTIONS`] outgoing requests of one object
//! wait for their response headers at once; a further one waits in line until one of them
//! has its headers, as Cloudflare does it ("Simultaneous outgoing connections/request: 6",
//! Workers and Durable Objects platform limits; a Durable Object's concurrent requests
//! share one I/O context, so the gate is per object, the strictest reading). workerd does
//! not enforce the limit, so without the gate local figures would not be production's.
//!
//! Also counts, for the tests and the bench: the most connections that waited at once, how
//! many had to wait in line, and how many were made; and, for a diagnosis, what each
//! connection waiting now is for ([`Use`]) and since when.
//!
//! Decides nothing about what is sent: the queue object takes a [`Pass`] around each
//! delivery's wait for headers and each call to another object.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::{Poll, Waker};

pub use crate::queue::pace::PLATFORM_CONNECTIONS;

/// What a connection is for (the diagnosis tells a delivery waiting on the app from a call
/// waiting on another object).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// A delivery's POST to the app.
    Delivery,
    /// A call to a run object (its lifecycle, its lease).
    Run,
    /// A queue object's call to another queue object (a courier's wake-up, its report).
    Queue,
}

impl Use {
    pub const ALL: [Use; 3] = [Use::Delivery, Use::Run, Use::Queue];
    pub fn name(self) -> &'static str {
        match self {
            Use::Delivery => "delivery",
            Use::Run => "run",
            Use::Queue => "queue",
        }
    }
}

#[derive(Default)]
pub struct Gate {
    busy: Cell<usize>,
    /// The passes held now: their number, use and when taken (ms).
    held: RefCell<Vec<(u64, Use, f64)>>,
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
    id: u64,
}

impl Gate {
    /// Wait for a free connection and take it.
    pub async fn enter(self: &Rc<Self>, why: Use) -> Pass {
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
        let id = self.taken.get();
        self.held.borrow_mut().push((id, why, js_sys::Date::now()));
        Pass { gate: self.clone(), id }
    }

    /// The passes held now by use, and how long the oldest has been held (ms).
    pub fn held(&self) -> (Vec<(Use, usize)>, f64) {
        let held = self.held.borrow();
        let now = js_sys::Date::now();
        let by_use = Use::ALL.iter().map(|&u| (u, held.iter().filter(|h| h.1 == u).count())).collect();
        let oldest = held.iter().map(|h| now - h.2).fold(0.0, f64::max);
        (by_use, oldest)
    }

    /// Connections waiting for headers now.
    pub fn busy(&self) -> usize {
        self.busy.get()
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        self.gate.busy.set(self.gate.busy.get().saturating_sub(1));
        self.gate.held.borrow_mut().retain(|h| h.0 != self.id);
        // Every waiter polls again; the first to run takes the place.
        for w in self.gate.waiters.borrow_mut().drain(..) {
            w.wake();
        }
    }
}
