//! One connection to a MySQL/MariaDB server: login, session-tracking setup,
//! and the small request/response exchanges sextant makes on its own behalf.
//! Client traffic is relayed by the proxy through [`BackendConn::stream`] and
//! [`BackendConn::rbuf`] without passing through here.

mod internal;
mod login;
mod statements;

use crate::error::BackendError;
use crate::state::{SessionVars, Tracking};
use sextant_net::stream::Stream;
use sextant_protocol::codec::{parse_header, write_packet, HEADER_LEN, MAX_PAYLOAD};
use sextant_protocol::consts::{cap, com, mariadb_cap, status};
use sextant_protocol::packets::{session_changes, StateChange};
use statements::StmtContext;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

/// Client capabilities that change what the server sends, so a server
/// connection can only serve clients that negotiated the same ones.
pub const FLAVOR_CAPS: u32 = cap::OPTIONAL_RESULTSET_METADATA
    | cap::QUERY_ATTRIBUTES
    | cap::FOUND_ROWS
    | cap::IGNORE_SPACE
    | cap::LOCAL_FILES
    | cap::MULTI_STATEMENTS
    | cap::MULTI_RESULTS
    | cap::PS_MULTI_RESULTS
    | cap::DEPRECATE_EOF
    | cap::INTERACTIVE;

/// Capabilities sextant always asks of a server.
const BASE_CAPS: u32 = cap::LONG_PASSWORD
    | cap::LONG_FLAG
    | cap::PROTOCOL_41
    | cap::TRANSACTIONS
    | cap::SECURE_CONNECTION
    | cap::PLUGIN_AUTH
    | cap::PLUGIN_AUTH_LENENC_CLIENT_DATA
    | cap::CONNECT_ATTRS
    | cap::SESSION_TRACK;

/// The format-affecting part of a client's handshake. Pools hand a client
/// only connections of its own flavor, so results pass through unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flavor {
    pub caps: u32,
    pub charset: u8,
    /// MariaDB extended capabilities that change what results look like.
    pub mariadb: u32,
}

/// The MariaDB extended capabilities sextant offers clients (and so opens
/// server connections with): extended column metadata, which drivers use
/// to tell JSON, UUID and INET columns from plain strings, bulk
/// execution of prepared statements (batch inserts), and progress reports
/// of long statements. Not metadata caching: server statements are shared
/// by sessions, so a server's "metadata unchanged" would be about another
/// session's copy after a schema change. Keeping it in
/// the flavor means results relay unchanged; a client without it gets
/// connections opened without it.
pub const FLAVOR_MARIADB_CAPS: u32 =
    mariadb_cap::EXTENDED_METADATA | mariadb_cap::STMT_BULK_OPERATIONS | mariadb_cap::PROGRESS;

impl Flavor {
    pub fn new(client_caps: u32, charset: u8) -> Self {
        Flavor {
            caps: client_caps & FLAVOR_CAPS,
            charset,
            mariadb: 0,
        }
    }

    pub fn with_mariadb(mut self, mariadb_caps: u32) -> Self {
        self.mariadb = mariadb_caps & FLAVOR_MARIADB_CAPS;
        self
    }
    pub fn deprecate_eof(&self) -> bool {
        self.caps & cap::DEPRECATE_EOF != 0
    }
}

pub struct ConnectParams<'a> {
    pub addr: &'a str,
    pub user: &'a str,
    pub password: &'a str,
    pub flavor: Flavor,
    pub timeout: Duration,
    pub tls: Option<&'a TlsTarget>,
    /// A pooled connection's server-side wait_timeout is raised to at
    /// least this (well above the pool's idle timeout), so that the server
    /// does not close it while it waits in the pool.
    pub min_wait_timeout: Option<Duration>,
    /// The server's RSA public key (PEM) as pinned in config: the only key
    /// a password is encrypted to without TLS (a key the server offers
    /// could be anyone's).
    pub server_key: Option<&'a str>,
}

/// How to reach a server over TLS.
#[derive(Clone, Debug)]
pub struct TlsTarget {
    pub config: Arc<rustls::ClientConfig>,
    pub name: rustls::pki_types::ServerName<'static>,
    /// The server's certificate is checked against a CA: only then is the
    /// server known, and may be sent a password itself.
    pub verified: bool,
}

