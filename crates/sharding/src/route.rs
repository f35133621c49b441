//! Where a statement runs on a sharded layout: one group, several (a read
//! whose rows are concatenated, a DDL sent to each), the session's usual
//! place, or nowhere (refused, with the reason). A pure function of the
//! statement's analysis and its values; the analysis of each statement
//! shape is parsed once per thread and cached.

use crate::analyze::{analyze, Analysis, GroupSet, Keys, OrderItem, Place, StmtKind, Val};
use crate::fingerprint::{fingerprint, Lit, Slot, Tokens};
use crate::layout::{KeyType, Layout, Method, Partition, Unlisted, Vdb};
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
    /// A read over several groups, their rows concatenated.
    Scatter(GroupSet),
    /// DDL, run on every group holding the table.
    Broadcast(GroupSet),
    /// A read over several groups whose rows are merged: ordered, and/or
    /// limited.
    Merge(Box<MergePlan>),
    /// Not run: why (for an ER_NOT_SUPPORTED_YET message).
    Refuse(String),
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
    /// A select list of plain aggregates: each group answers one row, and
    /// these combine them into the one row of the whole.
    pub aggregates: Vec<crate::analyze::Agg>,
}

impl MergePlan {
    /// Hidden columns at the end of each group's rows: per ORDER BY item
    /// its value, its weight, and the weight of it with a space appended
    /// (whose extra bytes are the weight of a space: strings compare as if
    /// the shorter were padded with spaces).
    pub fn hidden(&self) -> usize {
        3 * self.order.len()
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
        let mut slots = Vec::new();
        CACHE.with(|c| {
            let c = &mut *c.borrow_mut();
            let tokens = fingerprint(sql, mode, &mut c.shape, &mut slots);
            if tokens.dollar_name {
                return self.as_written(db, sql, mode, tokens, may_write);
            }
            c.key.clear();
            c.key.extend_from_slice(&self.id.to_le_bytes());
            c.key.extend_from_slice(db.unwrap_or("").as_bytes());
            c.key.push(0);
            c.key.extend_from_slice(&c.shape);
            match c.entries.get(&c.key) {
                Some(Cached::Shape(a)) => {
                    let r = self.route_analysis(a, &slots, params);
                    return self.finish(self.other(r, a, sql, mode, may_write), a, sql, mode);
                }
                Some(Cached::AsWritten) => {
                    return self.as_written(db, sql, mode, tokens, may_write)
                }
                None => {}
            }
            if c.entries.len() >= CACHE_MAX {
                c.entries.clear();
            }
            let text = String::from_utf8_lossy(parseable(&c.shape));
            match Parser::parse_sql(&MySqlDialect {}, &text) {
                Ok(stmts) => {
                    let a = Arc::new(analyze(&self.layout, db, &stmts, tokens));
                    let r = self.route_analysis(&a, &slots, params);
                    let r = self.finish(self.other(r, &a, sql, mode, may_write), &a, sql, mode);
                    c.entries.insert(c.key.clone(), Cached::Shape(a));
                    r
                }
                Err(_) => {
                    c.entries.insert(c.key.clone(), Cached::AsWritten);
                    self.as_written(db, sql, mode, tokens, may_write)
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
        match parse(sql) {
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
                            "/*# group=\"all\" */ on a write: writing every group at once needs a distributed transaction, which this version does not make".into(),
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
        let text = String::from_utf8_lossy(parseable(sql));
        match Parser::parse_sql(&MySqlDialect {}, &text) {
            Ok(stmts) => {
                let a = analyze(&self.layout, db, &stmts, tokens);
                let r = self.route_analysis(&a, &[], &[]);
                self.finish(self.other(r, &a, sql, mode, may_write), &a, sql, mode)
            }
            Err(e) => self.unparsed(db, sql, mode, may_write, &e.to_string()),
        }
    }

    /// A merge plan gets the SQL each group runs.
    fn finish(&self, r: Route, a: &Analysis, sql: &[u8], mode: LexMode) -> Route {
        let Route::Merge(mut plan) = r else {
            return r;
        };
        let limit = plan.count.map(|c| c.saturating_add(plan.offset));
        let _ = a;
        match merge_sql(sql, mode, &plan.exprs, limit) {
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
            }
            return match set.first() {
                Some(g) if set.len() == 1 => Route::One(g),
                _ => Route::Refuse(format!(
                    "the rows of this INSERT into {} belong to {} groups ({}): a write to several groups at once needs a distributed transaction, which this version does not make; insert each group's rows in its own statement",
                    a.tables[t].name,
                    set.len(),
                    self.names_of(set)
                )),
            };
        }
        let mut required = GroupSet::default();
        let mut copies = all;
        let mut sharded = Vec::new();
        let mut singles = false;
        for (i, t) in a.tables.iter().enumerate() {
            match &t.place {
                Place::Sharded { vdb, .. } => {
                    let v = &self.layout.vdbs[*vdb];
                    let mut set = match a.kind {
                        StmtKind::Ddl => self.vdb_groups(v),
                        _ => self.keys_groups(v, &t.keys, &value),
                    };
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
                    _ => Route::Refuse(format!(
                        "a write to global table {} changes its copy in every group ({}): that needs a distributed transaction, which this version does not make",
                        names(&|p| matches!(p, Place::Global(_))),
                        self.names_of(copies)
                    )),
                };
            }
            return match self.pick(copies) {
                Some(g) => Route::One(g),
                None => Route::Refuse(format!(
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
        if writes {
            return Route::Refuse(format!(
                "the statement writes to {} in {} groups ({}): a write to several groups at once needs a distributed transaction, which this version does not make; restrict it by the shard key to one group",
                names(&|p| !matches!(p, Place::Global(_))),
                required.len(),
                self.names_of(required)
            ));
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
        let order = match &a.order {
            Ok(o) => o,
            Err(why) => {
                return Route::Refuse(format!(
                    "a read over {} groups with {why}: sextant cannot merge the groups' rows by it; restrict it by the shard key to one group",
                    required.len()
                ))
            }
        };
        if let Some(aggs) = &a.aggregates {
            if !order.is_empty() || a.limit.is_some() {
                return Route::Refuse(format!(
                    "a read over {} groups with aggregates and ORDER BY or LIMIT: not merged yet",
                    required.len()
                ));
            }
            return Route::Merge(Box::new(MergePlan {
                groups: required,
                sql: Vec::new(),
                order: Vec::new(),
                exprs: Vec::new(),
                offset: 0,
                count: None,
                aggregates: aggs.clone(),
            }));
        }
        if order.is_empty() && a.limit.is_none() {
            return Route::Scatter(required);
        }
        let number = |v: &Val| match key_value(v, slots, params, KeyType::Int) {
            Some(OwnedKey::Int(i)) if i >= 0 => Some(i as u64),
            _ => None,
        };
        let mut exprs = Vec::with_capacity(order.len());
        for (item, _) in order {
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
        let (offset, count) = match &a.limit {
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
        Route::Merge(Box::new(MergePlan {
            groups: required,
            sql: Vec::new(),
            order: order.iter().map(|(_, desc)| *desc).collect(),
            exprs,
            offset,
            count,
            aggregates: Vec::new(),
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

    /// One of `set`, taking turns.
    fn pick(&self, set: GroupSet) -> Option<usize> {
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

/// The statement a group runs for a merge: three hidden columns per ORDER
/// BY item appended to the top-level select list (its value, and
/// `WEIGHT_STRING` of it and of it with a space appended: bytes that sort
/// as the server's collation sorts strings, and the weight of a space),
/// and the top-level LIMIT replaced by `LIMIT n` (offset + count: every
/// row the merge may need, from each group).
pub fn merge_sql(
    sql: &[u8],
    mode: LexMode,
    order: &[String],
    limit: Option<u64>,
) -> Result<Vec<u8>, &'static str> {
    let base = sql.as_ptr() as usize;
    let mut depth = 0i32;
    let mut select_seen = false;
    let mut from_at = None;
    let mut limit_span: Option<(usize, usize)> = None;
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
        if t.is_word("select") && !select_seen {
            select_seen = true;
        } else if t.is_word("from") && select_seen && from_at.is_none() {
            from_at = Some(start);
        } else if t.is_word("limit") && from_at.is_some() {
            in_limit = true;
            limit_span = Some((start, end));
        } else if in_limit {
            let ends = t.is_punct(b';')
                || ["for", "lock", "procedure", "into"]
                    .iter()
                    .any(|w| t.is_word(w));
            if ends {
                in_limit = false;
            } else if let Some(span) = limit_span.as_mut() {
                span.1 = end;
            }
        }
    }
    let from_at = from_at.ok_or("no FROM at its top level")?;
    let mut out = Vec::with_capacity(sql.len() + 64);
    out.extend_from_slice(&sql[..from_at]);
    for e in order {
        out.extend_from_slice(
            format!(", {e}, WEIGHT_STRING({e}), WEIGHT_STRING(CONCAT({e}, ' ')) ").as_bytes(),
        );
    }
    match (limit_span, limit) {
        (Some((s, e)), Some(n)) => {
            out.extend_from_slice(&sql[from_at..s]);
            out.extend_from_slice(format!("LIMIT {n}").as_bytes());
            out.extend_from_slice(&sql[e..]);
        }
        (None, Some(n)) => {
            // A LIMIT the parser saw must be in the text.
            let _ = n;
            return Err("its LIMIT could not be found in the text");
        }
        (_, None) => out.extend_from_slice(&sql[from_at..]),
    }
    Ok(out)
}

/// The part of a statement the parser reads: MySQL's older `LOCK IN
/// SHARE MODE` (the parser knows only `FOR SHARE`) changes nothing of
/// where a statement goes, and is left off.
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
            crate::cetus::epoch(std::str::from_utf8(s).ok()?).map(OwnedKey::Int)
        }
        _ => None,
    }
}
