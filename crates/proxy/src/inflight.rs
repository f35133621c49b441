//! Statements waiting on a server, per worker thread, so that one running
//! on a server the monitor has since found down is abandoned within a tick
//! instead of waiting for that server, which may never answer (a frozen
//! machine keeps its connections open). Each worker thread runs its own
//! single-threaded runtime, so the registry is thread-local: registering a
//! statement takes no lock and touches nothing another thread uses.

use sextant_backend::Health;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Poll, Waker};
use std::time::Duration;

/// How often the waiting statements of a thread look at their server's
/// health.
const TICK: Duration = Duration::from_millis(100);

#[derive(Default)]
struct Registry {
    slots: Vec<Option<Waker>>,
    free: Vec<usize>,
    live: usize,
    ticking: bool,
}

thread_local! {
    static WAITING: RefCell<Registry> = RefCell::new(Registry::default());
}

/// A statement's place in the registry while it waits.
struct Slot(Option<usize>);

impl Slot {
    fn register(&mut self, waker: &Waker) {
        WAITING.with(|r| {
            let mut r = r.borrow_mut();
            match self.0 {
                Some(i) => {
                    if let Some(w) = r.slots.get_mut(i) {
                        match w {
                            Some(w) if w.will_wake(waker) => {}
                            _ => *w = Some(waker.clone()),
                        }
                    }
                }
                None => {
                    let i = match r.free.pop() {
                        Some(i) => {
                            r.slots[i] = Some(waker.clone());
                            i
                        }
                        None => {
                            r.slots.push(Some(waker.clone()));
                            r.slots.len() - 1
                        }
                    };
                    r.live += 1;
                    self.0 = Some(i);
                    if !r.ticking {
                        r.ticking = true;
                        tokio::spawn(tick());
                    }
                }
            }
        });
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            WAITING.with(|r| {
                let mut r = r.borrow_mut();
                if let Some(w) = r.slots.get_mut(i) {
                    *w = None;
                    r.free.push(i);
                    r.live -= 1;
                }
            });
        }
    }
}

/// Wakes this thread's waiting statements every tick while there are any,
/// so that each looks at its server's health.
async fn tick() {
    loop {
        tokio::time::sleep(TICK).await;
        let idle = WAITING.with(|r| {
            let mut r = r.borrow_mut();
            if r.live == 0 {
                r.ticking = false;
                return true;
            }
            for w in r.slots.iter().flatten() {
                // Only schedules the task: nothing runs (and borrows the
                // registry) until this returns.
                w.wake_by_ref();
            }
            false
        });
        if idle {
            return;
        }
    }
}

/// Runs `fut` (a statement's answer being relayed from a server); None
/// when the monitor found that server down meanwhile and the statement was
/// abandoned. (Pinned by the caller: the relay's future is large, and
/// moved in here it was copied once more per statement.)
pub async fn watched<F: Future>(health: &Health, mut fut: Pin<&mut F>) -> Option<F::Output> {
    let epoch = health.down_epoch();
    let mut slot = Slot(None);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        if health.down_epoch() != epoch {
            return Poll::Ready(None);
        }
        slot.register(cx.waker());
        Poll::Pending
    })
    .await
}
