//! One client session: from login to close.
//!
//! A session owns no server connection. It borrows one for a statement (or
//! a transaction, or while state that cannot move lives on it), keeps it for
//! `hold_ms` after the statement so back-to-back statements do not churn the
//! pool, then gives it back. Before a borrowed connection runs anything, its
//! session state (database, variables, character set) is made equal to the
//! client's.
//!
//! Each statement is planned by `sextant_routing::plan` (a value: target,
//! rule, consistency requirement, retry and pipelining eligibility) and the
//! session carries the plan out. One file per concern:
//!
//! - `command.rs`: the command loop, and the commands that reset or switch
//!   the session.
//! - `query.rs`: a COM_QUERY, top to bottom.
//! - `info.rs`: answers about the session itself (SHOW STATUS and
//!   VARIABLES of the client's connection, session information).
//! - `tracking.rs`: the client's own session-tracking settings.
//! - `kill.rs`: KILL statements, carried out with sextant's connection ids.
//! - `prepared.rs`: prepared statements (prepare, execute, long data,
//!   cursors).
//! - `effects.rs`: what a statement's answer changed in the session
//!   (decided by `sextant_routing::effects`), applied in one place.
//! - `consistency.rs`: what a read must see (own writes, monotonic) and
//!   what the session remembers for that.
//! - `stmt.rs`: the statement being run (its retry permission, what it
//!   must see, its wait on a replica), one value from plan to effects.
//! - `binding.rs`: which server connection the session holds, choosing a
//!   server, and bringing a connection to the session's state.
//! - `forward.rs`: sending a statement and relaying its answer; the one
//!   retry loop.
//! - `busy.rs`: how many sessions of the thread are mid-statement (whether
//!   a read shares a pipelined connection).
//! - `names.rs`: asking the primary about table names the catalogue does
//!   not list.
//! - `shard.rs`: statements of a sharded layout (routing, rewrites, ids,
//!   prepared statements); `spread.rs`: one statement over several groups
//!   (leases, scatter, broadcast); `merge.rs`: several groups' rows merged
//!   into one result.
//! - `xa.rs`: transactions over several groups (two-phase commit).
//! - `replay.rs`: a transaction whose connection was lost, run again on a
//!   new one when every answer can be shown to be the same.

mod binding;
mod busy;
mod columns;
mod command;
mod consistency;
mod deferred;
mod diagnostics;
mod effects;
mod forward;
mod guard;
mod info;
mod kill;
mod known_set;
mod last;
mod merge;
mod names;
mod prepared;
mod query;
mod replay;
mod savepoints;
mod shard;
mod spread;
mod stmt;
mod tracking;
mod xa;

use crate::client::Client;
use crate::errors::SessionError;
use crate::frontend::{self, Login};
use crate::runtime::UserEntry;
use crate::shared::Shared;
use sextant_backend::gtid::Gtid;
use sextant_backend::{Binding, Flavor, Server, SessionVars};
use sextant_protocol::consts::{cap, status};
use sextant_protocol::packets::{write_eof, write_ok, OkPacket};
use sextant_routing::{Cursor, Pins};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

