//! Sending a statement to a server and relaying its answer, and the one
//! loop that runs a statement again when its plan allows and nothing of
//! its answer reached the client.

use super::binding::Followed;
use super::busy::Busy;
use super::Session;
use crate::client::Client;
use crate::errors::SessionError;
use crate::relay::{relay, RelayError, RelayOpts, RelayResult};
use sextant_backend::pipe::Pipe;
use sextant_backend::{BackendConn, Server};
use sextant_protocol::codec::write_packet;
use sextant_protocol::consts::status;
use sextant_protocol::tracker::Expect;
use sextant_routing::{Plan, Retry, Target};
use std::sync::Arc;
use tokio::time::Instant;

/// Attempts at a statement whose plan allows retries (the last one is not
/// armed: its failure is reported).
const ATTEMPTS: usize = 3;
/// Reads run again after finding their pooled connection closed, at most:
/// each such failure empties that server's idle connections, so the next
/// borrow opens a new one; this bounds a run of bad luck.
const POOLED_RETRIES: usize = 4;

/// Replays of a statement's transaction, at most: a new primary that
/// keeps losing connections is reported, not chased.
const MAX_REPLAYS: u8 = 2;

/// How one attempt at a statement ended.
pub(super) enum Outcome {
    /// The answer reached the client.
    Done(RelayResult),
    /// Nothing reached the client, and the plan lets it run again.
    Retry(RetryReason),
    /// It did not run to the end, and the client has been told.
    Reported,
    /// Its server failed; whether it runs again or the client is told is
    /// the retry loop's to decide (`Session::failed`).
    Failed(Box<Failure>),
}

/// An attempt whose server failed, as the attempt saw it.
pub(super) struct Failure {
    pub server: Arc<Server>,
    pub reason: String,
    /// Part of the answer reached the client.
    pub started: bool,
    /// The client's stream stopped inside a packet: the session cannot go
    /// on.
    pub mid_packet: bool,
    /// The sequence id an error to the client goes with.
    pub next_seq: u8,
    /// The connection came from the pool: a failure before any byte of
    /// the answer may be the server's close of an idle connection (a KILL,
    /// wait_timeout), which says nothing about the server.
    pub pooled: bool,
    /// What the client is told if the statement does not run again.
    pub error: SessionError,
    /// The connection (a replay record's stamp) whose transaction was
    /// certainly rolled back with it: a statement that cannot end a
    /// transaction was lost there.
    pub lost_trx: Option<(usize, u32)>,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum RetryReason {
    /// The server failed before any byte of the answer.
    ServerFailed,
    /// A connection borrowed from the pool was found closed before any
    /// byte of the answer: the server closed it while it lay idle (a KILL,
    /// wait_timeout), which says nothing about the server. The read runs
    /// again on a newly opened connection, without counting an attempt.
    PooledConnClosed,
    /// The server answered only that it is read-only: a switchover the
    /// monitor has not seen yet. Nothing ran.
    ReadOnly,
    /// A pipelined connection failed before this statement's answer began.
    PipeBroken,
    /// A prepare was refused with 1461 and sextant closed the statements
    /// it keeps: it is sent once more (by `forward`).
    StmtLimit,
    /// The replica did not apply the write the read must see within the
    /// wait's budget: its answer was dropped, and the read runs on the
    /// primary.
    WaitTimedOut,
    /// Its transaction's connection was lost and the transaction was
    /// replayed on a new one: it runs there.
    Replayed,
}

/// What a plan runs: its command's payload.
#[derive(Clone, Copy)]
pub(super) enum Work<'p> {
    Query(&'p [u8]),
    Execute {
        id: u32,
        payload: &'p [u8],
    },
    /// MariaDB's COM_STMT_BULK_EXECUTE.
    Bulk {
        id: u32,
        payload: &'p [u8],
    },
}

impl Session {
    /// Runs a planned statement, again on another server as long as its
    /// plan allows and an attempt asks for it. None: it did not run to the
    /// end (the client has been told why).
    pub(super) async fn run_plan(
        &mut self,
        plan: &Plan,
        work: Work<'_>,
    ) -> Result<Option<RelayResult>, SessionError> {
        let (mut attempt, mut pooled_retries) = (0, 0);
        while attempt < ATTEMPTS {
            self.stmt.retry = if attempt + 1 < ATTEMPTS {
                plan.retry
            } else {
                Retry::Never
            };
            // Text reads and executions are sent right after their
            // connection is attached: a wait for a write goes with them.
            self.stmt.wait.pipelined = !matches!(work, Work::Bulk { .. });
            let outcome = match work {
                Work::Query(p) => self.query_once(plan, p, attempt == 0).await,
                Work::Execute { id, payload } => {
                    self.execute_once(plan, id, payload, attempt == 0).await
                }
                Work::Bulk { id, payload } => self.bulk_once(plan, id, payload).await,
            };
            let retry = std::mem::replace(&mut self.stmt.retry, Retry::Never);
            let outcome = match outcome {
                Ok(Outcome::Failed(f)) => self.failed(*f, retry).await,
                o => o,
            };
            self.stmt.wait.pipelined = false;
            if let (Some(g), Some(a)) = (self.stmt.wait.pending.take(), self.binding.direct()) {
                // Never sent: the reads following it must not wait for it.
                a.server.health.shared_wait.ended(g.pack());
            }
            match outcome? {
                Outcome::Done(r) => return Ok(Some(r)),
                Outcome::Reported | Outcome::Failed(_) => return Ok(None),
                // Not an attempt: nothing failed, and the next goes to the
                // primary (a statement waits at most once).
                Outcome::Retry(RetryReason::WaitTimedOut) => {
                    tracing::debug!(parent: &self.span, "the replica did not catch up within causal_wait_ms: reading the primary");
                }
                // Not an attempt: the statement never ran (bounded by
                // MAX_REPLAYS).
                Outcome::Retry(RetryReason::Replayed) => {}
                Outcome::Retry(RetryReason::PooledConnClosed)
                    if pooled_retries < POOLED_RETRIES =>
                {
                    pooled_retries += 1;
                    tracing::debug!(parent: &self.span, "a pooled connection had been closed by its server: reading again on a new one");
                }
                Outcome::Retry(why) => {
                    tracing::info!(parent: &self.span, attempt,
                        ?why,
                        "statement failed before any result reached the client; retrying"
                    );
                    attempt += 1;
                }
            }
        }
        Ok(None)
    }

