//! What the server's catalogue adds to a statement's classification: the
//! server's flavor (a few built-in functions of MySQL are stored functions
//! or UDFs on MariaDB, and the other way round), stored functions and UDFs
//! that take a built-in's name, and views that call a function which may
//! write. The monitor reads these from each group's primary; classifying
//! with an empty catalogue is as careful as the statement text allows.

use crate::classify::{classify_in, Classification, Flags};
use crate::lexer::{LexMode, Lexer, TokenKind};
use std::collections::HashSet;

/// Which server answers the statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    MariaDb,
    MySql,
}

/// MySQL names are at most 64 characters, up to 4 bytes each.
const MAX_NAME: usize = 256;

#[derive(Debug, Default, Clone)]
pub struct Catalogue {
    /// None until the monitor has reached the server.
    pub kind: Option<ServerKind>,
    /// Stored functions and UDFs whose names a built-in also has, lower
    /// case (any other stored function already classifies as one).
    functions: HashSet<Box<[u8]>>,
    /// Views whose definition may write (calls such a function, or reads
    /// such a view), or cannot be read, lower case.
    views: HashSet<Box<[u8]>>,
}

fn lower(name: &[u8], buf: &mut [u8; MAX_NAME]) -> Option<usize> {
    let b = buf.get_mut(..name.len())?;
    b.copy_from_slice(name);
    b.make_ascii_lowercase();
    Some(name.len())
}

fn contains(set: &HashSet<Box<[u8]>>, name: &[u8]) -> bool {
    let mut buf = [0u8; MAX_NAME];
    match lower(name, &mut buf) {
        Some(n) => set.contains(&buf[..n]),
        // Longer than any name: not one of ours.
        None => false,
    }
}

impl Catalogue {
    /// Builds the catalogue from what the server lists: the names of its
    /// stored functions and UDFs, and each view's name and definition (an
    /// empty definition, which the server shows to an account without
    /// SHOW VIEW, counts as one that may write).
    pub fn new<F, V>(kind: Option<ServerKind>, functions: F, views: V) -> Catalogue
    where
        F: IntoIterator<Item = String>,
        V: IntoIterator<Item = (String, String)>,
    {
        let mut cat = Catalogue {
            kind,
            functions: functions
                .into_iter()
                .filter(|f| crate::builtin::is_builtin(f.as_bytes()))
                .map(|f| f.to_ascii_lowercase().into_bytes().into_boxed_slice())
                .collect(),
            views: HashSet::new(),
        };
        let mut pending: Vec<(String, String)> = views.into_iter().collect();
        // A view may read another view: repeat until nothing changes.
        loop {
            let before = pending.len();
            pending.retain(|(name, def)| {
                let writes = def.trim().is_empty() || cat.classify(def.as_bytes()).may_write();
                if writes {
                    cat.views
                        .insert(name.to_ascii_lowercase().into_bytes().into_boxed_slice());
                }
                !writes
            });
            if pending.len() == before {
                break;
            }
        }
        cat
    }

    /// Views that may write, by name (for logs and the admin port).
    pub fn writing_views(&self) -> usize {
        self.views.len()
    }

    /// Classifies a statement for this server: as [`classify`], then with
    /// what the catalogue knows.
    pub fn classify<'a>(&self, sql: &'a [u8]) -> Classification<'a> {
        self.classify_in(sql, || LexMode::DEFAULT)
    }

    /// As [`classify_in`], then with what the catalogue knows.
    pub fn classify_in<'a, F: FnOnce() -> LexMode>(
        &self,
        sql: &'a [u8],
        session: F,
    ) -> Classification<'a> {
        let mut own = None;
        let mut c = classify_in(sql, || *own.insert(session()));
        match self.kind {
            Some(ServerKind::MariaDb) => c.flags.remove(Flags::MARIADB_FUNCTION),
            Some(ServerKind::MySql) => c.flags.remove(Flags::MYSQL_FUNCTION),
            None => {}
        }
        if c.read_only
            && !c.flags.intersects(Flags::MAY_WRITE_FUNCTION)
            && (!self.functions.is_empty() || !self.views.is_empty())
            && self.touches(sql, own)
        {
            c.flags.insert(Flags::STORED_FUNCTION);
        }
        c
    }

    /// Whether the statement calls one of the catalogue's functions or
    /// names one of its views (anywhere: a column of the same name costs a
    /// read on the primary, never a write on a replica).
    fn touches(&self, sql: &[u8], own: Option<LexMode>) -> bool {
        let mut lexer = Lexer::with_mode(sql, LexMode::DEFAULT);
        if self.touches_with(&mut lexer) {
            return true;
        }
        // Read the other ways too, as `classify_in` does.
        lexer.mode_dependent
            && std::iter::once(LexMode::OTHER)
                .chain(own)
                .any(|m| self.touches_with(&mut Lexer::with_mode(sql, m)))
    }

    fn touches_with(&self, lexer: &mut Lexer<'_>) -> bool {
        let mut prev: Option<&[u8]> = None;
        for t in lexer.by_ref() {
            match t.kind {
                TokenKind::Word | TokenKind::QuotedIdent => {
                    if contains(&self.views, t.text) {
                        return true;
                    }
                    prev = Some(t.text);
                    continue;
                }
                TokenKind::Punct
                    if t.text == b"(" && prev.is_some_and(|p| contains(&self.functions, p)) =>
                {
                    return true;
                }
                _ => {}
            }
            prev = None;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn views(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn flavor_decides_one_flavor_builtins() {
        let sql = b"SELECT uuid_to_bin(u) FROM t";
        assert!(Catalogue::default().classify(sql).may_write());
        let maria = Catalogue::new(Some(ServerKind::MariaDb), [], []);
        assert!(maria.classify(sql).may_write());
        let mysql = Catalogue::new(Some(ServerKind::MySql), [], []);
        assert!(!mysql.classify(sql).may_write());
        assert!(!maria
            .classify(b"SELECT column_get(c, 1 as int) FROM t")
            .may_write());
    }

    #[test]
    fn views_that_call_functions_may_write() {
        let cat = Catalogue::new(
            Some(ServerKind::MariaDb),
            [],
            views(&[
                ("v_plain", "select `db`.`t`.`a` AS `a` from `db`.`t`"),
                (
                    "v_logs",
                    "select `db`.`log_it`(`db`.`t`.`a`) AS `x` from `db`.`t`",
                ),
                ("v_outer", "select `x` AS `x` from `db`.`v_logs`"),
                ("v_hidden", ""),
            ]),
        );
        assert_eq!(cat.writing_views(), 3);
        assert!(!cat.classify(b"SELECT * FROM v_plain").may_write());
        assert!(cat.classify(b"SELECT * FROM db.V_LOGS").may_write());
        assert!(cat.classify(b"SELECT * FROM `v_outer` WHERE 1").may_write());
        assert!(cat.classify(b"SELECT * FROM v_hidden").may_write());
        assert!(!cat.classify(b"SELECT 'v_logs'").may_write());
    }

    #[test]
    fn stored_functions_named_like_builtins_may_write() {
        let cat = Catalogue::new(
            Some(ServerKind::MariaDb),
            ["point".to_string(), "my_func".to_string()],
            [],
        );
        assert!(cat.classify(b"SELECT point(1)").may_write());
        assert!(!cat.classify(b"SELECT point FROM t").may_write());
        assert!(!cat.classify(b"SELECT abs(1)").may_write());
    }
}
