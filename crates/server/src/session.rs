//! One client session: its command loop, where each statement goes, and
//! which server connection it borrows.
//!
//! A session owns no server connection. It borrows one for a statement (or
//! a transaction, or while state that cannot move lives on it), keeps it for
//! `hold_ms` after the statement so back-to-back statements do not churn the
//! pool, then gives it back. Before a borrowed connection runs anything, its
//! session state (database, variables, character set) is made equal to the
//! client's.

use crate::client::Client;
use crate::errors::SessionError;
use crate::frontend::{self, Login};
use crate::relay::{relay, RelayError, RelayOpts, RelayResult};
use crate::shared::{Shared, UserEntry};
use sextant_backend::gtid::Gtid;
use sextant_backend::{BackendConn, Flavor, Role, Server, SessionVars};
use sextant_config::{Consistency, ConsistencyScope};
use sextant_protocol::codec::{write_packet, Reader};
use sextant_protocol::consts::{cap, com, cursor, status};
use sextant_protocol::packets::{write_eof, write_ok, write_simple_ok, OkPacket};
use sextant_protocol::tracker::Expect;
use sextant_routing::{decide, pick, Cursor, SessionFacts, Target};
use sextant_sql::{classify, Flags, Kind};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

thread_local! {
    /// Sessions of this worker thread in the middle of a query.
    static BUSY: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Counts a session as busy on its thread while alive.
struct Busy;

impl Busy {
    fn enter() -> Busy {
        BUSY.with(|b| b.set(b.get() + 1));
        Busy
    }

    /// Whether another session of this thread is mid-query too. Alone, a
    /// read gains nothing from a pipe (nothing to send it with) and loses
    /// its held connection, which keeps one server warm: measured at one
    /// sysbench thread, pipes cost 25% of the QPS.
    fn has_company() -> bool {
        BUSY.with(|b| b.get()) > 1
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        BUSY.with(|b| b.set(b.get() - 1));
    }
}

/// Reasons a session must keep its server connection.
mod pin {
    /// User variables, temporary tables, named locks, SQL PREPARE, HANDLER,
    /// or anything else the server said changed and sextant cannot replay.
    pub const OPAQUE: u32 = 1;
    pub const LOCK_TABLES: u32 = 1 << 1;
    pub const CURSOR: u32 = 1 << 2;
    pub const LONG_DATA: u32 = 1 << 3;
    /// SET TRANSACTION applies to the next transaction of this connection.
    pub const NEXT_TRX: u32 = 1 << 4;
    /// SQL_CALC_FOUND_ROWS: FOUND_ROWS() must run on the same connection.
    pub const FOUND_ROWS: u32 = 1 << 5;
}

struct ClientStmt {
    sql: Arc<[u8]>,
    params: u16,
    /// Where the statement goes when the session is free (hints, locking
    /// and read-only-ness decided once, at prepare).
    target: Target,
    /// Its `/*# consistency=... */` hint.
    consistency: Option<Consistency>,
    /// Parameter types from the last execute that sent them; replayed to a
    /// server connection that has not seen them yet.
    types: Vec<u8>,
}

struct Attached {
    server: Arc<Server>,
    conn: BackendConn,
}

pub struct Session {
    shared: Arc<Shared>,
    client: Client,
    user: Arc<UserEntry>,
    flavor: Flavor,
    session_track: bool,
    deprecate_eof: bool,
    nonce: [u8; 20],
    vars: SessionVars,
    backend: Option<Attached>,
    hold_until: Option<Instant>,
    hold: Duration,
    /// Until then, reads may use the held primary connection: they follow a
    /// write of this session, which replicas may not have yet.
    primary_reads_until: Option<Instant>,
    pins: u32,
    stmts: HashMap<u32, ClientStmt>,
    next_stmt_id: u32,
    cursor: Cursor,
    /// xorshift state for weighted random picks (per session: no lock).
    rng: u64,
    payload: Vec<u8>,
    scratch: Vec<u8>,
    /// Status flags for answers sextant makes itself.
    status: u16,
    /// The last id this session's writes generated, and the server
    /// connection (address, id) where LAST_INSERT_ID() returns it.
    last_insert_id: u64,
    last_insert_conn: Option<(Arc<str>, u32)>,
    /// Set while a statement may be retried elsewhere: a plain read that
    /// fails before any byte of its answer reached the client is not
    /// reported but retried (a read never fails while the primary is up).
    retry_armed: bool,
    /// Set by a failure that was not reported because retry_armed was set.
    retry_needed: bool,
    /// Set while a write outside a transaction may move to another server
    /// if its server answers only "read-only" (it ran nothing): the primary
    /// changed and the monitor has not seen it yet.
    retry_write_armed: bool,
    /// The GTID of this session's last write.
    last_write: Option<Gtid>,
    /// While a statement is being placed: the write its read must see
    /// (read_your_writes), if any.
    need: Option<Gtid>,
    /// While a statement is being placed: it must not read older data than
    /// the session has seen (monotonic).
    mono: bool,
    /// monotonic: the server of the session's last read, and when (sextant's
    /// clock, microseconds) that read ended. Whatever it saw, the primary
    /// had committed by then; a server that has applied a later heartbeat
    /// has it too.
    sticky: Option<Arc<Server>>,
    seen_us: i64,
}

/// What a read must see, by its consistency mode.
#[derive(Clone, Copy, Default)]
struct ReadReq {
    strong: bool,
    need: Option<Gtid>,
    monotonic: bool,
}

/// monotonic: `s` may serve a read of a session that last read from
/// `sticky` at `seen_us` if it is that server, the primary, or has applied
/// a heartbeat written after then.
fn mono_ok(seen_us: i64, sticky: Option<&Arc<Server>>, s: &Arc<Server>) -> bool {
    seen_us == 0
        || s.role() == Role::Primary
        || sticky.is_some_and(|t| Arc::ptr_eq(t, s))
        || s.heartbeat_applied_us.load(Ordering::Relaxed) >= seen_us
}

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

enum Flow {
    Continue,
    Quit,
}

impl Session {
    /// Logs the client in and serves it until it leaves.
    pub async fn run(shared: Arc<Shared>, mut client: Client, conn_id: u32) {
        let timeout = Duration::from_millis(shared.config.proxy.handshake_timeout_ms);
        let login = match tokio::time::timeout(
            timeout,
            Box::pin(frontend::login(
                &mut client,
                &*shared,
                &shared.auth,
                &shared.server_version,
                conn_id,
            )),
        )
        .await
        {
            Ok(Ok(l)) => l,
            Ok(Err(e @ (SessionError::ClientClosed | SessionError::ClientIo(_)))) => {
                tracing::debug!(peer = %client.peer, error = %e, "client left during login");
                return;
            }
            Ok(Err(e)) => {
                tracing::info!(peer = %client.peer, error = %e, "login failed");
                shared
                    .counters
                    .client_errors
                    .fetch_add(1, Ordering::Relaxed);
                // The error follows the last packet the client sent (after
                // an SSLRequest or an auth switch that is not 1).
                let seq = client.last_seq.wrapping_add(1);
                let _ = client.send_error(seq, &e).await;
                return;
            }
            Err(_) => {
                let e = SessionError::Handshake(format!(
                    "no complete login within {} ms",
                    timeout.as_millis()
                ));
                tracing::info!(peer = %client.peer, "{e}");
                let seq = client.last_seq.wrapping_add(1);
                let _ = client.send_error(seq, &e).await;
                return;
            }
        };
        let Some(user) = shared.users.get(&login.user).cloned() else {
            return;
        };
        let mut s = Session::new(shared, client, user, &login);
        if let Some(db) = login.database.clone() {
            s.vars.schema = Some(db.into());
            // Check the database now, as a server would at login.
            if let Err(e) = s.attach(Target::Primary).await {
                s.detach_discard();
                let _ = s.client.send_error(login.seq, &e).await;
                return;
            }
            s.release();
        }
        frontend::send_ok(&mut s.client, login.seq);
        if s.client.flush().await.is_err() {
            return;
        }
        tracing::debug!(peer = %s.client.peer, user = %s.user.name, "client logged in");
        s.serve().await;
        s.close();
    }

    fn new(shared: Arc<Shared>, client: Client, user: Arc<UserEntry>, login: &Login) -> Self {
        let flavor = Flavor::new(login.caps, login.charset);
        let hold = Duration::from_millis(shared.config.routing.hold_ms);
        Session {
            vars: SessionVars {
                multi_statements: login.caps & cap::MULTI_STATEMENTS != 0,
                ..Default::default()
            },
            session_track: login.caps & cap::SESSION_TRACK != 0,
            deprecate_eof: login.caps & cap::DEPRECATE_EOF != 0,
            nonce: login.nonce,
            flavor,
            shared,
            client,
            user,
            backend: None,
            hold_until: None,
            hold,
            primary_reads_until: None,
            pins: 0,
            stmts: HashMap::new(),
            next_stmt_id: 1,
            cursor: Cursor {
                rr: rand::random::<u32>() as u64,
                percent_acc: 0,
            },
            rng: rand::random::<u64>() | 1,
            payload: Vec::with_capacity(256),
            scratch: Vec::new(),
            status: status::AUTOCOMMIT,
            last_insert_id: 0,
            last_insert_conn: None,
            retry_armed: false,
            retry_needed: false,
            retry_write_armed: false,
            last_write: None,
            need: None,
            mono: false,
            sticky: None,
            seen_us: 0,
        }
    }

    async fn serve(&mut self) {
        loop {
            if let Some(deadline) = self.hold_until {
                if self.client.rbuf.is_empty() {
                    // fill() is cancel-safe (read_buf), for TLS too: bytes
                    // are either in rbuf or still in the stream.
                    tokio::select! {
                        r = self.client.fill() => {
                            if r.is_err() {
                                return;
                            }
                        }
                        _ = tokio::time::sleep_until(deadline) => {
                            self.release();
                            continue;
                        }
                    }
                }
            }
            let mut payload = std::mem::take(&mut self.payload);
            let r = self.client.read_packet(&mut payload).await;
            let flow = match r {
                Ok(0) => self.command(&payload).await,
                Ok(seq) => Err(SessionError::OutOfOrder {
                    expected: 0,
                    got: seq,
                }),
                Err(e) => Err(e),
            };
            self.payload = payload;
            if let Err(SessionError::PacketTooLarge { .. }) = &flow {
                // Read what the client is still sending, so that closing
                // does not reset the connection before it reads the error.
                self.client.drain_for(Duration::from_millis(500)).await;
            }
            match flow {
                Ok(Flow::Continue) => {}
                Ok(Flow::Quit) => return,
                Err(e) => {
                    match &e {
                        SessionError::ClientClosed | SessionError::ClientIo(_) => {
                            tracing::debug!(peer = %self.client.peer, "client gone: {e}");
                        }
                        _ => {
                            tracing::info!(peer = %self.client.peer, user = %self.user.name, "closing session: {e}");
                            self.shared
                                .counters
                                .client_errors
                                .fetch_add(1, Ordering::Relaxed);
                            let _ = self.client.send_error(1, &e).await;
                        }
                    }
                    return;
                }
            }
        }
    }

    /// Handles one command. Errors returned here end the session; errors
    /// the client can live with are sent as error packets and the session
    /// goes on.
    async fn command(&mut self, p: &[u8]) -> Result<Flow, SessionError> {
        let Some(&cmd) = p.first() else {
            return Err(SessionError::Malformed(
                sextant_protocol::ProtoError::Truncated("command"),
            ));
        };
        self.shared.counters.queries.fetch_add(1, Ordering::Relaxed);
        match cmd {
            com::QUIT => return Ok(Flow::Quit),
            com::PING => {
                write_simple_ok(&mut self.client.out, 1, self.status);
                self.client.flush().await?;
            }
            com::QUERY => self.query(p).await?,
            com::INIT_DB | com::FIELD_LIST | com::STATISTICS => {
                let expect = match cmd {
                    com::FIELD_LIST => Expect::FieldList,
                    _ => Expect::Single,
                };
                self.forward(Target::Primary, p, expect, None).await?;
                self.after_statement();
            }
            com::SET_OPTION => {
                let mut r = Reader::new(p);
                r.u8("command").map_err(SessionError::Malformed)?;
                match r.u16("option").map_err(SessionError::Malformed)? {
                    0 => self.vars.multi_statements = true,
                    1 => self.vars.multi_statements = false,
                    _ => {
                        return self
                            .reply_error(SessionError::UnknownCommand(cmd))
                            .await
                            .map(|_| Flow::Continue)
                    }
                }
                self.local_eof().await?;
            }
            com::RESET_CONNECTION => {
                Box::pin(self.reset_session()).await;
                write_simple_ok(&mut self.client.out, 1, self.status);
                self.client.flush().await?;
            }
            com::CHANGE_USER => Box::pin(self.change_user(p)).await?,
            com::STMT_PREPARE => self.prepare(p).await?,
            com::STMT_EXECUTE => self.execute(p).await?,
            com::STMT_SEND_LONG_DATA => self.long_data(p).await?,
            com::STMT_CLOSE => {
                let id = stmt_id(p)?;
                self.stmts.remove(&id);
            }
            com::STMT_RESET => self.stmt_reset(p).await?,
            com::STMT_FETCH => self.fetch(p).await?,
            other => {
                self.reply_error(SessionError::UnknownCommand(other))
                    .await?
            }
        }
        Ok(Flow::Continue)
    }

    async fn query(&mut self, p: &[u8]) -> Result<(), SessionError> {
        let _busy = Busy::enter();
        let c = classify(&p[1..]);
        let mut d = decide(&c, self.facts(), &self.user.policy, &mut self.cursor);
        let hint = c.hints.get("consistency").and_then(Consistency::from_hint);
        if d.target == Target::Replica {
            let r = self.read_requirement(hint);
            if r.strong {
                d.target = Target::Primary;
            }
            self.need = r.need;
            self.mono = r.monotonic;
        } else if c.read_only {
            // A read the rules sent to the primary still counts as seen.
            self.mono = self.read_requirement(hint).monotonic;
        }
        if c.flags.contains(Flags::LAST_INSERT_ID) && self.last_insert_id != 0 {
            if let Err(e) = self.attach(d.target).await {
                return self.reply_error(e).await;
            }
            Box::pin(self.restore_last_insert_id()).await;
        }
        tracing::trace!(to = ?d.target, rule = d.rule.name(), "COM_QUERY {:?}", String::from_utf8_lossy(&p[1..p.len().min(200)]));
        let facts = self.facts();
        let retryable = d.target == Target::Replica && !facts.pinned && !facts.in_transaction;
        let write_retryable = d.target == Target::Primary
            && self.user.group.follow_primary
            && !facts.pinned
            && !facts.in_transaction;
        // Reads that may run twice (retryable) and leave nothing behind on
        // the connection may share one with other sessions' reads.
        let pipelinable = self.user.group.members[0].settings.pipeline_depth > 0
            && retryable
            && c.read_only
            && c.flags.0 == 0
            && p.len() < sextant_backend::pipe::MAX_REQUEST
            && Busy::has_company();
        let mut res = None;
        for attempt in 0..3 {
            self.retry_armed = retryable && attempt < 2;
            self.retry_write_armed = write_retryable && attempt < 2;
            self.retry_needed = false;
            res = match pipelinable && attempt == 0 {
                true => match self.forward_pipelined(p).await? {
                    Some(r) => r,
                    None => self.forward(d.target, p, Expect::Query, None).await?,
                },
                false => self.forward(d.target, p, Expect::Query, None).await?,
            };
            self.retry_armed = false;
            self.retry_write_armed = false;
            if !self.retry_needed {
                break;
            }
            tracing::info!(
                attempt,
                "read failed before any result reached the client; retrying on another server"
            );
        }
        self.need = None;
        if std::mem::take(&mut self.mono) {
            self.note_seen();
        }
        let Some(res) = res else { return Ok(()) };
        self.note_insert_id(&res);
        if c.flags.contains(Flags::FOUND_ROWS) {
            self.pins |= pin::FOUND_ROWS;
        } else {
            self.pins &= !pin::FOUND_ROWS;
        }
        if d.target == Target::Primary && !c.read_only {
            self.primary_reads_until = Some(Instant::now() + self.hold);
        }
        if c.pins_session() {
            self.pins |= pin::OPAQUE;
        }
        if c.flags.contains(Flags::LOCK_TABLES) {
            self.pins |= pin::LOCK_TABLES;
        }
        if c.flags.contains(Flags::UNLOCK_TABLES) {
            self.pins &= !pin::LOCK_TABLES;
        }
        if c.flags.contains(Flags::NEXT_TRX) && !res.error {
            self.pins |= pin::NEXT_TRX;
        } else if c.kind != Kind::Set && res.status & status::IN_TRANS == 0 {
            self.pins &= !pin::NEXT_TRX;
        }
        self.after_statement();
        Ok(())
    }

    /// For a read headed to a replica: must it go to the primary (strong),
    /// which write must the replica have applied (read_your_writes), must
    /// it not go back in time (monotonic)?
    fn read_requirement(&self, hint: Option<Consistency>) -> ReadReq {
        let p = &self.user.policy;
        match hint.unwrap_or(p.consistency) {
            Consistency::Eventual => ReadReq::default(),
            Consistency::Strong => ReadReq {
                strong: true,
                ..Default::default()
            },
            Consistency::Monotonic => ReadReq {
                monotonic: true,
                ..Default::default()
            },
            Consistency::ReadYourWrites => ReadReq {
                need: match p.consistency_scope {
                    ConsistencyScope::Session => self.last_write,
                    ConsistencyScope::User => {
                        let packed = self.user.latest_write.load(Ordering::Acquire);
                        if packed == 0 {
                            self.last_write
                        } else {
                            Some(Gtid {
                                domain: sextant_backend::gtid::domain(packed) as u32,
                                server: self.user.latest_write_server.load(Ordering::Relaxed),
                                seq: sextant_backend::gtid::seq(packed),
                                uuid: (self.user.latest_write_uuid[0].load(Ordering::Relaxed)
                                    as u128)
                                    << 64
                                    | self.user.latest_write_uuid[1].load(Ordering::Relaxed)
                                        as u128,
                            })
                        }
                    }
                },
                ..Default::default()
            },
        }
    }

    /// monotonic: after a read, remember where and when.
    fn note_seen(&mut self) {
        self.sticky = self.backend.as_ref().map(|a| a.server.clone());
        self.seen_us = now_us();
    }

    /// Records the GTID of a write the server just reported.
    fn note_write(&mut self, g: Gtid) {
        self.last_write = Some(g);
        let packed = g.pack();
        let u = &self.user;
        // Keep the newest per user: concurrent sessions may report out of
        // order.
        let _ = u
            .latest_write
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                let newer = old == 0
                    || sextant_backend::gtid::domain(old) != sextant_backend::gtid::domain(packed)
                    || sextant_backend::gtid::seq(packed) > sextant_backend::gtid::seq(old);
                newer.then_some(packed)
            });
        u.latest_write_server.store(g.server, Ordering::Relaxed);
        // (Only the wait statement of causal_wait_ms uses the uuid; a torn
        // pair makes that wait time out and the read go to the primary.)
        u.latest_write_uuid[0].store((g.uuid >> 64) as u64, Ordering::Relaxed);
        u.latest_write_uuid[1].store(g.uuid as u64, Ordering::Relaxed);
    }

    /// Remembers the id a write generated, and on which connection
    /// LAST_INSERT_ID() returns it.
    fn note_insert_id(&mut self, res: &RelayResult) {
        if res.last_insert_id != 0 {
            self.last_insert_id = res.last_insert_id;
            self.last_insert_conn = self
                .backend
                .as_ref()
                .map(|a| (a.server.addr.clone(), a.conn.connection_id));
        }
    }

    /// LAST_INSERT_ID() is per server connection: if this statement runs
    /// on another connection than the write that generated the id, make
    /// that connection return it too.
    async fn restore_last_insert_id(&mut self) {
        let Some(a) = self.backend.as_mut() else {
            return;
        };
        let here = (a.server.addr.clone(), a.conn.connection_id);
        if self.last_insert_conn.as_ref() == Some(&here) {
            return;
        }
        let sql = format!("DO LAST_INSERT_ID({})", self.last_insert_id);
        if a.conn.exec_internal(&sql).await.is_ok() {
            self.last_insert_conn = Some(here);
        }
    }

    fn facts(&self) -> SessionFacts {
        SessionFacts {
            pinned: self.pinned(),
            // With autocommit off every statement is part of a transaction
            // even before the server reports one open: the server's
            // AUTOCOMMIT status flag says so.
            in_transaction: self.in_transaction() || self.status & status::AUTOCOMMIT == 0,
        }
    }

    fn in_transaction(&self) -> bool {
        self.backend
            .as_ref()
            .is_some_and(|a| a.conn.in_transaction())
    }

    fn pinned(&self) -> bool {
        self.pins != 0
            || self
                .backend
                .as_ref()
                .is_some_and(|a| a.conn.in_transaction() || a.conn.track.opaque)
    }

    /// Sends `payload` as a command to a server of `target` and relays the
    /// answer. Returns None when the statement could not be run (the client
    /// has been told why).
    async fn forward(
        &mut self,
        target: Target,
        payload: &[u8],
        expect: Expect,
        client_stmt_id: Option<u32>,
    ) -> Result<Option<RelayResult>, SessionError> {
        if let Err(e) = self.attach(target).await {
            self.reply_error(e).await?;
            return Ok(None);
        }
        self.scratch.clear();
        write_packet(&mut self.scratch, 0, payload);
        self.send_and_relay(expect, client_stmt_id).await
    }

    /// A plain read on a pipelined connection shared with other sessions'
    /// reads (pipe.rs). None: no pipe could take it (the caller sends it
    /// the usual way); Some(None): it did not run to the end and was
    /// either reported or marked for a retry, as with `forward`.
    async fn forward_pipelined(
        &mut self,
        payload: &[u8],
    ) -> Result<Option<Option<RelayResult>>, SessionError> {
        if self.backend.is_some() {
            // Right after a write, reads stay on the held primary
            // connection (read_your_writes without a replica wait).
            if self.pinned() || self.primary_reads_until.is_some_and(|t| Instant::now() < t) {
                return Ok(None);
            }
            self.release();
        }
        let Some(server) = self.pick_reader() else {
            return Ok(None);
        };
        let Some(pipe) = Box::pin(server.pipe(
            &self.user.backend_user,
            &self.user.backend_password,
            self.flavor,
            &self.vars,
        ))
        .await
        else {
            return Ok(None);
        };
        self.scratch.clear();
        write_packet(&mut self.scratch, 0, payload);
        let Some(turn) = pipe.submit(&self.scratch).await else {
            return Ok(None);
        };
        let Ok(mut conn) = turn.await else {
            // The connection failed before this answer began: the read
            // may or may not have run, and runs again elsewhere.
            pipe.abandon();
            self.retry_needed = true;
            return Ok(Some(None));
        };
        let opts = RelayOpts {
            session_track: self.session_track,
            deprecate_eof: self.deprecate_eof,
            client_stmt_id: None,
            hold_read_only_error: false,
        };
        let timed = self.user.policy.balance == sextant_config::Balance::LeastLatency;
        let relayed = relay_counted(
            &mut self.client,
            &mut conn,
            &server,
            timed,
            Expect::Query,
            &opts,
        )
        .await;
        match relayed {
            Ok(res) => {
                self.status = res.status & !status::SESSION_STATE_CHANGED;
                // A read leaves a connection as it found it; if this one
                // did not, the connection is no longer the pipe's state.
                let clean = !res.connection_ending
                    && !res.vars_changed
                    && !conn.track.opaque
                    && !conn.track.charset_changed
                    && conn.track.last_gtid.is_none()
                    && !conn.in_transaction();
                if !clean {
                    tracing::debug!(server = %server.addr, "a pipelined read changed its connection's state: closing the pipe");
                    server.close_pipe(&pipe, Some(conn));
                } else if let Some(conn) = pipe.pass(conn) {
                    server.close_pipe(&pipe, Some(conn));
                }
                Ok(Some(Some(res)))
            }
            Err(e @ RelayError::Server { .. }) => {
                server.close_pipe(&pipe, Some(conn));
                self.server_failed(&server, e).await.map(Some)
            }
            Err(client) => {
                // The answer was cut off mid-way: the connection's position
                // in the stream is lost for the sessions behind.
                server.close_pipe(&pipe, Some(conn));
                Err(client_failed(client))
            }
        }
    }

    /// Sends what is in `scratch` to the attached connection and relays the
    /// answer.
    async fn send_and_relay(
        &mut self,
        expect: Expect,
        client_stmt_id: Option<u32>,
    ) -> Result<Option<RelayResult>, SessionError> {
        let Some(a) = self.backend.as_mut() else {
            return Ok(None);
        };
        if let Err(e) = a.conn.write_raw(&self.scratch).await {
            let addr = a.server.addr.to_string();
            a.server.mark_unreachable(&e.to_string());
            self.detach_discard();
            if self.retry_armed {
                self.retry_needed = true;
                return Ok(None);
            }
            self.reply_error(SessionError::BackendLost {
                addr,
                reason: e.to_string(),
            })
            .await?;
            return Ok(None);
        }
        let opts = RelayOpts {
            session_track: self.session_track,
            deprecate_eof: self.deprecate_eof,
            client_stmt_id,
            hold_read_only_error: self.retry_write_armed,
        };
        let timed = self.user.policy.balance == sextant_config::Balance::LeastLatency;
        let relayed = relay_counted(
            &mut self.client,
            &mut a.conn,
            &a.server,
            timed,
            expect,
            &opts,
        )
        .await;
        match relayed {
            Ok(res) if res.read_only_rejected => {
                // The server became read-only (a switchover the monitor has
                // not seen yet). Nothing ran: the write waits for the new
                // primary and runs there.
                tracing::info!(server = %a.server.addr, "server answered read-only to a write: following the switchover now");
                a.server
                    .writable
                    .store(false, std::sync::atomic::Ordering::Relaxed);
                self.user.group.follow();
                self.release();
                self.retry_needed = true;
                Ok(None)
            }
            Ok(res) => {
                self.status = res.status & !status::SESSION_STATE_CHANGED;
                if res.connection_ending {
                    tracing::info!(server = %a.server.addr, "the server ended a connection");
                    self.detach_discard();
                    self.pins = 0;
                    return Ok(Some(res));
                }
                if a.conn.track.charset_changed
                    && Box::pin(a.conn.refresh_collation()).await.is_err()
                {
                    self.detach_discard();
                    return Ok(Some(res));
                }
                if res.vars_changed {
                    self.vars.clone_from(&a.conn.vars);
                }
                let wrote = a.conn.track.last_gtid.take();
                if a.conn.track.opaque {
                    self.pins |= pin::OPAQUE;
                }
                if let Some(g) = wrote {
                    self.note_write(g);
                }
                Ok(Some(res))
            }
            Err(e @ RelayError::Server { .. }) => {
                let server = a.server.clone();
                // The connection's state is unknown: it is closed, and the
                // session's server-side state (transaction, pins) is gone.
                self.detach_discard();
                self.pins = 0;
                self.server_failed(&server, e).await
            }
            Err(client) => {
                self.detach_discard();
                Err(client_failed(client))
            }
        }
    }

    /// After a server connection failed during a statement (and was
    /// closed): a read nothing of which reached the client is retried;
    /// otherwise the client is told, or, if its stream stopped inside a
    /// packet, the session ends.
    async fn server_failed(
        &mut self,
        server: &Server,
        e: RelayError,
    ) -> Result<Option<RelayResult>, SessionError> {
        let RelayError::Server {
            reason,
            started,
            mid_packet,
            next_seq,
        } = e
        else {
            return Err(client_failed(e));
        };
        let addr = server.addr.to_string();
        tracing::warn!(server = %addr, "server connection failed during a statement: {reason}");
        if !started {
            server.mark_unreachable(&reason);
        }
        if !started && self.retry_armed {
            self.retry_needed = true;
            return Ok(None);
        }
        let e = SessionError::BackendLost { addr, reason };
        if mid_packet {
            return Err(e);
        }
        let seq = if started { next_seq } else { 1 };
        self.client.send_error(seq, &e).await?;
        Ok(None)
    }

    /// Makes sure a server connection suitable for `target` is attached and
    /// carries the session's state.
    async fn attach(&mut self, target: Target) -> Result<(), SessionError> {
        if let Some(a) = &self.backend {
            let fits = self.pinned()
                || match target {
                    Target::Primary => {
                        a.server.role() == Role::Primary
                            && (self.user.group.writer_count() <= 1
                                || self.user.group.is_writer_for(
                                    &a.server,
                                    self.vars.schema.as_deref().unwrap_or("").as_bytes(),
                                ))
                    }
                    // Right after a write, reads stay on the primary
                    // connection: the session reads its own writes.
                    Target::Replica => {
                        let fresh = self.need.is_none_or(|g| {
                            a.server.role() == Role::Primary || a.server.has_applied(g.pack())
                        }) && (!self.mono
                            || mono_ok(self.seen_us, self.sticky.as_ref(), &a.server));
                        (self.user.group.takes_reads(&a.server) && fresh)
                            || self.primary_reads_until.is_some_and(|t| Instant::now() < t)
                    }
                };
            if fits {
                self.hold_until = None;
                return Ok(());
            }
            self.release();
        }
        let group = self.user.group.clone();
        let server = match target {
            Target::Primary => self.primary_of(&group).await?,
            Target::Replica => match (self.pick_reader(), self.need) {
                (Some(s), _) => s,
                (None, Some(g)) if self.user.policy.causal_wait_ms > 0 => {
                    if Box::pin(self.wait_on_replica(&group, g)).await {
                        return Ok(());
                    }
                    self.primary_of(&group).await?
                }
                (None, _) => self.primary_of(&group).await?,
            },
        };
        let conn = match server
            .acquire(
                &self.user.backend_user,
                &self.user.backend_password,
                self.flavor,
            )
            .await
        {
            Ok(c) => c,
            Err(e) if target == Target::Replica && server.role() == Role::Replica => {
                // A read never fails while the primary is up.
                tracing::info!(server = %server.addr, "replica unavailable, reading from the primary: {e}");
                let p = self.primary_of(&group).await?;
                let c = p
                    .acquire(
                        &self.user.backend_user,
                        &self.user.backend_password,
                        self.flavor,
                    )
                    .await?;
                self.backend = Some(Attached { server: p, conn: c });
                return self.sync_attached().await;
            }
            Err(e) => return Err(e.into()),
        };
        tracing::trace!(server = %server.addr, "attached");
        self.backend = Some(Attached { server, conn });
        self.sync_attached().await
    }

    /// A server for a read by the balancing policy, among those that have
    /// what the read must see (read_your_writes, monotonic).
    fn pick_reader(&mut self) -> Option<Arc<Server>> {
        let group = &self.user.group;
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let need = self.need.map(|g| g.pack());
        let (mono, seen_us) = (self.mono, self.seen_us);
        let sticky = if mono { self.sticky.as_ref() } else { None };
        let (weights, n) = read_weights(group);
        let i = pick(
            self.user.policy.balance,
            &weights[..n],
            |i| {
                let s = &group.members[i];
                s.load().filter(|_| {
                    need.is_none_or(|g| s.role() == Role::Primary || s.has_applied(g))
                        && (!mono || mono_ok(seen_us, sticky, s))
                })
            },
            &mut self.cursor,
            self.rng,
        )?;
        Some(group.members[i].clone())
    }

    /// read_your_writes with causal_wait_ms: no replica is known to have
    /// the write yet, so wait on one (MASTER_GTID_WAIT) for up to
    /// causal_wait_ms. True when it caught up and is now attached.
    async fn wait_on_replica(&mut self, group: &Arc<sextant_backend::Group>, g: Gtid) -> bool {
        let (weights, n) = read_weights(group);
        let Some(i) = pick(
            self.user.policy.balance,
            &weights[..n],
            |i| {
                group.members[i]
                    .load()
                    .filter(|_| group.members[i].role() == Role::Replica)
            },
            &mut self.cursor,
            self.rng,
        ) else {
            return false;
        };
        let server = group.members[i].clone();
        let Ok(mut conn) = server
            .acquire(
                &self.user.backend_user,
                &self.user.backend_password,
                self.flavor,
            )
            .await
        else {
            return false;
        };
        let secs = self.user.policy.causal_wait_ms as f64 / 1000.0;
        let sql = g.wait_sql(secs);
        let caught_up = matches!(
            conn.query_internal(&sql).await.as_deref(),
            Ok([row]) if row.first().and_then(|v| v.as_deref()) == Some("0")
        );
        if caught_up {
            self.backend = Some(Attached { server, conn });
            return self.sync_attached().await.is_ok();
        }
        server.release(conn);
        false
    }

    /// The group's primary, waiting up to its primary_wait_ms when none is
    /// known (switchover in progress, split brain).
    async fn primary_of(
        &self,
        group: &Arc<sextant_backend::Group>,
    ) -> Result<Arc<Server>, SessionError> {
        let schema = self.vars.schema.as_deref().unwrap_or("").as_bytes();
        if let Some(p) = group.writer_for(schema) {
            return Ok(p.clone());
        }
        let deadline = Instant::now() + group.primary_wait;
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
            if let Some(p) = group.writer_for(schema) {
                return Ok(p.clone());
            }
        }
        Err(SessionError::NoPrimary {
            group: group.name.to_string(),
            waited_ms: group.primary_wait.as_millis() as u64,
        })
    }

    async fn sync_attached(&mut self) -> Result<(), SessionError> {
        let Some(a) = self.backend.as_mut() else {
            return Ok(());
        };
        if a.conn.vars != self.vars {
            if let Err(e) = Box::pin(a.conn.sync_to(&self.vars)).await {
                self.detach_discard();
                return Err(e.into());
            }
        }
        Ok(())
    }

    /// After a statement: keep the connection if the session is pinned,
    /// hold it briefly otherwise.
    fn after_statement(&mut self) {
        if self.backend.is_none() || self.pinned() {
            self.hold_until = None;
            return;
        }
        let waiters = self
            .backend
            .as_ref()
            .is_some_and(|a| a.server.has_waiters());
        if self.hold.is_zero() || waiters {
            self.release();
        } else {
            self.hold_until = Some(Instant::now() + self.hold);
        }
    }

    fn release(&mut self) {
        self.hold_until = None;
        if let Some(a) = self.backend.take() {
            a.server.release(a.conn);
        }
    }

    fn detach_discard(&mut self) {
        self.hold_until = None;
        if let Some(a) = self.backend.take() {
            a.server.discard(a.conn);
        }
    }

    fn close(&mut self) {
        // A connection with a transaction or opaque state is closed by
        // release(); a clean one goes back to the pool.
        if self.pins != 0 {
            self.detach_discard();
        } else {
            self.release();
        }
    }

    async fn reply_error(&mut self, e: SessionError) -> Result<(), SessionError> {
        tracing::debug!(peer = %self.client.peer, "error for client: {e}");
        self.client.send_error(1, &e).await
    }

    async fn local_eof(&mut self) -> Result<(), SessionError> {
        if self.deprecate_eof {
            let ok = OkPacket {
                header: 0xfe,
                status: self.status,
                ..Default::default()
            };
            write_ok(&mut self.client.out, 1, &ok, false);
        } else {
            write_eof(&mut self.client.out, 1, self.status);
        }
        self.client.flush().await
    }

    /// COM_RESET_CONNECTION: the session starts over, keeping its user and
    /// database. A connection carrying state that cannot be undone by
    /// replaying variables is reset on the server too.
    async fn reset_session(&mut self) {
        if self.pinned() {
            if let Some(a) = self.backend.as_mut() {
                if a.conn.reset().await.is_err() {
                    self.detach_discard();
                }
            }
        }
        self.release();
        self.pins = 0;
        self.stmts.clear();
        self.last_insert_id = 0;
        self.last_insert_conn = None;
        let schema = self.vars.schema.take();
        self.vars = SessionVars {
            schema,
            multi_statements: self.flavor.caps & cap::MULTI_STATEMENTS != 0,
            ..Default::default()
        };
        self.status = status::AUTOCOMMIT;
    }

    async fn change_user(&mut self, p: &[u8]) -> Result<(), SessionError> {
        let cu = frontend::parse_change_user(
            p,
            self.flavor.caps | cap::SECURE_CONNECTION | cap::PLUGIN_AUTH,
        )?;
        let user = self.shared.users.get(&cu.user).cloned();
        let ok = user
            .as_ref()
            .is_some_and(|u| frontend::check_change_user(&cu, &u.password, &self.nonce));
        let Some(user) = user.filter(|_| ok) else {
            let e = SessionError::AccessDenied {
                user: cu.user.clone(),
                host: frontend::client_host(&self.client),
                using_password: !cu.auth_response.is_empty(),
            };
            self.client.send_error(1, &e).await?;
            return Err(SessionError::ClientClosed);
        };
        Box::pin(self.reset_session()).await;
        self.user = user;
        if let Some(cs) = cu.charset {
            self.flavor.charset = cs;
        }
        self.vars.schema = cu.database.map(|d| d.into());
        let mut seq = 1;
        if cu.plugin.as_deref() == Some(sextant_protocol::consts::CACHING_SHA2_PASSWORD) {
            write_packet(&mut self.client.out, seq, &[0x01, 0x03]);
            seq += 1;
        }
        if self.vars.schema.is_some() {
            if let Err(e) = self.attach(Target::Primary).await {
                self.client.out.clear();
                self.vars.schema = None;
                return self.client.send_error(1, &e).await;
            }
            self.after_statement();
        }
        write_simple_ok(&mut self.client.out, seq, self.status);
        self.client.flush().await
    }

    async fn prepare(&mut self, p: &[u8]) -> Result<(), SessionError> {
        let sql: Arc<[u8]> = Arc::from(&p[1..]);
        let c = classify(&sql);
        let consistency = c.hints.get("consistency").and_then(Consistency::from_hint);
        let target = decide(
            &c,
            SessionFacts::default(),
            &self.user.policy,
            &mut Cursor::default(),
        )
        .target;
        let mut d = decide(&c, self.facts(), &self.user.policy, &mut self.cursor);
        // Preparing needs the tables the statement names: on a replica,
        // the same consistency rules as for running it.
        if d.target == Target::Replica {
            let r = self.read_requirement(consistency);
            if r.strong {
                d.target = Target::Primary;
            }
            self.need = r.need;
        }
        let id = self.next_stmt_id;
        let res = self.forward(d.target, p, Expect::Prepare, Some(id)).await;
        self.need = None;
        let Some(res) = res? else {
            return Ok(());
        };
        if let Some((server_id, columns, params)) = res.prepared {
            self.next_stmt_id = self.next_stmt_id.wrapping_add(1).max(1);
            if let Some(a) = self.backend.as_mut() {
                if a.conn
                    .adopt_stmt(sql.clone(), server_id, params, columns)
                    .await
                    .is_err()
                {
                    self.detach_discard();
                }
            }
            self.stmts.insert(
                id,
                ClientStmt {
                    sql,
                    params,
                    target,
                    consistency,
                    types: Vec::new(),
                },
            );
        }
        self.after_statement();
        Ok(())
    }

    /// Attaches a connection for statement `id` and makes sure the
    /// statement is prepared there; returns its server id.
    async fn attach_for_stmt(
        &mut self,
        id: u32,
        command: &'static str,
    ) -> Result<Option<(u32, bool)>, SessionError> {
        let Some(st) = self.stmts.get(&id) else {
            self.reply_error(SessionError::UnknownStatement { id, command })
                .await?;
            return Ok(None);
        };
        let mut target = if self.pinned() || self.in_transaction() {
            Target::Primary
        } else {
            st.target
        };
        let sql = st.sql.clone();
        if target == Target::Replica {
            let r = self.read_requirement(st.consistency);
            if r.strong {
                target = Target::Primary;
            }
            self.need = r.need;
            self.mono = r.monotonic;
        }
        if let Err(e) = self.attach(target).await {
            self.reply_error(e).await?;
            return Ok(None);
        }
        let Some(a) = self.backend.as_mut() else {
            return Ok(None);
        };
        match a.conn.ensure_prepared(&sql).await {
            Ok(s) => Ok(Some((s.id, s.types_sent))),
            Err(e) => {
                // A server error (the statement no longer prepares) leaves
                // the connection usable; anything else does not.
                if !matches!(e, sextant_backend::BackendError::Server { .. }) {
                    self.detach_discard();
                }
                self.reply_error(e.into()).await?;
                Ok(None)
            }
        }
    }

    async fn execute(&mut self, p: &[u8]) -> Result<(), SessionError> {
        let id = stmt_id(p)?;
        // A plain read is retried on another server if its server fails
        // before any byte of the answer reached the client.
        let facts = self.facts();
        let retryable = !facts.pinned
            && !facts.in_transaction
            && self
                .stmts
                .get(&id)
                .is_some_and(|st| st.target == Target::Replica);
        let write_retryable = !facts.pinned
            && !facts.in_transaction
            && self.user.group.follow_primary
            && self
                .stmts
                .get(&id)
                .is_some_and(|st| st.target == Target::Primary);
        for attempt in 0..3 {
            self.retry_armed = retryable && attempt < 2;
            self.retry_write_armed = write_retryable && attempt < 2;
            self.retry_needed = false;
            let r = self.execute_once(id, p).await;
            self.retry_armed = false;
            self.retry_write_armed = false;
            if r.is_err() || !self.retry_needed {
                self.need = None;
                if std::mem::take(&mut self.mono) {
                    self.note_seen();
                }
                return r;
            }
            tracing::info!(
                attempt,
                "execute failed before any result reached the client; retrying on another server"
            );
        }
        Ok(())
    }

    async fn execute_once(&mut self, id: u32, p: &[u8]) -> Result<(), SessionError> {
        let Some((server_id, types_sent)) = self.attach_for_stmt(id, "mysqld_stmt_execute").await?
        else {
            return Ok(());
        };
        let Some(st) = self.stmts.get_mut(&id) else {
            return Ok(());
        };
        let flags = *p.get(5).ok_or(SessionError::Malformed(
            sextant_protocol::ProtoError::Truncated("execute flags"),
        ))?;
        // Layout: cmd, id(4), flags(1), iterations(4), null bitmap,
        // new-params-bound(1), types(2n), values. The packet is rebuilt in
        // the session's scratch buffer with the server's statement id, and
        // with the parameter types if this server statement never got them.
        let n = st.params as usize;
        let bitmap_end = 10 + n.div_ceil(8);
        let mut inject_types = false;
        let mut sent_types = false;
        if n > 0 && p.len() > bitmap_end {
            let bound = p[bitmap_end];
            if bound == 1 && p.len() >= bitmap_end + 1 + 2 * n {
                st.types.clear();
                st.types
                    .extend_from_slice(&p[bitmap_end + 1..bitmap_end + 1 + 2 * n]);
                sent_types = true;
            } else if bound == 0 && !types_sent && st.types.len() == 2 * n {
                inject_types = true;
                sent_types = true;
            }
        }
        let len = p.len() + if inject_types { 2 * n } else { 0 };
        self.scratch.clear();
        if len < sextant_protocol::codec::MAX_PAYLOAD {
            let at = sextant_protocol::codec::begin_packet(&mut self.scratch);
            if inject_types {
                self.scratch.extend_from_slice(&p[..bitmap_end]);
                self.scratch.push(1);
                self.scratch.extend_from_slice(&st.types);
                self.scratch.extend_from_slice(&p[bitmap_end + 1..]);
            } else {
                self.scratch.extend_from_slice(p);
            }
            self.scratch[at + 5..at + 9].copy_from_slice(&server_id.to_le_bytes());
            sextant_protocol::codec::finish_packet(&mut self.scratch, at, 0);
        } else {
            // 16 MiB and more: rare enough to build the payload separately.
            let mut q = Vec::with_capacity(len);
            if inject_types {
                q.extend_from_slice(&p[..bitmap_end]);
                q.push(1);
                q.extend_from_slice(&st.types);
                q.extend_from_slice(&p[bitmap_end + 1..]);
            } else {
                q.extend_from_slice(p);
            }
            q[1..5].copy_from_slice(&server_id.to_le_bytes());
            write_packet(&mut self.scratch, 0, &q);
        }
        let sql = st.sql.clone();
        if st.target == Target::Primary {
            self.primary_reads_until = Some(Instant::now() + self.hold);
        }
        if let Some(a) = self.backend.as_mut() {
            a.conn.stmt_used(&sql, sent_types);
        }
        let res = self.send_and_relay(Expect::Execute, None).await?;
        self.pins &= !pin::LONG_DATA;
        if let Some(res) = res {
            self.note_insert_id(&res);
            if flags & cursor::READ_ONLY != 0 && res.status & status::CURSOR_EXISTS != 0 {
                self.pins |= pin::CURSOR;
            }
        }
        self.after_statement();
        Ok(())
    }

    async fn long_data(&mut self, p: &[u8]) -> Result<(), SessionError> {
        let id = stmt_id(p)?;
        // No response is sent for this command, errors included; the
        // execute that follows reports them.
        if !self.stmts.contains_key(&id) {
            return Ok(());
        }
        let target = Target::Primary;
        if self.attach(target).await.is_err() {
            return Ok(());
        }
        let sql = self.stmts[&id].sql.clone();
        let Some(a) = self.backend.as_mut() else {
            return Ok(());
        };
        let Ok(s) = a.conn.ensure_prepared(&sql).await else {
            return Ok(());
        };
        let mut q = p.to_vec();
        q[1..5].copy_from_slice(&s.id.to_le_bytes());
        self.scratch.clear();
        write_packet(&mut self.scratch, 0, &q);
        if a.conn.write_raw(&self.scratch).await.is_err() {
            self.detach_discard();
            return Ok(());
        }
        self.pins |= pin::LONG_DATA;
        Ok(())
    }

    async fn stmt_reset(&mut self, p: &[u8]) -> Result<(), SessionError> {
        let id = stmt_id(p)?;
        let Some(st) = self.stmts.get(&id) else {
            return self
                .reply_error(SessionError::UnknownStatement {
                    id,
                    command: "mysqld_stmt_reset",
                })
                .await;
        };
        let sql = st.sql.clone();
        let server_stmt = self.backend.as_ref().and_then(|a| a.conn.stmt(&sql));
        match server_stmt {
            Some(s) if self.pins & (pin::CURSOR | pin::LONG_DATA) != 0 => {
                let mut q = p.to_vec();
                q[1..5].copy_from_slice(&s.id.to_le_bytes());
                self.scratch.clear();
                write_packet(&mut self.scratch, 0, &q);
                self.send_and_relay(Expect::Single, None).await?;
                self.pins &= !(pin::CURSOR | pin::LONG_DATA);
                self.after_statement();
                Ok(())
            }
            _ => {
                // Nothing is pending on any server for this statement.
                write_simple_ok(&mut self.client.out, 1, self.status);
                self.client.flush().await
            }
        }
    }

    async fn fetch(&mut self, p: &[u8]) -> Result<(), SessionError> {
        let id = stmt_id(p)?;
        let sql = self.stmts.get(&id).map(|s| s.sql.clone());
        let server_stmt = sql
            .as_ref()
            .and_then(|sql| self.backend.as_ref().and_then(|a| a.conn.stmt(sql)));
        let Some(s) = server_stmt.filter(|_| self.pins & pin::CURSOR != 0) else {
            return self
                .reply_error(SessionError::UnknownStatement {
                    id,
                    command: "mysqld_stmt_fetch (no open cursor)",
                })
                .await;
        };
        let mut q = p.to_vec();
        q[1..5].copy_from_slice(&s.id.to_le_bytes());
        self.scratch.clear();
        write_packet(&mut self.scratch, 0, &q);
        if let Some(res) = self.send_and_relay(Expect::Fetch, None).await? {
            if res.error || res.status & status::LAST_ROW_SENT != 0 {
                self.pins &= !pin::CURSOR;
            }
        }
        self.after_statement();
        Ok(())
    }
}

