//! Names a read reads that the group's catalogue does not list: a table or
//! view created since the monitor last read the catalogue (directly on a
//! server, or through sextant a moment ago). Such a name may be a view
//! whose definition calls a function that writes, which must not run on a
//! replica. Before the read is placed, the session asks the primary what
//! the names are and teaches the group's catalogue; until it knows, the
//! read goes to the primary.

use super::Session;
use sextant_sql::{Classification, Flags};

impl Session {
    /// For a read naming tables the catalogue does not list: asks the
    /// primary about them and adds what it says to the catalogue. True
    /// when the catalogue learned something (classify again).
    pub(super) async fn learn_names(&mut self, c: &Classification<'_>, sql: &[u8]) -> bool {
        if !c.flags.contains(Flags::UNKNOWN_TABLE) {
            return false;
        }
        let names = self.group.catalogue.load().unknown_tables(sql);
        let Some(q) = describe_sql(&names) else {
            return false;
        };
        let group = self.group.clone();
        let Ok(primary) = self.primary_of(&group).await else {
            return false;
        };
        let Ok(mut conn) = self.borrow_from(&primary).await else {
            return false;
        };
        let rows = match conn.query_internal(&q).await {
            Ok(rows) => {
                primary.release(conn);
                rows
            }
            Err(e) => {
                tracing::debug!(parent: &self.span, "could not look up tables: {e}");
                primary.discard(conn);
                return false;
            }
        };
        let (mut tables, mut views) = (Vec::new(), Vec::new());
        for r in rows {
            let mut r = r.into_iter();
            let (Some(Some(name)), Some(kind), def) = (r.next(), r.next(), r.next()) else {
                continue;
            };
            if kind.as_deref().is_some_and(|k| k.contains("VIEW")) {
                views.push((name.clone(), def.flatten().unwrap_or_default()));
            }
            tables.push(name);
        }
        let missing: Vec<Box<[u8]>> = names
            .into_iter()
            .filter(|n| !tables.iter().any(|t| t.as_bytes().eq_ignore_ascii_case(n)))
            .collect();
        tracing::debug!(parent: &self.span, ?tables, views = views.len(), missing = missing.len(), "learned tables the catalogue did not list");
        group
            .catalogue
            .rcu(|old| std::sync::Arc::new(old.learned(&tables, &views, &missing)));
        true
    }
}

/// The lookup of `names` (tables and views, any schema), or None when a
/// name cannot be put in a string literal plainly (those stay unknown:
/// their reads go to the primary).
fn describe_sql(names: &[Box<[u8]>]) -> Option<String> {
    if names.is_empty() || names.len() > 64 {
        return None;
    }
    let mut list = String::new();
    for n in names {
        let n = std::str::from_utf8(n).ok()?;
        if n.contains(['\'', '\\', '`']) || n.is_empty() {
            return None;
        }
        if !list.is_empty() {
            list.push_str(", ");
        }
        list.push('\'');
        list.push_str(n);
        list.push('\'');
    }
    Some(format!(
        "SELECT t.TABLE_NAME, t.TABLE_TYPE, v.VIEW_DEFINITION \
         FROM information_schema.TABLES t LEFT JOIN information_schema.VIEWS v \
         ON v.TABLE_SCHEMA = t.TABLE_SCHEMA AND v.TABLE_NAME = t.TABLE_NAME \
         WHERE t.TABLE_NAME IN ({list})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_cannot_be_quoted_plainly_are_not_looked_up() {
        let n = |s: &str| s.as_bytes().to_vec().into_boxed_slice();
        let q = describe_sql(&[n("a"), n("b_2")]).unwrap();
        assert!(q.ends_with("IN ('a', 'b_2')"), "{q}");
        assert!(describe_sql(&[n("a'b")]).is_none());
        assert!(describe_sql(&[n("a\\")]).is_none());
        assert!(describe_sql(&[]).is_none());
    }
}
