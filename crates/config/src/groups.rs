//! `[groups.<name>]`: a group's servers, topology, pools and balance.

use crate::check::Checker;
use crate::Addr;
use crate::Routing;
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Group {
    pub primary: Addr,
    #[serde(default)]
    pub replicas: Vec<Replica>,
    /// Most server connections per server of the group.
    #[serde(default = "default_pool_max")]
    pub pool_max: usize,
    /// Connections kept open per server even when idle.
    #[serde(default)]
    pub pool_min: usize,
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// Idle connections above pool_min are closed after this long.
    #[serde(default = "default_idle_timeout_ms")]
    pub idle_timeout_ms: u64,
    /// Connections are replaced after this long, idle or not.
    #[serde(default = "default_max_lifetime_ms")]
    pub max_lifetime_ms: u64,
    /// A connection idle longer than this is pinged before it is lent out.
    #[serde(default = "default_health_check_idle_ms")]
    pub health_check_idle_ms: u64,
    /// How long a statement waits for a connection when the pool is full.
    #[serde(default = "default_pool_wait_ms")]
    pub pool_wait_ms: u64,
    /// Server-side prepared statements kept per server connection (LRU).
    #[serde(default = "default_max_prepared")]
    pub max_prepared_per_connection: usize,
    /// Pipelining: up to this many sessions' plain reads are sent on one
    /// server connection without waiting for the answers (0: off). Saves
    /// CPU on both ends under load; a slow read delays the reads queued
    /// behind it on the same connection. Unset: 16, or off with TLS to the
    /// servers (see `pipeline()`).
    #[serde(default)]
    pub pipeline_depth: Option<usize>,
    /// Server connections per server and worker thread used for
    /// pipelined reads (reads that find them all full take a connection
    /// of their own). Unset: 8, and never more than pool_max (see
    /// `pipeline_connections()`).
    #[serde(default)]
    pub pipeline_connections: Option<usize>,
    /// A statement whose server has not answered in full by then is
    /// abandoned (its server connection closed, the server out of rotation
    /// until it answers again): a plain read that sent nothing to the
    /// client yet runs on another server, anything else gets 9003. 0: no
    /// limit (the default: long queries are legitimate).
    #[serde(default)]
    pub query_timeout_ms: u64,
    /// The primary's weight in read balancing. 0 (the default): the primary
    /// takes reads only by read_primary_percent or when no replica can;
    /// N > 0: it takes part in balancing like a replica of weight N, so
    /// reads scale with every node of the group.
    #[serde(default)]
    pub primary_weight: u32,
    /// A replica further behind than this leaves read balancing until it
    /// catches up (0: lag is not a reason).
    #[serde(default = "crate::routing::default_max_lag_ms")]
    pub max_replica_lag_ms: u64,
    /// "static": the configured primary takes writes; "replication": the
    /// monitor follows which server is writable (read_only = OFF), so
    /// switchovers and failovers done by other tools are followed;
    /// "group_replication": members and roles from MySQL Group
    /// Replication; "galera": Synced nodes of a Galera cluster.
    #[serde(default)]
    pub topology: Topology,
    /// Galera: every Synced node takes writes (writes for one schema kept
    /// on one node); by default one node does.
    #[serde(default)]
    pub galera_multi_writer: bool,
    /// How long a write waits for a primary when none is known (0: fail
    /// at once). Unset: 0, or with `failover = "auto"` long enough to
    /// cover a failover (see `primary_wait_ms()`).
    #[serde(default)]
    pub primary_wait_ms: Option<u64>,
    /// "auto": sextant replaces a failed primary itself (topology =
    /// "replication", MariaDB GTID); "off" (the default): it follows
    /// failovers other tools perform.
    #[serde(default)]
    pub failover: crate::failover::FailoverMode,
    /// How long the primary must fail sextant's checks before a failover
    /// (the replicas must have lost it too).
    #[serde(default = "crate::failover::default_after_ms")]
    pub failover_after_ms: u64,
    /// The account the replicas replicate with: sextant gives it to an old
    /// primary it rejoins as a replica (without it, an old primary is made
    /// read-only and left out).
    #[serde(default)]
    pub replication_user: Option<String>,
    #[serde(default, deserialize_with = "crate::secrets::optional_secret")]
    pub replication_password: Option<String>,
    /// The group runs semi-synchronous replication (AFTER_SYNC): a
    /// promoted replica gets the master side on, a rejoined old primary
    /// the replica side.
    #[serde(default)]
    pub semi_sync: bool,
    /// Connect to the servers with TLS.
    #[serde(default)]
    pub tls: bool,
    /// PEM CA certificate(s) to verify the servers' certificates with; without
    /// it the connection is encrypted but the server is not authenticated
    /// (MySQL's ssl-mode=REQUIRED).
    #[serde(default)]
    pub tls_ca: Option<String>,
    /// The servers' RSA public key (PEM file), for accounts whose login
    /// needs the password itself (caching_sha2_password's full
    /// authentication, sha256_password) without TLS verified by tls_ca:
    /// sextant encrypts it to this key only, never to one a server offers.
    #[serde(default)]
    pub server_public_key: Option<String>,
}

