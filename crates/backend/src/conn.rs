//! One connection to a MySQL/MariaDB server: login, session-tracking setup,
//! and the small request/response exchanges sextant makes on its own behalf.
//! Client traffic is relayed by the proxy through [`BackendConn::stream`] and
//! [`BackendConn::rbuf`] without passing through here.

use crate::error::BackendError;
use crate::state::{SessionVars, Tracking};
use sextant_net::stream::Stream;
use sextant_protocol::auth;
use sextant_protocol::codec::{parse_header, write_packet, Reader, HEADER_LEN, MAX_PAYLOAD};
use sextant_protocol::consts::{
    cap, com, mariadb_cap, status, CACHING_SHA2_PASSWORD, CLEAR_PASSWORD, ED25519, NATIVE_PASSWORD,
    SHA256_PASSWORD,
};
use sextant_protocol::handshake::{parse_auth_switch, HandshakeResponse, InitialHandshake};
use sextant_protocol::packets::{parse_err, parse_ok, session_changes, StateChange};
use sextant_protocol::tracker::{Expect, Packet, Tracker};
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
}

/// How to reach a server over TLS.
#[derive(Clone, Debug)]
pub struct TlsTarget {
    pub config: Arc<rustls::ClientConfig>,
    pub name: rustls::pki_types::ServerName<'static>,
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

/// What a server statement's meaning depends on besides its text.
#[derive(Debug, Clone, PartialEq, Eq)]
struct StmtContext {
    schema: Option<Box<str>>,
    sql_mode: Option<Box<str>>,
    charset: Option<Box<str>>,
}

impl StmtContext {
    fn of(vars: &SessionVars) -> StmtContext {
        StmtContext {
            schema: vars.schema.clone(),
            sql_mode: vars.vars.get("sql_mode").cloned(),
            charset: vars.vars.get("character_set_client").cloned(),
        }
    }

    /// Whether a statement prepared under this context means the same
    /// under `vars` (compared in place: no allocation per execute).
    fn matches(&self, vars: &SessionVars) -> bool {
        self.schema == vars.schema
            && self.sql_mode.as_deref() == vars.vars.get("sql_mode").map(|v| &**v)
            && self.charset.as_deref() == vars.vars.get("character_set_client").map(|v| &**v)
    }
}

pub struct BackendConn {
    /// The server's statement-flush epoch this connection has caught up
    /// with (see `Server::flush_statements`).
    pub stmt_epoch: u32,
    pub stream: Stream,
    /// Bytes read from the server and not yet consumed.
    pub rbuf: Vec<u8>,
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
    /// The thread whose runtime the socket is registered with
    /// (`thread::thread_slot`): its readiness events wake that thread.
    pub home: usize,
    /// Server statements by SQL text, each with the session state it was
    /// prepared under: the server resolved its tables in that database and
    /// parsed it with that sql_mode and character set.
    stmts: HashMap<Arc<[u8]>, (ServerStmt, StmtContext)>,
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
        let ms = p.timeout.as_millis() as u64;
        tokio::time::timeout(p.timeout, Self::connect_inner(p))
            .await
            .map_err(|_| BackendError::ConnectTimeout {
                addr: p.addr.to_string(),
                ms,
            })?
    }

    async fn connect_inner(p: &ConnectParams<'_>) -> Result<BackendConn, BackendError> {
        let stream = sextant_net::stream::connect(p.addr)
            .await
            .map_err(|source| BackendError::Connect {
                addr: p.addr.to_string(),
                source,
            })?;
        let mut c = BackendConn {
            stream,
            rbuf: Vec::with_capacity(8 * 1024),
            addr: p.addr.into(),
            user: p.user.into(),
            flavor: p.flavor,
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
            home: crate::thread::thread_slot(),
            stmt_epoch: 0,
            stmts: HashMap::new(),
            stmt_clock: 0,
            max_prepared: 256,
        };
        c.login(p).await?;
        c.min_wait_timeout = p.min_wait_timeout;
        c.setup().await?;
        Ok(c)
    }

