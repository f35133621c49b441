//! The primary's position, read after a moment: for read-your-writes
//! across a fleet, a read must see every write acknowledged before it
//! arrived, by any instance. Such a write committed on the group's primary
//! before its OK, so the primary's position read after the read arrived
//! covers it. One read of the position at a time per group serves every
//! read that arrived before it was sent: at most two round trips to the
//! primary per read's latency, and one at a time, however many reads.

use crate::gtid::{Gtid, Newest};
use crate::{BackendConn, Server};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// The primary's position could not be read in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unknown;

#[derive(Default)]
pub struct PrimaryPosition {
    /// Reads of the position begun (numbered from 1).
    begun: AtomicU64,
    /// The number of the last read of the position that ended.
    ended: AtomicU64,
    /// The number of the last one that gave a position.
    newest_of: AtomicU64,
    in_flight: AtomicBool,
    /// The newest position read.
    newest: Newest,
    ended_signal: Notify,
    /// The connection the reads use, kept between them (one read at a
    /// time), so that a busy pool never holds them up.
    conn: parking_lot::Mutex<Option<(Arc<Server>, BackendConn)>>,
}

impl PrimaryPosition {
    /// The kept connection, if it is to `server` (one to a former primary
    /// is closed).
    pub fn take_conn(&self, server: &Arc<Server>) -> Option<BackendConn> {
        match self.conn.lock().take() {
            Some((s, c)) if Arc::ptr_eq(&s, server) => Some(c),
            Some((s, c)) => {
                s.discard(c);
                None
            }
            None => None,
        }
    }

    /// Keeps the connection for the next read.
    pub fn keep_conn(&self, server: Arc<Server>, c: BackendConn) {
        if let Some((s, old)) = self.conn.lock().replace((server, c)) {
            s.discard(old);
        }
    }

    /// The primary's position as of a moment after this call, read by
    /// `read` (this caller's, or another's that began after this call;
    /// `Ok(None)`: the primary has written nothing in its domain). Err
    /// when no such read gave one by `deadline`: the position is unknown.
    pub async fn after_now<F, Fut>(
        &self,
        deadline: tokio::time::Instant,
        read: F,
    ) -> Result<Option<Gtid>, Unknown>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Option<Gtid>, Unknown>>,
    {
        let need = self.begun.load(Ordering::SeqCst) + 1;
        let mut read = Some(read);
        loop {
            let signal = self.ended_signal.notified();
            tokio::pin!(signal);
            signal.as_mut().enable();
            if self.ended.load(Ordering::SeqCst) >= need
                && self.newest_of.load(Ordering::SeqCst) >= need
            {
                return Ok(self.newest.load());
            }
            if self
                .in_flight
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                let n = self.begun.fetch_add(1, Ordering::SeqCst) + 1;
                let got = match read.take() {
                    Some(r) => r().await,
                    // This caller's read ran and failed: another one, by
                    // whoever comes next, or the deadline.
                    None => {
                        self.in_flight.store(false, Ordering::SeqCst);
                        return Err(Unknown);
                    }
                };
                if let Ok(g) = got {
                    if let Some(g) = g {
                        self.newest.publish(&g);
                    }
                    self.newest_of.fetch_max(n, Ordering::SeqCst);
                }
                self.ended.store(n, Ordering::SeqCst);
                self.in_flight.store(false, Ordering::SeqCst);
                self.ended_signal.notify_waiters();
                continue;
            }
            if tokio::time::timeout_at(deadline, signal).await.is_err() {
                return Err(Unknown);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    fn g(seq: u64) -> Gtid {
        Gtid {
            domain: 0,
            server: 1,
            seq,
            uuid: 0,
        }
    }

    #[tokio::test]
    async fn a_read_begun_before_the_caller_arrived_does_not_count() {
        let p = Arc::new(PrimaryPosition::default());
        let deadline = || tokio::time::Instant::now() + Duration::from_secs(5);
        let (release, held) = tokio::sync::oneshot::channel::<()>();
        // The first caller's read is in flight (slow) ...
        let first = {
            let p = p.clone();
            tokio::spawn(async move {
                p.after_now(deadline(), || async move {
                    held.await.ok();
                    Ok(Some(g(5)))
                })
                .await
            })
        };
        while !p.in_flight.load(Ordering::SeqCst) {
            tokio::task::yield_now().await;
        }
        // ... when the second arrives: it needs a read begun after it.
        let second = {
            let p = p.clone();
            tokio::spawn(async move { p.after_now(deadline(), || async { Ok(Some(g(7))) }).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        release.send(()).ok();
        assert_eq!(first.await.unwrap().unwrap().map(|x| x.seq), Some(5));
        assert_eq!(second.await.unwrap().unwrap().map(|x| x.seq), Some(7));
        // Callers that arrive together share one read.
        let reads = Arc::new(AtomicU64::new(0));
        let many: Vec<_> = (0..8)
            .map(|_| {
                let (p, reads) = (p.clone(), reads.clone());
                tokio::spawn(async move {
                    p.after_now(deadline(), || async move {
                        reads.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        Ok(Some(g(9)))
                    })
                    .await
                })
            })
            .collect();
        for m in many {
            assert_eq!(m.await.unwrap().unwrap().map(|x| x.seq), Some(9));
        }
        assert!(
            reads.load(Ordering::SeqCst) <= 2,
            "one read (two at most) for eight callers"
        );
        // A failed read gives no position, not an older one.
        assert_eq!(
            p.after_now(deadline(), || async { Err(Unknown) }).await,
            Err(Unknown)
        );
    }
}
