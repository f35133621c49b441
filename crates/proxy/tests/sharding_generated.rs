//! The grammar-driven differential tester: statements composed from the
//! productions in `sharding_generated/grammar.rs` run through sextant on a
//! layout of four groups (two sharded tables of one vdb, a global table, a
//! single table) and directly on one unsharded server holding the same
//! rows. Each answer must be the server's (rows, ordered where the ORDER BY
//! fixes the order, else as multisets; affected rows; the tables after
//! each write, every copy of the global table included), or sextant must
//! refuse with 1235 having changed nothing. A difference is reduced to a
//! smallest statement that still differs before the test fails.
//!
//! `SEXTANT_GEN_SEED` and `SEXTANT_GEN_COUNT` choose the run (default: a
//! fixed seed, 5,000 statements); `SEXTANT_GEN_REPORT` names a file for
//! the per-construct counts (bench/gen runs long ones).

mod common;
#[path = "sharding_generated/grammar.rs"]
mod grammar;

use common::*;
use grammar::Select;
use mysql::prelude::Queryable;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

const DB: &str = "sextant_gen";
const REF: &str = "sextant_gen_ref";

fn layout() -> String {
    let mut g = shard_groups("");
    g += &format!(
        "\n[xa]\nlog_dir = \"{}\"\n\n",
        std::env::temp_dir()
            .join(format!("sextant-gen-xa-{}", std::process::id()))
            .display()
    );
    g += &format!(
        r#"[sharding]
unlisted = "global"

[[sharding.vdb]]
id = 1
type = "int"
method = "hash"
num = 4
partitions = {{ data1 = [0], data2 = [1], data3 = [2], data4 = [3] }}

[[sharding.table]]
vdb = 1
db = "{DB}"
table = "orders"
pkey = "user_id"

[[sharding.table]]
vdb = 1
db = "{DB}"
table = "events"
pkey = "user_id"

[[sharding.single_tables]]
db = "{DB}"
table = "notes"
group = "data2"
"#
    );
    g
}

const DDL: &[&str] = &[
    "CREATE TABLE orders (id INT PRIMARY KEY, user_id INT NOT NULL, item_id INT NOT NULL, qty INT NOT NULL, price DECIMAL(8,2) NOT NULL, status VARCHAR(8) NOT NULL, note VARCHAR(40), KEY (user_id))",
    "CREATE TABLE events (id INT PRIMARY KEY, user_id INT NOT NULL, kind CHAR(1) NOT NULL, amount INT, tag VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL, KEY (user_id))",
    "CREATE TABLE items (item_id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, price INT NOT NULL, cat CHAR(1) NOT NULL)",
    "CREATE TABLE notes (id INT PRIMARY KEY, item_id INT NOT NULL, body VARCHAR(10))",
];

fn scramble(x: u64) -> u64 {
    x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 29
}

/// The rows, as INSERT statements both sides run.
fn rows() -> Vec<String> {
    let statuses = ["new", "New", "paid", "sent", "new ", "sent  "];
    let kinds = ["x", "y", "z"];
    let tags = ["abc", "abc ", "ABC", "b"];
    let mut out = Vec::new();
    let orders: Vec<String> = (1..=600u64)
        .map(|id| {
            let h = scramble(id);
            let note = match h % 5 {
                0 => "NULL".to_string(),
                n => format!("'n{n}'"),
            };
            format!(
                "({id}, {}, {}, {}, {}.{:02}, '{}', {note})",
                1 + h % 60,
                1 + (h / 60) % 30,
                (h / 7) % 12,
                (h / 11) % 90,
                (h / 13) % 100,
                statuses[((h / 17) % 6) as usize]
            )
        })
        .collect();
    for chunk in orders.chunks(100) {
        out.push(format!(
            "INSERT INTO orders (id, user_id, item_id, qty, price, status, note) VALUES {}",
            chunk.join(", ")
        ));
    }
    let events: Vec<String> = (1..=300u64)
        .map(|id| {
            let h = scramble(id + 7919);
            let amount = match h % 6 {
                0 => "NULL".to_string(),
                _ => ((h / 6) % 41).to_string(),
            };
            // Users above 50 have no events.
            format!(
                "({id}, {}, '{}', {amount}, '{}')",
                1 + h % 50,
                kinds[((h / 3) % 3) as usize],
                tags[((h / 5) % 4) as usize]
            )
        })
        .collect();
    for chunk in events.chunks(100) {
        out.push(format!(
            "INSERT INTO events (id, user_id, kind, amount, tag) VALUES {}",
            chunk.join(", ")
        ));
    }
    let items: Vec<String> = (1..=30u64)
        .map(|id| {
            format!(
                "({id}, 'it{id}', {}, '{}')",
                scramble(id) % 40,
                kinds[(id % 3) as usize]
            )
        })
        .collect();
    out.push(format!(
        "INSERT INTO items (item_id, name, price, cat) VALUES {}",
        items.join(", ")
    ));
    let notes: Vec<String> = (1..=20u64)
        .map(|id| format!("({id}, {}, 'b{}')", 1 + scramble(id) % 35, id % 4))
        .collect();
    out.push(format!(
        "INSERT INTO notes (id, item_id, body) VALUES {}",
        notes.join(", ")
    ));
    out
}