    /// One attempt at a text statement: on a pipe when the plan allows and
    /// the moment suits, else on the session's own connection.
    async fn query_once(
        &mut self,
        plan: &Plan,
        p: &[u8],
        first: bool,
    ) -> Result<Outcome, SessionError> {
        if plan.pipeline && first && p.len() < sextant_backend::pipe::MAX_REQUEST && Busy::crowded()
        {
            if let Some(o) = self.forward_pipelined(p).await? {
                return Ok(o);
            }
        }
        self.forward(plan.target, p, Expect::Query, None).await
    }

    /// Sends `payload` as a command to a server of `target` and relays the
    /// answer.
    pub(super) async fn forward(
        &mut self,
        target: Target,
        payload: &[u8],
        expect: Expect,
        client_stmt_id: Option<u32>,
    ) -> Result<Outcome, SessionError> {
        if let Err(e) = self.attach(target).await {
            self.reply_error(e).await?;
            return Ok(Outcome::Reported);
        }
        // After a 1461, a few more tries while the other connections give
        // their statements up (the busy ones when their statement ends);
        // the last answer is the client's, whatever it is.
        const PAUSES_MS: [u64; 3] = [0, 20, 100];
        let mut tries = 0;
        loop {
            self.stmts_evicted = tries >= PAUSES_MS.len();
            self.scratch.clear();
            write_packet(&mut self.scratch, 0, payload);
            match self.send_and_relay(expect, client_stmt_id).await? {
                Outcome::Retry(RetryReason::StmtLimit) => {
                    tokio::time::sleep(std::time::Duration::from_millis(PAUSES_MS[tries])).await;
                    tries += 1;
                    if let Err(e) = self.attach(target).await {
                        self.reply_error(e).await?;
                        return Ok(Outcome::Reported);
                    }
                }
                o => return Ok(o),
            }
        }
    }

    /// A plain read on a pipelined connection shared with other sessions'
    /// reads (pipe.rs). None: no pipe could take it (the caller sends it
    /// the usual way).
    async fn forward_pipelined(&mut self, payload: &[u8]) -> Result<Option<Outcome>, SessionError> {
        let Some((server, pipe)) = self.read_pipe().await else {
            return Ok(None);
        };
        self.scratch.clear();
        write_packet(&mut self.scratch, 0, payload);
        self.relay_piped(&server, &pipe, Expect::Query, None).await
    }

