//! Prepared statements. A client's statement id maps to its SQL and the
//! route planned at prepare; each server connection prepares it on first
//! use (backend/conn.rs keeps them per connection), and parameter types the
//! client sent once are replayed to connections that have not seen them.

use super::forward::{Failure, Outcome, Work};
use super::query::Next;
use super::Session;
use crate::errors::SessionError;
use sextant_backend::pipe::PipeStmt;
use sextant_protocol::codec::{write_packet, Reader};
use sextant_protocol::consts::{cap, cursor};
use sextant_protocol::packets::write_simple_ok;
use sextant_protocol::tracker::Expect;
use sextant_routing::{plan, plan_execute, Command, Pins, Plan, Prepared, Ran, Target};
use std::sync::Arc;

pub(super) struct ClientStmt {
    sql: Arc<[u8]>,
    params: u16,
    /// Where the statement goes when the session is free (hints, locking
    /// and read-only-ness decided once, at prepare).
    route: Prepared,
    /// Parameter types (with names, under query attributes) from the last
    /// execute that sent them, and how many parameters that was; replayed
    /// to a server connection that has not seen them yet.
    types: Vec<u8>,
    types_n: usize,
    /// `SHOW [SESSION] STATUS | VARIABLES ...` without parameters: answered
    /// as the text form is, with the client connection's own values (TLS,
    /// compression, timeouts, session tracking).
    session_show: Option<sextant_sql::session_info::SessionShow>,
    /// The statement's digest key, when digests are on: read once, at
    /// prepare, not at every execution.
    digest_key: Option<u64>,
}

impl ClientStmt {
    pub(super) fn sql(&self) -> &[u8] {
        &self.sql
    }

    pub(super) fn digest_key(&self) -> Option<u64> {
        self.digest_key
    }
}

/// Where the parts of a COM_STMT_EXECUTE are: cmd, id(4), flags(1),
/// iterations(4), [parameter count, with query attributes], null bitmap,
/// bind flag, types (each 2 bytes, and a name with query attributes),
/// values.
struct ExecLayout {
    /// Parameters (statement parameters and query attributes).
    n: usize,
    /// Index of the bind flag.
    bind_at: usize,
    /// Length of the types that follow a bind flag of 1.
    types_len: usize,
}

fn exec_layout(p: &[u8], params: usize, query_attributes: bool) -> Option<ExecLayout> {
    const PARAMETER_COUNT_AVAILABLE: u8 = 0x08;
    let mut n = params;
    let mut at = 10;
    if query_attributes && p.get(5)? & PARAMETER_COUNT_AVAILABLE != 0 {
        let mut r = sextant_protocol::codec::Reader::new(p.get(10..)?);
        n = r.lenenc_int("parameter count").ok()? as usize;
        at = p.len() - r.remaining();
    }
    if n == 0 {
        return None;
    }
    let bind_at = at + n.div_ceil(8);
    let mut types_len = 0;
    if *p.get(bind_at)? == 1 {
        let mut r = sextant_protocol::codec::Reader::new(p.get(bind_at + 1..)?);
        for _ in 0..n {
            r.bytes(2, "parameter type").ok()?;
            if query_attributes {
                r.lenenc_bytes("parameter name").ok()?;
            }
        }
        types_len = p.len() - bind_at - 1 - r.remaining();
    }
    Some(ExecLayout {
        n,
        bind_at,
        types_len,
    })
}