/// What session-state reports said besides variable values.
#[derive(Debug, Clone, Copy, Default)]
pub struct TrackFlags {
    /// A change sextant cannot see or replay (user variable, temporary
    /// table, ...): the connection must stay with its session or be reset.
    pub opaque: bool,
    /// character_set_connection changed: collation_connection must be read.
    pub charset_changed: bool,
    /// The GTID of the last write on this connection (MariaDB reports it
    /// as the last_gtid variable), not yet taken by the session.
    pub last_gtid: Option<crate::gtid::Gtid>,
    /// `SET insert_id = N` ran here: the next INSERT on this connection
    /// takes N. Not replayed elsewhere; the session keeps the connection
    /// for its next statement, and the next borrow clears it.
    pub insert_id_set: bool,
    /// The last statement set insert_id (taken by the session).
    pub insert_id_reported: bool,
    /// `SET LAST_INSERT_ID = N` (or `identity`) ran here: what
    /// `LAST_INSERT_ID()` now returns for the session (taken by it).
    pub last_insert_id_set: Option<u64>,
    /// A client's statement changed one of the `session_track_*` settings
    /// sextant relies on: they must be set again before the next statement.
    pub own_changed: bool,
    /// A client set one of its own timeouts here: the connection gets its
    /// own back at once (the client's value is kept by its session).
    pub client_side_changed: bool,
}

/// A statement prepared on this connection.
#[derive(Debug, Clone, Copy)]
pub struct ServerStmt {
    pub id: u32,
    pub params: u16,
    pub columns: u16,
    /// Whether this server statement has been sent parameter types.
    pub types_sent: bool,
    last_used: u64,
}

pub struct BackendConn {
    /// The server's statement-flush epoch this connection has caught up
    /// with (see `Server::flush_statements`).
    pub stmt_epoch: u32,
    pub stream: Stream,
    /// Bytes read from the server: `rbuf[rpos..]` are not yet consumed.
    /// Consuming moves `rpos` rather than the bytes behind it (pipelined
    /// answers of other sessions often follow in the same buffer, and
    /// moving them forward after each answer copied them again and again).
    pub rbuf: Vec<u8>,
    pub rpos: usize,
    pub addr: Arc<str>,
    pub user: Arc<str>,
    pub flavor: Flavor,
    pub server_version: String,
    pub connection_id: u32,
    /// The client-visible session state this connection currently has.
    pub vars: SessionVars,
    /// Values of variables that a fresh connection had and that DEFAULT
    /// would not restore (the handshake character set).
    pub baseline: BTreeMap<Box<str>, Box<str>>,
    /// The server's global `session_track_*` values: what a client's
    /// session starts with.
    pub tracking_defaults: Tracking,
    /// The capabilities both ends have (the login's).
    pub negotiated: u32,
    /// See [`ConnectParams::min_wait_timeout`].
    min_wait_timeout: Option<Duration>,
    /// Last status flags the server reported.
    pub status: u16,
    /// What the server's session-state reports said beyond the variables.
    pub track: TrackFlags,
    pub created: Instant,
    pub last_used: Instant,
    /// Borrowed from the pool after lying idle there, rather than opened
    /// for its borrower: it may have been closed by the server meanwhile
    /// (a KILL, wait_timeout), which says nothing about the server.
    pub from_pool: bool,
    /// Its server's [`crate::Health::replacements`] when it was opened:
    /// a connection of a primary since replaced is never used again.
    pub replacements: u32,
    /// The thread whose runtime the socket is registered with
    /// (`thread::thread_slot`): its readiness events wake that thread.
    pub home: usize,
    /// Server statements by SQL text, each with the session state it was
    /// prepared under: the server resolved its tables in that database and
    /// parsed it with that sql_mode and character set.
    stmts: HashMap<Arc<[u8]>, (ServerStmt, StmtContext), crate::FastHash>,
    stmt_clock: u64,
    pub max_prepared: usize,
}

fn io_err(addr: &str) -> impl FnOnce(std::io::Error) -> BackendError + '_ {
    move |source| BackendError::Io {
        addr: addr.to_string(),
        source,
    }
}