    /// A pipe for this session's next plain read, and its server. None:
    /// the read goes the usual way.
    pub(super) async fn read_pipe(&mut self) -> Option<(Arc<Server>, Arc<Pipe>)> {
        self.fleet_need().await;
        if self.binding.is_bound() {
            // Right after a write, reads stay on the held primary
            // connection (read_your_writes without a replica wait).
            if self.pinned() || self.primary_reads_until.is_some_and(|t| Instant::now() < t) {
                return None;
            }
            self.release();
        }
        let server = self.pick_reader()?;
        let mut burst = false;
        if let Some(g) = self
            .stmt
            .need
            .filter(|&g| super::binding::must_wait(&server, g))
        {
            // A pipe carries no wait: the read follows one in flight, or
            // goes the usual way and sends its own.
            if self.follow_for_pipe(&server, g).await != Followed::Applied {
                return None;
            }
            burst = true;
        }
        let pipe = match server.choose_pipe(&self.user.backend_user, self.flavor, &self.vars, burst)
        {
            sextant_backend::PipeChoice::Use(p) => p,
            sextant_backend::PipeChoice::No => return None,
            // (Boxed: opening a connection is a large future, and rare.)
            sextant_backend::PipeChoice::Open(booking) => {
                Box::pin(server.open_booked_pipe(
                    booking,
                    &self.user.backend_user,
                    &self.user.backend_password,
                    self.flavor,
                    &self.vars,
                ))
                .await?
            }
        };
        Some((server, pipe))
    }

    /// Sends the request in `scratch` through `pipe` and, in its turn,
    /// relays the answer; `stmt`: the prepared statement it executes, and
    /// whether the request carries its parameter types. None: the pipe
    /// took nothing (the caller sends it the usual way).
    pub(super) async fn relay_piped(
        &mut self,
        server: &Arc<Server>,
        pipe: &Arc<Pipe>,
        expect: Expect,
        stmt: Option<(&Arc<[u8]>, bool)>,
    ) -> Result<Option<Outcome>, SessionError> {
        let Some(turn) = pipe.submit(&self.scratch, &self.turn).await else {
            return Ok(None);
        };
        let Ok(mut conn) = turn.await else {
            // The connection failed before this answer began: the read
            // may or may not have run, and runs again elsewhere (only
            // reads that may run twice are pipelined).
            pipe.abandon();
            return Ok(Some(Outcome::Retry(RetryReason::PipeBroken)));
        };
        if let Some((sql, types_sent)) = stmt {
            conn.stmt_used(sql, types_sent);
        }
        let opts = RelayOpts {
            session_track: self.session_track,
            writes: None,
            deprecate_eof: self.deprecate_eof,
            client_stmt_id: None,
            hold_read_only_error: false,
            hold_stmt_limit_error: false,
            checksum: false,
            hold_connection_ending: false,
        };
        let timed = self.user.policy().balance == sextant_config::Balance::LeastLatency;
        // Its turn: the answers before it were read, so the server runs it
        // now, and a KILL QUERY of this session reaches it.
        if let Some(r) = &self.registered {
            r.handle.running_on(&self.group, server, conn.connection_id);
        }
        let relayed =
            relay_counted(&mut self.client, &mut conn, server, timed, expect, &opts).await;
        if let Some(r) = &self.registered {
            r.handle.idle();
        }
        match relayed {
            Ok(res) => {
                self.status = res.status & status::SESSION;
                self.ran = (res.rows, res.error, ran_on(server));
                // A read leaves a connection as it found it; if this one
                // did not, the connection is no longer the pipe's state.
                let clean = !res.connection_ending
                    && !res.vars_changed
                    && !conn.track.opaque
                    && !conn.track.charset_changed
                    && !conn.track.own_changed
                    && !conn.track.client_side_changed
                    && conn.track.last_gtid.is_none()
                    && !conn.in_transaction();
                if !clean {
                    tracing::debug!(parent: &self.span, server = %server.addr, "a pipelined read changed its connection's state: closing the pipe");
                    server.close_pipe(pipe, Some(conn));
                } else if let Some(conn) = pipe.pass(conn) {
                    server.close_pipe(pipe, Some(conn));
                }
                Ok(Some(Outcome::Done(res)))
            }
            Err(e @ RelayError::Server { .. }) => {
                server.close_pipe(pipe, Some(conn));
                self.server_failed(server, e, false).map(Some)
            }
            Err(client) => {
                // The answer was cut off mid-way: the connection's position
                // in the stream is lost for the sessions behind.
                server.close_pipe(pipe, Some(conn));
                Err(client_failed(client))
            }
        }
    }

