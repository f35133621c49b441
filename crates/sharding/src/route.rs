//! Where a statement runs on a sharded layout: one group, several (a read
//! whose rows are concatenated, a DDL sent to each), the session's usual
//! place, or nowhere (refused, with the reason). A pure function of the
//! statement's analysis and its values; the analysis of each statement
//! shape is parsed once per thread and cached.

use crate::analyze::{analyze, Analysis, GroupSet, Keys, OrderItem, Place, StmtKind};
use crate::fingerprint::{as_read, fingerprint, Lit, Slot, Tokens, Val};
use crate::grouping::{AggCall, Grouping, Having, HavingCond, Item, Key, OrderRef};
use crate::layout::{KeyType, Layout, Method, Partition, Unlisted, Vdb};
use crate::merge::{AggCols, AggKind, Calc, Cond, GroupPlan, Out, SortKey};
use crate::placement::{group_of, KeyValue};
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
        match self.lookup(db, sql, mode, &mut slots) {
            Lookup::Shape(a) => {
                let r = self.route_analysis(&a, &slots, params);
                self.finish(self.other(r, &a, sql, mode, may_write), &a, sql, mode)
            }
            Lookup::AsWritten(tokens) => self.as_written(db, sql, mode, tokens, may_write),
        }
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

    /// The route of an analysed statement with these values.
    pub fn route_analysis(&self, a: &Analysis, slots: &[Slot<'_>], params: &[Lit<'_>]) -> Route {
        if let Some(why) = &a.refuse {
            return Route::Refuse(why.clone());
        }
        if a.tables.is_empty() {
            return Route::Session;
        }
        let value = |v: &Val, kt: KeyType| key_value(v, slots, params, kt);
        let names = |pred: &dyn Fn(&Place) -> bool| -> String {
            let mut v: Vec<&str> = a
                .tables
                .iter()
                .filter(|t| pred(&t.place))
                .map(|t| t.name.as_str())
                .collect();
            v.dedup();
            v.join(", ")
        };
        let elsewhere = a.tables.iter().any(|t| t.place == Place::Elsewhere);
        if elsewhere {
            if a.tables.iter().all(|t| t.place == Place::Elsewhere) {
                return Route::Session;
            }
            return Route::Refuse(format!(
                "the statement names tables the sharding layout places ({}) together with tables it does not ({})",
                names(&|p| *p != Place::Elsewhere),
                names(&|p| *p == Place::Elsewhere)
            ));
        }
        let all = match self.layout.groups.len() {
            n if n >= 64 => GroupSet(u64::MAX),
            n => GroupSet((1u64 << n) - 1),
        };
        // Keys assigned by UPDATE or ON DUPLICATE KEY UPDATE.
        for (t, v) in &a.sets_key {
            let Place::Sharded { vdb, key } = &a.tables[*t].place else {
                continue;
            };
            let vdb = &self.layout.vdbs[*vdb];
            let stays = match (a.kind, v) {
                (StmtKind::Write, Some(v)) => {
                    let to = self.groups_of_value(vdb, value(v, vdb.key_type));
                    let from = self.keys_groups(vdb, &a.tables[*t].keys, &value);
                    to.len() == 1 && from == to
                }
                _ => false,
            };
            if !stays {
                return Route::Refuse(format!(
                    "the statement changes shard key {key} of {}: the row could have to move to another group",
                    a.tables[*t].name
                ));
            }
        }
        if a.kind == StmtKind::Insert && !a.rows.is_empty() {
            let Some(t) = a.insert_target else {
                return Route::Refuse("an INSERT without a target".into());
            };
            let Place::Sharded { vdb, key } = &a.tables[t].place else {
                return Route::Refuse("an INSERT without a target".into());
            };
            let vdb = &self.layout.vdbs[*vdb];
            let mut set = GroupSet::default();
            let mut row_groups = Vec::with_capacity(a.rows.len());
            for (n, row) in a.rows.iter().enumerate() {
                let g = row
                    .as_ref()
                    .and_then(|v| value(v, vdb.key_type))
                    .and_then(|kv| group_of(vdb, kv.as_key()?))
                    .and_then(|g| self.layout.group_index(g));
                let Some(g) = g else {
                    return Route::Refuse(format!(
                        "row {} of this INSERT into {}: its shard key {key} is not a value sextant can place (give it as a literal or parameter, not NULL or an expression)",
                        n + 1,
                        a.tables[t].name
                    ));
                };
                set = set.union(GroupSet::one(g));
                row_groups.push(g);
            }
            return match set.first() {
                Some(g) if set.len() == 1 => Route::One(g),
                _ => Route::Write(Box::new(WritePlan {
                    groups: set,
                    split: Vec::new(),
                    rows: row_groups,
                    copies: false,
                })),
            };
        }
        let mut required = GroupSet::default();
        let mut copies = all;
        let mut sharded = Vec::new();
        let mut singles = false;
        // Each sharded table's groups by its own keys, then narrowed by the
        // tables whose keys equal its in every row (`c_w_id = w_id AND
        // w_id = 3`: customer is read in warehouse 3's group only).
        let own = |t: &crate::analyze::TableUse| match &t.place {
            Place::Sharded { vdb, .. } => {
                let v = &self.layout.vdbs[*vdb];
                Some(match a.kind {
                    StmtKind::Ddl => self.vdb_groups(v),
                    _ => self.keys_groups(v, &t.keys, &value),
                })
            }
            _ => None,
        };
        // (Only statements with such joins pay for the table of sets.)
        let narrowed = !a.equal_keys.is_empty() && a.kind != StmtKind::Ddl;
        let mut sets: Vec<Option<GroupSet>> = match narrowed {
            true => a.tables.iter().map(own).collect(),
            false => Vec::new(),
        };
        if narrowed {
            let vdb_of = |i: usize| match a.tables.get(i).map(|t| &t.place) {
                Some(Place::Sharded { vdb, .. }) => Some(*vdb),
                _ => None,
            };
            loop {
                let mut changed = false;
                for &(x, y) in &a.equal_keys {
                    if vdb_of(x).is_none() || vdb_of(x) != vdb_of(y) {
                        continue;
                    }
                    if let (Some(Some(sx)), Some(Some(sy))) =
                        (sets.get(x).copied(), sets.get(y).copied())
                    {
                        let both = sx.intersect(sy);
                        if both != sx || both != sy {
                            sets[x] = Some(both);
                            sets[y] = Some(both);
                            changed = true;
                        }
                    }
                }
                if !changed {
                    break;
                }
            }
        }
        for (i, t) in a.tables.iter().enumerate() {
            match &t.place {
                Place::Sharded { vdb, .. } => {
                    let v = &self.layout.vdbs[*vdb];
                    let mut set = match narrowed {
                        true => sets[i],
                        false => own(t),
                    }
                    .unwrap_or_default();
                    if set.is_empty() {
                        // No row can match: any one of its groups answers.
                        set = self
                            .vdb_groups(v)
                            .first()
                            .map(GroupSet::one)
                            .unwrap_or_default();
                    }
                    required = required.union(set);
                    sharded.push((i, *vdb));
                }
                Place::Group(g) => {
                    required = required.union(GroupSet::one(*g));
                    singles = true;
                }
                Place::Global(set) => copies = copies.intersect(*set),
                Place::Elsewhere => {}
            }
        }
        let globals = a.tables.iter().any(|t| matches!(t.place, Place::Global(_)));
        if a.kind == StmtKind::Ddl {
            let set = match globals {
                true => required.union(copies),
                false => required,
            };
            return match set.first() {
                Some(g) if set.len() == 1 => Route::One(g),
                _ => Route::Broadcast(set),
            };
        }
        let writes = a.kind != StmtKind::Read;
        if required.is_empty() {
            // Only global tables.
            if writes {
                return match copies.first() {
                    Some(g) if copies.len() == 1 => Route::One(g),
                    None => Route::Refuse(format!(
                        "no group holds a copy of every global table named ({})",
                        names(&|p| matches!(p, Place::Global(_)))
                    )),
                    // Every copy, atomically.
                    _ => Route::Write(Box::new(WritePlan {
                        groups: copies,
                        split: Vec::new(),
                        rows: Vec::new(),
                        copies: true,
                    })),
                };
            }
            return match copies.len() {
                1.. => Route::AnyOf(copies),
                0 => Route::Refuse(format!(
                    "no group holds a copy of every global table named ({})",
                    names(&|p| matches!(p, Place::Global(_)))
                )),
            };
        }
        if globals && writes {
            return Route::Refuse(format!(
                "the statement writes while reading global table {}: sextant does not yet run such writes on a sharded layout",
                names(&|p| matches!(p, Place::Global(_)))
            ));
        }
        if required.intersect(copies) != required {
            return Route::Refuse(format!(
                "global table {} has no copy in group {}",
                names(&|p| matches!(p, Place::Global(_))),
                self.names_of(GroupSet(required.0 & !copies.0))
            ));
        }
        if let Some(g) = required.first().filter(|_| required.len() == 1) {
            return Route::One(g);
        }
        // Several groups.
        if writes && !singles && self.colocated(&sharded, &a.key_joins) {
            if a.limit.is_some() || a.write_limit {
                return Route::Refuse(format!(
                    "the statement writes to {} in {} groups ({}) with a LIMIT: each group would apply the LIMIT to its own rows; restrict it by the shard key to one group",
                    names(&|p| !matches!(p, Place::Global(_))),
                    required.len(),
                    self.names_of(required)
                ));
            }
            // Each group's rows, in one distributed transaction.
            return Route::Write(Box::new(WritePlan {
                groups: required,
                split: Vec::new(),
                rows: Vec::new(),
                copies: false,
            }));
        }
        if singles {
            return Route::Refuse(format!(
                "the statement joins tables in different groups ({}); only tables of one vdb joined on their shard keys, and global tables, can be joined across groups",
                names(&|p| !matches!(p, Place::Global(_)))
            ));
        }
        if !self.colocated(&sharded, &a.key_joins) {
            return Route::Refuse(format!(
                "the statement joins sharded tables ({}) other than on equal shard keys of one vdb: their rows may be in different groups",
                names(&|p| matches!(p, Place::Sharded { .. }))
            ));
        }
        if let Some(why) = a.merge {
            return Route::Refuse(format!(
                "a read over {} groups with {why} needs its results merged, which this version does not do yet; restrict it by the shard key to one group",
                required.len()
            ));
        }
        let is_null = |v: &Val| {
            matches!(
                key_value(v, slots, params, KeyType::Int),
                Some(OwnedKey::Null)
            )
        };
        let number = |v: &Val| match key_value(v, slots, params, KeyType::Int) {
            Some(OwnedKey::Int(i)) if i >= 0 => Some(i as u64),
            _ => None,
        };
        let limit = match &a.limit {
            None => (0, None),
            Some((count, offset)) => {
                let offset = match offset {
                    Some(o) => number(o),
                    None => Some(0),
                };
                match (number(count), offset) {
                    (Some(c), Some(o)) => (o, Some(c)),
                    _ => return Route::Refuse("a LIMIT that is not a number".into()),
                }
            }
        };
        if let Some(g) = &a.grouping {
            let plan = g.as_ref().map_err(Clone::clone).and_then(|g| {
                grouped_plan(
                    g,
                    required,
                    limit,
                    &number,
                    &|v| literal_number(v, slots, params),
                    &is_null,
                )
            });
            return match plan {
                Ok(p) => Route::Merge(Box::new(p)),
                Err(why) => Route::Refuse(format!(
                    "a read over {} groups with {why}; restrict it by the shard key to one group",
                    required.len()
                )),
            };
        }
        let order: Vec<&(OrderItem, bool)> = match &a.order {
            // ORDER BY NULL asks for no order (MySQL's way to skip a sort).
            Ok(o) => o
                .iter()
                .filter(|(item, _)| !matches!(item, OrderItem::Position(v) if is_null(v)))
                .collect(),
            Err(why) => {
                return Route::Refuse(format!(
                    "a read over {} groups with {why}: sextant cannot merge the groups' rows by it; restrict it by the shard key to one group",
                    required.len()
                ))
            }
        };
        if order.is_empty() && a.limit.is_none() {
            return Route::Scatter(required);
        }
        let mut exprs = Vec::with_capacity(order.len());
        for (item, _) in &order {
            let e = match item {
                OrderItem::Expr(e) => Some(e.clone()),
                OrderItem::Position(v) => number(v)
                    .and_then(|i| (i as usize).checked_sub(1))
                    .and_then(|i| a.projection.get(i).cloned().flatten()),
            };
            match e {
                Some(e) => exprs.push(e),
                None => {
                    return Route::Refuse(format!(
                        "a read over {} groups ordered by a position that is not a plain item of the select list (a wildcard, or an item with values)",
                        required.len()
                    ))
                }
            }
        }
        let (offset, count) = limit;
        let mut hidden = Vec::with_capacity(3 * exprs.len());
        for e in &exprs {
            hidden.extend(key_columns(e));
        }
        Route::Merge(Box::new(MergePlan {
            groups: required,
            sql: Vec::new(),
            order: order.iter().map(|(_, desc)| *desc).collect(),
            exprs,
            offset,
            count,
            grouped: None,
            rewrite: Rewrite {
                hidden,
                drop_distinct: false,
                clauses: None,
            },
        }))
    }

    /// Every sharded table is joined, directly or through others, to the
    /// first on equal shard keys, and all follow one vdb.
    fn colocated(&self, sharded: &[(usize, usize)], joins: &[(usize, usize)]) -> bool {
        let Some(&(first, vdb)) = sharded.first() else {
            return true;
        };
        if sharded.iter().any(|(_, v)| *v != vdb) {
            return false;
        }
        let mut reached = vec![first];
        loop {
            let before = reached.len();
            for &(a, b) in joins {
                if reached.contains(&a) && !reached.contains(&b) {
                    reached.push(b);
                } else if reached.contains(&b) && !reached.contains(&a) {
                    reached.push(a);
                }
            }
            if reached.len() == before {
                break;
            }
        }
        sharded.iter().all(|(t, _)| reached.contains(t))
    }

    /// One of `set`, taking turns (spreads reads of global tables).
    pub fn pick(&self, set: GroupSet) -> Option<usize> {
        let n = set.len() as u64;
        if n == 0 {
            return None;
        }
        let k = self.turn.fetch_add(1, Ordering::Relaxed) % n;
        set.iter().nth(k as usize)
    }

    fn names_of(&self, set: GroupSet) -> String {
        set.iter()
            .map(|i| self.group_name(i))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn vdb_groups(&self, vdb: &Vdb) -> GroupSet {
        let mut set = GroupSet::default();
        for p in &vdb.partitions {
            if let Some(i) = self.layout.group_index(p.group()) {
                set = set.union(GroupSet::one(i));
            }
        }
        set
    }

    fn groups_of_value(&self, vdb: &Vdb, v: Option<OwnedKey>) -> GroupSet {
        let Some(v) = v else {
            return self.vdb_groups(vdb);
        };
        let Some(kv) = v.as_key() else {
            return GroupSet::default();
        };
        match group_of(vdb, kv).and_then(|g| self.layout.group_index(g)) {
            Some(i) => GroupSet::one(i),
            None => self.vdb_groups(vdb),
        }
    }

    fn keys_groups(
        &self,
        vdb: &Vdb,
        keys: &Keys,
        value: &dyn Fn(&Val, KeyType) -> Option<OwnedKey>,
    ) -> GroupSet {
        match keys {
            Keys::Any => self.vdb_groups(vdb),
            Keys::In(vals) => vals.iter().fold(GroupSet::default(), |s, v| {
                s.union(self.groups_of_value(vdb, value(v, vdb.key_type)))
            }),
            Keys::And(ks) => ks.iter().fold(self.vdb_groups(vdb), |s, k| {
                s.intersect(self.keys_groups(vdb, k, value))
            }),
            Keys::Or(ks) => ks.iter().fold(GroupSet::default(), |s, k| {
                s.union(self.keys_groups(vdb, k, value))
            }),
            Keys::Range { lo, hi } => {
                // An integer bound that excludes itself is the next one in.
                let bound = |b: &Option<(Val, bool)>, step: i64| match b {
                    Some((v, incl)) => match value(v, vdb.key_type) {
                        Some(OwnedKey::Int(i)) if !incl => {
                            i.checked_add(step).map(OwnedKey::Int).map(Some).ok_or(())
                        }
                        Some(k) => Ok(Some(k)),
                        None => Err(()),
                    },
                    None => Ok(None),
                };
                let (Ok(lo), Ok(hi)) = (bound(lo, 1), bound(hi, -1)) else {
                    return self.vdb_groups(vdb);
                };
                if matches!(lo, Some(OwnedKey::Null)) || matches!(hi, Some(OwnedKey::Null)) {
                    return GroupSet::default();
                }
                match (vdb.method, &lo, &hi) {
                    (Method::Range, _, _) => self.range_groups(vdb, lo, hi),
                    // A short run of integers: each one's group.
                    (Method::Hash, Some(OwnedKey::Int(l)), Some(OwnedKey::Int(h)))
                        if h.checked_sub(*l).is_some_and(|n| n < vdb.num as i64) =>
                    {
                        (*l..=*h).fold(GroupSet::default(), |s, i| {
                            s.union(self.groups_of_value(vdb, Some(OwnedKey::Int(i))))
                        })
                    }
                    (Method::Hash, _, _) => self.vdb_groups(vdb),
                }
            }
        }
    }

    /// The groups of a range vdb holding values in [lo, hi] (bounds
    /// taken inclusive: a group too many is visited, never one too few).
    fn range_groups(&self, vdb: &Vdb, lo: Option<OwnedKey>, hi: Option<OwnedKey>) -> GroupSet {
        let mut set = GroupSet::default();
        let mut add = |g: &str| {
            if let Some(i) = self.layout.group_index(g) {
                set = set.union(GroupSet::one(i));
            }
        };
        let mut prev_int: Option<i64> = None;
        let mut prev_str: Option<&str> = None;
        for p in &vdb.partitions {
            match p {
                Partition::RangeInt { group, upper } => {
                    let (lo, hi) = match (&lo, &hi) {
                        (Some(OwnedKey::Str(_)), _) | (_, Some(OwnedKey::Str(_))) => {
                            return self.vdb_groups(vdb)
                        }
                        (l, h) => (
                            l.as_ref().and_then(|k| match k {
                                OwnedKey::Int(i) => Some(*i),
                                _ => None,
                            }),
                            h.as_ref().and_then(|k| match k {
                                OwnedKey::Int(i) => Some(*i),
                                _ => None,
                            }),
                        ),
                    };
                    // (prev, upper] meets [lo, hi]
                    let above_prev = hi.is_none_or(|h| prev_int.is_none_or(|p| h > p));
                    let below_upper = lo.is_none_or(|l| upper.is_none_or(|u| l <= u));
                    if above_prev && below_upper {
                        add(group);
                    }
                    prev_int = *upper;
                }
                Partition::RangeStr { group, upper } => {
                    let (lo, hi) = match (&lo, &hi) {
                        (Some(OwnedKey::Int(_)), _) | (_, Some(OwnedKey::Int(_))) => {
                            return self.vdb_groups(vdb)
                        }
                        (l, h) => (
                            l.as_ref().and_then(|k| match k {
                                OwnedKey::Str(s) => Some(s.as_slice()),
                                _ => None,
                            }),
                            h.as_ref().and_then(|k| match k {
                                OwnedKey::Str(s) => Some(s.as_slice()),
                                _ => None,
                            }),
                        ),
                    };
                    let above_prev = hi.is_none_or(|h| prev_str.is_none_or(|p| h > p.as_bytes()));
                    let below_upper =
                        lo.is_none_or(|l| upper.as_deref().is_none_or(|u| l <= u.as_bytes()));
                    if above_prev && below_upper {
                        add(group);
                    }
                    prev_str = upper.as_deref();
                }
                Partition::Hash { .. } => return self.vdb_groups(vdb),
            }
        }
        set
    }
}

