//! Server-side prepared statements a connection holds: which SQL each is,
//! for which session state, and preparing, adopting and closing them.

use super::{BackendConn, ServerStmt};
use crate::error::BackendError;
use crate::state::SessionVars;
use sextant_protocol::consts::{cap, com};
use sextant_protocol::tracker::{Expect, Packet, Tracker};
use std::sync::Arc;

/// What a server statement's meaning depends on besides its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StmtContext {
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

impl BackendConn {
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

    pub(super) async fn prepare_here(
        &mut self,
        sql: &Arc<[u8]>,
    ) -> Result<ServerStmt, BackendError> {
        // One prepared under another database or sql_mode is replaced.
        if let Some((old, _)) = self.stmts.remove(&**sql) {
            self.close_server_stmt(old.id).await?;
        }
        // The bound may have been lowered (the server's limit became
        // known): close as many as it takes.
        self.close_lru_beyond(self.max_prepared.max(1) - 1).await?;
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
        let (id, columns, params) = result.ok_or_else(|| BackendError::Protocol {
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
        self.close_lru_beyond(self.max_prepared.max(1)).await?;
        Ok(())
    }

    /// Closes the least recently used statements until at most `keep`
    /// remain.
    async fn close_lru_beyond(&mut self, keep: usize) -> Result<(), BackendError> {
        while self.stmts.len() > keep {
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

    pub(super) async fn close_server_stmt(&mut self, id: u32) -> Result<(), BackendError> {
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
}