/// The statement parameters' values of a COM_STMT_EXECUTE (none that
/// cannot be read: the router then treats the key as unknown).
/// Writes into `out` the packet that runs `p` (a client's
/// COM_STMT_EXECUTE of `st`) as server statement `server_id`, adding the
/// parameter types if the client left them out and that server statement
/// (`types_sent`) never got them. Returns whether the packet carries
/// types.
fn execute_packet(
    out: &mut Vec<u8>,
    st: &mut ClientStmt,
    p: &[u8],
    server_id: u32,
    types_sent: bool,
    qa: bool,
) -> bool {
    let mut inject_types = false;
    let mut sent_types = false;
    let mut bitmap_end = 0;
    if let Some(l) = exec_layout(p, st.params as usize, qa) {
        bitmap_end = l.bind_at;
        if l.types_len > 0 {
            st.types.clear();
            st.types
                .extend_from_slice(&p[l.bind_at + 1..l.bind_at + 1 + l.types_len]);
            st.types_n = l.n;
            sent_types = true;
        } else if p[l.bind_at] == 0 && !types_sent && st.types_n == l.n && !st.types.is_empty() {
            inject_types = true;
            sent_types = true;
        }
    }
    let len = p.len() + if inject_types { st.types.len() } else { 0 };
    // The client's payload, with the types put in after the null bitmap
    // when they are added.
    let payload = |q: &mut Vec<u8>| {
        if inject_types {
            q.extend_from_slice(&p[..bitmap_end]);
            q.push(1);
            q.extend_from_slice(&st.types);
            q.extend_from_slice(&p[bitmap_end + 1..]);
        } else {
            q.extend_from_slice(p);
        }
    };
    out.clear();
    if len < sextant_protocol::codec::MAX_PAYLOAD {
        let at = sextant_protocol::codec::begin_packet(out);
        payload(out);
        out[at + 5..at + 9].copy_from_slice(&server_id.to_le_bytes());
        sextant_protocol::codec::finish_packet(out, at, 0);
    } else {
        // 16 MiB and more: rare enough to build the payload separately.
        let mut q = Vec::with_capacity(len);
        payload(&mut q);
        q[1..5].copy_from_slice(&server_id.to_le_bytes());
        write_packet(out, 0, &q);
    }
    sent_types
}

fn exec_values<'a>(
    p: &'a [u8],
    st: &ClientStmt,
    qa: bool,
) -> Vec<sextant_protocol::binary::Value<'a>> {
    let Some(l) = exec_layout(p, st.params as usize, qa) else {
        return Vec::new();
    };
    let nulls = &p[l.bind_at - l.n.div_ceil(8)..l.bind_at];
    let (raw, values_at) = match l.types_len {
        0 => (&st.types[..], l.bind_at + 1),
        n => (&p[l.bind_at + 1..l.bind_at + 1 + n], l.bind_at + 1 + n),
    };
    // Under query attributes each type is followed by a name.
    let mut types = Vec::with_capacity(2 * l.n);
    let mut r = Reader::new(raw);
    for _ in 0..l.n {
        match r.bytes(2, "parameter type") {
            Ok(t) => types.extend_from_slice(t),
            Err(_) => return Vec::new(),
        }
        if qa && r.lenenc_bytes("parameter name").is_err() {
            return Vec::new();
        }
    }
    let values = p.get(values_at..).unwrap_or_default();
    let mut v =
        sextant_protocol::binary::read_values(l.n, nulls, &types, values).unwrap_or_default();
    v.truncate(st.params as usize);
    v
}

