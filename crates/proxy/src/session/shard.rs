//! A statement on a sharded layout: the router says where it runs (see
//! `sextant_sharding::route`), and this file carries that out. A statement
//! for one group runs as any other, in that group; a read over several
//! groups has its rows concatenated; a DDL runs on every group holding
//! its table; anything else is refused with the router's reason.
//!
//! A transaction runs in one group: its BEGIN is held back until its first
//! statement names a table, and a later statement for another group is
//! refused (making one transaction atomic over several groups is the
//! distributed-transaction coordinator's job).

use super::Session;
use crate::errors::SessionError;
use crate::shared::Sharding;
use sextant_backend::{Binding, Group, Lease};
use sextant_protocol::codec::write_packet;
use sextant_protocol::consts::status;
use sextant_protocol::packets::{write_eof, write_ok, OkPacket};
use sextant_routing::{plan, Command, Target};
use sextant_sharding::analyze::GroupSet;
use sextant_sharding::{Lit, Route};
use sextant_sql::{Classification, Kind};
use std::sync::Arc;

/// What became of a statement at the sharding step.
pub(super) enum Sharded {
    /// It runs as usual, in the session's (now current) group.
    Continue,
    /// It was answered here.
    Done,
}

impl Session {
    /// Routes a text statement by the layout.
    pub(super) async fn shard_query(
        &mut self,
        sh: &Arc<Sharding>,
        c: &Classification<'_>,
        sql: &[u8],
        packet: &[u8],
    ) -> Result<Sharded, SessionError> {
        let open = self.pinned() || self.status & status::AUTOCOMMIT == 0;
        if c.kind == Kind::Begin && !open && self.pending_begin.is_none() {
            self.pending_begin = Some(sql.to_vec());
            self.status |= status::IN_TRANS;
            self.local_ok().await?;
            return Ok(Sharded::Done);
        }
        if matches!(c.kind, Kind::Commit | Kind::Rollback)
            && self.pending_begin.is_some()
            && !self.binding.in_transaction()
        {
            // Nothing ran in the transaction: there is nothing to end.
            self.pending_begin = None;
            self.status &= !status::IN_TRANS;
            self.local_ok().await?;
            return Ok(Sharded::Done);
        }
        let route = sh
            .router
            .route(self.vars.schema.as_deref(), sql, self.lex_mode(), &[], c);
        self.shard_route(sh, route, packet).await
    }

    /// Sharding at COM_STMT_PREPARE: the statement is prepared in the
    /// group of its first table (or refused if no values could make it
    /// runnable). Inside a transaction it is prepared where the
    /// transaction is.
    pub(super) async fn shard_prepare(
        &mut self,
        sh: &Arc<Sharding>,
        sql: &[u8],
        may_write: bool,
        packet: &[u8],
    ) -> Result<Sharded, SessionError> {
        let route =
            sh.router
                .route_prepare(self.vars.schema.as_deref(), sql, self.lex_mode(), may_write);
        if let Route::Refuse(why) = route {
            self.reply_error(SessionError::ShardUnsupported(why))
                .await?;
            return Ok(Sharded::Done);
        }
        if self.pinned() || self.pending_begin.is_some() {
            return Ok(Sharded::Continue);
        }
        self.shard_route(sh, route, packet).await
    }

