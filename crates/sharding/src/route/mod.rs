//! Where a statement runs on a sharded layout: one group, several (a read
//! whose rows are concatenated, a DDL sent to each), the session's usual
//! place, or nowhere (refused, with the reason). A pure function of the
//! statement's analysis and its values; the analysis of each statement
//! shape is parsed once per thread and cached.

mod decide;
mod groups;
mod keys;
mod merge_plan;
mod one_group;
mod rewrite;
mod sequences;

use crate::analyze::{analyze, Analysis, GroupSet, Place, StmtKind};
use crate::fingerprint::{as_read, fingerprint, Lit, Slot, Tokens, Val};
use crate::layout::{Layout, Unlisted};
use crate::merge::GroupPlan;
use crate::placement::group_of;
use keys::key_value;
pub use keys::OwnedKey;
pub use merge_plan::merge_sql;
use rewrite::parseable;
pub use rewrite::{split_rows, with_values};
pub use sequences::{fill_ids, IdNeed};
use sextant_sql::{Classification, Kind, LexMode, Lexer, TokenKind};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Names no table of the layout: runs where the session's statements
    /// go (its database's default group, else the user's group).
    Session,
    /// One group, by index in [`Layout::groups`].
    One(usize),
    /// Any one of these groups: each holds a copy of everything the
    /// statement reads (global tables). The caller picks: the group its
    /// transaction is in, or [`Router::pick`] to spread the reads.
    AnyOf(GroupSet),
    /// A read over several groups, their rows concatenated.
    Scatter(GroupSet),
    /// DDL, run on every group holding the table.
    Broadcast(GroupSet),
    /// A read over several groups whose rows are merged: ordered, and/or
    /// limited.
    Merge(Box<MergePlan>),
    /// A write to several groups, run as one distributed transaction.
    Write(Box<WritePlan>),
    /// Not run: why (for an ER_NOT_SUPPORTED_YET message).
    Refuse(String),
}

/// A write to several groups: every group's part commits or none does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WritePlan {
    pub groups: GroupSet,
    /// Each group's own statement, in `groups` order: an INSERT's rows
    /// split by the group each belongs to. Empty: every group runs the
    /// statement as written.
    pub split: Vec<(usize, Vec<u8>)>,
    /// The group of each INSERT row (what `split` is made from).
    pub rows: Vec<usize>,
    /// The groups hold copies of one table (a global table): the client
    /// is told one copy's affected rows, not their sum.
    pub copies: bool,
}

/// How a read over several groups is merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergePlan {
    pub groups: GroupSet,
    /// The statement each group runs: the client's, with hidden columns
    /// per ORDER BY item at the end of its select list (see
    /// [`MergePlan::hidden`]), and a LIMIT of offset + count without
    /// offset.
    pub sql: Vec<u8>,
    /// Each ORDER BY item: descending?
    pub order: Vec<bool>,
    /// Each ORDER BY item's expression, selected again as hidden columns.
    pub exprs: Vec<String>,
    /// Rows to skip, and rows to return after them (None: all).
    pub offset: u64,
    pub count: Option<u64>,
    /// GROUP BY, DISTINCT or aggregates: how rows of equal keys combine
    /// (its ORDER BY, offset and count are then the plan's own).
    pub grouped: Option<GroupPlan>,
    /// What the groups' statement changes of the client's: columns added
    /// at the end of the select list, DISTINCT dropped, and the clauses
    /// from GROUP BY to LIMIT replaced (None: only the LIMIT, by
    /// `LIMIT offset+count`).
    pub rewrite: Rewrite,
}

/// How the statement each group runs differs from the client's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rewrite {
    pub hidden: Vec<String>,
    pub drop_distinct: bool,
    pub clauses: Option<String>,
}

impl MergePlan {
    /// Hidden columns at the end of each group's rows: per ORDER BY item
    /// its value, its weight, and the weight of it with a space appended
    /// (whose extra bytes are the weight of a space: strings compare as if
    /// the shorter were padded with spaces).
    pub fn hidden(&self) -> usize {
        self.rewrite.hidden.len()
    }
}

