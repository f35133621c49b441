//! Merging several groups' result rows into the one result the statement
//! would have had on one server: values compared as the server compares
//! them (numbers exactly, strings by their collation weights), and the
//! per-group partial results of GROUP BY queries combined (COUNT and SUM
//! added exactly, MIN and MAX picked, AVG from SUM and COUNT, DISTINCT
//! aggregates from the distinct values), HAVING applied to the combined
//! values. Pure: rows in, rows out; the proxy does the reading and
//! writing.

use sextant_protocol::codec::write_lenenc_bytes;
use std::cmp::Ordering;

/// How values of a column compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    Int,
    Decimal,
    Float,
    /// DATE, DATETIME, TIMESTAMP, YEAR, binary strings: their text sorts
    /// as they do.
    Bytes,
    Time,
    /// Strings in a collation: by their WEIGHT_STRING columns.
    Weight,
}

impl ValueKind {
    /// The kind of a column from its definition's type, flags and
    /// character set, or why its values cannot be merged on.
    pub fn of(ty: u8, flags: u16, charset: u16) -> Result<ValueKind, String> {
        const ENUM: u16 = 0x100;
        const SET: u16 = 0x800;
        if flags & (ENUM | SET) != 0 {
            return Err("an ENUM or SET column (the server orders those by their index)".into());
        }
        Ok(match ty {
            1 | 2 | 3 | 8 | 9 | 13 => ValueKind::Int,
            0 | 246 => ValueKind::Decimal,
            4 | 5 => ValueKind::Float,
            6 | 7 | 10 | 12 | 14 | 16 | 17 | 18 => ValueKind::Bytes,
            11 | 19 => ValueKind::Time,
            _ if charset == 63 => ValueKind::Bytes,
            _ => ValueKind::Weight,
        })
    }

    fn numeric(self) -> bool {
        matches!(self, ValueKind::Int | ValueKind::Decimal)
    }
}

/// What the merge needs to know of one column of the groups' rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub kind: Result<ValueKind, String>,
    /// Digits after the point (of a DECIMAL).
    pub decimals: u8,
}

/// A row of the text protocol with its cells found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub bytes: Vec<u8>,
    cells: Vec<Option<(usize, usize)>>,
}

impl Row {
    /// The row's first `n` cells, or None when it does not read as `n`
    /// text-protocol cells.
    pub fn new(bytes: Vec<u8>, n: usize) -> Option<Row> {
        let cells = cells(&bytes, n)?;
        Some(Row { bytes, cells })
    }

    pub fn cell(&self, i: usize) -> Option<&[u8]> {
        self.cells
            .get(i)
            .copied()
            .flatten()
            .map(|(a, z)| &self.bytes[a..z])
    }

    /// Where the first `n` cells end (the rest are hidden columns).
    pub fn visible_end(&self, n: usize) -> usize {
        match n.checked_sub(1).and_then(|i| self.cells.get(i)) {
            None => 0,
            Some(Some((_, z))) => *z,
            // A NULL is one byte: the next cell's start, less its length
            // prefix, is not known here; count the bytes instead.
            Some(None) => {
                let mut end = 0;
                for c in &self.cells[..n] {
                    end = match c {
                        Some((_, z)) => *z,
                        None => end + 1,
                    };
                }
                end
            }
        }
    }
}

/// Offsets of a text-protocol row's cells (None: NULL).
pub fn cells(row: &[u8], n: usize) -> Option<Vec<Option<(usize, usize)>>> {
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    for _ in 0..n {
        let (len, head) = match *row.get(i)? {
            0xfb => {
                out.push(None);
                i += 1;
                continue;
            }
            b @ 0..=0xfa => (b as usize, 1),
            0xfc => (
                u16::from_le_bytes([*row.get(i + 1)?, *row.get(i + 2)?]) as usize,
                3,
            ),
            0xfd => (
                u32::from_le_bytes([*row.get(i + 1)?, *row.get(i + 2)?, *row.get(i + 3)?, 0])
                    as usize,
                4,
            ),
            0xfe => (
                u64::from_le_bytes(row.get(i + 1..i + 9)?.try_into().ok()?) as usize,
                9,
            ),
            _ => return None,
        };
        let start = i + head;
        let end = start.checked_add(len).filter(|e| *e <= row.len())?;
        out.push(Some((start, end)));
        i = end;
    }
    Some(out)
}