    async fn login(&mut self, p: &ConnectParams<'_>) -> Result<(), BackendError> {
        let (seq, greeting) = self.read_packet().await?;
        if greeting.first() == Some(&0xff) {
            return Err(self.server_error("the connection", &greeting));
        }
        let hs = InitialHandshake::parse(&greeting).map_err(|source| BackendError::Protocol {
            addr: self.addr.to_string(),
            source,
        })?;
        self.server_version = hs.server_version.clone();
        self.connection_id = hs.connection_id;
        let plugin = match hs.auth_plugin.as_str() {
            CACHING_SHA2_PASSWORD => CACHING_SHA2_PASSWORD,
            _ => NATIVE_PASSWORD,
        };
        let mut caps = (BASE_CAPS | p.flavor.caps) & hs.capabilities;
        // A MariaDB server reads extended capabilities from a client that
        // leaves out CLIENT_MYSQL.
        let mariadb = p.flavor.mariadb & hs.mariadb_caps;
        if mariadb != 0 {
            caps &= !cap::LONG_PASSWORD;
        }
        let mut seq = seq.wrapping_add(1);
        if let Some(tls) = p.tls {
            if hs.capabilities & cap::SSL == 0 {
                return Err(BackendError::Tls {
                    addr: self.addr.to_string(),
                    reason: "the server does not offer TLS".into(),
                });
            }
            caps |= cap::SSL;
            let mut req = Vec::with_capacity(32);
            req.extend_from_slice(&caps.to_le_bytes());
            req.extend_from_slice(&(1u32 << 30).to_le_bytes());
            req.push(p.flavor.charset);
            req.extend_from_slice(&[0; 19]);
            req.extend_from_slice(&mariadb.to_le_bytes());
            self.send(seq, &req).await?;
            seq = seq.wrapping_add(1);
            let plain = std::mem::replace(&mut self.stream, Stream::Detached);
            self.stream = plain
                .connect_tls(tls.config.clone(), tls.name.clone())
                .await
                .map_err(|e| BackendError::Tls {
                    addr: self.addr.to_string(),
                    reason: e.to_string(),
                })?;
        }
        let resp = HandshakeResponse {
            zstd_level: 0,
            capabilities: caps,
            max_packet: 1 << 30,
            charset: p.flavor.charset,
            user: p.user.to_string(),
            auth_response: scramble(plugin, p.password.as_bytes(), &hs.nonce),
            database: None,
            auth_plugin: Some(plugin.to_string()),
            attrs: vec![
                ("_client_name".into(), "sextant".into()),
                ("program_name".into(), "sextant".into()),
            ],
            mariadb_caps: mariadb,
        };
        self.negotiated = caps;
        let mut payload = Vec::with_capacity(128);
        resp.encode(&mut payload);
        self.send(seq, &payload).await?;
        let mut plugin = plugin.to_string();
        let mut nonce = hs.nonce;
        loop {
            let (s, pkt) = self.read_packet().await?;
            seq = s.wrapping_add(1);
            match pkt.first() {
                Some(0x00) => return Ok(()),
                Some(0xff) => {
                    let e = parse_err(&pkt).map_err(|source| BackendError::Protocol {
                        addr: self.addr.to_string(),
                        source,
                    })?;
                    return Err(BackendError::Auth {
                        addr: self.addr.to_string(),
                        user: p.user.to_string(),
                        code: e.code,
                        message: String::from_utf8_lossy(e.message).into_owned(),
                    });
                }
                Some(0xfe) => {
                    let (new_plugin, data) =
                        parse_auth_switch(&pkt).map_err(|source| BackendError::Protocol {
                            addr: self.addr.to_string(),
                            source,
                        })?;
                    // The data as sent: a 32-byte nonce may end in a zero
                    // byte that is part of it.
                    let raw = pkt.get(new_plugin.len() + 2..).unwrap_or_default();
                    let answer = match new_plugin.as_str() {
                        NATIVE_PASSWORD | CACHING_SHA2_PASSWORD => {
                            scramble(&new_plugin, p.password.as_bytes(), &data)
                        }
                        ED25519 => {
                            auth::ed25519_sign(p.password.as_bytes(), &raw[..raw.len().min(32)])
                        }
                        SHA256_PASSWORD if self.stream.is_tls() || p.password.is_empty() => {
                            nul_terminated(p.password)
                        }
                        // Without TLS: the server's public key, then the
                        // password encrypted with it.
                        SHA256_PASSWORD => vec![0x01],
                        CLEAR_PASSWORD if self.stream.is_tls() => nul_terminated(p.password),
                        CLEAR_PASSWORD => {
                            return Err(BackendError::Auth {
                                addr: self.addr.to_string(),
                                user: p.user.to_string(),
                                code: 2059,
                                message: "the server asks for the password in clear \
                                          (mysql_clear_password), which sextant sends only \
                                          over TLS: set tls for this server"
                                    .into(),
                            })
                        }
                        _ => {
                            return Err(BackendError::AuthPlugin {
                                addr: self.addr.to_string(),
                                plugin: new_plugin,
                            })
                        }
                    };
                    plugin = new_plugin;
                    nonce = data;
                    self.send(seq, &answer).await?;
                }
                Some(0x01) if plugin == SHA256_PASSWORD => {
                    let ct = self.rsa_password(&pkt[1..], p.password, &nonce)?;
                    self.send(seq, &ct).await?;
                }
                Some(0x01) if plugin == CACHING_SHA2_PASSWORD => match pkt.get(1) {
                    // Fast authentication succeeded; the OK follows.
                    Some(3) => {}
                    // Full authentication: the server has no cached entry
                    // for the account and wants the password itself.
                    Some(4) => {
                        if self.stream.is_tls() {
                            let mut pw = p.password.as_bytes().to_vec();
                            pw.push(0);
                            self.send(seq, &pw).await?;
                        } else {
                            self.send(seq, &[0x02]).await?;
                            let (s2, key) = self.read_packet().await?;
                            if key.first() != Some(&0x01) {
                                return Err(self.server_error("the RSA public key request", &key));
                            }
                            let ct = self.rsa_password(&key[1..], p.password, &nonce)?;
                            self.send(s2.wrapping_add(1), &ct).await?;
                        }
                    }
                    _ => {
                        return Err(BackendError::Protocol {
                            addr: self.addr.to_string(),
                            source: sextant_protocol::ProtoError::Malformed(
                                "caching_sha2 auth data",
                            ),
                        })
                    }
                },
                _ => {
                    return Err(BackendError::Protocol {
                        addr: self.addr.to_string(),
                        source: sextant_protocol::ProtoError::Malformed("login reply"),
                    })
                }
            }
        }
    }