    /// Sends what is in `scratch` to the attached connection and relays the
    /// answer.
    pub(super) async fn send_and_relay(
        &mut self,
        expect: Expect,
        client_stmt_id: Option<u32>,
    ) -> Result<Outcome, SessionError> {
        if self.pending_begin.is_some() && self.sharding.is_none() {
            match self.send_begin(expect).await? {
                (Some(o), _) => return Ok(o),
                (None, true) => return self.relay_sent(expect, client_stmt_id).await,
                (None, false) => {}
            }
        }
        if let Some(g) = self.stmt.wait.pending.take() {
            if let Some(o) = self.send_after_wait(g, expect).await? {
                return Ok(o);
            }
        } else if let Some(o) = self.send_scratch().await? {
            return Ok(o);
        }
        self.relay_sent(expect, client_stmt_id).await
    }

    /// Writes what is in `scratch` to the attached connection. Some: it
    /// could not, and what happened instead.
    async fn send_scratch(&mut self) -> Result<Option<Outcome>, SessionError> {
        let Some(a) = self.binding.direct_mut() else {
            return Ok(Some(Outcome::Reported));
        };
        match a.conn_mut().write_raw(&self.scratch).await {
            Ok(()) => Ok(None),
            Err(e) => Ok(Some(self.send_failed(e))),
        }
    }

    /// The attached connection failed as the statement was sent: it is
    /// closed, and nothing of the answer reached the client.
    pub(super) fn send_failed(&mut self, e: sextant_backend::BackendError) -> Outcome {
        let Some(a) = self.binding.direct_mut() else {
            return Outcome::Reported;
        };
        let (server, pooled) = (a.server.clone(), a.conn().from_pool);
        let in_trx = a.conn().in_transaction();
        let lost_trx = self.lost_trx(in_trx);
        self.detach_discard();
        let reason = e.to_string();
        Outcome::Failed(Box::new(Failure {
            lost_trx,
            error: self.lost_error(&server, &reason, in_trx),
            server,
            reason,
            started: false,
            mid_packet: false,
            next_seq: 1,
            pooled,
        }))
    }

    /// Sends a wait for `g` and, in the same write, the statement in
    /// `scratch` to the attached replica; reads the wait's answer. None:
    /// the replica had the write in time and the statement's answer is
    /// next on the connection. Otherwise the statement's answer was read
    /// and dropped, and what to do instead.
    async fn send_after_wait(
        &mut self,
        g: sextant_backend::gtid::Gtid,
        expect: Expect,
    ) -> Result<Option<Outcome>, SessionError> {
        let budget_ms = self.user.policy().causal_wait_ms;
        let Some(a) = self.binding.direct_mut() else {
            return Ok(Some(Outcome::Reported));
        };
        let sql = super::consistency::wait_sql(&g, budget_ms);
        let mut out = Vec::with_capacity(sql.len() + self.scratch.len() + 16);
        a.conn().internal_query_packet(&sql, &mut out);
        out.extend_from_slice(&self.scratch);
        let started = std::time::Instant::now();
        if let Err(e) = a.conn_mut().write_raw(&out).await {
            a.server.health.shared_wait.ended(g.pack());
            return Ok(Some(self.send_failed(e)));
        }
        if let Some(r) = &self.registered {
            // A KILL QUERY meanwhile stops the wait, and the read after it
            // is not relayed (below).
            r.handle
                .running_on(&self.group, &a.server, a.conn().connection_id);
        }
        let answer = a.conn_mut().read_named(&sql).await;
        if let Ok((_, rows)) = &answer {
            if super::consistency::caught_up(rows) {
                super::consistency::wait_ended(&a.server, &g, started, rows);
                return Ok(None);
            }
        }
        let server = a.server.clone();
        let mut timed_out = Vec::new();
        let interrupted = match answer {
            // KILL QUERY (1317; MariaDB's 1927 is a killed connection).
            Err(e @ sextant_backend::BackendError::Server { code: 1317, .. }) => Some(e),
            Err(sextant_backend::BackendError::Server { .. }) => None,
            Err(e) => {
                // The connection failed: nothing reached the client.
                server.health.shared_wait.ended(g.pack());
                if let Some(r) = &self.registered {
                    r.handle.idle();
                }
                return Ok(Some(self.send_failed(e)));
            }
            Ok((_, rows)) => {
                timed_out = rows;
                None
            }
        };
        match interrupted {
            None => {
                super::consistency::wait_ended(&server, &g, started, &timed_out);
            }
            // Killed, not timed out: the reads following it wait their own.
            Some(_) => server.health.shared_wait.ended(g.pack()),
        }
        // The read ran after the wait, maybe without the write: its answer
        // is not the client's.
        let skipped = a.conn_mut().skip_answer(expect).await;
        if let Some(r) = &self.registered {
            r.handle.idle();
        }
        let clean = skipped.is_ok() && !a.conn().in_transaction();
        if clean {
            self.release();
        } else {
            self.detach_discard();
        }
        if let Some(e) = interrupted {
            self.reply_error(e.into()).await?;
            return Ok(Some(Outcome::Reported));
        }
        self.stmt.wait.gave_up = true;
        Ok(Some(Outcome::Retry(RetryReason::WaitTimedOut)))
    }