    /// Sharding at COM_STMT_EXECUTE: routed by its parameters' values.
    pub(super) async fn shard_execute(
        &mut self,
        sh: &Arc<Sharding>,
        sql: &[u8],
        may_write: bool,
        params: &[Lit<'_>],
        bulk: bool,
    ) -> Result<Sharded, SessionError> {
        let db = self.vars.schema.as_deref();
        let route = match bulk {
            // A bulk execute's rows are not read: only a statement naming
            // no table of the layout may run so.
            true => match sh.router.route_prepare(db, sql, self.lex_mode(), may_write) {
                Route::Session => Route::Session,
                Route::Refuse(why) => Route::Refuse(why),
                _ => Route::Refuse(
                    "COM_STMT_BULK_EXECUTE of a statement on a table the sharding layout places: its rows are not routed one by one yet; execute it row by row".into(),
                ),
            },
            false => {
                let c = sextant_sql::classify(sql);
                sh.router.route(db, sql, self.lex_mode(), params, &c)
            }
        };
        let route = match route {
            Route::Merge(m) => Route::Refuse(format!(
                "a prepared statement for several groups ({}) is not run yet; restrict it by the shard key to one group, or send it as text",
                names(sh, m.groups)
            )),
            Route::Scatter(set) | Route::Broadcast(set) => Route::Refuse(format!(
                "a prepared statement for several groups ({}) is not run yet; restrict it by the shard key to one group, or send it as text",
                names(sh, set)
            )),
            r => r,
        };
        self.shard_route(sh, route, &[]).await
    }

    /// Carries out a route (also for prepared statements' executions).
    pub(super) async fn shard_route(
        &mut self,
        sh: &Arc<Sharding>,
        route: Route,
        packet: &[u8],
    ) -> Result<Sharded, SessionError> {
        let (group, index) = match route {
            Route::Refuse(why) => {
                self.reply_error(SessionError::ShardUnsupported(why))
                    .await?;
                return Ok(Sharded::Done);
            }
            Route::Session => {
                let g = sh
                    .default_group(self.vars.schema.as_deref())
                    .unwrap_or(&self.user.group)
                    .clone();
                // A statement naming no table of the layout does not start
                // the held-back transaction: it runs where the session is.
                if self.pending_begin.is_some() || self.pinned() {
                    return Ok(Sharded::Continue);
                }
                let i = sh.groups.iter().position(|x| Arc::ptr_eq(x, &g));
                (g, i)
            }
            Route::One(i) => match sh.groups.get(i) {
                Some(g) => (g.clone(), Some(i)),
                None => return Ok(Sharded::Continue),
            },
            Route::Merge(_) | Route::Scatter(_) | Route::Broadcast(_) => {
                let set = match &route {
                    Route::Merge(m) => m.groups,
                    Route::Scatter(set) | Route::Broadcast(set) => *set,
                    _ => GroupSet::default(),
                };
                if self.pinned()
                    || self.pending_begin.is_some()
                    || self.status & status::AUTOCOMMIT == 0
                {
                    let e = SessionError::ShardUnsupported(format!(
                        "inside a transaction, a statement for several groups ({}): a transaction runs in one group until distributed transactions are supported",
                        names(sh, set)
                    ));
                    self.reply_error(e).await?;
                    return Ok(Sharded::Done);
                }
                let res = match &route {
                    Route::Merge(plan) => self.merge(sh, plan, packet).await,
                    Route::Scatter(_) => self.scatter(sh, set, packet).await,
                    _ => self.broadcast(sh, set, packet).await,
                };
                return match res {
                    Ok(()) => Ok(Sharded::Done),
                    Err(e @ (SessionError::ClientClosed | SessionError::ClientIo(_))) => Err(e),
                    Err(e) => {
                        self.reply_error(e).await?;
                        Ok(Sharded::Done)
                    }
                };
            }
        };
        if !Arc::ptr_eq(&group, &self.group) {
            if self.pinned() {
                let e = SessionError::ShardUnsupported(format!(
                    "this session's transaction (or state tied to its connection) is in group {}, and the statement is for group {}: a transaction runs in one group until distributed transactions are supported",
                    self.group.name, group.name
                ));
                self.reply_error(e).await?;
                return Ok(Sharded::Done);
            }
            self.release();
            self.enter_group(sh, group, index);
        }
        if let Some(begin) = self.pending_begin.take() {
            if let Err(e) = self.begin_in_group(&begin).await {
                self.status &= !status::IN_TRANS;
                self.reply_error(e).await?;
                return Ok(Sharded::Done);
            }
        }
        Ok(Sharded::Continue)
    }

    /// Makes `group` the session's current group, carrying the newest
    /// write the session made there (read-your-writes is per group: each
    /// has its own primary and GTIDs).
    fn enter_group(&mut self, sh: &Sharding, group: Arc<Group>, index: Option<usize>) {
        if let Some(old) = sh.groups.iter().position(|x| Arc::ptr_eq(x, &self.group)) {
            if let Some(slot) = self.shard_writes.get_mut(old) {
                *slot = self.last_write;
            }
        }
        self.last_write = index.and_then(|i| self.shard_writes.get(i).copied().flatten());
        self.group = group;
    }

    /// Sends the held-back BEGIN to the current group's primary.
    async fn begin_in_group(&mut self, begin: &[u8]) -> Result<(), SessionError> {
        self.attach(Target::Primary).await?;
        let Some(lease) = self.binding.direct_mut() else {
            return Ok(());
        };
        let text = String::from_utf8_lossy(begin).into_owned();
        if let Err(e) = lease.conn_mut().exec_internal(&text).await {
            if !matches!(e, sextant_backend::BackendError::Server { .. }) {
                self.detach_discard();
            }
            return Err(e.into());
        }
        Ok(())
    }

    async fn local_ok(&mut self) -> Result<(), SessionError> {
        let ok = OkPacket {
            status: self.status,
            ..Default::default()
        };
        write_ok(&mut self.client.out, 1, &ok, false);
        self.client.flush().await
    }

    /// One connection per group, each brought to the session's state, for
    /// `target` (a read's replica or primary, by each group's rules).
    async fn leases_for(
        &mut self,
        sh: &Arc<Sharding>,
        set: GroupSet,
        target: Target,
    ) -> Result<Vec<Lease>, SessionError> {
        let home = self.group.clone();
        let mut leases = Vec::with_capacity(set.len() as usize);
        for i in set.iter() {
            let Some(g) = sh.groups.get(i).cloned() else {
                continue;
            };
            self.enter_group(sh, g, Some(i));
            let got = self.attach(target).await;
            let lease = match std::mem::take(&mut self.binding) {
                Binding::Direct(l) => Some(l),
                _ => None,
            };
            if let Err(e) = got {
                self.enter_group(sh, home, None);
                return Err(e);
            }
            leases.extend(lease);
        }
        let home_index = sh.groups.iter().position(|x| Arc::ptr_eq(x, &home));
        self.enter_group(sh, home, home_index);
        Ok(leases)
    }

    /// A read over several groups: the same statement on each, the rows
    /// of all relayed as one result (the first group's column
    /// definitions, every group's rows in turn, one end).
    async fn scatter(
        &mut self,
        sh: &Arc<Sharding>,
        set: GroupSet,
        packet: &[u8],
    ) -> Result<(), SessionError> {
        // The router sends only plain reads here.
        let c = sextant_sql::classify(packet.get(1..).unwrap_or_default());
        let p = plan_for(self, &c);
        self.require(&p);
        self.release();
        let mut leases = self.leases_for(sh, set, p.target).await?;
        // Every group starts at once; each answer waits in its socket
        // until its turn.
        for l in leases.iter_mut() {
            if let Err(e) = l.conn_mut().send(0, packet).await {
                leases.into_iter().for_each(Lease::discard);
                return Err(e.into());
            }
        }
        let mut seq: u8 = 1;
        let mut sent_header = false;
        let mut columns = 0u64;
        let eof_mode = !self.flavor.deprecate_eof();
        let mut result: Result<(), Fail> = Ok(());
        let mut done = 0;
        for (k, l) in leases.iter_mut().enumerate() {
            let r = relay_group(
                l,
                &mut self.client.out,
                &mut seq,
                &mut sent_header,
                &mut columns,
                eof_mode,
            )
            .await;
            if let Err(e) = r {
                result = Err(e);
                break;
            }
            done = k + 1;
            if self.client.out.len() >= 64 * 1024 {
                self.client.flush().await?;
            }
        }
        match result {
            Ok(()) => {
                write_end(&mut self.client.out, seq, self.status, eof_mode);
                self.client.flush().await?;
                drop(leases);
                self.read_done();
                Ok(())
            }
            Err(e) => {
                // The groups not read to the end have answers pending:
                // their connections are closed.
                for (k, l) in leases.into_iter().enumerate() {
                    if k < done {
                        drop(l);
                    } else {
                        l.discard();
                    }
                }
                self.fail_spread(e, sent_header.then_some(seq)).await
            }
        }
    }

    /// A read over several groups whose rows are merged by the ORDER BY
    /// items (hidden columns each group adds) and cut to the LIMIT. Rows
    /// stream: one row per group is held at a time, whatever the OFFSET.
    async fn merge(
        &mut self,
        sh: &Arc<Sharding>,
        plan: &sextant_sharding::route::MergePlan,
        packet: &[u8],
    ) -> Result<(), SessionError> {
        // The statement each group runs, after the client's command
        // prefix (COM_QUERY, and its attributes under QUERY_ATTRIBUTES).
        let prefix = match self.flavor.caps & sextant_protocol::consts::cap::QUERY_ATTRIBUTES {
            0 => 1,
            _ => sextant_protocol::packets::query_text_offset(packet, true)
                .map_err(SessionError::Malformed)?,
        };
        let mut q = Vec::with_capacity(prefix + plan.sql.len());
        q.extend_from_slice(&packet[..prefix]);
        q.extend_from_slice(&plan.sql);
        let c = sextant_sql::classify(&plan.sql);
        let p = plan_for(self, &c);
        self.require(&p);
        self.release();
        let mut leases = self.leases_for(sh, plan.groups, p.target).await?;
        for l in leases.iter_mut() {
            if let Err(e) = l.conn_mut().send(0, &q).await {
                leases.into_iter().for_each(Lease::discard);
                return Err(e.into());
            }
        }
        let eof_mode = !self.flavor.deprecate_eof();
        let hidden = plan.hidden();
        let res = match plan.aggregates.is_empty() {
            true => {
                merge_rows(
                    &mut leases,
                    &mut self.client,
                    plan,
                    hidden,
                    eof_mode,
                    self.status,
                )
                .await
            }
            false => {
                merge_aggregates(&mut leases, &mut self.client, plan, eof_mode, self.status).await
            }
        };
        match res {
            Ok(finished) => {
                for (l, done) in leases.into_iter().zip(finished) {
                    if done {
                        drop(l);
                    } else {
                        // Rows the LIMIT did not need are still coming.
                        l.discard();
                    }
                }
                self.read_done();
                Ok(())
            }
            Err((e, sent)) => {
                leases.into_iter().for_each(Lease::discard);
                self.fail_spread(e, sent).await
            }
        }
    }

    /// A statement over several groups failed. Nothing sent yet (`sent`
    /// None): the client gets the server's own error, or sextant's. Rows
    /// already went out (`sent`: the next sequence number): the client gets
    /// an error in place of the next row, and drops the result.
    async fn fail_spread(&mut self, e: Fail, sent: Option<u8>) -> Result<(), SessionError> {
        if sent.is_none() {
            self.client.out.clear();
        }
        let e = match e {
            Fail::Server(_, pkt) if sent.is_none() => {
                write_packet(&mut self.client.out, 1, &pkt);
                return self.client.flush().await;
            }
            Fail::Server(addr, pkt) => server_error(&addr, &pkt),
            Fail::Other(e) => e,
        };
        let Some(seq) = sent else {
            return Err(e);
        };
        let text = e.to_string();
        let mut err = Vec::with_capacity(text.len() + 9);
        err.push(0xff);
        err.extend_from_slice(&crate::errors::ER_SEXTANT_SHARD_PARTIAL.to_le_bytes());
        err.extend_from_slice(b"#HY000");
        err.extend_from_slice(text.as_bytes());
        write_packet(&mut self.client.out, seq, &err);
        self.client.flush().await
    }

    /// A DDL on every group holding its table, one after another, each on
    /// its primary. A failure stops it, and says which groups it reached.
    async fn broadcast(
        &mut self,
        sh: &Arc<Sharding>,
        set: GroupSet,
        packet: &[u8],
    ) -> Result<(), SessionError> {
        self.release();
        let mut done: Vec<&str> = Vec::new();
        let mut warnings = 0u16;
        for i in set.iter() {
            let name = sh.router.group_name(i);
            let mut leases = self
                .leases_for(sh, GroupSet::one(i), Target::Primary)
                .await?;
            let Some(l) = leases.first_mut() else {
                continue;
            };
            let answer = async {
                l.conn_mut().send(0, packet).await?;
                l.conn_mut().read_packet().await
            }
            .await;
            let pkt = match answer {
                Ok((_, pkt)) => pkt,
                Err(e) => {
                    leases.into_iter().for_each(Lease::discard);
                    return Err(SessionError::ShardPartial(format!(
                        "the statement ran on {} and failed on group {name}: {e}; it was not sent to the groups after it",
                        if done.is_empty() { "no group".to_string() } else { format!("groups {}", done.join(", ")) }
                    )));
                }
            };
            match pkt.first() {
                Some(0x00) => {
                    if let Ok(ok) = sextant_protocol::packets::parse_ok(&pkt, true) {
                        warnings = warnings.saturating_add(ok.warnings);
                    }
                    done.push(name);
                }
                _ => {
                    let msg = match pkt.get(9..) {
                        Some(m) if pkt.first() == Some(&0xff) => {
                            String::from_utf8_lossy(m).into_owned()
                        }
                        _ => "an unexpected answer".to_string(),
                    };
                    drop(leases);
                    if done.is_empty() {
                        // Nothing ran anywhere: the server's own error.
                        self.client.out.clear();
                        write_packet(&mut self.client.out, 1, &pkt);
                        return self.client.flush().await;
                    }
                    return Err(SessionError::ShardPartial(format!(
                        "the statement ran on groups {} and failed on group {name}: {msg}; it was not sent to the groups after it",
                        done.join(", ")
                    )));
                }
            }
        }
        let ok = OkPacket {
            status: self.status,
            warnings,
            ..Default::default()
        };
        write_ok(&mut self.client.out, 1, &ok, false);
        self.client.flush().await
    }
}

/// A prepared statement's parameter values as the router reads them.
pub(super) fn param_lits<'a>(values: &[sextant_protocol::binary::Value<'a>]) -> Vec<Lit<'a>> {
    use sextant_protocol::binary::Value;
    values
        .iter()
        .map(|v| match v {
            Value::Null => Lit::Null,
            Value::Int(i) => Lit::Int(*i),
            Value::UInt(u) => i64::try_from(*u).map_or(Lit::Other, Lit::Int),
            // 5.0 is 5 to an integer column.
            Value::Double(d) if d.fract() == 0.0 && d.abs() < 9.0e15 => Lit::Int(*d as i64),
            Value::Bytes(b) => Lit::Str(std::borrow::Cow::Borrowed(b)),
            Value::DateTime(s) => Lit::Str(std::borrow::Cow::Owned(s.clone().into_bytes())),
            Value::Double(_) | Value::Other => Lit::Other,
        })
        .collect()
}

