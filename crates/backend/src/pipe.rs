//! Pipelined reads: several sessions' plain reads share one server
//! connection, sent back to back without waiting for the answers.
//!
//! The MySQL protocol lets a client send commands before reading the
//! answers to earlier ones; the server answers in order. When requests
//! reach the server while it is still answering earlier ones, it reads the
//! next one without going to sleep and being woken, and sextant writes
//! several with one send: that is where a loopback hop's CPU goes
//! (docs/performance.md, "Pipelining").
//!
//! A pipe is one server connection used from two ends. Requests are
//! written through a duplicate of the socket, by whichever submitting
//! session finds no other one writing (it writes what others queue
//! meanwhile too, so no task of its own is woken per request). The
//! connection itself (its read buffer and session state) is a baton passed
//! from session to session in the order their requests were written: each
//! session relays its own answer straight from the connection's buffer to
//! its client (no copy, no decoding), then hands the connection to the next
//! one in line, whose answer is often in the buffer already.
//!
//! Only statements that may run twice go through a pipe (plain reads, no
//! state, no transaction): if the connection fails, every read on it is
//! retried elsewhere; none is lost and no write can run twice.

use crate::conn::{BackendConn, Flavor};
use crate::state::SessionVars;
pub use crate::turn::Baton;
use crate::turn::{Handover, Turn, TurnSlot};
use parking_lot::Mutex;
use sextant_net::stream::Stream;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Largest request sent through a pipe, the deepest pipe, and the most
/// request bytes a pipe may have in flight. The session that writes the
/// queued requests may be the one whose answer comes next; it must never
/// wait for the server to read more while the server waits for it to read
/// that answer. So everything a pipe can have in flight (MAX_QUEUED, 64
/// KiB) must fit in the socket buffers between sextant and the server
/// (loopback TCP starts at 16 KiB to send plus 128 KiB to receive; Unix
/// sockets at 208 KiB), and a write never waits. The depth bounds a count
/// (reads released together may queue deeper than `pipeline_depth`); the
/// bytes are bounded here, whatever the count.
pub const MAX_REQUEST: usize = 4 * 1024;
pub const MAX_DEPTH: usize = 16;
pub const MAX_QUEUED: usize = MAX_DEPTH * MAX_REQUEST;

/// A pipe whose current answer has taken longer than this takes no new
/// reads until it is done: a long query delays only the reads already
/// queued behind it, not every read that comes after.
const STALLED_MS: u64 = 10;

/// What a server's pipes did, for SHOW BACKENDS: reads sent through
/// pipes, and the sends that carried them (reads / sends = how many went
/// together).
#[derive(Default)]
pub struct PipeCounters {
    pub reads: AtomicU64,
    pub sends: AtomicU64,
}

#[derive(Default)]
struct State {
    /// The connection, while no session is relaying from it.
    conn: Option<Baton>,
    /// Sessions whose requests are written or about to be, in order,
    /// waiting for the connection (cleared when the pipe fails: their
    /// turns end without it, and they retry elsewhere).
    queue: VecDeque<Handover>,
    /// Requests not written yet.
    pending: Vec<u8>,
    /// The writer's other buffer (swapped with `pending`, so neither is
    /// reallocated per request).
    spare: Vec<u8>,
    /// A session is writing; what others queue meanwhile is its to write.
    writing: bool,
    /// The length of each request in flight, in the order of the answers,
    /// and their sum (at most MAX_QUEUED).
    lengths: VecDeque<usize>,
    queued: usize,
    /// The connection's server statements, by text.
    stmts: HashMap<Arc<[u8]>, Stmt, crate::FastHash>,
    /// How many more the connection may have before one must be closed
    /// (closing one is not pipelined: a pipe never closes statements).
    stmt_room: usize,
}

#[derive(Clone, Copy)]
enum Stmt {
    Ready {
        id: u32,
        types_sent: bool,
    },
    /// A session's COM_STMT_PREPARE for it is on the way: others execute
    /// it elsewhere meanwhile rather than prepare it twice.
    Preparing,
    /// Prepared under another database or sql_mode: it would have to be
    /// closed first.
    Stale,
}

