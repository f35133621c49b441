//! What the server's catalogue adds to a statement's classification: the
//! server's flavor (a few built-in functions of MySQL are stored functions
//! or UDFs on MariaDB, and the other way round), stored functions and UDFs
//! that take a built-in's name, and views that call a function which may
//! write. The monitor reads these from each group's primary; classifying
//! with an empty catalogue is as careful as the statement text allows.

use crate::classify::{classify_observing, Classification, Flags};
use crate::lexer::{LexMode, Lexer, Token, TokenKind};
use std::collections::HashSet;

/// Lower-case names, looked up for every name in a statement's table
/// places (and before every parenthesis): a fast hash, seeded per process.
/// Only the server's listings add to these sets, never a client.
type Names = HashSet<Box<[u8]>, foldhash::fast::RandomState>;

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
    functions: Names,
    /// Views whose definition may write (calls such a function, or reads
    /// such a view), or cannot be read, lower case.
    views: Names,
    /// Every table and view of every schema, by name, lower case (None:
    /// not listed). A name missing from it may be a view created since.
    tables: Option<Names>,
    /// Names reads asked about that a later listing still did not have
    /// (no such table, or one the monitor's account cannot see): the
    /// listing cannot tell about them, and they are read by their text.
    invisible: Names,
}

/// Names kept as not listed at most (beyond, no more are added: reads of
/// further such names keep going to the primary).
const MAX_INVISIBLE: usize = 10_000;

/// What the catalogue says of the names a statement reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Touch {
    Nothing,
    /// A function or view that may write.
    MayWrite,
    /// A table the catalogue does not list.
    Unknown,
}

fn lower(name: &[u8], buf: &mut [u8; MAX_NAME]) -> Option<usize> {
    let b = buf.get_mut(..name.len())?;
    b.copy_from_slice(name);
    b.make_ascii_lowercase();
    Some(name.len())
}