fn names(sh: &Sharding, set: GroupSet) -> String {
    set.iter()
        .map(|i| sh.router.group_name(i))
        .collect::<Vec<_>>()
        .join(", ")
}

fn plan_for(s: &mut Session, c: &Classification<'_>) -> sextant_routing::Plan {
    plan(
        c,
        s.facts(),
        &s.user.policy,
        s.group.plan_facts(),
        Command::Query,
        &mut s.cursor,
    )
}

/// One group's result stream in a merge.
struct Stream {
    row: Option<Vec<u8>>,
    cells: Vec<Option<(usize, usize)>>,
    done: bool,
}

/// Reads the next row of a group (None at its end).
async fn next_row(l: &mut Lease, n: usize) -> Result<Stream, Fail> {
    let conn = l.conn_mut();
    let (_, row) = conn.read_packet().await?;
    match row.first() {
        Some(0xff) => Err(Fail::Server(conn.addr.clone(), row)),
        Some(0xfe) if row.len() < 0xff_ff_ff => Ok(Stream {
            row: None,
            cells: Vec::new(),
            done: true,
        }),
        _ => {
            let cells = cells(&row, n).ok_or_else(|| {
                Fail::Other(SessionError::ShardUnsupported(
                    "a row that does not read as text-protocol cells".into(),
                ))
            })?;
            Ok(Stream {
                row: Some(row),
                cells,
                done: false,
            })
        }
    }
}

