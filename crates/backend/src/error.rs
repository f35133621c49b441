use sextant_protocol::ProtoError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum BackendError {
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("connecting to {addr} timed out after {ms} ms")]
    ConnectTimeout { addr: String, ms: u64 },
    #[error("server {addr} refused login for {user:?}: {message}")]
    Auth {
        addr: String,
        user: String,
        code: u16,
        message: String,
    },
    #[error("server {addr} asks for auth plugin {plugin:?}, which sextant does not support")]
    AuthPlugin { addr: String, plugin: String },
    #[error("I/O error on server connection {addr}: {source}")]
    Io {
        addr: String,
        source: std::io::Error,
    },
    #[error("server {addr} closed the connection")]
    Closed { addr: String },
    #[error("protocol error from server {addr}: {source}")]
    Protocol { addr: String, source: ProtoError },
    /// The server answered a statement sextant sent on its own behalf with
    /// an error (restoring session state, preparing a statement).
    #[error("server {addr} rejected {what}: {message}")]
    Server {
        addr: String,
        what: String,
        code: u16,
        sql_state: String,
        message: String,
    },
    /// The server refused the session's current database (it does not
    /// exist there, or the user may not use it): the client gets the
    /// server's own error, as it would directly.
    #[error("server {addr} refused database {db:?}: {message}")]
    Database {
        addr: String,
        db: String,
        code: u16,
        sql_state: String,
        message: String,
    },
    #[error("TLS to {addr} failed: {reason}")]
    Tls { addr: String, reason: String },
    #[error("no connection to {addr} within {ms} ms: the pool is full ({max} connections in use)")]
    PoolTimeout { addr: String, ms: u64, max: usize },
}

impl BackendError {
    /// Opening a connection failed because the server could not be
    /// reached or went away during the login (refused, timed out, closed,
    /// reset): what a dead server, or a balancer in front of one that
    /// accepts and closes, looks like. Nothing of a client's statement
    /// was sent.
    pub fn server_gone_at_open(&self) -> bool {
        matches!(
            self,
            BackendError::Connect { .. }
                | BackendError::ConnectTimeout { .. }
                | BackendError::Closed { .. }
                | BackendError::Io { .. }
        )
    }
}