    /// The password encrypted with the server's RSA public key (`pem`), as
    /// sha256_password and caching_sha2_password's full authentication
    /// send it without TLS.
    fn rsa_password(
        &self,
        pem: &[u8],
        password: &str,
        nonce: &[u8],
    ) -> Result<Vec<u8>, BackendError> {
        sextant_net::tls::sha2_rsa_encrypt(pem, password.as_bytes(), nonce).map_err(|e| {
            BackendError::Tls {
                addr: self.addr.to_string(),
                reason: e.to_string(),
            }
        })
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

    /// The server statement for `sql`, if one was prepared here under the
    /// connection's current database, sql_mode and character set.
    pub fn stmt(&self, sql: &[u8]) -> Option<ServerStmt> {
        self.stmts
            .get(sql)
            .filter(|(_, ctx)| ctx.matches(&self.vars))
            .map(|(s, _)| *s)
    }

    /// Every server statement of this connection: Some if usable under
    /// the connection's current state, None if prepared under another
    /// database or sql_mode (a pipe's book of what it can execute).
    pub fn stmts_by_sql(&self) -> impl Iterator<Item = (&Arc<[u8]>, Option<ServerStmt>)> + '_ {
        self.stmts
            .iter()
            .map(|(sql, (s, ctx))| (sql, ctx.matches(&self.vars).then_some(*s)))
    }

    /// How many more server statements this connection may have before
    /// one must be closed.
    pub fn stmt_room(&self) -> usize {
        self.max_prepared.max(1).saturating_sub(self.stmts.len())
    }

    pub fn stmt_used(&mut self, sql: &[u8], types_sent: bool) {
        self.stmt_clock += 1;
        let clock = self.stmt_clock;
        if let Some((s, _)) = self.stmts.get_mut(sql) {
            s.last_used = clock;
            s.types_sent |= types_sent;
        }
    }

    /// Prepares `sql` on this connection (if it is not already), closing the
    /// least recently used statement when the per-connection bound is hit.
    pub async fn ensure_prepared(&mut self, sql: &Arc<[u8]>) -> Result<ServerStmt, BackendError> {
        if let Some(s) = self.stmt(sql) {
            return Ok(s);
        }
        Box::pin(self.prepare_here(sql)).await
    }

