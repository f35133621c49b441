//! A server's health as sextant knows it: its role, what the monitor saw
//! (writable, lag, cluster membership, applied GTIDs and heartbeat), what
//! an operator set (maintenance), what failures taught (reachable, last
//! error), and its load. Sessions read it on every read they place, so
//! every field is an atomic or a rarely taken lock, behind methods that say
//! what each write means.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering};

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

/// Milliseconds on a monotonic clock of this process (its first reading
/// is 1): failure durations do not jump with the wall clock.
pub fn clock_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis() as u64
        + 1
}

pub struct Health {
    /// Primary or replica; changes when the group follows a switchover.
    role: AtomicU8,
    /// The server accepts writes (read_only = OFF), as last seen.
    writable: AtomicBool,
    /// False after a failed connect or a failure during a statement, until
    /// a connection succeeds again.
    reachable: AtomicBool,
    /// When it last became unreachable (milliseconds on [`clock_ms`]); 0
    /// while reachable.
    unreachable_since_ms: AtomicU64,
    /// Set by an operator: no new reads are balanced to this server.
    maintenance: AtomicBool,
    /// The replica is behind by more than its group's max_replica_lag_ms,
    /// or its replication is stopped.
    lagging: AtomicBool,
    /// A usable member of its cluster (ONLINE in the majority partition;
    /// Synced and ready). Always true for plain replication.
    member_ok: AtomicBool,
    /// GTID positions the server has applied, packed (see gtid.rs), one
    /// slot per replication domain (up to four).
    applied: [AtomicU64; 4],
    /// The newest heartbeat (sextant's clock, microseconds) the server has
    /// applied: it has everything the primary committed before then.
    /// 0: unknown.
    heartbeat_applied_us: AtomicI64,
    /// Last measured replication lag, milliseconds (-1: not a replica or
    /// unknown).
    lag_ms: AtomicI64,
    /// Failed monitor checks so far: a statement that began before the
    /// latest one is waiting on a server found down.
    down_epoch: AtomicU32,
    /// Times a failover or switchover replaced this server as its
    /// group's primary, and the term of the latest: a connection opened
    /// before then may still hold a transaction of the old primary's.
    replacements: AtomicU32,
    replaced_term: AtomicU64,
    /// The server's max_prepared_stmt_count as the monitor last read it
    /// (0: not known yet).
    stmt_limit: AtomicU32,
    /// The server's max_allowed_packet as the monitor last read it (0:
    /// not known yet): a client statement larger than this is refused by
    /// sextant, as the server would refuse it, rather than sent on.
    packet_limit: AtomicU32,
    /// Statements in flight (least_outstanding balancing).
    outstanding: AtomicU32,
    /// Reads waiting here for a write another read's wait is for
    /// (read_your_writes): they hold no connection, but each will run
    /// here, after the replica's apply delay, so balancing counts them.
    following: AtomicU32,
    /// Moving average of statement response time, microseconds
    /// (least_latency balancing); 0 until the first sample.
    latency_us: AtomicU64,
    /// The newest GTID (packed) a wait on this server timed out for,
    /// until the server is seen to have it: reads needing it or a later
    /// write of its domain do not wait here again (0: none).
    wait_failed: AtomicU64,
    /// Statements relayed for clients, errors, response times.
    pub stats: crate::stats::StatementStats,
    /// Read-your-writes waits and primary reads (docs/consistency.md).
    pub causal: crate::stats::CausalStats,
    /// The wait for a write in flight here, which reads needing that
    /// write follow instead of sending their own.
    pub shared_wait: crate::shared_wait::SharedWait,
    last_error: Mutex<Option<String>>,
    version: Mutex<Option<String>>,
    /// The same version as the lexer reads it: id, bit 31 set for MariaDB;
    /// 0 until known. Read for every statement, so not behind the mutex.
    version_id: AtomicU32,
    /// The cluster state the monitor last saw when the member is not
    /// usable ("RECOVERING", "Donor/Desynced", "minority partition"...).
    member_state: Mutex<Option<String>>,
}

/// One read following a wait on a server ([`Health::following`]).
pub struct Following<'a>(&'a AtomicU32);

impl Drop for Following<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Health {
    pub fn new(role: Role) -> Health {
        Health {
            role: AtomicU8::new(role as u8),
            writable: AtomicBool::new(role == Role::Primary),
            reachable: AtomicBool::new(true),
            unreachable_since_ms: AtomicU64::new(0),
            maintenance: AtomicBool::new(false),
            lagging: AtomicBool::new(false),
            member_ok: AtomicBool::new(true),
            applied: Default::default(),
            heartbeat_applied_us: AtomicI64::new(0),
            lag_ms: AtomicI64::new(-1),
            down_epoch: AtomicU32::new(0),
            replacements: AtomicU32::new(0),
            replaced_term: AtomicU64::new(0),
            stmt_limit: AtomicU32::new(0),
            packet_limit: AtomicU32::new(0),
            outstanding: AtomicU32::new(0),
            following: AtomicU32::new(0),
            latency_us: AtomicU64::new(0),
            wait_failed: AtomicU64::new(0),
            stats: Default::default(),
            causal: Default::default(),
            shared_wait: Default::default(),
            last_error: Mutex::new(None),
            version: Mutex::new(None),
            version_id: AtomicU32::new(0),
            member_state: Mutex::new(None),
        }
    }