impl Session {
    pub(super) async fn prepare(&mut self, p: &[u8]) -> Result<(), SessionError> {
        self.last_prepared = None;
        if self.stmts.len() >= self.max_stmts {
            return self
                .reply_error(SessionError::TooManyPrepared(self.max_stmts))
                .await;
        }
        let answered;
        let p = match sextant_sql::classify(&p[1..])
            .flags
            .contains(sextant_sql::Flags::SESSION_INFO)
        {
            true => match self.answer_session_info(p, 1, true) {
                Ok(Some(q)) => {
                    answered = q;
                    &answered[..]
                }
                Ok(None) => p,
                Err(e) => return self.reply_error(e).await,
            },
            false => p,
        };
        let sql: Arc<[u8]> = Arc::from(&p[1..]);
        {
            let c = self.group.classify_in(&sql, || self.lex_mode());
            if c.kind == sextant_sql::Kind::Kill
                || c.flags
                    .intersects(sextant_sql::Flags::KILL | sextant_sql::Flags::DYNAMIC_KILL)
            {
                return self.reply_error(SessionError::KillNotAlone).await;
            }
            if let Some(e) = self.prepared_refusal(&c) {
                return self.reply_error(e).await;
            }
        }
        if let Some(sh) = self.sharding.clone() {
            // An INSERT that names no columns is prepared as if it did.
            match self.named_columns(&sh, &sql).await {
                Ok(None) => {}
                Ok(Some(text)) => {
                    let mut q = Vec::with_capacity(1 + text.len());
                    q.push(p[0]);
                    q.extend_from_slice(&text);
                    return Box::pin(self.prepare(&q)).await;
                }
                Err(e) => return self.reply_error(e).await,
            }
        }
        if let Some(sh) = self.sharding.clone() {
            let may_write = sextant_sql::classify(&sql).may_write();
            match Box::pin(self.shard_prepare(&sh, &sql, may_write, p)).await? {
                Next::Done => return Ok(()),
                Next::Run => {}
                Next::Instead(q) => return Box::pin(self.prepare(&q)).await,
            }
        }
        let mut c = self.group.classify_in(&sql, || self.lex_mode());
        if self.learn_names(&c, &sql).await {
            c = self.group.classify_in(&sql, || self.lex_mode());
        }
        let route = Prepared::new(&c, &self.user.policy());
        let plan = plan(
            &c,
            self.facts(),
            &self.user.policy(),
            self.group.plan_facts(),
            Command::Prepare,
            &mut self.cursor,
        );
        self.require(&plan);
        let id = self.next_stmt_id;
        let res = self
            .forward(plan.target, p, Expect::Prepare, Some(id))
            .await;
        self.stmt.need = None;
        // A prepare is never retried.
        let Outcome::Done(res) = self.settle(res?).await? else {
            return Ok(());
        };
        if let Some((server_id, columns, params)) = res.prepared {
            self.next_stmt_id = self.next_stmt_id.wrapping_add(1).max(1);
            self.last_prepared = Some(id);
            if let Some(a) = self.binding.direct_mut() {
                if a.conn_mut()
                    .adopt_stmt(sql.clone(), server_id, params, columns)
                    .await
                    .is_err()
                {
                    self.detach_discard();
                }
            }
            let session_show = match (params, route.kind) {
                (0, sextant_sql::Kind::Show) => {
                    sextant_sql::session_info::session_show(&sql, self.lex_mode())
                }
                _ => None,
            };
            let digest_key = self.digests.and_then(|_| {
                crate::digests::with_scratch(|buf| {
                    sextant_sql::digest::digest_bytes(&sql, self.lex_mode(), buf);
                    sextant_sql::digest::digest_key(buf)
                })
            });
            self.stmts.insert(
                id,
                ClientStmt {
                    sql,
                    params,
                    route,
                    types: Vec::new(),
                    types_n: 0,
                    session_show,
                    digest_key,
                },
            );
        }
        self.after_statement();
        Ok(())
    }

    /// MariaDB's COM_STMT_BULK_EXECUTE: a prepared write run for many rows
    /// of parameters at once, routed as its statement is.
    pub(super) async fn bulk_execute(&mut self, p: &[u8]) -> Result<(), SessionError> {
        self.run_statement(p, true).await
    }

