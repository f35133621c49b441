//! What a statement on a sharded layout needs of its tables' columns,
//! which only the servers' catalogue knows: the column order of an INSERT
//! that names none, and whether a GROUP BY name that is a select-list
//! alias is also a column. Read from a group holding the table and kept a
//! moment (`sextant_sharding::columns`).

use super::Session;
use crate::errors::SessionError;
use crate::runtime::Sharding;
use std::sync::Arc;

impl Session {
    /// An INSERT into a sharded table that names no columns, with the
    /// table's columns written in (read from a group holding it, or kept
    /// from a moment ago); None: not such an INSERT.
    pub(super) async fn named_columns(
        &mut self,
        sh: &Arc<Sharding>,
        sql: &[u8],
    ) -> Result<Option<Vec<u8>>, SessionError> {
        let mode = self.lex_mode();
        let Some(u) = sh
            .router
            .unnamed_insert(self.vars.schema.as_deref(), sql, mode)
        else {
            return Ok(None);
        };
        let columns = self.table_columns(sh, u.group, &u.db, &u.table).await?;
        if columns.is_empty() {
            // No such table there: the statement goes as written, and the
            // refusal (or the server's error) says so.
            return Ok(None);
        }
        Ok(sextant_sharding::columns::with_columns(sql, mode, &columns))
    }

    /// A table's columns, kept from a moment ago or read from the primary
    /// of `group` (empty: the table is not there).
    async fn table_columns(
        &mut self,
        sh: &Arc<Sharding>,
        group: usize,
        db: &str,
        table: &str,
    ) -> Result<Vec<sextant_sharding::columns::Column>, SessionError> {
        if let Some(c) = sh.columns.get(db, table) {
            return Ok(c);
        }
        let mut lease = self.primary_lease(sh, group, "table").await?;
        let q = sextant_sharding::columns::columns_query(db, table);
        let rows = match lease.conn_mut().query_internal(&q).await {
            Ok(r) => r,
            Err(e) => {
                lease.discard();
                return Err(e.into());
            }
        };
        let c = sextant_sharding::columns::columns_of(rows);
        if !c.is_empty() {
            sh.columns.put(db, table, c.clone());
        }
        Ok(c)
    }

    /// A grouped read whose GROUP BY names a select-list alias that is
    /// also a column of exactly one FROM table: written with that column
    /// qualified, as the server reads it (the column wins in GROUP BY).
    /// None: nothing to change.
    pub(super) async fn qualified_group_by(
        &mut self,
        sh: &Arc<Sharding>,
        sql: &[u8],
    ) -> Result<Option<Vec<u8>>, SessionError> {
        let mode = self.lex_mode();
        let names = sh
            .router
            .ambiguous_group_by(self.vars.schema.as_deref(), sql, mode);
        if names.is_empty() {
            return Ok(None);
        }
        let mut text: Option<Vec<u8>> = None;
        for n in names {
            let mut holders = Vec::new();
            for t in &n.tables {
                let Some(g) = t.group else { continue };
                let cols = self.table_columns(sh, g, &t.db, &t.table).await?;
                if cols.iter().any(|c| c.name.eq_ignore_ascii_case(&n.name)) {
                    holders.push(t.qualifier.clone());
                }
            }
            // Two tables with it: the server says the name is ambiguous.
            if let [q] = holders.as_slice() {
                let cur = text.as_deref().unwrap_or(sql);
                if let Some(t) = sextant_sharding::columns::qualify_group_by(cur, mode, &n.name, q)
                {
                    text = Some(t);
                }
            }
        }
        Ok(text)
    }
}
