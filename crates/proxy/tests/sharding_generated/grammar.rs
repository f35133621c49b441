//! Productions of the statements the generator composes: FROM forms that
//! put each table kind (sharded, global, single) in each position, select
//! lists of columns, expressions, aggregates and scalar subqueries, WHERE
//! trees with subqueries, GROUP BY (WITH ROLLUP), HAVING, ORDER BY by
//! name, alias and position, LIMIT forms, DISTINCT, set operations, CTEs,
//! window functions, session settings and functions, and writes. A SELECT
//! is kept as its parts so that a difference can be reduced by dropping
//! them one at a time.

use rand::rngs::StdRng;
use rand::Rng;

#[derive(Clone, Copy, PartialEq)]
pub enum Ty {
    Num,
    Str,
}

#[derive(Clone)]
pub struct Col {
    pub sql: &'static str,
    pub ty: Ty,
}

/// A FROM form: its text, its columns, the columns that make each row
/// unique (for a total order), and the qualifier of orders (for
/// correlated subqueries) if it has one.
pub struct Form {
    pub from: &'static str,
    pub cols: Vec<Col>,
    pub ids: &'static [&'static str],
    pub orders: Option<&'static str>,
}

fn c(sql: &'static str, ty: Ty) -> Col {
    Col { sql, ty }
}

const ORDER_COLS: [(&str, Ty); 7] = [
    ("o.id", Ty::Num),
    ("o.user_id", Ty::Num),
    ("o.item_id", Ty::Num),
    ("o.qty", Ty::Num),
    ("o.price", Ty::Num),
    ("o.status", Ty::Str),
    ("o.note", Ty::Str),
];
const EVENT_COLS: [(&str, Ty); 5] = [
    ("e.id", Ty::Num),
    ("e.user_id", Ty::Num),
    ("e.kind", Ty::Str),
    ("e.amount", Ty::Num),
    ("e.tag", Ty::Str),
];
const ITEM_COLS: [(&str, Ty); 4] = [
    ("i.item_id", Ty::Num),
    ("i.name", Ty::Str),
    ("i.price", Ty::Num),
    ("i.cat", Ty::Str),
];
const NOTE_COLS: [(&str, Ty); 3] = [
    ("n.id", Ty::Num),
    ("n.item_id", Ty::Num),
    ("n.body", Ty::Str),
];

