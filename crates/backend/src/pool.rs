//! A pool of connections per server. A session borrows a connection for a
//! statement or a transaction and gives it back; sessions never own one.

use crate::conn::{BackendConn, ConnectParams, Flavor, TlsTarget};
use crate::error::BackendError;
use crate::pipe::{Pipe, PipeCounters};
use crate::state::SessionVars;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Role {
    Primary = 0,
    Replica = 1,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::Primary => "primary",
            Role::Replica => "replica",
        })
    }
}

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
    /// Reads in flight per pipelined connection (0: no pipelining).
    pub pipeline_depth: usize,
    /// Pipelined connections per server.
    pub pipeline_connections: usize,
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

pub struct Server {
    pub addr: Arc<str>,
    pub group: Arc<str>,
    /// Primary or replica; changes when the monitor follows a switchover.
    role: std::sync::atomic::AtomicU8,
    /// Set by the monitor: the server accepts writes (read_only = OFF).
    pub writable: AtomicBool,
    pub weight: u32,
    pub settings: PoolSettings,
    idle: Mutex<Vec<BackendConn>>,
    open: AtomicUsize,
    waiters: AtomicUsize,
    notify: Notify,
    borrows: AtomicU64,
    connects: AtomicU64,
    connect_failures: AtomicU64,
    discarded: AtomicU64,
    /// False after a failed connect, until one succeeds.
    pub reachable: AtomicBool,
    pub last_error: Mutex<Option<String>>,
    /// Version string of the server, once known.
    pub version: Mutex<Option<String>>,
    /// Statements in flight (for least_outstanding balancing).
    outstanding: AtomicU32,
    probing: AtomicBool,
    /// Set by an operator: no new reads are balanced to this server.
    pub maintenance: AtomicBool,
    /// Set by the monitor: the replica is behind by more than its group's
    /// max_replica_lag_ms, or its replication is stopped.
    pub lagging: AtomicBool,
    /// GTID positions this server has applied, packed (see gtid.rs), one
    /// slot per replication domain (up to four); set by the monitor.
    pub applied: [AtomicU64; 4],
    /// The newest heartbeat (sextant's clock, microseconds) this server
    /// has applied: it has everything the primary committed before then.
    /// 0: unknown.
    pub heartbeat_applied_us: std::sync::atomic::AtomicI64,
    /// Last measured replication lag, milliseconds (-1: not a replica or
    /// unknown).
    pub lag_ms: std::sync::atomic::AtomicI64,
    /// Moving average of statement response time, microseconds (for
    /// least_latency balancing); 0 until the first sample.
    latency_us: AtomicU64,
    /// Set by the monitor of a cluster (Group Replication, Galera): the
    /// server is a usable member (ONLINE in the majority partition; Synced
    /// and ready). Always true for plain replication.
    pub member_ok: AtomicBool,
    /// The cluster state the monitor last saw when the member is not usable
    /// ("RECOVERING", "Donor/Desynced", "minority partition"...), for SHOW
    /// BACKENDS.
    pub member_state: Mutex<Option<String>>,
    /// Connections carrying pipelined reads (see pipe.rs).
    pipes: Mutex<Vec<Arc<Pipe>>>,
    pipe_counters: Arc<PipeCounters>,
    /// Pipes being opened (they count against pipeline_connections).
    pipes_opening: AtomicUsize,
}

impl Server {
    pub fn new(addr: &str, group: &str, role: Role, weight: u32, settings: PoolSettings) -> Self {
        Server {
            addr: addr.into(),
            group: group.into(),
            role: std::sync::atomic::AtomicU8::new(role as u8),
            writable: AtomicBool::new(role == Role::Primary),
            weight,
            settings,
            idle: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            waiters: AtomicUsize::new(0),
            notify: Notify::new(),
            borrows: AtomicU64::new(0),
            connects: AtomicU64::new(0),
            connect_failures: AtomicU64::new(0),
            discarded: AtomicU64::new(0),
            reachable: AtomicBool::new(true),
            last_error: Mutex::new(None),
            version: Mutex::new(None),
            outstanding: AtomicU32::new(0),
            probing: AtomicBool::new(false),
            maintenance: AtomicBool::new(false),
            lagging: AtomicBool::new(false),
            applied: Default::default(),
            heartbeat_applied_us: std::sync::atomic::AtomicI64::new(0),
            lag_ms: std::sync::atomic::AtomicI64::new(-1),
            latency_us: AtomicU64::new(0),
            member_ok: AtomicBool::new(true),
            member_state: Mutex::new(None),
            pipes: Mutex::new(Vec::new()),
            pipe_counters: Arc::default(),
            pipes_opening: AtomicUsize::new(0),
        }
    }

