//! INSERTs that do not name their columns (`INSERT INTO t VALUES (...)`,
//! as classic loaders write them): the shard key's place in each row comes
//! from the table's column order, which the server's catalogue holds. The
//! proxy reads it from a group that has the table, keeps it briefly
//! ([`ColumnBook`]), and routes the statement rewritten with its column
//! list, so that the server also checks the values against the columns
//! sextant placed them by.

use crate::analyze::Place;
use crate::route::Router;
use sextant_sql::{LexMode, Lexer};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// An INSERT into a sharded table without its column list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unnamed {
    pub db: String,
    pub table: String,
    /// A group that holds the table (to read its columns from).
    pub group: usize,
}

impl Router {
    /// Whether `sql` inserts VALUES rows into a sharded table without
    /// naming its columns.
    pub fn unnamed_insert(&self, db: Option<&str>, sql: &[u8], mode: LexMode) -> Option<Unnamed> {
        let a = self.analysis_of(db, sql, mode)?;
        let idx = a.insert_target?;
        if !a.insert_columns.is_empty() || a.insert_rows.is_none() {
            return None;
        }
        let t = &a.tables[idx];
        let Place::Sharded { vdb, .. } = &t.place else {
            return None;
        };
        let (tdb, table) = t.name.split_once('.')?;
        let group = self.first_group_of(*vdb)?;
        Some(Unnamed {
            db: tdb.to_string(),
            table: table.to_string(),
            group,
        })
    }
}

/// The query that reads a table's columns as `INSERT ... VALUES` without
/// a column list takes them: in order, invisible ones left out.
pub fn columns_query(db: &str, table: &str) -> String {
    let q = |s: &str| s.replace('\\', "\\\\").replace('\'', "''");
    format!(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '{}' AND TABLE_NAME = '{}' AND EXTRA NOT LIKE '%INVISIBLE%' ORDER BY ORDINAL_POSITION",
        q(db),
        q(table)
    )
}

/// `sql` with `columns` as its column list, written before its VALUES
/// (or VALUE) keyword. None: no such keyword at its top level.
pub fn with_columns(sql: &[u8], mode: LexMode, columns: &[String]) -> Option<Vec<u8>> {
    let base = sql.as_ptr() as usize;
    let mut depth = 0i32;
    let mut at = None;
    for t in Lexer::with_mode(sql, mode) {
        if t.is_punct(b'(') {
            depth += 1;
        } else if t.is_punct(b')') {
            depth -= 1;
        } else if depth == 0 && (t.is_word("VALUES") || t.is_word("VALUE")) {
            at = Some(t.text.as_ptr() as usize - base);
            break;
        }
    }
    let at = at?;
    let list: Vec<String> = columns
        .iter()
        .map(|c| format!("`{}`", c.replace('`', "``")))
        .collect();
    let mut out = Vec::with_capacity(sql.len() + 16 * columns.len());
    out.extend_from_slice(&sql[..at]);
    out.push(b'(');
    out.extend_from_slice(list.join(", ").as_bytes());
    out.extend_from_slice(b") ");
    out.extend_from_slice(&sql[at..]);
    Some(out)
}

/// How long a table's column list is trusted: a column order changed
/// behind sextant's back is read again within this time; DDL through
/// sextant forgets the list at once.
pub const COLUMNS_FRESH: Duration = Duration::from_secs(1);

/// Column lists read from the servers, by `db.table` (lower case). Looked
/// at only for INSERTs without a column list, so a lock is cheap here.
#[derive(Default)]
pub struct ColumnBook(Mutex<HashMap<String, (Instant, Vec<String>)>>);

impl ColumnBook {
    pub fn get(&self, db: &str, table: &str) -> Option<Vec<String>> {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&key(db, table))
            .filter(|(at, _)| at.elapsed() < COLUMNS_FRESH)
            .map(|(_, c)| c.clone())
    }

    pub fn put(&self, db: &str, table: &str, columns: Vec<String>) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.insert(key(db, table), (Instant::now(), columns));
    }

    /// After DDL: every list is read again when next needed.
    pub fn forget_all(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

fn key(db: &str, table: &str) -> String {
    format!("{}.{}", db.to_ascii_lowercase(), table.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_column_list_goes_before_values() {
        let cols = ["id".to_string(), "w`id".to_string()];
        let w = |s: &str| {
            with_columns(s.as_bytes(), LexMode::DEFAULT, &cols)
                .map(|v| String::from_utf8(v).unwrap())
        };
        assert_eq!(
            w("INSERT INTO t VALUES (1, 'VALUES (')").as_deref(),
            Some("INSERT INTO t (`id`, `w``id`) VALUES (1, 'VALUES (')")
        );
        assert_eq!(
            w("insert ignore into db.t value (1,2),(3,4)").as_deref(),
            Some("insert ignore into db.t (`id`, `w``id`) value (1,2),(3,4)")
        );
        assert_eq!(w("INSERT INTO t SELECT * FROM u"), None);
    }

    #[test]
    fn lists_are_kept_briefly() {
        let b = ColumnBook::default();
        b.put("D", "T", vec!["a".into()]);
        assert_eq!(b.get("d", "t"), Some(vec!["a".to_string()]));
        b.forget_all();
        assert_eq!(b.get("d", "t"), None);
        assert!(columns_query("x'y", "t").contains("'x''y'"));
    }
}
