//! How a grouped read's rows are combined: the aggregates, the
//! calculations and HAVING conditions over them, the sort keys, and the
//! plan that holds them.

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
    pub(super) fn aggs(&self, out: &mut Vec<usize>) {
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
    pub(super) fn aggs(&self, out: &mut Vec<usize>) {
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
    pub(super) fn group_keys(&self) -> &[(usize, bool)] {
        match self.distinct {
            true => &self.keys[..self.keys.len().saturating_sub(1)],
            false => &self.keys,
        }
    }
}