/// The merge itself: the first group's visible column definitions, then
/// rows in ORDER BY order (hidden columns cut off), OFFSET skipped, up to
/// the LIMIT, then one end. Returns which groups were read to their end;
/// on error, whether anything reached the client.
async fn merge_rows(
    leases: &mut [Lease],
    client: &mut crate::client::Client,
    plan: &sextant_sharding::route::MergePlan,
    hidden: usize,
    eof_mode: bool,
    session_status: u16,
) -> Result<Vec<bool>, (Fail, Option<u8>)> {
    // Until the first flush, an error replaces everything written.
    let mut flushed = false;
    let mut seq: u8 = 1;
    let mut n = 0usize;
    let mut kinds: Vec<KeyKind> = Vec::new();
    for (k, l) in leases.iter_mut().enumerate() {
        let conn = l.conn_mut();
        let (_, first) = conn.read_packet().await.map_err(|e| (e.into(), None))?;
        match first.first() {
            Some(0xff) => return Err((Fail::Server(conn.addr.clone(), first), None)),
            Some(0x00) | None => {
                return Err((
                    Fail::Other(SessionError::ShardUnsupported(
                        "a read over several groups returned no rows on one of them".into(),
                    )),
                    None,
                ))
            }
            _ => {}
        }
        let cols = lenenc(&first) as usize;
        if k == 0 {
            n = cols;
            if cols < hidden {
                return Err((
                    Fail::Other(SessionError::ShardUnsupported(
                        "fewer columns than the merge added".into(),
                    )),
                    None,
                ));
            }
        } else if cols != n {
            return Err((
                Fail::Other(SessionError::ShardUnsupported(format!(
                    "the groups answered with different columns ({n} and {cols})"
                ))),
                None,
            ));
        }
        let mut defs = Vec::with_capacity(cols);
        for _ in 0..cols {
            let (_, def) = conn.read_packet().await.map_err(|e| (e.into(), None))?;
            defs.push(def);
        }
        if eof_mode {
            conn.read_packet().await.map_err(|e| (e.into(), None))?;
        }
        if k == 0 {
            for i in 0..hidden / 3 {
                match key_kind(&defs[cols - hidden + 3 * i]) {
                    Ok(kind) => kinds.push(kind),
                    Err(why) => {
                        return Err((
                            Fail::Other(SessionError::ShardUnsupported(format!(
                                "a read over several groups ordered by {why}: sextant cannot merge by it"
                            ))),
                            None,
                        ))
                    }
                }
            }
            let visible = cols - hidden;
            let mut count = Vec::with_capacity(9);
            write_lenenc(&mut count, visible as u64);
            client.out.clear();
            seq = write_packet(&mut client.out, seq, &count);
            for def in &defs[..visible] {
                seq = write_packet(&mut client.out, seq, def);
            }
            if eof_mode {
                seq = write_packet(&mut client.out, seq, &[0xfe, 0, 0, 0x02, 0]);
            }
        }
    }
    let visible = n - hidden;
    let mut streams = Vec::with_capacity(leases.len());
    for l in leases.iter_mut() {
        streams.push(next_row(l, n).await.map_err(|e| (e, None))?);
    }
    let mut skipped = 0u64;
    let mut sent = 0u64;
    loop {
        if plan.count.is_some_and(|c| sent >= c) {
            break;
        }
        // The smallest current row (the lowest group first among equals).
        let mut best: Option<usize> = None;
        for (i, s) in streams.iter().enumerate() {
            let Some(row) = &s.row else { continue };
            let Some(b) = best else {
                best = Some(i);
                continue;
            };
            let other = &streams[b];
            let Some(orow) = &other.row else { continue };
            let mut ord = std::cmp::Ordering::Equal;
            for (j, kind) in kinds.iter().enumerate() {
                let base = visible + 3 * j;
                let cell = |r: &[u8], c: &[Option<(usize, usize)>], k: usize| -> Option<Vec<u8>> {
                    c[k].map(|(a, z)| r[a..z].to_vec())
                };
                let o = match kind {
                    KeyKind::Weight => {
                        let x = cell(row, &s.cells, base + 1);
                        let y = cell(orow, &other.cells, base + 1);
                        let padded = cell(row, &s.cells, base + 2);
                        let space = match (&x, &padded) {
                            (Some(w), Some(p)) if p.starts_with(w) => p[w.len()..].to_vec(),
                            _ => Vec::new(),
                        };
                        match (s.cells[base], other.cells[base]) {
                            (None, None) => std::cmp::Ordering::Equal,
                            (None, _) => std::cmp::Ordering::Less,
                            (_, None) => std::cmp::Ordering::Greater,
                            _ => pad_compare(
                                x.as_deref().unwrap_or_default(),
                                y.as_deref().unwrap_or_default(),
                                &space,
                            ),
                        }
                    }
                    _ => compare(
                        *kind,
                        cell(row, &s.cells, base).as_deref(),
                        cell(orow, &other.cells, base).as_deref(),
                    ),
                };
                let o = if plan.order[j] { o.reverse() } else { o };
                if o != std::cmp::Ordering::Equal {
                    ord = o;
                    break;
                }
            }
            if ord == std::cmp::Ordering::Less {
                best = Some(i);
            }
        }
        let Some(b) = best else { break };
        if skipped < plan.offset {
            skipped += 1;
        } else {
            let s = &streams[b];
            if let Some(row) = &s.row {
                let end = match hidden {
                    0 => row.len(),
                    _ => visible_end(row, visible),
                };
                seq = write_packet(&mut client.out, seq, &row[..end]);
                sent += 1;
            }
            if client.out.len() >= 64 * 1024 {
                client
                    .flush()
                    .await
                    .map_err(|e| (Fail::Other(e), Some(seq)))?;
                flushed = true;
            }
        }
        streams[b] = next_row(&mut leases[b], n)
            .await
            .map_err(|e| (e, flushed.then_some(seq)))?;
    }
    let st = session_status & !status::MORE_RESULTS_EXISTS;
    if eof_mode {
        write_eof(&mut client.out, seq, st);
    } else {
        let ok = OkPacket {
            header: 0xfe,
            status: st,
            ..Default::default()
        };
        write_ok(&mut client.out, seq, &ok, false);
    }
    client
        .flush()
        .await
        .map_err(|e| (Fail::Other(e), Some(seq)))?;
    Ok(streams.iter().map(|s| s.done).collect())
}