/// What a pipe can do with a prepared statement's execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PipeStmt {
    /// Prepared on the connection: execute with this server statement id.
    Ready { id: u32, types_sent: bool },
    /// Not prepared there, and now booked to this caller: prepare it
    /// through the pipe, then report with `stmt_prepared`.
    Prepare,
    /// Not through this pipe (another session is preparing it, or the
    /// connection has no room for another statement).
    No,
}

pub struct Pipe {
    /// The worker thread whose sessions use this pipe: passing the
    /// connection between sessions of one thread wakes no other thread
    /// (measured: sessions of two threads sharing pipes cost sextant more
    /// CPU than pipelining saves it).
    pub home: usize,
    pub user: Arc<str>,
    pub flavor: Flavor,
    /// The session state of the connection; only sessions with the same
    /// state may use it (it never changes: nothing that changes it is
    /// pipelined).
    pub vars: SessionVars,
    /// A duplicate handle on the connection's socket, for writing.
    writer: Stream,
    state: Mutex<State>,
    /// Requests submitted and not yet relayed.
    in_flight: AtomicUsize,
    broken: AtomicBool,
    /// When a request last went in ([`coarse_ms`]).
    last_used_ms: AtomicU64,
    /// When the answer being relayed became the next in line.
    head_since_ms: AtomicU64,
    counters: Arc<PipeCounters>,
}