/// The three columns a merge compares a value by: the value, its
/// `WEIGHT_STRING` and that of it with a space appended (bytes that sort as
/// the server's collation sorts strings, and the weight of a space).
fn key_columns(e: &str) -> [String; 3] {
    [
        e.to_string(),
        format!("WEIGHT_STRING({e})"),
        format!("WEIGHT_STRING(CONCAT({e}, ' '))"),
    ]
}

/// A HAVING value as a number written out (an integer; sextant reads no
/// other literal there).
fn literal_number(v: &Val, slots: &[Slot<'_>], params: &[Lit<'_>]) -> Option<Vec<u8>> {
    match key_value(v, slots, params, KeyType::Int)? {
        OwnedKey::Int(i) => Some(i.to_string().into_bytes()),
        _ => None,
    }
}

/// The merge of a grouped read: the columns each group adds (its keys
/// with their weights, the parts of AVG, the weights of MIN and MAX, the
/// aggregates HAVING and ORDER BY need), the clauses it runs with (GROUP BY
/// the keys, sorted by them, ORDER BY's keys first), and how sextant
/// combines, filters, sorts and cuts the groups' rows.
fn grouped_plan(
    g: &Grouping,
    groups: GroupSet,
    (offset, count): (u64, Option<u64>),
    number: &dyn Fn(&Val) -> Option<u64>,
    literal: &dyn Fn(&Val) -> Option<Vec<u8>>,
    is_null: &dyn Fn(&Val) -> bool,
) -> Result<MergePlan, String> {
    let visible = g.items.len();
    let item_at = |v: &Val| -> Result<usize, String> {
        number(v)
            .and_then(|i| (i as usize).checked_sub(1))
            .filter(|i| *i < visible)
            .ok_or_else(|| "a position that is not in the select list".to_string())
    };
    let item_text = |i: usize| match &g.items[i] {
        Item::Any(Some(t)) => Ok(t.clone()),
        _ => Err("GROUP BY a position of an aggregate or of an item with values".to_string()),
    };
    // Group keys as SQL text.
    let mut keys: Vec<String> = Vec::with_capacity(g.keys.len() + 1);
    for k in &g.keys {
        keys.push(match k {
            Key::Expr(t) => t.clone(),
            Key::Position(v) => item_text(item_at(v)?)?,
        });
    }
    let key_of = |t: &str| keys.iter().position(|k| k.eq_ignore_ascii_case(t));
    // Aggregates: the items', then those HAVING and ORDER BY add.
    let mut calls: Vec<AggCall> = Vec::new();
    let mut outs = Vec::with_capacity(visible);
    for (i, it) in g.items.iter().enumerate() {
        outs.push(match it {
            Item::Any(_) => Out::Any(i),
            Item::Agg(c) => {
                calls.push(c.clone());
                Out::Agg(calls.len() - 1)
            }
            // Filled in below, once the items' own aggregates are listed.
            Item::Calc(_) => Out::Calc(0),
        });
    }
    let item_aggs = calls.len();
    let mut call_index = |c: &AggCall, calls: &mut Vec<AggCall>| -> usize {
        match calls.iter().position(|x| x == c) {
            Some(i) => i,
            None => {
                calls.push(c.clone());
                calls.len() - 1
            }
        }
    };
    let mut calcs = Vec::new();
    for (i, it) in g.items.iter().enumerate() {
        if let Item::Calc(c) = it {
            calcs.push((calc_plan(c, &mut calls, &mut call_index, literal)?, i));
            outs[i] = Out::Calc(calcs.len() - 1);
        }
    }
    let having = match &g.having {
        Having::Eval(h) => Some(having_plan(h, &mut calls, &mut call_index, literal)?),
        _ => None,
    };
    let mut order = Vec::with_capacity(g.order.len());
    for (r, desc) in &g.order {
        if matches!(r, OrderRef::Position(v) if is_null(v)) {
            // ORDER BY NULL: no order.
            continue;
        }
        let by_item = |i: usize, calls: &[AggCall]| -> Result<SortKey, String> {
            match &g.items[i] {
                Item::Agg(c) => Ok(SortKey::Agg(
                    calls.iter().position(|x| x == c).unwrap_or_default(),
                )),
                Item::Any(Some(t)) => key_of(t)
                    .map(SortKey::Key)
                    .ok_or_else(|| format!("ORDER BY {t}, which is not grouped by")),
                Item::Any(None) => Err("ORDER BY an item with values".into()),
                Item::Calc(_) => match outs[i] {
                    Out::Calc(c) => Ok(SortKey::Calc(c)),
                    _ => Err("ORDER BY an expression over aggregates".into()),
                },
            }
        };
        let key = match r {
            OrderRef::Item(i) => by_item(*i, &calls)?,
            OrderRef::Position(v) => by_item(item_at(v)?, &calls)?,
            OrderRef::Expr(t) => key_of(t)
                .map(SortKey::Key)
                .ok_or_else(|| format!("ORDER BY {t}, which is not grouped by"))?,
            OrderRef::Agg(c) => SortKey::Agg(call_index(c, &mut calls)),
        };
        order.push((key, *desc));
    }
    // DISTINCT aggregates: their argument is the last key.
    let mut distinct: Option<String> = None;
    for c in &calls {
        if matches!(c.kind, AggKind::CountDistinct | AggKind::SumDistinct) {
            let Some(arg) = &c.arg else {
                return Err(format!("{} of an expression with values", c.kind.name()));
            };
            match &distinct {
                Some(d) if !d.eq_ignore_ascii_case(arg) => {
                    return Err("DISTINCT aggregates of different arguments".into())
                }
                _ => distinct = Some(arg.clone()),
            }
        }
    }
    // The order the groups' rows come in: ORDER BY's keys first (then
    // merged groups come out in the client's order), the other keys after.
    let streamed = order.iter().all(|(k, _)| matches!(k, SortKey::Key(_)));
    let mut sorted: Vec<(usize, bool)> = Vec::with_capacity(keys.len());
    if streamed {
        for (k, desc) in &order {
            if let SortKey::Key(k) = k {
                if !sorted.iter().any(|(x, _)| x == k) {
                    sorted.push((*k, *desc));
                }
            }
        }
    }
    for k in 0..keys.len() {
        if !sorted.iter().any(|(x, _)| *x == k) {
            sorted.push((k, false));
        }
    }
    // The groups' columns: the select list, then hidden ones.
    let mut hidden: Vec<String> = Vec::new();
    let mut plan_keys = Vec::with_capacity(sorted.len() + 1);
    let mut key_col = vec![0; keys.len()];
    for (k, desc) in &sorted {
        key_col[*k] = visible + hidden.len();
        plan_keys.push((visible + hidden.len(), *desc));
        hidden.extend(key_columns(&keys[*k]));
    }
    let mut order_sql: Vec<(String, bool)> =
        sorted.iter().map(|(k, d)| (keys[*k].clone(), *d)).collect();
    if let Some(d) = &distinct {
        plan_keys.push((visible + hidden.len(), false));
        hidden.extend(key_columns(d));
        order_sql.push((d.clone(), false));
    }
    let mut aggs = Vec::with_capacity(calls.len());
    for (i, c) in calls.iter().enumerate() {
        let needs_text = || {
            c.sql()
                .ok_or_else(|| format!("{} of an expression with values", c.kind.name()))
        };
        // The column whose value (and definition) is the aggregate's.
        let def = match i < item_aggs {
            true => g
                .items
                .iter()
                .enumerate()
                .filter(|(_, it)| matches!(it, Item::Agg(_)))
                .nth(i)
                .map_or(0, |(at, _)| at),
            false => {
                hidden.push(needs_text()?);
                visible + hidden.len() - 1
            }
        };
        let mut cols = AggCols {
            kind: c.kind,
            def,
            value: def,
            count: def,
            weights: None,
        };
        match c.kind {
            AggKind::Avg => {
                let arg = c
                    .arg
                    .as_ref()
                    .ok_or_else(|| "AVG of an expression with values".to_string())?;
                cols.value = visible + hidden.len();
                cols.count = cols.value + 1;
                hidden.push(format!("SUM({arg})"));
                hidden.push(format!("COUNT({arg})"));
            }
            AggKind::Min | AggKind::Max => {
                if let Some(text) = c.sql() {
                    cols.weights = Some(visible + hidden.len());
                    hidden.extend(key_columns(&text).into_iter().skip(1));
                }
            }
            _ => {}
        }
        aggs.push(cols);
    }
    let order = order
        .into_iter()
        .map(|(k, d)| match k {
            // Keys by their place in the plan's key list.
            SortKey::Key(k) => (
                SortKey::Key(
                    plan_keys
                        .iter()
                        .position(|(c, _)| *c == key_col[k])
                        .unwrap_or(0),
                ),
                d,
            ),
            a => (a, d),
        })
        .collect::<Vec<_>>();
    let mut clauses = String::new();
    if !order_sql.is_empty() {
        let list = |with_dir: bool| {
            order_sql
                .iter()
                .map(|(e, d)| match (with_dir, d) {
                    (true, true) => format!("{e} DESC"),
                    _ => e.clone(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        clauses = format!("GROUP BY {} ", list(false));
        if g.having == Having::Pushed {
            clauses.push_str("\u{1}HAVING ");
        }
        clauses.push_str(&format!("ORDER BY {} ", list(true)));
    } else if g.having == Having::Pushed {
        clauses.push_str("\u{1}HAVING ");
    }
    // Each group's first offset+count groups by the keys hold every row
    // of the result's groups, when nothing drops groups after the merge
    // and each row is one group.
    if streamed && having.is_none() && distinct.is_none() && !g.implicit {
        if let Some(c) = count {
            clauses.push_str(&format!("LIMIT {}", c.saturating_add(offset)));
        }
    }
    let columns = visible + hidden.len();
    Ok(MergePlan {
        groups,
        sql: Vec::new(),
        order: Vec::new(),
        exprs: Vec::new(),
        offset,
        count,
        grouped: Some(GroupPlan {
            visible,
            columns,
            keys: plan_keys,
            distinct: distinct.is_some(),
            implicit: g.implicit,
            outs,
            aggs,
            calcs,
            having,
            order: (!streamed).then_some(order),
            offset,
            count,
        }),
        rewrite: Rewrite {
            hidden,
            drop_distinct: true,
            clauses: Some(clauses),
        },
    })
}

fn calc_plan(
    c: &crate::grouping::Calc,
    calls: &mut Vec<AggCall>,
    index: &mut dyn FnMut(&AggCall, &mut Vec<AggCall>) -> usize,
    literal: &dyn Fn(&Val) -> Option<Vec<u8>>,
) -> Result<Calc, String> {
    use crate::grouping::Calc as C;
    Ok(match c {
        C::Agg(a) => Calc::Agg(index(a, calls)),
        C::Num(v) => Calc::Num(literal(v).ok_or_else(|| {
            "an expression over aggregates with a value that is not an integer".to_string()
        })?),
        C::Neg(x) => Calc::Neg(Box::new(calc_plan(x, calls, index, literal)?)),
        C::Bin(op, x, y) => Calc::Bin(
            *op,
            Box::new(calc_plan(x, calls, index, literal)?),
            Box::new(calc_plan(y, calls, index, literal)?),
        ),
    })
}

fn having_plan(
    h: &HavingCond,
    calls: &mut Vec<AggCall>,
    index: &mut dyn FnMut(&AggCall, &mut Vec<AggCall>) -> usize,
    literal: &dyn Fn(&Val) -> Option<Vec<u8>>,
) -> Result<Cond, String> {
    Ok(match h {
        HavingCond::Cmp(c, op, v) => {
            let lit = literal(v).ok_or_else(|| {
                "a HAVING comparison with a value that is not an integer".to_string()
            })?;
            Cond::Cmp(index(c, calls), *op, lit)
        }
        HavingCond::IsNull(c, yes) => Cond::IsNull(index(c, calls), *yes),
        HavingCond::And(x, y) => Cond::And(
            Box::new(having_plan(x, calls, index, literal)?),
            Box::new(having_plan(y, calls, index, literal)?),
        ),
        HavingCond::Or(x, y) => Cond::Or(
            Box::new(having_plan(x, calls, index, literal)?),
            Box::new(having_plan(y, calls, index, literal)?),
        ),
        HavingCond::Not(x) => Cond::Not(Box::new(having_plan(x, calls, index, literal)?)),
    })
}

/// Where the clauses of a statement's top-level SELECT start in its text.
#[derive(Debug, Default)]
struct Clauses {
    /// The DISTINCT (or DISTINCTROW) keyword.
    distinct: Option<(usize, usize)>,
    from: Option<usize>,
    group: Option<usize>,
    having: Option<usize>,
    order: Option<usize>,
    limit: Option<(usize, usize)>,
    /// FOR UPDATE, LOCK IN SHARE MODE, INTO, `;`: what follows LIMIT.
    tail: Option<usize>,
}

fn clauses(sql: &[u8], mode: LexMode) -> Result<Clauses, &'static str> {
    let base = sql.as_ptr() as usize;
    let mut c = Clauses::default();
    let mut depth = 0i32;
    let mut select_seen = false;
    let mut first_after_select = false;
    let mut in_limit = false;
    for t in Lexer::with_mode(sql, mode) {
        let start = t.text.as_ptr() as usize - base;
        let end = start + t.text.len();
        if t.is_punct(b'(') {
            depth += 1;
        } else if t.is_punct(b')') {
            depth -= 1;
        }
        if depth != 0 {
            if in_limit {
                return Err("its LIMIT is not plain numbers");
            }
            continue;
        }
        let after_select = std::mem::take(&mut first_after_select);
        if t.is_word("select") && !select_seen {
            select_seen = true;
            first_after_select = true;
        } else if after_select && (t.is_word("distinct") || t.is_word("distinctrow")) {
            c.distinct = Some((start, end));
        } else if !select_seen || c.tail.is_some() {
        } else if t.is_word("from") && c.from.is_none() {
            c.from = Some(start);
        } else if c.from.is_none() {
        } else if t.is_word("group") && c.group.is_none() {
            c.group = Some(start);
        } else if t.is_word("having") && c.having.is_none() {
            c.having = Some(start);
        } else if t.is_word("order") && c.order.is_none() {
            c.order = Some(start);
        } else if t.is_word("limit") {
            in_limit = true;
            c.limit = Some((start, end));
        } else if t.is_punct(b';')
            || ["for", "lock", "procedure", "into"]
                .iter()
                .any(|w| t.is_word(w))
        {
            in_limit = false;
            c.tail = Some(start);
        } else if in_limit {
            if let Some(span) = c.limit.as_mut() {
                span.1 = end;
            }
        }
    }
    Ok(c)
}

/// The statement a group runs for a merge: the client's, with the plan's
/// hidden columns at the end of the top-level select list, and either the
/// top-level LIMIT replaced by `LIMIT n` (`limit`: offset + count, every
/// row the merge may need from each group) or, for a grouped read, its
/// clauses from GROUP BY to LIMIT replaced by the plan's (a HAVING without
/// aggregates kept as written).
pub fn merge_sql(
    sql: &[u8],
    mode: LexMode,
    rewrite: &Rewrite,
    limit: Option<u64>,
) -> Result<Vec<u8>, &'static str> {
    let c = clauses(sql, mode)?;
    let from = c.from.ok_or("no FROM at its top level")?;
    let mut out = Vec::with_capacity(sql.len() + 64);
    match (c.distinct, rewrite.drop_distinct) {
        (Some((s, e)), true) => {
            out.extend_from_slice(&sql[..s]);
            out.extend_from_slice(sql[e..from].trim_ascii_start());
        }
        _ => out.extend_from_slice(&sql[..from]),
    }
    if !rewrite.hidden.is_empty() {
        let kept = out.trim_ascii_end().len();
        out.truncate(kept);
        for e in &rewrite.hidden {
            out.extend_from_slice(b", ");
            out.extend_from_slice(e.as_bytes());
        }
        out.push(b' ');
    }
    let tail = c.tail.unwrap_or(sql.len());
    let clauses_at = [c.group, c.having, c.order, c.limit.map(|l| l.0)]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(tail);
    match &rewrite.clauses {
        Some(new) => {
            out.extend_from_slice(sql[from..clauses_at].trim_ascii_end());
            // The HAVING the client wrote, kept where the plan marks it.
            let having = c.having.map(|h| {
                let end = [c.order, c.limit.map(|l| l.0), Some(tail)]
                    .into_iter()
                    .flatten()
                    .filter(|x| *x > h)
                    .min()
                    .unwrap_or(tail);
                sql[h..end].trim_ascii_end()
            });
            let new = match new.split_once("\u{1}HAVING ") {
                Some((before, after)) => {
                    let having = having.ok_or("its HAVING could not be found in the text")?;
                    format!("{before}{} {after}", String::from_utf8_lossy(having))
                }
                None => new.clone(),
            };
            let new = new.trim();
            if !new.is_empty() {
                out.push(b' ');
                out.extend_from_slice(new.as_bytes());
            }
            if tail < sql.len() {
                out.push(b' ');
                out.extend_from_slice(&sql[tail..]);
            }
        }
        None => match (c.limit, limit) {
            (Some((s, e)), Some(n)) => {
                out.extend_from_slice(&sql[from..s]);
                out.extend_from_slice(format!("LIMIT {n}").as_bytes());
                out.extend_from_slice(&sql[e..]);
            }
            // A LIMIT the parser saw must be in the text.
            (None, Some(_)) => return Err("its LIMIT could not be found in the text"),
            (_, None) => out.extend_from_slice(&sql[from..]),
        },
    }
    Ok(out)
}

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

/// A prepared statement's text with each `?` placeholder replaced by its
/// value written as a literal (None: a count that does not match).
pub fn with_values(sql: &[u8], mode: LexMode, literals: &[Vec<u8>]) -> Option<Vec<u8>> {
    let base = sql.as_ptr() as usize;
    let mut out = Vec::with_capacity(sql.len() + literals.iter().map(Vec::len).sum::<usize>());
    let mut at = 0;
    let mut next = literals.iter();
    for t in Lexer::with_mode(sql, mode) {
        if t.kind == TokenKind::Punct && t.text == b"?" {
            let start = t.text.as_ptr() as usize - base;
            out.extend_from_slice(&sql[at..start]);
            out.extend_from_slice(next.next()?);
            at = start + 1;
        }
    }
    if next.next().is_some() {
        return None;
    }
    out.extend_from_slice(&sql[at..]);
    Some(out)
}

/// The part of a statement the parser reads: MySQL's older `LOCK IN
/// SHARE MODE` (the parser knows only `FOR SHARE`) changes nothing of
/// where a statement goes, and is left off.
/// An INSERT's statement for each group: its text up to VALUES, the rows
/// of that group (`groups`: each row's group, in order), and the rest
/// (ON DUPLICATE KEY UPDATE ...). None when the VALUES list does not read
/// as exactly that many rows.
pub fn split_rows(sql: &[u8], mode: LexMode, groups: &[usize]) -> Option<Vec<(usize, Vec<u8>)>> {
    let at = |t: &[u8]| t.as_ptr() as usize - sql.as_ptr() as usize;
    let mut tokens = Lexer::with_mode(sql, mode).peekable();
    let mut depth = 0i32;
    let mut values_end = None;
    for t in tokens.by_ref() {
        match (t.kind, t.text) {
            (TokenKind::Punct, b"(") => depth += 1,
            (TokenKind::Punct, b")") => depth -= 1,
            (TokenKind::Word, w)
                if depth == 0
                    && (w.eq_ignore_ascii_case(b"VALUES") || w.eq_ignore_ascii_case(b"VALUE")) =>
            {
                values_end = Some(at(w) + w.len());
                break;
            }
            _ => {}
        }
    }
    let values_end = values_end?;
    // Each row's bytes: from its '(' to its ')'.
    let mut rows: Vec<(usize, usize)> = Vec::with_capacity(groups.len());
    let mut rest = sql.len();
    loop {
        let open = tokens.next()?;
        if open.kind != TokenKind::Punct || open.text != b"(" {
            return None;
        }
        let start = at(open.text);
        let mut depth = 1;
        let mut end = None;
        for t in tokens.by_ref() {
            match (t.kind, t.text) {
                (TokenKind::Punct, b"(") => depth += 1,
                (TokenKind::Punct, b")") => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(at(t.text) + 1);
                        break;
                    }
                }
                _ => {}
            }
        }
        rows.push((start, end?));
        match tokens.peek() {
            Some(t) if t.kind == TokenKind::Punct && t.text == b"," => {
                tokens.next();
            }
            Some(t) => {
                rest = at(t.text);
                break;
            }
            None => break,
        }
    }
    if rows.len() != groups.len() {
        return None;
    }
    let mut order: Vec<usize> = groups.to_vec();
    order.sort_unstable();
    order.dedup();
    let out = order
        .into_iter()
        .map(|g| {
            let mut q = Vec::with_capacity(sql.len());
            q.extend_from_slice(&sql[..values_end]);
            q.push(b' ');
            let mut first = true;
            for (&(s, e), _) in rows.iter().zip(groups).filter(|(_, rg)| **rg == g) {
                if !first {
                    q.push(b',');
                }
                first = false;
                q.extend_from_slice(&sql[s..e]);
            }
            if rest < sql.len() {
                q.push(b' ');
                q.extend_from_slice(&sql[rest..]);
            }
            (g, q)
        })
        .collect();
    Some(out)
}

