//! What a statement asks of a layout, read from its parse tree: the tables
//! it names and where each lives, which shard-key values it restricts each
//! sharded table to, which sharded tables it joins on their keys, the key
//! of every row an INSERT writes, and whether its result could be merged
//! from several shards by concatenation. Values are referred to by slot
//! (see [`crate::fingerprint`]), so one analysis serves every statement of
//! a shape.

mod keys;
mod tables;

use crate::fingerprint::{Tokens, Val};
use crate::grouping::{grouping, Grouping};
use crate::layout::Layout;
use keys::{idents, last, order_items, target_is, val_of};
use sqlparser::ast::{
    Assignment, AssignmentTarget, FromTable, GroupByExpr, ObjectType, OnInsert, Query, Select,
    SetExpr, Statement, TableObject,
};

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
    /// In the statement's own FROM (not a subquery's, a derived table's or
    /// a CTE's) and on no side of an outer join that may be missing: each
    /// row of the result holds exactly one row of it. A read over several
    /// groups is exact only when a sharded table is such an anchor (else
    /// each group answers for its own copy of the other tables' rows).
    pub anchor: bool,
    /// In the statement's own FROM (an anchor unless on an outer join's
    /// optional side).
    pub top: bool,
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
    /// CREATE or DROP TEMPORARY TABLE: the table is the session's own,
    /// on its connection in its group, whatever its name.
    pub temporary: bool,
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
    /// The first value the statement reads that may differ between two
    /// connections (see [`Tokens::volatile`]).
    pub volatile: Option<&'static str>,
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
            temporary: false,
            order: Ok(Vec::new()),
            projection: Vec::new(),
            limit: None,
            write_limit: false,
            grouping: None,
            top_from: Vec::new(),
            volatile: None,
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
        blocks: 0,
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
    cx.a.volatile = tokens.volatile;
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
    /// Query blocks around the walk: the statement's own is 1 (an UPDATE's
    /// or DELETE's tables are at 0).
    blocks: u32,
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
                self.a.temporary = ct.temporary;
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
                temporary,
                ..
            } => {
                self.a.kind = StmtKind::Ddl;
                self.a.temporary = *temporary;
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
        self.blocks += 1;
        self.query_block(q, top);
        self.blocks -= 1;
    }

    fn query_block(&mut self, q: &Query, top: bool) {
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
}
