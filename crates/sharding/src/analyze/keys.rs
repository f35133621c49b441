//! The shard-key values a statement restricts each sharded table to (its
//! WHERE, ON and subqueries), and the joins on equal keys.

use super::{Cx, Keys, OrderItem, ScopeTable};
use crate::fingerprint::{Lit, Val};
use sqlparser::ast::{
    Assignment, AssignmentTarget, BinaryOperator, Expr, ObjectName, SetExpr, UnaryOperator, Value,
};
use std::borrow::Cow;

impl Cx<'_> {
    /// WHERE: restricts the scope's sharded tables, notes key joins.
    pub(super) fn filter(&mut self, e: Option<&Expr>, scope: &[ScopeTable]) {
        let Some(e) = e else { return };
        self.subqueries(e);
        self.key_joins(e, scope, true);
        for st in scope {
            let k = self.keys_of(e, st.idx, scope);
            self.restrict(st.idx, k);
        }
    }

    pub(super) fn restrict(&mut self, idx: usize, k: Keys) {
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
    pub(super) fn key_joins(&mut self, e: &Expr, scope: &[ScopeTable], inner: bool) {
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
    pub(super) fn keys_of(&self, e: &Expr, t: usize, scope: &[ScopeTable]) -> Keys {
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
    pub(super) fn subqueries(&mut self, e: &Expr) {
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
pub(super) fn order_items(
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

pub(super) fn idents(n: &ObjectName) -> Vec<&str> {
    n.0.iter()
        .filter_map(|p| p.as_ident())
        .map(|i| i.value.as_str())
        .collect()
}

pub(super) fn last(n: &ObjectName) -> &str {
    idents(n).last().copied().unwrap_or("")
}

pub(super) fn target_is(a: &Assignment, key: &str) -> bool {
    match &a.target {
        AssignmentTarget::ColumnName(c) => last(c).eq_ignore_ascii_case(key),
        AssignmentTarget::Tuple(_) => false,
    }
}

/// A value sextant can place: a slot, a negated slot, or a literal.
pub(super) fn val_of(e: &Expr) -> Option<Val> {
    match e {
        Expr::Nested(e) => val_of(e),
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => match val_of(expr)? {
            Val::Slot(i) => Some(Val::Neg(i)),
            Val::Lit(l @ (Lit::Int(_) | Lit::Big(_))) => Some(Val::Lit(l.negated())),
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
            Value::Number(n, _) => Some(Val::Lit(Lit::number(n))),
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => {
                Some(Val::Lit(Lit::Str(Cow::Owned(s.clone().into_bytes()))))
            }
            Value::Null => Some(Val::Lit(Lit::Null)),
            _ => None,
        },
        _ => None,
    }
}