    #[inline]
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

    #[inline]
    pub fn writable(&self) -> bool {
        self.writable.load(Ordering::Relaxed)
    }

    /// The server said (monitor) or showed (a write refused as read-only)
    /// whether it takes writes.
    pub fn set_writable(&self, w: bool) {
        self.writable.store(w, Ordering::Relaxed);
    }

    /// The server's max_prepared_stmt_count (0: not known yet).
    #[inline]
    pub fn stmt_limit(&self) -> u32 {
        self.stmt_limit.load(Ordering::Relaxed)
    }

    pub fn set_stmt_limit(&self, n: u32) {
        self.stmt_limit.store(n, Ordering::Relaxed);
    }

    /// The server's max_allowed_packet (0: not known yet).
    #[inline]
    pub fn packet_limit(&self) -> u32 {
        self.packet_limit.load(Ordering::Relaxed)
    }

    pub fn set_packet_limit(&self, n: u32) {
        self.packet_limit.store(n, Ordering::Relaxed);
    }

    /// Counts a failed monitor check (see [`Health::down_epoch`]).
    pub fn note_monitor_failure(&self) {
        self.down_epoch.fetch_add(1, Ordering::Relaxed);
    }

    /// How many monitor checks have failed: statements compare it with the
    /// value when they began, to give up on a server found down.
    #[inline]
    pub fn down_epoch(&self) -> u32 {
        self.down_epoch.load(Ordering::Relaxed)
    }

    /// This server, a primary, was replaced by term `term`'s: every
    /// connection opened before now is closed at its next use, so that no
    /// transaction begun there goes on (or commits) once it may be
    /// writable again (a frozen server that resumes).
    pub fn mark_replaced(&self, term: u64) {
        self.replaced_term.store(term, Ordering::Relaxed);
        self.replacements.fetch_add(1, Ordering::Release);
    }

    /// See [`Health::mark_replaced`]; connections stamp it when opened.
    #[inline]
    pub fn replacements(&self) -> u32 {
        self.replacements.load(Ordering::Acquire)
    }

    /// The term that replaced this server last (0: never).
    pub fn replaced_term(&self) -> u64 {
        self.replaced_term.load(Ordering::Relaxed)
    }

    #[inline]
    pub fn reachable(&self) -> bool {
        self.reachable.load(Ordering::Relaxed)
    }

    /// Returns whether it was reachable before.
    pub fn set_reachable(&self, r: bool) -> bool {
        let was = self.reachable.swap(r, Ordering::Relaxed);
        if r {
            self.unreachable_since_ms.store(0, Ordering::Relaxed);
        } else if was {
            self.unreachable_since_ms
                .store(clock_ms().max(1), Ordering::Relaxed);
        }
        was
    }

    /// How long it has been unreachable (0: it is reachable).
    pub fn unreachable_for_ms(&self) -> u64 {
        match self.unreachable_since_ms.load(Ordering::Relaxed) {
            0 => 0,
            since => clock_ms().saturating_sub(since).max(1),
        }
    }

    #[inline]
    pub fn in_maintenance(&self) -> bool {
        self.maintenance.load(Ordering::Relaxed)
    }

    pub fn set_maintenance(&self, on: bool) {
        self.maintenance.store(on, Ordering::Relaxed);
    }

    #[inline]
    pub fn lagging(&self) -> bool {
        self.lagging.load(Ordering::Relaxed)
    }

    /// What the monitor measured of replication: the lag (-1: unknown or
    /// not a replica) and whether that keeps the server out of reads.
    pub fn set_lag(&self, lag_ms: i64, lagging: bool) {
        self.lag_ms.store(lag_ms, Ordering::Relaxed);
        self.lagging.store(lagging, Ordering::Relaxed);
    }

    pub fn set_lagging(&self, lagging: bool) {
        self.lagging.store(lagging, Ordering::Relaxed);
    }

    pub fn lag_ms(&self) -> i64 {
        self.lag_ms.load(Ordering::Relaxed)
    }

    #[inline]
    pub fn member_ok(&self) -> bool {
        self.member_ok.load(Ordering::Relaxed)
    }

