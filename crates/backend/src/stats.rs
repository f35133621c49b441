//! What each server did for clients: statements relayed, the errors it
//! answered, and a histogram of response times. Plain atomics updated
//! once per statement (relaxed, no lock); the admin port and /metrics
//! read them.

use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds of the response-time buckets, microseconds (the last,
/// +Inf, is implied).
pub const LATENCY_BUCKETS_US: [u64; 14] = [
    250, 500, 1_000, 2_000, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    5_000_000, 30_000_000,
];

#[derive(Default)]
pub struct StatementStats {
    statements: AtomicU64,
    errors: AtomicU64,
    /// Statements by response time: bucket i counts those up to
    /// LATENCY_BUCKETS_US[i] and above the one before; the last, the rest.
    buckets: [AtomicU64; LATENCY_BUCKETS_US.len() + 1],
    sum_us: AtomicU64,
    /// Statements in the last whole second (set by [`Self::tick`]), and
    /// the count at that tick.
    per_second: AtomicU64,
    at_tick: AtomicU64,
}

/// A reading of [`StatementStats`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatementCounts {
    pub statements: u64,
    pub errors: u64,
    /// Cumulative, as Prometheus wants them: statements up to each bound,
    /// then all of them (+Inf).
    pub cumulative: Vec<u64>,
    pub sum_us: u64,
}

impl StatementStats {
    #[inline]
    pub fn record(&self, elapsed_us: u64, error: bool) {
        self.statements.fetch_add(1, Ordering::Relaxed);
        if error {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        let i = LATENCY_BUCKETS_US.partition_point(|&b| b < elapsed_us);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(elapsed_us, Ordering::Relaxed);
    }

    /// Called once a second (the pool upkeep): the statements since the
    /// last call become the per-second rate.
    pub fn tick(&self) {
        let now = self.statements.load(Ordering::Relaxed);
        let before = self.at_tick.swap(now, Ordering::Relaxed);
        self.per_second
            .store(now.saturating_sub(before), Ordering::Relaxed);
    }

    pub fn per_second(&self) -> u64 {
        self.per_second.load(Ordering::Relaxed)
    }

    pub fn read(&self) -> StatementCounts {
        let mut total = 0;
        let cumulative = self
            .buckets
            .iter()
            .map(|b| {
                total += b.load(Ordering::Relaxed);
                total
            })
            .collect();
        StatementCounts {
            statements: self.statements.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            cumulative,
            sum_us: self.sum_us.load(Ordering::Relaxed),
        }
    }
}

/// What read-your-writes cost on a server: waits for a GTID sent to it
/// (a replica), how long they took, how many ran out of time, and reads
/// that went to it (a primary) because no replica was known to have the
/// session's write. Updated only on those reads.
#[derive(Default)]
pub struct CausalStats {
    waits: AtomicU64,
    timeouts: AtomicU64,
    wait_us: AtomicU64,
    primary_reads: AtomicU64,
    followed: AtomicU64,
    follow_us: AtomicU64,
}

/// A reading of [`CausalStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CausalCounts {
    pub waits: u64,
    pub timeouts: u64,
    pub wait_us: u64,
    pub primary_reads: u64,
    /// Reads that waited for another read's wait instead of sending one.
    pub followed: u64,
    pub follow_us: u64,
}

impl CausalStats {
    /// A wait on this replica ended after `us`; `caught_up`: the replica
    /// had the GTID in time and the read ran there.
    pub fn wait(&self, us: u64, caught_up: bool) {
        self.waits.fetch_add(1, Ordering::Relaxed);
        self.wait_us.fetch_add(us, Ordering::Relaxed);
        if !caught_up {
            self.timeouts.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A read waited `us` for another read's wait on this replica.
    pub fn followed(&self, us: u64) {
        self.followed.fetch_add(1, Ordering::Relaxed);
        self.follow_us.fetch_add(us, Ordering::Relaxed);
    }

    /// A read that had to see a write went to this primary instead.
    pub fn primary_read(&self) {
        self.primary_reads.fetch_add(1, Ordering::Relaxed);
    }

    pub fn read(&self) -> CausalCounts {
        CausalCounts {
            waits: self.waits.load(Ordering::Relaxed),
            timeouts: self.timeouts.load(Ordering::Relaxed),
            wait_us: self.wait_us.load(Ordering::Relaxed),
            primary_reads: self.primary_reads.load(Ordering::Relaxed),
            followed: self.followed.load(Ordering::Relaxed),
            follow_us: self.follow_us.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_bounds_inclusive() {
        let s = StatementStats::default();
        for us in [100, 250, 251, 999_999, 40_000_000] {
            s.record(us, us == 251);
        }
        let r = s.read();
        assert_eq!(r.statements, 5);
        assert_eq!(r.errors, 1);
        assert_eq!(r.cumulative.len(), LATENCY_BUCKETS_US.len() + 1);
        assert_eq!(r.cumulative[0], 2, "100 and 250 are <= 250 us");
        assert_eq!(r.cumulative[1], 3);
        assert_eq!(r.cumulative[11], 4, "999,999 us <= 1 s");
        assert_eq!(*r.cumulative.last().unwrap(), 5);
        assert_eq!(r.sum_us, 100 + 250 + 251 + 999_999 + 40_000_000);
    }
}
