//! The tables a statement names: its FROM and JOIN trees, where each table
//! lives, and which of its columns is the shard key.

use super::keys::{idents, last};
use super::{Cx, GroupSet, Keys, Place, ScopeTable, TableUse};
use crate::layout::Placement;
use sqlparser::ast::{Expr, JoinConstraint, JoinOperator, ObjectName, TableFactor, TableWithJoins};

impl Cx<'_> {
    /// A table of an enclosing SELECT named by a qualified column (`c.k`
    /// whose qualifier no table of `scope` has): a correlated reference.
    /// Unqualified names are not taken as such: the server looks for them
    /// in the subquery's own tables first, whose columns sextant does not
    /// know.
    pub(super) fn outer_column(&self, e: &Expr, scope: &[ScopeTable]) -> Option<usize> {
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
    pub(super) fn join_tree(&mut self, t: &TableWithJoins, scope: &mut Vec<ScopeTable>) {
        let start = self.a.tables.len();
        self.factor(&t.relation, scope);
        for j in &t.joins {
            let before = self.a.tables.len();
            self.factor(&j.relation, scope);
            // The side an outer join may fill with NULLs is no anchor.
            let optional = match &j.join_operator {
                JoinOperator::Left(_) | JoinOperator::LeftOuter(_) => before..self.a.tables.len(),
                JoinOperator::Right(_) | JoinOperator::RightOuter(_) => start..before,
                _ => 0..0,
            };
            for t in &mut self.a.tables[optional] {
                t.anchor = false;
            }
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

    pub(super) fn factor(&mut self, f: &TableFactor, scope: &mut Vec<ScopeTable>) {
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
    pub(super) fn table(&mut self, name: &ObjectName) -> usize {
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
            anchor: self.blocks <= 1,
            top: self.blocks <= 1,
        });
        self.a.tables.len() - 1
    }

    pub(super) fn key_name(&self, idx: usize) -> Option<&str> {
        match &self.a.tables[idx].place {
            Place::Sharded { key, .. } => Some(key),
            _ => None,
        }
    }

    /// The table of `scope` whose shard key the column `parts` is.
    pub(super) fn key_column(&self, parts: &[&str], scope: &[ScopeTable]) -> Option<usize> {
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

    pub(super) fn column(&self, e: &Expr, scope: &[ScopeTable]) -> Option<usize> {
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
}