impl Group {
    /// How long a write waits for a primary when none is known: as set,
    /// else long enough for a failover sextant performs (detection, the
    /// candidate's catch-up, promotion), else 0.
    pub fn primary_wait_ms(&self) -> u64 {
        match (self.primary_wait_ms, self.failover) {
            (Some(ms), _) => ms,
            (None, crate::failover::FailoverMode::Auto) => {
                self.failover_after_ms + crate::failover::PROMOTION_ALLOWANCE_MS
            }
            (None, crate::failover::FailoverMode::Off) => 0,
        }
    }

    /// The pipelining depth in effect: as set, else the default, except
    /// with TLS to the servers (a TLS connection's socket cannot be shared
    /// by two tasks).
    pub fn pipeline(&self) -> usize {
        match (self.pipeline_depth, self.tls) {
            (Some(d), _) => d,
            (None, true) => 0,
            (None, false) => DEFAULT_PIPELINE_DEPTH,
        }
    }

    /// Pipelined connections per server and worker thread in effect (never
    /// more than the pool has). A pipe is opened only when the others are
    /// full, so a light load uses one; with 256 clients on one worker
    /// thread, 2 left most reads on connections of their own
    /// (docs/performance.md).
    pub fn pipeline_connections(&self) -> usize {
        self.pipeline_connections
            .unwrap_or(DEFAULT_PIPELINE_CONNECTIONS)
            .min(self.pool_max)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    pub addr: Addr,
    pub weight: u32,
    /// May be made the primary by a failover.
    pub promotable: bool,
}

impl<'de> Deserialize<'de> for Replica {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Plain(Addr),
            Full(Full),
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Full {
            addr: Addr,
            #[serde(default = "one")]
            weight: u32,
            #[serde(default = "yes")]
            promotable: bool,
        }
        fn yes() -> bool {
            true
        }
        fn one() -> u32 {
            1
        }
        match Form::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "a replica is \"host:port\", a socket path, or { addr = \"host:port\", weight = N, promotable = BOOL }",
            )
        })? {
            Form::Plain(addr) => Ok(Replica {
                addr,
                weight: 1,
                promotable: true,
            }),
            Form::Full(f) => Ok(Replica {
                addr: f.addr,
                weight: f.weight,
                promotable: f.promotable,
            }),
        }
    }
}

/// Most servers a group may have (its primary and replicas, or its
/// cluster's members).
pub const MAX_GROUP_SERVERS: usize = 32;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
/// How a group's writer is found.
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
    /// takes writes, or all with `galera_multi_writer`.
    Galera,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    /// Turns in order, each server as many turns as its weight.
    #[default]
    RoundRobin,
    /// A random pick in proportion to the weights.
    Weighted,
    /// The server with the fewest statements in flight (per unit of weight).
    LeastOutstanding,
    /// The server with the lowest moving average of response time.
    LeastLatency,
}

/// Pipelining depth when the config names none: the deepest allowed.
/// Against 8, with 64 sysbench threads, it did 1.20x the point selects
/// and 1.07x the read-only statements per proxy core (fewer reads
/// overflow the pipes onto connections of their own, each a round trip
/// and a server wake-up), and 0.97-1.16x with shared cores
/// (docs/performance.md).
pub const DEFAULT_PIPELINE_DEPTH: usize = 16;