pub struct Session {
    /// Registered for KILL; dropped first (before the client socket
    /// closes), so fields keep this order.
    registered: Option<crate::kill::Registered>,
    shared: Arc<Shared>,
    client: Client,
    user: Arc<UserEntry>,
    /// The group the session's statements run in: the user's, or on a
    /// sharded layout the group of the current statement.
    group: Arc<sextant_backend::Group>,
    /// The sharded layout, if the config has one.
    sharding: Option<Arc<crate::runtime::Sharding>>,
    /// A BEGIN answered by sextant and not yet sent: on a sharded layout
    /// until the transaction's first statement says which group it runs
    /// in; on a plain one, to go in the same write as that statement
    /// (deferred.rs).
    pending_begin: Option<Vec<u8>>,
    /// The buffer of the last BEGIN held back, kept for the next.
    begin_text: Vec<u8>,
    /// Reused for a held-back BEGIN and the statement sent with it.
    begin_out: Vec<u8>,
    /// Savepoints set while `pending_begin` waits for a group
    /// (savepoints.rs).
    savepoints: savepoints::Held,
    /// XA transactions this session started (a plain layout's client XA).
    own_xids: guard::OwnXids,
    /// Variables a SET that also changed session tracking assigned, read
    /// back from the server after it (see `tracking_set`).
    tracking_readback: Vec<String>,
    /// Sharding: the transaction's branches when it runs as XA (several
    /// groups may be written atomically).
    dist: Option<Box<xa::Dist>>,
    /// Sharding: the GTID of this session's last write in each group (by
    /// layout index), swapped into `last_write` as the session moves.
    shard_writes: Vec<Option<Gtid>>,
    flavor: Flavor,
    session_track: bool,
    deprecate_eof: bool,
    /// CLIENT_INTERACTIVE: the server would give the session
    /// interactive_timeout as its wait_timeout.
    interactive: bool,
    nonce: [u8; 20],
    vars: SessionVars,
    /// The server connection(s) the session holds.
    binding: Binding,
    hold_until: Option<Instant>,
    hold: Duration,
    /// Until then, reads may use the held primary connection: they follow a
    /// write of this session, which replicas may not have yet.
    primary_reads_until: Option<Instant>,
    pins: Pins,
    stmts: HashMap<u32, prepared::ClientStmt, sextant_backend::FastHash>,
    /// `[log] slow_query_ms`, when on.
    slow: Option<Duration>,
    /// `[proxy] query_digests_max`, when digests are on.
    digests: Option<usize>,
    /// The current statement's digest key, when classifying it built the
    /// digest on the way (crate::digests::record need not read it again).
    digest_key: Option<u64>,
    /// What the last relayed answer carried: rows, whether it was an
    /// error, where it ran (for the statement's digest).
    ran: (u64, bool, crate::digests::Ran),
    next_stmt_id: u32,
    /// The client id of the statement prepared last, if that prepare
    /// succeeded (what MariaDB's statement id 0xFFFFFFFF names).
    last_prepared: Option<u32>,
    /// This prepare already had sextant's kept statements closed after a
    /// 1461: a second one goes to the client.
    stmts_evicted: bool,
    cursor: Cursor,
    /// xorshift state for weighted random picks (per session: no lock).
    rng: u64,
    payload: Vec<u8>,
    scratch: Vec<u8>,
    /// Where this session's pipelined reads wait for their turn (one for
    /// all of them: no allocation per read).
    turn: sextant_backend::turn::TurnSlot,
    /// Status flags for answers sextant makes itself.
    status: u16,
    /// The last id this session's writes generated, and the server
    /// connection (address, id) where LAST_INSERT_ID() returns it.
    last_insert_id: u64,
    last_insert_conn: Option<(Arc<str>, u32)>,
    /// ROW_COUNT(), FOUND_ROWS() and @@warning_count of the statement
    /// before (last.rs).
    last: last::Last,
    /// The last error sextant gave the client itself (errno, message):
    /// SHOW WARNINGS lists it.
    refusal: Option<(u16, String)>,
    /// The statement being run reads the conditions on the connection the
    /// session holds: it runs there, wherever its plan would send it.
    stay: bool,
    /// The GTID of this session's last write.
    last_write: Option<Gtid>,
    /// The statement being run (empty between statements).
    stmt: stmt::Stmt,
    /// monotonic: the server of the session's last read, and when (sextant's
    /// clock, microseconds) that read ended. Whatever it saw, the primary
    /// had committed by then; a server that has applied a later heartbeat
    /// has it too.
    sticky: Option<Arc<Server>>,
    seen_us: i64,
    /// The session's tracing span: id, peer, user.
    span: tracing::Span,
    /// Most prepared statements the session may hold.
    max_stmts: usize,
    /// How long the session may sit idle inside a transaction.
    idle_trx: Option<Duration>,
    /// The session's place in its user's max_connections.
    seat: Option<Seat>,
    /// The open transaction's record, for a replay (replay.rs).
    trx_log: replay::Log,
}

/// One of a user's sessions, counted while it lives.
struct Seat(Arc<UserEntry>);

