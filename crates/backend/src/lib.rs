//! The server side of the proxy: connections to MySQL/MariaDB servers, a
//! pool per server, and the session state (tracked through the servers' own
//! session-state reports) that lets a client's session move from one pooled
//! connection to another without the client noticing.

pub mod binding;
mod conn;
mod error;
mod group;
pub mod gtid;
pub mod ha;
mod health;
pub mod pipe;
mod pool;
pub mod position;
pub mod shared_wait;
mod state;
pub mod stats;
mod thread;
pub mod turn;

pub use binding::{Binding, Lease};
pub use conn::{
    apply_session_state, BackendConn, ConnectParams, Flavor, ServerStmt, TlsTarget, TrackFlags,
    FLAVOR_MARIADB_CAPS,
};
pub use error::BackendError;
pub use group::{Group, GroupServers, Pool};
pub use health::{clock_ms, Following, Health, Role};
pub use pool::{OpenBooking, PipeChoice, PoolSettings, PoolStats, Server};
pub use sextant_config::{Topology, MAX_GROUP_SERVERS};

/// The hasher of maps looked up per statement (a connection's server
/// statements by SQL text, at every prepared execution): SipHash's
/// resistance to chosen keys costs more than these bounded maps, seeded
/// per process, need.
pub type FastHash = foldhash::fast::RandomState;
pub use state::{SessionVars, Tracking};