    /// One attempt at a bulk execute: as [`Session::execute_once`], for the
    /// bulk layout (cmd, id(4), flags(2), [types(2n)], rows).
    pub(super) async fn bulk_once(
        &mut self,
        plan: &Plan,
        id: u32,
        p: &[u8],
    ) -> Result<Outcome, SessionError> {
        const SEND_TYPES_TO_SERVER: u16 = 128;
        let (server_id, types_sent) = match self.attach_for_stmt(plan.target, id).await? {
            Ok(v) => v,
            Err(outcome) => return Ok(outcome),
        };
        let Some(st) = self.stmts.get_mut(&id) else {
            return Ok(Outcome::Reported);
        };
        let flags = p
            .get(5..7)
            .map(|f| u16::from_le_bytes([f[0], f[1]]))
            .ok_or(SessionError::Malformed(
                sextant_protocol::ProtoError::Truncated("bulk execute flags"),
            ))?;
        let n = st.params as usize;
        let mut q = Vec::with_capacity(p.len() + 2 * n);
        if flags & SEND_TYPES_TO_SERVER != 0 {
            if let Some(t) = p.get(7..7 + 2 * n) {
                st.types.clear();
                st.types.extend_from_slice(t);
                st.types_n = n;
            }
            q.extend_from_slice(p);
        } else if !types_sent && n > 0 && st.types_n == n && st.types.len() == 2 * n {
            // This server statement never got the types the client sent
            // on another connection.
            q.extend_from_slice(&p[..5]);
            q.extend_from_slice(&(flags | SEND_TYPES_TO_SERVER).to_le_bytes());
            q.extend_from_slice(&st.types);
            q.extend_from_slice(&p[7..]);
        } else {
            q.extend_from_slice(p);
        }
        q[1..5].copy_from_slice(&server_id.to_le_bytes());
        self.scratch.clear();
        write_packet(&mut self.scratch, 0, &q);
        let sent_types = flags & SEND_TYPES_TO_SERVER != 0 || q[5] & 128 != 0 || types_sent;
        let sql = st.sql.clone();
        if let Some(a) = self.binding.direct_mut() {
            a.conn_mut().stmt_used(&sql, sent_types);
        }
        self.send_and_relay(Expect::Execute, None).await
    }

    pub(super) async fn execute(&mut self, p: &[u8]) -> Result<(), SessionError> {
        self.run_statement(p, false).await
    }

