//! What a top-level SELECT with GROUP BY, DISTINCT or aggregates asks of
//! a merge over several groups: its group keys, what each select-list
//! item is (a grouped value, or an aggregate whose partial results
//! combine), its HAVING, and its ORDER BY in those terms. Read once per
//! statement shape; values (positions, HAVING's numbers) stay slots.

use crate::fingerprint::Val;
use crate::fingerprint::{Lit, AGGREGATES};
use crate::merge::{AggKind, CmpOp};
use sqlparser::ast::{
    BinaryOperator, Distinct, DuplicateTreatment, Expr, FunctionArg, FunctionArgExpr,
    FunctionArguments, GroupByExpr, OrderBy, OrderByKind, Select, SelectItem, UnaryOperator,
};

/// A top-level SELECT whose rows combine across groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grouping {
    /// GROUP BY items, or a DISTINCT select list.
    pub keys: Vec<Key>,
    /// No GROUP BY: the whole is one group (one row, even of no rows).
    pub implicit: bool,
    pub items: Vec<Item>,
    pub having: Having,
    pub order: Vec<(OrderRef, bool)>,
    /// GROUP BY names read as a select-list alias of another expression
    /// (`SELECT qty AS item_id ... GROUP BY item_id`): the server takes a
    /// column of that name instead, if the FROM tables have one, which
    /// only their catalogue tells (see `columns::ambiguous_group_by`).
    pub alias_keys: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// An expression as SQL text, without values.
    Expr(String),
    /// `GROUP BY 2`: a select-list item (1-based), a value.
    Position(Val),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// Not an aggregate: its text (None when it has values).
    Any(Option<String>),
    Agg(AggCall),
    /// Arithmetic over aggregates and integers.
    Calc(Calc),
}

/// `+`, `-`, `*` over aggregates and integers, and at most one `/`, at
/// the top: what sextant computes exactly from combined aggregates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Calc {
    Agg(AggCall),
    Num(Val),
    Neg(Box<Calc>),
    Bin(char, Box<Calc>, Box<Calc>),
}

impl Calc {
    pub fn calls(&self, out: &mut Vec<AggCall>) {
        match self {
            Calc::Agg(c) => out.push(c.clone()),
            Calc::Num(_) => {}
            Calc::Neg(x) => x.calls(out),
            Calc::Bin(_, x, y) => {
                x.calls(out);
                y.calls(out);
            }
        }
    }
}

fn calc(e: &Expr, top: bool, val_of: fn(&Expr) -> Option<Val>) -> Result<Calc, String> {
    let no = || {
        format!(
            "an expression over aggregates ({}): sextant computes +, - and * of COUNT, SUM, MIN and MAX of numbers and integers, with one / at the top",
            shown(e)
        )
    };
    if let Some(v @ (Val::Slot(_) | Val::Neg(_) | Val::Lit(Lit::Int(_)))) = val_of(e) {
        return Ok(Calc::Num(v));
    }
    match e {
        Expr::Nested(x) => calc(x, top, val_of),
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => Ok(Calc::Neg(Box::new(calc(expr, false, val_of)?))),
        Expr::BinaryOp { left, op, right } => {
            let op = match op {
                BinaryOperator::Plus => '+',
                BinaryOperator::Minus => '-',
                BinaryOperator::Multiply => '*',
                BinaryOperator::Divide if top => '/',
                _ => return Err(no()),
            };
            Ok(Calc::Bin(
                op,
                Box::new(calc(left, false, val_of)?),
                Box::new(calc(right, false, val_of)?),
            ))
        }
        _ => match aggregate(e)? {
            Some(c)
                if matches!(
                    c.kind,
                    AggKind::Count | AggKind::Sum | AggKind::Min | AggKind::Max
                ) =>
            {
                Ok(Calc::Agg(c))
            }
            _ => Err(no()),
        },
    }
}

/// An aggregate call: its function and argument (SQL text without
/// values; None for `*`, or an argument with values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggCall {
    pub kind: AggKind,
    pub arg: Option<String>,
    pub star: bool,
}