fn contains(set: &Names, name: &[u8]) -> bool {
    // (Most servers have no function or view that may write.)
    if set.is_empty() {
        return false;
    }
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
            views: Names::default(),
            tables: None,
            invisible: Names::default(),
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

    /// The names of every table and view the server has (in any schema):
    /// a read of any other name goes to the primary until the catalogue is
    /// read again, since it may be a view created meanwhile.
    pub fn with_tables<T: IntoIterator<Item = String>>(mut self, tables: T) -> Catalogue {
        self.tables = Some(
            tables
                .into_iter()
                .map(|t| t.to_ascii_lowercase().into_bytes().into_boxed_slice())
                .collect(),
        );
        self
    }

    /// Carries over the names an earlier catalogue learned were not there
    /// (or hidden from the account that looked) and this one does not list
    /// either.
    pub fn keep_invisible(mut self, earlier: &Catalogue) -> Catalogue {
        if let Some(tables) = &self.tables {
            self.invisible = earlier
                .invisible
                .iter()
                .filter(|n| !tables.contains(*n))
                .cloned()
                .collect();
        }
        self
    }

    /// A copy that also knows what a session found out about names this
    /// one did not list: `tables` are there (tables or views), `views`
    /// are views with their definitions (those that may write are read on
    /// the primary), `missing` are not there (or hidden from the account
    /// that looked: read by their text from now on).
    pub fn learned(
        &self,
        tables: &[String],
        views: &[(String, String)],
        missing: &[Box<[u8]>],
    ) -> Catalogue {
        let mut cat = self.clone();
        let Some(known) = &mut cat.tables else {
            return cat;
        };
        for t in tables {
            known.insert(t.to_ascii_lowercase().into_bytes().into_boxed_slice());
        }
        let mut buf = [0u8; MAX_NAME];
        for n in missing {
            if cat.invisible.len() < MAX_INVISIBLE {
                if let Some(len) = lower(n, &mut buf) {
                    cat.invisible.insert(buf[..len].into());
                }
            }
        }
        for (name, def) in views {
            if def.trim().is_empty() || self.classify(def.as_bytes()).may_write() {
                cat.views
                    .insert(name.to_ascii_lowercase().into_bytes().into_boxed_slice());
            }
        }
        cat
    }

    /// The names of `sql` in a table's place that this catalogue does not
    /// list (for [`Catalogue::with_asked`]).
    pub fn unknown_tables(&self, sql: &[u8]) -> Vec<Box<[u8]>> {
        let mut out = Vec::new();
        let mut lexer = Lexer::with_mode(sql, LexMode::DEFAULT);
        self.scan(&mut lexer, |n| out.push(n.into()));
        out
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

    /// As [`classify_in`], then with what the catalogue knows. The
    /// catalogue reads the names from classification's own tokens (one
    /// reading of the statement, not two); only a statement whose tokens
    /// depend on the lexing mode is read again in the other modes.
    pub fn classify_in<'a, F: FnOnce() -> LexMode>(
        &self,
        sql: &'a [u8],
        session: F,
    ) -> Classification<'a> {
        self.classify_observing(sql, session, |_| {}).0
    }

    /// [`Catalogue::classify_in`], showing each token of the default
    /// mode's reading to `observe` too (say, to build the statement's
    /// digest in the same pass); also says whether the tokens depend on
    /// the lexing mode (then what `observe` saw holds for the default
    /// mode only).
    pub fn classify_observing<'a, F: FnOnce() -> LexMode>(
        &self,
        sql: &'a [u8],
        session: F,
        mut observe: impl FnMut(&Token<'a>),
    ) -> (Classification<'a>, bool) {
        let mut own = None;
        let knows = !self.functions.is_empty() || !self.views.is_empty() || self.tables.is_some();
        let mut scan = Scan::default();
        let (mut c, dependent) = classify_observing(
            sql,
            || *own.insert(session()),
            |t| {
                if knows {
                    scan.token(self, t);
                }
                observe(t);
            },
        );
        match self.kind {
            Some(ServerKind::MariaDb) => c.flags.remove(Flags::MARIADB_FUNCTION),
            Some(ServerKind::MySql) => c.flags.remove(Flags::MYSQL_FUNCTION),
            None => {}
        }
        if c.read_only && !c.flags.intersects(Flags::MAY_WRITE_FUNCTION) && knows {
            match self.touches(sql, scan.end(self), dependent, own) {
                Touch::MayWrite => c.flags.insert(Flags::STORED_FUNCTION),
                Touch::Unknown => c.flags.insert(Flags::UNKNOWN_TABLE),
                Touch::Nothing => {}
            }
        }
        (c, dependent)
    }

    /// Whether the statement calls one of the catalogue's functions or
    /// reads one of its views (a name where a table name can stand: a
    /// column or alias of the same name is not the view), given what the
    /// default mode's reading found (`first`).
    fn touches(&self, sql: &[u8], first: Touch, dependent: bool, own: Option<LexMode>) -> Touch {
        let mut worst = first;
        if dependent && worst != Touch::MayWrite {
            // Read the other ways too, as `classify_in` does.
            for m in std::iter::once(LexMode::OTHER).chain(own) {
                match self.touches_with(&mut Lexer::with_mode(sql, m)) {
                    Touch::MayWrite => return Touch::MayWrite,
                    Touch::Unknown => worst = Touch::Unknown,
                    Touch::Nothing => {}
                }
            }
        }
        worst
    }

    fn touches_with(&self, lexer: &mut Lexer<'_>) -> Touch {
        let mut scan = Scan::default();
        for t in lexer.by_ref() {
            if scan.token(self, &t) {
                break;
            }
        }
        scan.end(self)
    }

    /// Reads the statement's names: true at the first function or view
    /// that may write; `unlisted` is called with each name in a table's
    /// place the catalogue does not list.
    fn scan<'a>(&self, lexer: &mut Lexer<'a>, mut unlisted: impl FnMut(&'a [u8])) -> bool {
        let mut scan = Scan {
            collect: true,
            ..Scan::default()
        };
        for t in lexer.by_ref() {
            let writes = scan.token(self, &t);
            if let Some(n) = scan.take_unlisted() {
                unlisted(n);
            }
            if writes {
                return true;
            }
        }
        scan.end(self);
        if let Some(n) = scan.take_unlisted() {
            unlisted(n);
        }
        false
    }

    /// Whether `name`, read as a table, is one the server was seen to have
    /// (or a common table expression of the statement, or DUAL). Always
    /// true when the catalogue lists no tables.
    fn listed(&self, name: &[u8], tables: &TablePositions<'_>) -> bool {
        let Some(known) = &self.tables else {
            return true;
        };
        contains(known, name)
            || contains(&self.invisible, name)
            || name.eq_ignore_ascii_case(b"dual")
            || tables.is_cte(name)
    }
}

