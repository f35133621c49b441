//! A pool of connections per server. A session borrows a connection for a
//! statement or a transaction and gives it back; sessions never own one.
//! The server's health lives in health.rs, its group in group.rs.

use crate::conn::{BackendConn, ConnectParams, Flavor, TlsTarget};
use crate::error::BackendError;
use crate::health::{Health, Role};
use crate::pipe::{Pipe, PipeCounters};
use crate::state::SessionVars;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

#[derive(Debug, Clone)]
pub struct PoolSettings {
    pub max: usize,
    pub min: usize,
    pub connect_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_lifetime: Duration,
    pub health_check_idle: Duration,
    pub wait: Duration,
    pub max_prepared: usize,
    pub tls: Option<TlsTarget>,
    /// The servers' RSA public key (PEM), pinned in config.
    pub server_key: Option<Arc<str>>,
    /// Reads in flight per pipelined connection (0: no pipelining).
    pub pipeline_depth: usize,
    /// Pipelined connections per server.
    pub pipeline_connections: usize,
    /// How long a statement may take on this server (None: no limit).
    pub query_timeout: Option<Duration>,
}

#[derive(Debug, Clone, Default)]
pub struct PoolStats {
    pub open: usize,
    pub idle: usize,
    pub waiters: usize,
    pub borrows: u64,
    pub connects: u64,
    pub connect_failures: u64,
    pub discarded: u64,
    /// Open pipelined connections, reads they carried, and the sends
    /// that carried those reads.
    pub pipes: usize,
    pub pipelined: u64,
    pub pipe_sends: u64,
}

/// One server: its address and settings, its health, and its pool of
/// connections (plus the pipelined connections carrying several sessions'
/// reads).
pub struct Server {
    pub addr: Arc<str>,
    pub group: Arc<str>,
    /// Its share of reads; a reload or the admin port may change it.
    weight: AtomicU32,
    pub settings: PoolSettings,
    pub health: Health,
    idle: Mutex<Vec<BackendConn>>,
    open: AtomicUsize,
    waiters: AtomicUsize,
    notify: Notify,
    borrows: AtomicU64,
    connects: AtomicU64,
    connect_failures: AtomicU64,
    discarded: AtomicU64,
    /// Raised when the server refused a prepare with 1461: connections
    /// that keep statements and have not caught up are closed when given
    /// back, so that the server frees their statements.
    stmt_flush: std::sync::atomic::AtomicU32,
    probing: AtomicBool,
    /// Connections carrying pipelined reads (see pipe.rs).
    pipes: Mutex<Vec<Arc<Pipe>>>,
    pipe_counters: Arc<PipeCounters>,
    /// Pipes being opened (they count against pipeline_connections).
    pipes_opening: AtomicUsize,
}

/// What a read does about a pipe ([`Server::choose_pipe`]).
pub enum PipeChoice<'a> {
    /// This pipe has room.
    Use(Arc<Pipe>),
    /// None has room, and a new one may open: booked (it counts against
    /// pipeline_connections until the booking is dropped).
    Open(OpenBooking<'a>),
    /// No pipe: the usual way.
    No,
}

/// A pipe being opened, counted until dropped (however the opening ends,
/// even if the session is dropped meanwhile).
pub struct OpenBooking<'a>(&'a AtomicUsize);

impl Drop for OpenBooking<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How many times `pipeline_depth` a read released with others may queue
/// on a pipe. Reads that followed a wait for a write arrive together when
/// it ends, dozens for one server at once: at the usual depth most would
/// overflow the pipes and each take a connection and a round trip of its
/// own, which costs the server more per read than a pipe's batch. Queued
/// deeper they run in the pipe's next batches instead.
pub const BURST_DEPTH: usize = 4;