impl AggCall {
    /// The call as SQL, selected again as a hidden column (None: its
    /// argument has values).
    pub fn sql(&self) -> Option<String> {
        let arg = match (&self.arg, self.star) {
            (_, true) => "*",
            (Some(a), _) => a.as_str(),
            (None, false) => return None,
        };
        Some(match self.kind {
            AggKind::CountDistinct => format!("COUNT(DISTINCT {arg})"),
            AggKind::SumDistinct => format!("SUM(DISTINCT {arg})"),
            k => format!("{}({arg})", k.name()),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Having {
    None,
    /// No aggregate in it: each group's server applies it as written.
    Pushed,
    /// Evaluated by the merge on the combined aggregates.
    Eval(HavingCond),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HavingCond {
    Cmp(AggCall, CmpOp, Val),
    IsNull(AggCall, bool),
    And(Box<HavingCond>, Box<HavingCond>),
    Or(Box<HavingCond>, Box<HavingCond>),
    Not(Box<HavingCond>),
}

/// An ORDER BY item of a grouped select.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderRef {
    /// A select-list item, by index (an alias, a position resolved, or the
    /// same expression).
    Item(usize),
    /// A select-list position, a value.
    Position(Val),
    /// Another expression: it must be a group key.
    Expr(String),
    /// An aggregate the select list does not have.
    Agg(AggCall),
}

/// The grouping of a top-level SELECT (None: it has no GROUP BY,
/// DISTINCT or aggregate, and its rows concatenate), or why its groups
/// cannot be merged.
pub fn grouping(
    sel: &Select,
    order_by: Option<&OrderBy>,
    val_of: fn(&Expr) -> Option<Val>,
) -> Option<Result<Grouping, String>> {
    let group_by = match &sel.group_by {
        GroupByExpr::Expressions(e, mods) => {
            if !mods.is_empty() {
                return Some(Err("GROUP BY ... WITH ROLLUP".into()));
            }
            e.as_slice()
        }
        GroupByExpr::All(_) => return Some(Err("GROUP BY ALL".into())),
    };
    let distinct = match &sel.distinct {
        None => false,
        Some(Distinct::Distinct) => true,
        Some(Distinct::On(_)) => return Some(Err("DISTINCT ON".into())),
    };
    let aggregated = sel.projection.iter().any(|p| match p {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => has_aggregate(e),
        _ => false,
    }) || sel.having.as_ref().is_some_and(has_aggregate);
    if group_by.is_empty() && !distinct && !aggregated && sel.having.is_none() {
        return None;
    }
    Some(read(sel, group_by, distinct, order_by, val_of))
}

fn read(
    sel: &Select,
    group_by: &[Expr],
    distinct: bool,
    order_by: Option<&OrderBy>,
    val_of: fn(&Expr) -> Option<Val>,
) -> Result<Grouping, String> {
    let mut items = Vec::with_capacity(sel.projection.len());
    let mut aliases = Vec::with_capacity(sel.projection.len());
    for p in &sel.projection {
        let (e, alias) = match p {
            SelectItem::UnnamedExpr(e) => (e, None),
            SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.value.clone())),
            _ => return Err("a wildcard in the select list of a grouped or DISTINCT read".into()),
        };
        aliases.push(alias);
        items.push(match aggregate(e)? {
            Some(call) => Item::Agg(call),
            None if has_aggregate(e) => Item::Calc(calc(e, true, val_of)?),
            None => Item::Any(plain(e)),
        });
    }
    let text_of_item = |i: usize| match &items[i] {
        Item::Any(t) => t.clone(),
        _ => None,
    };
    let alias_item = |name: &str| {
        aliases
            .iter()
            .position(|a| a.as_deref().is_some_and(|a| a.eq_ignore_ascii_case(name)))
    };
    let has_aggs = items.iter().any(|i| !matches!(i, Item::Any(_)));
    let mut keys = Vec::new();
    let implicit = group_by.is_empty();
    if implicit && distinct && !has_aggs {
        // SELECT DISTINCT a, b: grouped by its whole select list.
        for i in 0..items.len() {
            match text_of_item(i) {
                Some(t) => keys.push(Key::Expr(t)),
                None => return Err("a DISTINCT select list with values".into()),
            }
        }
    } else if !implicit && distinct {
        return Err("DISTINCT together with GROUP BY".into());
    }
    let implicit = implicit && keys.is_empty();
    let mut alias_keys = Vec::new();
    for e in group_by {
        if let Some(v) = val_of(e) {
            keys.push(Key::Position(v));
            continue;
        }
        if let Expr::Identifier(id) = e {
            if let Some(t) = alias_item(&id.value).and_then(text_of_item) {
                if !t.eq_ignore_ascii_case(&id.value) {
                    alias_keys.push(id.value.clone());
                }
                keys.push(Key::Expr(t));
                continue;
            }
        }
        match plain(e) {
            Some(t) => keys.push(Key::Expr(t)),
            None => return Err("a GROUP BY expression with values".into()),
        }
    }
    // HAVING resolves a name in the select list first, unless GROUP BY
    // names the same column (then the column wins, as in the server): a
    // HAVING on an aggregate's alias is an aggregate condition, which each
    // group alone cannot decide.
    let grouped_names: Vec<&str> = group_by
        .iter()
        .filter_map(|e| match e {
            Expr::Identifier(id) => Some(id.value.as_str()),
            _ => None,
        })
        .collect();
    let having_aliases: Vec<Option<String>> = aliases
        .iter()
        .map(|a| {
            a.clone()
                .filter(|a| !grouped_names.iter().any(|g| g.eq_ignore_ascii_case(a)))
        })
        .collect();
    let aggregate_alias = |h: &Expr| {
        names_in(h).iter().any(|n| {
            having_aliases.iter().zip(&items).any(|(a, i)| {
                !matches!(i, Item::Any(_))
                    && a.as_deref().is_some_and(|a| a.eq_ignore_ascii_case(n))
            })
        })
    };
    let having = match &sel.having {
        None => Having::None,
        Some(h) if !has_aggregate(h) && !aggregate_alias(h) => Having::Pushed,
        Some(h) => Having::Eval(having_cond(h, &items, &having_aliases, val_of)?),
    };
    let mut order = Vec::new();
    if let Some(o) = order_by {
        let OrderByKind::Expressions(list) = &o.kind else {
            return Err("ORDER BY ALL".into());
        };
        for it in list {
            if it.options.nulls_first.is_some() {
                return Err("NULLS FIRST / LAST".into());
            }
            let desc = it.options.asc == Some(false);
            let r = if let Some(v) = val_of(&it.expr) {
                OrderRef::Position(v)
            } else if let Some(i) = match &it.expr {
                Expr::Identifier(id) => alias_item(&id.value),
                _ => None,
            } {
                OrderRef::Item(i)
            } else if let Some(call) = aggregate(&it.expr)? {
                match items.iter().position(|i| *i == Item::Agg(call.clone())) {
                    Some(i) => OrderRef::Item(i),
                    None => OrderRef::Agg(call),
                }
            } else if has_aggregate(&it.expr) {
                return Err(format!(
                    "ORDER BY an expression over aggregates ({}) other than by its select-list position or alias",
                    shown(&it.expr)
                ));
            } else {
                match plain(&it.expr) {
                    Some(t) => OrderRef::Expr(t),
                    None => return Err("an ORDER BY expression with values".into()),
                }
            };
            order.push((r, desc));
        }
    }
    Ok(Grouping {
        alias_keys,
        keys,
        implicit,
        items,
        having,
        order,
    })
}

/// An expression's text for a message: the shape's placeholders shown
/// as `?`.
fn shown(e: &Expr) -> String {
    let t = e.to_string();
    let mut out = String::with_capacity(t.len());
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            while chars.peek().is_some_and(char::is_ascii_digit) {
                chars.next();
            }
            out.push('?');
        } else {
            out.push(c);
        }
    }
    out
}

