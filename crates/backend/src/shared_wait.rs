//! One wait for a write on a replica, shared by every read that needs it.
//!
//! Under a steady stream of writes, most reads of a user need the same
//! newest write, and each would send its own MASTER_GTID_WAIT: a replica
//! then holds dozens of sleeping waits, wakes them all at every commit and
//! spends on them CPU its applier needs. Instead, the first read that must
//! wait on a replica sends the wait (with itself behind it, as before);
//! reads that need that write or an earlier one meanwhile hold no server
//! connection and wait here until the replica is seen to have it, or the
//! wait failed, and then run without a wait of their own.

use crate::gtid::{self, Packed};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use tokio::sync::Notify;

/// The wait in flight on one server (at most one, for the newest write
/// asked), and the signal for the reads behind it.
#[derive(Default)]
pub struct SharedWait {
    /// The write the wait in flight is for (packed; 0: none).
    target: AtomicU64,
    /// When that wait is over at the latest (µs, the clock of [`now_us`]):
    /// a wait whose session vanished without saying so stops counting.
    until_us: AtomicI64,
    /// Woken when a wait ends or the server's applied position changes.
    changed: Notify,
}

/// What a read that needs a write on a replica does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Send the wait: no wait in flight covers the write.
    Own,
    /// A wait in flight covers it: wait for its end here.
    Follow,
}

impl SharedWait {
    /// Whether the caller sends a wait for `g` (running at most `budget_us`)
    /// or follows one in flight that covers it (same domain, same or later
    /// write). A wait for a later write than the one in flight replaces it
    /// as the one to follow.
    pub fn claim(&self, g: Packed, budget_us: i64) -> Claim {
        let now = now_us();
        let mut cur = self.target.load(Ordering::Acquire);
        loop {
            let live = self.live(cur, now);
            if live && gtid::domain(cur) == gtid::domain(g) && gtid::seq(cur) >= gtid::seq(g) {
                return Claim::Follow;
            }
            if live && gtid::domain(cur) != gtid::domain(g) {
                // One slot: a wait of another domain is not replaced, and
                // this one is not shared.
                return Claim::Own;
            }
            match self
                .target
                .compare_exchange_weak(cur, g, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    self.until_us.store(now + budget_us, Ordering::Release);
                    return Claim::Own;
                }
                Err(v) => cur = v,
            }
        }
    }

    /// The wait for `g` ended (caught up, timed out or failed): the reads
    /// following it look again.
    pub fn ended(&self, g: Packed) {
        let _ = self
            .target
            .compare_exchange(g, 0, Ordering::AcqRel, Ordering::Acquire);
        self.changed.notify_waiters();
    }

    /// Something the followers look at changed (the server's position).
    pub fn wake(&self) {
        self.changed.notify_waiters();
    }

    /// Whether a live wait is in flight. The read that sent it runs here
    /// once it ends, as every read following it does: balancing counts it
    /// as queued here like them.
    #[inline]
    pub fn in_flight(&self) -> bool {
        let cur = self.target.load(Ordering::Acquire);
        // The clock is read only while a wait is in flight.
        cur != 0 && self.live(cur, now_us())
    }

    /// Whether `cur`, the wait last seen in flight, is a wait (not 0) and
    /// within its budget at `now`: a wait whose session vanished without
    /// saying so stops counting.
    fn live(&self, cur: Packed, now: i64) -> bool {
        cur != 0 && self.until_us.load(Ordering::Acquire) > now
    }

    /// Whether a live wait in flight covers `g`.
    pub fn covers(&self, g: Packed) -> bool {
        let cur = self.target.load(Ordering::Acquire);
        cur != 0
            && self.live(cur, now_us())
            && gtid::domain(cur) == gtid::domain(g)
            && gtid::seq(cur) >= gtid::seq(g)
    }

    /// Waits until `done()` says the follower is through, or `deadline`.
    /// `done` is asked before each sleep, with the wake-up already armed,
    /// so no change between the look and the sleep is missed.
    pub async fn follow<T>(
        &self,
        deadline: tokio::time::Instant,
        mut done: impl FnMut() -> Option<T>,
    ) -> Option<T> {
        loop {
            let woken = self.changed.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if let Some(v) = done() {
                return Some(v);
            }
            if tokio::time::timeout_at(deadline, woken).await.is_err() {
                return done();
            }
        }
    }
}

/// Microseconds on the wall clock; only differences within one process
/// matter here.
fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(domain: u64, seq: u64) -> Packed {
        crate::gtid::Gtid {
            domain: domain as u32,
            server: 1,
            seq,
            uuid: 0,
        }
        .pack()
    }

    #[test]
    fn the_first_read_waits_and_the_ones_needing_no_later_write_follow() {
        let w = SharedWait::default();
        assert_eq!(w.claim(g(0, 10), 50_000), Claim::Own);
        assert_eq!(w.claim(g(0, 9), 50_000), Claim::Follow);
        assert_eq!(w.claim(g(0, 10), 50_000), Claim::Follow);
        // A later write needs a wait of its own, which the others follow.
        assert_eq!(w.claim(g(0, 11), 50_000), Claim::Own);
        assert_eq!(w.claim(g(0, 11), 50_000), Claim::Follow);
        // The earlier wait ending does not end the later one.
        w.ended(g(0, 10));
        assert!(w.covers(g(0, 11)));
        w.ended(g(0, 11));
        assert!(!w.covers(g(0, 11)));
        assert_eq!(w.claim(g(0, 11), 50_000), Claim::Own);
    }

    #[test]
    fn another_domain_is_not_covered_and_does_not_take_the_slot() {
        let w = SharedWait::default();
        assert_eq!(w.claim(g(0, 10), 50_000), Claim::Own);
        assert_eq!(w.claim(g(1, 3), 50_000), Claim::Own);
        assert!(w.covers(g(0, 10)));
        assert!(!w.covers(g(1, 3)));
    }

    #[test]
    fn a_wait_past_its_budget_is_not_followed() {
        let w = SharedWait::default();
        assert_eq!(w.claim(g(0, 10), -1), Claim::Own);
        assert_eq!(
            w.claim(g(0, 10), 50_000),
            Claim::Own,
            "the first one's time is over"
        );
    }

    #[tokio::test]
    async fn followers_wake_when_the_wait_ends_and_time_out_otherwise() {
        let w = std::sync::Arc::new(SharedWait::default());
        let applied = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        assert_eq!(w.claim(g(0, 10), 1_000_000), Claim::Own);
        let (w2, a2) = (w.clone(), applied.clone());
        let follower = tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
            w2.follow(deadline, || a2.load(Ordering::Acquire).then_some(()))
                .await
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        applied.store(true, Ordering::Release);
        w.ended(g(0, 10));
        assert_eq!(follower.await.ok().flatten(), Some(()));

        let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(30);
        let started = std::time::Instant::now();
        assert_eq!(w.follow(deadline, || None::<()>).await, None);
        assert!(started.elapsed() >= std::time::Duration::from_millis(30));
    }
}