    /// COM_STMT_EXECUTE, or MariaDB's COM_STMT_BULK_EXECUTE (`bulk`): the
    /// statement's plan, run with its retries.
    async fn run_statement(&mut self, p: &[u8], bulk: bool) -> Result<(), SessionError> {
        let _busy = super::busy::Busy::enter();
        let id = stmt_id(p)?;
        if !self.stmts.contains_key(&id) {
            let command = match bulk {
                true => "mysqld_stmt_bulk_execute",
                false => "mysqld_stmt_execute",
            };
            return self
                .reply_error(SessionError::UnknownStatement { id, command })
                .await;
        }
        if let Some(sh) = self.sharding.clone() {
            let qa = self.flavor.caps & cap::QUERY_ATTRIBUTES != 0;
            // The types come with the first execution only: kept for the
            // values of the next ones.
            if let (false, Some(st)) = (bulk, self.stmts.get_mut(&id)) {
                if let Some(l) = exec_layout(p, st.params as usize, qa) {
                    if l.types_len > 0 {
                        st.types.clear();
                        st.types
                            .extend_from_slice(&p[l.bind_at + 1..l.bind_at + 1 + l.types_len]);
                        st.types_n = l.n;
                    }
                }
            }
            let Some(st) = self.stmts.get(&id) else {
                return Ok(());
            };
            let values = match bulk {
                true => Vec::new(),
                false => exec_values(p, st, qa),
            };
            let cursor = !bulk && p.get(5).is_some_and(|f| f & cursor::READ_ONLY != 0);
            let (sql, may_write) = (st.sql.clone(), st.route.may_write);
            match Box::pin(self.shard_execute(&sh, &sql, may_write, &values, bulk, cursor)).await? {
                Next::Done => return Ok(()),
                Next::Run => {}
                // Run as its text; the answer is the execution's.
                Next::Instead(q) => return Box::pin(self.query(&q)).await,
            }
        }
        let Some(st) = self.stmts.get(&id) else {
            return Ok(());
        };
        use sextant_sql::Kind;
        if !bulk && matches!(st.route.kind, Kind::Begin | Kind::Commit | Kind::Rollback) {
            // (sysbench prepares its BEGIN and COMMIT.)
            let (kind, flags, sql) = (st.route.kind, st.route.flags, st.sql.clone());
            if let Some(next) = self.defer_begin(kind, flags, &sql).await {
                return next.map(|_| ());
            }
        }
        let Some(st) = self.stmts.get(&id) else {
            return Ok(());
        };
        if let (Some(show), false) = (st.session_show, bulk) {
            let (sql, target) = (
                st.sql.clone(),
                plan_execute(
                    &st.route,
                    self.facts(),
                    &self.user.policy(),
                    self.group.plan_facts(),
                    false,
                )
                .target,
            );
            return Box::pin(self.session_show(show, target, &sql, true)).await;
        }
        // A cursor keeps the session on its connection while writes may
        // follow: it opens on the primary. (A bulk execute has none.)
        let cursor = !bulk && p.get(5).is_some_and(|f| f & cursor::READ_ONLY != 0);
        let plan = plan_execute(
            &st.route,
            self.facts(),
            &self.user.policy(),
            self.group.plan_facts(),
            cursor,
        );
        sextant_admin::traffic::statement(st.route.kind, plan.rule);
        let statement = st.route.statement();
        let text = st.sql.clone();
        if let Some(r) = plan.refuse {
            return self.reply_error(SessionError::WriteOnReplica(r)).await;
        }
        let (kind, flags, plain) = (st.route.kind, st.route.flags, st.route.plain);
        self.require(&plan);
        self.stmt.cannot_commit = !bulk && !cursor && super::query::cannot_commit(kind, flags);
        self.stmt.begin_rides = self.pending_begin.is_some()
            && !bulk
            && !cursor
            && kind == sextant_sql::Kind::Select
            && plain;
        let work = match bulk {
            true => Work::Bulk { id, payload: p },
            false => Work::Execute { id, payload: p },
        };
        let sent_us = self.sent_at(!bulk && !cursor && kind == sextant_sql::Kind::Select && plain);
        let r = self.run_plan(&plan, work).await;
        self.read_done();
        let ran = match bulk {
            true => Ran::Bulk,
            false => Ran::Execute { cursor },
        };
        let r = r?;
        self.after(&statement, ran, plan.target, r.as_ref(), Some(&text));
        match (r.as_ref(), bulk || cursor) {
            (Some(res), false) => self.record_execute(id, p, kind, flags, res, sent_us),
            (_, true) => self.record_other("prepared_statement", "a bulk execution or a cursor"),
            (None, _) => self.record_other("other", "a statement that did not run"),
        }
        Ok(())
    }

    /// Records an execution for a replay, with the parameter types it
    /// ran with (the client sends them once; they are put in when it
    /// left them out).
    fn record_execute(
        &mut self,
        id: u32,
        p: &[u8],
        kind: sextant_sql::Kind,
        flags: sextant_sql::Flags,
        res: &crate::relay::RelayResult,
        sent_us: u64,
    ) {
        if self.trx_log.max == 0 {
            return;
        }
        if res.status & sextant_protocol::consts::status::IN_TRANS == 0 {
            // Outside a transaction: nothing to copy (this ends a record).
            return self.record_as(kind, flags, &[], None, res, sent_us);
        }
        let qa = self.flavor.caps & cap::QUERY_ATTRIBUTES != 0;
        let mut packet = std::mem::take(&mut self.scratch);
        let sql = match self.stmts.get_mut(&id) {
            Some(st) => {
                execute_packet(&mut packet, st, p, 0, false, qa);
                Some(st.sql.clone())
            }
            None => None,
        };
        let whole = packet.len() < sextant_protocol::codec::MAX_PAYLOAD;
        match (sql, whole) {
            (Some(sql), true) => self.record_as(
                kind,
                flags,
                &packet[sextant_protocol::codec::HEADER_LEN..],
                Some(sql),
                res,
                sent_us,
            ),
            _ => self.record_other("size", "an execution too large to record"),
        }
        self.scratch = packet;
    }