    pub fn role(&self) -> Role {
        if self.role.load(Ordering::Relaxed) == Role::Primary as u8 {
            Role::Primary
        } else {
            Role::Replica
        }
    }

    pub fn set_role(&self, r: Role) {
        self.role.store(r as u8, Ordering::Relaxed);
    }

    /// Takes the server out of read balancing after a failure; the
    /// maintenance loop's probe() brings it back.
    pub fn mark_unreachable(&self, why: &str) {
        if self.reachable.swap(false, Ordering::Relaxed) {
            tracing::warn!(server = %self.addr, "marking server unreachable: {why}");
        }
        *self.last_error.lock() = Some(why.to_string());
        // Idle connections to it are likely dead too.
        let dead: Vec<BackendConn> = std::mem::take(&mut *self.idle.lock());
        for c in dead {
            self.discard(c);
        }
        let pipes: Vec<Arc<Pipe>> = std::mem::take(&mut *self.pipes.lock());
        for p in pipes {
            self.close_pipe(&p, None);
        }
    }

    /// A pipe for plain reads of `user` with session state `vars`: one with
    /// room (fewer than pipeline_depth reads in flight), or a new one if
    /// the server has fewer than pipeline_connections. None: pipelining is
    /// off, or all pipes are full and no connection is free at once (the
    /// read then takes a connection of its own, waiting like any other).
    pub async fn pipe(
        &self,
        user: &str,
        password: &str,
        flavor: Flavor,
        vars: &SessionVars,
    ) -> Option<Arc<Pipe>> {
        let depth = self.settings.pipeline_depth;
        if depth == 0 {
            return None;
        }
        {
            let home = crate::pipe::thread_slot();
            let pipes = self.pipes.lock();
            let mut same = 0;
            // The first with room, not the emptiest: reads that travel
            // together are what saves the CPU.
            for p in pipes.iter() {
                if p.home == home && p.flavor == flavor && &*p.user == user && p.vars == *vars {
                    same += 1;
                    if p.in_flight() < depth && !p.is_broken() && !p.stalled() {
                        return Some(p.clone());
                    }
                }
            }
            let opening = self.pipes_opening.load(Ordering::Relaxed);
            if same + opening >= self.settings.pipeline_connections
                || pipes.len() >= self.settings.max
            {
                return None;
            }
            self.pipes_opening.fetch_add(1, Ordering::Relaxed);
        }
        // (Decremented however the opening ends, even if the session is
        // dropped meanwhile.)
        struct Opening<'a>(&'a AtomicUsize);
        impl Drop for Opening<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        let _opening = Opening(&self.pipes_opening);
        self.open_pipe(user, password, flavor, vars, crate::pipe::thread_slot())
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
    pub fn close_pipe(&self, p: &Arc<Pipe>, conn: Option<BackendConn>) {
        let parked = p.close();
        self.pipes.lock().retain(|q| !Arc::ptr_eq(q, p));
        for c in conn.into_iter().chain(parked) {
            self.discard(c);
        }
    }

    /// For an unreachable server: can a connection be made again? (A
    /// stand-in for the topology monitor: it only brings servers back.)
    pub async fn probe(&self) {
        if self.reachable.load(Ordering::Relaxed) || self.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let ok = matches!(
            tokio::time::timeout(
                self.settings.connect_timeout,
                crate::stream::connect(&self.addr)
            )
            .await,
            Ok(Ok(_))
        );
        if ok {
            tracing::info!(server = %self.addr, "server reachable again");
            self.reachable.store(true, Ordering::Relaxed);
        }
        self.probing.store(false, Ordering::Release);
    }

