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

use super::query::Next;
use super::spread::names;
use super::Session;
use crate::errors::SessionError;
use crate::runtime::Sharding;
use sextant_backend::{Group, Lease};
use sextant_protocol::consts::status;
use sextant_protocol::packets::{write_ok, OkPacket};
use sextant_routing::Target;
use sextant_sharding::analyze::GroupSet;
use sextant_sharding::{Lit, Route};
use sextant_sql::{Classification, Kind};
use std::sync::Arc;

impl Session {
    /// Routes a text statement by the layout.
    pub(super) async fn shard_query(
        &mut self,
        sh: &Arc<Sharding>,
        c: &Classification<'_>,
        sql: &[u8],
        packet: &[u8],
    ) -> Result<Next, SessionError> {
        if let Some(f) = about_last_statement(sql, self.last) {
            self.reply_error(SessionError::ShardUnsupported(format!(
                "{f} after a statement that ran over several groups (or, for FOUND_ROWS(), a write, which counts one group's rows): no one server holds its value, and sextant does not compute it yet; read it after a SELECT that runs in one group"
            )))
            .await?;
            return Ok(Next::Done);
        }
        if self.in_dist() {
            let mode = self.lex_mode();
            match c.kind {
                Kind::Commit => {
                    self.xa_finish(sh, true, chains(sql, mode)).await?;
                    return Ok(Next::Done);
                }
                Kind::Rollback if !rollback_to(sql, mode) => {
                    self.xa_finish(sh, false, chains(sql, mode)).await?;
                    return Ok(Next::Done);
                }
                Kind::Begin => {
                    // As the server does: BEGIN inside a transaction
                    // commits it first.
                    if let Err(e) = self.xa_end(sh, true).await {
                        self.reply_error(e).await?;
                        return Ok(Next::Done);
                    }
                    self.savepoints.clear();
                    self.pending_begin = Some(sql.to_vec());
                    self.status |= status::IN_TRANS;
                    self.local_ok().await?;
                    return Ok(Next::Done);
                }
                Kind::Set
                    if sextant_sql::session_info::autocommit_assignment(sql, mode)
                        .is_some_and(|v| v != Some(false)) =>
                {
                    if sextant_sql::session_info::autocommit_assignment(sql, mode) == Some(None) {
                        // Whether it commits depends on a value only the
                        // server can read.
                        self.reply_error(SessionError::ShardUnsupported(
                            "SET autocommit to a value other than a literal inside a transaction sextant coordinates: write 1 or 0 (ON or OFF)".into(),
                        ))
                        .await?;
                        return Ok(Next::Done);
                    }
                    // As the server does: turning autocommit on commits
                    // the open transaction (the server would refuse the
                    // SET inside an XA branch).
                    if let Err(e) = self.xa_end(sh, true).await {
                        self.reply_error(e).await?;
                        return Ok(Next::Done);
                    }
                }
                _ => {
                    let why = self.xa_refusal(c).or_else(|| {
                        (c.kind == Kind::Rollback && self.dist_groups() > 1).then(|| {
                            "ROLLBACK TO SAVEPOINT in a transaction over several groups: a savepoint covers only one group's branch".to_string()
                        })
                    });
                    if let Some(why) = why {
                        self.reply_error(SessionError::ShardUnsupported(why))
                            .await?;
                        return Ok(Next::Done);
                    }
                }
            }
        } else if c.kind == Kind::Xa {
            self.reply_error(SessionError::ShardUnsupported(
                "XA statements on a sharded layout: sextant itself coordinates transactions over several groups (with XA); use BEGIN ... COMMIT".into(),
            ))
            .await?;
            return Ok(Next::Done);
        }
        if c.kind == Kind::Set
            && self.pending_begin.is_some()
            && !self.binding.in_transaction()
            && sextant_sql::session_info::autocommit_assignment(sql, self.lex_mode())
                == Some(Some(true))
        {
            // It ends the transaction that has not run anything yet.
            self.pending_begin = None;
            self.status &= !status::IN_TRANS;
        }
        if matches!(c.kind, Kind::Savepoint | Kind::Rollback)
            && self.pending_begin.is_some()
            && !self.binding.in_transaction()
            && !self.in_dist()
        {
            if let Some(op) = super::savepoints::op(sql, self.lex_mode()) {
                match self.savepoints.apply(op) {
                    Ok(()) => self.local_ok().await?,
                    Err(name) => self.reply_error(SessionError::NoSavepoint(name)).await?,
                }
                return Ok(Next::Done);
            }
        }
        // With autocommit off and nothing run yet no transaction is open
        // either: an explicit BEGIN is held back as with it on, so that the
        // transaction may span groups.
        if c.kind == Kind::Begin && !self.pinned() && self.pending_begin.is_none() {
            self.savepoints.clear();
            self.pending_begin = Some(sql.to_vec());
            self.status |= status::IN_TRANS;
            self.local_ok().await?;
            return Ok(Next::Done);
        }
        if matches!(c.kind, Kind::Commit | Kind::Rollback)
            && self.pending_begin.is_some()
            && !self.binding.in_transaction()
        {
            // Nothing ran in the transaction: there is nothing to end.
            self.pending_begin = None;
            self.status &= !status::IN_TRANS;
            if chains(sql, self.lex_mode()) {
                self.chain_transaction();
            }
            self.local_ok().await?;
            return Ok(Next::Done);
        }
        if c.kind == Kind::Select {
            let r = self.qualified_group_by(sh, sql).await;
            if let Some(done) = self.run_rewritten(packet, sql, r).await? {
                return Ok(done);
            }
        }
        if matches!(c.kind, Kind::Insert | Kind::Replace) {
            let prefix = &packet[..packet.len() - sql.len()];
            // Runs as if the client had named the columns.
            let r = self.named_columns(sh, sql).await;
            if let Some(done) = self.run_rewritten(packet, sql, r).await? {
                return Ok(done);
            }
            match self.with_ids(sh, sql, prefix).await {
                Ok(None) => {}
                // The INSERT with its ids runs as if the client sent it.
                Ok(Some(q)) => return Ok(Next::Instead(q)),
                Err(e @ (SessionError::ClientClosed | SessionError::ClientIo(_))) => return Err(e),
                Err(e) => {
                    self.reply_error(e).await?;
                    return Ok(Next::Done);
                }
            }
        }
        let route = sh
            .router
            .route(self.vars.schema.as_deref(), sql, self.lex_mode(), &[], c);
        if matches!(route, Route::Session)
            && (c.needs_previous_connection()
                || about_last_statement(sql, super::last::Last::nowhere()).is_some())
        {
            // ROW_COUNT(), FOUND_ROWS(), warnings: about the statement
            // before, which ran in the session's group (not the default
            // one a statement naming no table goes to).
            return Ok(Next::Run);
        }
        self.shard_route(sh, route, packet, false).await
    }