fn cols(sets: &[&[(&'static str, Ty)]]) -> Vec<Col> {
    sets.iter()
        .flat_map(|s| s.iter().map(|(n, t)| c(n, *t)))
        .collect()
}

pub fn forms() -> Vec<Form> {
    let o: &[(&str, Ty)] = &ORDER_COLS;
    let e: &[(&str, Ty)] = &EVENT_COLS;
    let i: &[(&str, Ty)] = &ITEM_COLS;
    let n: &[(&str, Ty)] = &NOTE_COLS;
    vec![
        Form {
            from: "orders o",
            cols: cols(&[o]),
            ids: &["o.id"],
            orders: Some("o"),
        },
        Form {
            from: "orders o",
            cols: cols(&[o]),
            ids: &["o.id"],
            orders: Some("o"),
        },
        Form {
            from: "orders o JOIN events e ON e.user_id = o.user_id",
            cols: cols(&[o, e]),
            ids: &["o.id", "e.id"],
            orders: Some("o"),
        },
        Form {
            from: "orders o LEFT JOIN events e ON e.user_id = o.user_id",
            cols: cols(&[o, e]),
            ids: &["o.id", "e.id"],
            orders: Some("o"),
        },
        Form {
            from: "events e RIGHT JOIN orders o ON e.user_id = o.user_id",
            cols: cols(&[o, e]),
            ids: &["o.id", "e.id"],
            orders: Some("o"),
        },
        Form {
            from: "orders o JOIN items i ON i.item_id = o.item_id",
            cols: cols(&[o, i]),
            ids: &["o.id"],
            orders: Some("o"),
        },
        Form {
            from: "orders o LEFT JOIN items i ON i.item_id = o.item_id",
            cols: cols(&[o, i]),
            ids: &["o.id"],
            orders: Some("o"),
        },
        Form {
            from: "items i LEFT JOIN orders o ON o.item_id = i.item_id",
            cols: cols(&[i, o]),
            ids: &["i.item_id", "o.id"],
            orders: Some("o"),
        },
        Form {
            from: "items i JOIN orders o ON o.item_id = i.item_id",
            cols: cols(&[i, o]),
            ids: &["o.id"],
            orders: Some("o"),
        },
        Form {
            from: "orders o, items i",
            cols: cols(&[o, i]),
            ids: &["o.id", "i.item_id"],
            orders: Some("o"),
        },
        Form {
            from: "orders o JOIN events e ON e.id = o.id",
            cols: cols(&[o, e]),
            ids: &["o.id"],
            orders: Some("o"),
        },
        Form {
            from: "items i",
            cols: cols(&[i]),
            ids: &["i.item_id"],
            orders: None,
        },
        Form {
            from: "events e",
            cols: cols(&[e]),
            ids: &["e.id"],
            orders: None,
        },
        Form {
            from: "notes n JOIN items i ON i.item_id = n.item_id",
            cols: cols(&[n, i]),
            ids: &["n.id"],
            orders: None,
        },
        Form {
            from: "orders o JOIN notes n ON n.item_id = o.item_id",
            cols: cols(&[o, n]),
            ids: &["o.id", "n.id"],
            orders: Some("o"),
        },
        Form {
            from: "items i LEFT JOIN events e ON e.amount = i.price",
            cols: cols(&[i, e]),
            ids: &["i.item_id", "e.id"],
            orders: None,
        },
    ]
}

/// A SELECT in parts.
#[derive(Clone, Debug)]
pub struct Select {
    pub distinct: bool,
    pub items: Vec<String>,
    pub from: String,
    pub wheres: Vec<String>,
    pub group: Vec<String>,
    pub rollup: bool,
    pub having: Vec<String>,
    pub order: Vec<String>,
    /// The ORDER BY fixes the order of every row.
    pub total: bool,
    pub limit: Option<String>,
}

impl Select {
    pub fn sql(&self) -> String {
        let mut s = String::from("SELECT ");
        if self.distinct {
            s += "DISTINCT ";
        }
        s += &self.items.join(", ");
        s += " FROM ";
        s += &self.from;
        if !self.wheres.is_empty() {
            s += " WHERE ";
            s += &self.wheres.join(" AND ");
        }
        if !self.group.is_empty() {
            s += " GROUP BY ";
            s += &self.group.join(", ");
            if self.rollup {
                s += " WITH ROLLUP";
            }
        }
        if !self.having.is_empty() {
            s += " HAVING ";
            s += &self.having.join(" AND ");
        }
        if !self.order.is_empty() {
            s += " ORDER BY ";
            s += &self.order.join(", ");
        }
        if let Some(l) = &self.limit {
            s += " ";
            s += l;
        }
        s
    }

    /// Whether the answer's order is part of it.
    pub fn ordered(&self) -> bool {
        self.total && !self.order.is_empty()
    }

    /// Every statement one part smaller, for reducing a difference.
    pub fn smaller(&self) -> Vec<Select> {
        let mut out = Vec::new();
        let drop = |v: &Vec<String>, i: usize| {
            let mut v = v.clone();
            v.remove(i);
            v
        };
        for i in 0..self.items.len() {
            if self.items.len() > 1 {
                out.push(Select {
                    items: drop(&self.items, i),
                    ..self.clone()
                });
            }
        }
        for i in 0..self.wheres.len() {
            out.push(Select {
                wheres: drop(&self.wheres, i),
                ..self.clone()
            });
        }
        for i in 0..self.having.len() {
            out.push(Select {
                having: drop(&self.having, i),
                ..self.clone()
            });
        }
        for i in 0..self.group.len() {
            out.push(Select {
                group: drop(&self.group, i),
                ..self.clone()
            });
        }
        if self.limit.is_some() {
            out.push(Select {
                limit: None,
                ..self.clone()
            });
        }
        if self.limit.is_none() {
            for i in 0..self.order.len() {
                out.push(Select {
                    order: drop(&self.order, i),
                    total: false,
                    ..self.clone()
                });
            }
        }
        if self.distinct {
            out.push(Select {
                distinct: false,
                ..self.clone()
            });
        }
        if self.rollup {
            out.push(Select {
                rollup: false,
                ..self.clone()
            });
        }
        out
    }
}

fn pick<'a, T>(r: &mut StdRng, v: &'a [T]) -> &'a T {
    &v[r.gen_range(0..v.len())]
}

const STATUSES: &[&str] = &["new", "New", "paid", "sent", "new ", "sent  "];
const KINDS: &[&str] = &["x", "y", "z"];
const TAGS: &[&str] = &["abc", "abc ", "ABC", "b"];

fn literal_for(r: &mut StdRng, col: &Col) -> String {
    match col.ty {
        Ty::Num => {
            let n: i64 = match col.sql {
                s if s.ends_with("user_id") => r.gen_range(1..=60),
                s if s.ends_with("item_id") => r.gen_range(1..=30),
                s if s.ends_with(".id") => r.gen_range(1..=700),
                _ => r.gen_range(0..=40),
            };
            n.to_string()
        }
        Ty::Str => {
            let v = match col.sql {
                s if s.ends_with("status") => *pick(r, STATUSES),
                s if s.ends_with("kind") || s.ends_with("cat") => *pick(r, KINDS),
                s if s.ends_with("tag") => *pick(r, TAGS),
                _ => *pick(r, &["a", "n1", "it3", "b2"]),
            };
            format!("'{v}'")
        }
    }
}

pub fn expr(r: &mut StdRng, col: &Col) -> String {
    let c = col.sql;
    match (col.ty, r.gen_range(0..8)) {
        (_, 0..=3) => c.to_string(),
        (Ty::Num, 4) => format!("{c} + {}", r.gen_range(1..9)),
        (Ty::Num, 5) => format!("COALESCE({c}, -1)"),
        (Ty::Num, 6) => format!("{c} / 7"),
        (Ty::Num, _) => format!("{c} DIV 3"),
        (Ty::Str, 4) => format!("UPPER({c})"),
        (Ty::Str, 5) => format!("CONCAT({c}, '-')"),
        (Ty::Str, 6) => format!("LENGTH({c})"),
        (Ty::Str, _) => format!("COALESCE({c}, 'none')"),
    }
}

pub fn aggregate(r: &mut StdRng, cols: &[Col]) -> String {
    let col = pick(r, cols);
    let c = col.sql;
    let num = col.ty == Ty::Num;
    match r.gen_range(0..13) {
        0 | 1 => "COUNT(*)".into(),
        2 => format!("COUNT({c})"),
        3 => format!("COUNT(DISTINCT {c})"),
        4 if num => format!("SUM({c})"),
        5 => format!("MIN({c})"),
        6 => format!("MAX({c})"),
        7 if num => format!("AVG({c})"),
        8 => format!("GROUP_CONCAT({c} ORDER BY {c})"),
        9 if num => format!("SUM({c}) * 2 - COUNT(*)"),
        10 if num => format!("SUM(DISTINCT {c})"),
        11 if num => format!("BIT_XOR({c})"),
        12 if num => format!("STDDEV_POP({c})"),
        _ => "COUNT(*)".into(),
    }
}

/// A predicate over the form's columns (and subqueries).
pub fn predicate(r: &mut StdRng, f: &Form, depth: u32) -> String {
    let col = pick(r, &f.cols).clone();
    let c = col.sql;
    match r.gen_range(0..22) {
        0..=3 => {
            let op = *pick(r, &["=", "<>", "<", ">", "<=", ">="]);
            format!("{c} {op} {}", literal_for(r, &col))
        }
        4 => format!("{c} IS NULL"),
        5 => format!("{c} IS NOT NULL"),
        6 => format!(
            "{c} IN ({}, {}, {})",
            literal_for(r, &col),
            literal_for(r, &col),
            literal_for(r, &col)
        ),
        7 if col.ty == Ty::Num => format!(
            "{c} BETWEEN {} AND {}",
            literal_for(r, &col),
            literal_for(r, &col)
        ),
        8 if col.ty == Ty::Str => format!("{c} LIKE '{}%'", pick(r, &["n", "s", "a", "N"])),
        9 | 10 if f.orders.is_some() => {
            // The shard key.
            match r.gen_range(0..3) {
                0 => format!("o.user_id = {}", r.gen_range(1..=60)),
                1 => format!(
                    "o.user_id IN ({}, {})",
                    r.gen_range(1..=60),
                    r.gen_range(1..=60)
                ),
                _ => format!(
                    "o.user_id BETWEEN {} AND {}",
                    r.gen_range(1..=30),
                    r.gen_range(20..=60)
                ),
            }
        }
        11 if depth < 2 => format!("NOT ({})", predicate(r, f, depth + 1)),
        12 | 13 if depth < 2 => format!(
            "({} OR {})",
            predicate(r, f, depth + 1),
            predicate(r, f, depth + 1)
        ),
        14 if f.orders.is_some() => format!(
            "{}EXISTS (SELECT 1 FROM events e2 WHERE e2.user_id = o.user_id AND e2.kind = '{}')",
            pick(r, &["", "NOT "]),
            pick(r, KINDS)
        ),
        15 if f.orders.is_some() => format!(
            "o.user_id {}IN (SELECT user_id FROM events WHERE kind = '{}')",
            pick(r, &["", "NOT "]),
            pick(r, KINDS)
        ),
        16 if f.orders.is_some() => format!(
            "o.item_id IN (SELECT item_id FROM items WHERE cat = '{}')",
            pick(r, KINDS)
        ),
        17 if f.from.starts_with("items") => format!(
            "i.item_id {}IN (SELECT item_id FROM orders WHERE qty > {})",
            pick(r, &["", "NOT "]),
            r.gen_range(0..12)
        ),
        18 if f.from.starts_with("items") => format!(
            "{}EXISTS (SELECT 1 FROM orders o2 WHERE o2.item_id = i.item_id AND o2.qty > {})",
            pick(r, &["", "NOT "]),
            r.gen_range(0..12)
        ),
        19 if f.orders.is_some() => format!(
            "o.qty {} (SELECT {} FROM orders)",
            pick(r, &["=", ">=", "<"]),
            pick(r, &["MAX(qty)", "MIN(qty)", "AVG(qty)"])
        ),
        20 => format!(
            "{} > (SELECT AVG(price) FROM items)",
            f.cols
                .iter()
                .find(|c| c.ty == Ty::Num)
                .map_or("1", |c| c.sql)
        ),
        _ => format!("{c} IS NOT NULL"),
    }
}

/// A select-list item that is not an aggregate.
pub fn plain_item(r: &mut StdRng, f: &Form) -> String {
    match r.gen_range(0..14) {
        0 if f.orders.is_some() => {
            "(SELECT COUNT(*) FROM events e2 WHERE e2.user_id = o.user_id)".into()
        }
        1 => "(SELECT MAX(price) FROM items)".into(),
        2 if f.orders.is_none() => "(SELECT COUNT(*) FROM orders)".into(),
        _ => {
            let col = pick(r, &f.cols).clone();
            expr(r, &col)
        }
    }
}

pub fn limit(r: &mut StdRng) -> String {
    let (n, m) = (r.gen_range(0..12), r.gen_range(0..20));
    match r.gen_range(0..4) {
        0 => format!("LIMIT {n}"),
        1 => format!("LIMIT {n} OFFSET {m}"),
        2 => format!("LIMIT {m}, {n}"),
        _ => format!("LIMIT {m}, 18446744073709551615"),
    }
}

/// A SELECT over one FROM form.
pub fn select(r: &mut StdRng, forms: &[Form]) -> Select {
    let f = pick(r, forms);
    let mut s = Select {
        distinct: false,
        items: Vec::new(),
        from: f.from.to_string(),
        wheres: Vec::new(),
        group: Vec::new(),
        rollup: false,
        having: Vec::new(),
        order: Vec::new(),
        total: false,
        limit: None,
    };
    for _ in 0..r.gen_range(0..3) {
        s.wheres.push(predicate(r, f, 0));
    }
    match r.gen_range(0..10) {
        // Grouped.
        0..=3 => {
            let keys: Vec<Col> = (0..r.gen_range(1..3))
                .map(|_| pick(r, &f.cols).clone())
                .collect();
            let mut keys: Vec<String> = keys.iter().map(|k| k.sql.to_string()).collect();
            keys.dedup();
            for (n, k) in keys.iter().enumerate() {
                s.items.push(match r.gen_range(0..3) {
                    0 => format!("{k} AS k{n}"),
                    _ => k.clone(),
                });
            }
            for n in 0..r.gen_range(1..4) {
                let a = aggregate(r, &f.cols);
                s.items.push(format!("{a} AS a{n}"));
            }
            s.group = keys.clone();
            if r.gen_range(0..12) == 0 {
                s.rollup = true;
            }
            if r.gen_range(0..3) == 0 {
                s.having.push(format!(
                    "{} {} {}",
                    pick(r, &["a0", "COUNT(*)"]),
                    pick(r, &[">", "<", ">="]),
                    r.gen_range(0..20)
                ));
            }
            if !s.rollup && r.gen_range(0..2) == 0 {
                // The keys fix the order.
                s.order = keys
                    .iter()
                    .enumerate()
                    .map(|(n, k)| match r.gen_range(0..3) {
                        0 => format!("{} DESC", n + 1),
                        _ => format!("{k}{}", pick(r, &["", " DESC"])),
                    })
                    .collect();
                s.total = true;
                if r.gen_range(0..3) == 0 {
                    let dir = pick(r, &["", " DESC"]);
                    // Not by a floating-point aggregate: STDDEV_POP of the
                    // same values summed in another order may differ in
                    // its last bits, and one server orders its ties
                    // differently from another (found at 100,000
                    // statements: the same rows, in another order).
                    if !s
                        .items
                        .iter()
                        .any(|i| i.ends_with(" AS a0") && i.contains("STDDEV"))
                    {
                        s.order.insert(0, format!("a0{dir}"));
                    }
                }
                if r.gen_range(0..3) == 0 {
                    s.limit = Some(limit(r));
                }
            }
        }
        // Aggregates of the whole.
        4 => {
            for n in 0..r.gen_range(1..4) {
                let a = aggregate(r, &f.cols);
                s.items.push(format!("{a} AS a{n}"));
            }
            if r.gen_range(0..3) == 0 {
                s.having.push(format!("a0 > {}", r.gen_range(0..50)));
            }
        }
        // DISTINCT.
        5 => {
            s.distinct = true;
            for _ in 0..r.gen_range(1..3) {
                s.items.push(pick(r, &f.cols).sql.to_string());
            }
            if r.gen_range(0..2) == 0 {
                s.order = s.items.clone();
                s.total = true;
            }
        }
        // Rows.
        _ => {
            for n in 0..r.gen_range(1..4) {
                let it = plain_item(r, f);
                s.items.push(match r.gen_range(0..3) {
                    0 => format!("{it} AS c{n}"),
                    _ => it,
                });
            }
            if r.gen_range(0..2) == 0 {
                for _ in 0..r.gen_range(0..3) {
                    let col = pick(r, &f.cols).sql;
                    s.order.push(format!("{col}{}", pick(r, &["", " DESC"])));
                }
                if r.gen_range(0..4) == 0 {
                    s.order.push(format!(
                        "{}{}",
                        r.gen_range(1..=s.items.len()),
                        pick(r, &["", " DESC"])
                    ));
                }
                // Ties broken by the rows' ids: the order is total.
                for id in f.ids {
                    s.order.push(id.to_string());
                }
                s.total = true;
                if r.gen_range(0..2) == 0 {
                    s.limit = Some(limit(r));
                }
            }
        }
    }
    s
}

/// Statements that are not one SELECT of the form above: set operations,
/// CTEs, window functions, session functions.
pub fn other_read(r: &mut StdRng) -> (String, bool) {
    let k = r.gen_range(1..=60);
    match r.gen_range(0..9) {
        0 => (
            format!(
                "SELECT item_id FROM orders WHERE qty > {} UNION{} SELECT item_id FROM items WHERE cat = '{}' ORDER BY 1",
                r.gen_range(0..12),
                pick(r, &["", " ALL"]),
                pick(r, KINDS)
            ),
            true,
        ),
        1 => (
            format!("SELECT id FROM orders WHERE user_id = {k} UNION ALL SELECT id FROM orders WHERE user_id = {k} ORDER BY 1"),
            true,
        ),
        2 => (
            "WITH t AS (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) SELECT n, COUNT(*) FROM t GROUP BY n ORDER BY n".into(),
            true,
        ),
        3 => (
            format!("SELECT id, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY id) AS rn FROM orders WHERE user_id IN ({k}, {}) ORDER BY id", r.gen_range(1..=60)),
            true,
        ),
        4 => ("SELECT user_id, qty, RANK() OVER (ORDER BY qty) FROM orders ORDER BY user_id, qty".into(), false),
        5 => (format!("SELECT * FROM (SELECT user_id, SUM(qty) AS s FROM orders GROUP BY user_id) d WHERE s > {} ORDER BY user_id", r.gen_range(10..60)), true),
        6 => ("SELECT status, COUNT(*) FROM orders GROUP BY status WITH ROLLUP".into(), false),
        7 => (format!("SELECT COUNT(*) FROM orders WHERE user_id = {k} AND note IS NULL"), false),
        _ => (
            format!("SELECT id FROM orders o WHERE o.qty = (SELECT MAX(qty) FROM orders o2 WHERE o2.user_id = o.user_id) AND o.user_id < {k} ORDER BY id"),
            true,
        ),
    }
}

/// A session setting that may change results, and the statement that puts
/// it back.
pub fn setting(r: &mut StdRng) -> (String, &'static str) {
    match r.gen_range(0..6) {
        0 => (
            format!("SET SESSION sql_select_limit = {}", r.gen_range(1..6)),
            "SET SESSION sql_select_limit = DEFAULT",
        ),
        1 => (
            format!(
                "SET SESSION div_precision_increment = {}",
                r.gen_range(0..3)
            ),
            "SET SESSION div_precision_increment = DEFAULT",
        ),
        2 => (
            "SET SESSION group_concat_max_len = 6".into(),
            "SET SESSION group_concat_max_len = DEFAULT",
        ),
        3 => (
            "SET SESSION max_sort_length = 4".into(),
            "SET SESSION max_sort_length = DEFAULT",
        ),
        4 => (
            "SET SESSION sql_mode = CONCAT(@@sql_mode, ',PAD_CHAR_TO_FULL_LENGTH')".into(),
            super::STRICT_GROUPING,
        ),
        _ => (
            "SET SESSION time_zone = '+03:00'".into(),
            "SET SESSION time_zone = DEFAULT",
        ),
    }
}

/// A write, and whether it may touch a global table (whose copies are then
/// compared).
pub fn write(r: &mut StdRng, next_id: &mut u64, forms: &[Form]) -> String {
    let orders = &forms[0];
    let k = r.gen_range(1..=60);
    match r.gen_range(0..14) {
        0 | 1 => {
            let w = predicate(r, orders, 1);
            format!("UPDATE orders o SET qty = qty + 1, note = CONCAT(COALESCE(note, ''), 'u') WHERE {w}")
        }
        2 => format!("UPDATE orders SET price = price + 1 WHERE user_id = {k} ORDER BY id LIMIT 2"),
        3 => format!("UPDATE orders SET price = price + 1 WHERE qty > {} ORDER BY id LIMIT 2", r.gen_range(0..12)),
        4 => {
            let w = predicate(r, orders, 1);
            format!("DELETE o FROM orders o WHERE {w} AND o.qty = {}", r.gen_range(0..12))
        }
        5 | 6 => {
            let rows: Vec<String> = (0..r.gen_range(1..4))
                .map(|_| {
                    *next_id += 1;
                    format!(
                        "({}, {}, {}, {}, {}.50, '{}', NULL)",
                        next_id,
                        r.gen_range(1..=60),
                        r.gen_range(1..=30),
                        r.gen_range(0..12),
                        r.gen_range(1..99),
                        pick(r, STATUSES)
                    )
                })
                .collect();
            format!("INSERT INTO orders (id, user_id, item_id, qty, price, status, note) VALUES {}", rows.join(", "))
        }
        7 => format!("UPDATE items SET price = price + 1 WHERE cat = '{}'", pick(r, KINDS)),
        8 => format!("UPDATE items SET name = {} WHERE item_id = {}", pick(r, &["UUID()", "CONCAT('n', RAND())", "NOW(6)", "@nothing", "'fixed'"]), r.gen_range(1..=30)),
        9 => format!("UPDATE orders o JOIN items i ON i.item_id = o.item_id SET o.note = i.name WHERE o.user_id = {k}"),
        10 => format!("UPDATE items i JOIN orders o ON o.item_id = i.item_id SET i.price = i.price + 1 WHERE o.user_id = {k}"),
        11 => format!("INSERT INTO events (id, user_id, kind, amount, tag) SELECT id + 100000, user_id, 'x', qty, 'abc' FROM orders WHERE user_id = {k}"),
        12 => format!("UPDATE events SET amount = amount + 1 WHERE user_id IN (SELECT user_id FROM orders WHERE qty = {})", r.gen_range(0..12)),
        _ => format!("DELETE FROM events WHERE kind = '{}' AND amount > {}", pick(r, KINDS), r.gen_range(30..40)),
    }
}

/// A session function read right after another statement: the answer is
/// about the statement before.
pub fn session_function(r: &mut StdRng) -> &'static str {
    const FUNCTIONS: [&str; 5] = [
        "SELECT ROW_COUNT()",
        "SELECT FOUND_ROWS()",
        "SELECT LAST_INSERT_ID()",
        "SELECT @@warning_count",
        "SHOW WARNINGS",
    ];
    FUNCTIONS[r.gen_range(0..FUNCTIONS.len())]
}

