//! What a statement asks of a layout, read from its parse tree: the tables
//! it names and where each lives, which shard-key values it restricts each
//! sharded table to, which sharded tables it joins on their keys, the key
//! of every row an INSERT writes, and whether its result could be merged
//! from several shards by concatenation. Values are referred to by slot
//! (see [`crate::fingerprint`]), so one analysis serves every statement of
//! a shape.

use crate::fingerprint::{Lit, Tokens, Val};
use crate::grouping::{grouping, Grouping};
use crate::layout::{Layout, Placement};
use sqlparser::ast::{
    Assignment, AssignmentTarget, BinaryOperator, Expr, FromTable, GroupByExpr, JoinConstraint,
    JoinOperator, ObjectName, ObjectType, OnInsert, Query, Select, SetExpr, Statement, TableFactor,
    TableObject, TableWithJoins, UnaryOperator, Value,
};
use std::borrow::Cow;

/// A set of groups, by their index in [`Layout::groups`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupSet(pub u64);

impl GroupSet {
    pub fn one(i: usize) -> GroupSet {
        GroupSet(1 << i)
    }
    pub fn len(self) -> u32 {
        self.0.count_ones()
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub fn contains(self, i: usize) -> bool {
        self.0 & (1 << i) != 0
    }
    pub fn first(self) -> Option<usize> {
        (self.0 != 0).then(|| self.0.trailing_zeros() as usize)
    }
    pub fn iter(self) -> impl Iterator<Item = usize> {
        (0..64).filter(move |i| self.contains(*i))
    }
    pub fn union(self, o: GroupSet) -> GroupSet {
        GroupSet(self.0 | o.0)
    }
    pub fn intersect(self, o: GroupSet) -> GroupSet {
        GroupSet(self.0 & o.0)
    }
}

/// The shard-key values a table is restricted to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Keys {
    Any,
    In(Vec<Val>),
    /// Bounds, each with whether it is included.
    Range {
        lo: Option<(Val, bool)>,
        hi: Option<(Val, bool)>,
    },
    And(Vec<Keys>),
    Or(Vec<Keys>),
}

/// An ORDER BY item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderItem {
    Expr(String),
    /// `ORDER BY 2`: the select list's item (1-based), a value of the
    /// statement.
    Position(Val),
}