/// Most shapes a thread keeps; past it the cache starts over (a workload
/// of unbounded shapes costs parses, never memory).
const CACHE_MAX: usize = 4096;

enum Cached {
    Shape(Arc<Analysis>),
    /// The shape does not parse with placeholders (a number where the
    /// grammar wants a literal, as in `CHAR(10)`): each statement of it is
    /// parsed as written.
    AsWritten,
}

/// What the shape cache knows of a statement.
enum Lookup {
    Shape(Arc<Analysis>),
    AsWritten(Tokens),
}

struct Cache {
    entries: HashMap<Vec<u8>, Cached>,
    key: Vec<u8>,
    shape: Vec<u8>,
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache {
        entries: HashMap::new(),
        key: Vec::new(),
        shape: Vec::new(),
    });
}

static ROUTERS: AtomicU64 = AtomicU64::new(1);

/// Routes statements by one layout.
pub struct Router {
    pub layout: Layout,
    /// Tells this router's cached shapes from another's (a reload).
    id: u64,
    /// Lower-case names of the tables the layout lists, for statements
    /// sextant cannot parse.
    listed: Vec<String>,
    /// Spreads reads of global tables over their groups.
    turn: AtomicU64,
}

impl Router {
    pub fn new(layout: Layout) -> Router {
        let mut listed: Vec<String> = layout
            .tables
            .keys()
            .chain(layout.single.keys())
            .map(|(_, t)| t.clone())
            .collect();
        listed.sort();
        listed.dedup();
        Router {
            layout,
            id: ROUTERS.fetch_add(1, Ordering::Relaxed),
            listed,
            turn: AtomicU64::new(0),
        }
    }

    pub fn group_name(&self, i: usize) -> &str {
        self.layout.groups.get(i).map_or("?", String::as_str)
    }

    /// Routes a text statement (`params` empty) or a prepared statement's
    /// execution (`sql` its text, `params` its values). `c` is the
    /// classifier's reading of it: its hints, and whether it may write
    /// (for statements sextant cannot parse).
    pub fn route(
        &self,
        db: Option<&str>,
        sql: &[u8],
        mode: LexMode,
        params: &[Lit<'_>],
        c: &Classification<'_>,
    ) -> Route {
        let may_write = c.may_write();
        if let Some(r) = self.hinted(db, c) {
            return r;
        }
        if mode.server.is_none() {
            // Which rows a versioned comment's content picks depends on the
            // servers' version, not known yet (just after start).
            let mut l = Lexer::with_mode(sql, mode);
            l.by_ref().for_each(drop);
            if l.versioned {
                return Route::Refuse(
                    "a versioned executable comment (/*!NNNNN or /*M!) before sextant knows the servers' version: try again in a moment".into(),
                );
            }
        }
        let mut slots = Vec::new();
        let r = match self.lookup(db, sql, mode, &mut slots) {
            Lookup::Shape(a) => {
                let r = self.route_analysis(&a, &slots, params);
                self.finish(self.other(r, &a, sql, mode, may_write), &a, sql, mode)
            }
            Lookup::AsWritten(tokens) => self.as_written(db, sql, mode, tokens, may_write),
        };
        // EXPLAIN of a write analyses as naming no table.
        let unread = match r {
            Route::Refuse(_) => true,
            Route::Session => one_group::explains(sql, mode),
            _ => false,
        };
        if unread {
            if let Some((inner, form)) = one_group::without_form(sql, mode) {
                let ic = sextant_sql::classify_in(&inner, || mode);
                return self.in_one_group(self.route(db, &inner, mode, params, &ic), form);
            }
        }
        r
    }

    /// The analysis of a statement's shape, from this thread's cache
    /// (parsed and kept on first sight), with the statement's values in
    /// `slots`; or that its shape does not parse, and it must be parsed
    /// as written.
    fn lookup<'a>(
        &self,
        db: Option<&str>,
        sql: &'a [u8],
        mode: LexMode,
        slots: &mut Vec<Slot<'a>>,
    ) -> Lookup {
        CACHE.with(|c| {
            let c = &mut *c.borrow_mut();
            let tokens = fingerprint(sql, mode, &mut c.shape, slots);
            if tokens.dollar_name {
                return Lookup::AsWritten(tokens);
            }
            c.key.clear();
            c.key.extend_from_slice(&self.id.to_le_bytes());
            c.key.extend_from_slice(db.unwrap_or("").as_bytes());
            c.key.push(0);
            c.key.extend_from_slice(&c.shape);
            match c.entries.get(&c.key) {
                Some(Cached::Shape(a)) => return Lookup::Shape(a.clone()),
                Some(Cached::AsWritten) => return Lookup::AsWritten(tokens),
                None => {}
            }
            if c.entries.len() >= CACHE_MAX {
                c.entries.clear();
            }
            let text = String::from_utf8_lossy(parseable(&c.shape));
            match Parser::parse_sql(&MySqlDialect {}, &text) {
                Ok(stmts) => {
                    let a = Arc::new(analyze(&self.layout, db, &stmts, tokens));
                    c.entries.insert(c.key.clone(), Cached::Shape(a.clone()));
                    Lookup::Shape(a)
                }
                Err(_) => {
                    c.entries.insert(c.key.clone(), Cached::AsWritten);
                    Lookup::AsWritten(tokens)
                }
            }
        })
    }