fn refused(why: String) -> Fail {
    Fail::Other(SessionError::ShardUnsupported(why))
}

/// A select list of plain aggregates over several groups: each group's one
/// row, combined (COUNT and SUM added exactly, MIN and MAX picked), sent
/// as one row under the first group's column definitions.
async fn merge_aggregates(
    leases: &mut [Lease],
    client: &mut crate::client::Client,
    plan: &sextant_sharding::route::MergePlan,
    eof_mode: bool,
    session_status: u16,
) -> Result<Vec<bool>, (Fail, Option<u8>)> {
    use sextant_sharding::analyze::Agg;
    let n = plan.aggregates.len();
    let mut seq: u8 = 1;
    let mut kinds: Vec<KeyKind> = Vec::with_capacity(n);
    let mut acc: Vec<Option<Vec<u8>>> = vec![None; n];
    client.out.clear();
    for (k, l) in leases.iter_mut().enumerate() {
        let conn = l.conn_mut();
        let (_, first) = conn.read_packet().await.map_err(|e| (e.into(), None))?;
        match first.first() {
            Some(0xff) => return Err((Fail::Server(conn.addr.clone(), first), None)),
            Some(0x00) | None => {
                return Err((refused("an aggregate read returned no rows".into()), None))
            }
            _ => {}
        }
        if lenenc(&first) as usize != n {
            return Err((
                refused("the groups answered with other columns than asked".into()),
                None,
            ));
        }
        let mut defs = Vec::with_capacity(n);
        for _ in 0..n {
            defs.push(conn.read_packet().await.map_err(|e| (e.into(), None))?.1);
        }
        if eof_mode {
            conn.read_packet().await.map_err(|e| (e.into(), None))?;
        }
        if k == 0 {
            for (def, agg) in defs.iter().zip(&plan.aggregates) {
                let kind = key_kind(def)
                    .map_err(|why| (refused(format!("an aggregate of {why}")), None))?;
                let ok = match agg {
                    Agg::Count => kind == KeyKind::Int,
                    // Floating-point sums would round as sextant adds, not
                    // as the server does.
                    Agg::Sum => matches!(kind, KeyKind::Int | KeyKind::Decimal),
                    // Strings pick by collation: not merged yet.
                    Agg::Min | Agg::Max => kind != KeyKind::Weight,
                };
                if !ok {
                    return Err((
                        refused(format!(
                            "{} of this column's type over several groups is not merged yet (COUNT; SUM of integers and DECIMALs; MIN and MAX of numbers and dates are)",
                            format!("{agg:?}").to_uppercase()
                        )),
                        None,
                    ));
                }
                kinds.push(kind);
            }
            let mut count = Vec::with_capacity(9);
            write_lenenc(&mut count, n as u64);
            seq = write_packet(&mut client.out, seq, &count);
            for def in &defs {
                seq = write_packet(&mut client.out, seq, def);
            }
            if eof_mode {
                seq = write_packet(&mut client.out, seq, &[0xfe, 0, 0, 0x02, 0]);
            }
        }
        let row = next_row(l, n).await.map_err(|e| (e, None))?;
        let Some(bytes) = &row.row else {
            return Err((
                refused("an aggregate read returned no row on one group".into()),
                None,
            ));
        };
        for (i, agg) in plan.aggregates.iter().enumerate() {
            let cell = row.cells[i].map(|(a, z)| bytes[a..z].to_vec());
            acc[i] = match (acc[i].take(), cell) {
                (None, c) | (c, None) if *agg != Agg::Count => c,
                (Some(a), Some(b)) => Some(match agg {
                    Agg::Count | Agg::Sum => decimal_add(&a, &b).ok_or_else(|| {
                        (
                            refused("a SUM beyond 38 digits over several groups".into()),
                            None,
                        )
                    })?,
                    Agg::Min | Agg::Max => {
                        let o = compare(kinds[i], Some(&a), Some(&b));
                        let keep_a = match agg {
                            Agg::Min => o != std::cmp::Ordering::Greater,
                            _ => o != std::cmp::Ordering::Less,
                        };
                        if keep_a {
                            a
                        } else {
                            b
                        }
                    }
                }),
                (a, b) => a.or(b),
            };
        }
        // The group's end.
        let end = next_row(l, n).await.map_err(|e| (e, None))?;
        if !end.done {
            return Err((
                refused("an aggregate read returned more than one row on a group".into()),
                None,
            ));
        }
    }
    let mut row = Vec::new();
    for v in &acc {
        match v {
            None => row.push(0xfb),
            Some(v) => {
                write_lenenc(&mut row, v.len() as u64);
                row.extend_from_slice(v);
            }
        }
    }
    seq = write_packet(&mut client.out, seq, &row);
    write_end(&mut client.out, seq, session_status, eof_mode);
    client
        .flush()
        .await
        .map_err(|e| (Fail::Other(e), Some(seq)))?;
    Ok(vec![true; leases.len()])
}