    /// Load figures for balancing; None when the server is not usable.
    pub fn load(&self) -> Option<sextant_routing::Load> {
        if !self.reachable.load(Ordering::Relaxed)
            || self.maintenance.load(Ordering::Relaxed)
            || self.lagging.load(Ordering::Relaxed)
            || !self.member_ok.load(Ordering::Relaxed)
        {
            return None;
        }
        Some(sextant_routing::Load {
            outstanding: self.outstanding.load(Ordering::Relaxed),
            latency_us: self.latency_us.load(Ordering::Relaxed),
        })
    }

    /// Whether the monitor has seen this server apply the write `g`.
    pub fn has_applied(&self, g: crate::gtid::Packed) -> bool {
        let d = crate::gtid::domain(g);
        self.applied.iter().any(|a| {
            let v = a.load(Ordering::Relaxed);
            v != 0 && crate::gtid::domain(v) == d && crate::gtid::seq(v) >= crate::gtid::seq(g)
        })
    }

    /// Records the positions the monitor read (e.g. @@gtid_slave_pos).
    pub fn set_applied(&self, list: &str) {
        let mut slot = 0;
        for g in crate::gtid::parse_list(list).take(self.applied.len()) {
            self.applied[slot].store(g.pack().max(1), Ordering::Relaxed);
            slot += 1;
        }
        for a in &self.applied[slot..] {
            a.store(0, Ordering::Relaxed);
        }
    }

    pub fn statement_started(&self) {
        self.outstanding.fetch_add(1, Ordering::Relaxed);
    }

    /// `elapsed_us` is None when the statement failed (no latency sample).
    pub fn statement_finished(&self, elapsed_us: Option<u64>) {
        self.outstanding.fetch_sub(1, Ordering::Relaxed);
        if let Some(us) = elapsed_us {
            // EWMA with alpha 1/8. Concurrent updates may lose a sample,
            // which a moving average does not mind; no lock is taken.
            let old = self.latency_us.load(Ordering::Relaxed);
            let new = if old == 0 {
                us.max(1)
            } else {
                (old * 7 + us) / 8
            };
            self.latency_us.store(new.max(1), Ordering::Relaxed);
        }
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
                if c.created.elapsed() > self.settings.max_lifetime {
                    self.discard(c);
                    continue;
                }
                if c.last_used.elapsed() > self.settings.health_check_idle
                    && c.ping().await.is_err()
                {
                    self.discard(c);
                    continue;
                }
                self.borrows.fetch_add(1, Ordering::Relaxed);
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
        };
        // Boxed: connecting is rare, and its large future would otherwise
        // be part of every session's state machine.
        match Box::pin(BackendConn::connect(&p)).await {
            Ok(mut c) => {
                c.max_prepared = self.settings.max_prepared;
                self.connects.fetch_add(1, Ordering::Relaxed);
                self.reachable.store(true, Ordering::Relaxed);
                let mut v = self.version.lock();
                if v.is_none() {
                    *v = Some(c.server_version.clone());
                }
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
                    self.reachable.store(false, Ordering::Relaxed);
                }
                *self.last_error.lock() = Some(e.to_string());
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
        // likely to have been closed by the server.
        let pos = idle
            .iter()
            .rposition(|c| c.flavor == flavor && &*c.user == user)?;
        Some(idle.swap_remove(pos))
    }