fn parseable(sql: &[u8]) -> &[u8] {
    const TAIL: &[u8] = b"lock in share mode";
    let t = sql.trim_ascii_end();
    let t = t.strip_suffix(b";").unwrap_or(t).trim_ascii_end();
    match t.len().checked_sub(TAIL.len()) {
        Some(at) if t[at..].eq_ignore_ascii_case(TAIL) => &t[..at],
        _ => sql,
    }
}

/// A key value owned (a string's bytes may come from an unescaped
/// literal or a parameter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnedKey {
    Int(i64),
    Str(Vec<u8>),
    /// NULL: equal to nothing, in no group.
    Null,
}

impl OwnedKey {
    fn as_key(&self) -> Option<KeyValue<'_>> {
        match self {
            OwnedKey::Int(i) => Some(KeyValue::Int(*i)),
            OwnedKey::Str(s) => Some(KeyValue::Str(s)),
            OwnedKey::Null => None,
        }
    }
}

/// A statement value read as a key of type `kt`, as the server would
/// compare it with the column: None when sextant cannot tell.
fn key_value(v: &Val, slots: &[Slot<'_>], params: &[Lit<'_>], kt: KeyType) -> Option<OwnedKey> {
    let (lit, neg) = match v {
        Val::Slot(i) | Val::Neg(i) => {
            let lit = match slots.get(*i as usize)? {
                Slot::Lit(l) => l,
                Slot::Param(n) => params.get(*n as usize)?,
            };
            (lit, matches!(v, Val::Neg(_)))
        }
        Val::Lit(l) => (l, false),
    };
    match (kt, lit) {
        (_, Lit::Null) => Some(OwnedKey::Null),
        (KeyType::Int, Lit::Int(i)) => Some(OwnedKey::Int(if neg { i.checked_neg()? } else { *i })),
        (KeyType::Int, Lit::Str(s)) if !neg => {
            // '42' compares with an integer column as 42.
            let s = std::str::from_utf8(s).ok()?.trim();
            s.parse::<i64>().ok().map(OwnedKey::Int)
        }
        (KeyType::Str, Lit::Str(s)) if !neg => Some(OwnedKey::Str(s.to_vec())),
        (KeyType::Str, Lit::Int(i)) => {
            let i = if neg { i.checked_neg()? } else { *i };
            Some(OwnedKey::Str(i.to_string().into_bytes()))
        }
        (KeyType::Date | KeyType::DateTime, Lit::Str(s)) if !neg => {
            crate::dates::epoch(std::str::from_utf8(s).ok()?).map(OwnedKey::Int)
        }
        _ => None,
    }
}
