//! How the rows of several groups are merged: grouped reads, their
//! calculations, HAVING, and the SQL each group runs.

use super::keys::key_columns;
use super::{MergePlan, Rewrite};
use crate::analyze::GroupSet;
use crate::fingerprint::Val;
use crate::grouping::{AggCall, Grouping, Having, HavingCond, Item, Key, OrderRef};
use crate::merge::{AggCols, AggKind, Calc, Cond, GroupPlan, Out, SortKey};
use sextant_sql::{LexMode, Lexer};

/// The merge of a grouped read: the columns each group adds (its keys
/// with their weights, the parts of AVG, the weights of MIN and MAX, the
/// aggregates HAVING and ORDER BY need), the clauses it runs with (GROUP BY
/// the keys, sorted by them, ORDER BY's keys first), and how sextant
/// combines, filters, sorts and cuts the groups' rows.
pub(super) fn grouped_plan(
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

pub(super) fn calc_plan(
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

pub(super) fn having_plan(
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
pub(super) struct Clauses {
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

pub(super) fn clauses(sql: &[u8], mode: LexMode) -> Result<Clauses, &'static str> {
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