/// Where a table the statement names lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// Spread over a vdb (its index in [`Layout::vdbs`]) by `key`.
    Sharded { vdb: usize, key: String },
    /// In one group: a single table, or its database's default group.
    Group(usize),
    /// A full copy on each of these groups.
    Global(GroupSet),
    /// Not in the layout: where the session's statements go.
    Elsewhere,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableUse {
    /// `db.table` as the statement resolves it, for messages.
    pub name: String,
    pub place: Place,
    pub keys: Keys,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StmtKind {
    Read,
    Insert,
    /// UPDATE, DELETE.
    Write,
    /// CREATE / ALTER / DROP / TRUNCATE TABLE, CREATE INDEX.
    Ddl,
    /// Anything else: SET, SHOW, transaction control, ...
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Analysis {
    pub kind: StmtKind,
    pub tables: Vec<TableUse>,
    /// Pairs of sharded tables the statement joins on equal shard keys:
    /// their matching rows live in the same group.
    pub key_joins: Vec<(usize, usize)>,
    /// The key joins every row of the result satisfies (WHERE, inner
    /// joins' ON and USING): such tables' rows are in the same groups, so
    /// a restriction of one restricts the other.
    pub equal_keys: Vec<(usize, usize)>,
    /// Why the statement's results could not be concatenated from several
    /// groups (None: they could).
    pub merge: Option<&'static str>,
    /// INSERT into a sharded table: each row's key (None: a value sextant
    /// cannot place).
    pub rows: Vec<Option<Val>>,
    /// Index in `tables` of the INSERT's target.
    pub insert_target: Option<usize>,
    /// The columns an INSERT names (lower case; `INSERT ... SET`'s
    /// assigned ones), how many rows its VALUES have (1 for SET; None for
    /// INSERT ... SELECT), for a sequence to fill in a column it lacks.
    pub insert_columns: Vec<String>,
    pub insert_rows: Option<usize>,
    /// Assignments to a shard key (UPDATE, ON DUPLICATE KEY UPDATE): the
    /// table and the value (None: an expression).
    pub sets_key: Vec<(usize, Option<Val>)>,
    /// The statement cannot be served on a sharded layout, and why.
    pub refuse: Option<String>,
    /// The top-level ORDER BY, for a merge of several groups' rows: each
    /// item (an expression as SQL text, ready to be selected again, or a
    /// position in the select list), and whether it is descending. Err:
    /// an ORDER BY sextant cannot merge by.
    pub order: Result<Vec<(OrderItem, bool)>, &'static str>,
    /// The top-level select list as SQL text (None: a wildcard), for
    /// ORDER BY positions.
    pub projection: Vec<Option<String>>,
    /// The top-level LIMIT: count and offset.
    pub limit: Option<(Val, Option<Val>)>,
    /// An UPDATE or DELETE with a LIMIT (or a DELETE with ORDER BY): which
    /// rows it changes depends on every group's rows at once.
    pub write_limit: bool,
    /// A top-level SELECT with GROUP BY, DISTINCT or aggregates: how its
    /// groups' rows combine, or why they cannot.
    pub grouping: Option<Result<Grouping, String>>,
    /// The top-level SELECT's FROM tables: index in `tables`, and the name
    /// a column is qualified with there (its alias, else its name).
    pub top_from: Vec<(usize, String)>,
}

impl Analysis {
    fn new(kind: StmtKind) -> Analysis {
        Analysis {
            kind,
            tables: Vec::new(),
            key_joins: Vec::new(),
            equal_keys: Vec::new(),
            merge: None,
            rows: Vec::new(),
            insert_target: None,
            insert_columns: Vec::new(),
            insert_rows: None,
            sets_key: Vec::new(),
            refuse: None,
            order: Ok(Vec::new()),
            projection: Vec::new(),
            limit: None,
            write_limit: false,
            grouping: None,
            top_from: Vec::new(),
        }
    }

    fn refuse(&mut self, why: String) {
        self.refuse.get_or_insert(why);
    }

    fn blocks_merge(&mut self, why: &'static str) {
        self.merge.get_or_insert(why);
    }
}

/// Analyses parsed statements (one, or several sent in one packet).
pub fn analyze(layout: &Layout, db: Option<&str>, stmts: &[Statement], tokens: Tokens) -> Analysis {
    let mut cx = Cx {
        layout,
        db,
        a: Analysis::new(StmtKind::Other),
        selects: 0,
        outer: Vec::new(),
        semi: None,
    };
    if stmts.len() != 1 {
        cx.a.refuse("several statements in one packet on a sharded layout".into());
    }
    if let Some(s) = stmts.first() {
        cx.statement(s);
    }
    if cx.selects != tokens.selects {
        // A SELECT the walk did not reach: its tables are unknown.
        cx.a.refuse("a subquery in a place sextant does not read".into());
    }
    if tokens.window {
        cx.a.blocks_merge("window functions (OVER)");
    } else if tokens.aggregate && tokens.selects == 1 && cx.a.grouping.is_none() {
        cx.a.blocks_merge("aggregate functions");
    }
    // An aggregate inside a subquery runs in each group: the route only
    // takes subqueries whose rows for an outer row all live in that row's
    // group (correlated on the shard key, or global tables); the
    // top-level select's own aggregates merge by its grouping.
    cx.a
}

struct Cx<'l> {
    layout: &'l Layout,
    db: Option<&'l str>,
    a: Analysis,
    /// SELECT blocks reached, to compare with the lexer's count.
    selects: u32,
    /// The scopes of the SELECT blocks being read, outermost first: a
    /// subquery's condition may name their tables (a correlated subquery).
    outer: Vec<Vec<ScopeTable>>,
    /// `k IN (SELECT ...)`: the table whose shard key `k` is, for the
    /// subquery's SELECT to pair with the shard key it selects.
    semi: Option<usize>,
}

/// A table of the current query block: its index in `tables` and the
/// names a column may be qualified with.
#[derive(Clone)]
struct ScopeTable {
    idx: usize,
    qualifier: String,
    db: String,
}

impl Cx<'_> {
    fn statement(&mut self, s: &Statement) {
        match s {
            Statement::Query(q) => {
                self.a.kind = StmtKind::Read;
                self.query(q, true);
            }
            Statement::Insert(ins) => {
                self.a.kind = StmtKind::Insert;
                let TableObject::TableName(name) = &ins.table else {
                    self.a.refuse("INSERT into a table function".into());
                    return;
                };
                let idx = self.table(name);
                self.a.insert_target = Some(idx);
                self.a.insert_columns = match ins.assignments.is_empty() {
                    true => ins
                        .columns
                        .iter()
                        .map(|c| c.value.to_ascii_lowercase())
                        .collect(),
                    false => ins
                        .assignments
                        .iter()
                        .filter_map(|a| match &a.target {
                            AssignmentTarget::ColumnName(c) => Some(last(c).to_ascii_lowercase()),
                            AssignmentTarget::Tuple(_) => None,
                        })
                        .collect(),
                };
                self.a.insert_rows = match (&ins.source, ins.assignments.is_empty()) {
                    (_, false) => Some(1),
                    (Some(q), true) => match &*q.body {
                        SetExpr::Values(v) => Some(v.rows.len()),
                        _ => None,
                    },
                    (None, true) => None,
                };
                let key = match &self.a.tables[idx].place {
                    Place::Sharded { key, .. } => Some(key.clone()),
                    _ => None,
                };
                let scope = [ScopeTable {
                    idx,
                    qualifier: last(name).to_ascii_lowercase(),
                    db: String::new(),
                }];
                if let Some(OnInsert::DuplicateKeyUpdate(sets)) = &ins.on {
                    self.assignments(sets, &scope);
                }
                if !ins.assignments.is_empty() {
                    // INSERT ... SET col = value
                    let v = key.as_ref().and_then(|k| {
                        ins.assignments
                            .iter()
                            .find(|a| target_is(a, k))
                            .map(|a| val_of(&a.value))
                    });
                    if key.is_some() {
                        self.a.rows.push(v.flatten());
                    }
                    return;
                }
                let Some(source) = &ins.source else { return };
                match (&*source.body, &key) {
                    (SetExpr::Values(values), Some(k)) => {
                        let Some(pos) = ins.columns.iter().position(|c| c.value.eq_ignore_ascii_case(k)) else {
                            // A sequence gives the key: sextant writes it in
                            // before routing the rows.
                            let (tdb, table) = self.a.tables[idx].name.split_once('.').unwrap_or_default();
                            if self.layout.sequence(tdb, table).is_some_and(|s| s.column.eq_ignore_ascii_case(k)) && !ins.columns.is_empty() {
                                return;
                            }
                            let why = match ins.columns.is_empty() {
                                true => format!("an INSERT into sharded table {} must name its columns, so that sextant can find the shard key {k}", self.a.tables[idx].name),
                                false => format!("an INSERT into sharded table {} must give its shard key {k}", self.a.tables[idx].name),
                            };
                            self.a.refuse(why);
                            return;
                        };
                        for row in &values.rows {
                            self.a.rows.push(row.get(pos).and_then(val_of));
                        }
                    }
                    (SetExpr::Values(_), None) => {}
                    (_, Some(_)) => self.a.refuse(format!(
                        "INSERT ... SELECT into sharded table {}: the rows' shard is known only as they are made",
                        self.a.tables[idx].name
                    )),
                    (_, None) => self.query(source, false),
                }
            }
            Statement::Update {
                table,
                assignments,
                from,
                selection,
                limit,
                ..
            } => {
                self.a.kind = StmtKind::Write;
                self.a.write_limit = limit.is_some();
                let mut scope = Vec::new();
                self.join_tree(table, &mut scope);
                if from.is_some() {
                    self.a.refuse("UPDATE ... FROM".into());
                }
                self.assignments(assignments, &scope);
                self.filter(selection.as_ref(), &scope);
            }
            Statement::Delete(d) => {
                self.a.kind = StmtKind::Write;
                self.a.write_limit = d.limit.is_some() || !d.order_by.is_empty();
                let mut scope = Vec::new();
                let items = match &d.from {
                    FromTable::WithFromKeyword(v) | FromTable::WithoutKeyword(v) => v,
                };
                for t in items.iter().chain(d.using.iter().flatten()) {
                    self.join_tree(t, &mut scope);
                }
                self.filter(d.selection.as_ref(), &scope);
            }
            Statement::CreateTable(ct) => {
                self.a.kind = StmtKind::Ddl;
                self.table(&ct.name);
                if let Some(like) = &ct.like {
                    let name = match like {
                        sqlparser::ast::CreateTableLikeKind::Parenthesized(l)
                        | sqlparser::ast::CreateTableLikeKind::Plain(l) => &l.name,
                    };
                    self.table(name);
                }
                if ct.query.is_some() {
                    self.a
                        .refuse("CREATE TABLE ... SELECT on a sharded layout".into());
                }
            }
            Statement::AlterTable { name, .. } => {
                self.a.kind = StmtKind::Ddl;
                self.table(name);
            }
            Statement::Drop {
                object_type: ObjectType::Table,
                names,
                ..
            } => {
                self.a.kind = StmtKind::Ddl;
                for n in names {
                    self.table(n);
                }
            }
            Statement::Truncate { table_names, .. } => {
                self.a.kind = StmtKind::Ddl;
                for t in table_names {
                    self.table(&t.name);
                }
            }
            Statement::CreateIndex(ci) => {
                self.a.kind = StmtKind::Ddl;
                self.table(&ci.table_name);
            }
            _ => {}
        }
    }

    fn assignments(&mut self, sets: &[Assignment], scope: &[ScopeTable]) {
        for a in sets {
            let AssignmentTarget::ColumnName(col) = &a.target else {
                continue;
            };
            let parts = idents(col);
            if let Some(t) = self.key_column(&parts, scope) {
                self.a.sets_key.push((t, val_of(&a.value)));
            }
        }
    }

    /// A query block (with its UNIONs, CTEs, derived tables and
    /// subqueries). `top`: its rows are the statement's result.
    fn query(&mut self, q: &Query, top: bool) {
        if let Some(with) = &q.with {
            self.a.blocks_merge("WITH");
            for cte in &with.cte_tables {
                self.query(&cte.query, false);
            }
        }
        if top {
            if let SetExpr::Select(sel) = &*q.body {
                use sqlparser::ast::SelectItem;
                self.a.projection = sel
                    .projection
                    .iter()
                    .map(|p| match p {
                        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                            let t = e.to_string();
                            (!t.contains('$') && !t.contains('?')).then_some(t)
                        }
                        _ => None,
                    })
                    .collect();
            }
            if let Some(o) = &q.order_by {
                self.a.order = order_items(o, &q.body);
            }
            if let SetExpr::Select(sel) = &*q.body {
                self.a.grouping = grouping(sel, q.order_by.as_ref(), val_of);
            }
            match &q.limit_clause {
                Some(sqlparser::ast::LimitClause::LimitOffset {
                    limit: Some(l),
                    offset,
                    limit_by,
                }) if limit_by.is_empty() => {
                    let off = match offset {
                        Some(o) => val_of(&o.value).map(Some),
                        None => Some(None),
                    };
                    match (val_of(l), off) {
                        (Some(l), Some(o)) => self.a.limit = Some((l, o)),
                        _ => self.a.blocks_merge("a LIMIT that is not a number"),
                    }
                }
                Some(sqlparser::ast::LimitClause::OffsetCommaLimit { offset, limit }) => {
                    match (val_of(limit), val_of(offset)) {
                        (Some(l), Some(o)) => self.a.limit = Some((l, Some(o))),
                        _ => self.a.blocks_merge("a LIMIT that is not a number"),
                    }
                }
                None => {}
                Some(_) => self.a.blocks_merge("this LIMIT form"),
            }
            if q.fetch.is_some() {
                self.a.blocks_merge("FETCH");
            }
        }
        self.set_expr(&q.body, top);
    }

    fn set_expr(&mut self, s: &SetExpr, top: bool) {
        match s {
            SetExpr::Select(sel) => self.select(sel, top),
            SetExpr::Query(q) => self.query(q, top),
            SetExpr::SetOperation { left, right, .. } => {
                self.a.blocks_merge("UNION");
                self.set_expr(left, false);
                self.set_expr(right, false);
            }
            SetExpr::Values(_) => {}
            _ => self.a.refuse("a query form sextant does not read".into()),
        }
    }

    fn select(&mut self, s: &Select, top: bool) {
        self.selects += 1;
        let semi = self.semi.take();
        if top && s.into.is_some() {
            self.a.blocks_merge("SELECT ... INTO");
        }
        let mut scope = Vec::new();
        for t in &s.from {
            self.join_tree(t, &mut scope);
        }
        if top {
            self.a.top_from = scope
                .iter()
                .map(|st| (st.idx, st.qualifier.clone()))
                .collect();
        }
        // `k IN (SELECT k2 FROM ...)` with both shard keys: each outer row
        // meets only rows of its own key, which live in its group.
        // Only a plain list of keys: grouped or aggregated, a group's
        // own rows would make another set than all groups' rows.
        let plain = matches!(&s.group_by, GroupByExpr::Expressions(v, _) if v.is_empty())
            && s.having.is_none();
        if let (
            Some(o),
            [sqlparser::ast::SelectItem::UnnamedExpr(e)
            | sqlparser::ast::SelectItem::ExprWithAlias { expr: e, .. }],
            true,
        ) = (semi, s.projection.as_slice(), plain)
        {
            if let Some(t) = self
                .column(e, &scope)
                .filter(|t| *t != o && !crate::grouping::has_aggregate(e))
            {
                self.a.key_joins.push((o.min(t), o.max(t)));
            }
        }
        self.outer.push(scope.clone());
        for item in &s.projection {
            if let sqlparser::ast::SelectItem::UnnamedExpr(e)
            | sqlparser::ast::SelectItem::ExprWithAlias { expr: e, .. } = item
            {
                self.subqueries(e);
            }
        }
        self.filter(s.selection.as_ref(), &scope);
        if let Some(h) = &s.having {
            self.subqueries(h);
        }
        self.outer.pop();
    }

    /// A table of an enclosing SELECT named by a qualified column (`c.k`
    /// whose qualifier no table of `scope` has): a correlated reference.
    /// Unqualified names are not taken as such: the server looks for them
    /// in the subquery's own tables first, whose columns sextant does not
    /// know.
    fn outer_column(&self, e: &Expr, scope: &[ScopeTable]) -> Option<usize> {
        let Expr::CompoundIdentifier(v) = e else {
            return None;
        };
        let parts: Vec<&str> = v.iter().map(|i| i.value.as_str()).collect();
        let q = parts.len().checked_sub(2).map(|i| parts[i])?;
        if scope.iter().any(|st| st.qualifier.eq_ignore_ascii_case(q)) {
            return None;
        }
        let own: Vec<usize> = scope.iter().map(|st| st.idx).collect();
        self.outer
            .iter()
            .rev()
            .find(|sc| sc.iter().any(|st| st.qualifier.eq_ignore_ascii_case(q)))
            .and_then(|sc| self.key_column(&parts, sc))
            .filter(|t| !own.contains(t))
    }

    /// A FROM item: its tables join the scope; inner joins' ON conditions
    /// restrict keys as WHERE does.
    fn join_tree(&mut self, t: &TableWithJoins, scope: &mut Vec<ScopeTable>) {
        self.factor(&t.relation, scope);
        for j in &t.joins {
            self.factor(&j.relation, scope);
            let (inner, c) = match &j.join_operator {
                JoinOperator::Join(c)
                | JoinOperator::Inner(c)
                | JoinOperator::CrossJoin(c)
                | JoinOperator::StraightJoin(c) => (true, c),
                JoinOperator::Left(c)
                | JoinOperator::LeftOuter(c)
                | JoinOperator::Right(c)
                | JoinOperator::RightOuter(c) => (false, c),
                _ => {
                    self.a.refuse("a join form sextant does not read".into());
                    continue;
                }
            };
            match c {
                JoinConstraint::On(e) => {
                    self.subqueries(e);
                    self.key_joins(e, scope, inner);
                    if inner {
                        for st in scope.iter() {
                            let k = self.keys_of(e, st.idx, scope);
                            self.restrict(st.idx, k);
                        }
                    }
                }
                JoinConstraint::Using(cols) => {
                    // USING (k): equal keys when k is both tables' key.
                    for c in cols {
                        let name = idents(c);
                        if let [col] = name.as_slice() {
                            let sharded: Vec<usize> = scope
                                .iter()
                                .filter(|s| {
                                    self.key_name(s.idx)
                                        .is_some_and(|k| k.eq_ignore_ascii_case(col))
                                })
                                .map(|s| s.idx)
                                .collect();
                            for w in sharded.windows(2) {
                                self.a.key_joins.push((w[0], w[1]));
                                if inner {
                                    self.a.equal_keys.push((w[0], w[1]));
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn factor(&mut self, f: &TableFactor, scope: &mut Vec<ScopeTable>) {
        match f {
            TableFactor::Table {
                name, alias, args, ..
            } => {
                if args.is_some() {
                    self.a.refuse("a table function".into());
                    return;
                }
                let idx = self.table(name);
                let parts = idents(name);
                let qualifier = match alias {
                    Some(a) => a.name.value.to_ascii_lowercase(),
                    None => last(name).to_ascii_lowercase(),
                };
                let db = match (alias, parts.as_slice()) {
                    (None, [db, _]) => db.to_ascii_lowercase(),
                    _ => String::new(),
                };
                scope.push(ScopeTable { idx, qualifier, db });
            }
            TableFactor::Derived { subquery, .. } => {
                self.a.blocks_merge("a derived table");
                self.query(subquery, false);
            }
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => self.join_tree(table_with_joins, scope),
            _ => self.a.refuse("a FROM form sextant does not read".into()),
        }
    }

    /// Adds a table the statement names; returns its index.
    fn table(&mut self, name: &ObjectName) -> usize {
        let parts = idents(name);
        let (db, table) = match parts.as_slice() {
            [t] => (self.db.unwrap_or(""), *t),
            [db, t] => (*db, *t),
            _ => ("", ""),
        };
        let place = match self.layout.placement(db, table) {
            Placement::Sharded { table: t, vdb } => Place::Sharded {
                vdb: self
                    .layout
                    .vdbs
                    .iter()
                    .position(|v| v.id == vdb.id)
                    .unwrap_or(0),
                key: t.key.to_ascii_lowercase(),
            },
            Placement::Single { group } | Placement::Default { group } => {
                match self.layout.group_index(group) {
                    Some(i) => Place::Group(i),
                    None => Place::Elsewhere,
                }
            }
            Placement::Global { groups } => {
                let mut set = GroupSet::default();
                for g in groups {
                    if let Some(i) = self.layout.group_index(g) {
                        set = set.union(GroupSet::one(i));
                    }
                }
                Place::Global(set)
            }
            Placement::Unknown => Place::Elsewhere,
        };
        self.a.tables.push(TableUse {
            name: match db {
                "" => table.to_string(),
                db => format!("{db}.{table}"),
            },
            place,
            keys: Keys::Any,
        });
        self.a.tables.len() - 1
    }

    fn key_name(&self, idx: usize) -> Option<&str> {
        match &self.a.tables[idx].place {
            Place::Sharded { key, .. } => Some(key),
            _ => None,
        }
    }

    /// The table of `scope` whose shard key the column `parts` is.
    fn key_column(&self, parts: &[&str], scope: &[ScopeTable]) -> Option<usize> {
        let is_key = |st: &ScopeTable, col: &str| {
            self.key_name(st.idx)
                .is_some_and(|k| k.eq_ignore_ascii_case(col))
        };
        match parts {
            [col] => {
                let mut found = scope.iter().filter(|st| is_key(st, col));
                let first = found.next()?;
                // Two tables with this key column: the column would be
                // ambiguous, and the server says so.
                found.next().is_none().then_some(first.idx)
            }
            [q, col] => scope
                .iter()
                .find(|st| st.qualifier.eq_ignore_ascii_case(q) && is_key(st, col))
                .map(|st| st.idx),
            [db, q, col] => scope
                .iter()
                .find(|st| {
                    st.qualifier.eq_ignore_ascii_case(q)
                        && (st.db.is_empty() || st.db.eq_ignore_ascii_case(db))
                        && is_key(st, col)
                })
                .map(|st| st.idx),
            _ => None,
        }
    }

    fn column(&self, e: &Expr, scope: &[ScopeTable]) -> Option<usize> {
        match e {
            Expr::Identifier(i) => self.key_column(&[i.value.as_str()], scope),
            Expr::CompoundIdentifier(v) => {
                let parts: Vec<&str> = v.iter().map(|i| i.value.as_str()).collect();
                self.key_column(&parts, scope)
            }
            Expr::Nested(e) => self.column(e, scope),
            _ => None,
        }
    }

    /// WHERE: restricts the scope's sharded tables, notes key joins.
    fn filter(&mut self, e: Option<&Expr>, scope: &[ScopeTable]) {
        let Some(e) = e else { return };
        self.subqueries(e);
        self.key_joins(e, scope, true);
        for st in scope {
            let k = self.keys_of(e, st.idx, scope);
            self.restrict(st.idx, k);
        }
    }

    fn restrict(&mut self, idx: usize, k: Keys) {
        if k == Keys::Any || self.key_name(idx).is_none() {
            return;
        }
        let t = &mut self.a.tables[idx];
        t.keys = match std::mem::replace(&mut t.keys, Keys::Any) {
            Keys::Any => k,
            prev => Keys::And(vec![prev, k]),
        };
    }

    /// `a.k = b.k` among the top-level conjuncts.
    /// `inner`: every row of the result satisfies `e` (WHERE, an inner
    /// join's ON).
    fn key_joins(&mut self, e: &Expr, scope: &[ScopeTable], inner: bool) {
        match e {
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => {
                self.key_joins(left, scope, inner);
                self.key_joins(right, scope, inner);
            }
            Expr::Nested(e) => self.key_joins(e, scope, inner),
            Expr::BinaryOp {
                left,
                op: BinaryOperator::Eq,
                right,
            } => {
                if let (Some(a), Some(b)) = (self.column(left, scope), self.column(right, scope)) {
                    if a != b {
                        self.a.key_joins.push((a.min(b), a.max(b)));
                        if inner {
                            self.a.equal_keys.push((a.min(b), a.max(b)));
                        }
                    }
                } else {
                    // A subquery correlated on the shard key: its rows for
                    // an outer row are in that row's group. Not an equality
                    // of the result's rows (NOT EXISTS), so no restriction
                    // carries over.
                    let own = |x: &Expr| self.column(x, scope);
                    let out = |x: &Expr| self.outer_column(x, scope);
                    if let Some((a, b)) = own(left)
                        .zip(out(right))
                        .or_else(|| out(left).zip(own(right)))
                    {
                        self.a.key_joins.push((a.min(b), a.max(b)));
                    }
                }
            }
            _ => {}
        }
    }

    /// The keys `e` restricts table `t` to.
    fn keys_of(&self, e: &Expr, t: usize, scope: &[ScopeTable]) -> Keys {
        let is_key = |x: &Expr| self.column(x, scope) == Some(t);
        match e {
            Expr::Nested(e) => self.keys_of(e, t, scope),
            Expr::BinaryOp { left, op, right } => match op {
                BinaryOperator::And => {
                    match (self.keys_of(left, t, scope), self.keys_of(right, t, scope)) {
                        (Keys::Any, k) | (k, Keys::Any) => k,
                        (a, b) => Keys::And(vec![a, b]),
                    }
                }
                BinaryOperator::Or => {
                    match (self.keys_of(left, t, scope), self.keys_of(right, t, scope)) {
                        (Keys::Any, _) | (_, Keys::Any) => Keys::Any,
                        (a, b) => Keys::Or(vec![a, b]),
                    }
                }
                BinaryOperator::Eq
                | BinaryOperator::Gt
                | BinaryOperator::GtEq
                | BinaryOperator::Lt
                | BinaryOperator::LtEq => {
                    // key op value, or value op key (the operator flipped).
                    let (v, op) = if is_key(left) {
                        (val_of(right), op.clone())
                    } else if is_key(right) {
                        let flipped = match op {
                            BinaryOperator::Gt => BinaryOperator::Lt,
                            BinaryOperator::GtEq => BinaryOperator::LtEq,
                            BinaryOperator::Lt => BinaryOperator::Gt,
                            BinaryOperator::LtEq => BinaryOperator::GtEq,
                            o => o.clone(),
                        };
                        (val_of(left), flipped)
                    } else {
                        return Keys::Any;
                    };
                    let Some(v) = v else { return Keys::Any };
                    match op {
                        BinaryOperator::Eq => Keys::In(vec![v]),
                        BinaryOperator::Gt => Keys::Range {
                            lo: Some((v, false)),
                            hi: None,
                        },
                        BinaryOperator::GtEq => Keys::Range {
                            lo: Some((v, true)),
                            hi: None,
                        },
                        BinaryOperator::Lt => Keys::Range {
                            lo: None,
                            hi: Some((v, false)),
                        },
                        _ => Keys::Range {
                            lo: None,
                            hi: Some((v, true)),
                        },
                    }
                }
                _ => Keys::Any,
            },
            Expr::InList {
                expr,
                list,
                negated: false,
            } if is_key(expr) => {
                let vals: Option<Vec<Val>> = list.iter().map(val_of).collect();
                vals.map_or(Keys::Any, Keys::In)
            }
            // `(k, b) IN ((1, 2), (3, 4))`: the key's place in each tuple.
            Expr::InList {
                expr,
                list,
                negated: false,
            } => {
                let Expr::Tuple(cols) = &**expr else {
                    return Keys::Any;
                };
                let Some(at) = cols.iter().position(is_key) else {
                    return Keys::Any;
                };
                let vals: Option<Vec<Val>> = list
                    .iter()
                    .map(|x| match x {
                        Expr::Tuple(v) if v.len() == cols.len() => val_of(&v[at]),
                        _ => None,
                    })
                    .collect();
                vals.map_or(Keys::Any, Keys::In)
            }
            Expr::Between {
                expr,
                negated: false,
                low,
                high,
            } if is_key(expr) => match (val_of(low), val_of(high)) {
                (Some(l), Some(h)) => Keys::Range {
                    lo: Some((l, true)),
                    hi: Some((h, true)),
                },
                _ => Keys::Any,
            },
            _ => Keys::Any,
        }
    }

    /// Subqueries in an expression: their tables are the statement's.
    fn subqueries(&mut self, e: &Expr) {
        match e {
            Expr::Subquery(q) => self.query(q, false),
            Expr::Exists { subquery, .. } => self.query(subquery, false),
            Expr::InSubquery { expr, subquery, .. } => {
                self.subqueries(expr);
                // A LIMIT would cut each group's set on its own.
                let whole = subquery.limit_clause.is_none() && subquery.fetch.is_none();
                self.semi = self
                    .outer
                    .last()
                    .and_then(|sc| self.column(expr, sc))
                    .filter(|_| whole);
                self.query(subquery, false);
                self.semi = None;
            }
            Expr::BinaryOp { left, right, .. } => {
                self.subqueries(left);
                self.subqueries(right);
            }
            Expr::UnaryOp { expr, .. }
            | Expr::Nested(expr)
            | Expr::IsNull(expr)
            | Expr::IsNotNull(expr) => self.subqueries(expr),
            Expr::InList { expr, list, .. } => {
                self.subqueries(expr);
                for x in list {
                    self.subqueries(x);
                }
            }
            Expr::Between {
                expr, low, high, ..
            } => {
                self.subqueries(expr);
                self.subqueries(low);
                self.subqueries(high);
            }
            Expr::Function(f) => {
                if let sqlparser::ast::FunctionArguments::List(l) = &f.args {
                    for a in &l.args {
                        if let sqlparser::ast::FunctionArg::Unnamed(
                            sqlparser::ast::FunctionArgExpr::Expr(x),
                        ) = a
                        {
                            self.subqueries(x);
                        }
                    }
                }
            }
            Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                if let Some(o) = operand {
                    self.subqueries(o);
                }
                for c in conditions {
                    self.subqueries(&c.condition);
                    self.subqueries(&c.result);
                }
                if let Some(x) = else_result {
                    self.subqueries(x);
                }
            }
            // Anything else holding a SELECT is caught by the count of
            // SELECT keywords against the blocks reached.
            _ => {}
        }
    }
}

/// ORDER BY items as expressions that can be selected again: a column, an
/// alias of the select list (resolved to its expression), a position, or
/// another expression without values.
fn order_items(
    o: &sqlparser::ast::OrderBy,
    body: &SetExpr,
) -> Result<Vec<(OrderItem, bool)>, &'static str> {
    use sqlparser::ast::{OrderByKind, SelectItem};
    let OrderByKind::Expressions(items) = &o.kind else {
        return Err("ORDER BY ALL");
    };
    let SetExpr::Select(sel) = body else {
        return Err("ORDER BY of a UNION");
    };
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        if it.options.nulls_first.is_some() {
            return Err("NULLS FIRST / LAST");
        }
        let desc = it.options.asc == Some(false);
        // A select-list alias, or a position, stands for its expression.
        if let Some(v @ (Val::Slot(_) | Val::Lit(Lit::Int(_)))) = val_of(&it.expr) {
            out.push((OrderItem::Position(v), desc));
            continue;
        }
        let text = match &it.expr {
            Expr::Identifier(id) => sel
                .projection
                .iter()
                .find_map(|p| match p {
                    SelectItem::ExprWithAlias { expr, alias }
                        if alias.value.eq_ignore_ascii_case(&id.value) =>
                    {
                        Some(expr.to_string())
                    }
                    _ => None,
                })
                .unwrap_or_else(|| it.expr.to_string()),
            e => e.to_string(),
        };
        // Values are placeholders in a shape: not repeatable as text.
        if text.contains('$') || text.contains('?') {
            return Err("an ORDER BY expression with values");
        }
        if text.to_ascii_lowercase().contains("select") {
            return Err("an ORDER BY subquery");
        }
        out.push((OrderItem::Expr(text), desc));
    }
    Ok(out)
}

fn idents(n: &ObjectName) -> Vec<&str> {
    n.0.iter()
        .filter_map(|p| p.as_ident())
        .map(|i| i.value.as_str())
        .collect()
}

fn last(n: &ObjectName) -> &str {
    idents(n).last().copied().unwrap_or("")
}

fn target_is(a: &Assignment, key: &str) -> bool {
    match &a.target {
        AssignmentTarget::ColumnName(c) => last(c).eq_ignore_ascii_case(key),
        AssignmentTarget::Tuple(_) => false,
    }
}

/// A value sextant can place: a slot, a negated slot, or a literal.
fn val_of(e: &Expr) -> Option<Val> {
    match e {
        Expr::Nested(e) => val_of(e),
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => match val_of(expr)? {
            Val::Slot(i) => Some(Val::Neg(i)),
            Val::Lit(Lit::Int(i)) => Some(Val::Lit(i.checked_neg().map_or(Lit::Other, Lit::Int))),
            _ => None,
        },
        // LAST_INSERT_ID(v) is v (sextant writes a sequence's first id so).
        Expr::Function(f) if last(&f.name).eq_ignore_ascii_case("last_insert_id") => {
            match &f.args {
                sqlparser::ast::FunctionArguments::List(l) if l.args.len() == 1 => {
                    match &l.args[0] {
                        sqlparser::ast::FunctionArg::Unnamed(
                            sqlparser::ast::FunctionArgExpr::Expr(e),
                        ) => val_of(e),
                        _ => None,
                    }
                }
                _ => None,
            }
        }
        // The shape's placeholders: MySQL's grammar reads `$1` as a name.
        Expr::Identifier(i) if i.quote_style.is_none() => i
            .value
            .strip_prefix('$')
            .and_then(|n| n.parse::<u16>().ok())
            .and_then(|n| n.checked_sub(1))
            .map(Val::Slot),
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => Some(Val::Lit(n.parse::<i64>().map_or(Lit::Other, Lit::Int))),
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => {
                Some(Val::Lit(Lit::Str(Cow::Owned(s.clone().into_bytes()))))
            }
            Value::Null => Some(Val::Lit(Lit::Null)),
            _ => None,
        },
        _ => None,
    }
}