impl Pipe {
    /// Turns a clean, idle server connection into a pipe. Fails for
    /// connections whose socket cannot be shared (TLS).
    pub fn new(
        conn: BackendConn,
        home: usize,
        counters: Arc<PipeCounters>,
    ) -> Result<Pipe, Box<(BackendConn, std::io::Error)>> {
        let writer = match conn.stream.duplicate() {
            Ok(w) => w,
            Err(e) => return Err(Box::new((conn, e))),
        };
        let stmts = conn
            .stmts_by_sql()
            .map(|(sql, s)| {
                let st = match s {
                    Some(s) => Stmt::Ready {
                        id: s.id,
                        types_sent: s.types_sent,
                    },
                    None => Stmt::Stale,
                };
                (sql.clone(), st)
            })
            .collect();
        let stmt_room = conn.stmt_room();
        Ok(Pipe {
            home,
            user: conn.user.clone(),
            flavor: conn.flavor,
            vars: conn.vars.clone(),
            writer,
            state: Mutex::new(State {
                conn: Some(Box::new(conn)),
                stmts,
                stmt_room,
                ..State::default()
            }),
            in_flight: AtomicUsize::new(0),
            broken: AtomicBool::new(false),
            last_used_ms: AtomicU64::new(coarse_ms()),
            head_since_ms: AtomicU64::new(coarse_ms()),
            counters,
        })
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    pub fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Relaxed)
    }

    fn now_ms(&self) -> u64 {
        coarse_ms()
    }

    /// Whether new reads should keep away: an answer has been in the
    /// works for a while (a long query, a slow client).
    pub fn stalled(&self) -> bool {
        self.in_flight() > 0
            && self
                .now_ms()
                .saturating_sub(self.head_since_ms.load(Ordering::Relaxed))
                > STALLED_MS
    }

    pub fn idle_for(&self) -> std::time::Duration {
        let last = self.last_used_ms.load(Ordering::Relaxed);
        std::time::Duration::from_millis(coarse_ms().saturating_sub(last))
    }

    /// How an execution of the statement `sql` can go through this pipe;
    /// `Prepare` books its preparation to the caller.
    pub fn stmt(&self, sql: &Arc<[u8]>) -> PipeStmt {
        let mut st = self.state.lock();
        match st.stmts.get(&**sql) {
            Some(Stmt::Ready { id, types_sent }) => PipeStmt::Ready {
                id: *id,
                types_sent: *types_sent,
            },
            Some(Stmt::Preparing | Stmt::Stale) => PipeStmt::No,
            None if st.stmt_room == 0 => PipeStmt::No,
            None => {
                st.stmt_room -= 1;
                st.stmts.insert(sql.clone(), Stmt::Preparing);
                PipeStmt::Prepare
            }
        }
    }

    /// The outcome of a preparation booked by `stmt`: the server statement,
    /// or None if the server refused it (nothing was prepared).
    pub fn stmt_prepared(&self, sql: &[u8], s: Option<crate::conn::ServerStmt>) {
        let mut st = self.state.lock();
        match s {
            Some(s) => {
                st.stmts.insert(
                    sql.into(),
                    Stmt::Ready {
                        id: s.id,
                        types_sent: s.types_sent,
                    },
                );
            }
            None => {
                st.stmts.remove(sql);
                st.stmt_room += 1;
            }
        }
    }

    /// An execution carrying the parameter types was submitted: later ones
    /// (behind it on the wire) may leave them out.
    pub fn stmt_types_sent(&self, sql: &[u8]) {
        if let Some(Stmt::Ready { types_sent, .. }) = self.state.lock().stmts.get_mut(sql) {
            *types_sent = true;
        }
    }

    /// Sends one request (whole packets, at most MAX_REQUEST bytes); the
    /// caller's turn waits in `slot`. The caller then awaits the returned
    /// turn, relays the answer and calls `pass` (or has the pool close the
    /// pipe); a turn that ends in an error means the pipe failed first
    /// (call `abandon`). None: the pipe is closed, or has as many request
    /// bytes in flight as it may ([`MAX_QUEUED`]), and nothing was sent.
    pub async fn submit(&self, request: &[u8], slot: &TurnSlot) -> Option<Turn> {
        let (turn, handover) = slot.wait();
        let write = {
            let mut st = self.state.lock();
            if self.is_broken() || st.queued + request.len() > MAX_QUEUED {
                return None;
            }
            st.lengths.push_back(request.len());
            st.queued += request.len();
            match st.conn.take() {
                // (The turn is alive: it is in this frame.)
                Some(c) => {
                    self.head_since_ms.store(self.now_ms(), Ordering::Relaxed);
                    drop(handover.give(c))
                }
                None => st.queue.push_back(handover),
            }
            st.pending.extend_from_slice(request);
            self.in_flight.fetch_add(1, Ordering::Relaxed);
            !std::mem::replace(&mut st.writing, true)
        };
        self.last_used_ms.store(self.now_ms(), Ordering::Relaxed);
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        if write {
            self.write_pending().await;
        }
        Some(turn)
    }

    /// Writes what is queued until nothing is. Failures close the pipe
    /// (the reader sees the same failure on the socket).
    async fn write_pending(&self) {
        // While the server is still answering earlier requests, this one
        // would only wait in its socket: let the other sessions woken in
        // this round queue theirs first and send them together. With
        // nothing else in flight, send at once: latency at low load is not
        // traded for CPU.
        // If this session is dropped before it is done, nobody else would
        // write what is queued, and a request may be half written: the
        // pipe closes and those waiting retry elsewhere.
        struct Unfinished<'a>(&'a Pipe);
        impl Drop for Unfinished<'_> {
            fn drop(&mut self) {
                self.0.broken.store(true, Ordering::Relaxed);
                let mut st = self.0.state.lock();
                st.writing = false;
                st.queue.clear();
            }
        }
        let unfinished = Unfinished(self);
        if self.in_flight() > 1 {
            tokio::task::yield_now().await;
        }
        let mut buf = Vec::new();
        loop {
            {
                let mut st = self.state.lock();
                if buf.capacity() > 0 && st.spare.capacity() == 0 {
                    buf.clear();
                    st.spare = std::mem::take(&mut buf);
                }
                if st.pending.is_empty() || self.is_broken() {
                    st.writing = false;
                    std::mem::forget(unfinished);
                    return;
                }
                let spare = std::mem::take(&mut st.spare);
                buf = std::mem::replace(&mut st.pending, spare);
            }
            self.counters.sends.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = self.writer.write_shared(&buf).await {
                tracing::debug!("pipelined write failed: {e}");
                self.broken.store(true, Ordering::Relaxed);
                // Those waiting retry elsewhere; the connection is closed by
                // whoever holds it (pass() refuses it now) or by the pool.
                self.state.lock().queue.clear();
            }
            if buf.capacity() > 64 * 1024 {
                buf = Vec::new();
            }
        }
    }

    /// A session's turn ended in an error (the pipe failed before its
    /// answer): it relays nothing.
    pub fn abandon(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
    }

    /// The answer was relayed whole: the connection goes to the next
    /// session in line, or waits for one. Returns it when it must be closed
    /// instead: the pipe is closed, or the next session is gone and its
    /// answer is unread on the wire.
    pub fn pass(&self, conn: Baton) -> Option<Baton> {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        let mut st = self.state.lock();
        // Its request was read by the server: its answer came.
        let done = st.lengths.pop_front().unwrap_or(0);
        st.queued -= done;
        if self.is_broken() {
            return Some(conn);
        }
        match st.queue.pop_front() {
            Some(next) => {
                self.head_since_ms.store(self.now_ms(), Ordering::Relaxed);
                next.give(conn).err()
            }
            None => {
                st.conn = Some(conn);
                None
            }
        }
    }

    /// The connection is in an unknown state (or gone): the pipe closes.
    /// Sessions waiting for their turn get none and retry elsewhere.
    /// Returns the parked connection, if any, for the pool to close.
    pub fn close(&self) -> Option<Baton> {
        self.broken.store(true, Ordering::Relaxed);
        let mut st = self.state.lock();
        st.queue.clear();
        st.conn.take()
    }

    /// Takes the connection back if nothing is in flight, closing the pipe.
    pub fn take_if_idle(&self) -> Option<BackendConn> {
        let mut st = self.state.lock();
        if self.in_flight() > 0 || !st.queue.is_empty() {
            return None;
        }
        let c = st.conn.take()?;
        self.broken.store(true, Ordering::Relaxed);
        Some(*c)
    }
}