/// The catalogue's reading of a statement, one token at a time: whether it
/// calls a function or reads a view that may write, and the names in a
/// table's place the catalogue does not list.
#[derive(Default)]
struct Scan<'a> {
    prev: Option<&'a [u8]>,
    tables: TablePositions<'a>,
    /// A name in a table's place, looked up once the next token shows it
    /// is not a schema (`db.t`) or a table function (`JSON_TABLE(`).
    named: Option<&'a [u8]>,
    /// A function or view that may write was seen (later tokens change
    /// nothing).
    writes: bool,
    /// A name in a table's place the catalogue does not list was seen.
    unknown: bool,
    /// Keep the unlisted names (for [`Catalogue::unknown_tables`]); the
    /// last one seen, until taken.
    collect: bool,
    unlisted: Option<&'a [u8]>,
}

impl<'a> Scan<'a> {
    /// Reads one token; true once the statement is known to touch
    /// something that may write.
    fn token(&mut self, cat: &Catalogue, t: &Token<'a>) -> bool {
        if self.writes {
            return true;
        }
        if let Some(n) = self.named.take() {
            if !t.is_punct(b'.') && !t.is_punct(b'(') && !cat.listed(n, &self.tables) {
                self.unlisted_name(n);
            }
        }
        let table = self.tables.next(t);
        match t.kind {
            TokenKind::Word | TokenKind::QuotedIdent => {
                if table {
                    if contains(&cat.views, t.text) {
                        self.writes = true;
                        return true;
                    }
                    self.named = Some(t.text);
                }
                self.prev = Some(t.text);
                return false;
            }
            TokenKind::Punct
                if t.text == b"(" && self.prev.is_some_and(|p| contains(&cat.functions, p)) =>
            {
                self.writes = true;
                return true;
            }
            _ => {}
        }
        self.prev = None;
        false
    }

    /// The statement ended: what it touches.
    fn end(&mut self, cat: &Catalogue) -> Touch {
        if self.writes {
            return Touch::MayWrite;
        }
        if let Some(n) = self.named.take().filter(|n| !cat.listed(n, &self.tables)) {
            self.unlisted_name(n);
        }
        if self.unknown {
            Touch::Unknown
        } else {
            Touch::Nothing
        }
    }

    fn unlisted_name(&mut self, n: &'a [u8]) {
        self.unknown = true;
        if self.collect {
            self.unlisted = Some(n);
        }
    }

    fn take_unlisted(&mut self) -> Option<&'a [u8]> {
        self.unlisted.take()
    }
}

/// What a word does to [`TablePositions`] (a set of these bits; 0 for
/// most words). One match on the length and a few comparisons, rather
/// than comparing every word with each of twenty keywords.
const WITH: u16 = 1;
/// Starts the statement a WITH clause is for.
const STATEMENT: u16 = 1 << 1;
/// A table name follows (FROM, JOIN, UPDATE, INTO).
const OPENS: u16 = 1 << 2;
/// INTO: a table follows but no FROM list opens.
const INTO: u16 = 1 << 3;
/// TABLE: a table follows.
const TABLE: u16 = 1 << 4;
/// Ends a FROM list.
const ENDS: u16 = 1 << 5;
/// `FROM (SELECT ...`, `VALUES`, `LATERAL`: no name follows.
const DERIVED: u16 = 1 << 6;
const LATERAL: u16 = 1 << 7;