/// The exact sum of two decimal numbers written out (`-12.50`, `3`), in
/// the larger scale of the two; None beyond 38 digits.
fn decimal_add(a: &[u8], b: &[u8]) -> Option<Vec<u8>> {
    let parse = |v: &[u8]| -> Option<(i128, u32)> {
        let t = std::str::from_utf8(v).ok()?.trim();
        let (neg, t) = match t.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, t),
        };
        let (int, frac) = t.split_once('.').unwrap_or((t, ""));
        let digits = format!("{int}{frac}");
        let m: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().ok()?
        };
        Some((if neg { -m } else { m }, frac.len() as u32))
    };
    let ((x, sx), (y, sy)) = (parse(a)?, parse(b)?);
    let scale = sx.max(sy);
    let x = x.checked_mul(10i128.checked_pow(scale - sx)?)?;
    let y = y.checked_mul(10i128.checked_pow(scale - sy)?)?;
    let sum = x.checked_add(y)?;
    let digits = sum.unsigned_abs().to_string();
    let scale = scale as usize;
    let digits = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = digits.split_at(digits.len() - scale);
    let mut out = String::new();
    if sum < 0 {
        out.push('-');
    }
    out.push_str(int);
    if scale > 0 {
        out.push('.');
        out.push_str(frac);
    }
    Some(out.into_bytes())
}

/// One end for a result made of several groups' rows: the session's own
/// status (the groups' ends are not relayed).
fn write_end(out: &mut Vec<u8>, seq: u8, session_status: u16, eof_mode: bool) {
    let st = session_status & !status::MORE_RESULTS_EXISTS;
    if eof_mode {
        write_eof(out, seq, st);
    } else {
        let ok = OkPacket {
            header: 0xfe,
            status: st,
            ..Default::default()
        };
        write_ok(out, seq, &ok, false);
    }
}

/// Where the first `visible` cells of a text row end.
fn visible_end(row: &[u8], visible: usize) -> usize {
    let mut i = 0;
    for _ in 0..visible {
        if row.get(i) == Some(&0xfb) {
            i += 1;
            continue;
        }
        let mut r = sextant_protocol::codec::Reader::new(row.get(i..).unwrap_or_default());
        match r.lenenc_bytes("cell") {
            Ok(_) => i = row.len() - r.remaining(),
            Err(_) => return row.len(),
        }
    }
    i
}