    /// Relays the answer to the statement sent to the attached connection.
    async fn relay_sent(
        &mut self,
        expect: Expect,
        client_stmt_id: Option<u32>,
    ) -> Result<Outcome, SessionError> {
        let newest =
            super::consistency::user_newest(self.sharding.as_deref(), &self.group, &self.user);
        let Some(a) = self.binding.direct_mut() else {
            return Ok(Outcome::Reported);
        };
        // Only an answer that can join a transaction's record is hashed:
        // one on a connection in a transaction, or one that may open it
        // (a BEGIN, anything with autocommit off). A transaction opened
        // some other way finds its first answer unhashed and is never
        // replayed (session/replay.rs), rather than replayed unchecked.
        let checksum = self.trx_log.wants_checksum()
            && (a.conn().in_transaction()
                || a.conn().status & status::AUTOCOMMIT == 0
                || self.stmt.clean_begin);
        let opts = RelayOpts {
            session_track: self.session_track,
            writes: Some(newest),
            deprecate_eof: self.deprecate_eof,
            client_stmt_id,
            hold_read_only_error: self.stmt.retry == Retry::WriteAfterSwitchover,
            hold_stmt_limit_error: expect == Expect::Prepare && !self.stmts_evicted,
            checksum,
            hold_connection_ending: checksum
                && self.stmt.cannot_commit
                && a.conn().in_transaction(),
        };
        let timed = self.user.policy().balance == sextant_config::Balance::LeastLatency;
        let (server, conn) = a.parts();
        const READ_ONLY_TRX: u16 = status::IN_TRANS | status::IN_TRANS_READONLY;
        let read_only_trx = conn.status & READ_ONLY_TRX == READ_ONLY_TRX;
        if let Some(r) = &self.registered {
            r.handle.running_on(&self.group, server, conn.connection_id);
        }
        let relayed = relay_counted(&mut self.client, conn, server, timed, expect, &opts).await;
        if let Some(r) = &self.registered {
            r.handle.idle();
        }
        match relayed {
            Ok(res) if res.ending_held => {
                // The connection was killed under the transaction: as if
                // it had been lost (nothing reached the client).
                let server = a.server.clone();
                let lost_trx = self.lost_trx(true);
                self.detach_discard();
                let reason = "the server ended the connection (killed)".to_string();
                Ok(Outcome::Failed(Box::new(Failure {
                    error: self.lost_error(&server, &reason, true),
                    server,
                    reason,
                    started: false,
                    mid_packet: false,
                    next_seq: 1,
                    pooled: false,
                    lost_trx,
                })))
            }
            Ok(res) if res.stmt_limit_rejected => {
                // The server holds as many prepared statements as it may,
                // some of them kept by sextant for reuse: those go (this
                // connection's, and idle connections' with any), and the
                // prepare is sent once more.
                let span = self.span.clone();
                let (epoch, idle) = a.server.flush_statements();
                let closed = a.conn_mut().close_statements().await;
                a.conn_mut().stmt_epoch = epoch;
                tracing::info!(parent: &span, server = %a.server.addr, ?closed, idle_connections_closed = idle, "server refused a prepare with 1461: closing the statements sextant keeps");
                if closed.is_err() {
                    self.detach_discard();
                }
                Ok(Outcome::Retry(RetryReason::StmtLimit))
            }
            Ok(res) if res.read_only_rejected => {
                // The server became read-only (a switchover the monitor has
                // not seen yet). Nothing ran: the write waits for the new
                // primary and runs there.
                let span = self.span.clone();
                tracing::info!(parent: &span, server = %a.server.addr, "server answered read-only to a write: following the switchover now");
                a.server.health.set_writable(false);
                self.group.follow();
                self.release();
                Ok(Outcome::Retry(RetryReason::ReadOnly))
            }
            Ok(mut res) => {
                self.status = res.status & status::SESSION;
                self.ran = (res.rows, res.error, ran_on(&a.server));
                // What the statement did to the session is the caller's to
                // apply (effects.rs); what it did to the connection is
                // put right here.
                let conn = a.conn_mut();
                if read_only_trx && res.status & status::IN_TRANS == 0 && !self.stmt.ends_trx {
                    // A READ ONLY transaction ended some other way than
                    // by COMMIT or ROLLBACK (SET autocommit = 1 after
                    // autocommit = 0 in it): MariaDB makes the
                    // connection's next transaction READ ONLY too, and
                    // says so nowhere. The connection stays the session's.
                    conn.track.opaque = true;
                }
                res.tracked = crate::relay::Tracked {
                    opaque: conn.track.opaque,
                    insert_id_reported: std::mem::take(&mut conn.track.insert_id_reported),
                    last_insert_id_set: conn.track.last_insert_id_set.take(),
                    wrote: conn.track.last_gtid.take(),
                };
                if res.tracked.wrote.is_none()
                    && res.eof_ended
                    && !res.error
                    && !conn.in_transaction()
                    && conn.is_mariadb()
                    && (self.stmt.writes_rows
                        || may_write_rows(
                            self.scratch
                                .get(sextant_protocol::codec::HEADER_LEN..)
                                .unwrap_or_default(),
                        ))
                {
                    // A write answered by rows reported no GTID (no OK
                    // packet ends its answer): asked for, so that the
                    // session's next read sees it.
                    if let Some(g) = written_gtid(conn).await {
                        newest.publish(&g);
                        res.tracked.wrote = Some(g);
                    }
                }
                if res.connection_ending {
                    let span = self.span.clone();
                    tracing::info!(parent: &span, server = %a.server.addr, "the server ended a connection");
                    self.detach_discard();
                    return Ok(Outcome::Done(res));
                }
                if conn.track.charset_changed && Box::pin(conn.refresh_collation()).await.is_err() {
                    self.detach_discard();
                    return Ok(Outcome::Done(res));
                }
                if conn.track.own_changed && Box::pin(conn.restore_tracking()).await.is_err() {
                    self.detach_discard();
                    return Ok(Outcome::Done(res));
                }
                if res.vars_changed {
                    super::binding::adopt_vars(&mut self.vars, &conn.vars);
                }
                if conn.track.client_side_changed
                    && Box::pin(conn.restore_client_side()).await.is_err()
                {
                    self.detach_discard();
                }
                Ok(Outcome::Done(res))
            }
            Err(e @ RelayError::Server { .. }) => {
                let server = a.server.clone();
                let from_pool = a.conn().from_pool;
                let in_trx = a.conn().in_transaction();
                let lost_trx = self.lost_trx(in_trx);
                // The connection's state is unknown: it is closed, and the
                // session's server-side state (transaction, pins) is gone.
                self.detach_discard();
                let mut o = self.server_failed(&server, e, from_pool)?;
                if let Outcome::Failed(f) = &mut o {
                    f.error = self.lost_error(&server, &f.reason, in_trx);
                    f.lost_trx = lost_trx;
                }
                Ok(o)
            }
            Err(client) => {
                self.detach_discard();
                Err(client_failed(client))
            }
        }
    }