    async fn prepare_here(&mut self, sql: &Arc<[u8]>) -> Result<ServerStmt, BackendError> {
        // One prepared under another database or sql_mode is replaced.
        if let Some((old, _)) = self.stmts.remove(&**sql) {
            self.close_server_stmt(old.id).await?;
        }
        // The bound may have been lowered (the server's limit became
        // known): close as many as it takes.
        while self.stmts.len() >= self.max_prepared.max(1) {
            let Some(victim) = self
                .stmts
                .iter()
                .min_by_key(|(_, (s, _))| s.last_used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((s, _)) = self.stmts.remove(&victim) {
                self.close_server_stmt(s.id).await?;
            }
        }
        let mut p = Vec::with_capacity(sql.len() + 1);
        p.push(com::STMT_PREPARE);
        p.extend_from_slice(sql);
        self.send(0, &p).await?;
        self.read_prepared(sql).await
    }

    /// Reads the answer to a COM_STMT_PREPARE of `sql` sent on this
    /// connection (by `prepare_here`, or through a pipe) and records the
    /// server statement.
    pub async fn read_prepared(&mut self, sql: &Arc<[u8]>) -> Result<ServerStmt, BackendError> {
        let mut t = Tracker::new(Expect::Prepare, self.flavor.deprecate_eof())
            .with_metadata_flag(self.negotiated & cap::OPTIONAL_RESULTSET_METADATA != 0);
        let mut result = None;
        let mut err = None;
        while !t.is_done() {
            let (_, pkt) = self.read_packet().await?;
            match t
                .feed(pkt.len(), &pkt)
                .map_err(|source| BackendError::Protocol {
                    addr: self.addr.to_string(),
                    source,
                })? {
                Packet::PrepareOk {
                    stmt_id,
                    columns,
                    params,
                } => result = Some((stmt_id, columns, params)),
                Packet::Err => err = Some(pkt),
                _ => {}
            }
        }
        if let Some(e) = err {
            return Err(self.server_error("preparing a statement", &e));
        }
        let (id, columns, params) = result.ok_or(BackendError::Protocol {
            addr: self.addr.to_string(),
            source: sextant_protocol::ProtoError::Malformed("prepare response"),
        })?;
        self.stmt_clock += 1;
        let s = ServerStmt {
            id,
            params,
            columns,
            types_sent: false,
            last_used: self.stmt_clock,
        };
        self.stmts
            .insert(sql.clone(), (s, StmtContext::of(&self.vars)));
        Ok(s)
    }

    /// Records a statement the client prepared through this connection,
    /// closing one it replaces and the least recently used one beyond the
    /// per-connection bound (servers cap prepared statements too).
    pub async fn adopt_stmt(
        &mut self,
        sql: Arc<[u8]>,
        id: u32,
        params: u16,
        columns: u16,
    ) -> Result<(), BackendError> {
        self.stmt_clock += 1;
        let new = ServerStmt {
            id,
            params,
            columns,
            types_sent: false,
            last_used: self.stmt_clock,
        };
        if let Some((old, _)) = self.stmts.insert(sql, (new, StmtContext::of(&self.vars))) {
            if old.id != id {
                self.close_server_stmt(old.id).await?;
            }
        }
        while self.stmts.len() > self.max_prepared.max(1) {
            let Some(victim) = self
                .stmts
                .iter()
                .min_by_key(|(_, (s, _))| s.last_used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((s, _)) = self.stmts.remove(&victim) {
                self.close_server_stmt(s.id).await?;
            }
        }
        Ok(())
    }

    async fn close_server_stmt(&mut self, id: u32) -> Result<(), BackendError> {
        let mut p = vec![com::STMT_CLOSE];
        p.extend_from_slice(&id.to_le_bytes());
        // COM_STMT_CLOSE has no answer.
        self.send(0, &p).await
    }

    /// Closes every server statement this connection keeps (the server
    /// refused a prepare with 1461: its max_prepared_stmt_count was
    /// reached, in part by statements sextant keeps for reuse). They are
    /// prepared again when a session needs them.
    pub async fn close_statements(&mut self) -> Result<usize, BackendError> {
        let ids: Vec<u32> = self.stmts.values().map(|(s, _)| s.id).collect();
        self.stmts.clear();
        for id in &ids {
            self.close_server_stmt(*id).await?;
        }
        Ok(ids.len())
    }

    /// How many server statements this connection keeps.
    pub fn statements_kept(&self) -> usize {
        self.stmts.len()
    }

    /// Forgets every server statement (after COM_RESET_CONNECTION).
    pub fn forget_statements(&mut self) {
        self.stmts.clear();
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
        if !self.rbuf.is_empty() {
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
            while self.rbuf.len() < HEADER_LEN {
                self.fill().await?;
            }
            let h = parse_header(&self.rbuf).ok_or(BackendError::Closed {
                addr: self.addr.to_string(),
            })?;
            while self.rbuf.len() < HEADER_LEN + h.len {
                self.fill().await?;
            }
            payload.extend_from_slice(&self.rbuf[HEADER_LEN..HEADER_LEN + h.len]);
            self.rbuf.drain(..HEADER_LEN + h.len);
            first_seq.get_or_insert(h.seq);
            if h.len < MAX_PAYLOAD {
                return Ok((h.seq, payload));
            }
        }
    }

    /// Reads more bytes from the server into `rbuf`.
    pub async fn fill(&mut self) -> Result<usize, BackendError> {
        if self.rbuf.capacity() - self.rbuf.len() < 4096 {
            self.rbuf.reserve(16 * 1024);
        }
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

    pub async fn exec_internal(&mut self, sql: &str) -> Result<(), BackendError> {
        self.send_internal(sql).await?;
        self.read_internal(sql).await
    }

    /// Sends a statement of sextant's own whose answer is one OK or ERR,
    /// without reading it: several may be sent before their answers are
    /// read ([`BackendConn::read_internal`], in order), one round trip
    /// for all.
    pub async fn send_internal(&mut self, sql: &str) -> Result<(), BackendError> {
        let mut p = Vec::with_capacity(sql.len() + 3);
        p.push(com::QUERY);
        if self.negotiated & cap::QUERY_ATTRIBUTES != 0 {
            // No attributes: a count of 0, one parameter set.
            p.extend_from_slice(&[0, 1]);
        }
        p.extend_from_slice(sql.as_bytes());
        self.send(0, &p).await
    }

    /// Sends a command whose answer is a single OK/EOF/ERR and applies the
    /// session state it reports.
    async fn command_internal(&mut self, payload: &[u8], what: &str) -> Result<(), BackendError> {
        self.send(0, payload).await?;
        self.read_internal(what).await
    }

    /// Reads the answer to a statement [`BackendConn::send_internal`] sent
    /// (`what`, for its error), applying the session state it reports.
    pub async fn read_internal(&mut self, what: &str) -> Result<(), BackendError> {
        let (_, pkt) = self.read_packet().await?;
        match pkt.first() {
            Some(0x00) => {
                let ok = parse_ok(&pkt, true).map_err(|source| BackendError::Protocol {
                    addr: self.addr.to_string(),
                    source,
                })?;
                self.status = ok.status;
                let block = ok.session_state.to_vec();
                self.apply_session_state(&block);
                Ok(())
            }
            Some(0xfe) => Ok(()),
            _ => Err(self.server_error(what, &pkt)),
        }
    }

    /// Runs a small query of sextant's own and returns its rows as text.
    pub async fn query_internal(
        &mut self,
        sql: &str,
    ) -> Result<Vec<Vec<Option<String>>>, BackendError> {
        Ok(self.query_named(sql).await?.1)
    }

    /// Like [`BackendConn::query_internal`], with the column names.
    #[allow(clippy::type_complexity)]
    pub async fn query_named(
        &mut self,
        sql: &str,
    ) -> Result<(Vec<String>, Vec<Vec<Option<String>>>), BackendError> {
        let mut out = Vec::with_capacity(sql.len() + 8);
        self.internal_query_packet(sql, &mut out);
        self.write_raw(&out).await?;
        self.read_named(sql).await
    }

    /// Appends a COM_QUERY packet of sextant's own statement `sql` to
    /// `out`, to be sent with other packets in one write (its answer is
    /// then read with [`BackendConn::read_named`] in its turn).
    pub fn internal_query_packet(&self, sql: &str, out: &mut Vec<u8>) {
        let mut p = Vec::with_capacity(sql.len() + 3);
        p.push(com::QUERY);
        if self.negotiated & cap::QUERY_ATTRIBUTES != 0 {
            // No attributes: a count of 0, one parameter set.
            p.extend_from_slice(&[0, 1]);
        }
        p.extend_from_slice(sql.as_bytes());
        write_packet(out, 0, &p);
    }

    /// Reads the answer to a query of sextant's own (`what`, for its
    /// error): its column names and rows as text.
    #[allow(clippy::type_complexity)]
    pub async fn read_named(
        &mut self,
        what: &str,
    ) -> Result<(Vec<String>, Vec<Vec<Option<String>>>), BackendError> {
        let sql = what;
        let mut t = Tracker::new(Expect::Query, self.flavor.deprecate_eof())
            .with_metadata_flag(self.negotiated & cap::OPTIONAL_RESULTSET_METADATA != 0);
        let mut rows = Vec::new();
        let mut names = Vec::new();
        let mut cols = 0u64;
        let mut err = None;
        while !t.is_done() {
            let (_, pkt) = self.read_packet().await?;
            let in_rows = t.reading_rows();
            let kind = t
                .feed(pkt.len(), &pkt)
                .map_err(|source| BackendError::Protocol {
                    addr: self.addr.to_string(),
                    source,
                })?;
            match kind {
                Packet::ColumnCount(n) => {
                    names.clear();
                    rows.clear();
                    cols = n;
                }
                Packet::Data if !in_rows => {
                    // Column definition: catalog, schema, table, org_table,
                    // name, ...
                    let mut r = Reader::new(&pkt);
                    let mut name = String::new();
                    for i in 0..5 {
                        if let Ok(v) = r.lenenc_bytes("column definition") {
                            if i == 4 {
                                name = String::from_utf8_lossy(v).into_owned();
                            }
                        }
                    }
                    names.push(name);
                }
                Packet::Data => {
                    let mut r = Reader::new(&pkt);
                    let mut row = Vec::new();
                    for _ in 0..cols {
                        if r.remaining() > 0 && pkt[pkt.len() - r.remaining()] == 0xfb {
                            r.u8("null").map_err(|source| BackendError::Protocol {
                                addr: self.addr.to_string(),
                                source,
                            })?;
                            row.push(None);
                        } else {
                            let v = r.lenenc_bytes("cell").map_err(|source| {
                                BackendError::Protocol {
                                    addr: self.addr.to_string(),
                                    source,
                                }
                            })?;
                            row.push(Some(String::from_utf8_lossy(v).into_owned()));
                        }
                    }
                    rows.push(row);
                }
                Packet::Err => err = Some(pkt),
                _ => {}
            }
        }
        if let Some(e) = err {
            return Err(self.server_error(sql, &e));
        }
        Ok((names, rows))
    }

    /// Reads and drops a whole answer to a command sent earlier (a read
    /// whose result may not reach the client), leaving the connection at
    /// the start of the next answer.
    pub async fn skip_answer(&mut self, expect: Expect) -> Result<(), BackendError> {
        let mut t = Tracker::new(expect, self.flavor.deprecate_eof())
            .with_metadata_flag(self.negotiated & cap::OPTIONAL_RESULTSET_METADATA != 0);
        while !t.is_done() {
            let (_, pkt) = self.read_packet().await?;
            t.feed(pkt.len(), &pkt)
                .map_err(|source| BackendError::Protocol {
                    addr: self.addr.to_string(),
                    source,
                })?;
            if t.awaiting_infile() {
                // A read does not ask for a file; this connection's
                // exchange is not one sextant can finish.
                return Err(BackendError::Protocol {
                    addr: self.addr.to_string(),
                    source: sextant_protocol::ProtoError::Truncated(
                        "LOCAL INFILE in a skipped answer",
                    ),
                });
            }
        }
        self.status = t.status();
        Ok(())
    }

    fn server_error(&self, what: &str, pkt: &[u8]) -> BackendError {
        match parse_err(pkt) {
            Ok(e) => BackendError::Server {
                addr: self.addr.to_string(),
                what: what.to_string(),
                code: e.code,
                sql_state: String::from_utf8_lossy(&e.sql_state).into_owned(),
                message: String::from_utf8_lossy(e.message).into_owned(),
            },
            Err(source) => BackendError::Protocol {
                addr: self.addr.to_string(),
                source,
            },
        }
    }

    pub fn in_transaction(&self) -> bool {
        self.status & status::IN_TRANS != 0
    }
}

fn nul_terminated(password: &str) -> Vec<u8> {
    let mut v = password.as_bytes().to_vec();
    v.push(0);
    v
}

fn scramble(plugin: &str, password: &[u8], nonce: &[u8]) -> Vec<u8> {
    if plugin == CACHING_SHA2_PASSWORD {
        auth::sha2_scramble(password, nonce)
    } else {
        auth::native_scramble(password, nonce)
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