    /// Gives a connection back. Only connections in a known, clean state
    /// (no transaction, nothing opaque) may come back; others are closed.
    pub fn release(&self, mut c: BackendConn) {
        if c.in_transaction() || c.track.opaque {
            self.discard(c);
            return;
        }
        c.last_used = Instant::now();
        self.idle.lock().push(c);
        self.notify.notify_one();
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

/// How a group's writer is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Topology {
    /// The configured primary, always.
    #[default]
    Static,
    /// The one writable (read_only = OFF) server; none while two are.
    Replication,
    /// MySQL Group Replication: the PRIMARY member(s) that are ONLINE in
    /// the majority partition; several in multi-primary mode.
    GroupReplication,
    /// Galera: Synced, ready members of the primary component; one of them
    /// takes writes, or all with `multi_writer`.
    Galera { multi_writer: bool },
}

/// A server group: a primary and its replicas, or the members of a
/// cluster. Which members take writes can change (the monitor follows
/// switchovers and cluster membership); the set is a bitmask and the
/// primary an index, both atomics, so routing reads them without a lock.
pub struct GroupServers {
    pub name: Arc<str>,
    /// Every server of the group: the configured primary first.
    pub members: Vec<Arc<Server>>,
    primary_idx: AtomicUsize,
    /// Members taking writes (bit i: members[i]); more than one only in
    /// multi-writer clusters.
    writers: AtomicU64,
    /// The primary's weight in read balancing (0: it takes no plain reads).
    pub primary_weight: u32,
    pub topology: Topology,
    /// Follow which member takes writes (any topology but static).
    pub follow_primary: bool,
    /// How long a write waits for a primary when none is known.
    pub primary_wait: Duration,
    /// The newest heartbeat (microseconds since the epoch, sextant's clock)
    /// the monitor wrote on the primary; 0 before the first.
    pub heartbeat_us: std::sync::atomic::AtomicI64,
}

const NO_PRIMARY: usize = usize::MAX;

/// A pipe unused this long gives its connection back to the pool.
const PIPE_IDLE: Duration = Duration::from_secs(2);

/// Most members a group may have (a bitmask of writers is a u64).
pub const MAX_MEMBERS: usize = 64;

impl GroupServers {
    pub fn new(
        name: &str,
        primary: Arc<Server>,
        replicas: Vec<Arc<Server>>,
        primary_weight: u32,
    ) -> Self {
        Self::with_topology(
            name,
            primary,
            replicas,
            primary_weight,
            Topology::Static,
            Duration::ZERO,
        )
    }

    pub fn with_topology(
        name: &str,
        primary: Arc<Server>,
        replicas: Vec<Arc<Server>>,
        primary_weight: u32,
        topology: Topology,
        primary_wait: Duration,
    ) -> Self {
        let mut members = vec![primary];
        members.extend(replicas);
        members.truncate(MAX_MEMBERS);
        GroupServers {
            name: name.into(),
            members,
            primary_idx: AtomicUsize::new(0),
            writers: AtomicU64::new(1),
            primary_weight,
            topology,
            follow_primary: topology != Topology::Static,
            primary_wait,
            heartbeat_us: std::sync::atomic::AtomicI64::new(0),
        }
    }

    /// What planning a statement needs to know of this group.
    pub fn plan_facts(&self) -> sextant_routing::GroupFacts {
        sextant_routing::GroupFacts {
            follow_primary: self.follow_primary,
            pipelining: self.members[0].settings.pipeline_depth > 0,
        }
    }

    /// The current primary (in a multi-writer cluster: the first writer,
    /// which also writes the heartbeat); None while none is known (or two
    /// claim it).
    pub fn primary(&self) -> Option<&Arc<Server>> {
        self.members.get(self.primary_idx.load(Ordering::Acquire))
    }

    /// The writer for statements on `schema`: the primary, or in a
    /// multi-writer cluster one writer chosen by a hash of the schema over
    /// the current writers, so that writes to one schema meet on one member
    /// and do not fail each other's certification.
    pub fn writer_for(&self, schema: &[u8]) -> Option<&Arc<Server>> {
        let mask = self.writers.load(Ordering::Acquire);
        let n = mask.count_ones();
        if n <= 1 {
            return self.primary();
        }
        let mut k = (fnv1a(schema) % n as u64) as u32;
        let mut m = mask;
        while k > 0 {
            m &= m - 1;
            k -= 1;
        }
        self.members.get(m.trailing_zeros() as usize)
    }

    /// Whether `s` may take writes for `schema` now.
    pub fn is_writer_for(&self, s: &Arc<Server>, schema: &[u8]) -> bool {
        self.writer_for(schema).is_some_and(|w| Arc::ptr_eq(w, s))
    }

    /// Number of members taking writes.
    pub fn writer_count(&self) -> u32 {
        self.writers.load(Ordering::Acquire).count_ones()
    }

    /// Makes the members in `mask` writers (`primary` among them), every
    /// other member a replica. Returns whether anything changed.
    fn set_writers(&self, mask: u64, primary: Option<usize>) -> bool {
        let new = primary.unwrap_or(NO_PRIMARY);
        let mask = if new == NO_PRIMARY { 0 } else { mask };
        let old_mask = self.writers.swap(mask, Ordering::AcqRel);
        let old = self.primary_idx.swap(new, Ordering::AcqRel);
        for (i, m) in self.members.iter().enumerate() {
            m.set_role(if mask & (1 << i) != 0 {
                Role::Primary
            } else {
                Role::Replica
            });
        }
        old != new || old_mask != mask
    }