    /// One attempt at an execute: on a pipe when the plan allows and the
    /// moment suits, else a connection for the plan's target, the
    /// statement prepared there, the packet rewritten with the server's
    /// statement id (and the parameter types, if this server statement
    /// never got them).
    pub(super) async fn execute_once(
        &mut self,
        plan: &Plan,
        id: u32,
        p: &[u8],
        first: bool,
    ) -> Result<Outcome, SessionError> {
        if plan.pipeline && first && super::busy::Busy::crowded() {
            if let Some(o) = self.execute_pipelined(id, p).await? {
                return Ok(o);
            }
        }
        let (server_id, types_sent) = match self.attach_for_stmt(plan.target, id).await? {
            Ok(v) => v,
            Err(outcome) => return Ok(outcome),
        };
        p.get(5).ok_or(SessionError::Malformed(
            sextant_protocol::ProtoError::Truncated("execute flags"),
        ))?;
        let qa = self.flavor.caps & cap::QUERY_ATTRIBUTES != 0;
        let Some(st) = self.stmts.get_mut(&id) else {
            return Ok(Outcome::Reported);
        };
        let sent_types = execute_packet(&mut self.scratch, st, p, server_id, types_sent, qa);
        let sql = st.sql.clone();
        if let Some(a) = self.binding.direct_mut() {
            a.conn_mut().stmt_used(&sql, sent_types);
        }
        self.stmt.writes_rows = super::forward::writes_rows(&sql);
        self.send_and_relay(Expect::Execute, None).await
    }

    /// An execution of a plain read on a pipe shared with other sessions'
    /// reads; the statement is prepared through the pipe the first time.
    /// None: no pipe could take it (the caller runs it the usual way).
    async fn execute_pipelined(
        &mut self,
        id: u32,
        p: &[u8],
    ) -> Result<Option<Outcome>, SessionError> {
        let Some(st) = self.stmts.get(&id) else {
            return Ok(None);
        };
        // With the types it may have to add, and the packet header.
        if p.len() + st.types.len() + 4 >= sextant_backend::pipe::MAX_REQUEST {
            return Ok(None);
        }
        let sql = st.sql.clone();
        let Some((server, pipe)) = self.read_pipe().await else {
            return Ok(None);
        };
        let (server_id, types_sent) = match pipe.stmt(&sql) {
            PipeStmt::Ready { id, types_sent } => (id, types_sent),
            PipeStmt::No => return Ok(None),
            PipeStmt::Prepare => match self.prepare_piped(&server, &pipe, &sql).await {
                Some(s) => (s.id, s.types_sent),
                None => return Ok(None),
            },
        };
        let qa = self.flavor.caps & cap::QUERY_ATTRIBUTES != 0;
        let Some(st) = self.stmts.get_mut(&id) else {
            return Ok(None);
        };
        let sent_types = execute_packet(&mut self.scratch, st, p, server_id, types_sent, qa);
        if sent_types {
            pipe.stmt_types_sent(&sql);
        }
        self.relay_piped(&server, &pipe, Expect::Execute, Some((&sql, sent_types)))
            .await
    }

    /// Prepares `sql` on a pipe's connection, in line with the other
    /// sessions' reads (the answer is this session's to read, not the
    /// client's). None: it did not prepare there (the server refused it,
    /// or the pipe failed; the execution then goes the usual way, which
    /// reports a refusal to the client).
    async fn prepare_piped(
        &mut self,
        server: &Arc<sextant_backend::Server>,
        pipe: &Arc<sextant_backend::pipe::Pipe>,
        sql: &Arc<[u8]>,
    ) -> Option<sextant_backend::ServerStmt> {
        let len = sql.len() + 1;
        if len + 4 >= sextant_backend::pipe::MAX_REQUEST {
            pipe.stmt_prepared(sql, None);
            return None;
        }
        self.scratch.clear();
        let at = sextant_protocol::codec::begin_packet(&mut self.scratch);
        self.scratch
            .push(sextant_protocol::consts::com::STMT_PREPARE);
        self.scratch.extend_from_slice(sql);
        sextant_protocol::codec::finish_packet(&mut self.scratch, at, 0);
        let Some(turn) = pipe.submit(&self.scratch, &self.turn).await else {
            pipe.stmt_prepared(sql, None);
            return None;
        };
        let Ok(mut conn) = turn.await else {
            pipe.abandon();
            return None;
        };
        let prepared = match conn.read_prepared(sql).await {
            Ok(s) => Some(s),
            // The server refused it: the connection is fine.
            Err(sextant_backend::BackendError::Server { .. }) => None,
            Err(e) => {
                tracing::debug!(parent: &self.span, server = %server.addr, "preparing through a pipe failed: {e}");
                server.close_pipe(pipe, Some(conn));
                return None;
            }
        };
        pipe.stmt_prepared(sql, prepared);
        if let Some(conn) = pipe.pass(conn) {
            server.close_pipe(pipe, Some(conn));
        }
        prepared
    }