type Rows = Vec<Vec<Option<String>>>;

fn code(e: &mysql::Error) -> Option<(u16, String)> {
    match e {
        mysql::Error::MySqlError(e) => Some((e.code, e.message.clone())),
        _ => None,
    }
}

/// What one side answered.
#[derive(Debug, PartialEq)]
enum Answer {
    Rows(Rows),
    Done(u64),
    Error(u16, String),
}

fn run(c: &mut mysql::Conn, sql: &str) -> Answer {
    match c.query_iter(sql) {
        Ok(mut result) => {
            let mut rows = Vec::new();
            let mut columns = false;
            // The first result's (taken before reading it moves past it).
            let affected = result.affected_rows();
            if let Some(set) = result.iter() {
                columns = !set.columns().as_ref().is_empty();
                for r in set {
                    match r {
                        Ok(r) => rows.push(r),
                        Err(e) => {
                            let (n, m) = code(&e).unwrap_or((0, e.to_string()));
                            return Answer::Error(n, m);
                        }
                    }
                }
            }
            drop(result);
            match columns {
                true => Answer::Rows(text_rows(rows)),
                false => Answer::Done(affected),
            }
        }
        Err(e) => {
            let (n, m) = code(&e).unwrap_or_else(|| panic!("{sql}: not a server error: {e}"));
            Answer::Error(n, m)
        }
    }
}

/// How a statement came out.
#[derive(Debug, PartialEq, Eq, Clone, Copy, PartialOrd, Ord)]
enum Outcome {
    Same,
    Refused,
    /// The server rejected it too: not part of the corpus.
    Invalid,
    Different,
}

struct Tester {
    c: mysql::Conn,
    reference: mysql::Conn,
    /// Reads the reference's tables without touching the session whose
    /// ROW_COUNT() and FOUND_ROWS() are compared.
    checks: mysql::Conn,
    /// Per construct: same / refused / different.
    counts: BTreeMap<String, [u64; 3]>,
    refusals: BTreeMap<String, u64>,
}

/// Values the server may show any one of: a group of strings equal under
/// the case-insensitive PAD SPACE collation of `status` ('new', 'New',
/// 'new ') is shown as whichever row the server met first, so they
/// compare folded. (The NO PAD `tag` values keep their case and spaces.)
fn fold(v: &mut Option<String>) {
    if let Some(s) = v {
        let l = s.to_lowercase();
        if ["new", "sent", "paid"].iter().any(|w| l.contains(w)) {
            *s = l.replace(' ', "");
        }
    }
}

fn normalise(a: &mut Answer, ordered: bool) {
    if let Answer::Rows(r) = a {
        for row in r.iter_mut() {
            row.iter_mut().for_each(fold);
        }
        if !ordered {
            r.sort();
        }
    }
}