    /// Where to prepare a statement whose values come at execution: the
    /// group of its first table (any group holding a table has its
    /// definition), the session's place, or a refusal that holds for any
    /// values. Each execution is routed by [`Router::route`] with its
    /// parameters.
    pub fn route_prepare(
        &self,
        db: Option<&str>,
        sql: &[u8],
        mode: LexMode,
        may_write: bool,
    ) -> Route {
        let r = self.prepare_place(db, sql, mode, may_write);
        if let Route::Refuse(_) = r {
            if let Some((inner, form)) = one_group::without_form(sql, mode) {
                return self.in_one_group(self.route_prepare(db, &inner, mode, may_write), form);
            }
        }
        r
    }

    fn prepare_place(&self, db: Option<&str>, sql: &[u8], mode: LexMode, may_write: bool) -> Route {
        let (a, parsed) = self.analysis(db, sql, mode);
        let Some(a) = a else {
            return self.unparsed(db, sql, mode, may_write, &parsed);
        };
        if let Some(why) = &a.refuse {
            return Route::Refuse(why.clone());
        }
        if a.kind == StmtKind::Other && may_write {
            if let Some(r) = self.mentions(sql, mode, "a statement sextant does not route by table")
            {
                return r;
            }
        }
        let Some(first) = a.tables.first() else {
            return Route::Session;
        };
        match &first.place {
            Place::Sharded { vdb, .. } => self
                .vdb_groups(&self.layout.vdbs[*vdb])
                .first()
                .map_or(Route::Session, Route::One),
            Place::Group(g) => Route::One(*g),
            Place::Global(set) => set.first().map_or(Route::Session, Route::One),
            Place::Elsewhere => Route::Session,
        }
    }

    /// The analysis of a statement (from the shape cache when it has one),
    /// or the parser's error.
    fn analysis(
        &self,
        db: Option<&str>,
        sql: &[u8],
        mode: LexMode,
    ) -> (Option<Arc<Analysis>>, String) {
        let mut slots = Vec::new();
        let mut shape = Vec::new();
        let tokens = fingerprint(sql, mode, &mut shape, &mut slots);
        let parse = |text: &[u8]| {
            Parser::parse_sql(&MySqlDialect {}, &String::from_utf8_lossy(parseable(text)))
                .map(|stmts| Arc::new(analyze(&self.layout, db, &stmts, tokens)))
        };
        if !tokens.dollar_name {
            if let Ok(a) = parse(&shape) {
                return (Some(a), String::new());
            }
        }
        match parse(&as_read(sql, mode)) {
            Ok(a) => (Some(a), String::new()),
            Err(e) => (None, e.to_string()),
        }
    }

