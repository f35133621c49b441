//! `KILL [QUERY] <id>` among sextant's sessions. A client sees sextant's
//! own connection id (in the handshake, and what `mysql`'s Ctrl-C sends),
//! not the id of whichever server connection runs its statement, so KILL
//! is sextant's to carry out: it must never reach a server with an id that
//! means another thread there (a replication thread, another client).
//!
//! Each logged-in session is registered with what a KILL needs: its user,
//! its client socket, and the server connection its statement runs on now
//! (one packed atomic the session stores before and after each statement).

use crate::runtime::UserEntry;
use parking_lot::Mutex;
use sextant_backend::GroupServers;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const IDLE: u64 = u64::MAX;

/// What other sessions may know of one session.
pub struct Handle {
    /// The user it logged in as: its group and server account.
    pub user: Arc<UserEntry>,
    pub peer: SocketAddr,
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

    pub fn fd(&self) -> RawFd {
        self.fd
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
    pub fn register(
        shared: &Arc<crate::Shared>,
        id: u32,
        user: Arc<UserEntry>,
        peer: SocketAddr,
        fd: RawFd,
    ) -> Registered {
        let handle = Arc::new(Handle {
            user,
            peer,
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

    /// The session `id`, if `user` may kill it: its own user's sessions,
    /// or any with `connection_admin` (as MySQL's CONNECTION_ADMIN).
    pub fn find(&self, id: u32, user: &UserEntry) -> Found {
        match self.map.lock().get(&id) {
            None => Found::Unknown,
            Some(h) if h.user.name != user.name && !user.connection_admin => Found::NotOwner,
            Some(h) => Found::Session(h.clone()),
        }
    }

    /// Every session, by id (for the admin port).
    pub fn list(&self) -> Vec<(u32, Arc<Handle>)> {
        let mut v: Vec<_> = self
            .map
            .lock()
            .iter()
            .map(|(id, h)| (*id, h.clone()))
            .collect();
        v.sort_by_key(|(id, _)| *id);
        v
    }

    pub fn get(&self, id: u32) -> Option<Arc<Handle>> {
        self.map.lock().get(&id).cloned()
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

/// Stops the statement session `h` is running, if any: `KILL QUERY` of its
/// server thread, sent on a connection of sextant's own (the session's is
/// busy with the statement).
pub async fn kill_running(h: &Handle) {
    let Some((idx, thread_id)) = h.running() else {
        return;
    };
    let Some(server) = h.user.group.members.get(idx).cloned() else {
        return;
    };
    let flavor = sextant_backend::Flavor::new(0, crate::frontend::DEFAULT_CHARSET);
    match server
        .acquire(&h.user.backend_user, &h.user.backend_password, flavor)
        .await
    {
        Ok(mut c) => match c.exec_internal(&format!("KILL QUERY {thread_id}")).await {
            Ok(_) => server.release(c),
            Err(e) => {
                tracing::info!(server = %server.addr, "KILL QUERY {thread_id}: {e}");
                server.discard(c);
            }
        },
        Err(e) => tracing::info!(server = %server.addr, "no connection for KILL QUERY: {e}"),
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
    /// An id given as an expression (`KILL CONNECTION_ID() + 1`).
    Expression,
}

/// Reads `KILL [HARD | SOFT] [CONNECTION | QUERY] <id>` with the lexer,
/// so that comments and spacing read as the server reads them.
pub fn parse(sql: &[u8]) -> KillStatement {
    use sextant_sql::TokenKind;
    let mut t = sextant_sql::Lexer::new(sql)
        .filter(|t| t.kind != TokenKind::Hint)
        .peekable();
    let _kill = t.next();
    let mut query = false;
    while let Some(w) = t.next() {
        if ["HARD", "SOFT", "CONNECTION"].iter().any(|k| w.is_word(k)) {
            continue;
        }
        if w.is_word("QUERY") {
            query = true;
            continue;
        }
        if w.is_word("ID") || w.is_word("USER") {
            return KillStatement::Unsupported;
        }
        let own = w.is_word("CONNECTION_ID")
            && t.next().is_some_and(|p| p.is_punct(b'('))
            && t.next().is_some_and(|p| p.is_punct(b')'));
        let id = match own {
            true => None,
            false => id_of(&w),
        };
        // Nothing may follow but a semicolon.
        let rest_empty = match t.next() {
            None => true,
            Some(p) => p.is_punct(b';') && t.next().is_none(),
        };
        return match (own, id, rest_empty) {
            (true, _, true) => KillStatement::Own { query },
            (false, Some(id), true) if query => KillStatement::Query(id),
            (false, Some(id), true) => KillStatement::Connection(id),
            _ => KillStatement::Expression,
        };
    }
    KillStatement::Unsupported
}

/// The id a server makes of a KILL's one token: a number; NULL is 0; a
/// string is its leading digits (0 without any), as the server converts
/// it.
fn id_of(t: &sextant_sql::Token<'_>) -> Option<u64> {
    use sextant_sql::TokenKind;
    match t.kind {
        TokenKind::Number => std::str::from_utf8(t.text).ok()?.parse().ok(),
        TokenKind::Word if t.is_word("NULL") => Some(0),
        TokenKind::Str => {
            let value = sextant_sql::string_literal(t.text, sextant_sql::LexMode::DEFAULT);
            let digits: Vec<u8> = value
                .iter()
                .copied()
                .skip_while(u8::is_ascii_whitespace)
                .take_while(u8::is_ascii_digit)
                .collect();
            Some(
                std::str::from_utf8(&digits)
                    .ok()
                    .and_then(|d| d.parse().ok())
                    .unwrap_or(0),
            )
        }
        _ => None,
    }
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
        assert_eq!(parse(b"KILL NULL"), KillStatement::Connection(0));
        assert_eq!(parse(b"KILL QUERY NULL"), KillStatement::Query(0));
        assert_eq!(parse(b"KILL 'abc'"), KillStatement::Connection(0));
        assert_eq!(parse(b"KILL '12'"), KillStatement::Connection(12));
        assert_eq!(parse(b"KILL CONNECTION_ID()+1"), KillStatement::Expression);
        assert_eq!(parse(b"KILL 1 + 1"), KillStatement::Expression);
        assert_eq!(
            parse(b"KILL CONNECTION_ID() + 1"),
            KillStatement::Expression
        );
    }
}