impl Tester {
    /// Runs `sql` through sextant and, unless sextant refused it (a
    /// refused write must not change the reference either), on the server.
    fn compare(&mut self, sql: &str, ordered: bool) -> (Outcome, String) {
        let mut got = run(&mut self.c, sql);
        if let Answer::Error(1235, why) = &got {
            let why = why.clone();
            *self.refusals.entry(shorten(&why)).or_default() += 1;
            // The client saw an error: what the session reports of its
            // statement before (ROW_COUNT() -1, FOUND_ROWS() as it was)
            // is compared with a server after a statement that failed.
            let _ = run(&mut self.reference, "SELECT * FROM sextant_gen_refused");
            return (Outcome::Refused, why);
        }
        let mut want = run(&mut self.reference, sql);
        if let Answer::Error(..) = want {
            return match got {
                Answer::Error(..) => (Outcome::Invalid, String::new()),
                other => (
                    Outcome::Different,
                    format!("the server rejected it ({want:?}); sextant answered {other:?}"),
                ),
            };
        }
        normalise(&mut want, ordered);
        normalise(&mut got, ordered);
        if got == want {
            (Outcome::Same, String::new())
        } else {
            (
                Outcome::Different,
                format!("server: {}\nsextant: {}", show(&want), show(&got)),
            )
        }
    }

    /// Runs a transaction script (statements joined by "; ") one statement
    /// at a time on both: each must answer alike (errors as errors); a
    /// refusal ends the transaction on both, and the tables are compared
    /// after it.
    fn script(&mut self, script: &str) -> (Outcome, String) {
        let end = |t: &mut Tester| {
            let _ = run(&mut t.c, "ROLLBACK");
            let _ = run(&mut t.reference, "ROLLBACK");
        };
        for sql in script.split("; ") {
            let got = run(&mut self.c, sql);
            if let Answer::Error(1235, why) = &got {
                *self.refusals.entry(shorten(why)).or_default() += 1;
                let why = format!("{sql}: {why}");
                // As after any refusal (see compare).
                let _ = run(&mut self.reference, "SELECT * FROM sextant_gen_refused");
                end(self);
                return (Outcome::Refused, why);
            }
            let want = run(&mut self.reference, sql);
            let same = match (&got, &want) {
                (Answer::Error(..), Answer::Error(..)) => true,
                (a, b) => a == b,
            };
            if !same {
                end(self);
                return (
                    Outcome::Different,
                    format!("{sql}: server {want:?}; sextant {got:?}"),
                );
            }
        }
        (Outcome::Same, String::new())
    }

    fn count(&mut self, constructs: &[String], o: Outcome) {
        let i = match o {
            Outcome::Same => 0,
            Outcome::Refused => 1,
            Outcome::Different => 2,
            Outcome::Invalid => return,
        };
        for k in constructs {
            self.counts.entry(k.clone()).or_default()[i] += 1;
        }
    }

    /// The tables sextant holds equal the reference: sharded ones summed
    /// over the groups, each copy of the global one, the single one where
    /// it lives.
    fn tables_agree(&mut self) -> Result<(), String> {
        let sum = |t: &str, cols: &str| {
            format!("SELECT COUNT(*), COALESCE(BIT_XOR(CRC32(CONCAT_WS('|', {cols}))), 0) FROM {t}")
        };
        for (t, cols, global) in [
            (
                "orders",
                "id, user_id, item_id, qty, price, status, IFNULL(note, '-')",
                false,
            ),
            (
                "events",
                "id, user_id, kind, IFNULL(amount, '-'), tag",
                false,
            ),
            ("items", "item_id, name, price, cat", true),
        ] {
            let q = sum(t, cols);
            let want: (u64, u64) = self.checks.query_first(&q).unwrap().unwrap();
            let mut total = (0u64, 0u64);
            for (p, _) in &lab().shards {
                let mut d = direct(*p);
                d.query_drop(format!("USE {DB}")).unwrap();
                let g: (u64, u64) = d.query_first(&q).unwrap().unwrap();
                if global && g != want {
                    return Err(format!("the copy of {t} on port {p} differs"));
                }
                total = (total.0 + g.0, total.1 ^ g.1);
            }
            if !global && total != want {
                return Err(format!(
                    "{t} differs: {total:?} against {want:?}; rows that differ: {}",
                    self.rows_that_differ(t, cols)
                ));
            }
        }
        Ok(())
    }
}

impl Tester {
    /// The first rows of a sharded table that differ from the reference.
    fn rows_that_differ(&mut self, t: &str, cols: &str) -> String {
        let q = format!("SELECT CONCAT_WS('|', {cols}) FROM {t}");
        let mut want: Vec<String> = self.checks.query(&q).unwrap();
        let mut got: Vec<String> = Vec::new();
        for (p, _) in &lab().shards {
            let mut d = direct(*p);
            d.query_drop(format!("USE {DB}")).unwrap();
            got.extend(d.query::<String, _>(&q).unwrap());
        }
        want.sort();
        got.sort();
        let only_want: Vec<&String> = want.iter().filter(|r| !got.contains(r)).take(5).collect();
        let only_got: Vec<&String> = got.iter().filter(|r| !want.contains(r)).take(5).collect();
        format!("server only {only_want:?}, sextant only {only_got:?}")
    }
}