    /// After the monitor updated members' `writable`, `reachable` and
    /// `member_ok`: decides which members take writes, by topology.
    pub fn follow(&self) {
        let candidates: u64 = self
            .members
            .iter()
            .enumerate()
            .filter(|(_, m)| {
                m.writable.load(Ordering::Relaxed)
                    && m.reachable.load(Ordering::Relaxed)
                    && m.member_ok.load(Ordering::Relaxed)
            })
            .fold(0, |acc, (i, _)| acc | (1 << i));
        let current = self.primary_idx.load(Ordering::Acquire);
        let keep_current = current != NO_PRIMARY && candidates & (1 << current) != 0;
        let first = (candidates != 0).then(|| candidates.trailing_zeros() as usize);
        let (mask, primary) = match self.topology {
            Topology::Static => return,
            Topology::Replication => match candidates.count_ones() {
                1 => (candidates, first),
                0 => (0, None),
                _ => {
                    let addrs: Vec<&str> = self
                        .members
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| candidates & (1 << i) != 0)
                        .map(|(_, m)| &*m.addr)
                        .collect();
                    tracing::error!(group = %self.name, "several writable servers ({}): split brain; refusing writes until one is read-only", addrs.join(", "));
                    (0, None)
                }
            },
            // Group Replication decides the primaries itself; in
            // multi-primary mode every ONLINE member is one.
            Topology::GroupReplication | Topology::Galera { multi_writer: true } => {
                (candidates, if keep_current { Some(current) } else { first })
            }
            // One writer, and it stays the writer while it can: moving
            // writes between Galera nodes invites certification conflicts.
            Topology::Galera {
                multi_writer: false,
            } => {
                let p = if keep_current { Some(current) } else { first };
                (p.map_or(0, |i| 1 << i), p)
            }
        };
        if self.set_writers(mask, primary) {
            match primary {
                Some(i) if mask.count_ones() > 1 => {
                    tracing::warn!(group = %self.name, writers = mask.count_ones(), first = %self.members[i].addr, "writers changed")
                }
                Some(i) => {
                    tracing::warn!(group = %self.name, primary = %self.members[i].addr, "primary changed")
                }
                None => tracing::warn!(group = %self.name, "no primary"),
            }
        }
    }

    /// The weight of member `i` in read balancing, by its current role.
    pub fn read_weight(&self, i: usize) -> u32 {
        let m = &self.members[i];
        if m.role() == Role::Primary {
            self.primary_weight
        } else {
            m.weight
        }
    }

    /// Whether a connection to `s` may serve plain reads.
    pub fn takes_reads(&self, s: &Server) -> bool {
        (s.role() == Role::Replica || self.primary_weight > 0) && s.load().is_some()
    }
}

