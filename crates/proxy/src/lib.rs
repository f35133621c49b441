//! The proxy: client logins, sessions and their statements, the relay, the
//! admin port, and starting it all ([`run`]). The `sextant` binary is a thin
//! `main` around this library.
//!
//! A statement's path: `start` accepts the client and hands it to a worker
//! thread; `session` reads each command, plans it (`sextant_routing::plan`),
//! binds a server connection (`session/binding.rs`), and `relay` passes the
//! answer back as bytes.

mod accounts;
mod admin;
mod admin_context;
#[cfg(feature = "count-allocations")]
pub mod alloc_count;
mod checksum;
mod client;
mod coordinator;
mod digests;
pub mod errors;
mod fleet;
mod frontend;
mod http;
mod inflight;
mod intents;
mod kill;
mod memory;
mod monitors;
mod peers;
mod proxy_header;
mod relay;
mod reload;
mod runtime;
mod session;
mod shared;
mod shutdown;
mod start;
mod work;
mod xa_recovery;

pub use errors::StartError;
pub use fleet::{cli_config, cli_push};
pub use reload::on_log_level_change;
pub use runtime::{Runtime, UserEntry};
pub use shared::Shared;
pub use start::run;

/// Without the `count-allocations` feature there is nothing to count.
#[cfg(not(feature = "count-allocations"))]
mod alloc_count {
    pub fn counter() -> Option<&'static std::sync::atomic::AtomicU64> {
        None
    }
}