fn show(a: &Answer) -> String {
    match a {
        Answer::Rows(r) if r.len() > 12 => format!("{} rows, first {:?}", r.len(), &r[..12]),
        other => format!("{other:?}"),
    }
}

/// A refusal's reason without its values, for counting.
fn shorten(why: &str) -> String {
    why.chars()
        .map(|c| if c.is_ascii_digit() { '#' } else { c })
        .take(110)
        .collect()
}

/// The constructs a statement uses, for the report.
fn constructs(sql: &str) -> Vec<String> {
    let u = sql.to_ascii_uppercase();
    let mut v = Vec::new();
    let mut add = |k: &str, yes: bool| {
        if yes {
            v.push(k.to_string());
        }
    };
    let first = u.split_whitespace().next().unwrap_or("");
    add(first, true);
    add("JOIN", u.contains(" JOIN "));
    add("LEFT JOIN", u.contains("LEFT JOIN"));
    add("RIGHT JOIN", u.contains("RIGHT JOIN"));
    add("global table (items)", u.contains("ITEMS"));
    add("single table (notes)", u.contains("NOTES"));
    add("subquery", u.matches("SELECT").count() > 1);
    add("EXISTS", u.contains("EXISTS"));
    add("IN (SELECT", u.contains("IN (SELECT"));
    add("GROUP BY", u.contains("GROUP BY"));
    add("WITH ROLLUP", u.contains("ROLLUP"));
    add("HAVING", u.contains("HAVING"));
    add("DISTINCT", u.contains("DISTINCT"));
    add("ORDER BY", u.contains("ORDER BY"));
    add("LIMIT", u.contains("LIMIT"));
    add("UNION", u.contains("UNION"));
    add("WITH (CTE)", u.starts_with("WITH"));
    add("window (OVER)", u.contains(" OVER "));
    add("GROUP_CONCAT", u.contains("GROUP_CONCAT"));
    add("AVG", u.contains("AVG("));
    add("COUNT(DISTINCT", u.contains("COUNT(DISTINCT"));
    add(
        "STDDEV/BIT_XOR",
        u.contains("STDDEV") || u.contains("BIT_XOR"),
    );
    add("NO PAD column (tag)", u.contains("TAG"));
    add(
        "session function",
        u.contains("ROW_COUNT")
            || u.contains("FOUND_ROWS")
            || u.contains("LAST_INSERT_ID")
            || u.contains("WARNING_COUNT")
            || u.contains("SHOW WARNINGS"),
    );
    v
}

pub const STRICT_GROUPING: &str =
    "SET SESSION sql_mode = 'ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'";

fn start() -> (Proxy, Tester) {
    let _ = LAB_ARGS.set(&["--shards", "4", "--replicas", "0"]);
    for (p, _) in &lab().shards {
        let mut d = direct(*p);
        d.query_drop(format!("DROP DATABASE IF EXISTS {DB}"))
            .unwrap();
        d.query_drop(format!("CREATE DATABASE {DB}")).unwrap();
    }
    let p = Setup {
        proxy: "default_group = \"data1\"",
        groups: Some(layout()),
        ..Default::default()
    }
    .start();
    let mut c = mysql::Conn::new(mysql::Opts::from_url(&p.url("app", "apppass", DB)).unwrap())
        .expect("connect through sextant");
    let mut reference = direct(lab().shards[0].0);
    reference
        .query_drop(format!("DROP DATABASE IF EXISTS {REF}"))
        .unwrap();
    reference
        .query_drop(format!("CREATE DATABASE {REF}"))
        .unwrap();
    reference.query_drop(format!("USE {REF}")).unwrap();
    for ddl in DDL {
        c.query_drop(ddl).unwrap_or_else(|e| panic!("{ddl}: {e}"));
        reference.query_drop(ddl).unwrap();
    }
    for sql in rows() {
        c.query_drop(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        reference.query_drop(&sql).unwrap();
    }
    // Statements whose answer the server may pick among rows (a column
    // neither grouped nor functionally dependent) are rejected on both.
    for conn in [&mut c, &mut reference] {
        conn.query_drop(STRICT_GROUPING).unwrap();
    }
    let mut checks = direct(lab().shards[0].0);
    checks.query_drop(format!("USE {REF}")).unwrap();
    let t = Tester {
        c,
        reference,
        checks,
        counts: BTreeMap::new(),
        refusals: BTreeMap::new(),
    };
    (p, t)
}

/// Reduces a SELECT that differs by dropping its parts while it still
/// differs.
fn reduce(t: &mut Tester, s: &Select) -> Select {
    let mut best = s.clone();
    'outer: loop {
        for smaller in best.smaller() {
            if smaller.limit.is_some() && !smaller.ordered() {
                continue;
            }
            if t.compare(&smaller.sql(), smaller.ordered()).0 == Outcome::Different {
                best = smaller;
                continue 'outer;
            }
        }
        return best;
    }
}