impl BackendConn {
    pub async fn connect(p: &ConnectParams<'_>) -> Result<BackendConn, BackendError> {
        Self::within_timeout(p, Self::connect_inner(p)).await
    }

    async fn within_timeout(
        p: &ConnectParams<'_>,
        f: impl std::future::Future<Output = Result<BackendConn, BackendError>>,
    ) -> Result<BackendConn, BackendError> {
        tokio::time::timeout(p.timeout, f)
            .await
            .map_err(|_| BackendError::ConnectTimeout {
                addr: p.addr.to_string(),
                ms: p.timeout.as_millis() as u64,
            })?
    }

    async fn connect_inner(p: &ConnectParams<'_>) -> Result<BackendConn, BackendError> {
        let mut c = Self::open(p).await?;
        c.min_wait_timeout = p.min_wait_timeout;
        c.setup().await?;
        Ok(c)
    }

    /// A connection to another sextant's admin port (a fleet's peer call):
    /// logged in and nothing more, since the admin port answers its own
    /// commands, not a server's session set-up.
    pub async fn connect_peer(p: &ConnectParams<'_>) -> Result<BackendConn, BackendError> {
        Self::within_timeout(p, Self::open(p)).await
    }

    /// A connection over `stream`, before its login.
    fn over(
        stream: sextant_net::stream::Stream,
        addr: &str,
        user: &str,
        flavor: Flavor,
    ) -> BackendConn {
        BackendConn {
            stream,
            rbuf: Vec::with_capacity(8 * 1024),
            rpos: 0,
            addr: addr.into(),
            user: user.into(),
            flavor,
            server_version: String::new(),
            connection_id: 0,
            vars: SessionVars::default(),
            baseline: BTreeMap::new(),
            tracking_defaults: Tracking::default(),
            negotiated: 0,
            min_wait_timeout: None,
            status: status::AUTOCOMMIT,
            track: TrackFlags::default(),
            created: Instant::now(),
            last_used: Instant::now(),
            from_pool: false,
            replacements: 0,
            home: crate::thread::thread_slot(),
            stmt_epoch: 0,
            stmts: HashMap::default(),
            stmt_clock: 0,
            max_prepared: 256,
        }
    }

    async fn open(p: &ConnectParams<'_>) -> Result<BackendConn, BackendError> {
        let stream = sextant_net::stream::connect(p.addr)
            .await
            .map_err(|source| BackendError::Connect {
                addr: p.addr.to_string(),
                source,
            })?;
        let mut c = Self::over(stream, p.addr, p.user, p.flavor);
        c.login(p).await?;
        Ok(c)
    }

    /// A connection over `stream` that never logged in: for tests of what
    /// carries connections (pipes) without a server.
    #[cfg(test)]
    pub(crate) fn unlogged(stream: sextant_net::stream::Stream) -> BackendConn {
        Self::over(stream, "test", "test", Flavor::new(0, 0))
    }

