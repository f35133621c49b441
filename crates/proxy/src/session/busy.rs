//! How many sessions of this worker thread are in the middle of a
//! statement: what decides whether a read shares a pipelined connection.

thread_local! {
    /// Sessions of this worker thread in the middle of a query.
    static BUSY: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Sessions of one thread mid-query (this one included) from which reads
/// go through pipes.
const CROWD: usize = 4;

/// Counts a session as busy on its thread while alive.
pub(super) struct Busy;

impl Busy {
    pub(super) fn enter() -> Busy {
        BUSY.with(|b| b.set(b.get() + 1));
        Busy
    }

    /// Whether enough sessions of this thread are mid-query for a read to
    /// share a pipe: the sign that the cores are saturated. Alone, a read
    /// gains nothing from a pipe (nothing to send it with) and loses its
    /// held connection, which keeps one server warm (measured at one
    /// sysbench thread: pipes cost 25% of the QPS). With a few sessions,
    /// the servers have idle cores, and reads queued on one connection
    /// run one after another where they could run side by side (measured
    /// at 4 sysbench threads: 0.84x without this bound).
    pub(super) fn crowded() -> bool {
        BUSY.with(|b| b.get()) >= CROWD
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        BUSY.with(|b| b.set(b.get() - 1));
    }
}
