//! What every session shares for the life of the process: the runtime
//! current now (swapped whole by a reload, see `runtime.rs`), the
//! counters, the login set-up, connection ids, the sessions a KILL can
//! find, the monitors and the worker threads.

use crate::frontend::Users;
use crate::runtime::Runtime;
use arc_swap::ArcSwap;
use sextant_admin::Counters;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

pub struct Shared {
    /// Swapped whole by a reload; sessions keep what they logged in with.
    pub runtime: ArcSwap<Runtime>,
    /// Client sessions at once: [proxy] max_connections, lowered to what
    /// the process's file descriptor limit leaves room for.
    pub max_connections: usize,
    pub counters: Counters,
    pub server_version: String,
    pub next_conn_id: AtomicU32,
    /// The high byte of this instance's connection ids in a fleet (its
    /// slot, shifted), so that ids are unique across the fleet; 0 alone.
    pub conn_id_prefix: AtomicU32,
    /// How clients log in; a reload swaps it (TLS certificates).
    pub auth: ArcSwap<crate::frontend::AuthSetup>,
    /// The file the config came from (what a reload reads).
    pub config_path: Option<std::path::PathBuf>,
    /// The monitor tasks of each group, for a reload to follow.
    pub monitors: crate::monitors::Monitors,
    /// The worker threads' channels (set once they run): for what the
    /// admin port asks every thread (query digests).
    pub(crate) workers:
        std::sync::OnceLock<Vec<tokio::sync::mpsc::UnboundedSender<crate::work::Work>>>,
    pub admin_auth: crate::frontend::AuthSetup,
    /// Logged-in sessions by connection id, for KILL.
    pub sessions: crate::kill::Sessions,
    /// The coordinator of transactions over several groups (a sharded
    /// layout only). It outlives reloads: its log and in-flight
    /// transactions belong to the process.
    pub xa: Option<Arc<sextant_xa::Coordinator>>,
    /// Told to stop, and still accepting clients for `drain_delay_ms` so
    /// that load balancers see /readyz fail and stop sending new ones.
    pub draining: std::sync::atomic::AtomicBool,
    /// This instance's fleet (`[cluster]`), once joined.
    pub fleet: std::sync::OnceLock<Arc<sextant_fleet::Fleet>>,
    /// The config pushed to the fleet that this instance runs (its text
    /// and revision), which a reload uses in place of the file's (the
    /// file still gives the local keys).
    pub fleet_config: parking_lot::Mutex<Option<(String, i64)>>,
    /// Live instances of the fleet as last seen (1 alone): a user's
    /// max_connections is shared out over them.
    pub fleet_instances: std::sync::atomic::AtomicUsize,
    /// The smallest max_allowed_packet of the servers (0: not known yet),
    /// kept by the upkeep task from what the monitors read.
    pub servers_packet: std::sync::atomic::AtomicUsize,
    /// Kept connections to the fleet's other instances (forwarded KILLs).
    pub peers: crate::peers::Peers,
    /// The account audit as last read (at start and after each reload):
    /// what the status page shows, without reading grants per request.
    pub accounts: parking_lot::Mutex<Option<sextant_admin::Table>>,
}

impl Shared {
    /// This instance's share of a user's max_connections (0: no limit):
    /// the limit over the live instances, rounded up.
    pub fn user_limit(&self, max: usize) -> usize {
        let n = self
            .fleet_instances
            .load(std::sync::atomic::Ordering::Relaxed)
            .max(1);
        max.div_ceil(n)
    }

    /// A new session's connection id: alone, 1, 2, ...; in a fleet, the
    /// slot's byte and 24 bits of count (never 0 below it).
    pub fn new_conn_id(&self) -> u32 {
        use std::sync::atomic::Ordering::Relaxed;
        let prefix = self.conn_id_prefix.load(Relaxed);
        loop {
            let n = self.next_conn_id.fetch_add(1, Relaxed);
            if prefix == 0 {
                return n;
            }
            if n & 0xFF_FFFF != 0 {
                return prefix | (n & 0xFF_FFFF);
            }
        }
    }

    /// The runtime now (a lock-free load; hold it briefly).
    pub fn runtime(&self) -> arc_swap::Guard<Arc<Runtime>> {
        self.runtime.load()
    }
}

/// The admin port's single user.
pub struct AdminUsers {
    pub user: String,
    pub password: String,
    /// In a fleet: the password peers log in with as [`PEER_USER`],
    /// derived from the fleet's secret.
    pub peer: Option<String>,
}

/// The admin login a fleet's instances use with each other: it may only
/// forward KILLs and list sessions.
pub const PEER_USER: &str = "sextant-peer";

impl Users for AdminUsers {
    fn password(&self, user: &str) -> Option<&str> {
        if user == self.user {
            return Some(self.password.as_str());
        }
        match &self.peer {
            Some(p) if user == PEER_USER => Some(p.as_str()),
            _ => None,
        }
    }
    fn require_tls(&self, _: &str) -> bool {
        false
    }
}