fn write_lenenc(out: &mut Vec<u8>, v: u64) {
    match v {
        0..=0xfa => out.push(v as u8),
        0xfb..=0xffff => {
            out.push(0xfc);
            out.extend_from_slice(&(v as u16).to_le_bytes());
        }
        0x1_0000..=0xff_ffff => {
            out.push(0xfd);
            out.extend_from_slice(&(v as u32).to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xfe);
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
}

/// Why a group's answer could not be relayed: the server's error packet,
/// or anything else.
enum Fail {
    Server(Arc<str>, Vec<u8>),
    Other(SessionError),
}

impl<E: Into<SessionError>> From<E> for Fail {
    fn from(e: E) -> Fail {
        Fail::Other(e.into())
    }
}

/// Relays one group's result set: its header and column definitions only
/// for the first group (the others' are read and dropped), its rows, and
/// not its end (the caller writes one for all).
async fn relay_group(
    l: &mut Lease,
    out: &mut Vec<u8>,
    seq: &mut u8,
    sent_header: &mut bool,
    columns: &mut u64,
    eof_mode: bool,
) -> Result<(), Fail> {
    let conn = l.conn_mut();
    let (_, first) = conn.read_packet().await?;
    match first.first() {
        Some(0xff) => return Err(Fail::Server(conn.addr.clone(), first)),
        Some(0x00) | None => {
            return Err(Fail::Other(SessionError::ShardUnsupported(
                "a statement spread over several groups returned no rows on one of them".into(),
            )))
        }
        _ => {}
    }
    let n = lenenc(&first);
    let header = !*sent_header;
    if header {
        *seq = write_packet(out, *seq, &first);
        *columns = n;
    } else if n != *columns {
        return Err(Fail::Other(SessionError::ShardUnsupported(format!(
            "the groups answered with different columns ({} and {n})",
            *columns
        ))));
    }
    for _ in 0..n {
        let (_, def) = conn.read_packet().await?;
        if header {
            *seq = write_packet(out, *seq, &def);
        }
    }
    if eof_mode {
        let (_, eof) = conn.read_packet().await?;
        if header {
            *seq = write_packet(out, *seq, &eof);
        }
    }
    *sent_header = true;
    loop {
        let (_, row) = conn.read_packet().await?;
        match row.first() {
            Some(0xff) => return Err(Fail::Server(conn.addr.clone(), row)),
            // The end: an EOF, or an OK with the EOF header.
            Some(0xfe) if row.len() < 0xff_ff_ff => return Ok(()),
            _ => *seq = write_packet(out, *seq, &row),
        }
    }
}

fn lenenc(p: &[u8]) -> u64 {
    match p.first() {
        Some(&b) if b < 0xfb => b as u64,
        Some(0xfc) if p.len() >= 3 => u16::from_le_bytes([p[1], p[2]]) as u64,
        Some(0xfd) if p.len() >= 4 => u32::from_le_bytes([p[1], p[2], p[3], 0]) as u64,
        _ => 0,
    }
}

fn server_error(addr: &str, pkt: &[u8]) -> SessionError {
    let code = pkt
        .get(1..3)
        .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]));
    let msg = pkt
        .get(9..)
        .map_or(String::new(), |m| String::from_utf8_lossy(m).into_owned());
    SessionError::ShardPartial(format!("server {addr} answered error {code}: {msg}"))
}

/// How one ORDER BY item of a merge compares, from its hidden value
/// column's definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyKind {
    Int,
    Decimal,
    Float,
    /// DATE, DATETIME, TIMESTAMP: their text sorts as they do.
    Bytes,
    Time,
    /// Strings in a collation: by their WEIGHT_STRING column.
    Weight,
}

/// The kind of an ORDER BY value column, or why it cannot be merged on.
fn key_kind(def: &[u8]) -> Result<KeyKind, String> {
    let mut r = sextant_protocol::codec::Reader::new(def);
    for what in [
        "catalog",
        "schema",
        "table",
        "org_table",
        "name",
        "org_name",
    ] {
        r.lenenc_bytes(what)
            .map_err(|e| format!("column definition: {e}"))?;
    }
    let rest = &def[def.len() - r.remaining()..];
    // MariaDB's extended metadata comes before the fixed fields.
    let fixed = match rest.first() {
        Some(0x0c) => &rest[1..],
        _ => {
            let mut r = sextant_protocol::codec::Reader::new(rest);
            r.lenenc_bytes("extended metadata")
                .map_err(|e| format!("column definition: {e}"))?;
            let rest = &rest[rest.len() - r.remaining()..];
            rest.get(1..).unwrap_or_default()
        }
    };
    if fixed.len() < 10 {
        return Err("a short column definition".into());
    }
    let charset = u16::from_le_bytes([fixed[0], fixed[1]]);
    let ty = fixed[6];
    let flags = u16::from_le_bytes([fixed[7], fixed[8]]);
    const ENUM: u16 = 0x100;
    const SET: u16 = 0x800;
    if flags & (ENUM | SET) != 0 {
        return Err("an ENUM or SET column (the server orders those by their index)".into());
    }
    Ok(match ty {
        1 | 2 | 3 | 8 | 9 | 13 => KeyKind::Int,
        0 | 246 => KeyKind::Decimal,
        4 | 5 => KeyKind::Float,
        7 | 10 | 12 | 14 | 17 | 18 | 16 => KeyKind::Bytes,
        11 | 19 => KeyKind::Time,
        6 => KeyKind::Bytes,
        _ if charset == 63 => KeyKind::Bytes,
        _ => KeyKind::Weight,
    })
}

/// Offsets of a text-protocol row's cells (None: NULL).
fn cells(row: &[u8], n: usize) -> Option<Vec<Option<(usize, usize)>>> {
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    for _ in 0..n {
        if row.get(i) == Some(&0xfb) {
            out.push(None);
            i += 1;
            continue;
        }
        let mut r = sextant_protocol::codec::Reader::new(row.get(i..)?);
        let v = r.lenenc_bytes("cell").ok()?;
        let start = row.len() - r.remaining() - v.len();
        out.push(Some((start, start + v.len())));
        i = row.len() - r.remaining();
    }
    Some(out)
}