/// Milliseconds of the monotonic clock as the kernel last ticked it
/// (CLOCK_MONOTONIC_COARSE, in steps of 1-4 ms): the pipe's stamps only
/// decide when a pipe counts as stalled (STALLED_MS, a rule of thumb a
/// tick either way does not change) or idle (the pool's PIPE_IDLE, far
/// coarser), and each pipelined read takes two or three of them; a
/// precise clock read and the subtraction from an Instant cost ~70
/// instructions each.
fn coarse_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    (ts.tv_sec as u64) * 1000 + (ts.tv_nsec as u64) / 1_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipe over a connection to a server that reads nothing yet: what
    /// is written stays in the socket buffers.
    async fn pipe_to_silent_server() -> (Pipe, std::net::TcpListener) {
        let (conn, l) = BackendConn::to_silent_server().await;
        let pipe = Pipe::new(conn, 0, Arc::new(PipeCounters::default()))
            .unwrap_or_else(|e| panic!("pipe: {}", e.1));
        (pipe, l)
    }

    #[tokio::test]
    async fn requests_in_flight_never_pass_what_the_socket_buffers_hold() {
        let (pipe, _server) = pipe_to_silent_server().await;
        let request = vec![b'x'; 3000];
        let fits = MAX_QUEUED / request.len();
        let mut turns = Vec::new();
        for i in 0..fits {
            let turn = pipe.submit(&request, &TurnSlot::default()).await;
            turns.push(turn.unwrap_or_else(|| panic!("request {i} of {fits} refused")));
        }
        // A read released with many others may queue past the depth; its
        // bytes still may not pass what the buffers hold.
        assert!(
            pipe.submit(&request, &TurnSlot::default()).await.is_none(),
            "{} bytes in flight",
            (fits + 1) * request.len()
        );
        assert_eq!(pipe.in_flight(), fits);
        // Small requests still fit in what is left.
        let small = vec![b'y'; MAX_QUEUED - fits * request.len()];
        turns.push(
            pipe.submit(&small, &TurnSlot::default())
                .await
                .expect("what is left fits"),
        );
        assert!(
            pipe.submit(b"z", &TurnSlot::default()).await.is_none(),
            "the pipe is full"
        );
        // Once the first answer is relayed its request is off the wire:
        // another fits again.
        let baton = turns.remove(0).await.expect("the first turn");
        assert!(pipe.pass(baton).is_none());
        assert!(
            pipe.submit(&request, &TurnSlot::default()).await.is_some(),
            "room after an answer"
        );
        assert!(pipe.submit(&request, &TurnSlot::default()).await.is_none());
    }
}