/// The tests share the groups' tables: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The server's own schemas are read where the session is, not from the
/// groups in turn (information_schema lists other tables in each); a
/// temporary table is the session's, on its connection in its group,
/// whatever its name: created there and nowhere else (it went to every
/// group, on connections that went back to the pools), read there while
/// it shadows a global table; a write naming it, which would go to every
/// copy of the global table, is refused, and a name the layout shards is
/// refused at CREATE.
#[test]
fn server_schemas_and_temporary_tables_stay_with_the_session() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (p, mut t) = start();
    let c = &mut t.c;
    let tables =
        format!("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '{DB}'");
    let counts: std::collections::BTreeSet<u64> = (0..12)
        .map(|_| c.query_first::<u64, _>(&tables).unwrap().unwrap())
        .collect();
    assert_eq!(counts.len(), 1, "information_schema answered {counts:?}");
    let global: u64 = c
        .query_first("SELECT COUNT(*) FROM items")
        .unwrap()
        .unwrap();
    assert!(global > 1);
    c.query_drop("CREATE TEMPORARY TABLE items (x INT)")
        .unwrap();
    for _ in 0..8 {
        let n: u64 = c
            .query_first("SELECT COUNT(*) FROM items")
            .unwrap()
            .unwrap();
        assert_eq!(
            n, 0,
            "the session read the global table, not its temporary one"
        );
    }
    let refused = |e: mysql::Error| code(&e).expect("a server error");
    let (n, msg) = refused(c.query_drop("INSERT INTO items VALUES (1)").unwrap_err());
    assert_eq!(n, 1235, "{msg}");
    // Other sessions find no temporary table on the pools' connections.
    let mut others: Vec<mysql::Conn> = (0..6)
        .map(|_| {
            mysql::Conn::new(mysql::Opts::from_url(&p.url("app", "apppass", DB)).unwrap()).unwrap()
        })
        .collect();
    for o in &mut others {
        for _ in 0..4 {
            let n: u64 = o
                .query_first("SELECT COUNT(*) FROM items")
                .unwrap()
                .unwrap();
            assert_eq!(n, global, "another session read a temporary table");
        }
    }
    c.query_drop("DROP TEMPORARY TABLE items").unwrap();
    let n: u64 = c
        .query_first("SELECT COUNT(*) FROM items")
        .unwrap()
        .unwrap();
    assert_eq!(n, global);
    let (n, msg) = refused(
        c.query_drop("CREATE TEMPORARY TABLE orders (x INT)")
            .unwrap_err(),
    );
    assert_eq!(n, 1235, "{msg}");
    assert!(msg.contains("temporary table"), "{msg}");
    t.tables_agree().expect("the tables as loaded");
}