fn roles(w: &[u8]) -> u16 {
    let is = |k: &str| w.eq_ignore_ascii_case(k.as_bytes());
    match w.len() {
        3 if is("set") || is("for") => ENDS,
        4 if is("with") => WITH,
        4 if is("from") || is("join") => OPENS,
        4 if is("into") => OPENS | INTO,
        5 if is("table") => STATEMENT | TABLE,
        5 if is("where") || is("group") || is("order") || is("limit") || is("union") => ENDS,
        6 if is("select") || is("values") => STATEMENT | DERIVED,
        6 if is("insert") || is("delete") => STATEMENT,
        6 if is("update") => STATEMENT | OPENS,
        6 if is("having") || is("window") || is("except") => ENDS,
        7 if is("replace") => STATEMENT,
        7 if is("lateral") => DERIVED | LATERAL,
        9 if is("intersect") || is("returning") => ENDS,
        13 if is("straight_join") => OPENS,
        _ => 0,
    }
}

/// Follows a statement's tokens to tell which names stand where a table
/// name can: after FROM, JOIN, UPDATE, INTO or TABLE, after a comma of a
/// FROM list (at that list's level of parentheses, so a comma after an ON
/// clause counts and one inside a function's arguments does not), and
/// after `schema.`. Where it cannot tell (parentheses nested deeper than it
/// follows), every name counts: a view missed would run its function on a
/// replica, a column taken for a view only costs a read on the primary.
#[derive(Default)]
struct TablePositions<'a> {
    /// Names of the statement's common table expressions (WITH), as many
    /// as fit; more make every name count as one.
    ctes: [Option<&'a [u8]>; 8],
    /// The level of parentheses of an open WITH clause.
    with_at: Option<usize>,
    /// The next name is a common table expression's.
    next_is_cte: bool,
    depth: usize,
    /// Per level of parentheses: inside a FROM list.
    from: [bool; TablePositions::LEVELS],
    /// The next name is a table's.
    next_is_table: bool,
    /// The last token was a table's name (a `.` after it names the table
    /// in that schema).
    last_was_table: bool,
    /// Nested too deep to follow.
    lost: bool,
}

impl<'a> TablePositions<'a> {
    const LEVELS: usize = 32;

    /// Whether `name` is one of the statement's common table expressions.
    fn is_cte(&self, name: &[u8]) -> bool {
        self.lost
            || self.ctes[7].is_some()
            || self
                .ctes
                .iter()
                .flatten()
                .any(|c| c.eq_ignore_ascii_case(name))
    }

    /// A common table expression's name.
    fn note_cte(&mut self, name: &'a [u8]) {
        if let Some(slot) = self.ctes.iter_mut().find(|c| c.is_none()) {
            *slot = Some(name);
        }
    }