    /// An unlogged connection to a listener that reads nothing yet (what
    /// is written stays in the socket buffers), and the listener.
    #[cfg(test)]
    pub(crate) async fn to_silent_server() -> (BackendConn, std::net::TcpListener) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let stream = sextant_net::stream::connect(&addr).await.unwrap();
        (Self::unlogged(stream), l)
    }

    pub fn is_mariadb(&self) -> bool {
        self.server_version.contains("MariaDB")
    }

    /// Turns on the session-state reports that sextant tracks client state
    /// with, and records the connection's baseline character set.
    async fn setup(&mut self) -> Result<(), BackendError> {
        let min_wait_timeout = self.min_wait_timeout;
        self.exec_internal(self.own_tracking()).await?;
        // The global session_track_* values are what a client starts with
        // (what it would have on a direct connection).
        let rows = self
            .query_internal(if self.is_mariadb() {
                "SELECT @@character_set_client, @@character_set_connection, \
                 @@character_set_results, @@collation_connection, @@session.wait_timeout, \
                 @@global.session_track_system_variables, @@global.session_track_schema, \
                 @@global.session_track_state_change"
            } else {
                "SELECT @@character_set_client, @@character_set_connection, \
                 @@character_set_results, @@collation_connection, @@session.wait_timeout, \
                 @@global.session_track_system_variables, @@global.session_track_schema, \
                 @@global.session_track_state_change, @@global.session_track_gtids"
            })
            .await?;
        let names = [
            "character_set_client",
            "character_set_connection",
            "character_set_results",
            "collation_connection",
        ];
        let tracking = [
            "session_track_system_variables",
            "session_track_schema",
            "session_track_state_change",
            "session_track_gtids",
        ];
        if let Some(row) = rows.first() {
            for (n, v) in names.iter().zip(row) {
                let v = v.clone().unwrap_or_else(|| "NULL".into());
                self.baseline.insert((*n).into(), v.into());
            }
            for (n, v) in tracking.iter().zip(row.iter().skip(names.len() + 1)) {
                if let Some(v) = v {
                    self.tracking_defaults.set(n.as_bytes(), v.as_bytes());
                }
            }
            let wait: Option<u64> = row
                .get(names.len())
                .cloned()
                .flatten()
                .and_then(|v| v.parse().ok());
            if let (Some(wait), Some(min)) = (wait, min_wait_timeout) {
                if wait < min.as_secs() {
                    let set = format!("SET SESSION wait_timeout = {}", min.as_secs());
                    self.exec_internal(&set).await?;
                    // What a client's own wait_timeout is undone to.
                    self.baseline
                        .insert("wait_timeout".into(), min.as_secs().to_string().into());
                }
            }
        }
        // The setup statements' own reports describe the baseline, not a
        // client's change.
        self.vars = SessionVars {
            multi_statements: self.flavor.caps & cap::MULTI_STATEMENTS != 0,
            ..Default::default()
        };
        self.track = TrackFlags::default();
        Ok(())
    }

    /// The session-state reports sextant tracks client state with. MariaDB
    /// reports a write's GTID as the last_gtid variable; MySQL reports it
    /// on its own (session_track_gtids).
    fn own_tracking(&self) -> &'static str {
        if self.is_mariadb() {
            "SET SESSION session_track_system_variables = '*', session_track_schema = ON, \
             session_track_state_change = ON"
        } else {
            "SET SESSION session_track_system_variables = '*', session_track_schema = ON, \
             session_track_state_change = ON, session_track_gtids = OWN_GTID"
        }
    }

    /// Puts back this connection's own timeouts after a client set its own
    /// here (its session keeps them and applies them to the client).
    pub async fn restore_client_side(&mut self) -> Result<(), BackendError> {
        self.track.client_side_changed = false;
        let parts: Vec<String> = self
            .vars
            .client_side
            .keys()
            .map(|k| match self.baseline.get(k) {
                Some(b) => format!("{k} = {b}"),
                None => format!("{k} = DEFAULT"),
            })
            .collect();
        self.vars.client_side.clear();
        if parts.is_empty() {
            return Ok(());
        }
        self.exec_internal(&format!("SET SESSION {}", parts.join(", ")))
            .await?;
        // Its own report of the change is not a client's.
        self.vars.client_side.clear();
        self.track.client_side_changed = false;
        Ok(())
    }

    /// Sets sextant's tracking again after a client's statement changed it
    /// (the client's own settings are applied to what it is sent instead).
    pub async fn restore_tracking(&mut self) -> Result<(), BackendError> {
        self.exec_internal(self.own_tracking()).await?;
        // Its own report of the change is not a client's.
        self.track.own_changed = false;
        Ok(())
    }

    /// Makes this connection's session state equal to `want`.
    pub async fn sync_to(&mut self, want: &SessionVars) -> Result<(), BackendError> {
        if self.track.insert_id_set {
            // Another session's SET insert_id must not give this one's
            // next INSERT its id.
            self.exec_internal("SET SESSION insert_id = 0").await?;
            self.track.insert_id_set = false;
        }
        if want.schema.is_some() && want.schema != self.vars.schema {
            let db = want.schema.as_deref().unwrap_or_default();
            let mut p = vec![com::INIT_DB];
            p.extend_from_slice(db.as_bytes());
            match self.command_internal(&p, "COM_INIT_DB").await {
                Err(BackendError::Server {
                    addr,
                    code,
                    sql_state,
                    message,
                    ..
                }) => {
                    return Err(BackendError::Database {
                        addr,
                        db: db.to_string(),
                        code,
                        sql_state,
                        message,
                    })
                }
                r => r?,
            }
            self.vars.schema = want.schema.clone();
        }
        if let Some(set) = want.set_statement(&self.vars, &self.baseline) {
            self.exec_internal(&set).await?;
            self.vars.vars = want.vars.clone();
            self.vars.client_side.clear();
        }
        if want.multi_statements != self.vars.multi_statements {
            let opt: u16 = if want.multi_statements { 0 } else { 1 };
            let mut p = vec![com::SET_OPTION];
            p.extend_from_slice(&opt.to_le_bytes());
            self.command_internal(&p, "COM_SET_OPTION").await?;
            self.vars.multi_statements = want.multi_statements;
        }
        Ok(())
    }

    /// One non-blocking read: an idle connection has nothing to say, so
    /// end-of-stream (the server closed it, or killed it) or unexpected
    /// bytes (an error the server sent before closing) mean it is not usable.
    pub fn looks_alive(&mut self) -> bool {
        if !self.unread().is_empty() {
            return false;
        }
        let mut b = [0u8; 64];
        match self.stream.try_read_plain(&mut b) {
            Some(Err(e)) => e.kind() == std::io::ErrorKind::WouldBlock,
            Some(Ok(_)) => false,
            None => true,
        }
    }

    pub async fn ping(&mut self) -> Result<(), BackendError> {
        self.command_internal(&[com::PING], "COM_PING").await
    }

    /// COM_RESET_CONNECTION, then the baseline again: the connection is as
    /// good as new, without a new login.
    pub async fn reset(&mut self) -> Result<(), BackendError> {
        self.command_internal(&[com::RESET_CONNECTION], "COM_RESET_CONNECTION")
            .await?;
        self.forget_statements();
        self.setup().await
    }

    /// Applies one OK packet's session-state block to this connection's
    /// tracked state. Returns true if anything the client set changed.
    pub fn apply_session_state(&mut self, block: &[u8]) -> bool {
        apply_session_state(&mut self.vars, &mut self.track, block)
    }

    /// MariaDB reports the character set variables of `SET NAMES x COLLATE
    /// y` but not collation_connection, so after a character set change
    /// sextant reads it itself.
    pub async fn refresh_collation(&mut self) -> Result<(), BackendError> {
        self.track.charset_changed = false;
        let rows = self.query_internal("SELECT @@collation_connection").await?;
        if let Some(Some(c)) = rows.first().and_then(|r| r.first()) {
            self.vars.set_var(b"collation_connection", c.as_bytes());
        }
        Ok(())
    }

    /// Reads one whole packet (reassembling frames of 16 MiB and more).
    pub async fn read_packet(&mut self) -> Result<(u8, Vec<u8>), BackendError> {
        let mut payload = Vec::new();
        let mut first_seq = None;
        loop {
            while self.unread().len() < HEADER_LEN {
                self.fill().await?;
            }
            let h = parse_header(self.unread()).ok_or_else(|| BackendError::Closed {
                addr: self.addr.to_string(),
            })?;
            while self.unread().len() < HEADER_LEN + h.len {
                self.fill().await?;
            }
            payload.extend_from_slice(&self.unread()[HEADER_LEN..HEADER_LEN + h.len]);
            self.consume(HEADER_LEN + h.len);
            first_seq.get_or_insert(h.seq);
            if h.len < MAX_PAYLOAD {
                return Ok((h.seq, payload));
            }
        }
    }

    /// What was read from the server and not yet consumed.
    #[inline]
    pub fn unread(&self) -> &[u8] {
        &self.rbuf[self.rpos..]
    }

    /// `n` more bytes of [`BackendConn::unread`] are done with.
    #[inline]
    pub fn consume(&mut self, n: usize) {
        self.rpos += n;
        if self.rpos >= self.rbuf.len() {
            self.rbuf.clear();
            self.rpos = 0;
        }
    }

    /// At least `min_free` bytes of room after what is buffered: what was
    /// consumed is dropped first (moving only what is unread), then the
    /// buffer grows to at least `grow_to` if that is still too little.
    pub fn make_room(&mut self, min_free: usize, grow_to: usize) {
        if self.rbuf.capacity() - self.rbuf.len() >= min_free {
            return;
        }
        if self.rpos > 0 {
            self.rbuf.drain(..self.rpos);
            self.rpos = 0;
            if self.rbuf.capacity() - self.rbuf.len() >= min_free {
                return;
            }
        }
        let want = grow_to.max(self.rbuf.len() + min_free);
        self.rbuf.reserve(want - self.rbuf.len());
    }

    /// Reads more bytes from the server into `rbuf`.
    pub async fn fill(&mut self) -> Result<usize, BackendError> {
        self.make_room(4096, 16 * 1024);
        let n = self
            .stream
            .read_buf(&mut self.rbuf)
            .await
            .map_err(io_err(&self.addr))?;
        if n == 0 {
            return Err(BackendError::Closed {
                addr: self.addr.to_string(),
            });
        }
        Ok(n)
    }

    pub async fn send(&mut self, seq: u8, payload: &[u8]) -> Result<(), BackendError> {
        let mut out = Vec::with_capacity(payload.len() + 8);
        write_packet(&mut out, seq, payload);
        self.write_raw(&out).await
    }

    pub async fn write_raw(&mut self, bytes: &[u8]) -> Result<(), BackendError> {
        self.stream.send(bytes).await.map_err(io_err(&self.addr))
    }

    pub fn in_transaction(&self) -> bool {
        self.status & status::IN_TRANS != 0
    }
}