    /// The held connection, when a statement that cannot end its
    /// transaction is lost with it: the transaction is certainly rolled
    /// back, and may be replayed.
    fn lost_trx(&self, in_trx: bool) -> Option<(usize, u32)> {
        match in_trx && self.stmt.cannot_commit {
            true => self.held_conn(),
            false => None,
        }
    }

    /// What the client is told when its statement's server connection
    /// died: inside a transaction, by a statement that cannot end it, the
    /// transaction is rolled back for certain (SQLSTATE 40001, so that it
    /// is run again from its start); otherwise the outcome is unknown.
    fn lost_error(&self, server: &Server, reason: &str, in_trx: bool) -> SessionError {
        match in_trx && self.stmt.cannot_commit {
            true => SessionError::TransactionLost {
                addr: server.addr.to_string(),
                reason: reason.to_string(),
                replay: String::new(),
            },
            false => SessionError::BackendLost {
                addr: server.addr.to_string(),
                reason: reason.to_string(),
            },
        }
    }

    /// A server connection failed during a statement (and was closed):
    /// what the attempt saw.
    fn server_failed(
        &self,
        server: &Arc<Server>,
        e: RelayError,
        pooled: bool,
    ) -> Result<Outcome, SessionError> {
        let RelayError::Server {
            reason,
            started,
            mid_packet,
            next_seq,
        } = e
        else {
            return Err(client_failed(e));
        };
        Ok(Outcome::Failed(Box::new(Failure {
            server: server.clone(),
            error: SessionError::BackendLost {
                addr: server.addr.to_string(),
                reason: reason.clone(),
            },
            reason,
            started,
            mid_packet,
            next_seq: if started { next_seq } else { 1 },
            pooled,
            lost_trx: None,
        })))
    }