/// Compares one column's values of two rows, ascending, NULL first (as
/// MySQL sorts). `at`: the value's column; for strings its two weight
/// columns follow it.
pub fn compare_at(kind: ValueKind, a: &Row, b: &Row, at: usize) -> Ordering {
    match kind {
        ValueKind::Weight => match (a.cell(at), b.cell(at)) {
            (None, None) => Ordering::Equal,
            (None, _) => Ordering::Less,
            (_, None) => Ordering::Greater,
            _ => weight_compare(
                a.cell(at + 1).unwrap_or_default(),
                a.cell(at + 2).unwrap_or_default(),
                b.cell(at + 1).unwrap_or_default(),
            ),
        },
        k => compare(k, a.cell(at), b.cell(at)),
    }
}

/// Compares two strings' weights (`wa` with `padded`, the weight of `a`
/// with a space appended, which gives a space's weight).
fn weight_compare(wa: &[u8], padded: &[u8], wb: &[u8]) -> Ordering {
    let space = padded.strip_prefix(wa).unwrap_or_default();
    pad_compare(wa, wb, space)
}

/// Compares two values of one kind, ascending, NULL first. Strings
/// (`Weight`) compare here by their bytes: callers with weights use
/// [`compare_at`].
pub fn compare(kind: ValueKind, a: Option<&[u8]>, b: Option<&[u8]>) -> Ordering {
    let (a, b) = match (a, b) {
        (None, None) => return Ordering::Equal,
        (None, _) => return Ordering::Less,
        (_, None) => return Ordering::Greater,
        (Some(a), Some(b)) => (a, b),
    };
    let text = |v: &[u8]| std::str::from_utf8(v).unwrap_or("").trim().to_string();
    match kind {
        ValueKind::Int => {
            let p = |v: &[u8]| text(v).parse::<i128>().unwrap_or(0);
            p(a).cmp(&p(b))
        }
        ValueKind::Float => {
            let p = |v: &[u8]| text(v).parse::<f64>().unwrap_or(0.0);
            p(a).total_cmp(&p(b))
        }
        ValueKind::Decimal => decimal_cmp(&text(a), &text(b)),
        ValueKind::Time => {
            let secs = |v: &[u8]| {
                let t = text(v);
                let (neg, t) = match t.strip_prefix('-') {
                    Some(r) => (true, r.to_string()),
                    None => (false, t),
                };
                let mut parts = t.split(':');
                let h: f64 = parts.next().and_then(|x| x.parse().ok()).unwrap_or(0.0);
                let m: f64 = parts.next().and_then(|x| x.parse().ok()).unwrap_or(0.0);
                let s: f64 = parts.next().and_then(|x| x.parse().ok()).unwrap_or(0.0);
                let v = h * 3600.0 + m * 60.0 + s;
                if neg {
                    -v
                } else {
                    v
                }
            };
            secs(a).total_cmp(&secs(b))
        }
        ValueKind::Bytes | ValueKind::Weight => a.cmp(b),
    }
}

/// Compares collation weights as the server compares strings with PAD
/// SPACE: the shorter as if followed by spaces (`space`: a space's
/// weight).
pub fn pad_compare(a: &[u8], b: &[u8], space: &[u8]) -> Ordering {
    let common = a.len().min(b.len());
    match a[..common].cmp(&b[..common]) {
        Ordering::Equal => {}
        o => return o,
    }
    let (rest, flip) = match a.len().cmp(&b.len()) {
        Ordering::Equal => return Ordering::Equal,
        Ordering::Greater => (&a[common..], false),
        Ordering::Less => (&b[common..], true),
    };
    // The longer one's remainder against spaces.
    let o = if space.is_empty() {
        Ordering::Greater
    } else {
        rest.chunks(space.len())
            .map(|ch| ch.cmp(&space[..ch.len()]))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
    };
    if flip {
        o.reverse()
    } else {
        o
    }
}

/// Exact comparison of two decimal numbers written out (`-12.50`, `3`).
pub fn decimal_cmp(a: &str, b: &str) -> Ordering {
    let split = |s: &str| {
        let (neg, s) = match s.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, s.strip_prefix('+').unwrap_or(s)),
        };
        let (int, frac) = s.split_once('.').unwrap_or((s, ""));
        let int = int.trim_start_matches('0').to_string();
        let frac = frac.trim_end_matches('0').to_string();
        let zero = int.is_empty() && frac.is_empty();
        (neg && !zero, int, frac)
    };
    let (na, ia, fa) = split(a);
    let (nb, ib, fb) = split(b);
    let magnitude = ia
        .len()
        .cmp(&ib.len())
        .then_with(|| ia.cmp(&ib))
        .then_with(|| fa.cmp(&fb));
    match (na, nb) {
        (false, false) => magnitude,
        (true, true) => magnitude.reverse(),
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
    }
}