/// FNV-1a: stable across processes and versions, so every sextant instance
/// sends a schema's writes to the same member.
fn fnv1a(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= x as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Every server sextant knows, by group.
#[derive(Default)]
pub struct Pool {
    pub groups: BTreeMap<String, Arc<GroupServers>>,
}

impl Pool {
    pub fn servers(&self) -> impl Iterator<Item = &Arc<Server>> {
        self.groups.values().flat_map(|g| g.members.iter())
    }
}

pub use GroupServers as Group;

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> PoolSettings {
        PoolSettings {
            max: 1,
            min: 0,
            connect_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
            max_lifetime: Duration::from_secs(1),
            health_check_idle: Duration::from_secs(1),
            wait: Duration::from_secs(1),
            max_prepared: 1,
            pipeline_depth: 0,
            pipeline_connections: 0,
            tls: None,
        }
    }

    fn group(topology: Topology, n: usize) -> GroupServers {
        let s = |i: usize, r| Arc::new(Server::new(&format!("h:{i}"), "g", r, 1, settings()));
        GroupServers::with_topology(
            "g",
            s(0, Role::Primary),
            (1..n).map(|i| s(i, Role::Replica)).collect(),
            0,
            topology,
            Duration::ZERO,
        )
    }

    /// (writable, member_ok) per member, then follow().
    fn observe(g: &GroupServers, states: &[(bool, bool)]) {
        for (m, &(w, ok)) in g.members.iter().zip(states) {
            m.writable.store(w, Ordering::Relaxed);
            m.member_ok.store(ok, Ordering::Relaxed);
        }
        g.follow();
    }

    fn primary_addr(g: &GroupServers) -> Option<String> {
        g.primary().map(|p| p.addr.to_string())
    }

    #[test]
    fn replication_follows_the_one_writable_server_and_refuses_two() {
        let g = group(Topology::Replication, 3);
        observe(&g, &[(false, true), (true, true), (false, true)]);
        assert_eq!(primary_addr(&g).as_deref(), Some("h:1"));
        assert_eq!(g.members[0].role(), Role::Replica);
        observe(&g, &[(true, true), (true, true), (false, true)]);
        assert_eq!(primary_addr(&g), None);
        assert!(g.writer_for(b"db").is_none());
    }

    #[test]
    fn galera_single_writer_is_sticky_and_skips_unusable_nodes() {
        let g = group(
            Topology::Galera {
                multi_writer: false,
            },
            3,
        );
        observe(&g, &[(true, true), (true, true), (true, true)]);
        assert_eq!(primary_addr(&g).as_deref(), Some("h:0"));
        assert_eq!(g.writer_count(), 1);
        // The writer desyncs: another Synced node takes over...
        observe(&g, &[(true, false), (true, true), (true, true)]);
        assert_eq!(primary_addr(&g).as_deref(), Some("h:1"));
        assert_eq!(g.members[0].role(), Role::Replica);
        assert!(
            g.members[0].load().is_none(),
            "a desynced node takes no reads"
        );
        // ...and keeps the writes when the first node is back.
        observe(&g, &[(true, true), (true, true), (true, true)]);
        assert_eq!(primary_addr(&g).as_deref(), Some("h:1"));
        // A read_only node is never the writer.
        observe(&g, &[(true, true), (false, true), (true, true)]);
        assert_eq!(primary_addr(&g).as_deref(), Some("h:0"));
        observe(&g, &[(true, false), (true, false), (true, false)]);
        assert_eq!(primary_addr(&g), None);
    }

    #[test]
    fn multi_writer_keeps_one_schema_on_one_member() {
        let g = group(Topology::Galera { multi_writer: true }, 3);
        observe(&g, &[(true, true), (true, true), (true, true)]);
        assert_eq!(g.writer_count(), 3);
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..64 {
            let schema = format!("shop{i}");
            let w = g.writer_for(schema.as_bytes()).unwrap().clone();
            // Stable for a schema.
            for _ in 0..3 {
                assert!(Arc::ptr_eq(&w, g.writer_for(schema.as_bytes()).unwrap()));
            }
            assert!(g.is_writer_for(&w, schema.as_bytes()));
            seen.insert(w.addr.to_string());
        }
        assert_eq!(seen.len(), 3, "schemas spread over every writer");
        // A member leaves: its schemas move, the others' writers stay writers.
        observe(&g, &[(true, true), (true, false), (true, true)]);
        assert_eq!(g.writer_count(), 2);
        for i in 0..64 {
            let w = g.writer_for(format!("shop{i}").as_bytes()).unwrap();
            assert_ne!(&*w.addr, "h:1");
            assert_eq!(w.role(), Role::Primary);
        }
        assert_eq!(g.members[1].role(), Role::Replica);
    }

    #[test]
    fn group_replication_takes_every_primary_member() {
        let g = group(Topology::GroupReplication, 3);
        // Single-primary: one PRIMARY member.
        observe(&g, &[(false, true), (false, true), (true, true)]);
        assert_eq!(primary_addr(&g).as_deref(), Some("h:2"));
        assert_eq!(g.writer_count(), 1);
        // Multi-primary: all ONLINE members are primaries; one RECOVERING.
        observe(&g, &[(true, true), (true, false), (true, true)]);
        assert_eq!(g.writer_count(), 2);
        assert_eq!(primary_addr(&g).as_deref(), Some("h:2"), "kept");
    }
}