    /// Cetus's hints, which say where a statement runs:
    /// `/*# group="all" */` (every group: DDL and other statements that are
    /// not DML run on each in turn, reads return each group's rows), a
    /// group by name, or `/*# table="t" key="v" */` (the group of that key).
    fn hinted(&self, db: Option<&str>, c: &Classification<'_>) -> Option<Route> {
        let text = |v: &[u8]| String::from_utf8_lossy(v).into_owned();
        if let Some(g) = c.hints.get("group") {
            if g.eq_ignore_ascii_case(b"all") {
                let all = match self.layout.groups.len() {
                    n if n >= 64 => GroupSet(u64::MAX),
                    n => GroupSet((1u64 << n) - 1),
                };
                return Some(match c.kind {
                    Kind::Select if !c.may_write() => Route::Scatter(all),
                    Kind::Insert | Kind::Update | Kind::Delete | Kind::Replace | Kind::Load => {
                        Route::Refuse(
                            "/*# group=\"all\" */ on a write: a write goes where its shard key puts it (or to every copy of a global table); name one group, or leave the hint out".into(),
                        )
                    }
                    Kind::Begin | Kind::Commit | Kind::Rollback | Kind::Savepoint | Kind::Xa => {
                        Route::Refuse(
                            "/*# group=\"all\" */ on transaction control: a transaction runs in one group".into(),
                        )
                    }
                    _ if c.may_write() || c.kind == Kind::Ddl => Route::Broadcast(all),
                    _ => Route::Scatter(all),
                });
            }
            let name = text(g);
            return Some(match self.layout.group_index(&name) {
                Some(i) => Route::One(i),
                None => Route::Refuse(format!(
                    "/*# group=\"{name}\" */: the sharding layout has no group {name} (it has {})",
                    self.layout.groups.join(", ")
                )),
            });
        }
        let (table, key) = (c.hints.get("table")?, c.hints.get("key")?);
        let table = text(table);
        let (tdb, tname) = match table.split_once('.') {
            Some((d, t)) => (d.to_string(), t.to_string()),
            None => (db.unwrap_or("").to_string(), table.clone()),
        };
        Some(match self.layout.placement(&tdb, &tname) {
            crate::layout::Placement::Sharded { vdb, .. } => {
                let lit = match std::str::from_utf8(key)
                    .ok()
                    .and_then(|k| k.parse::<i64>().ok())
                {
                    Some(i) => Lit::Int(i),
                    None => Lit::Str(std::borrow::Cow::Borrowed(key)),
                };
                let placed = key_value(&Val::Lit(lit.into_owned()), &[], &[], vdb.key_type)
                    .and_then(|k| {
                        group_of(vdb, k.as_key()?).and_then(|g| self.layout.group_index(g))
                    });
                match placed {
                    Some(i) => Route::One(i),
                    None => Route::Refuse(format!(
                        "/*# table=\"{table}\" key=\"{}\" */: not a key of {table}'s type",
                        text(key)
                    )),
                }
            }
            crate::layout::Placement::Single { group }
            | crate::layout::Placement::Default { group } => match self.layout.group_index(group) {
                Some(i) => Route::One(i),
                None => Route::Session,
            },
            _ => Route::Refuse(format!(
                "/*# table=\"{table}\" key=... */: {table} is not a sharded table of the layout"
            )),
        })
    }

    /// A statement parsed as it was written (its values in the tree).
    fn as_written(
        &self,
        db: Option<&str>,
        sql: &[u8],
        mode: LexMode,
        tokens: Tokens,
        may_write: bool,
    ) -> Route {
        let read = as_read(sql, mode);
        let text = String::from_utf8_lossy(parseable(&read));
        match Parser::parse_sql(&MySqlDialect {}, &text) {
            Ok(stmts) => {
                let a = analyze(&self.layout, db, &stmts, tokens);
                let r = self.route_analysis(&a, &[], &[]);
                self.finish(self.other(r, &a, sql, mode, may_write), &a, sql, mode)
            }
            Err(e) => self.unparsed(db, sql, mode, may_write, &e.to_string()),
        }
    }