/// How many of a server's `pool_max` connections pipes may hold: half.
/// A pipe keeps its connection while reads keep coming, and writes,
/// transactions, read-your-writes waits and reads that find the pipes full
/// need connections of their own; with every connection a pipe they would
/// wait for the pool until the reads stop (measured: `pool_max = 3` with
/// two worker threads, read-your-writes reads at a tenth of eventual's).
#[inline]
pub fn max_pipes(pool_max: usize) -> usize {
    pool_max / 2
}

/// A pipe unused this long gives its connection back to the pool.
const PIPE_IDLE: Duration = Duration::from_secs(2);

/// The share of a server's max_prepared_stmt_count that sextant's
/// connections to it may hold together: the rest is for other clients of
/// the server (and sextant's own statements must never make a client's
/// prepare fail with 1461).
pub const STMT_SHARE_PERCENT: u64 = 50;

/// An idle connection older than this is looked at for an end of stream
/// before it is lent.
const DEAD_CHECK_IDLE: std::time::Duration = std::time::Duration::from_millis(1);

impl Server {
    /// Server-side statements one connection may keep: the configured
    /// bound, lowered so that a full pool stays within its share of the
    /// server's max_prepared_stmt_count.
    #[inline]
    pub fn stmt_cap(&self) -> usize {
        let limit = self.health.stmt_limit() as u64;
        if limit == 0 {
            return self.settings.max_prepared;
        }
        let per_conn = limit * STMT_SHARE_PERCENT / 100 / self.settings.max.max(1) as u64;
        self.settings.max_prepared.min(per_conn.max(1) as usize)
    }

    pub fn new(addr: &str, group: &str, role: Role, weight: u32, settings: PoolSettings) -> Self {
        Server {
            addr: addr.into(),
            group: group.into(),
            weight: AtomicU32::new(weight),
            settings,
            health: Health::new(role),
            idle: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            waiters: AtomicUsize::new(0),
            notify: Notify::new(),
            borrows: AtomicU64::new(0),
            connects: AtomicU64::new(0),
            connect_failures: AtomicU64::new(0),
            discarded: AtomicU64::new(0),
            stmt_flush: std::sync::atomic::AtomicU32::new(0),
            probing: AtomicBool::new(false),
            pipes: Mutex::new(Vec::new()),
            pipe_counters: Arc::default(),
            pipes_opening: AtomicUsize::new(0),
        }
    }

    #[inline]
    pub fn weight(&self) -> u32 {
        self.weight.load(Ordering::Relaxed)
    }

    pub fn set_weight(&self, w: u32) {
        self.weight.store(w, Ordering::Relaxed);
    }

    #[inline]
    pub fn role(&self) -> Role {
        self.health.role()
    }

    /// Takes the server out of read balancing after a failure; the
    /// maintenance loop's probe() brings it back.
    pub fn mark_unreachable(&self, why: &str) {
        if self.health.set_reachable(false) {
            tracing::warn!(server = %self.addr, "marking server unreachable: {why}");
        }
        self.health.set_last_error(why.to_string());
        // Idle connections to it are likely dead too.
        self.close_idle();
    }

    /// Closes every idle connection (not the pipes): one of them was
    /// found closed by the server, and those that lay idle beside it were
    /// likely closed too (a KILL of every connection, a restart).
    pub fn discard_idle(&self) {
        let idle: Vec<BackendConn> = std::mem::take(&mut *self.idle.lock());
        for c in idle {
            self.discard(c);
        }
    }

    /// Closes every idle connection and pipe (a server taken offline);
    /// connections sessions hold stay theirs until they give them back.
    pub fn close_idle(&self) {
        self.discard_idle();
        let pipes: Vec<Arc<Pipe>> = std::mem::take(&mut *self.pipes.lock());
        for p in pipes {
            self.close_pipe(&p, None);
        }
    }