    /// Takes the next token; true when it is a name in a table's place.
    fn next(&mut self, t: &crate::lexer::Token<'a>) -> bool {
        if self.lost {
            return true;
        }
        let was_table = std::mem::take(&mut self.last_was_table);
        let next_is_table = std::mem::take(&mut self.next_is_table);
        let next_is_cte = std::mem::take(&mut self.next_is_cte);
        if next_is_cte && matches!(t.kind, TokenKind::Word | TokenKind::QuotedIdent) {
            if t.is_word("recursive") {
                self.next_is_cte = true;
            } else {
                self.note_cte(t.text);
            }
            return false;
        }
        match t.kind {
            TokenKind::Word => {
                let r = roles(t.text);
                if r & WITH != 0 {
                    self.with_at = Some(self.depth);
                    self.next_is_cte = true;
                    return false;
                }
                if r & STATEMENT != 0 && self.with_at == Some(self.depth) {
                    // The statement the WITH clause is for.
                    self.with_at = None;
                }
                if r & OPENS != 0 {
                    self.from[self.depth] = r & INTO == 0;
                    self.next_is_table = true;
                    return false;
                }
                if r & TABLE != 0 {
                    self.next_is_table = true;
                    return false;
                }
                if r & ENDS != 0 {
                    self.from[self.depth] = false;
                    return false;
                }
                if r & DERIVED != 0 {
                    // `FROM (SELECT ...`: a derived table, not a name.
                    self.next_is_table = r & LATERAL != 0 && next_is_table;
                    return false;
                }
                self.last_was_table = next_is_table;
                next_is_table
            }
            TokenKind::QuotedIdent => {
                self.last_was_table = next_is_table;
                next_is_table
            }
            TokenKind::Punct => {
                match t.text {
                    b"(" => {
                        self.depth += 1;
                        if self.depth >= Self::LEVELS {
                            self.lost = true;
                            return true;
                        }
                        self.from[self.depth] = false;
                        // `FROM (t1 JOIN t2)`: a table may follow.
                        self.next_is_table = next_is_table;
                    }
                    b")" => {
                        self.from[self.depth] = false;
                        self.depth = self.depth.saturating_sub(1);
                    }
                    b"," if self.with_at == Some(self.depth) => self.next_is_cte = true,
                    b"," => self.next_is_table = self.from[self.depth],
                    b"." => self.next_is_table = was_table,
                    b";" => {
                        self.depth = 0;
                        self.from = [false; Self::LEVELS];
                        self.with_at = None;
                    }
                    _ => {}
                }
                false
            }
            _ => false,
        }
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
    fn roles_match_the_keyword_lists() {
        let lists: [(u16, &[&str]); 8] = [
            (WITH, &["with"]),
            (
                STATEMENT,
                &[
                    "select", "insert", "update", "delete", "replace", "table", "values",
                ],
            ),
            (OPENS, &["from", "join", "straight_join", "update", "into"]),
            (INTO, &["into"]),
            (TABLE, &["table"]),
            (
                ENDS,
                &[
                    "where",
                    "group",
                    "having",
                    "order",
                    "limit",
                    "window",
                    "union",
                    "except",
                    "intersect",
                    "set",
                    "returning",
                    "for",
                ],
            ),
            (DERIVED, &["select", "values", "lateral"]),
            (LATERAL, &["lateral"]),
        ];
        let words = lists.iter().flat_map(|(_, l)| l.iter().copied());
        let others = [
            "", "c", "id", "sbtest1", "fromm", "fro", "joins", "tables", "straight",
        ];
        for w in words.chain(others) {
            for form in [w.to_string(), w.to_uppercase(), {
                let mut m = w.to_string();
                if let Some(c) = m.get_mut(0..1) {
                    c.make_ascii_uppercase();
                }
                m
            }] {
                let want = lists
                    .iter()
                    .filter(|(_, l)| l.contains(&w))
                    .fold(0, |acc, (bit, _)| acc | bit);
                assert_eq!(roles(form.as_bytes()), want, "{form}");
            }
        }
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
    fn a_view_counts_only_where_a_table_name_stands() {
        let cat = Catalogue::new(
            Some(ServerKind::MariaDb),
            [],
            views(&[("v", "select `db`.`log_it`(1) AS `x`")]),
        );
        let reads_view = [
            "SELECT * FROM v",
            "SELECT * FROM db.v",
            "SELECT * FROM `db` . `v`",
            "SELECT * FROM s, v",
            "SELECT * FROM s AS a, db.v AS b",
            "SELECT * FROM s JOIN v ON s.a = v.a",
            "SELECT * FROM s LEFT JOIN t ON concat(s.a, t.b) = 1, v",
            "SELECT * FROM s JOIN t USING (a), v",
            "SELECT * FROM (SELECT a FROM t WHERE a > 1) AS x, v",
            "SELECT * FROM (s JOIN v ON 1)",
            "SELECT (SELECT x FROM v) AS y",
            "SELECT * FROM s WHERE a IN (SELECT x FROM v)",
            "SELECT * FROM s STRAIGHT_JOIN v",
            "TABLE v",
            "WITH c AS (SELECT x FROM v) SELECT * FROM c",
            "SELECT 1; SELECT * FROM v",
        ];
        for sql in reads_view {
            assert!(cat.classify(sql.as_bytes()).may_write(), "{sql}");
        }
        let column_or_alias = [
            "SELECT v FROM s",
            "SELECT s.v FROM s",
            "SELECT v.a FROM s v",
            "SELECT a AS v FROM s AS v WHERE v.a = 1",
            "SELECT concat(a, v) FROM s",
            "SELECT * FROM s WHERE v = 1 ORDER BY v",
            "SELECT * FROM s JOIN t ON t.v = s.v",
            "SELECT * FROM s GROUP BY v HAVING v > 1",
        ];
        for sql in column_or_alias {
            assert!(!cat.classify(sql.as_bytes()).may_write(), "{sql}");
        }
        // Nested deeper than followed: every name counts.
        let deep = format!("SELECT {}v{} FROM s", "(".repeat(40), ")".repeat(40));
        assert!(cat.classify(deep.as_bytes()).may_write());
    }

    #[test]
    fn a_table_the_catalogue_does_not_list_may_be_a_new_view() {
        let cat = Catalogue::new(Some(ServerKind::MariaDb), [], []).with_tables([
            "t".to_string(),
            "S".to_string(),
            "tables".to_string(),
        ]);
        let unknown = |sql: &str| {
            cat.classify(sql.as_bytes())
                .flags
                .contains(Flags::UNKNOWN_TABLE)
        };
        for sql in [
            "SELECT * FROM new_v",
            "SELECT * FROM t JOIN new_v ON 1",
            "SELECT * FROM db.new_v",
            "SELECT * FROM t, `new_v`",
            "SELECT (SELECT 1 FROM new_v)",
            "WITH c AS (SELECT 1 FROM new_v) SELECT * FROM c",
        ] {
            assert!(unknown(sql), "{sql}");
        }
        for sql in [
            "SELECT * FROM t",
            "SELECT * FROM s AS new_v",
            "SELECT new_v FROM t",
            "SELECT * FROM db.t",
            "SELECT * FROM information_schema.tables",
            "SELECT 1 FROM DUAL",
            "SELECT 1",
            "SELECT * FROM JSON_TABLE('[1]', '$[*]' COLUMNS (a INT PATH '$')) AS j",
            "WITH c AS (SELECT 1 FROM t), d AS (SELECT 2 FROM c) SELECT * FROM c, d",
            "WITH RECURSIVE r (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r",
            "SELECT * FROM (SELECT 1 FROM t) AS x",
        ] {
            assert!(!unknown(sql), "{sql}");
        }
        // What a session finds out: a plain table, a view that writes, a
        // name that is not there.
        assert_eq!(
            cat.unknown_tables(b"SELECT * FROM t, New_T, db.new_v, gone"),
            vec![
                b"New_T".to_vec().into_boxed_slice(),
                b"new_v".to_vec().into_boxed_slice(),
                b"gone".to_vec().into_boxed_slice()
            ]
        );
        let next = cat.learned(
            &["new_t".to_string(), "new_v".to_string()],
            &[(
                "new_v".to_string(),
                "select `db`.`log_it`(1) AS `x`".to_string(),
            )],
            &[b"GONE".to_vec().into_boxed_slice()],
        );
        let flags = |c: &Catalogue, sql: &str| c.classify(sql.as_bytes()).flags;
        assert!(!flags(&next, "SELECT * FROM new_t").contains(Flags::UNKNOWN_TABLE));
        assert!(flags(&next, "SELECT * FROM new_v").contains(Flags::STORED_FUNCTION));
        assert!(!flags(&next, "SELECT * FROM gone").contains(Flags::UNKNOWN_TABLE));
        assert!(flags(&next, "SELECT * FROM newer").contains(Flags::UNKNOWN_TABLE));
        // The next listing: names not there stay known as such; what was
        // learned of tables comes from the listing again.
        let after = Catalogue::new(Some(ServerKind::MariaDb), [], [])
            .with_tables(["t".to_string()])
            .keep_invisible(&next);
        assert!(!flags(&after, "SELECT * FROM gone").contains(Flags::UNKNOWN_TABLE));
        assert!(flags(&after, "SELECT * FROM new_t").contains(Flags::UNKNOWN_TABLE));
        // A write is the primary's anyway; without a list of tables,
        // nothing is unknown.
        assert!(!unknown("INSERT INTO new_v VALUES (1)"));
        assert!(!Catalogue::new(Some(ServerKind::MariaDb), [], [])
            .classify(b"SELECT * FROM new_v")
            .flags
            .contains(Flags::UNKNOWN_TABLE));
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

    /// What the catalogue's classification was before it read the names
    /// from classification's own tokens: classify, then lex again for the
    /// names (in the other modes too when the tokens depend on the mode).
    fn two_readings(cat: &Catalogue, sql: &[u8], session: LexMode) -> Classification<'static> {
        let mut own = None;
        let mut c = crate::classify::classify_in(sql, || *own.insert(session));
        match cat.kind {
            Some(ServerKind::MariaDb) => c.flags.remove(Flags::MARIADB_FUNCTION),
            Some(ServerKind::MySql) => c.flags.remove(Flags::MYSQL_FUNCTION),
            None => {}
        }
        let knows = !cat.functions.is_empty() || !cat.views.is_empty() || cat.tables.is_some();
        if c.read_only && !c.flags.intersects(Flags::MAY_WRITE_FUNCTION) && knows {
            let mut lexer = Lexer::with_mode(sql, LexMode::DEFAULT);
            let mut worst = cat.touches_with(&mut lexer);
            if lexer.mode_dependent && worst != Touch::MayWrite {
                for m in std::iter::once(LexMode::OTHER).chain(own) {
                    match cat.touches_with(&mut Lexer::with_mode(sql, m)) {
                        Touch::MayWrite => {
                            worst = Touch::MayWrite;
                            break;
                        }
                        Touch::Unknown => worst = Touch::Unknown,
                        Touch::Nothing => {}
                    }
                }
            }
            match worst {
                Touch::MayWrite => c.flags.insert(Flags::STORED_FUNCTION),
                Touch::Unknown => c.flags.insert(Flags::UNKNOWN_TABLE),
                Touch::Nothing => {}
            }
        }
        Classification {
            kind: c.kind,
            flags: c.flags,
            read_only: c.read_only,
            hints: Default::default(),
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// One reading gives what two gave, for statements made of the
        /// words, names and marks the catalogue looks at.
        #[test]
        fn one_reading_classifies_as_two_did(
            words in proptest::collection::vec(0usize..WORDS.len(), 0..24),
            ansi in proptest::prelude::any::<bool>(),
        ) {
            let cat = Catalogue::new(
                Some(ServerKind::MariaDb),
                ["point".to_string()],
                views(&[("v_logs", "select `db`.`log_it`(`a`) AS `x` from `t`")]),
            )
            .with_tables(["t".to_string(), "u".to_string()]);
            let sql: Vec<u8> = words.iter().flat_map(|&w| [WORDS[w], " "].concat().into_bytes()).collect();
            let session = LexMode { ansi_quotes: ansi, ..LexMode::DEFAULT };
            let one = cat.classify_in(&sql, || session);
            let two = two_readings(&cat, &sql, session);
            proptest::prop_assert_eq!(
                (one.kind, one.flags, one.read_only),
                (two.kind, two.flags, two.read_only),
                "{}", String::from_utf8_lossy(&sql)
            );
        }
    }

    const WORDS: &[&str] = &[
        "SELECT",
        "SELECT",
        "FROM",
        "FROM",
        "JOIN",
        "WHERE",
        "WITH",
        "AS",
        "ON",
        "UPDATE",
        "INTO",
        "t",
        "u",
        "db",
        ".",
        ",",
        "(",
        ")",
        ";",
        "v_logs",
        "`v_logs`",
        "\"v_logs\"",
        "point",
        "abs",
        "new_t",
        "x",
        "1",
        "'a'",
        "'it''s'",
        "\"s\"",
        "/* c */",
        "-- c\n",
        "#",
        "DUAL",
        "JSON_TABLE",
        "*",
        "=",
        "INSERT",
        "LIMIT",
    ];
}