    /// Attaches a connection for `target` and makes sure statement `id` is
    /// prepared there; returns its server id and whether that server
    /// statement has been sent its parameter types, or what became of the
    /// attempt (reported to the client, or to be retried elsewhere).
    async fn attach_for_stmt(
        &mut self,
        target: Target,
        id: u32,
    ) -> Result<Result<(u32, bool), Outcome>, SessionError> {
        let Some(sql) = self.stmts.get(&id).map(|st| st.sql.clone()) else {
            self.reply_error(SessionError::UnknownStatement {
                id,
                command: "mysqld_stmt_execute",
            })
            .await?;
            return Ok(Err(Outcome::Reported));
        };
        if let Err(e) = self.attach(target).await {
            self.reply_error(e).await?;
            return Ok(Err(Outcome::Reported));
        }
        let prepared_here = self
            .binding
            .direct()
            .is_some_and(|a| a.conn().stmt(&sql).is_some());
        if self.stmt.wait.pending.is_some() && !prepared_here && !Box::pin(self.wait_now()).await {
            // The statement is prepared before it runs, and the prepare
            // must see the write too (a table it created): the wait went
            // alone first, and timed out.
            if let Err(e) = self.attach(target).await {
                self.reply_error(e).await?;
                return Ok(Err(Outcome::Reported));
            }
        }
        let Some(a) = self.binding.direct_mut() else {
            return Ok(Err(Outcome::Reported));
        };
        // The server's max_prepared_stmt_count reached (1461), in part by
        // statements sextant keeps: they go, as after a client's prepare
        // refused so (forward.rs), and the prepare is tried again.
        let mut prepared = a.conn_mut().ensure_prepared(&sql).await;
        let mut broken = None;
        for pause_ms in [0, 20, 100] {
            if !matches!(&prepared, Err(sextant_backend::BackendError::Server { code, .. }) if *code == crate::errors::ER_MAX_PREPARED_STMT_COUNT_REACHED)
            {
                break;
            }
            let (epoch, _) = a.server.flush_statements();
            if let Err(e) = a.conn_mut().close_statements().await {
                broken = Some(e);
                break;
            }
            a.conn_mut().stmt_epoch = epoch;
            tokio::time::sleep(std::time::Duration::from_millis(pause_ms)).await;
            prepared = a.conn_mut().ensure_prepared(&sql).await;
        }
        if let Some(e) = broken {
            // The connection failed while closing statements: not reused.
            self.detach_discard();
            self.reply_error(e.into()).await?;
            return Ok(Err(Outcome::Reported));
        }
        match prepared {
            Ok(s) => Ok(Ok((s.id, s.types_sent))),
            // The statement no longer prepares there: the connection is
            // fine, and the client gets the server's error.
            Err(e @ sextant_backend::BackendError::Server { .. }) => {
                self.reply_error(e.into()).await?;
                Ok(Err(Outcome::Reported))
            }
            // The connection failed before the statement was sent: as for
            // any statement whose server fails before answering, a plain
            // read runs again elsewhere.
            Err(e) => {
                let server = a.server.clone();
                self.detach_discard();
                Ok(Err(Outcome::Failed(Box::new(Failure {
                    server,
                    reason: e.to_string(),
                    started: false,
                    mid_packet: false,
                    next_seq: 1,
                    pooled: false,
                    error: e.into(),
                    lost_trx: None,
                }))))
            }
        }
    }