    /// The one place that decides what becomes of an attempt whose server
    /// failed, by the retry its plan allows now: a read nothing of which
    /// reached the client runs again; otherwise the client is told, or,
    /// if its stream stopped inside a packet, the session ends.
    pub(super) async fn failed(
        &mut self,
        mut f: Failure,
        retry: Retry,
    ) -> Result<Outcome, SessionError> {
        let addr = &f.server.addr;
        if !f.started && f.pooled && retry == Retry::Read {
            tracing::info!(parent: &self.span, server = %addr, "a pooled connection had been closed by the server: {}", f.reason);
            f.server.discard_idle();
            return Ok(Outcome::Retry(RetryReason::PooledConnClosed));
        }
        tracing::warn!(parent: &self.span, server = %addr, "server connection failed during a statement: {}", f.reason);
        if !f.started {
            f.server.mark_unreachable(&f.reason);
        }
        if !f.started && retry == Retry::Read {
            return Ok(Outcome::Retry(RetryReason::ServerFailed));
        }
        if !f.started && self.stmt.clean_begin && self.stmt.replays < MAX_REPLAYS {
            self.stmt.replays += 1;
            return Ok(Outcome::Retry(RetryReason::Replayed));
        }
        if !f.started && self.stmt.replays < MAX_REPLAYS && self.replayable(f.lost_trx) {
            self.stmt.replays += 1;
            match Box::pin(self.replay()).await {
                Ok(()) => return Ok(Outcome::Retry(RetryReason::Replayed)),
                Err(why) => f.error.not_replayed(&why),
            }
        }
        if f.mid_packet {
            return Err(f.error);
        }
        self.client.send_error(f.next_seq, &f.error).await?;
        Ok(Outcome::Reported)
    }

