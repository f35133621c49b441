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

/// A table column as the catalogue lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    /// INVISIBLE: left out of `SELECT *` and of an INSERT without a
    /// column list, still a column by name.
    pub invisible: bool,
}

/// A FROM table of the top-level SELECT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FromTable {
    pub db: String,
    pub table: String,
    /// The name its columns are qualified with in the statement.
    pub qualifier: String,
    /// A group that holds it (None: not a table of the layout).
    pub group: Option<usize>,
}

/// A GROUP BY name read as a select-list alias, which the server would
/// take for a column if one of the FROM tables has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupByName {
    pub name: String,
    pub tables: Vec<FromTable>,
}

impl Router {
    /// The GROUP BY names of a grouped read whose meaning depends on the
    /// FROM tables' columns (empty: none).
    pub fn ambiguous_group_by(
        &self,
        db: Option<&str>,
        sql: &[u8],
        mode: LexMode,
    ) -> Vec<GroupByName> {
        let Some(a) = self.analysis_of(db, sql, mode) else {
            return Vec::new();
        };
        let Some(Ok(g)) = &a.grouping else {
            return Vec::new();
        };
        let tables: Vec<FromTable> = a
            .top_from
            .iter()
            .filter_map(|(idx, q)| {
                let t = a.tables.get(*idx)?;
                let (tdb, table) = t.name.split_once('.')?;
                let group = match &t.place {
                    Place::Sharded { vdb, .. } => self.first_group_of(*vdb),
                    Place::Group(g) => Some(*g),
                    Place::Global(set) => set.first(),
                    Place::Elsewhere => None,
                };
                Some(FromTable {
                    db: tdb.to_string(),
                    table: table.to_string(),
                    qualifier: q.clone(),
                    group,
                })
            })
            .collect();
        g.alias_keys
            .iter()
            .map(|n| GroupByName {
                name: n.clone(),
                tables: tables.clone(),
            })
            .collect()
    }
}

/// `sql` with the GROUP BY item `name` (a bare name, at the top level)
/// written as `qualifier.name`: the column, as the server reads it, for
/// sextant's merge too. None: no such item.
pub fn qualify_group_by(sql: &[u8], mode: LexMode, name: &str, qualifier: &str) -> Option<Vec<u8>> {
    let base = sql.as_ptr() as usize;
    let toks: Vec<_> = Lexer::with_mode(sql, mode)
        .filter(|t| t.kind != sextant_sql::TokenKind::Hint)
        .collect();
    let mut depth = 0i32;
    let mut in_group = false;
    let mut edits = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if t.is_punct(b'(') {
            depth += 1;
            continue;
        }
        if t.is_punct(b')') {
            depth -= 1;
            continue;
        }
        if depth != 0 {
            continue;
        }
        if t.is_word("BY") && i > 0 && toks[i - 1].is_word("GROUP") {
            in_group = true;
            continue;
        }
        if [
            "HAVING", "ORDER", "LIMIT", "WINDOW", "UNION", "FOR", "LOCK", "INTO",
        ]
        .iter()
        .any(|w| t.is_word(w))
        {
            in_group = false;
        }
        let named = match t.kind {
            sextant_sql::TokenKind::Word | sextant_sql::TokenKind::QuotedIdent => {
                t.text.eq_ignore_ascii_case(name.as_bytes())
            }
            _ => false,
        };
        let alone = i > 0
            && (toks[i - 1].is_word("BY") || toks[i - 1].is_punct(b','))
            && toks.get(i + 1).is_none_or(|n| {
                n.is_punct(b',') || n.is_punct(b';') || n.kind == sextant_sql::TokenKind::Word
            });
        if in_group && named && alone {
            let start = t.text.as_ptr() as usize - base;
            let start = match t.kind {
                sextant_sql::TokenKind::QuotedIdent => start - 1,
                _ => start,
            };
            edits.push(start);
        }
    }
    if edits.is_empty() {
        return None;
    }
    let q = format!("`{}`.", qualifier.replace('`', "``"));
    let mut out = Vec::with_capacity(sql.len() + edits.len() * q.len());
    let mut from = 0;
    for at in edits {
        out.extend_from_slice(&sql[from..at]);
        out.extend_from_slice(q.as_bytes());
        from = at;
    }
    out.extend_from_slice(&sql[from..]);
    Some(out)
}

/// The query that reads a table's columns in order, each with whether it
/// is invisible ([`columns_of`] reads its rows).
pub fn columns_query(db: &str, table: &str) -> String {
    let q = |s: &str| s.replace('\\', "\\\\").replace('\'', "''");
    format!(
        "SELECT COLUMN_NAME, EXTRA LIKE '%INVISIBLE%' FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '{}' AND TABLE_NAME = '{}' ORDER BY ORDINAL_POSITION",
        q(db),
        q(table)
    )
}

/// The columns from the rows of [`columns_query`].
pub fn columns_of(rows: Vec<Vec<Option<String>>>) -> Vec<Column> {
    rows.into_iter()
        .filter_map(|r| {
            let mut r = r.into_iter();
            let name = r.next().flatten()?;
            let invisible = r.next().flatten().is_some_and(|v| v == "1");
            Some(Column { name, invisible })
        })
        .collect()
}

/// `sql` with `columns` as its column list, written before its VALUES
/// (or VALUE) keyword. None: no such keyword at its top level.
pub fn with_columns(sql: &[u8], mode: LexMode, columns: &[Column]) -> Option<Vec<u8>> {
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
        .filter(|c| !c.invisible)
        .map(|c| format!("`{}`", c.name.replace('`', "``")))
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
pub struct ColumnBook(Mutex<HashMap<String, (Instant, Vec<Column>)>>);

impl ColumnBook {
    pub fn get(&self, db: &str, table: &str) -> Option<Vec<Column>> {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&key(db, table))
            .filter(|(at, _)| at.elapsed() < COLUMNS_FRESH)
            .map(|(_, c)| c.clone())
    }

    pub fn put(&self, db: &str, table: &str, columns: Vec<Column>) {
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
        let col = |n: &str, invisible| Column {
            name: n.into(),
            invisible,
        };
        let cols = [col("id", false), col("hidden", true), col("w`id", false)];
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
    fn group_by_names_are_qualified_where_they_stand_alone() {
        let q = |s: &str, n: &str| {
            qualify_group_by(s.as_bytes(), LexMode::DEFAULT, n, "o")
                .map(|v| String::from_utf8(v).unwrap())
        };
        assert_eq!(
            q("SELECT qty AS item_id, COUNT(*) FROM orders o GROUP BY item_id ORDER BY item_id", "item_id").as_deref(),
            Some("SELECT qty AS item_id, COUNT(*) FROM orders o GROUP BY `o`.item_id ORDER BY item_id")
        );
        assert_eq!(
            q(
                "SELECT a AS b FROM t o GROUP BY x, `b` DESC HAVING b > 1",
                "b"
            )
            .as_deref(),
            Some("SELECT a AS b FROM t o GROUP BY x, `o`.`b` DESC HAVING b > 1")
        );
        assert_eq!(q("SELECT a AS b FROM t GROUP BY f(b)", "b"), None);
    }

    #[test]
    fn lists_are_kept_briefly() {
        let b = ColumnBook::default();
        let a = Column {
            name: "a".into(),
            invisible: false,
        };
        b.put("D", "T", vec![a.clone()]);
        assert_eq!(b.get("d", "t"), Some(vec![a]));
        b.forget_all();
        assert_eq!(b.get("d", "t"), None);
        assert!(columns_query("x'y", "t").contains("'x''y'"));
    }
}
