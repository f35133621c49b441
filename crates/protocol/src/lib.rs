//! The MySQL client/server wire protocol, as pure functions and state machines.
//!
//! Nothing here does I/O or makes policy decisions: the proxy feeds bytes in
//! and gets decoded headers, encoded packets and "what comes next" answers
//! back. That keeps the code fuzzable and lets the same pieces serve the
//! client-facing side, the server-facing side and the admin port.

pub mod auth;
pub mod binary;
pub mod codec;
pub mod compress;
pub mod consts;
pub mod error;
pub mod handshake;
pub mod packets;
pub mod tracker;

pub use error::ProtoError;
