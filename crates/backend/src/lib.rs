//! The server side of the proxy: connections to MySQL/MariaDB servers, a
//! pool per server, and the session state (tracked through the servers' own
//! session-state reports) that lets a client's session move from one pooled
//! connection to another without the client noticing.

pub mod binding;
mod conn;
mod error;
pub mod gtid;
pub mod pipe;
mod pool;
mod state;
pub mod stream;
pub mod tls;

pub use binding::{Binding, Lease};
pub use conn::{
    apply_session_state, BackendConn, ConnectParams, Flavor, ServerStmt, TlsTarget, TrackFlags,
};
pub use error::BackendError;
pub use pool::{Group, Pool, PoolSettings, PoolStats, Role, Server, Topology, MAX_MEMBERS};
pub use state::SessionVars;
pub use stream::Stream;