/// A transaction script: BEGIN, writes, a savepoint (before the first
/// write or after it) rolled back to or released, and an end that
/// commits, rolls back, or chains into another transaction.
pub fn script(r: &mut StdRng, next_id: &mut u64, forms: &[Form]) -> Vec<String> {
    let mut s = vec![pick(r, &["BEGIN", "START TRANSACTION"]).to_string()];
    let early = r.gen_bool(0.4);
    if early {
        s.push("SAVEPOINT s1".into());
    }
    s.push(write(r, next_id, forms));
    if !early && r.gen_bool(0.6) {
        s.push("SAVEPOINT s1".into());
        s.push(write(r, next_id, forms));
    }
    if s.iter().any(|x| x == "SAVEPOINT s1") {
        let to = [
            "ROLLBACK TO SAVEPOINT s1",
            "ROLLBACK TO s1",
            "RELEASE SAVEPOINT s1",
        ];
        s.push(pick(r, &to).to_string());
    }
    if r.gen_bool(0.5) {
        s.push(write(r, next_id, forms));
    }
    let end = *pick(
        r,
        &[
            "COMMIT",
            "ROLLBACK",
            "COMMIT AND CHAIN",
            "ROLLBACK AND CHAIN",
        ],
    );
    s.push(end.to_string());
    if end.ends_with("CHAIN") {
        s.push(write(r, next_id, forms));
        s.push(pick(r, &["COMMIT", "ROLLBACK"]).to_string());
    }
    s
}