    /// A merge plan gets the SQL each group runs; an INSERT whose rows
    /// go to several groups, each group's rows.
    fn finish(&self, r: Route, a: &Analysis, sql: &[u8], mode: LexMode) -> Route {
        if let Route::Write(mut w) = r {
            if w.rows.is_empty() {
                return Route::Write(w);
            }
            return match split_rows(sql, mode, &w.rows) {
                Some(split) => {
                    w.split = split;
                    Route::Write(w)
                }
                None => Route::Refuse(format!(
                    "the rows of this INSERT belong to {} groups ({}), and sextant cannot split its VALUES list by row; insert each group's rows in its own statement",
                    w.groups.len(),
                    self.names_of(w.groups)
                )),
            };
        }
        let several = match &r {
            Route::Scatter(set) => Some(*set),
            Route::Merge(m) => Some(m.groups),
            _ => None,
        };
        if let Some(set) = several {
            // Reserved: the word is never a column's name.
            if Lexer::with_mode(sql, mode).any(|t| t.is_word("sql_calc_found_rows")) {
                return Route::Refuse(format!(
                    "SQL_CALC_FOUND_ROWS in a read over {} groups ({}): FOUND_ROWS() would count one group's rows; run COUNT(*) with the same WHERE instead, or restrict the read by the shard key to one group",
                    set.len(),
                    self.names_of(set)
                ));
            }
        }
        let Route::Merge(mut plan) = r else {
            return r;
        };
        let limit = plan.count.map(|c| c.saturating_add(plan.offset));
        let _ = a;
        match merge_sql(sql, mode, &plan.rewrite, limit) {
            Ok(q) => {
                plan.sql = q;
                Route::Merge(plan)
            }
            Err(why) => Route::Refuse(format!(
                "a read over {} groups that needs merging, and {why}",
                plan.groups.len()
            )),
        }
    }

    /// A statement of a kind the analysis does not look into (LOCK
    /// TABLES, CALL, RENAME, ...) that may write: refused if it names a
    /// table the layout lists.
    fn other(&self, r: Route, a: &Analysis, sql: &[u8], mode: LexMode, may_write: bool) -> Route {
        match r {
            Route::Session if a.kind == StmtKind::Other && may_write => self
                .mentions(sql, mode, "a statement sextant does not route by table")
                .unwrap_or(Route::Session),
            r => r,
        }
    }

    /// A statement sextant cannot parse: fine if it names no table the
    /// layout places (and cannot write to a global copy).
    fn unparsed(
        &self,
        db: Option<&str>,
        sql: &[u8],
        mode: LexMode,
        may_write: bool,
        error: &str,
    ) -> Route {
        if let Some(r) = self.mentions(sql, mode, error) {
            return r;
        }
        let globals = self.layout.unlisted == Unlisted::Global
            || db.is_some_and(|d| self.layout.all_groups.contains_key(&d.to_ascii_lowercase()));
        if may_write && globals {
            return Route::Refuse(format!(
                "sextant cannot read this statement ({error}), and it may write to a global table, which has a copy in every group"
            ));
        }
        Route::Session
    }

    /// Refused if the statement names a table the layout lists.
    fn mentions(&self, sql: &[u8], mode: LexMode, error: &str) -> Option<Route> {
        let named = Lexer::with_mode(sql, mode).find(|t| {
            matches!(t.kind, TokenKind::Word | TokenKind::QuotedIdent)
                && self
                    .listed
                    .iter()
                    .any(|n| t.text.eq_ignore_ascii_case(n.as_bytes()))
        });
        named.map(|t| {
            Route::Refuse(format!(
                "sextant cannot read this statement ({error}), and it names {}, which the sharding layout places",
                String::from_utf8_lossy(t.text)
            ))
        })
    }
}
