//! `KILL [QUERY] <id>` among sextant's sessions. A client sees sextant's
//! own connection id (in the handshake, and what `mysql`'s Ctrl-C sends),
//! not the id of whichever server connection runs its statement, so KILL
//! is sextant's to carry out: it must never reach a server with an id that
//! means another thread there (a replication thread, another client).
//!
//! Each logged-in session is registered with what a KILL needs: its user,
//! its client socket, and the server connection its statement runs on now
//! (one packed atomic the session stores before and after each statement).

use parking_lot::Mutex;
use sextant_backend::GroupServers;
use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const IDLE: u64 = u64::MAX;

/// What other sessions may know of one session.
pub struct Handle {
    pub user: Arc<str>,
    fd: RawFd,
    /// Member index in the session's group (high half) and server thread
    /// id (low half) of the statement running now; IDLE between them.
    running: AtomicU64,
}

impl Handle {
    /// The session's statement now runs on `server` (a member of `group`)
    /// in server thread `thread_id`.
    #[inline]
    pub fn running_on(
        &self,
        group: &GroupServers,
        server: &sextant_backend::Server,
        thread_id: u32,
    ) {
        let idx = group
            .members
            .iter()
            .position(|m| std::ptr::eq(&**m, server))
            .map_or(IDLE, |i| (i as u64) << 32 | thread_id as u64);
        self.running.store(idx, Ordering::Relaxed);
    }

    #[inline]
    pub fn idle(&self) {
        self.running.store(IDLE, Ordering::Relaxed);
    }

    /// (member index, server thread id) of the running statement.
    pub fn running(&self) -> Option<(usize, u32)> {
        let v = self.running.load(Ordering::Relaxed);
        (v != IDLE).then_some(((v >> 32) as usize, v as u32))
    }
}

#[derive(Default)]
pub struct Sessions {
    map: Mutex<HashMap<u32, Arc<Handle>>>,
}

/// A session's entry; removed when dropped, which the session does before
/// its client socket closes (so a KILL never shuts a reused descriptor).
pub struct Registered {
    sessions: Arc<crate::Shared>,
    id: u32,
    pub handle: Arc<Handle>,
}

impl Registered {
    pub fn id(&self) -> u32 {
        self.id
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.sessions.sessions.map.lock().remove(&self.id);
    }
}

pub enum Found {
    Unknown,
    NotOwner,
    Session(Arc<Handle>),
}

impl Sessions {
    pub fn register(shared: &Arc<crate::Shared>, id: u32, user: Arc<str>, fd: RawFd) -> Registered {
        let handle = Arc::new(Handle {
            user,
            fd,
            running: AtomicU64::new(IDLE),
        });
        shared.sessions.map.lock().insert(id, handle.clone());
        Registered {
            sessions: shared.clone(),
            id,
            handle,
        }
    }

    /// The session `id`, if `user` may kill it (its own sessions only, as
    /// MySQL allows an account without PROCESS).
    pub fn find(&self, id: u32, user: &str) -> Found {
        match self.map.lock().get(&id) {
            None => Found::Unknown,
            Some(h) if &*h.user != user => Found::NotOwner,
            Some(h) => Found::Session(h.clone()),
        }
    }

    /// Ends session `id`'s connection with its client: the session sees
    /// the client gone and closes its server connection (unknown state).
    pub fn hang_up(&self, id: u32) {
        // Under the lock: the session cannot unregister and close the
        // descriptor meanwhile.
        let map = self.map.lock();
        if let Some(h) = map.get(&id) {
            // SAFETY: shutdown() on a descriptor this registry knows is
            // open (the session unregisters before closing it).
            unsafe {
                libc::shutdown(h.fd, libc::SHUT_RDWR);
            }
        }
    }
}

/// What a `KILL` statement asks.
#[derive(Debug, PartialEq, Eq)]
pub enum KillStatement {
    Query(u64),
    Connection(u64),
    /// `KILL [QUERY] CONNECTION_ID()`: the session's own.
    Own {
        query: bool,
    },
    /// `KILL QUERY ID n`, `KILL USER u`: not by connection id.
    Unsupported,
}

/// Reads `KILL [HARD | SOFT] [CONNECTION | QUERY] <id>`.
pub fn parse(sql: &[u8]) -> KillStatement {
    let text = String::from_utf8_lossy(sql);
    let mut words = text
        .split(|c: char| c.is_whitespace() || c == ';')
        .filter(|w| !w.is_empty());
    let _kill = words.next();
    let mut query = false;
    for w in words {
        match w.to_ascii_uppercase().as_str() {
            "HARD" | "SOFT" | "CONNECTION" => {}
            "QUERY" => query = true,
            "CONNECTION_ID()" => return KillStatement::Own { query },
            n => {
                return match n.parse() {
                    Ok(id) if query => KillStatement::Query(id),
                    Ok(id) => KillStatement::Connection(id),
                    Err(_) => KillStatement::Unsupported,
                }
            }
        }
    }
    KillStatement::Unsupported
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_statements() {
        assert_eq!(parse(b"KILL 12"), KillStatement::Connection(12));
        assert_eq!(parse(b"kill connection 12;"), KillStatement::Connection(12));
        assert_eq!(parse(b"KILL QUERY 7"), KillStatement::Query(7));
        assert_eq!(parse(b"KILL HARD QUERY 7"), KillStatement::Query(7));
        assert_eq!(parse(b"KILL QUERY ID 7"), KillStatement::Unsupported);
        assert_eq!(parse(b"KILL USER app"), KillStatement::Unsupported);
        assert_eq!(parse(b"KILL"), KillStatement::Unsupported);
        assert_eq!(
            parse(b"KILL QUERY connection_id()"),
            KillStatement::Own { query: true }
        );
    }
}