/// A decimal number written out, as an integer and its scale.
fn decimal_parse(v: &[u8]) -> Option<(i128, u32)> {
    let t = std::str::from_utf8(v).ok()?.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t),
    };
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = format!("{int}{frac}");
    let m: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    Some((if neg { -m } else { m }, frac.len() as u32))
}

fn decimal_format(m: i128, scale: u32) -> Vec<u8> {
    let digits = m.unsigned_abs().to_string();
    let scale = scale as usize;
    let digits = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = digits.split_at(digits.len() - scale);
    let mut out = String::new();
    if m < 0 {
        out.push('-');
    }
    out.push_str(int);
    if scale > 0 {
        out.push('.');
        out.push_str(frac);
    }
    out.into_bytes()
}

/// The exact sum of two decimal numbers written out (`-12.50`, `3`), in
/// the larger scale of the two; None beyond 38 digits.
pub fn decimal_add(a: &[u8], b: &[u8]) -> Option<Vec<u8>> {
    let ((x, sx), (y, sy)) = (decimal_parse(a)?, decimal_parse(b)?);
    let scale = sx.max(sy);
    let x = x.checked_mul(10i128.checked_pow(scale - sx)?)?;
    let y = y.checked_mul(10i128.checked_pow(scale - sy)?)?;
    Some(decimal_format(x.checked_add(y)?, scale))
}

/// `sum / count` to `scale` digits after the point, rounded half away
/// from zero (as the server rounds a DECIMAL quotient); None beyond 38
/// digits or for a zero count.
pub fn decimal_div(sum: &[u8], count: &[u8], scale: u32) -> Option<Vec<u8>> {
    let (m, s) = decimal_parse(sum)?;
    let (c, cs) = decimal_parse(count)?;
    if c <= 0 || cs != 0 {
        return None;
    }
    // m / 10^s / c at `scale` digits: m * 10^(scale - s) / c.
    let (n, d) = match scale.checked_sub(s) {
        Some(up) => (m.checked_mul(10i128.checked_pow(up)?)?, c),
        None => (m, c.checked_mul(10i128.checked_pow(s - scale)?)?),
    };
    let (q, r) = (n / d, n % d);
    let q = match r.unsigned_abs().checked_mul(2)? >= d.unsigned_abs() {
        true => q + n.signum(),
        false => q,
    };
    Some(decimal_format(q, scale))
}

/// An aggregate function whose per-group results the merge combines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggKind {
    Count,
    Sum,
    Min,
    Max,
    Avg,
    CountDistinct,
    SumDistinct,
}

impl AggKind {
    pub fn name(self) -> &'static str {
        match self {
            AggKind::Count => "COUNT",
            AggKind::Sum => "SUM",
            AggKind::Min => "MIN",
            AggKind::Max => "MAX",
            AggKind::Avg => "AVG",
            AggKind::CountDistinct => "COUNT(DISTINCT)",
            AggKind::SumDistinct => "SUM(DISTINCT)",
        }
    }
}

/// Where an aggregate's partial results are in the groups' rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggCols {
    pub kind: AggKind,
    /// The column whose definition is the result's (its type, and for
    /// AVG its digits after the point).
    pub def: usize,
    /// COUNT, SUM, MIN, MAX: the group's partial value; AVG: its SUM.
    pub value: usize,
    /// AVG: its COUNT.
    pub count: usize,
    /// MIN, MAX: the value's two weight columns (None: not selected,
    /// so the value must not be a string).
    pub weights: Option<usize>,
}

/// A client column of a merged group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    /// A value that is the same on every row of the group (a grouped
    /// column, or one depending on it): from the group's first row.
    Any(usize),
    /// An aggregate, by index in [`GroupPlan::aggs`].
    Agg(usize),
    /// Arithmetic over aggregates, by index in [`GroupPlan::calcs`].
    Calc(usize),
}

/// `+`, `-`, `*` over aggregates and integers, at most one `/` at the top,
/// computed exactly and written with the digits the server gives the
/// expression's column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Calc {
    Agg(usize),
    /// An integer as written.
    Num(Vec<u8>),
    Neg(Box<Calc>),
    Bin(char, Box<Calc>, Box<Calc>),
}