#[test]
fn generated_statements_answer_as_one_server() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let seed: u64 = std::env::var("SEXTANT_GEN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_129);
    let count: usize = std::env::var("SEXTANT_GEN_COUNT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5_000);
    let (_p, mut t) = start();
    t.tables_agree().expect("the rows as loaded");
    let forms = grammar::forms();
    let mut r = StdRng::seed_from_u64(seed);
    let mut next_id = 10_000u64;
    let mut differences: Vec<String> = Vec::new();
    let mut tally = [0u64; 4];
    for n in 0..count {
        let roll = r.gen_range(0..100);
        let (sql, ordered, select) = match roll {
            0..=64 => {
                let s = grammar::select(&mut r, &forms);
                (s.sql(), s.ordered(), Some(s))
            }
            65..=74 => {
                let (sql, ordered) = grammar::other_read(&mut r);
                (sql, ordered, None)
            }
            75..=95 => (grammar::write(&mut r, &mut next_id, &forms), false, None),
            _ => (
                grammar::script(&mut r, &mut next_id, &forms).join("; "),
                false,
                None,
            ),
        };
        // Now and then under a setting that changes results.
        let setting = (r.gen_range(0..20) == 0).then(|| grammar::setting(&mut r));
        if let Some((set, _)) = &setting {
            for c in [&mut t.c, &mut t.reference] {
                c.query_drop(set).unwrap_or_else(|e| panic!("{set}: {e}"));
            }
        }
        let trace = std::env::var_os("SEXTANT_GEN_TRACE").is_some();
        if trace {
            eprintln!("#{n}: {sql}");
        }
        let (mut outcome, mut detail) = match roll {
            96.. => t.script(&sql),
            _ => t.compare(&sql, ordered),
        };
        if trace {
            eprintln!("  -> {outcome:?} {}", detail.lines().next().unwrap_or(""));
        }
        let writes = select.is_none() && roll >= 75;
        if writes && outcome != Outcome::Different {
            if let Err(e) = t.tables_agree() {
                outcome = Outcome::Different;
                detail = e;
            }
        }
        // The session's functions about the statement just run.
        let follow = r.gen_range(0..6) == 0;
        let mut func = grammar::session_function(&mut r);
        if func == "SHOW WARNINGS" && outcome == Outcome::Refused {
            // The reference's stand-in failure is not sextant's error.
            func = "SELECT @@warning_count";
        }
        let mut func_outcome = None;
        if follow && outcome != Outcome::Different {
            let (o, d) = t.compare(func, false);
            if o == Outcome::Different {
                func_outcome = Some(d);
            }
            t.count(&constructs(func), o);
        }
        if let Some((_, reset)) = &setting {
            for c in [&mut t.c, &mut t.reference] {
                c.query_drop(*reset)
                    .unwrap_or_else(|e| panic!("{reset}: {e}"));
            }
        }
        let mut keys = constructs(&sql);
        if roll >= 96 {
            keys.push("transaction script".into());
        }
        if let Some((set, _)) = &setting {
            keys.push(format!(
                "setting {}",
                set.split_whitespace().nth(2).unwrap_or("?")
            ));
        }
        t.count(&keys, outcome);
        tally[outcome as usize] += 1;
        if outcome == Outcome::Different {
            let small = match (&select, &setting) {
                (Some(s), None) => reduce(&mut t, s).sql(),
                _ => sql.clone(),
            };
            let under = setting
                .as_ref()
                .map(|(s, _)| format!(" (after {s})"))
                .unwrap_or_default();
            let line = format!("#{n}: {sql}{under}\n  reduced: {small}\n  {detail}");
            differences.push(line);
            if writes {
                // The tables differ from here on: stop.
                break;
            }
        }
        if let Some(d) = func_outcome {
            tally[Outcome::Different as usize] += 1;
            differences.push(format!("#{n}: {func} after {sql}\n  {d}"));
        }
        if differences.len() >= 20 {
            break;
        }
    }
    let mut report = format!(
        "seed {seed}, {count} statements: {} same, {} refused, {} different, {} rejected by the server too\n\nper construct (same / refused / different):\n",
        tally[0], tally[1], tally[3], tally[2]
    );
    for (k, [s, rf, d]) in &t.counts {
        report += &format!("  {k:<28} {s:>7} {rf:>7} {d:>5}\n");
    }
    report += "\nrefusals by reason:\n";
    for (why, n) in &t.refusals {
        report += &format!("  {n:>6}  {why}\n");
    }
    eprintln!("{report}");
    if let Ok(path) = std::env::var("SEXTANT_GEN_REPORT") {
        std::fs::write(&path, &report).expect("write the report");
    }
    assert!(
        differences.is_empty(),
        "{} statement(s) answered differently from one server:\n{}",
        differences.len(),
        differences.join("\n")
    );
    assert!(tally[0] > count as u64 / 4, "too few compared: {tally:?}");
}