    /// The outcome of a command that never runs again: a failure is told
    /// to the client.
    pub(super) async fn settle(&mut self, o: Outcome) -> Result<Outcome, SessionError> {
        match o {
            Outcome::Failed(f) => self.failed(*f, Retry::Never).await,
            o => Ok(o),
        }
    }
}

/// Where a statement ran, for its digest.
fn ran_on(server: &Server) -> crate::digests::Ran {
    match server.role() {
        sextant_backend::Role::Primary => crate::digests::Ran::Primary,
        sextant_backend::Role::Replica => crate::digests::Ran::Replica,
    }
}

/// Relays one answer, counting the statement in flight on its server and
/// timing it (the server's statement stats; with `timed`, the moving
/// average least_latency balancing uses).
async fn relay_counted(
    client: &mut Client,
    conn: &mut BackendConn,
    server: &Server,
    timed: bool,
    expect: Expect,
    opts: &RelayOpts<'_>,
) -> Result<RelayResult, RelayError> {
    let started = std::time::Instant::now();
    server.health.statement_started();
    let relayed = match server.settings.query_timeout {
        None => {
            let sends = client.sends;
            let watched = {
                let fut = std::pin::pin!(relay(client, conn, expect, opts));
                crate::inflight::watched(&server.health, fut).await
            };
            match watched {
                Some(r) => r,
                None => Err(abandoned(
                    client,
                    sends,
                    "the monitor found the server down while the statement waited".into(),
                )),
            }
        }
        Some(limit) => {
            let sends = client.sends;
            match tokio::time::timeout(limit, relay(client, conn, expect, opts)).await {
                Ok(r) => r,
                Err(_) => Err(abandoned(
                    client,
                    sends,
                    format!(
                        "no complete answer within query_timeout_ms ({} ms)",
                        limit.as_millis()
                    ),
                )),
            }
        }
    };
    let elapsed_us = started.elapsed().as_micros() as u64;
    let error = relayed.as_ref().map_or(true, |r| r.error);
    server
        .health
        .statement_finished(elapsed_us, error, timed && relayed.is_ok());
    relayed
}

/// A statement given up on before its server finished answering: whatever
/// was read but not sent is dropped. Once the client got part of the
/// answer, its stream cannot go on.
fn abandoned(client: &mut Client, sends_before: u64, reason: String) -> RelayError {
    client.out.clear();
    let begun = client.sends != sends_before;
    RelayError::Server {
        reason,
        started: begun,
        mid_packet: begun,
        next_seq: 0,
    }
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

/// Whether a statement (a COM_QUERY payload) may write and answer with
/// rows: `INSERT`, `REPLACE` or `DELETE ... RETURNING`, or a `CALL`, its
/// first word read past comments and hints. A SELECT is not. (A prepared
/// statement's execution is not told apart here: its text is not at
/// hand.)
fn may_write_rows(payload: &[u8]) -> bool {
    let Some((&com, sql)) = payload.split_first() else {
        return false;
    };
    com == sextant_protocol::consts::com::QUERY && writes_rows(sql)
}

/// Whether a statement's text starts with a write that may answer with
/// rows (INSERT / REPLACE / DELETE ... RETURNING, CALL).
pub(super) fn writes_rows(sql: &[u8]) -> bool {
    let first = sextant_sql::Lexer::new(sql)
        .find(|t| t.kind != sextant_sql::TokenKind::Hint && !t.is_punct(b'('));
    first.is_some_and(|w| {
        ["INSERT", "REPLACE", "DELETE", "CALL"]
            .iter()
            .any(|k| w.is_word(k))
    })
}

/// The GTID of the write the connection's session committed last
/// (MariaDB's `@@last_gtid`); None when it cannot be read.
async fn written_gtid(
    conn: &mut sextant_backend::BackendConn,
) -> Option<sextant_backend::gtid::Gtid> {
    let rows = conn.query_internal("SELECT @@last_gtid").await.ok()?;
    let v = rows.first()?.first()?.as_deref()?;
    sextant_backend::gtid::Gtid::parse(v)
}

#[cfg(test)]
mod tests {
    use super::may_write_rows;

    #[test]
    fn writes_that_may_answer_with_rows() {
        let q = |s: &str| {
            let mut p = vec![3u8];
            p.extend_from_slice(s.as_bytes());
            may_write_rows(&p)
        };
        assert!(q("INSERT INTO t VALUES (1) RETURNING id"));
        assert!(q("  delete from t returning *"));
        assert!(q("REPLACE INTO t VALUES (1) RETURNING id"));
        assert!(q("CALL p()"));
        assert!(q("/* orm */ INSERT INTO t VALUES (1) RETURNING id"));
        assert!(!q("SELECT 1"));
        assert!(!q("/*# READWRITE */ SELECT 1"));
        assert!(!q("/* app */ SELECT 1"));
        assert!(!q("WITH x AS (SELECT 1) SELECT * FROM x"));
        assert!(!q("SHOW TABLES"));
        assert!(!q(""));
        assert!(!may_write_rows(&[0x17, 1, 0, 0, 0]));
    }
}