/// Applies one OK packet's session-state block to tracked state (a free
/// function so the relay can call it while it borrows the read buffer).
/// Returns true if anything the client set changed.
pub fn apply_session_state(vars: &mut SessionVars, track: &mut TrackFlags, block: &[u8]) -> bool {
    let mut changed = false;
    let mut explained = false;
    let mut opaque = false;
    for ch in session_changes(block) {
        match ch {
            Ok(StateChange::SystemVariable { name, value }) => {
                explained = true;
                tracing::trace!(
                    "server reports {} = {}",
                    String::from_utf8_lossy(name),
                    String::from_utf8_lossy(value)
                );
                if name.eq_ignore_ascii_case(b"character_set_connection") {
                    track.charset_changed = true;
                }
                if name.eq_ignore_ascii_case(b"insert_id") && value != b"0" {
                    track.insert_id_set = true;
                    track.insert_id_reported = true;
                }
                if name.eq_ignore_ascii_case(b"last_insert_id")
                    || name.eq_ignore_ascii_case(b"identity")
                {
                    track.last_insert_id_set =
                        std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
                }
                if crate::state::OWN_VARIABLES
                    .iter()
                    .any(|v| v.as_bytes().eq_ignore_ascii_case(name))
                {
                    track.own_changed = true;
                }
                if name.eq_ignore_ascii_case(b"last_gtid") && !value.is_empty() {
                    track.last_gtid = std::str::from_utf8(value)
                        .ok()
                        .and_then(crate::gtid::Gtid::parse);
                }
                if crate::state::CLIENT_SIDE
                    .iter()
                    .any(|v| v.as_bytes().eq_ignore_ascii_case(name))
                {
                    track.client_side_changed = true;
                }
                changed |= vars.set_var(name, value);
            }
            Ok(StateChange::Schema(s)) => {
                explained = true;
                let s: Box<str> = String::from_utf8_lossy(s).into();
                if vars.schema.as_ref() != Some(&s) {
                    vars.schema = Some(s);
                    changed = true;
                }
            }
            Ok(StateChange::StateChanged(true)) => opaque = true,
            // MySQL's session_track_gtids = OWN_GTID: the GTID(s) this
            // session's transaction got ("uuid:n", or a set if several).
            Ok(StateChange::Gtids(g)) => {
                explained = true;
                if let Some(g) = std::str::from_utf8(g)
                    .ok()
                    .and_then(|s| s.split(',').next_back())
                    .and_then(crate::gtid::Gtid::parse_mysql)
                {
                    track.last_gtid = Some(g);
                }
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    // The server flags every change; one it did not detail is state sextant
    // cannot see or replay (a user variable, a temporary table, ...).
    if opaque && !explained {
        track.opaque = true;
    }
    changed
}