/// The expression's text when it has no values (the shape's `$n`).
fn plain(e: &Expr) -> Option<String> {
    let t = e.to_string();
    (!t.contains('$') && !t.contains('?') && !t.to_ascii_lowercase().contains("select"))
        .then_some(t)
}

/// The unqualified names an expression uses as columns (not functions,
/// not the parts of `t.c`).
fn names_in(e: &Expr) -> Vec<String> {
    use sextant_sql::{Lexer, TokenKind};
    let t = e.to_string();
    let toks: Vec<_> = Lexer::new(t.as_bytes()).collect();
    let mut out = Vec::new();
    for (i, tok) in toks.iter().enumerate() {
        if !matches!(tok.kind, TokenKind::Word | TokenKind::QuotedIdent) {
            continue;
        }
        let dotted = |j: Option<usize>| {
            j.and_then(|j| toks.get(j))
                .is_some_and(|x| x.is_punct(b'.'))
        };
        let call = toks.get(i + 1).is_some_and(|x| x.is_punct(b'('));
        if call || dotted(i.checked_sub(1)) || dotted(Some(i + 1)) {
            continue;
        }
        out.push(String::from_utf8_lossy(tok.text).into_owned());
    }
    out
}

/// Calls an aggregate function somewhere.
pub fn has_aggregate(e: &Expr) -> bool {
    let t = e.to_string().to_ascii_lowercase();
    let b = t.as_bytes();
    AGGREGATES.iter().any(|name| {
        t.match_indices(name).any(|(at, _)| {
            let before = at.checked_sub(1).map(|i| b[i]);
            let word_start = !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_');
            let rest = t[at + name.len()..].trim_start();
            word_start && rest.starts_with('(')
        })
    })
}