/// Relays one answer, counting the statement in flight on its server
/// and, when `timed`, timing it. Response times feed only least_latency
/// balancing: no clock reads per statement otherwise.
async fn relay_counted(
    client: &mut Client,
    conn: &mut BackendConn,
    server: &Server,
    timed: bool,
    expect: Expect,
    opts: &RelayOpts,
) -> Result<RelayResult, RelayError> {
    let started = timed.then(std::time::Instant::now);
    server.statement_started();
    let relayed = relay(client, conn, expect, opts).await;
    let elapsed_us = started
        .filter(|_| relayed.is_ok())
        .map(|t| t.elapsed().as_micros() as u64);
    server.statement_finished(elapsed_us);
    relayed
}

/// The session error for a relay that failed on the client's side.
fn client_failed(e: RelayError) -> SessionError {
    match e {
        RelayError::Client(e) => SessionError::ClientIo(e),
        RelayError::ClientClosed => SessionError::ClientClosed,
        RelayError::Server { reason, .. } => SessionError::BackendLost {
            addr: String::new(),
            reason,
        },
    }
}

fn stmt_id(p: &[u8]) -> Result<u32, SessionError> {
    let mut r = Reader::new(p);
    r.u8("command").map_err(SessionError::Malformed)?;
    r.u32("statement id").map_err(SessionError::Malformed)
}

/// Most servers a group may have (weights for balancing live on the stack).
pub const MAX_GROUP_SERVERS: usize = 32;

/// Each member's read weight by its current role.
fn read_weights(group: &sextant_backend::Group) -> ([u32; MAX_GROUP_SERVERS], usize) {
    let mut w = [0u32; MAX_GROUP_SERVERS];
    let n = group.members.len().min(MAX_GROUP_SERVERS);
    for (i, slot) in w.iter_mut().enumerate().take(n) {
        *slot = group.read_weight(i);
    }
    (w, n)
}