    pub(super) async fn long_data(&mut self, p: &[u8]) -> Result<(), SessionError> {
        let id = stmt_id(p)?;
        // No response is sent for this command, errors included; the
        // execute that follows reports them.
        let Some((sql, statement)) = self
            .stmts
            .get(&id)
            .map(|st| (st.sql.clone(), st.route.statement()))
        else {
            return Ok(());
        };
        if self.attach(Target::Primary).await.is_err() {
            return Ok(());
        }
        let Some(a) = self.binding.direct_mut() else {
            return Ok(());
        };
        let Ok(s) = a.conn_mut().ensure_prepared(&sql).await else {
            return Ok(());
        };
        let mut q = p.to_vec();
        q[1..5].copy_from_slice(&s.id.to_le_bytes());
        self.scratch.clear();
        write_packet(&mut self.scratch, 0, &q);
        if a.conn_mut().write_raw(&self.scratch).await.is_err() {
            self.detach_discard();
            return Ok(());
        }
        self.after(&statement, Ran::LongData, Target::Primary, None, None);
        Ok(())
    }

    pub(super) fn stmt_close(&mut self, p: &[u8]) -> Result<(), SessionError> {
        let id = stmt_id(p)?;
        self.stmts.remove(&id);
        Ok(())
    }

    pub(super) async fn stmt_reset(&mut self, p: &[u8]) -> Result<(), SessionError> {
        let id = stmt_id(p)?;
        let Some(st) = self.stmts.get(&id) else {
            return self
                .reply_error(SessionError::UnknownStatement {
                    id,
                    command: "mysqld_stmt_reset",
                })
                .await;
        };
        let (sql, statement) = (st.sql.clone(), st.route.statement());
        let server_stmt = self.binding.direct().and_then(|a| a.conn().stmt(&sql));
        match server_stmt {
            Some(s) if self.pins.intersects(Pins::CURSOR | Pins::LONG_DATA) => {
                let mut q = p.to_vec();
                q[1..5].copy_from_slice(&s.id.to_le_bytes());
                self.scratch.clear();
                write_packet(&mut self.scratch, 0, &q);
                let sent = self.send_and_relay(Expect::Single, None).await?;
                let res = match self.settle(sent).await? {
                    Outcome::Done(res) => Some(res),
                    _ => None,
                };
                self.after(
                    &statement,
                    Ran::StmtReset,
                    Target::Primary,
                    res.as_ref(),
                    None,
                );
                Ok(())
            }
            _ => {
                // Nothing is pending on any server for this statement.
                write_simple_ok(&mut self.client.out, 1, self.status);
                self.client.flush().await
            }
        }
    }

    pub(super) async fn fetch(&mut self, p: &[u8]) -> Result<(), SessionError> {
        let id = stmt_id(p)?;
        let sql = self.stmts.get(&id).map(|s| s.sql.clone());
        let server_stmt = sql
            .as_ref()
            .and_then(|sql| self.binding.direct().and_then(|a| a.conn().stmt(sql)));
        let Some(s) = server_stmt.filter(|_| self.pins.contains(Pins::CURSOR)) else {
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
        let sent = self.send_and_relay(Expect::Fetch, None).await?;
        let res = match self.settle(sent).await? {
            Outcome::Done(res) => Some(res),
            _ => None,
        };
        let statement = self.stmts.get(&id).map(|st| st.route.statement());
        if let Some(statement) = statement {
            self.after(&statement, Ran::Fetch, Target::Primary, res.as_ref(), None);
        }
        Ok(())
    }
}

fn stmt_id(p: &[u8]) -> Result<u32, SessionError> {
    let mut r = Reader::new(p);
    r.u8("command").map_err(SessionError::Malformed)?;
    r.u32("statement id").map_err(SessionError::Malformed)
}