/// The expression as an aggregate sextant combines (None: not an
/// aggregate call), or why an aggregate call is not combined.
fn aggregate(e: &Expr) -> Result<Option<AggCall>, String> {
    let e = match e {
        Expr::Nested(inner) => inner,
        e => e,
    };
    let Expr::Function(f) = e else {
        return Ok(None);
    };
    let name = f
        .name
        .0
        .last()
        .and_then(|p| p.as_ident())
        .map(|i| i.value.to_ascii_lowercase())
        .unwrap_or_default();
    if !AGGREGATES.contains(&name.as_str()) {
        return Ok(None);
    }
    let FunctionArguments::List(args) = &f.args else {
        return Err(format!(
            "{}: an aggregate form sextant does not merge",
            shown(e)
        ));
    };
    if f.over.is_some() || f.filter.is_some() || !args.clauses.is_empty() || args.args.len() != 1 {
        return Err(format!(
            "{}: an aggregate form sextant does not merge",
            shown(e)
        ));
    }
    let distinct = matches!(args.duplicate_treatment, Some(DuplicateTreatment::Distinct));
    let (arg, star) = match &args.args[0] {
        FunctionArg::Unnamed(FunctionArgExpr::Wildcard) => (None, true),
        FunctionArg::Unnamed(FunctionArgExpr::Expr(a)) => {
            if has_aggregate(a) {
                return Err(format!("{}: an aggregate of an aggregate", shown(e)));
            }
            (plain(a), false)
        }
        _ => {
            return Err(format!(
                "{}: an aggregate form sextant does not merge",
                shown(e)
            ))
        }
    };
    let kind = match (name.as_str(), distinct) {
        ("count", false) => AggKind::Count,
        ("count", true) => AggKind::CountDistinct,
        ("sum", false) => AggKind::Sum,
        ("sum", true) => AggKind::SumDistinct,
        ("min", _) => AggKind::Min,
        ("max", _) => AggKind::Max,
        ("avg", false) => AggKind::Avg,
        _ => {
            return Err(format!(
                "{}{} over several groups: sextant merges COUNT, SUM, MIN, MAX, AVG, COUNT(DISTINCT) and SUM(DISTINCT)",
                name.to_ascii_uppercase(),
                if distinct { "(DISTINCT)" } else { "" }
            ))
        }
    };
    if star && kind != AggKind::Count {
        return Err(format!(
            "{}: an aggregate form sextant does not merge",
            shown(e)
        ));
    }
    Ok(Some(AggCall { kind, arg, star }))
}

