//! Merging several groups' result rows into the one result the statement
//! would have had on one server: values compared as the server compares
//! them (numbers exactly, strings by their collation weights), and the
//! per-group partial results of GROUP BY queries combined (COUNT and SUM
//! added exactly, MIN and MAX picked, AVG from SUM and COUNT, DISTINCT
//! aggregates from the distinct values), HAVING applied to the combined
//! values. Pure: rows in, rows out; the proxy does the reading and
//! writing.

mod plan;
mod values;

pub use plan::{AggCols, AggKind, Calc, CmpOp, Cond, GroupPlan, Out, SortKey};
pub use values::{
    cells, compare, compare_at, decimal_add, decimal_cmp, decimal_div, pad_compare, Column, Row,
    ValueKind,
};
use values::{decimal_format, decimal_parse, weight_compare};

use sextant_protocol::codec::write_lenenc_bytes;
use std::cmp::Ordering;

/// A merged group, ready to send: its row, and what it sorts by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub row: Vec<u8>,
    sort: Vec<SortVal>,
}

impl Group {
    /// Bytes held, for a bound on buffered groups: the heap blocks and the
    /// group's place in a growing list (which may be twice its length).
    pub fn size(&self) -> usize {
        let vec = |v: &Vec<u8>| v.capacity().max(16) + 16;
        2 * std::mem::size_of::<Group>()
            + vec(&self.row)
            + self.sort.capacity() * std::mem::size_of::<SortVal>()
            + self
                .sort
                .iter()
                .map(|s| {
                    s.value.as_ref().map_or(0, vec)
                        + s.weights.as_ref().map_or(0, |(a, b)| vec(a) + vec(b))
                })
                .sum::<usize>()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct SortVal {
    kind: ValueKind,
    desc: bool,
    value: Option<Vec<u8>>,
    weights: Option<(Vec<u8>, Vec<u8>)>,
}

/// Sorts merged groups by the plan's ORDER BY (stable: equal groups keep
/// the keys' order).
pub fn sort_groups(groups: &mut [Group]) {
    groups.sort_by(|a, b| {
        for (x, y) in a.sort.iter().zip(&b.sort) {
            let o = match (x.kind, &x.weights, &y.weights) {
                (ValueKind::Weight, Some((wa, pa)), Some((wb, _))) => match (&x.value, &y.value) {
                    (None, None) => Ordering::Equal,
                    (None, _) => Ordering::Less,
                    (_, None) => Ordering::Greater,
                    _ => weight_compare(wa, pa, wb),
                },
                (k, _, _) => compare(k, x.value.as_deref(), y.value.as_deref()),
            };
            let o = if x.desc { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    });
}

/// One aggregate's running value over a group's rows.
#[derive(Debug, Clone)]
enum Acc {
    /// COUNT, SUM, SUM(DISTINCT), AVG's sum: None until a value.
    Sum(Option<Vec<u8>>),
    /// MIN / MAX: the row holding the pick so far.
    Pick(Option<Row>),
    Avg(Option<Vec<u8>>, Vec<u8>),
    Distinct(u64),
}

/// Combines rows sorted by the plan's keys into groups.
pub struct Grouper<'p> {
    plan: &'p GroupPlan,
    kinds: Vec<Option<ValueKind>>,
    decimals: Vec<u8>,
    /// The current group's first row (its keys, its other columns) and
    /// last row (for a new distinct value).
    first: Option<Row>,
    last: Option<Row>,
    accs: Vec<Acc>,
    emitted: bool,
}

fn fail<T>(why: String) -> Result<T, String> {
    Err(why)
}

impl<'p> Grouper<'p> {
    /// Checks that every column the plan combines or compares can be
    /// merged exactly, from the groups' column definitions.
    pub fn new(plan: &'p GroupPlan, columns: &[Column]) -> Result<Grouper<'p>, String> {
        if columns.len() != plan.columns {
            return fail(format!(
                "the groups answered {} columns where the merge expected {}",
                columns.len(),
                plan.columns
            ));
        }
        let kind = |i: usize| -> Result<ValueKind, String> { columns[i].kind.clone() };
        for (k, _) in &plan.keys {
            kind(*k).map_err(|why| format!("a read over several groups grouped by {why}"))?;
        }
        for a in &plan.aggs {
            let name = a.kind.name();
            let ok = match a.kind {
                AggKind::Count => kind(a.value)? == ValueKind::Int,
                // Floating-point sums would round as sextant adds, not
                // as the server does.
                AggKind::Sum => kind(a.value)?.numeric(),
                AggKind::Avg => kind(a.value)?.numeric() && kind(a.def)? == ValueKind::Decimal,
                AggKind::Min | AggKind::Max => match kind(a.value) {
                    Ok(ValueKind::Weight) => a.weights.is_some(),
                    Ok(_) => true,
                    Err(_) => false,
                },
                AggKind::CountDistinct => true,
                AggKind::SumDistinct => plan
                    .keys
                    .last()
                    .is_some_and(|(k, _)| kind(*k).is_ok_and(|k| k.numeric())),
            };
            if !ok {
                return fail(format!(
                    "{name} of this column's type over several groups is not merged (COUNT; SUM and AVG of integers and DECIMALs; MIN and MAX of numbers, dates and plain column strings are)"
                ));
            }
        }
        let mut in_having = Vec::new();
        if let Some(h) = &plan.having {
            h.aggs(&mut in_having);
        }
        for a in in_having {
            let k = match plan.aggs[a].kind {
                AggKind::Count | AggKind::CountDistinct => ValueKind::Int,
                AggKind::Avg => ValueKind::Decimal,
                _ => kind(plan.aggs[a].value)?,
            };
            if !k.numeric() {
                return fail(format!(
                    "a HAVING condition on {} of a non-integer, non-DECIMAL column over several groups is not evaluated by sextant",
                    plan.aggs[a].kind.name()
                ));
            }
        }
        for (c, def) in &plan.calcs {
            let mut used = Vec::new();
            c.aggs(&mut used);
            let numeric = used.iter().all(|a| {
                let a = &plan.aggs[*a];
                match a.kind {
                    AggKind::Count => true,
                    AggKind::Sum | AggKind::Min | AggKind::Max => {
                        kind(a.value).is_ok_and(ValueKind::numeric)
                    }
                    _ => false,
                }
            });
            if !numeric || !kind(*def).is_ok_and(ValueKind::numeric) {
                return fail(
                    "an expression over aggregates of other than integers and DECIMALs, or whose result is not one, over several groups is not computed by sextant".into(),
                );
            }
        }
        let accs = Self::fresh(plan);
        Ok(Grouper {
            plan,
            kinds: columns.iter().map(|c| c.kind.clone().ok()).collect(),
            decimals: columns.iter().map(|c| c.decimals).collect(),
            first: None,
            last: None,
            accs,
            emitted: false,
        })
    }

    fn fresh(plan: &GroupPlan) -> Vec<Acc> {
        plan.aggs
            .iter()
            .map(|a| match a.kind {
                AggKind::Count => Acc::Sum(Some(b"0".to_vec())),
                AggKind::Sum | AggKind::SumDistinct => Acc::Sum(None),
                AggKind::Min | AggKind::Max => Acc::Pick(None),
                AggKind::Avg => Acc::Avg(None, b"0".to_vec()),
                AggKind::CountDistinct => Acc::Distinct(0),
            })
            .collect()
    }

    fn kind(&self, col: usize) -> ValueKind {
        self.kinds
            .get(col)
            .copied()
            .flatten()
            .unwrap_or(ValueKind::Bytes)
    }

    /// Compares two rows by the plan's keys (the sort the groups' rows
    /// come in).
    pub fn order(&self, a: &Row, b: &Row) -> Ordering {
        for (k, desc) in &self.plan.keys {
            let o = compare_at(self.kind(*k), a, b, *k);
            let o = if *desc { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    }

    fn same_group(&self, a: &Row, b: &Row) -> bool {
        self.plan
            .group_keys()
            .iter()
            .all(|(k, _)| compare_at(self.kind(*k), a, b, *k) == Ordering::Equal)
    }

    /// Takes the next row (in key order); returns the group it closed,
    /// when it starts another (None also when HAVING drops the group).
    pub fn push(&mut self, row: Row) -> Result<Option<Group>, String> {
        let mut done = None;
        let new_distinct = match &self.last {
            Some(prev) if self.same_group(prev, &row) => match self.plan.keys.last() {
                // Rows of one group come sorted by the distinct value too:
                // a new value differs from the previous row's.
                Some((d, _)) if self.plan.distinct => {
                    compare_at(self.kind(*d), prev, &row, *d) != Ordering::Equal
                }
                _ => false,
            },
            Some(_) => {
                done = self.close()?;
                true
            }
            None => true,
        };
        self.add(&row, new_distinct)?;
        if self.first.is_none() {
            self.first = Some(row.clone());
        }
        self.last = Some(row);
        Ok(done)
    }

    /// The last group, after the last row; with no GROUP BY, the one row
    /// of no rows.
    pub fn finish(&mut self) -> Result<Option<Group>, String> {
        if self.last.is_some() {
            return self.close();
        }
        match self.plan.implicit && !self.emitted {
            true => {
                self.emitted = true;
                self.group(None)
            }
            false => Ok(None),
        }
    }

    fn add(&mut self, row: &Row, new_distinct: bool) -> Result<(), String> {
        let too_big = || "a SUM beyond 38 digits over several groups".to_string();
        for (i, a) in self.plan.aggs.iter().enumerate() {
            match (&mut self.accs[i], a.kind) {
                (Acc::Sum(acc), AggKind::Count | AggKind::Sum) => {
                    if let Some(v) = row.cell(a.value) {
                        *acc = Some(match acc.take() {
                            None => v.to_vec(),
                            Some(x) => decimal_add(&x, v).ok_or_else(too_big)?,
                        });
                    }
                }
                (Acc::Sum(acc), AggKind::SumDistinct) => {
                    let d = self.plan.keys.last().map_or(0, |k| k.0);
                    if let (true, Some(v)) = (new_distinct, row.cell(d)) {
                        *acc = Some(match acc.take() {
                            None => v.to_vec(),
                            Some(x) => decimal_add(&x, v).ok_or_else(too_big)?,
                        });
                    }
                }
                (Acc::Distinct(n), _) => {
                    let d = self.plan.keys.last().map_or(0, |k| k.0);
                    if new_distinct && row.cell(d).is_some() {
                        *n += 1;
                    }
                }
                (Acc::Avg(sum, count), _) => {
                    if let Some(v) = row.cell(a.value) {
                        *sum = Some(match sum.take() {
                            None => v.to_vec(),
                            Some(x) => decimal_add(&x, v).ok_or_else(too_big)?,
                        });
                    }
                    if let Some(c) = row.cell(a.count) {
                        *count = decimal_add(count, c).ok_or_else(too_big)?;
                    }
                }
                (Acc::Pick(pick), kind) => {
                    if row.cell(a.value).is_none() {
                        continue;
                    }
                    let better = match pick {
                        None => true,
                        Some(p) => {
                            let k = self
                                .kinds
                                .get(a.value)
                                .copied()
                                .flatten()
                                .unwrap_or(ValueKind::Bytes);
                            let o = match (k, a.weights) {
                                (ValueKind::Weight, Some(w)) => weight_compare(
                                    row.cell(w).unwrap_or_default(),
                                    row.cell(w + 1).unwrap_or_default(),
                                    p.cell(w).unwrap_or_default(),
                                ),
                                (k, _) => compare(k, row.cell(a.value), p.cell(a.value)),
                            };
                            match kind {
                                AggKind::Min => o == Ordering::Less,
                                _ => o == Ordering::Greater,
                            }
                        }
                    };
                    if better {
                        *pick = Some(row.clone());
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Ends the current group: its row, unless HAVING drops it.
    fn close(&mut self) -> Result<Option<Group>, String> {
        let first = self.first.take();
        self.last = None;
        self.emitted = true;
        let g = self.group(first.as_ref());
        self.accs = Self::fresh(self.plan);
        g
    }

    /// An aggregate's final value.
    fn value(&self, i: usize) -> Result<Option<Vec<u8>>, String> {
        let a = &self.plan.aggs[i];
        Ok(match &self.accs[i] {
            Acc::Sum(v) => v.clone(),
            Acc::Distinct(n) => Some(n.to_string().into_bytes()),
            Acc::Pick(p) => p.as_ref().and_then(|r| r.cell(a.value)).map(<[u8]>::to_vec),
            Acc::Avg(None, _) => None,
            Acc::Avg(Some(sum), count) => {
                let scale = self.decimals.get(a.def).copied().unwrap_or(0) as u32;
                Some(
                    decimal_div(sum, count, scale)
                        .ok_or_else(|| "an AVG beyond 38 digits over several groups".to_string())?,
                )
            }
        })
    }

    /// An expression over aggregates, exactly: NULL when an operand is,
    /// or when it divides by zero.
    fn calc(&self, c: &Calc) -> Result<Option<(i128, u32)>, String> {
        let big = || "an expression over aggregates beyond 38 digits".to_string();
        let align = |x: (i128, u32), y: (i128, u32)| -> Option<(i128, i128, u32)> {
            let s = x.1.max(y.1);
            Some((
                x.0.checked_mul(10i128.checked_pow(s - x.1)?)?,
                y.0.checked_mul(10i128.checked_pow(s - y.1)?)?,
                s,
            ))
        };
        Ok(match c {
            Calc::Agg(a) => match self.value(*a)? {
                None => None,
                Some(v) => Some(
                    decimal_parse(&v).ok_or_else(|| "a value that is not a number".to_string())?,
                ),
            },
            Calc::Num(t) => {
                Some(decimal_parse(t).ok_or_else(|| "a value that is not a number".to_string())?)
            }
            Calc::Neg(x) => self.calc(x)?.map(|(m, s)| (-m, s)),
            Calc::Bin(op, x, y) => {
                let (Some(x), Some(y)) = (self.calc(x)?, self.calc(y)?) else {
                    return Ok(None);
                };
                match op {
                    '+' | '-' => {
                        let (a, b, s) = align(x, y).ok_or_else(big)?;
                        let m = match op {
                            '+' => a.checked_add(b),
                            _ => a.checked_sub(b),
                        };
                        Some((m.ok_or_else(big)?, s))
                    }
                    '*' => Some((x.0.checked_mul(y.0).ok_or_else(big)?, x.1 + y.1)),
                    // A quotient is made at the top only (see `calc_value`).
                    _ => return Err("a division inside an expression over aggregates".into()),
                }
            }
        })
    }

    /// An expression's value written with `scale` digits after the point.
    fn calc_value(&self, c: &Calc, scale: u32) -> Result<Option<Vec<u8>>, String> {
        let big = || "an expression over aggregates beyond 38 digits".to_string();
        let pow = |e: u32| 10i128.checked_pow(e).ok_or_else(big);
        let (num, den) = match c {
            Calc::Bin('/', x, y) => {
                let (Some(x), Some(y)) = (self.calc(x)?, self.calc(y)?) else {
                    return Ok(None);
                };
                if y.0 == 0 {
                    return Ok(None);
                }
                // x / y at `scale` digits: x.m * 10^(y.s + scale) / (y.m * 10^x.s).
                (
                    x.0.checked_mul(pow(y.1 + scale)?).ok_or_else(big)?,
                    y.0.checked_mul(pow(x.1)?).ok_or_else(big)?,
                )
            }
            c => match self.calc(c)? {
                None => return Ok(None),
                Some((m, s)) if s <= scale => (m.checked_mul(pow(scale - s)?).ok_or_else(big)?, 1),
                Some((m, s)) => (m, pow(s - scale)?),
            },
        };
        let (q, r) = (num / den, num % den);
        let q = match r.unsigned_abs().checked_mul(2).ok_or_else(big)? >= den.unsigned_abs() {
            true => q + (num.signum() * den.signum()),
            false => q,
        };
        Ok(Some(decimal_format(q, scale)))
    }

    fn value_kind(&self, i: usize) -> ValueKind {
        let a = &self.plan.aggs[i];
        match a.kind {
            AggKind::Count | AggKind::CountDistinct => ValueKind::Int,
            AggKind::Avg => ValueKind::Decimal,
            AggKind::SumDistinct => self.kind(self.plan.keys.last().map_or(0, |k| k.0)),
            _ => self.kind(a.value),
        }
    }

    fn holds(&self, c: &Cond) -> Result<Option<bool>, String> {
        Ok(match c {
            Cond::Cmp(a, op, lit) => self.value(*a)?.map(|v| {
                let o = compare(self.value_kind(*a), Some(&v), Some(lit));
                match op {
                    CmpOp::Eq => o == Ordering::Equal,
                    CmpOp::Ne => o != Ordering::Equal,
                    CmpOp::Lt => o == Ordering::Less,
                    CmpOp::Le => o != Ordering::Greater,
                    CmpOp::Gt => o == Ordering::Greater,
                    CmpOp::Ge => o != Ordering::Less,
                }
            }),
            Cond::IsNull(a, yes) => Some(self.value(*a)?.is_none() == *yes),
            Cond::Not(x) => self.holds(x)?.map(|b| !b),
            Cond::And(x, y) => match (self.holds(x)?, self.holds(y)?) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            },
            Cond::Or(x, y) => match (self.holds(x)?, self.holds(y)?) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            },
        })
    }

    fn group(&self, first: Option<&Row>) -> Result<Option<Group>, String> {
        if let Some(h) = &self.plan.having {
            if self.holds(h)? != Some(true) {
                return Ok(None);
            }
        }
        let mut row = Vec::new();
        for o in &self.plan.outs {
            let v = match o {
                Out::Any(c) => first.and_then(|r| r.cell(*c)).map(<[u8]>::to_vec),
                Out::Agg(a) => self.value(*a)?,
                Out::Calc(c) => {
                    let (calc, def) = &self.plan.calcs[*c];
                    let scale = self.decimals.get(*def).copied().unwrap_or(0) as u32;
                    self.calc_value(calc, scale)?
                }
            };
            match v {
                None => row.push(0xfb),
                Some(v) => write_lenenc_bytes(&mut row, &v),
            }
        }
        let mut sort = Vec::new();
        for (key, desc) in self.plan.order.iter().flatten() {
            let weights = |r: &Row, w: usize| {
                (
                    r.cell(w).unwrap_or_default().to_vec(),
                    r.cell(w + 1).unwrap_or_default().to_vec(),
                )
            };
            sort.push(match key {
                SortKey::Key(k) => {
                    let col = self.plan.keys[*k].0;
                    SortVal {
                        kind: self.kind(col),
                        desc: *desc,
                        value: first.and_then(|r| r.cell(col)).map(<[u8]>::to_vec),
                        weights: first.map(|r| weights(r, col + 1)),
                    }
                }
                SortKey::Calc(c) => {
                    let (calc, def) = &self.plan.calcs[*c];
                    let scale = self.decimals.get(*def).copied().unwrap_or(0) as u32;
                    SortVal {
                        kind: ValueKind::Decimal,
                        desc: *desc,
                        value: self.calc_value(calc, scale)?,
                        weights: None,
                    }
                }
                SortKey::Agg(a) => {
                    let agg = &self.plan.aggs[*a];
                    let weights = match (&self.accs[*a], agg.weights) {
                        (Acc::Pick(Some(r)), Some(w)) => Some(weights(r, w)),
                        _ => None,
                    };
                    SortVal {
                        kind: self.value_kind(*a),
                        desc: *desc,
                        value: self.value(*a)?,
                        weights,
                    }
                }
            });
        }
        Ok(Some(Group { row, sort }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering::*;

    fn row(cells: &[Option<&str>]) -> Row {
        let mut b = Vec::new();
        for c in cells {
            match c {
                None => b.push(0xfb),
                Some(v) => write_lenenc_bytes(&mut b, v.as_bytes()),
            }
        }
        Row::new(b, cells.len()).unwrap()
    }

    fn text(g: &Group, n: usize) -> Vec<Option<String>> {
        let r = Row::new(g.row.clone(), n).unwrap();
        (0..n)
            .map(|i| r.cell(i).map(|v| String::from_utf8_lossy(v).into_owned()))
            .collect()
    }

    fn agg(kind: AggKind, def: usize, value: usize, count: usize) -> AggCols {
        AggCols {
            kind,
            def,
            value,
            count,
            weights: None,
        }
    }

    fn col(kind: ValueKind, decimals: u8) -> Column {
        Column {
            kind: Ok(kind),
            decimals,
        }
    }

    #[test]
    fn decimals_add_divide_and_compare_exactly() {
        let add = |a: &str, b: &str| {
            String::from_utf8(decimal_add(a.as_bytes(), b.as_bytes()).unwrap()).unwrap()
        };
        assert_eq!(add("1.250", "2.5"), "3.750");
        assert_eq!(add("-1.250", "0.250"), "-1.000");
        assert_eq!(add("-0.5", "0.25"), "-0.25");
        assert_eq!(
            add("99999999999999999999999999.999", "0.001"),
            "100000000000000000000000000.000"
        );
        assert!(decimal_add(
            b"99999999999999999999999999999999999999",
            b"99999999999999999999999999999999999999"
        )
        .is_none());
        let div = |a: &str, c: &str, s: u32| {
            String::from_utf8(decimal_div(a.as_bytes(), c.as_bytes(), s).unwrap()).unwrap()
        };
        assert_eq!(div("2", "3", 4), "0.6667");
        assert_eq!(div("-2", "3", 4), "-0.6667");
        assert_eq!(div("1", "3", 4), "0.3333");
        assert_eq!(div("10.50", "4", 6), "2.625000");
        assert_eq!(div("1", "8", 2), "0.13");
        assert!(decimal_div(b"1", b"0", 4).is_none());
        assert_eq!(decimal_cmp("10.5", "9.75"), Greater);
        assert_eq!(decimal_cmp("-10.5", "-9.75"), Less);
        assert_eq!(decimal_cmp("0.10", "0.1"), Equal);
        assert_eq!(decimal_cmp("-0.00", "0"), Equal);
    }

    #[test]
    fn nulls_first_types_and_padding() {
        assert_eq!(compare(ValueKind::Int, None, Some(b"-5")), Less);
        assert_eq!(
            compare(ValueKind::Int, Some(b"18446744073709551615"), Some(b"3")),
            Greater
        );
        assert_eq!(
            compare(ValueKind::Float, Some(b"1e3"), Some(b"999.5")),
            Greater
        );
        assert_eq!(
            compare(ValueKind::Time, Some(b"-01:00:00"), Some(b"00:30:00")),
            Less
        );
        // 'ab' = 'ab  ' (trailing spaces), 'ab' > 'ab\t' (below a space).
        let sp = [0, 0x20];
        assert_eq!(
            pad_compare(&[0, 0x41, 0, 0x42], &[0, 0x41, 0, 0x42, 0, 0x20], &sp),
            Equal
        );
        assert_eq!(
            pad_compare(&[0, 0x41, 0, 0x42], &[0, 0x41, 0, 0x42, 0, 0x09], &sp),
            Greater
        );
        // NO PAD: the third weight column repeats the second, and 'ab'
        // sorts before 'ab '.
        let ab = [0, 0x61, 0, 0x62];
        let ab_sp = [0, 0x61, 0, 0x62, 0, 0x20];
        assert_eq!(weight_compare(&ab, &ab_sp, &ab_sp), Equal);
        assert_eq!(weight_compare(&ab, &ab, &ab_sp), Less);
        let r = row(&[Some("a"), None, Some("bc")]);
        assert_eq!(r.cell(1), None);
        assert_eq!(r.cell(2), Some(&b"bc"[..]));
        assert_eq!(r.visible_end(2), 3);
    }

    /// SELECT name, COUNT(*), AVG(x), MAX(x) ... GROUP BY name: columns
    /// name, count, avg, max | key name + 2 weights | SUM(x), COUNT(x).
    fn plan() -> GroupPlan {
        GroupPlan {
            visible: 4,
            columns: 9,
            keys: vec![(4, false)],
            distinct: false,
            implicit: false,
            outs: vec![Out::Any(0), Out::Agg(0), Out::Agg(1), Out::Agg(2)],
            aggs: vec![
                agg(AggKind::Count, 1, 1, 1),
                agg(AggKind::Avg, 2, 7, 8),
                agg(AggKind::Max, 3, 3, 3),
            ],
            calcs: Vec::new(),
            having: None,
            order: None,
            offset: 0,
            count: None,
        }
    }

    fn columns() -> Vec<Column> {
        vec![
            col(ValueKind::Weight, 0),
            col(ValueKind::Int, 0),
            col(ValueKind::Decimal, 4),
            col(ValueKind::Int, 0),
            col(ValueKind::Weight, 0),
            col(ValueKind::Bytes, 0),
            col(ValueKind::Bytes, 0),
            col(ValueKind::Decimal, 0),
            col(ValueKind::Int, 0),
        ]
    }

    /// A row of one group's answer: name (with a case-insensitive weight),
    /// count, avg, max, sum, count of x.
    fn part(name: Option<&str>, n: &str, max: Option<&str>, sum: Option<&str>, c: &str) -> Row {
        let w = name.map(|s| s.to_ascii_uppercase());
        let pw = w.as_ref().map(|w| format!("{w} "));
        row(&[
            name,
            Some(n),
            Some("9.9999"),
            max,
            name,
            w.as_deref(),
            pw.as_deref(),
            sum,
            Some(c),
        ])
    }

    #[test]
    fn equal_keys_from_several_groups_combine() {
        let p = plan();
        let mut g = Grouper::new(&p, &columns()).unwrap();
        let mut out = Vec::new();
        // Sorted by the key's weight: NULL, 'a' = 'A', 'b'.
        for r in [
            part(None, "1", None, None, "0"),
            part(Some("a"), "2", Some("5"), Some("3"), "2"),
            part(Some("A"), "1", Some("7"), Some("4"), "1"),
            part(Some("b"), "3", Some("1"), Some("1"), "3"),
        ] {
            out.extend(g.push(r).unwrap());
        }
        out.extend(g.finish().unwrap());
        let rows: Vec<_> = out.iter().map(|x| text(x, 4)).collect();
        let s = |v: &str| Some(v.to_string());
        assert_eq!(
            rows,
            vec![
                vec![None, s("1"), None, None],
                // 7 / 3 rounded to 4 digits; the first row's spelling.
                vec![s("a"), s("3"), s("2.3333"), s("7")],
                vec![s("b"), s("3"), s("0.3333"), s("1")],
            ]
        );
    }

    #[test]
    fn having_drops_groups_and_order_sorts_them() {
        let mut p = plan();
        // HAVING COUNT(*) >= 2 ORDER BY MAX(x) DESC
        p.having = Some(Cond::Cmp(0, CmpOp::Ge, b"2".to_vec()));
        p.order = Some(vec![(SortKey::Agg(2), true)]);
        let mut g = Grouper::new(&p, &columns()).unwrap();
        let mut out = Vec::new();
        for r in [
            part(Some("a"), "2", Some("5"), Some("3"), "2"),
            part(Some("b"), "1", Some("9"), Some("9"), "1"),
            part(Some("c"), "4", Some("8"), Some("8"), "4"),
        ] {
            out.extend(g.push(r).unwrap());
        }
        out.extend(g.finish().unwrap());
        sort_groups(&mut out);
        let names: Vec<_> = out.iter().map(|x| text(x, 1)[0].clone().unwrap()).collect();
        assert_eq!(names, vec!["c", "a"]);
    }

    #[test]
    fn distinct_values_count_once_across_groups() {
        // SELECT COUNT(DISTINCT x), COUNT(*): columns count_d, count | key x
        // + 2 weights.
        let p = GroupPlan {
            visible: 2,
            columns: 5,
            keys: vec![(2, false)],
            distinct: true,
            implicit: true,
            outs: vec![Out::Agg(0), Out::Agg(1)],
            aggs: vec![
                agg(AggKind::CountDistinct, 0, 0, 0),
                agg(AggKind::Count, 1, 1, 1),
            ],
            calcs: Vec::new(),
            having: None,
            order: None,
            offset: 0,
            count: None,
        };
        let cols = vec![
            col(ValueKind::Int, 0),
            col(ValueKind::Int, 0),
            col(ValueKind::Int, 0),
            col(ValueKind::Bytes, 0),
            col(ValueKind::Bytes, 0),
        ];
        let mut g = Grouper::new(&p, &cols).unwrap();
        let mut out = Vec::new();
        for (x, n) in [
            (None, "2"),
            (Some("1"), "1"),
            (Some("1"), "3"),
            (Some("4"), "1"),
        ] {
            out.extend(g.push(row(&[Some("1"), Some(n), x, x, x])).unwrap());
        }
        out.extend(g.finish().unwrap());
        assert_eq!(out.len(), 1);
        assert_eq!(
            text(&out[0], 2),
            vec![Some("2".to_string()), Some("7".to_string())]
        );
        // No rows at all: still one row, COUNT 0.
        let mut g = Grouper::new(&p, &cols).unwrap();
        let out = g.finish().unwrap().unwrap();
        assert_eq!(
            text(&out, 2),
            vec![Some("0".to_string()), Some("0".to_string())]
        );
    }

    #[test]
    fn inexact_merges_are_refused() {
        let mut p = plan();
        let mut cols = columns();
        cols[7] = col(ValueKind::Float, 0);
        assert!(Grouper::new(&p, &cols).is_err());
        // MAX of a string without its weights.
        let mut cols = columns();
        cols[3] = col(ValueKind::Weight, 0);
        assert!(Grouper::new(&p, &cols).is_err());
        p.aggs[2].weights = Some(5);
        assert!(Grouper::new(&p, &cols).is_ok());
    }
}