/// Pipelined connections per server and worker thread when the config
/// names none. Against 2, with 256 sysbench threads on one worker thread
/// under a 0.25-core quota, it did 1.61x the point selects and 1.56x the
/// read-only statements (docs/performance.md).
pub const DEFAULT_PIPELINE_CONNECTIONS: usize = 8;

pub(crate) fn default_pool_max() -> usize {
    200
}

pub(crate) fn default_connect_timeout_ms() -> u64 {
    2_000
}

pub(crate) fn default_idle_timeout_ms() -> u64 {
    60_000
}

pub(crate) fn default_max_lifetime_ms() -> u64 {
    3_600_000
}

pub(crate) fn default_health_check_idle_ms() -> u64 {
    5_000
}

pub(crate) fn default_pool_wait_ms() -> u64 {
    10_000
}

pub(crate) fn default_max_prepared() -> usize {
    256
}

/// Every group's pools, pipelining, TLS and servers.
pub(crate) fn check(groups: &BTreeMap<String, Group>, routing: &Routing, c: &mut Checker) {
    for (name, g) in groups {
        let t = format!("groups.{name}");
        if g.pool_max == 0 {
            c.err(&t, "pool_max", "must be at least 1".into());
        }
        if g.pool_min > g.pool_max {
            c.err(
                &t,
                "pool_min",
                format!("{} is more than pool_max ({})", g.pool_min, g.pool_max),
            );
        }
        if g.connect_timeout_ms == 0 {
            c.err(&t, "connect_timeout_ms", "must be more than 0".into());
        }
        // (sextant_backend::pipe::MAX_DEPTH)
        let depth = g.pipeline_depth.unwrap_or(0);
        if depth > 16 {
            c.err(
                &t,
                "pipeline_depth",
                format!("{depth} is more than 16 (what a pipe can have queued must fit in the socket buffers: docs/performance.md)"),
            );
        }
        // (Only when set: by default, pipelining fits itself to the
        // rest of the group.)
        if depth > 0 {
            if g.pipeline_connections
                .is_some_and(|n| n == 0 || n > g.pool_max)
            {
                c.err(
                    &t,
                    "pipeline_connections",
                    format!(
                        "must be from 1 to pool_max ({}) when pipeline_depth is set",
                        g.pool_max
                    ),
                );
            }
            if g.tls {
                c.err(
                    &t,
                    "pipeline_depth",
                    "pipelining shares a connection's socket between two tasks, which TLS does not allow; use tls = false or pipeline_depth = 0".into(),
                );
            }
        }
        crate::failover::check(&t, g, c);
        if g.galera_multi_writer && g.topology != Topology::Galera {
            c.err(
                &t,
                "galera_multi_writer",
                "needs topology = \"galera\"".into(),
            );
        }
        if g.tls {
            let unix = std::iter::once(&g.primary)
                .chain(g.replicas.iter().map(|r| &r.addr))
                .find(|a| a.is_unix_path());
            if let Some(a) = unix {
                c.err(
                    &t,
                    "tls",
                    format!("{a} is a Unix socket; TLS is for TCP servers (a socket never leaves the host)"),
                );
            }
        }
        if g.replicas.len() + 1 > MAX_GROUP_SERVERS {
            c.err(
                &t,
                "replicas",
                format!("a group has at most {MAX_GROUP_SERVERS} servers"),
            );
        }
        for r in &g.replicas {
            if r.weight == 0 {
                c.err(
                    &t,
                    "replicas",
                    format!(
                        "replica {} has weight 0; remove it or give it a weight of 1 or more",
                        r.addr
                    ),
                );
            }
            if r.addr == g.primary {
                c.err(&t, "replicas", format!("{} is also the primary", r.addr));
            }
        }
    }
    for (name, g) in groups {
        if g.primary_weight > 0 && routing.read_primary_percent > 0 {
            c.err(
                &format!("groups.{name}"),
                "primary_weight",
                "give the primary a share of reads either by primary_weight or by [routing] read_primary_percent, not both".into(),
            );
        }
        if g.tls_ca.is_some() && !g.tls {
            c.err(
                &format!("groups.{name}"),
                "tls_ca",
                "tls_ca is set but tls is not; add tls = true".into(),
            );
        }
    }
}