fn having_cond(
    e: &Expr,
    items: &[Item],
    aliases: &[Option<String>],
    val_of: fn(&Expr) -> Option<Val>,
) -> Result<HavingCond, String> {
    let refused = || {
        format!(
            "a HAVING condition sextant does not evaluate ({}): aggregates compared with integers, with AND, OR, NOT, BETWEEN and IS NULL, are",
            shown(e)
        )
    };
    // An aggregate, or the alias of one in the select list.
    let agg = |x: &Expr| -> Result<Option<AggCall>, String> {
        if let Expr::Identifier(id) = x {
            let i = aliases.iter().position(|a| {
                a.as_deref()
                    .is_some_and(|a| a.eq_ignore_ascii_case(&id.value))
            });
            match i.map(|i| &items[i]) {
                Some(Item::Agg(c)) => return Ok(Some(c.clone())),
                Some(Item::Calc(_)) => {
                    return Err(format!(
                        "a HAVING condition on {}, the alias of an expression over aggregates: write the condition on the aggregates themselves",
                        id.value
                    ))
                }
                _ => {}
            }
        }
        aggregate(x)
    };
    let number = |x: &Expr| match val_of(x) {
        Some(v @ (Val::Slot(_) | Val::Neg(_) | Val::Lit(Lit::Int(_)))) => Some(v),
        _ => None,
    };
    Ok(match e {
        Expr::Nested(x) => having_cond(x, items, aliases, val_of)?,
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr,
        } => HavingCond::Not(Box::new(having_cond(expr, items, aliases, val_of)?)),
        Expr::IsNull(x) | Expr::IsNotNull(x) => {
            let call = agg(x)?.ok_or_else(refused)?;
            HavingCond::IsNull(call, matches!(e, Expr::IsNull(_)))
        }
        Expr::Between {
            expr,
            negated,
            low,
            high,
        } => {
            let call = agg(expr)?.ok_or_else(refused)?;
            let (lo, hi) = (
                number(low).ok_or_else(refused)?,
                number(high).ok_or_else(refused)?,
            );
            let c = HavingCond::And(
                Box::new(HavingCond::Cmp(call.clone(), CmpOp::Ge, lo)),
                Box::new(HavingCond::Cmp(call, CmpOp::Le, hi)),
            );
            match negated {
                true => HavingCond::Not(Box::new(c)),
                false => c,
            }
        }
        Expr::BinaryOp { left, op, right } => match op {
            BinaryOperator::And => HavingCond::And(
                Box::new(having_cond(left, items, aliases, val_of)?),
                Box::new(having_cond(right, items, aliases, val_of)?),
            ),
            BinaryOperator::Or => HavingCond::Or(
                Box::new(having_cond(left, items, aliases, val_of)?),
                Box::new(having_cond(right, items, aliases, val_of)?),
            ),
            _ => {
                let op = match op {
                    BinaryOperator::Eq => CmpOp::Eq,
                    BinaryOperator::NotEq => CmpOp::Ne,
                    BinaryOperator::Lt => CmpOp::Lt,
                    BinaryOperator::LtEq => CmpOp::Le,
                    BinaryOperator::Gt => CmpOp::Gt,
                    BinaryOperator::GtEq => CmpOp::Ge,
                    _ => return Err(refused()),
                };
                match (agg(left)?, number(right), agg(right)?, number(left)) {
                    (Some(call), Some(v), _, _) => HavingCond::Cmp(call, op, v),
                    // `5 < COUNT(*)`: the same as `COUNT(*) > 5`.
                    (_, _, Some(call), Some(v)) => {
                        let flipped = match op {
                            CmpOp::Lt => CmpOp::Gt,
                            CmpOp::Le => CmpOp::Ge,
                            CmpOp::Gt => CmpOp::Lt,
                            CmpOp::Ge => CmpOp::Le,
                            o => o,
                        };
                        HavingCond::Cmp(call, flipped, v)
                    }
                    _ => return Err(refused()),
                }
            }
        },
        _ => return Err(refused()),
    })
}