impl Seat {
    /// Err(the limit) when the user has its most sessions already here
    /// (`limit`: this instance's share of its max_connections; 0: none).
    fn take(user: &Arc<UserEntry>, limit: usize) -> Result<Seat, usize> {
        let n = user.connections.fetch_add(1, Ordering::AcqRel);
        let seat = Seat(user.clone());
        match limit == 0 || n < limit {
            true => Ok(seat),
            false => Err(limit),
        }
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Session {
    /// Logs the client in and serves it until it leaves.
    pub async fn run(shared: Arc<Shared>, mut client: Client, conn_id: u32) {
        // Every event of the session carries its id, peer and (once logged
        // in) user. Events name it as their parent instead of the session
        // entering it: entering a span on every poll takes the log
        // filter's lock, shared by all threads.
        let span = tracing::info_span!(
            "session",
            id = conn_id,
            peer = %client.peer,
            user = tracing::field::Empty
        );
        // The runtime current at login: a reload later changes nothing for
        // this session (its user entry holds its group and pools).
        let rt = shared.runtime.load_full();
        let timeout = Duration::from_millis(rt.config.proxy.handshake_timeout_ms);
        let login = match tokio::time::timeout(
            timeout,
            Box::pin(frontend::login(
                &mut client,
                &*rt,
                &shared.auth.load_full(),
                &shared.server_version,
                conn_id,
            )),
        )
        .await
        {
            Ok(Ok(l)) => l,
            Ok(Err(e @ (SessionError::ClientClosed | SessionError::ClientIo(_)))) => {
                tracing::debug!(parent: &span, error = %e, "client left during login");
                return;
            }
            Ok(Err(e)) => {
                tracing::info!(parent: &span, error = %e, "login failed");
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
                tracing::info!(parent: &span, "{e}");
                let seq = client.last_seq.wrapping_add(1);
                let _ = client.send_error(seq, &e).await;
                return;
            }
        };
        let Some(user) = rt.users.get(&login.user).cloned() else {
            return;
        };
        let seat = match Seat::take(&user, shared.user_limit(user.max_connections)) {
            Ok(s) => s,
            Err(limit) => {
                let e = SessionError::UserConnections {
                    user: user.name.clone(),
                    max: limit,
                };
                tracing::info!(parent: &span, "{e}");
                let _ = client.send_error(login.seq, &e).await;
                return;
            }
        };
        let hold = Duration::from_millis(rt.config.routing.hold_ms);
        client.max_packet = rt.config.proxy.max_allowed_packet;
        client.statement_memory = rt.config.proxy.statement_memory_mb.saturating_mul(1 << 20);
        let max_stmts = rt.config.proxy.max_prepared_statements;
        let idle_trx = rt.config.proxy.idle_in_transaction_timeout_ms;
        let replay = (
            rt.config.proxy.replay_max_bytes,
            rt.config.proxy.replay_max_total_bytes,
        );
        let slow_ms = rt.config.log.slow_query_ms;
        let digests = rt
            .config
            .proxy
            .query_digests
            .then_some(rt.config.proxy.query_digests_max);
        let sharding = rt.sharding.clone();
        drop(rt);
        let mut s = Session::new(shared, client, user, &login, hold, span);
        s.seat = Some(seat);
        s.shard_writes = vec![None; sharding.as_ref().map_or(0, |sh| sh.groups.len())];
        s.sharding = sharding;
        s.max_stmts = max_stmts;
        s.idle_trx = (idle_trx > 0).then(|| Duration::from_millis(idle_trx));
        (s.trx_log.max, s.trx_log.total_max) = replay;
        s.slow = (slow_ms > 0).then(|| Duration::from_millis(slow_ms));
        s.digests = digests;
        if let Some(db) = login.database.clone() {
            if let Some(e) = s.schema_refusal(db.as_bytes()) {
                let _ = s.client.send_error(login.seq, &e).await;
                return;
            }
            s.vars.schema = Some(db.into());
            // Check the database now, as a server would at login.
            let target = s.setup_connection().await;
            if let Err(e) = s.attach(target).await {
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
        frontend::start_compression(&mut s.client, &login);
        if let Some(fd) = s.client.stream.raw_fd() {
            s.registered = Some(crate::kill::Sessions::register(
                &s.shared,
                conn_id,
                s.user.clone(),
                s.client.peer,
                fd,
            ));
        }
        s.span.record("user", s.user.name.as_str());
        tracing::debug!(parent: &s.span, "client logged in");
        s.serve().await;
        s.close();
    }

    fn new(
        shared: Arc<Shared>,
        client: Client,
        user: Arc<UserEntry>,
        login: &Login,
        hold: Duration,
        span: tracing::Span,
    ) -> Self {
        let flavor = Flavor::new(login.caps, login.charset).with_mariadb(login.mariadb_caps);
        Session {
            registered: None,
            vars: SessionVars {
                multi_statements: login.caps & cap::MULTI_STATEMENTS != 0,
                ..Default::default()
            },
            session_track: login.caps & cap::SESSION_TRACK != 0,
            deprecate_eof: login.caps & cap::DEPRECATE_EOF != 0,
            interactive: login.caps & cap::INTERACTIVE != 0,
            nonce: login.nonce,
            flavor,
            shared,
            client,
            group: user.group.clone(),
            sharding: None,
            pending_begin: None,
            begin_text: Vec::new(),
            begin_out: Vec::new(),
            savepoints: savepoints::Held::default(),
            own_xids: Vec::new(),
            tracking_readback: Vec::new(),
            dist: None,
            shard_writes: Vec::new(),
            user,
            binding: Binding::Unbound,
            hold_until: None,
            hold,
            primary_reads_until: None,
            pins: Pins::empty(),
            stmts: HashMap::default(),
            slow: None,
            digests: None,
            digest_key: None,
            ran: (0, false, crate::digests::Ran::Other),
            next_stmt_id: 1,
            last_prepared: None,
            stmts_evicted: false,
            cursor: Cursor {
                rr: rand::random::<u32>() as u64,
                percent_acc: 0,
            },
            rng: rand::random::<u64>() | 1,
            payload: Vec::with_capacity(256),
            scratch: Vec::new(),
            turn: Default::default(),
            status: status::AUTOCOMMIT,
            last_insert_id: 0,
            last_insert_conn: None,
            last: last::Last::fresh(),
            refusal: None,
            stay: false,
            last_write: None,
            stmt: Default::default(),
            sticky: None,
            seen_us: 0,
            span,
            max_stmts: usize::MAX,
            idle_trx: None,
            seat: None,
            trx_log: Default::default(),
        }
    }

    fn close(&mut self) {
        // A connection with a transaction or opaque state is closed by
        // the pool when it comes back; a clean one is kept.
        if !self.pins.is_empty() {
            self.detach_discard();
        } else {
            self.release();
        }
    }

    async fn reply_error(&mut self, e: SessionError) -> Result<(), SessionError> {
        tracing::debug!(parent: &self.span, "error for client: {e}");
        self.last = self.last.refused();
        let (code, _, msg) = e.mysql();
        self.refusal = Some((code, msg));
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
}
