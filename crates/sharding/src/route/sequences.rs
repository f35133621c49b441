//! Ids from sextant's sequences for INSERTs into sharded tables.

use super::{Lookup, Router};
use crate::analyze::Analysis;
use sextant_sql::{LexMode, Lexer};
use std::sync::Arc;

/// An INSERT into a table a sequence gives ids to, without its column:
/// what the sequence must give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdNeed {
    /// `db.table`, lower case: the sequence's name.
    pub name: String,
    pub column: String,
    pub block: u64,
    pub rows: usize,
    /// The group keeping the sequence's counter.
    pub group: usize,
}

impl Router {
    /// The analysis of a statement, from the shape cache when it parses
    /// as a shape.
    pub(crate) fn analysis_of(
        &self,
        db: Option<&str>,
        sql: &[u8],
        mode: LexMode,
    ) -> Option<Arc<Analysis>> {
        match self.lookup(db, sql, mode, &mut Vec::new()) {
            Lookup::Shape(a) => Some(a),
            Lookup::AsWritten(_) => self.analysis(db, sql, mode).0,
        }
    }

    /// The first group of a vdb.
    pub(crate) fn first_group_of(&self, vdb: usize) -> Option<usize> {
        self.vdb_groups(self.layout.vdbs.get(vdb)?).first()
    }

    /// Whether an INSERT needs ids from a sequence (None: it does not;
    /// Err: it would, in a form sextant does not fill).
    pub fn needs_ids(
        &self,
        db: Option<&str>,
        sql: &[u8],
        mode: LexMode,
    ) -> Option<Result<IdNeed, String>> {
        if self.layout.sequences.is_empty() {
            return None;
        }
        let a = self.analysis_of(db, sql, mode)?;
        let t = &a.tables[a.insert_target?];
        let (tdb, table) = t.name.split_once('.')?;
        let seq = self.layout.sequence(tdb, table)?;
        if a.insert_columns.contains(&seq.column) {
            return None;
        }
        let Some(rows) = a.insert_rows.filter(|_| !a.insert_columns.is_empty()) else {
            return Some(Err(format!(
                "an INSERT into {} that does not name its columns, or inserts a SELECT's rows: sextant gives {} its ids only to rows of VALUES or SET with named columns",
                t.name, seq.column
            )));
        };
        let group = self.layout.sequence_group(tdb)?;
        Some(Ok(IdNeed {
            name: t.name.to_ascii_lowercase(),
            column: seq.column.clone(),
            block: seq.block,
            rows,
            group,
        }))
    }
}

/// An INSERT with the sequence's column added and its ids written in: the
/// first as `LAST_INSERT_ID(id)`, so that the server reports it as the
/// statement's insert id and `LAST_INSERT_ID()` returns it, as for an
/// AUTO_INCREMENT column. None: a form this does not fill.
pub fn fill_ids(
    sql: &[u8],
    mode: LexMode,
    column: &str,
    first: u64,
    rows: usize,
) -> Option<Vec<u8>> {
    let base = sql.as_ptr() as usize;
    let mut depth = 0i32;
    // Where each insertion goes, and what.
    let mut edits: Vec<(usize, String)> = Vec::new();
    let mut seen_cols = false;
    let mut in_values = false;
    let mut values_done = false;
    let mut in_set = false;
    let mut set_seen = false;
    let mut row = 0u64;
    let id = |row: u64| match row {
        0 => format!("LAST_INSERT_ID({first})"),
        r => (first + r).to_string(),
    };
    for t in Lexer::with_mode(sql, mode) {
        let start = t.text.as_ptr() as usize - base;
        if t.is_punct(b'(') {
            depth += 1;
            continue;
        }
        if t.is_punct(b')') {
            depth -= 1;
            if depth == 0 && !seen_cols && !in_values && !set_seen && !values_done {
                seen_cols = true;
                edits.push((start, format!(", {column}")));
            } else if depth == 0 && in_values {
                edits.push((start, format!(", {}", id(row))));
                row += 1;
            }
            continue;
        }
        if depth != 0 {
            continue;
        }
        if (t.is_word("values") || t.is_word("value")) && !values_done && !set_seen {
            in_values = seen_cols;
        } else if t.is_word("set") && !seen_cols && !set_seen {
            in_set = true;
            set_seen = true;
        } else if in_set && (t.is_word("on") || t.is_punct(b';')) {
            edits.push((start, format!(", {column} = {} ", id(0))));
            in_set = false;
            row = 1;
        } else if in_values && !t.is_punct(b',') {
            in_values = false;
            values_done = true;
        }
    }
    if in_set {
        edits.push((sql.len(), format!(", {column} = {}", id(0))));
        row = 1;
    }
    if row as usize != rows {
        return None;
    }
    let mut out = Vec::with_capacity(sql.len() + edits.iter().map(|e| e.1.len()).sum::<usize>());
    let mut at = 0;
    for (pos, text) in edits {
        out.extend_from_slice(&sql[at..pos]);
        out.extend_from_slice(text.as_bytes());
        at = pos;
    }
    out.extend_from_slice(&sql[at..]);
    Some(out)
}