    /// A pipe for plain reads of `user` with session state `vars`: one with
    /// room (fewer than pipeline_depth reads in flight), or leave to open a
    /// new one if the server has fewer than pipeline_connections
    /// ([`Self::open_booked_pipe`]). No: pipelining is off, or all pipes
    /// are full and no more may open (the read then takes a connection of
    /// its own, waiting like any other). Synchronous: a read that finds a
    /// pipe with room (nearly all of them) builds no future for it.
    /// `burst`: the read is one of many released together (by the end of
    /// a wait for a write they followed); it may queue deeper, see
    /// [`BURST_DEPTH`].
    pub fn choose_pipe(
        &self,
        user: &str,
        flavor: Flavor,
        vars: &SessionVars,
        burst: bool,
    ) -> PipeChoice<'_> {
        let depth = match self.settings.pipeline_depth {
            0 => return PipeChoice::No,
            d if burst => d * BURST_DEPTH,
            d => d,
        };
        let home = crate::thread::thread_slot();
        let pipes = self.pipes.lock();
        let mut same = 0;
        // The first with room, not the emptiest: reads that travel
        // together are what saves the CPU.
        for p in pipes.iter() {
            if p.home == home && p.flavor == flavor && &*p.user == user && p.vars == *vars {
                same += 1;
                if p.in_flight() < depth && !p.is_broken() && !p.stalled() {
                    return PipeChoice::Use(p.clone());
                }
            }
        }
        let opening = self.pipes_opening.load(Ordering::Relaxed);
        if same + opening >= self.settings.pipeline_connections
            || pipes.len() + opening >= max_pipes(self.settings.max)
        {
            return PipeChoice::No;
        }
        self.pipes_opening.fetch_add(1, Ordering::Relaxed);
        PipeChoice::Open(OpenBooking(&self.pipes_opening))
    }

    /// Opens the pipe [`Self::choose_pipe`] booked; None when no
    /// connection is free at once.
    pub async fn open_booked_pipe(
        &self,
        booking: OpenBooking<'_>,
        user: &str,
        password: &str,
        flavor: Flavor,
        vars: &SessionVars,
    ) -> Option<Arc<Pipe>> {
        let _booking = booking;
        self.open_pipe(user, password, flavor, vars, crate::thread::thread_slot())
            .await
    }

    async fn open_pipe(
        &self,
        user: &str,
        password: &str,
        flavor: Flavor,
        vars: &SessionVars,
        home: usize,
    ) -> Option<Arc<Pipe>> {
        // A new pipe takes a pooled connection only if one is free now:
        // sessions already waiting for a connection come first.
        if self.has_waiters() {
            return None;
        }
        let mut conn = match self.take_idle(user, flavor) {
            Some(c) if c.created.elapsed() <= self.settings.max_lifetime => c,
            Some(c) => {
                self.discard(c);
                return None;
            }
            None if self.try_reserve() => self.open_new(user, password, flavor).await.ok()?,
            None => return None,
        };
        self.borrows.fetch_add(1, Ordering::Relaxed);
        if conn.vars != *vars && conn.sync_to(vars).await.is_err() {
            self.discard(conn);
            return None;
        }
        match Pipe::new(conn, home, self.pipe_counters.clone()) {
            Ok(p) => {
                let p = Arc::new(p);
                tracing::debug!(server = %self.addr, "pipelined connection opened");
                self.pipes.lock().push(p.clone());
                Some(p)
            }
            Err(b) => {
                let (c, e) = *b;
                tracing::debug!(server = %self.addr, "cannot pipeline on this connection: {e}");
                self.release(c);
                None
            }
        }
    }

    /// Closes a pipe whose connection is in an unknown state or gone;
    /// `conn`: the connection, if the caller held it. Sessions waiting on
    /// the pipe retry their reads elsewhere.
    pub fn close_pipe(&self, p: &Arc<Pipe>, conn: Option<crate::pipe::Baton>) {
        let parked = p.close();
        self.pipes.lock().retain(|q| !Arc::ptr_eq(q, p));
        for c in conn.into_iter().chain(parked) {
            self.discard(*c);
        }
    }

    /// For an unreachable server: can a connection be made again? (A
    /// stand-in for the topology monitor: it only brings servers back.)
    pub async fn probe(&self) {
        if self.health.reachable() || self.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let ok = matches!(
            tokio::time::timeout(
                self.settings.connect_timeout,
                sextant_net::stream::connect(&self.addr)
            )
            .await,
            Ok(Ok(_))
        );
        if ok {
            tracing::info!(server = %self.addr, "server reachable again");
            self.health.set_reachable(true);
        }
        self.probing.store(false, Ordering::Release);
    }

    /// Load figures for balancing; None when the server is not usable.
    #[inline]
    pub fn load(&self) -> Option<sextant_routing::Load> {
        self.health.load()
    }

    /// Borrows a connection of the given flavor for `user`, opening one if
    /// the pool has room, or waiting up to the pool's wait time for one.
    pub async fn acquire(
        &self,
        user: &str,
        password: &str,
        flavor: Flavor,
    ) -> Result<BackendConn, BackendError> {
        let deadline = tokio::time::Instant::now() + self.settings.wait;
        let mut waited = false;
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // First come, first served: while sessions wait, a newcomer
            // queues behind them rather than taking the connection just
            // returned for one of them. Otherwise the woken waiter often
            // finds nothing, waits again, and a wake-up is wasted (A/B,
            // 16 connections per server: 3,000 clients 27.8k against
            // 24.9k QPS, p99 174 against 223 ms).
            if !waited && self.has_waiters() {
                waited = true;
                self.wait_turn(notified, deadline).await?;
                continue;
            }
            if let Some(mut c) = self.take_idle(user, flavor) {
                if c.created.elapsed() > self.settings.max_lifetime || self.replaced_since(&c) {
                    self.discard(c);
                    continue;
                }
                let idle = c.last_used.elapsed();
                // Killed or closed by the server while idle: its end of
                // stream is waiting to be read. Checked after a short idle
                // only (busy connections are reused within microseconds),
                // and without a system call unless the socket is readable.
                if idle > DEAD_CHECK_IDLE && !c.looks_alive() {
                    self.discard(c);
                    continue;
                }
                if idle > self.settings.health_check_idle && c.ping().await.is_err() {
                    self.discard(c);
                    continue;
                }
                // Opened or last used on another worker thread: its socket
                // is still registered with that thread's reactor, which
                // would wake up for every answer and wake this thread in
                // turn. Moving the registration here costs two epoll_ctl
                // calls, once.
                let here = crate::thread::thread_slot();
                if c.home != here {
                    match c.stream.rehome() {
                        Ok(true) => c.home = here,
                        Ok(false) => {}
                        Err(_) => {
                            self.discard(c);
                            continue;
                        }
                    }
                }
                self.borrows.fetch_add(1, Ordering::Relaxed);
                c.max_prepared = self.stmt_cap();
                c.from_pool = true;
                return Ok(c);
            }
            if self.try_reserve() {
                self.borrows.fetch_add(1, Ordering::Relaxed);
                return self.open_new(user, password, flavor).await;
            }
            // Full, but idle connections of another user or flavor can make
            // room.
            let other = self.idle.lock().pop();
            if let Some(c) = other {
                self.discard(c);
                continue;
            }
            waited = true;
            self.wait_turn(notified, deadline).await?;
        }
    }

    /// Whether `c` was opened before a failover or switchover replaced
    /// this server as its group's primary.
    #[inline]
    pub fn replaced_since(&self, c: &BackendConn) -> bool {
        c.replacements != self.health.replacements()
    }

    /// Closes `c` and opens a new connection in its place (its slot in the
    /// pool passes to the new one): for a session that must not have what
    /// `c` carries and that no statement can undo (a current database).
    pub async fn replace(
        &self,
        c: BackendConn,
        user: &str,
        password: &str,
        flavor: Flavor,
    ) -> Result<BackendConn, BackendError> {
        drop(c);
        self.discarded.fetch_add(1, Ordering::Relaxed);
        self.borrows.fetch_add(1, Ordering::Relaxed);
        self.open_new(user, password, flavor).await
    }

    /// Waits for a returned (or closed) connection, in arrival order.
    async fn wait_turn(
        &self,
        notified: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
        deadline: tokio::time::Instant,
    ) -> Result<(), BackendError> {
        self.waiters.fetch_add(1, Ordering::Relaxed);
        let r = tokio::time::timeout_at(deadline, notified).await;
        self.waiters.fetch_sub(1, Ordering::Relaxed);
        // (A notification that arrives as the wait times out is passed on
        // to the next waiter when `notified` is dropped.)
        r.map_err(|_| BackendError::PoolTimeout {
            addr: self.addr.to_string(),
            ms: self.settings.wait.as_millis() as u64,
            max: self.settings.max,
        })
    }

    async fn open_new(
        &self,
        user: &str,
        password: &str,
        flavor: Flavor,
    ) -> Result<BackendConn, BackendError> {
        let p = ConnectParams {
            addr: &self.addr,
            user,
            password,
            flavor,
            timeout: self.settings.connect_timeout,
            tls: self.settings.tls.as_ref(),
            min_wait_timeout: Some(self.settings.idle_timeout * 2 + Duration::from_secs(60)),
            server_key: self.settings.server_key.as_deref(),
        };
        // Boxed: connecting is rare, and its large future would otherwise
        // be part of every session's state machine.
        match Box::pin(BackendConn::connect(&p)).await {
            Ok(mut c) => {
                c.max_prepared = self.stmt_cap();
                c.replacements = self.health.replacements();
                self.connects.fetch_add(1, Ordering::Relaxed);
                self.health.set_reachable(true);
                self.health.note_version(&c.server_version);
                Ok(c)
            }
            Err(e) => {
                self.open.fetch_sub(1, Ordering::AcqRel);
                self.notify.notify_one();
                self.connect_failures.fetch_add(1, Ordering::Relaxed);
                if matches!(
                    e,
                    BackendError::Connect { .. } | BackendError::ConnectTimeout { .. }
                ) {
                    self.health.set_reachable(false);
                }
                self.health.set_last_error(e.to_string());
                Err(e)
            }
        }
    }

    fn try_reserve(&self) -> bool {
        let mut cur = self.open.load(Ordering::Acquire);
        loop {
            if cur >= self.settings.max {
                return false;
            }
            match self
                .open
                .compare_exchange_weak(cur, cur + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(v) => cur = v,
            }
        }
    }

    fn take_idle(&self, user: &str, flavor: Flavor) -> Option<BackendConn> {
        let mut idle = self.idle.lock();
        // Most recently used first: its state is warm and it is least
        // likely to have been closed by the server. One whose socket is
        // registered with this thread's reactor before any other: moving a
        // socket to another reactor costs two epoll_ctl calls and an
        // allocation (tokio's registration), and with sessions of several
        // threads sharing the pool, taking any connection moved one on
        // most statements of sessions that hold none.
        let here = crate::thread::thread_slot();
        let mut other = None;
        for (i, c) in idle.iter().enumerate().rev() {
            if c.flavor == flavor && &*c.user == user {
                if c.home == here {
                    return Some(idle.swap_remove(i));
                }
                other.get_or_insert(i);
            }
        }
        other.map(|i| idle.swap_remove(i))
    }

    /// Gives a connection back. Only connections in a known, clean state
    /// (no transaction, nothing opaque) may come back; others are closed.
    pub fn release(&self, mut c: BackendConn) {
        if c.in_transaction() || c.track.opaque {
            self.discard(c);
            return;
        }
        let epoch = self.stmt_flush.load(Ordering::Relaxed);
        if c.stmt_epoch != epoch {
            if c.statements_kept() > 0 {
                self.discard(c);
                return;
            }
            c.stmt_epoch = epoch;
        }
        c.last_used = Instant::now();
        self.idle.lock().push(c);
        self.notify.notify_one();
    }

    /// The server refused a prepare with 1461: every connection keeping
    /// statements gives them up, the idle ones now (closed, which frees
    /// their statements), the busy ones when given back. Returns the new
    /// epoch and how many idle connections were closed.
    pub fn flush_statements(&self) -> (u32, usize) {
        let epoch = self
            .stmt_flush
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_add(1);
        (epoch, self.close_idle_with_statements())
    }

    fn close_idle_with_statements(&self) -> usize {
        let gone: Vec<BackendConn> = {
            let mut idle = self.idle.lock();
            let (keep, gone) = std::mem::take(&mut *idle)
                .into_iter()
                .partition(|c| c.statements_kept() == 0);
            *idle = keep;
            gone
        };
        let n = gone.len();
        for c in gone {
            self.discard(c);
        }
        n
    }

    /// Closes a connection whose state is unknown or unwanted.
    pub fn discard(&self, c: BackendConn) {
        drop(c);
        self.open.fetch_sub(1, Ordering::AcqRel);
        self.discarded.fetch_add(1, Ordering::Relaxed);
        self.notify.notify_one();
    }

    /// Whether some session is waiting for a connection: sessions then give
    /// theirs back at once instead of holding it.
    #[inline]
    pub fn has_waiters(&self) -> bool {
        self.waiters.load(Ordering::Relaxed) > 0
    }

    /// Closes idle connections past their idle time (above pool_min) or
    /// lifetime.
    pub fn reap(&self) {
        let mut closed = Vec::new();
        {
            let mut idle = self.idle.lock();
            let open = self.open.load(Ordering::Acquire);
            let mut can_close = open.saturating_sub(self.settings.min);
            let mut i = 0;
            while i < idle.len() {
                let c = &idle[i];
                let old = c.created.elapsed() > self.settings.max_lifetime;
                let stale = c.last_used.elapsed() > self.settings.idle_timeout;
                if old || (stale && can_close > 0) {
                    can_close = can_close.saturating_sub(1);
                    closed.push(idle.swap_remove(i));
                } else {
                    i += 1;
                }
            }
        }
        for c in closed {
            self.discard(c);
        }
        // Pipes left idle give their connection back to the pool.
        let idle_pipes: Vec<Arc<Pipe>> = {
            let mut pipes = self.pipes.lock();
            let (idle, busy) = std::mem::take(&mut *pipes)
                .into_iter()
                .partition(|p: &Arc<Pipe>| p.is_broken() || p.idle_for() > PIPE_IDLE);
            *pipes = busy;
            idle
        };
        for p in idle_pipes {
            if !p.is_broken() {
                if let Some(c) = p.take_if_idle() {
                    self.release(c);
                    continue;
                }
                if !p.is_broken() {
                    // A read went in after all: keep it.
                    self.pipes.lock().push(p);
                    continue;
                }
            }
            self.close_pipe(&p, None);
        }
    }

    pub fn stats(&self) -> PoolStats {
        PoolStats {
            open: self.open.load(Ordering::Relaxed),
            idle: self.idle.lock().len(),
            waiters: self.waiters.load(Ordering::Relaxed),
            borrows: self.borrows.load(Ordering::Relaxed),
            connects: self.connects.load(Ordering::Relaxed),
            connect_failures: self.connect_failures.load(Ordering::Relaxed),
            discarded: self.discarded.load(Ordering::Relaxed),
            pipes: self.pipes.lock().len(),
            pipelined: self.pipe_counters.reads.load(Ordering::Relaxed),
            pipe_sends: self.pipe_counters.sends.load(Ordering::Relaxed),
        }
    }
}