    /// A connection of its own to the primary of group `index` (for the
    /// `what` it holds: a table's columns), as the session's account.
    pub(super) async fn primary_lease(
        &self,
        sh: &Arc<Sharding>,
        index: usize,
        what: &str,
    ) -> Result<Lease, SessionError> {
        let group = sh.groups.get(index).cloned().ok_or_else(|| {
            SessionError::ShardUnsupported(format!("the {what}'s group is not configured"))
        })?;
        let server = self.primary_of(&group).await?;
        match self.borrow_from(&server).await {
            Ok(conn) => Ok(Lease::new(server, conn)),
            Err(e) if e.server_gone_at_open() => {
                let (p, c) = self.primary_failed(&group, &server, e).await?;
                Ok(Lease::new(p, c))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The statement as rewritten by a step before routing (None: not
    /// rewritten), run as if the client had sent it, after the packet's
    /// own prefix (query attributes). Some: the statement was handled.
    async fn run_rewritten(
        &mut self,
        packet: &[u8],
        sql: &[u8],
        rewritten: Result<Option<Vec<u8>>, SessionError>,
    ) -> Result<Option<Next>, SessionError> {
        match rewritten {
            Ok(None) => Ok(None),
            Ok(Some(text)) => {
                let prefix = &packet[..packet.len() - sql.len()];
                let mut q = Vec::with_capacity(prefix.len() + text.len());
                q.extend_from_slice(prefix);
                q.extend_from_slice(&text);
                Ok(Some(Next::Instead(q)))
            }
            Err(e) => {
                self.reply_error(e).await?;
                Ok(Some(Next::Done))
            }
        }
    }

    async fn with_ids(
        &mut self,
        sh: &Arc<Sharding>,
        sql: &[u8],
        prefix: &[u8],
    ) -> Result<Option<Vec<u8>>, SessionError> {
        let mode = self.lex_mode();
        let need = match sh.router.needs_ids(self.vars.schema.as_deref(), sql, mode) {
            None => return Ok(None),
            Some(Ok(need)) => need,
            Some(Err(why)) => return Err(SessionError::ShardUnsupported(why)),
        };
        let first = self.take_ids(sh, &need).await?;
        let text = sextant_sharding::route::fill_ids(sql, mode, &need.column, first, need.rows)
            .ok_or_else(|| {
                SessionError::ShardUnsupported(format!(
                    "an INSERT form sextant does not give {} ids to; name the column and give its values",
                    need.column
                ))
            })?;
        let mut q = Vec::with_capacity(prefix.len() + text.len());
        q.extend_from_slice(prefix);
        q.extend_from_slice(&text);
        Ok(Some(q))
    }

    /// `need.rows` consecutive ids of a sequence (the first returned): from
    /// this sextant's block in hand, or a new block taken from the
    /// sequence's counter, a row of `sextant.sequences` on the primary of
    /// its group (made at first use). Several sextants take blocks from the
    /// same counter: ids never repeat; a block's unused ids are skipped
    /// when a sextant stops.
    async fn take_ids(
        &mut self,
        sh: &Arc<Sharding>,
        need: &sextant_sharding::route::IdNeed,
    ) -> Result<u64, SessionError> {
        let n = need.rows as u64;
        if let Some(first) = sh.sequences.take_ids(&need.name, n) {
            return Ok(first);
        }
        // The counter lives in sextant's schema, which no application
        // account needs a privilege on: sextant's own account takes blocks.
        let group = sh.groups.get(need.group).cloned().ok_or_else(|| {
            SessionError::ShardUnsupported("the sequence's group is not configured".into())
        })?;
        let server = self.primary_of(&group).await?;
        let rt = self.shared.runtime.load_full();
        let mut lease = crate::xa_recovery::recovery_lease(&rt, &server)
            .await
            .map_err(|e| {
                SessionError::ShardUnsupported(format!(
                    "the sequence {}'s group did not take sextant's own login ([xa] user): {e}",
                    need.name
                ))
            })?;
        let c = lease.conn_mut();
        let size = need.block.max(n);
        let name = need.name.replace('\'', "''");
        // LAST_INSERT_ID(x) makes the server report x: the counter after
        // this block, read back on this connection.
        let fetch = format!(
            "INSERT INTO sextant.sequences (name, next) VALUES ('{name}', LAST_INSERT_ID({})) ON DUPLICATE KEY UPDATE next = LAST_INSERT_ID(next + {size})",
            1 + size
        );
        if c.exec_internal(&fetch).await.is_err() {
            c.exec_internal("CREATE DATABASE IF NOT EXISTS sextant")
                .await?;
            c.exec_internal(
                "CREATE TABLE IF NOT EXISTS sextant.sequences (name VARCHAR(255) PRIMARY KEY, next BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB",
            )
            .await?;
            c.exec_internal(&fetch).await?;
        }
        let rows = c.query_internal("SELECT LAST_INSERT_ID()").await?;
        let end = rows
            .first()
            .and_then(|r| r.first())
            .and_then(|v| v.as_deref())
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|e| *e > size)
            .ok_or_else(|| {
                SessionError::ShardUnsupported(format!(
                    "the sequence {} answered no counter",
                    need.name
                ))
            })?;
        let first = end - size;
        sh.sequences.put_block(&need.name, first + n, end);
        Ok(first)
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
    ) -> Result<Next, SessionError> {
        let route =
            sh.router
                .route_prepare(self.vars.schema.as_deref(), sql, self.lex_mode(), may_write);
        if let Route::Refuse(why) = route {
            self.reply_error(SessionError::ShardUnsupported(why))
                .await?;
            return Ok(Next::Done);
        }
        if self.pinned() || self.pending_begin.is_some() {
            return Ok(Next::Run);
        }
        self.shard_route(sh, route, packet, false).await
    }

    /// Sharding at COM_STMT_EXECUTE: routed by its parameters' values. An
    /// execution for several groups runs as the same statement with its
    /// values written in as text, merged as text, and answered in the
    /// binary protocol the client expects.
    pub(super) async fn shard_execute(
        &mut self,
        sh: &Arc<Sharding>,
        sql: &[u8],
        may_write: bool,
        values: &[sextant_protocol::binary::Value<'_>],
        bulk: bool,
        cursor: bool,
    ) -> Result<Next, SessionError> {
        if values.is_empty() && !cursor {
            let c = sextant_sql::classify(sql);
            if matches!(
                c.kind,
                Kind::Begin | Kind::Commit | Kind::Rollback | Kind::Savepoint | Kind::Xa
            ) {
                // Transaction control (sysbench prepares BEGIN and COMMIT):
                // what its text does, for a transaction that may span
                // groups. Its answer, an OK, is the execution's.
                return Ok(Next::Instead(self.text_command(sql)));
            }
        }
        let db = self.vars.schema.as_deref();
        let mode = self.lex_mode();
        if !bulk && sh.router.needs_ids(db, sql, mode).is_some() {
            // An INSERT a sequence gives ids to: run as its text, which
            // gets them; its answer (an OK) is the execution's.
            let Some(text) = self.as_text(sql, values) else {
                let why = "an INSERT given ids by a sequence, with a value sextant cannot write as text (a TIME, or a non-ASCII string in a multibyte character set)";
                return self
                    .shard_route(sh, Route::Refuse(why.into()), &[], false)
                    .await;
            };
            return Ok(Next::Instead(self.text_command(&text)));
        }
        let route = match bulk {
            // A bulk execute's rows are not read: only a statement naming
            // no table of the layout may run so.
            true => match sh.router.route_prepare(db, sql, mode, may_write) {
                Route::Session => Route::Session,
                Route::Refuse(why) => Route::Refuse(why),
                _ => Route::Refuse(
                    "COM_STMT_BULK_EXECUTE of a statement on a table the sharding layout places: its rows are not routed one by one yet; execute it row by row".into(),
                ),
            },
            false => {
                let c = sextant_sql::classify(sql);
                sh.router.route(db, sql, mode, &param_lits(values), &c)
            }
        };
        let set = match &route {
            Route::Merge(m) => m.groups,
            Route::Write(w) => w.groups,
            Route::Scatter(set) | Route::Broadcast(set) => *set,
            _ => return self.shard_route(sh, route, &[], false).await,
        };
        let refuse = |why: &str| {
            Route::Refuse(format!(
                "a prepared statement for several groups ({}) {why}; restrict it by the shard key to one group, or send it as text",
                names(sh, set)
            ))
        };
        if matches!(route, Route::Broadcast(_)) {
            return self
                .shard_route(sh, refuse("that is DDL"), &[], false)
                .await;
        }
        if cursor {
            return self
                .shard_route(sh, refuse("with a cursor is not run"), &[], false)
                .await;
        }
        let Some(text) = self.as_text(sql, values) else {
            let why = "has a value sextant cannot write as text (a TIME, or a non-ASCII string in a multibyte character set)";
            return self.shard_route(sh, refuse(why), &[], false).await;
        };
        let c = sextant_sql::classify(&text);
        let route = match sh.router.route(db, &text, mode, &[], &c) {
            r @ (Route::Merge(_) | Route::Scatter(_) | Route::Write(_)) => r,
            _ => refuse("routes otherwise as text"),
        };
        let packet = self.text_command(&text);
        self.shard_route(sh, route, &packet, true).await
    }

    /// A COM_QUERY of `text`, as this client would send it.
    fn text_command(&self, text: &[u8]) -> Vec<u8> {
        let mut packet = Vec::with_capacity(text.len() + 3);
        packet.push(sextant_protocol::consts::com::QUERY);
        if self.flavor.caps & sextant_protocol::consts::cap::QUERY_ATTRIBUTES != 0 {
            // No attributes, one parameter set.
            packet.extend_from_slice(&[0, 1]);
        }
        packet.extend_from_slice(text);
        packet
    }

    /// A prepared statement's values written in as literals (None: one
    /// sextant cannot write).
    fn as_text(
        &self,
        sql: &[u8],
        values: &[sextant_protocol::binary::Value<'_>],
    ) -> Option<Vec<u8>> {
        let mode = self.lex_mode();
        let literals: Option<Vec<Vec<u8>>> = values
            .iter()
            .map(|v| {
                sextant_protocol::binary::literal(
                    v,
                    mode.backslash_escapes,
                    mode.multibyte.is_some(),
                )
            })
            .collect();
        sextant_sharding::route::with_values(sql, mode, &literals?)
    }

    /// Carries out a route (also for prepared statements' executions).
    /// `binary`: the client executed a prepared statement, and `packet` is
    /// it as text: rows go back in the binary protocol.
    pub(super) async fn shard_route(
        &mut self,
        sh: &Arc<Sharding>,
        route: Route,
        packet: &[u8],
        binary: bool,
    ) -> Result<Next, SessionError> {
        // Only a statement naming a table of the layout opens a
        // transaction (or moves it to another group).
        let names_tables = !matches!(route, Route::Session);
        let (group, index) = match route {
            Route::Write(w) => {
                self.last = self.last.spread(None, 0);
                return match self.spread_write(sh, &w, packet).await {
                    Ok(()) => Ok(Next::Done),
                    Err(e @ (SessionError::ClientClosed | SessionError::ClientIo(_))) => Err(e),
                    Err(e) => {
                        self.reply_error(e).await?;
                        Ok(Next::Done)
                    }
                };
            }
            Route::Refuse(why) => {
                self.reply_error(SessionError::ShardUnsupported(why))
                    .await?;
                return Ok(Next::Done);
            }
            Route::Session => {
                let g = sh
                    .default_group(self.vars.schema.as_deref())
                    .unwrap_or(&self.user.group)
                    .clone();
                // A statement naming no table of the layout does not start
                // the held-back transaction: it runs where the session is.
                if self.pending_begin.is_some() || self.pinned() {
                    return Ok(Next::Run);
                }
                let i = sh.groups.iter().position(|x| Arc::ptr_eq(x, &g));
                (g, i)
            }
            // A read of global tables: in a transaction, where it is (when
            // that group holds them); else the groups take turns.
            Route::AnyOf(set) => {
                let here = sh.groups.iter().position(|x| Arc::ptr_eq(x, &self.group));
                let stay = here.filter(|h| set.contains(*h) && (self.in_dist() || self.pinned()));
                match stay
                    .or_else(|| sh.router.pick(set))
                    .and_then(|i| Some((sh.groups.get(i)?.clone(), i)))
                {
                    Some((g, i)) => (g, Some(i)),
                    None => return Ok(Next::Run),
                }
            }
            Route::One(i) => match sh.groups.get(i) {
                Some(g) => (g.clone(), Some(i)),
                None => return Ok(Next::Run),
            },
            Route::Merge(_) | Route::Scatter(_) | Route::Broadcast(_) => {
                if matches!(route, Route::Broadcast(_)) {
                    // DDL may change a table's columns.
                    sh.columns.forget_all();
                }
                let set = match &route {
                    Route::Merge(m) => m.groups,
                    Route::Scatter(set) | Route::Broadcast(set) => *set,
                    _ => GroupSet::default(),
                };
                if !matches!(route, Route::Broadcast(_)) {
                    let vars = self.vars.vars.iter().map(|(k, v)| (&**k, &**v));
                    if let Some(why) = sextant_sharding::session::unmodelled_setting(vars) {
                        let e = SessionError::ShardUnsupported(format!(
                            "a read over {} groups ({}) under {why}",
                            set.len(),
                            names(sh, set)
                        ));
                        self.reply_error(e).await?;
                        return Ok(Next::Done);
                    }
                }
                let in_trx = self.pinned()
                    || self.pending_begin.is_some()
                    || self.status & status::AUTOCOMMIT == 0;
                if in_trx {
                    tracing::debug!(parent: &self.span, groups = %names(sh, set), "a statement over several groups in a transaction: {:?}", String::from_utf8_lossy(&packet[packet.len().min(1)..packet.len().min(300)]));
                }
                let no_trx = self.pending_begin.is_none()
                    && !self.binding.in_transaction()
                    && self.status & status::AUTOCOMMIT != 0;
                if in_trx && no_trx && !self.in_dist() {
                    // Pinned by state, not by a transaction.
                    let e = SessionError::ShardUnsupported(format!(
                        "a statement for several groups ({}) while this session holds state on its connection in group {} ({}): the other groups' connections do not have it; run it after the state is gone (or in a new session)",
                        names(sh, set),
                        self.group.name,
                        tie_names(self.pins),
                    ));
                    self.reply_error(e).await?;
                    return Ok(Next::Done);
                }
                if in_trx && !self.in_dist() {
                    let why = match &route {
                        Route::Broadcast(_) => Some(
                            "DDL does not run inside a transaction over several groups; commit first".to_string(),
                        ),
                        _ => self.dist_refusal(),
                    };
                    if let Some(why) = why {
                        let e = SessionError::ShardUnsupported(format!(
                            "inside a transaction, a statement for several groups ({}): {why}",
                            names(sh, set)
                        ));
                        self.reply_error(e).await?;
                        return Ok(Next::Done);
                    }
                    // The transaction starts as XA, its first branch in
                    // the first group of the statement.
                    let first = set.first().unwrap_or_default();
                    self.pending_begin = None;
                    self.release();
                    if let Err(e) = self.xa_open(sh, first).await {
                        self.reply_error(e).await?;
                        return Ok(Next::Done);
                    }
                }
                if self.in_dist() && matches!(route, Route::Broadcast(_)) {
                    let e = SessionError::ShardUnsupported(format!(
                        "DDL inside a transaction over several groups ({}): the servers do not run DDL inside XA transactions; commit first",
                        names(sh, set)
                    ));
                    self.reply_error(e).await?;
                    return Ok(Next::Done);
                }
                self.last = self
                    .last
                    .spread((!matches!(route, Route::Broadcast(_))).then_some(0), 0);
                let res = match &route {
                    Route::Merge(plan) => self.merge(sh, plan, packet, binary).await,
                    Route::Scatter(_) => self.scatter(sh, set, packet, binary).await,
                    _ => self.broadcast(sh, set, packet).await,
                };
                return match res {
                    Ok(()) => Ok(Next::Done),
                    Err(e @ (SessionError::ClientClosed | SessionError::ClientIo(_))) => Err(e),
                    Err(e) => {
                        self.reply_error(e).await?;
                        Ok(Next::Done)
                    }
                };
            }
        };
        if self.in_dist() {
            let Some(i) = index.filter(|_| names_tables) else {
                // Runs on the branch the session is on.
                return Ok(Next::Run);
            };
            if !Arc::ptr_eq(&group, &self.group) && !self.pins.is_empty() {
                let e = SessionError::ShardUnsupported(format!(
                    "this session has state tied to its connection in group {} (user variables, temporary tables, locks), and the statement is for group {}",
                    self.group.name, group.name
                ));
                self.reply_error(e).await?;
                return Ok(Next::Done);
            }
            if tracing::enabled!(tracing::Level::DEBUG) && !self.dist_has(i) {
                tracing::debug!(parent: &self.span, group = %sh.router.group_name(i), "a transaction branch starts for {:?}", String::from_utf8_lossy(&packet[packet.len().min(1)..packet.len().min(300)]));
            }
            if let Err(e) = self.xa_enter(sh, i).await {
                self.reply_error(e).await?;
                return Ok(Next::Done);
            }
            return Ok(Next::Run);
        }
        if names_tables
            && self.status & status::AUTOCOMMIT == 0
            && self.pending_begin.is_none()
            && !self.pinned()
            && self.shared.xa.is_some()
        {
            // With autocommit off every statement opens a transaction:
            // sextant opens it, as XA, so that it may span groups.
            self.savepoints.clear();
            self.pending_begin = Some(b"BEGIN".to_vec());
        }
        if !Arc::ptr_eq(&group, &self.group) {
            if self.pinned() {
                let e = SessionError::ShardUnsupported(format!(
                    "this session's transaction (or state tied to its connection) is in group {}, and the statement is for group {}: a READ ONLY or WITH CONSISTENT SNAPSHOT transaction, or state tied to one connection (user variables, temporary tables, locks), stays in one group",
                    self.group.name, group.name
                ));
                self.reply_error(e).await?;
                return Ok(Next::Done);
            }
            self.release();
            self.enter_group(sh, group, index);
        }
        if let Some(begin) = self.pending_begin.take() {
            if let Some(i) = index.filter(|_| self.xa_begins(&begin)) {
                if let Err(e) = self.xa_open(sh, i).await {
                    self.reply_error(e).await?;
                }
                if !self.in_dist() {
                    return Ok(Next::Done);
                }
            } else if let Err(e) = self.begin_in_group(&begin).await {
                self.status &= !status::IN_TRANS;
                self.reply_error(e).await?;
                return Ok(Next::Done);
            }
            if let Err(e) = self.replay_savepoints().await {
                self.reply_error(e).await?;
                return Ok(Next::Done);
            }
        }
        Ok(Next::Run)
    }

    /// Sets the savepoints kept while no group had the transaction in the
    /// branch it has just started in (savepoints.rs).
    async fn replay_savepoints(&mut self) -> Result<(), SessionError> {
        if self.savepoints.is_empty() {
            return Ok(());
        }
        let statements = self.savepoints.statements();
        self.savepoints.clear();
        let Some(a) = self.binding.direct_mut() else {
            return Ok(());
        };
        for s in statements {
            a.conn_mut().exec_internal(&s).await?;
        }
        Ok(())
    }

    /// Makes `group` the session's current group, carrying the newest
    /// write the session made there (read-your-writes is per group: each
    /// has its own primary and GTIDs).
    pub(super) fn enter_group(&mut self, sh: &Sharding, group: Arc<Group>, index: Option<usize>) {
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

    pub(super) async fn local_ok(&mut self) -> Result<(), SessionError> {
        // BEGIN, COMMIT, savepoints: as the server's OK for them.
        self.last = self.last.control();
        let ok = OkPacket {
            status: self.status,
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
            Value::UInt(u) => i64::try_from(*u).map_or(Lit::Big(*u), Lit::Int),
            // 5.0 is 5 to an integer column.
            Value::Double(d) if d.fract() == 0.0 && d.abs() < 9.0e15 => Lit::Int(*d as i64),
            Value::Bytes(b) => Lit::Str(std::borrow::Cow::Borrowed(b)),
            Value::DateTime(s) => Lit::Str(std::borrow::Cow::Owned(s.clone().into_bytes())),
            Value::Double(_) | Value::Other => Lit::Other,
        })
        .collect()
}

/// `COMMIT` or `ROLLBACK [WORK] AND CHAIN` (not `AND NO CHAIN`).
/// The session function a statement reads that reports on the statement
/// before it, if any.
fn about_last_statement(sql: &[u8], last: super::last::Last) -> Option<&'static str> {
    // As a word of its own (SQL_CALC_FOUND_ROWS is not FOUND_ROWS()).
    let has = |w: &[u8]| {
        sql.windows(w.len()).enumerate().any(|(i, x)| {
            x.eq_ignore_ascii_case(w)
                && (i == 0 || !(sql[i - 1].is_ascii_alphanumeric() || sql[i - 1] == b'_'))
        })
    };
    use super::last::Val;
    // Values no one connection holds; the others sextant writes in, or
    // the connection answers.
    let nowhere = last.warnings == Val::Nowhere;
    [
        (
            &b"row_count"[..],
            "ROW_COUNT()",
            last.row_count == Val::Nowhere,
        ),
        (
            b"found_rows",
            "FOUND_ROWS()",
            last.found_rows == Val::Nowhere,
        ),
        (b"warning_count", "@@warning_count", nowhere),
        (b"show warnings", "SHOW WARNINGS", nowhere),
        (b"show count", "SHOW COUNT(*) WARNINGS", nowhere),
    ]
    .into_iter()
    .find(|(w, _, unknown)| *unknown && has(w))
    .map(|(_, f, _)| f)
}

/// What ties a session to its connection, as a user would name it.
fn tie_names(pins: sextant_routing::Pins) -> String {
    use sextant_routing::Pins;
    let names = [
        (
            Pins::OPAQUE,
            "user variables, temporary tables, named locks or the like",
        ),
        (Pins::LOCK_TABLES, "LOCK TABLES"),
        (Pins::CURSOR, "an open cursor"),
        (Pins::LONG_DATA, "long data sent for a prepared statement"),
        (Pins::NEXT_TRX, "SET TRANSACTION for the next transaction"),
        (
            Pins::FOUND_ROWS,
            "SQL_CALC_FOUND_ROWS for a FOUND_ROWS() to come",
        ),
        (Pins::INSERT_ID, "SET insert_id for the next INSERT"),
    ];
    let out: Vec<&str> = names
        .iter()
        .filter(|(p, _)| pins.contains(*p))
        .map(|(_, n)| *n)
        .collect();
    match out.is_empty() {
        true => "a connection-level state".into(),
        false => out.join(", "),
    }
}

fn chains(sql: &[u8], mode: sextant_sql::LexMode) -> bool {
    let mut t = sextant_sql::Lexer::with_mode(sql, mode).skip(1);
    let mut and = false;
    for w in t.by_ref().take(4) {
        if w.is_word("AND") {
            and = true;
        } else if and {
            return w.is_word("CHAIN");
        }
    }
    false
}

/// `ROLLBACK [WORK] TO [SAVEPOINT] name`.
fn rollback_to(sql: &[u8], mode: sextant_sql::LexMode) -> bool {
    sextant_sql::Lexer::with_mode(sql, mode)
        .take(3)
        .any(|t| t.text.eq_ignore_ascii_case(b"TO"))
}

#[cfg(test)]
mod tests {
    use super::chains;
    use sextant_sql::LexMode;

    #[test]
    fn and_chain() {
        let c = |s: &str| chains(s.as_bytes(), LexMode::DEFAULT);
        assert!(c("COMMIT AND CHAIN"));
        assert!(c("commit work and chain"));
        assert!(c("ROLLBACK AND CHAIN RELEASE"));
        assert!(!c("COMMIT AND NO CHAIN"));
        assert!(!c("COMMIT"));
        assert!(!c("ROLLBACK WORK"));
        assert!(!c("COMMIT RELEASE"));
    }
}