/// Compares two values of one ORDER BY item, ascending, NULL first (as
/// MySQL sorts).
fn compare(kind: KeyKind, a: Option<&[u8]>, b: Option<&[u8]>) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (a, b) = match (a, b) {
        (None, None) => return Ordering::Equal,
        (None, _) => return Ordering::Less,
        (_, None) => return Ordering::Greater,
        (Some(a), Some(b)) => (a, b),
    };
    let text = |v: &[u8]| std::str::from_utf8(v).unwrap_or("").trim().to_string();
    match kind {
        KeyKind::Int => {
            let p = |v: &[u8]| text(v).parse::<i128>().unwrap_or(0);
            p(a).cmp(&p(b))
        }
        KeyKind::Float => {
            let p = |v: &[u8]| text(v).parse::<f64>().unwrap_or(0.0);
            p(a).total_cmp(&p(b))
        }
        KeyKind::Decimal => decimal_cmp(&text(a), &text(b)),
        KeyKind::Time => {
            let secs = |v: &[u8]| {
                let t = text(v);
                let (neg, t) = match t.strip_prefix('-') {
                    Some(r) => (true, r.to_string()),
                    None => (false, t),
                };
                let mut parts = t.split(':');
                let h: f64 = parts.next().and_then(|x| x.parse().ok()).unwrap_or(0.0);
                let m: f64 = parts.next().and_then(|x| x.parse().ok()).unwrap_or(0.0);
                let s: f64 = parts.next().and_then(|x| x.parse().ok()).unwrap_or(0.0);
                let v = h * 3600.0 + m * 60.0 + s;
                if neg {
                    -v
                } else {
                    v
                }
            };
            secs(a).total_cmp(&secs(b))
        }
        KeyKind::Bytes | KeyKind::Weight => a.cmp(b),
    }
}

/// Compares collation weights as the server compares strings with PAD
/// SPACE: the shorter as if followed by spaces (`space`: a space's
/// weight).
fn pad_compare(a: &[u8], b: &[u8], space: &[u8]) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let common = a.len().min(b.len());
    match a[..common].cmp(&b[..common]) {
        Ordering::Equal => {}
        o => return o,
    }
    let (rest, flip) = match a.len().cmp(&b.len()) {
        Ordering::Equal => return Ordering::Equal,
        Ordering::Greater => (&a[common..], false),
        Ordering::Less => (&b[common..], true),
    };
    // The longer one's remainder against spaces.
    let o = if space.is_empty() {
        Ordering::Greater
    } else {
        rest.chunks(space.len())
            .map(|ch| ch.cmp(&space[..ch.len()]))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
    };
    if flip {
        o.reverse()
    } else {
        o
    }
}

/// Exact comparison of two decimal numbers written out (`-12.50`, `3`).
fn decimal_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let split = |s: &str| {
        let (neg, s) = match s.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, s.strip_prefix('+').unwrap_or(s)),
        };
        let (int, frac) = s.split_once('.').unwrap_or((s, ""));
        let int = int.trim_start_matches('0').to_string();
        let frac = frac.trim_end_matches('0').to_string();
        let zero = int.is_empty() && frac.is_empty();
        (neg && !zero, int, frac)
    };
    let (na, ia, fa) = split(a);
    let (nb, ib, fb) = split(b);
    let magnitude = ia
        .len()
        .cmp(&ib.len())
        .then_with(|| ia.cmp(&ib))
        .then_with(|| fa.cmp(&fb));
    match (na, nb) {
        (false, false) => magnitude,
        (true, true) => magnitude.reverse(),
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering::*;

    #[test]
    fn decimals_add_exactly() {
        let add = |a: &str, b: &str| {
            String::from_utf8(decimal_add(a.as_bytes(), b.as_bytes()).unwrap()).unwrap()
        };
        assert_eq!(add("1.250", "2.5"), "3.750");
        assert_eq!(add("-1.250", "0.250"), "-1.000");
        assert_eq!(add("-0.5", "0.25"), "-0.25");
        assert_eq!(add("12", "30"), "42");
        assert_eq!(
            add("99999999999999999999999999.999", "0.001"),
            "100000000000000000000000000.000"
        );
        assert!(decimal_add(
            b"99999999999999999999999999999999999999",
            b"99999999999999999999999999999999999999"
        )
        .is_none());
    }

    #[test]
    fn decimals_compare_exactly() {
        assert_eq!(decimal_cmp("10.5", "9.75"), Greater);
        assert_eq!(decimal_cmp("-10.5", "-9.75"), Less);
        assert_eq!(decimal_cmp("0.10", "0.1"), Equal);
        assert_eq!(decimal_cmp("-0.00", "0"), Equal);
        assert_eq!(
            decimal_cmp("123456789012345678901234.5", "123456789012345678901234.49"),
            Greater
        );
        assert_eq!(decimal_cmp("-1", "0.5"), Less);
    }

    #[test]
    fn nulls_first_and_types() {
        assert_eq!(compare(KeyKind::Int, None, Some(b"-5")), Less);
        assert_eq!(compare(KeyKind::Int, Some(b"-5"), Some(b"3")), Less);
        assert_eq!(
            compare(KeyKind::Int, Some(b"18446744073709551615"), Some(b"3")),
            Greater
        );
        assert_eq!(
            compare(KeyKind::Float, Some(b"1e3"), Some(b"999.5")),
            Greater
        );
        assert_eq!(
            compare(KeyKind::Time, Some(b"-01:00:00"), Some(b"00:30:00")),
            Less
        );
        assert_eq!(
            compare(KeyKind::Time, Some(b"100:00:00"), Some(b"99:00:00")),
            Greater
        );
        // 'ab' = 'ab  ' (trailing spaces), 'ab' > 'ab\t' (below a space).
        let sp = [0, 0x20];
        assert_eq!(
            pad_compare(
                &[0, 0x41, 0, 0x42],
                &[0, 0x41, 0, 0x42, 0, 0x20, 0, 0x20],
                &sp
            ),
            Equal
        );
        assert_eq!(
            pad_compare(&[0, 0x41, 0, 0x42], &[0, 0x41, 0, 0x42, 0, 0x09], &sp),
            Greater
        );
        assert_eq!(pad_compare(&[0, 0x41], &[0, 0x41, 0, 0x42], &sp), Less);
        let row = [1, b'a', 0xfb, 2, b'b', b'c'];
        assert_eq!(cells(&row, 3), Some(vec![Some((1, 2)), None, Some((4, 6))]));
    }
}