    /// Cluster membership as the monitor saw it; `state` says why a member
    /// is not usable.
    pub fn set_member(&self, ok: bool, state: Option<String>) {
        self.member_ok.store(ok, Ordering::Relaxed);
        *self.member_state.lock() = state;
    }

    pub fn member_state(&self) -> Option<String> {
        self.member_state.lock().clone()
    }

    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().clone()
    }

    pub fn set_last_error(&self, e: String) {
        *self.last_error.lock() = Some(e);
    }

    pub fn version(&self) -> Option<String> {
        self.version.lock().clone()
    }

    /// The first version string a connection reported.
    pub fn note_version(&self, v: &str) {
        let mut g = self.version.lock();
        if g.is_none() {
            *g = Some(v.to_string());
            if let Some(p) = sextant_sql::ServerVersion::parse(v) {
                let bits = p.id & 0x7FFF_FFFF | if p.mariadb { 1 << 31 } else { 0 };
                self.version_id.store(bits, Ordering::Relaxed);
            }
        }
    }

    /// The server's version as executable comments are read by it (None
    /// until a connection reported it).
    #[inline]
    pub fn server_version(&self) -> Option<sextant_sql::ServerVersion> {
        match self.version_id.load(Ordering::Relaxed) {
            0 => None,
            bits => Some(sextant_sql::ServerVersion {
                id: bits & 0x7FFF_FFFF,
                mariadb: bits >> 31 == 1,
            }),
        }
    }

    /// Usable for reads: reachable, not in maintenance, not lagging, a
    /// usable cluster member.
    #[inline]
    pub fn usable(&self) -> bool {
        self.reachable() && !self.in_maintenance() && !self.lagging() && self.member_ok()
    }

    /// Load figures for balancing: statements in flight, and reads queued
    /// behind a read-your-writes wait here (the one that sent it and those
    /// following it). None when the server is not usable.
    #[inline]
    pub fn load(&self) -> Option<sextant_routing::Load> {
        if !self.usable() {
            return None;
        }
        Some(sextant_routing::Load {
            outstanding: self.outstanding.load(Ordering::Relaxed)
                + self.following.load(Ordering::Relaxed)
                + self.shared_wait.in_flight() as u32,
            latency_us: self.latency_us.load(Ordering::Relaxed),
        })
    }

    /// Whether the server has applied the write `g`, as last seen.
    pub fn has_applied(&self, g: crate::gtid::Packed) -> bool {
        let d = crate::gtid::domain(g);
        self.applied.iter().any(|a| {
            let v = a.load(Ordering::Relaxed);
            v != 0 && crate::gtid::domain(v) == d && crate::gtid::seq(v) >= crate::gtid::seq(g)
        })
    }

    /// The server was seen to have applied `g` (a wait for it returned
    /// at once or in time): reads needing it need not wait again. Never
    /// moves a position back; the monitor's next reading replaces it.
    pub fn note_applied(&self, g: crate::gtid::Packed) {
        let d = crate::gtid::domain(g);
        for a in &self.applied {
            let v = a.load(Ordering::Relaxed);
            if v != 0 && crate::gtid::domain(v) == d {
                a.fetch_max(g, Ordering::Relaxed);
                return;
            }
        }
        // A domain the monitor has not reported: a free slot, if any.
        for a in &self.applied {
            if a.compare_exchange(0, g.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    /// A wait for `g` ran out of time here.
    pub fn note_wait_failed(&self, g: crate::gtid::Packed) {
        self.wait_failed.fetch_max(g, Ordering::Relaxed);
    }

    /// Whether a read needing `g` may wait on this server: not while a
    /// wait for `g` or an earlier write of its domain has timed out here
    /// and the server has not been seen to catch up with it since. (A
    /// server behind by more than the wait budget would otherwise cost
    /// every read the whole budget before it goes to the primary.)
    pub fn may_wait_for(&self, g: crate::gtid::Packed) -> bool {
        let f = self.wait_failed.load(Ordering::Relaxed);
        f == 0
            || crate::gtid::domain(f) != crate::gtid::domain(g)
            || crate::gtid::seq(g) < crate::gtid::seq(f)
            || self.has_applied(f)
    }

    /// The applied positions as last seen, `domain-sequence` each (the
    /// server id is not kept).
    pub fn applied_list(&self) -> String {
        let v: Vec<String> = self
            .applied
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .filter(|&v| v > 1)
            .map(|v| format!("{}-{}", crate::gtid::domain(v), crate::gtid::seq(v)))
            .collect();
        v.join(",")
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
        self.shared_wait.wake();
    }

    #[inline]
    pub fn heartbeat_applied_us(&self) -> i64 {
        self.heartbeat_applied_us.load(Ordering::Relaxed)
    }

    pub fn set_heartbeat_applied_us(&self, us: i64) {
        self.heartbeat_applied_us.store(us, Ordering::Relaxed);
    }

    /// Statements running on the server now.
    pub fn outstanding(&self) -> u32 {
        self.outstanding.load(Ordering::Relaxed)
    }

    /// A read follows a wait here until the guard is dropped (also when
    /// the session goes away mid-wait).
    pub fn following(&self) -> Following<'_> {
        self.following.fetch_add(1, Ordering::Relaxed);
        Following(&self.following)
    }

    #[inline]
    pub fn statement_started(&self) {
        self.outstanding.fetch_add(1, Ordering::Relaxed);
    }

    /// A statement's end: how long it took, whether the server answered
    /// it with an error, and whether the time feeds the moving average
    /// (least_latency balancing; not for a statement that failed).
    #[inline]
    pub fn statement_finished(&self, elapsed_us: u64, error: bool, sample: bool) {
        self.outstanding.fetch_sub(1, Ordering::Relaxed);
        self.stats.record(elapsed_us, error);
        if sample {
            let us = elapsed_us;
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

    /// The state SHOW BACKENDS reports, most telling first.
    pub fn state_name(&self) -> &'static str {
        if self.in_maintenance() {
            "maintenance"
        } else if !self.reachable() {
            "down"
        } else if !self.member_ok() {
            // In the cluster's own words in member_state.
            "excluded"
        } else if self.lagging() {
            "lagging"
        } else {
            "up"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gtid::Gtid;
    use crate::shared_wait::Claim;

    fn g(domain: u32, seq: u64) -> u64 {
        Gtid {
            domain,
            server: 1,
            seq,
            uuid: 0,
        }
        .pack()
    }

    #[test]
    fn reads_following_a_wait_count_as_load_until_they_leave() {
        let h = Health::new(Role::Replica);
        h.statement_started();
        let a = h.following();
        let b = h.following();
        assert_eq!(h.load().map(|l| l.outstanding), Some(3));
        drop(a);
        assert_eq!(h.load().map(|l| l.outstanding), Some(2));
        drop(b);
        h.statement_finished(10, false, false);
        assert_eq!(h.load().map(|l| l.outstanding), Some(0));
        // The in-flight figure shown to operators stays the statements'.
        let _c = h.following();
        assert_eq!(h.outstanding(), 0);
    }

    #[test]
    fn the_read_that_sent_a_wait_counts_as_load_until_the_wait_ends() {
        // Before its wait ends, the read that sent it has started no
        // statement and follows nothing; yet it will run here after the
        // replica's apply delay, like the reads following it.
        let h = Health::new(Role::Replica);
        assert_eq!(h.load().map(|l| l.outstanding), Some(0));
        let w = g(0, 7);
        assert_eq!(h.shared_wait.claim(w, 1_000_000), Claim::Own);
        assert_eq!(h.load().map(|l| l.outstanding), Some(1));
        let _f = h.following();
        assert_eq!(h.load().map(|l| l.outstanding), Some(2));
        h.shared_wait.ended(w);
        assert_eq!(h.load().map(|l| l.outstanding), Some(1));
        // A wait past its budget whose end was never reported (its session
        // vanished) stops counting.
        assert_eq!(h.shared_wait.claim(g(0, 8), 0), Claim::Own);
        assert_eq!(h.load().map(|l| l.outstanding), Some(1));
    }

    #[test]
    fn a_wait_that_caught_up_teaches_the_position_and_never_moves_it_back() {
        let h = Health::new(Role::Replica);
        h.set_applied("0-1-10");
        assert!(!h.has_applied(g(0, 12)));
        h.note_applied(g(0, 12));
        assert!(h.has_applied(g(0, 12)));
        h.note_applied(g(0, 11));
        assert!(
            h.has_applied(g(0, 12)),
            "an older wait does not move it back"
        );
        // A domain the monitor has not reported takes a free slot.
        h.note_applied(g(3, 5));
        assert!(h.has_applied(g(3, 5)) && h.has_applied(g(0, 12)));
        // The monitor's next reading is the truth again.
        h.set_applied("0-1-11");
        assert!(!h.has_applied(g(0, 12)) && !h.has_applied(g(3, 1)));
    }

    #[test]
    fn after_a_timed_out_wait_later_writes_do_not_wait_until_it_catches_up() {
        let h = Health::new(Role::Replica);
        h.set_applied("0-1-10");
        assert!(h.may_wait_for(g(0, 20)));
        h.note_wait_failed(g(0, 20));
        assert!(!h.may_wait_for(g(0, 20)));
        assert!(!h.may_wait_for(g(0, 25)), "a later write is further off");
        assert!(h.may_wait_for(g(0, 15)), "an earlier one may be there");
        assert!(h.may_wait_for(g(1, 30)), "another domain is another stream");
        h.set_applied("0-1-20");
        assert!(h.may_wait_for(g(0, 25)), "seen to catch up: waits again");
    }
}
