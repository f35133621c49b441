//! A server group: a primary and its replicas, or the members of a
//! cluster, and which of them take writes now (writer election by
//! topology). Every group sextant knows is in the [`Pool`].

use crate::health::Role;
use crate::pool::Server;
use sextant_config::{Topology, MAX_GROUP_SERVERS};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
    /// The primary's weight in read balancing (0: it takes no plain reads);
    /// a reload may change it.
    primary_weight: std::sync::atomic::AtomicU32,
    pub topology: Topology,
    /// Galera: every usable member takes writes, not just one.
    pub multi_writer: bool,
    /// Follow which member takes writes (any topology but static).
    pub follow_primary: bool,
    /// How long a write waits for a primary when none is known.
    pub primary_wait: Duration,
    /// The newest heartbeat (microseconds since the epoch, sextant's clock)
    /// the monitor wrote on the primary; 0 before the first.
    pub heartbeat_us: std::sync::atomic::AtomicI64,
    /// What the primary's catalogue adds to classification (its flavor,
    /// functions and views that may write); the monitor refreshes it.
    pub catalogue: arc_swap::ArcSwap<sextant_sql::Catalogue>,
    /// Set when a session ran DDL through the group: the monitor reads the
    /// catalogue again at its next check instead of waiting its turn.
    pub catalogue_stale: std::sync::atomic::AtomicBool,
    /// The primary's position as read for reads that must see writes
    /// acknowledged by any instance of a fleet.
    pub primary_position: crate::position::PrimaryPosition,
    /// Failovers sextant performs (`failover = "auto"`).
    pub ha: crate::ha::Ha,
}

const NO_PRIMARY: usize = usize::MAX;

// The writers are a bitmask of members.
const _: () = assert!(MAX_GROUP_SERVERS <= 64);

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
        members.truncate(MAX_GROUP_SERVERS);
        GroupServers {
            name: name.into(),
            members,
            primary_idx: AtomicUsize::new(0),
            writers: AtomicU64::new(1),
            primary_weight: std::sync::atomic::AtomicU32::new(primary_weight),
            topology,
            multi_writer: false,
            follow_primary: topology != Topology::Static,
            primary_wait,
            heartbeat_us: std::sync::atomic::AtomicI64::new(0),
            catalogue: Default::default(),
            catalogue_stale: std::sync::atomic::AtomicBool::new(true),
            primary_position: Default::default(),
            ha: Default::default(),
        }
    }

    /// The version of the group's primary, which decides how executable
    /// comments read (None until a connection to it reported one).
    #[inline]
    pub fn server_version(&self) -> Option<sextant_sql::ServerVersion> {
        self.primary().and_then(|p| p.health.server_version())
    }

    /// Classifies a statement with what this group's servers are known to
    /// be (see [`sextant_sql::Catalogue`]).
    #[inline]
    pub fn classify<'a>(&self, sql: &'a [u8]) -> sextant_sql::Classification<'a> {
        self.catalogue.load().classify(sql)
    }

    /// As [`GroupServers::classify`], for a session whose own lexing mode
    /// `session` tells (asked only when the statement's reading depends on it).
    #[inline]
    pub fn classify_in<'a, F: FnOnce() -> sextant_sql::LexMode>(
        &self,
        sql: &'a [u8],
        session: F,
    ) -> sextant_sql::Classification<'a> {
        self.catalogue.load().classify_in(sql, session)
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
        // FNV-1a is stable across processes and versions: every sextant
        // instance sends a schema's writes to the same member.
        let mut k = (sextant_sql::digest::fnv1a(schema) % n as u64) as u32;
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
            m.health.set_role(if mask & (1 << i) != 0 {
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
            .filter(|(_, m)| m.health.writable() && m.health.reachable() && m.health.member_ok())
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
            Topology::GroupReplication => {
                (candidates, if keep_current { Some(current) } else { first })
            }
            Topology::Galera if self.multi_writer => {
                (candidates, if keep_current { Some(current) } else { first })
            }
            // One writer, and it stays the writer while it can: moving
            // writes between Galera nodes invites certification conflicts.
            Topology::Galera => {
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
            self.primary_weight()
        } else {
            m.weight()
        }
    }

    #[inline]
    pub fn primary_weight(&self) -> u32 {
        self.primary_weight.load(Ordering::Relaxed)
    }

    pub fn set_primary_weight(&self, w: u32) {
        self.primary_weight.store(w, Ordering::Relaxed);
    }

    /// Whether a connection to `s` may serve plain reads.
    pub fn takes_reads(&self, s: &Server) -> bool {
        (s.role() == Role::Replica || self.primary_weight() > 0) && s.load().is_some()
    }
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
    use crate::PoolSettings;

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
            query_timeout: None,
            tls: None,
            server_key: None,
        }
    }

    fn group(topology: Topology, n: usize) -> GroupServers {
        group_mw(topology, false, n)
    }

    fn group_mw(topology: Topology, multi_writer: bool, n: usize) -> GroupServers {
        let s = |i: usize, r| Arc::new(Server::new(&format!("h:{i}"), "g", r, 1, settings()));
        let mut g = GroupServers::with_topology(
            "g",
            s(0, Role::Primary),
            (1..n).map(|i| s(i, Role::Replica)).collect(),
            0,
            topology,
            Duration::ZERO,
        );
        g.multi_writer = multi_writer;
        g
    }

    /// (writable, member_ok) per member, then follow().
    fn observe(g: &GroupServers, states: &[(bool, bool)]) {
        for (m, &(w, ok)) in g.members.iter().zip(states) {
            m.health.set_writable(w);
            m.health.set_member(ok, None);
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
        let g = group(Topology::Galera, 3);
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
        let g = group_mw(Topology::Galera, true, 3);
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