impl Calc {
    fn aggs(&self, out: &mut Vec<usize>) {
        match self {
            Calc::Agg(a) => out.push(*a),
            Calc::Num(_) => {}
            Calc::Neg(x) => x.aggs(out),
            Calc::Bin(_, x, y) => {
                x.aggs(out);
                y.aggs(out);
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A HAVING condition sextant evaluates on merged groups: aggregates
/// compared with numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cond {
    /// Aggregate (index in [`GroupPlan::aggs`]), operator, a number as
    /// written.
    Cmp(usize, CmpOp, Vec<u8>),
    /// Aggregate IS NULL (true) / IS NOT NULL (false).
    IsNull(usize, bool),
    And(Box<Cond>, Box<Cond>),
    Or(Box<Cond>, Box<Cond>),
    Not(Box<Cond>),
}

impl Cond {
    fn aggs(&self, out: &mut Vec<usize>) {
        match self {
            Cond::Cmp(a, _, _) | Cond::IsNull(a, _) => out.push(*a),
            Cond::And(x, y) | Cond::Or(x, y) => {
                x.aggs(out);
                y.aggs(out);
            }
            Cond::Not(x) => x.aggs(out),
        }
    }
}

/// What the merged groups are sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    /// A group key, by index in [`GroupPlan::keys`].
    Key(usize),
    /// An aggregate, by index in [`GroupPlan::aggs`].
    Agg(usize),
    /// An expression over aggregates, by index in [`GroupPlan::calcs`].
    Calc(usize),
}

/// How the rows of a GROUP BY (or DISTINCT, or aggregate) read over
/// several groups become the statement's result. Each group's rows come
/// sorted by the keys; rows of equal keys, from any group, combine into
/// one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupPlan {
    /// Columns the client sees (the first of each row).
    pub visible: usize,
    /// Every column of the groups' rows.
    pub columns: usize,
    /// Each group key's value column (its two weight columns follow) and
    /// whether the rows are sorted descending by it. With `distinct`, the
    /// last key is the argument of the DISTINCT aggregates.
    pub keys: Vec<(usize, bool)>,
    pub distinct: bool,
    /// No GROUP BY: one row, even over no rows.
    pub implicit: bool,
    pub outs: Vec<Out>,
    pub aggs: Vec<AggCols>,
    /// Each expression over aggregates, and the column whose definition
    /// is its result's.
    pub calcs: Vec<(Calc, usize)>,
    pub having: Option<Cond>,
    /// ORDER BY of the merged groups (None: the keys' order, streamed).
    pub order: Option<Vec<(SortKey, bool)>>,
    pub offset: u64,
    pub count: Option<u64>,
}

impl GroupPlan {
    /// The merge steps in words (EXPLAIN ROUTE).
    pub fn describe(&self) -> String {
        let mut out = match (self.implicit, self.keys.len()) {
            (true, 0) => "each group's one row combined into one".to_string(),
            (true, _) => {
                "one group of all rows (each group's rows sorted by the distinct value)".to_string()
            }
            (false, n) => format!(
                "rows of equal keys combined ({} key(s), each group's rows sorted by them)",
                n - usize::from(self.distinct)
            ),
        };
        if !self.aggs.is_empty() {
            let names: Vec<String> = self
                .aggs
                .iter()
                .map(|a| match a.kind {
                    AggKind::Count | AggKind::Sum => format!("{} added", a.kind.name()),
                    AggKind::Min | AggKind::Max => format!("{} picked", a.kind.name()),
                    AggKind::Avg => "AVG from SUM and COUNT".into(),
                    k => format!("{} over the distinct values", k.name()),
                })
                .collect();
            out.push_str(&format!("; {}", names.join(", ")));
        }
        if !self.calcs.is_empty() {
            out.push_str("; expressions over aggregates computed exactly from the combined values");
        }
        if self.having.is_some() {
            out.push_str("; HAVING evaluated on the combined values");
        }
        match &self.order {
            None if self.implicit && self.keys.is_empty() => {}
            None => out.push_str("; streamed in key order"),
            Some(o) => out.push_str(&format!(
                "; held and sorted by {} item(s) (within merge_memory_mb)",
                o.len()
            )),
        }
        if let Some(c) = self.count {
            out.push_str(&format!("; {} skipped, then at most {c}", self.offset));
        }
        out
    }

    /// The keys that make a group (without the distinct argument).
    fn group_keys(&self) -> &[(usize, bool)] {
        match self.distinct {
            true => &self.keys[..self.keys.len().saturating_sub(1)],
            false => &self.keys,
        }
    }
}

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
