//! Sharding against a real lab of four groups (each a primary and a
//! replica): rows land where Cetus would put them (checked on each
//! primary directly), reads by key find them, reads over several groups
//! return every row once, DDL reaches every group (and says which ones
//! when it fails part way), and what this version cannot do atomically or
//! merge correctly is refused with 1235, having changed nothing.

mod common;
use common::*;
use mysql::prelude::Queryable;
use sextant_sharding::placement::cetus_str_hash;
use std::collections::BTreeMap;

const DB: &str = "sextant_shard";

/// A database whose tables have a full copy in every group.
const GLOBALS: &str = "sextant_globals";

fn layout_groups() -> String {
    let mut g = shard_groups("");
    g += &format!(
        r#"
[xa]
log_dir = "{}"

[sharding]
unlisted = "default_group"
merge_memory_mb = 8

[[sharding.vdb]]
id = 1
type = "int"
method = "hash"
num = 4
partitions = {{ data1 = [0], data2 = [1], data3 = [2], data4 = [3] }}

[[sharding.vdb]]
id = 2
type = "str"
method = "hash"
num = 4
partitions = {{ data1 = [0], data2 = [1], data3 = [2], data4 = [3] }}

[[sharding.single_tables]]
db = "{DB}"
table = "settings"
group = "data2"

[sharding.default]
{DB} = "data1"

[sharding.all]
{GLOBALS} = ["data1", "data2", "data3", "data4"]
"#,
        std::env::temp_dir()
            .join(format!("sextant-xa-log-{}", std::process::id()))
            .display()
    );
    // Ids for rows inserted without them.
    for table in ["ids", "tickets"] {
        g += &format!(
            "[[sharding.sequence]]\ndb = \"{DB}\"\ntable = \"{table}\"\ncolumn = \"id\"\nblock = 10\n"
        );
    }
    // The sharded tables: (vdb, database, table, shard key).
    for (vdb, db, table, key) in [
        (1, DB, "orders", "customer_id"),
        (1, DB, "audit", "customer_id"),
        (1, DB, "facts", "customer_id"),
        (1, DB, "big", "customer_id"),
        (1, DB, "ids", "id"),
        (1, DB, "tickets", "customer_id"),
        (2, DB, "tokens", "token"),
        (1, "sbtest", "sbtest1", "id"),
        (1, "sbtest", "sbtest2", "id"),
    ] {
        g += &format!(
            "[[sharding.table]]\nvdb = {vdb}\ndb = \"{db}\"\ntable = \"{table}\"\npkey = \"{key}\"\n"
        );
    }
    g
}

/// The tests share the groups' tables: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn start() -> (std::sync::MutexGuard<'static, ()>, Proxy) {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _ = LAB_ARGS.set(&["--shards", "4", "--replicas", "1"]);
    let lab = lab();
    for (p, _) in &lab.shards {
        direct(*p)
            .query_drop(format!("CREATE DATABASE IF NOT EXISTS {DB}"))
            .unwrap();
        direct(*p)
            .query_drop("CREATE DATABASE IF NOT EXISTS sbtest")
            .unwrap();
    }
    sync_shards();
    let p = Setup {
        proxy: "default_group = \"data1\"",
        groups: Some(layout_groups()),
        ..Default::default()
    }
    .start();
    (guard, p)
}

/// Waits until each group's replica has what its primary has.
fn sync_shards() {
    for (p, replicas) in &lab().shards {
        let mut pc = direct(*p);
        let pos: String = pc.query_first("SELECT @@gtid_binlog_pos").unwrap().unwrap();
        for r in replicas {
            let mut rc = direct(*r);
            let _: Option<i64> = rc
                .query_first(format!("SELECT MASTER_GTID_WAIT('{pos}', 10)"))
                .unwrap();
        }
    }
}

fn conn(p: &Proxy) -> mysql::Conn {
    mysql::Conn::new(mysql::Opts::from_url(&p.url("app", "apppass", DB)).unwrap())
        .expect("connect through sextant")
}

fn code(e: mysql::Error) -> (u16, String) {
    match e {
        mysql::Error::MySqlError(e) => (e.code, e.message),
        other => panic!("not a server error: {other}"),
    }
}

/// Each primary's rows of `sql` (run directly), by group number.
fn per_group<T: mysql::prelude::FromRow>(sql: &str) -> Vec<Vec<T>> {
    lab()
        .shards
        .iter()
        .map(|(p, _)| {
            let mut c = direct(*p);
            c.query_drop(format!("USE {DB}")).unwrap();
            c.query(sql).unwrap()
        })
        .collect()
}

#[test]
fn rows_go_where_cetus_puts_them_and_reads_find_them() {
    let (_serial, p) = start();
    let mut c = conn(&p);
    c.query_drop("DROP TABLE IF EXISTS orders").unwrap();
    c.query_drop(
        "CREATE TABLE orders (id INT PRIMARY KEY, customer_id INT NOT NULL, amount DECIMAL(10,2), note VARCHAR(20))",
    )
    .unwrap();
    // The DDL reached every group.
    for tables in per_group::<String>("SHOW TABLES LIKE 'orders'") {
        assert_eq!(tables, ["orders"]);
    }
    let mut want: BTreeMap<i64, i64> = BTreeMap::new();
    for id in 0..120i64 {
        let customer = (id * 7919) % 53 - 20;
        want.insert(id, customer);
        c.query_drop(format!(
            "INSERT INTO orders (id, customer_id, amount, note) VALUES ({id}, {customer}, {id}.25, 'n{id}')"
        ))
        .unwrap();
    }
    // Several rows of one group in one statement.
    c.query_drop("INSERT INTO orders (customer_id, id, amount) VALUES (1, 1001, 1), (5, 1002, 2), (-3, 1003, 3)")
        .unwrap();
    want.extend([(1001, 1), (1002, 5), (1003, -3)]);
    // Each row is on exactly the group its key hashes to.
    let placed = per_group::<(i64, i64)>("SELECT id, customer_id FROM orders");
    let mut seen = 0;
    for (g, rows) in placed.iter().enumerate() {
        for (id, customer) in rows {
            assert_eq!(want.get(id), Some(customer));
            assert_eq!(
                customer.rem_euclid(4) as usize,
                g,
                "customer {customer} in data{}",
                g + 1
            );
            seen += 1;
        }
    }
    assert_eq!(seen, want.len());
    sync_shards();
    // Reads by key find each customer's rows, and only them.
    for customer in -20..33i64 {
        let got: Vec<i64> = c
            .query(format!(
                "SELECT id FROM orders WHERE customer_id = {customer} ORDER BY id"
            ))
            .unwrap();
        let expect: Vec<i64> = want
            .iter()
            .filter(|(_, c)| **c == customer)
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(got, expect, "customer {customer}");
        let got: Vec<i64> = c
            .exec(
                "SELECT id FROM orders WHERE customer_id = ? ORDER BY id",
                (customer,),
            )
            .unwrap();
        assert_eq!(got, expect, "prepared, customer {customer}");
    }
    // A read over every group returns every row once.
    let mut all: Vec<(i64, i64)> = c.query("SELECT id, customer_id FROM orders").unwrap();
    all.sort();
    assert_eq!(all, want.iter().map(|(a, b)| (*a, *b)).collect::<Vec<_>>());
    // Over some groups (IN of keys in two groups).
    let mut some: Vec<i64> = c
        .query("SELECT id FROM orders WHERE customer_id IN (1, 2, 5)")
        .unwrap();
    some.sort();
    let expect: Vec<i64> = want
        .iter()
        .filter(|(_, c)| [1, 2, 5].contains(*c))
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(some, expect);
    // An empty result over several groups still has its columns.
    let none: Vec<(i64, String)> = c
        .query("SELECT id, note FROM orders WHERE amount < 0")
        .unwrap();
    assert!(none.is_empty());
    // A server error in a read over several groups is the server's.
    let (errno, msg) = code(c.query_drop("SELECT nosuchcolumn FROM orders").unwrap_err());
    assert_eq!(errno, 1054, "{msg}");
    // A write by key changes one group.
    c.query_drop("UPDATE orders SET note = 'changed' WHERE customer_id = 6")
        .unwrap();
    let changed = per_group::<i64>("SELECT COUNT(*) FROM orders WHERE note = 'changed'");
    let expect = want.values().filter(|c| **c == 6).count() as i64;
    assert_eq!(
        changed.iter().map(|v| v[0]).collect::<Vec<_>>(),
        [0, 0, expect, 0]
    );
}

#[test]
fn string_keys_follow_cetus_string_hash() {
    let (_serial, p) = start();
    let mut c = conn(&p);
    c.query_drop("DROP TABLE IF EXISTS tokens").unwrap();
    c.query_drop("CREATE TABLE tokens (token VARCHAR(40) PRIMARY KEY, v INT)")
        .unwrap();
    let tokens: Vec<String> = (0..40)
        .map(|i| format!("tok-{i}-{}", "x".repeat(i % 13)))
        .chain(["it's".to_string(), "a\\b".to_string()])
        .collect();
    // Half as text, half prepared (the key a parameter).
    for (i, t) in tokens.iter().enumerate() {
        if i % 2 == 0 {
            c.exec_drop("INSERT INTO tokens (token, v) VALUES (?, ?)", (t, i))
                .unwrap();
        } else {
            let quoted = t.replace('\\', "\\\\").replace('\'', "''");
            c.query_drop(format!(
                "INSERT INTO tokens (token, v) VALUES ('{quoted}', {i})"
            ))
            .unwrap();
        }
    }
    let placed = per_group::<String>("SELECT token FROM tokens");
    let mut n = 0;
    for (g, rows) in placed.iter().enumerate() {
        for t in rows {
            assert_eq!((cetus_str_hash(t.as_bytes()) % 4) as usize, g, "{t:?}");
            n += 1;
        }
    }
    assert_eq!(n, tokens.len());
    sync_shards();
    for (i, t) in tokens.iter().enumerate() {
        let quoted = t.replace('\\', "\\\\").replace('\'', "''");
        let v: Option<i64> = c
            .query_first(format!("SELECT v FROM tokens WHERE token = '{quoted}'"))
            .unwrap();
        assert_eq!(v, Some(i as i64), "{t:?}");
        let v: Option<i64> = c
            .exec_first("SELECT v FROM tokens WHERE token = ?", (t,))
            .unwrap();
        assert_eq!(v, Some(i as i64), "prepared {t:?}");
    }
    // A prepared read for two groups: both rows, in the binary protocol.
    let group = |t: &String| cetus_str_hash(t.as_bytes()) % 4;
    let a = &tokens[0];
    let b = tokens.iter().find(|t| group(t) != group(a)).unwrap();
    let mut got: Vec<(String, i64)> = c
        .exec(
            "SELECT token, v FROM tokens WHERE token IN (?, ?) ORDER BY v",
            (a, b),
        )
        .unwrap();
    got.sort();
    let mut want: Vec<(String, i64)> = [a, b]
        .iter()
        .map(|t| {
            let i = tokens.iter().position(|x| x == *t).unwrap() as i64;
            (t.to_string(), i)
        })
        .collect();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn what_cannot_be_done_right_is_refused_and_changes_nothing() {
    let (_serial, p) = start();
    let mut c = conn(&p);
    c.query_drop("DROP TABLE IF EXISTS orders").unwrap();
    c.query_drop(
        "CREATE TABLE orders (id INT PRIMARY KEY, customer_id INT NOT NULL, note VARCHAR(20))",
    )
    .unwrap();
    c.query_drop("INSERT INTO orders (id, customer_id, note) VALUES (1, 1, 'a')")
        .unwrap();
    c.query_drop("INSERT INTO orders (id, customer_id, note) VALUES (2, 2, 'b')")
        .unwrap();
    let refused = [
        // A write to several groups whose rows depend on every group at
        // once (tests/xa.rs has the ones that run).
        "DELETE FROM orders WHERE id > 0 LIMIT 1",
        "UPDATE orders SET note = 'x' LIMIT 1",
        // Moving a row to another group.
        "UPDATE orders SET customer_id = 2 WHERE customer_id = 1",
        // Merges sextant does not make exactly.
        "SELECT SUM(id) / COUNT(*) / 2 FROM orders",
        "SELECT GROUP_CONCAT(note) FROM orders",
        "SELECT COUNT(DISTINCT note), COUNT(DISTINCT id) FROM orders",
        "SELECT note, COUNT(*) FROM orders GROUP BY note HAVING COUNT(*) > 1.5",
        // An ORDER BY sextant cannot merge by.
        "SELECT * FROM orders ORDER BY FIELD(id, 2, 1)",
        // No key to place the row by (without a column list the table's
        // column order gives it: tests/sharding_differential.rs).
        "INSERT INTO orders (id, customer_id) VALUES (6, NULL)",
        // A join of single and sharded tables in different groups.
        "SELECT * FROM orders o JOIN settings s ON s.k = o.note",
    ];
    for sql in refused {
        let (errno, msg) = code(c.query_drop(sql).unwrap_err());
        assert_eq!(errno, 1235, "{sql}: {msg}");
        assert!(msg.starts_with("sextant (sharding): "), "{sql}: {msg}");
    }
    // Nothing changed anywhere.
    let rows = per_group::<(i64, i64, String)>("SELECT id, customer_id, note FROM orders");
    let mut all: Vec<_> = rows.into_iter().flatten().collect();
    all.sort();
    assert_eq!(all, [(1, 1, "a".to_string()), (2, 2, "b".to_string())]);
    // Keys that keep the row in its group may be set.
    c.query_drop("UPDATE orders SET customer_id = 5 WHERE customer_id = 1")
        .unwrap();
}

#[test]
fn a_transaction_runs_in_one_group() {
    let (_serial, p) = start();
    let mut c = conn(&p);
    c.query_drop("DROP TABLE IF EXISTS audit").unwrap();
    c.query_drop("CREATE TABLE audit (customer_id INT PRIMARY KEY, n INT)")
        .unwrap();
    for k in 1..=8 {
        c.query_drop(format!(
            "INSERT INTO audit (customer_id, n) VALUES ({k}, 0)"
        ))
        .unwrap();
    }
    // Keys 1 and 5 are in one group (data2): one transaction.
    c.query_drop("BEGIN").unwrap();
    c.query_drop("UPDATE audit SET n = n + 1 WHERE customer_id = 1")
        .unwrap();
    c.query_drop("UPDATE audit SET n = n + 1 WHERE customer_id = 5")
        .unwrap();
    c.query_drop("COMMIT").unwrap();
    // Keys 1 and 2 are in two groups: a consistent-snapshot transaction
    // stays in one group (a plain one spans groups, see tests/xa.rs), so
    // the second statement is refused, and ROLLBACK undoes the first.
    c.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        .unwrap();
    c.query_drop("UPDATE audit SET n = n + 10 WHERE customer_id = 1")
        .unwrap();
    let (errno, msg) = code(
        c.query_drop("UPDATE audit SET n = n + 10 WHERE customer_id = 2")
            .unwrap_err(),
    );
    assert_eq!(errno, 1235, "{msg}");
    assert!(msg.contains("data2") && msg.contains("data3"), "{msg}");
    c.query_drop("ROLLBACK").unwrap();
    let n = per_group::<(i64, i64)>("SELECT customer_id, n FROM audit");
    let mut all: Vec<_> = n.into_iter().flatten().collect();
    all.sort();
    let expect: Vec<(i64, i64)> = (1..=8).map(|k| (k, i64::from(k == 1 || k == 5))).collect();
    assert_eq!(all, expect);
    // An empty transaction, and statements naming no table inside one.
    c.query_drop("BEGIN").unwrap();
    let one: Option<i64> = c.query_first("SELECT 1").unwrap();
    assert_eq!(one, Some(1));
    c.query_drop("COMMIT").unwrap();
    // A read in a transaction sees the transaction's own write.
    c.query_drop("BEGIN").unwrap();
    c.query_drop("UPDATE audit SET n = 42 WHERE customer_id = 3")
        .unwrap();
    let n: Option<i64> = c
        .query_first("SELECT n FROM audit WHERE customer_id = 3")
        .unwrap();
    assert_eq!(n, Some(42));
    c.query_drop("ROLLBACK").unwrap();
}

#[test]
fn ddl_reaches_every_group_or_says_where_it_stopped() {
    let (_serial, p) = start();
    let mut c = conn(&p);
    c.query_drop("DROP TABLE IF EXISTS audit").unwrap();
    c.query_drop("CREATE TABLE audit (customer_id INT PRIMARY KEY, n INT)")
        .unwrap();
    c.query_drop("ALTER TABLE audit ADD COLUMN note VARCHAR(10)")
        .unwrap();
    for cols in per_group::<String>(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = 'audit' AND column_name = 'note'",
    ) {
        assert_eq!(cols, ["note"]);
    }
    // The table missing in data3: the ALTER stops there and says so.
    let (p3, _) = lab().shards[2];
    direct(p3)
        .query_drop(format!("DROP TABLE {DB}.audit"))
        .unwrap();
    let (errno, msg) = code(
        c.query_drop("ALTER TABLE audit ADD COLUMN more INT")
            .unwrap_err(),
    );
    assert_eq!(errno, 9005, "{msg}");
    assert!(
        msg.contains("ran on groups data1, data2") && msg.contains("failed on group data3"),
        "{msg}"
    );
    let more = per_group::<i64>(
        "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = 'audit' AND column_name = 'more'",
    );
    assert_eq!(more.iter().map(|v| v[0]).collect::<Vec<_>>(), [1, 1, 0, 0]);
    // The admin port compares the groups' definitions.
    let rows: Vec<(String, String, String)> = p
        .admin()
        .query(format!("SHOW SHARD SCHEMA DIFF {DB}.audit"))
        .unwrap();
    let status: Vec<(&str, &str)> = rows
        .iter()
        .map(|(g, s, _)| (g.as_str(), s.split(':').next().unwrap_or("")))
        .collect();
    assert_eq!(
        status,
        [
            ("data1", "same"),
            ("data2", "same"),
            ("data3", "missing"),
            ("data4", "differs")
        ],
        "{rows:?}"
    );
    assert!(rows[0].2.contains("`more`") && !rows[3].2.contains("`more`"));
    c.query_drop("DROP TABLE IF EXISTS audit").unwrap();
}

#[test]
fn explain_route_shows_the_sharded_plan() {
    let (_serial, p) = start();
    let mut a = p.admin();
    let mut explain = |sql: &str| -> (String, String) {
        let row: mysql::Row = a
            .query_first(format!("EXPLAIN ROUTE IN DATABASE {DB} {sql}"))
            .unwrap()
            .unwrap();
        (
            row.get::<String, _>("group").unwrap(),
            row.get::<String, _>("sharding").unwrap(),
        )
    };
    let (g, s) = explain("SELECT * FROM orders WHERE customer_id = 6");
    assert_eq!(g, "data3");
    assert!(s.starts_with("one group: data3"), "{s}");
    let (g, s) = explain("SELECT * FROM orders WHERE customer_id IN (1, 2)");
    assert_eq!(g, "data2, data3");
    assert!(s.contains("rows concatenated"), "{s}");
    let (_, s) = explain("SELECT AVG(id) FROM orders");
    assert!(
        s.contains("SELECT AVG(id), SUM(id), COUNT(id) FROM orders")
            && s.contains("AVG from SUM and COUNT"),
        "{s}"
    );
    let (_, s) =
        explain("SELECT note, COUNT(*) AS n FROM orders GROUP BY note ORDER BY n DESC LIMIT 3");
    assert!(
        s.contains("GROUP BY note ORDER BY note") && s.contains("held and sorted by 1 item(s)"),
        "{s}"
    );
    let (_, s) = explain("SELECT AVG(id) * 2 FROM orders");
    assert!(s.starts_with("refused with 1235: "), "{s}");
    let (_, s) = explain("SELECT id FROM orders ORDER BY note LIMIT 10 OFFSET 20");
    assert!(
        s.contains("LIMIT 30")
            && s.contains("WEIGHT_STRING(note)")
            && s.contains("20 skipped, then at most 10"),
        "{s}"
    );
    let (g, s) = explain("ALTER TABLE orders ADD COLUMN x INT");
    assert_eq!(g, "data1, data2, data3, data4");
    assert!(s.contains("primary in turn"), "{s}");
    let (g, s) = explain("SELECT * FROM settings");
    assert_eq!(g, "data2");
    assert!(s.starts_with("one group"), "{s}");
    let (g, s) = explain("SELECT 1");
    assert_eq!(g, "data1");
    assert!(s.contains("no table of the layout"), "{s}");
}

/// xorshift: the same corpus every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[self.below(v.len() as u64) as usize]
    }
}

type Rows = Vec<Vec<Option<String>>>;

fn rows_of(c: &mut mysql::Conn, sql: &str) -> Result<Rows, (u16, String)> {
    Ok(text_rows(c.query(sql).map_err(code)?))
}

/// A differential corpus's count: queries whose answers through sextant
/// equal one server's, and queries sextant refused (1235, by message).
#[derive(Default)]
struct Tally {
    compared: usize,
    refused: usize,
    forms: std::collections::BTreeSet<String>,
}

impl Tally {
    /// Compares sextant's answer with the reference's, cell by cell through
    /// `canon`, row for row when `ordered` (else as sets); counts a
    /// refusal. Returns whether the answers were compared.
    fn check(
        &mut self,
        what: &str,
        got: Result<Rows, (u16, String)>,
        want: Rows,
        ordered: bool,
        canon: fn(&Option<String>) -> Option<String>,
    ) -> bool {
        match got {
            Ok(got) => {
                let canon = |rows: Rows| -> Rows {
                    rows.iter().map(|r| r.iter().map(canon).collect()).collect()
                };
                let (mut got, mut want) = (canon(got), canon(want));
                if !ordered {
                    got.sort();
                    want.sort();
                }
                assert_eq!(got, want, "{what}");
                self.compared += 1;
                true
            }
            Err((1235, msg)) => {
                self.refused += 1;
                self.forms.insert(msg);
                false
            }
            Err(e) => panic!("{what}: {e:?}"),
        }
    }

    /// Prints the count, and fails unless `enough` holds of it.
    fn report(self, corpus: &str, detail: &str, enough: bool) {
        let Tally {
            compared,
            refused,
            forms,
        } = self;
        eprintln!("{corpus}: {compared} identical ({detail}), {refused} refused: {forms:?}");
        assert!(
            enough,
            "{corpus}: {compared} compared ({detail}), {refused} refused: {forms:?}"
        );
    }
}

#[test]
fn merged_reads_equal_one_server() {
    let (_serial, p) = start();
    let mut c = conn(&p);
    // The reference: the same rows in one unsharded database.
    let (p1, _) = lab().shards[0];
    let mut reference = direct(p1);
    reference
        .query_drop("DROP DATABASE IF EXISTS sextant_unsharded")
        .unwrap();
    reference
        .query_drop("CREATE DATABASE sextant_unsharded")
        .unwrap();
    reference.query_drop("USE sextant_unsharded").unwrap();
    let ddl = "CREATE TABLE facts (id INT PRIMARY KEY, customer_id INT NOT NULL, amount DECIMAL(14,3), note VARCHAR(20), created DATETIME, score DOUBLE, KEY (customer_id))";
    reference.query_drop(ddl).unwrap();
    c.query_drop("DROP TABLE IF EXISTS facts").unwrap();
    c.query_drop(ddl).unwrap();
    let notes = [
        "apple", "Apple", "APPLE", "banana", "Banana", "cherry", "élan", "elan", "zeta", "Zeta ",
        "",
    ];
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    for id in 0..400 {
        let customer = rng.below(40) as i64 - 10;
        let amount = match rng.below(8) {
            0 => "NULL".to_string(),
            _ => format!("{}.{:03}", rng.below(2000) as i64 - 1000, rng.below(1000)),
        };
        let note = match rng.below(9) {
            0 => "NULL".to_string(),
            _ => format!("'{}'", rng.pick(&notes)),
        };
        let created = match rng.below(7) {
            0 => "NULL".to_string(),
            _ => format!(
                "'202{}-{:02}-{:02} {:02}:00:00'",
                rng.below(5),
                1 + rng.below(12),
                1 + rng.below(28),
                rng.below(24)
            ),
        };
        let score = match rng.below(6) {
            0 => "NULL".to_string(),
            _ => format!("{}", (rng.below(100000) as f64 - 50000.0) / 7.0),
        };
        let sql = format!(
            "INSERT INTO facts (id, customer_id, amount, note, created, score) VALUES ({id}, {customer}, {amount}, {note}, {created}, {score})"
        );
        c.query_drop(&sql).unwrap();
        reference.query_drop(&sql).unwrap();
    }
    sync_shards();
    let cols = ["id", "customer_id", "amount", "note", "created", "score"];
    let preds = [
        "",
        "WHERE customer_id = {k}",
        "WHERE customer_id IN ({k}, {k2}, {k3})",
        "WHERE customer_id BETWEEN {k} AND {k2}",
        "WHERE amount > {d}",
        "WHERE amount IS NULL OR note IS NULL",
        "WHERE note = 'apple'",
        "WHERE note LIKE 'b%' OR customer_id = {k}",
        "WHERE created >= '2022-06-01' AND score < {d}",
        "WHERE customer_id = {k} OR customer_id = {k2}",
    ];
    let keys = ["amount", "note", "created", "score", "customer_id", "id"];
    let (mut ordered, mut aggregated) = (0, 0);
    let mut tally = Tally::default();
    let aggregates = [
        "COUNT(*)",
        "COUNT(note)",
        "COUNT(created)",
        "SUM(amount)",
        "SUM(customer_id)",
        "MIN(id)",
        "MAX(amount)",
        "MIN(created)",
        "MAX(score)",
        "MIN(amount)",
        // Refused today over several groups: strings by collation, AVG.
        // (Not SUM of the DOUBLE column: two servers may add the same
        // rows in another order and round differently.)
        "MIN(note)",
        "AVG(amount)",
    ];
    for n in 0..600 {
        // The select list first, then the predicate, then ORDER BY and
        // LIMIT (the draws in this order give the same corpus every run).
        let aggregate = rng.below(5) == 0;
        let select: Vec<&str> = match aggregate {
            true => (0..1 + rng.below(4))
                .map(|_| rng.pick(&aggregates))
                .collect(),
            false => {
                let mut v: Vec<&str> = cols.iter().copied().filter(|_| rng.below(3) > 0).collect();
                if v.is_empty() {
                    v.push("id");
                }
                v
            }
        };
        let k = rng.below(40) as i64 - 10;
        let pred = rng
            .pick(&preds)
            .replace("{k}", &k.to_string())
            .replace("{k2}", &(k + 1 + rng.below(5) as i64).to_string())
            .replace("{k3}", &(rng.below(40) as i64 - 10).to_string())
            .replace("{d}", &format!("{}.5", rng.below(1000) as i64 - 500));
        // An ORDER BY that ends in id is a total order: both sides must
        // agree row for row.
        let order = match aggregate || rng.below(4) == 0 {
            true => String::new(),
            false => {
                let mut items: Vec<String> = (0..1 + rng.below(2))
                    .map(|_| {
                        format!(
                            "{}{}",
                            rng.pick(&keys),
                            if rng.below(2) == 0 { " DESC" } else { "" }
                        )
                    })
                    .collect();
                items.push("id".into());
                format!("ORDER BY {}", items.join(", "))
            }
        };
        let limit = match (order.is_empty(), if aggregate { 3 } else { rng.below(4) }) {
            (false, 0) => format!("LIMIT {}", rng.below(30)),
            (false, 1) => format!("LIMIT {} OFFSET {}", 1 + rng.below(20), rng.below(300)),
            (false, 2) => format!("LIMIT {}, {}", rng.below(50), 1 + rng.below(10)),
            _ => String::new(),
        };
        let sql = format!(
            "SELECT {} FROM facts {pred} {order} {limit}",
            select.join(", ")
        );
        let want = rows_of(&mut reference, &sql).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
        let got = rows_of(&mut c, &sql);
        if tally.check(
            &format!("query {n}: {sql}"),
            got,
            want,
            !order.is_empty(),
            Clone::clone,
        ) {
            ordered += usize::from(!order.is_empty());
            aggregated += usize::from(aggregate);
        }
    }
    let enough = tally.compared >= 500 && aggregated >= 50;
    let detail = format!("{ordered} ordered, {aggregated} aggregates");
    tally.report("plain", &detail, enough);
    grouped_reads_equal_one_server(&mut c, &mut reference);
    other_tables_and_prepared_equal_one_server(&mut c, &mut reference);
    // Deep OFFSET streams: nothing more than a row per group is held.
    let want = rows_of(
        &mut reference,
        "SELECT id FROM facts ORDER BY note DESC, id LIMIT 3 OFFSET 390",
    )
    .unwrap();
    let got = rows_of(
        &mut c,
        "SELECT id FROM facts ORDER BY note DESC, id LIMIT 3 OFFSET 390",
    )
    .unwrap();
    assert_eq!(got, want);
    reference
        .query_drop("DROP DATABASE sextant_unsharded")
        .unwrap();
}

/// Reads joining a global table (a copy in every group), reads of a
/// single table, and prepared statements, over the same rows sharded and
/// not.
fn other_tables_and_prepared_equal_one_server(c: &mut mysql::Conn, reference: &mut mysql::Conn) {
    // The global table: the same rows in each group's copy (loaded there
    // directly: a write through sextant to every copy needs a distributed
    // transaction); the reference reads data1's copy.
    for (port, _) in &lab().shards {
        let mut d = direct(*port);
        d.query_drop(format!("CREATE DATABASE IF NOT EXISTS {GLOBALS}"))
            .unwrap();
        d.query_drop(format!("DROP TABLE IF EXISTS {GLOBALS}.regions"))
            .unwrap();
        d.query_drop(format!(
            "CREATE TABLE {GLOBALS}.regions (id INT PRIMARY KEY, name VARCHAR(20), rate DECIMAL(6,2))"
        ))
        .unwrap();
        d.query_drop(format!(
            "INSERT INTO {GLOBALS}.regions SELECT seq, ELT(1 + seq % 4, 'north', 'South', 'east', 'West'), seq / 8 FROM seq_0_to_24"
        ))
        .unwrap();
    }
    reference
        .query_drop("DROP TABLE IF EXISTS settings")
        .unwrap();
    c.query_drop("DROP TABLE IF EXISTS settings").unwrap();
    let ddl = "CREATE TABLE settings (k VARCHAR(20) PRIMARY KEY, v INT)";
    reference.query_drop(ddl).unwrap();
    c.query_drop(ddl).unwrap();
    for (k, v) in [("a", 1), ("B", 2), ("c", 3)] {
        let sql = format!("INSERT INTO settings VALUES ('{k}', {v})");
        reference.query_drop(&sql).unwrap();
        c.query_drop(&sql).unwrap();
    }
    sync_shards();
    let g = GLOBALS;
    let mut rng = Rng(0x5eed_4444_0003_0004);
    let templates = [
        format!("SELECT f.id, f.note, f.score, f.created, r.name FROM facts f JOIN {g}.regions r ON r.id = f.customer_id WHERE f.customer_id IN ({{k}}, {{k2}}) ORDER BY f.id"),
        format!("SELECT f.id, r.name, r.rate FROM facts f JOIN {g}.regions r ON r.id = f.customer_id WHERE r.rate > {{r}} ORDER BY r.name, f.id LIMIT {{n}}"),
        format!("SELECT r.name, COUNT(*), SUM(f.amount), AVG(f.customer_id) FROM facts f JOIN {g}.regions r ON r.id = f.customer_id GROUP BY r.name ORDER BY 2 DESC, r.name"),
        format!("SELECT COUNT(*), MAX(f.note) FROM facts f LEFT JOIN {g}.regions r ON r.id = f.customer_id WHERE r.id IS NULL"),
        format!("SELECT DISTINCT r.name FROM facts f JOIN {g}.regions r ON r.id = f.customer_id WHERE f.amount > {{d}}"),
        format!("SELECT name, rate FROM {g}.regions WHERE id BETWEEN {{k}} AND {{k2}} ORDER BY id"),
        format!("SELECT s.k, s.v, r.name FROM settings s JOIN {g}.regions r ON r.id = s.v ORDER BY s.k"),
        "SELECT k, v FROM settings WHERE v >= {n} ORDER BY k".to_string(),
        "SELECT id, amount, note FROM facts WHERE customer_id = {k} ORDER BY id".to_string(),
        "SELECT customer_id, COUNT(*), SUM(amount) FROM facts WHERE customer_id IN ({k}, {k2}) GROUP BY customer_id".to_string(),
        "SELECT id, created FROM facts WHERE customer_id BETWEEN {k} AND {k2} ORDER BY created DESC, id LIMIT {n}".to_string(),
    ];
    let mut prepared = 0;
    let mut tally = Tally::default();
    for n in 0..200 {
        let k = rng.below(30) as i64 - 5;
        let template = rng.pick(&templates.iter().map(String::as_str).collect::<Vec<_>>());
        let values = [
            ("{k}", mysql::Value::Int(k)),
            ("{k2}", mysql::Value::Int(k + 1 + rng.below(4) as i64)),
            ("{n}", mysql::Value::Int(1 + rng.below(8) as i64)),
            ("{r}", mysql::Value::Double(rng.below(3) as f64 + 0.5)),
            ("{d}", mysql::Value::Double(rng.below(1000) as f64 - 499.5)),
        ];
        // As text, the values written in; prepared, each a `?` bound to
        // its value (in the order they appear).
        let mut sql = template.to_string();
        let mut ps = template.to_string();
        let mut params = Vec::new();
        while let Some((at, name, v)) = values
            .iter()
            .filter_map(|(name, v)| ps.find(name).map(|at| (at, *name, v)))
            .min_by_key(|(at, ..)| *at)
        {
            ps.replace_range(at..at + name.len(), "?");
            params.push(v.clone());
        }
        for (name, v) in &values {
            sql = sql.replace(name, &v.as_sql(true));
        }
        let as_prepared = rng.below(2) == 0;
        let run = |conn: &mut mysql::Conn| -> Result<Rows, (u16, String)> {
            match as_prepared {
                false => rows_of(conn, &sql),
                true => Ok(text_rows(
                    conn.exec(&ps, mysql::Params::Positional(params.clone()))
                        .map_err(code)?,
                )),
            }
        };
        let want = run(reference).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
        let what = format!("query {n} (prepared: {as_prepared}): {sql}");
        if tally.check(&what, run(c), want, sql.contains("ORDER BY"), fold) {
            prepared += usize::from(as_prepared);
        }
    }
    let enough = tally.compared >= 100 && prepared >= 30;
    tally.report(
        "global, single, prepared",
        &format!("{prepared} prepared"),
        enough,
    );
}

/// A value as the column's collation compares it (utf8mb4_general_ci,
/// PAD SPACE): a group of 'apple' and 'Apple' may be named by either, on
/// one server as on several.
fn fold(v: &Option<String>) -> Option<String> {
    v.as_ref()
        .map(|s| s.to_lowercase().replace('é', "e").trim_end().to_string())
}

/// GROUP BY, DISTINCT, HAVING, AVG, DISTINCT aggregates, ORDER BY an
/// aggregate, over the same rows sharded and not.
fn grouped_reads_equal_one_server(c: &mut mysql::Conn, reference: &mut mysql::Conn) {
    let mut rng = Rng(0x5eed_9876_0002_0003);
    let keys = [
        "customer_id",
        "note",
        "created",
        "amount",
        "DATE(created)",
        "score",
    ];
    let aggregates = [
        "COUNT(*)",
        "COUNT(note)",
        "SUM(amount)",
        "SUM(customer_id)",
        "AVG(amount)",
        "AVG(customer_id)",
        "MIN(note)",
        "MAX(note)",
        "MAX(created)",
        "MIN(amount)",
        "MAX(score)",
        "{distinct}",
        "SUM(amount) / COUNT(*)",
        "COUNT(*) * 2 - 1",
        "MAX(amount) - MIN(amount)",
        "SUM(customer_id) / COUNT(customer_id)",
        "-SUM(amount) * 3 + COUNT(note)",
        // Not AVG or SUM of the DOUBLE column: refused over several
        // groups, and even in one group its rows are added in another
        // order than on the reference server, and round differently.
    ];
    let distincts = [
        "COUNT(DISTINCT note)",
        "COUNT(DISTINCT customer_id)",
        "SUM(DISTINCT amount)",
        "SUM(DISTINCT customer_id)",
        "COUNT(DISTINCT created)",
    ];
    let havings = [
        "HAVING COUNT(*) > {n}",
        "HAVING SUM(amount) < {d}",
        "HAVING COUNT(*) BETWEEN 2 AND {n} OR MAX(amount) IS NULL",
        "HAVING NOT (MIN(amount) > {d}) AND COUNT(note) >= 1",
        "HAVING {key} IS NOT NULL",
    ];
    let preds = [
        "",
        "WHERE customer_id IN ({k}, {k2}, {k3})",
        "WHERE amount > {d}",
        "WHERE note IS NOT NULL",
        "WHERE customer_id BETWEEN {k} AND {k2}",
    ];
    let mut ordered = 0;
    let mut shown = std::collections::BTreeSet::new();
    let mut tally = Tally::default();
    for n in 0..400 {
        let distinct_select = rng.below(6) == 0;
        let nkeys = match distinct_select {
            true => 1 + rng.below(2),
            false => rng.below(3),
        };
        let mut key_list: Vec<&str> = Vec::new();
        for _ in 0..nkeys {
            let k = rng.pick(&keys);
            if !key_list.contains(&k) {
                key_list.push(k);
            }
        }
        let distinct = rng.pick(&distincts);
        let mut items: Vec<String> = key_list.iter().map(|k| k.to_string()).collect();
        if !distinct_select {
            for _ in 0..1 + rng.below(3) {
                let a = rng.pick(&aggregates).replace("{distinct}", distinct);
                if !items.contains(&a) {
                    items.push(a);
                }
            }
        }
        let k = rng.below(40) as i64 - 10;
        let d = format!("{}", rng.below(1000) as i64 - 500);
        let pred = rng
            .pick(&preds)
            .replace("{k}", &k.to_string())
            .replace("{k2}", &(k + 1 + rng.below(8) as i64).to_string())
            .replace("{k3}", &(rng.below(40) as i64 - 10).to_string())
            .replace("{d}", &format!("{d}.5"));
        let group = match (distinct_select, key_list.is_empty()) {
            (false, false) => format!("GROUP BY {}", key_list.join(", ")),
            _ => String::new(),
        };
        let having = match (!distinct_select && rng.below(3) == 0, key_list.first()) {
            (true, Some(key)) => rng
                .pick(&havings)
                .replace("{n}", &(1 + rng.below(6)).to_string())
                .replace("{d}", &d)
                // MariaDB's HAVING names grouped columns, not expressions.
                .replace("{key}", if key.contains('(') { "COUNT(*)" } else { key }),
            _ => String::new(),
        };
        // ORDER BY ends in every key: a total order of the groups.
        let order = match (rng.below(2) == 0, key_list.is_empty()) {
            (true, false) => {
                let mut by: Vec<String> = Vec::new();
                if !distinct_select && rng.below(2) == 0 {
                    let i =
                        key_list.len() + rng.below((items.len() - key_list.len()) as u64) as usize;
                    by.push(match rng.below(2) {
                        0 => format!("{}", i + 1),
                        _ => items[i].clone(),
                    });
                }
                for key in &key_list {
                    by.push(key.to_string());
                }
                let by: Vec<String> = by
                    .into_iter()
                    .map(|b| match rng.below(2) {
                        0 => format!("{b} DESC"),
                        _ => b,
                    })
                    .collect();
                format!("ORDER BY {}", by.join(", "))
            }
            _ => String::new(),
        };
        let limit = match (order.is_empty(), rng.below(3)) {
            (false, 0) => format!("LIMIT {}", 1 + rng.below(10)),
            (false, 1) => format!("LIMIT {} OFFSET {}", 1 + rng.below(10), rng.below(20)),
            _ => String::new(),
        };
        let sql = format!(
            "SELECT {}{} FROM facts {pred} {group} {having} {order} {limit}",
            if distinct_select { "DISTINCT " } else { "" },
            items.join(", ")
        );
        let want = rows_of(reference, &sql).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
        let what = format!("grouped query {n}: {sql}");
        if tally.check(&what, rows_of(c, &sql), want, !order.is_empty(), fold) {
            ordered += usize::from(!order.is_empty());
            for f in [
                "DISTINCT ",
                "GROUP BY",
                "HAVING",
                "AVG(",
                "(DISTINCT",
                "ORDER BY",
                "OFFSET",
            ] {
                if sql.contains(f) {
                    shown.insert(f);
                }
            }
        }
    }
    let enough = tally.compared >= 300 && shown.len() == 7;
    let detail = format!("{ordered} ordered; forms {shown:?}");
    tally.report("grouped", &detail, enough);
}

#[test]
fn sequences_give_unique_ids_and_last_insert_id_returns_them() {
    let (_serial, p) = start();
    let mut c = conn(&p);
    for t in ["ids", "tickets"] {
        c.query_drop(format!("DROP TABLE IF EXISTS {t}")).unwrap();
    }
    c.query_drop("CREATE TABLE ids (id BIGINT PRIMARY KEY, v INT)")
        .unwrap();
    c.query_drop(
        "CREATE TABLE tickets (id BIGINT PRIMARY KEY, customer_id INT NOT NULL, note VARCHAR(10))",
    )
    .unwrap();
    // One row at a time, from four sessions at once: each id once, spread
    // evenly over the groups (the key is the id itself).
    let port = p.port;
    let url = p.url("app", "apppass", DB);
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let url = url.clone();
            std::thread::spawn(move || {
                let _ = port;
                let mut c = mysql::Conn::new(mysql::Opts::from_url(&url).unwrap()).unwrap();
                let mut mine = Vec::new();
                for i in 0..50 {
                    c.query_drop(format!("INSERT INTO ids (v) VALUES ({})", w * 100 + i))
                        .unwrap();
                    let id = c.last_insert_id();
                    // LAST_INSERT_ID() is the id, even read in another group.
                    let again: Option<u64> = c.query_first("SELECT LAST_INSERT_ID()").unwrap();
                    assert_eq!(again, Some(id));
                    let v: Option<i64> = c
                        .query_first(format!("SELECT v FROM ids WHERE id = {id}"))
                        .unwrap();
                    assert_eq!(v, Some((w * 100 + i) as i64));
                    mine.push(id);
                }
                mine
            })
        })
        .collect();
    let mut all: Vec<u64> = workers
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort();
    let n = all.len();
    all.dedup();
    assert_eq!(all.len(), n, "an id given twice");
    assert!(all[0] >= 1);
    let per_group = per_group::<(i64,)>("SELECT COUNT(*) FROM ids");
    for (g, rows) in per_group.iter().enumerate() {
        let count = rows[0].0;
        assert!(
            (35..=65).contains(&count),
            "group {g} holds {count} of 200 rows"
        );
    }
    // A prepared INSERT gets its id too.
    c.exec_drop("INSERT INTO ids (v) VALUES (?)", (7,)).unwrap();
    let id = c.last_insert_id();
    assert!(id > *all.last().unwrap_or(&0), "{id}");
    let v: Option<i64> = c
        .exec_first("SELECT v FROM ids WHERE id = ?", (id,))
        .unwrap();
    assert_eq!(v, Some(7));
    // Several rows of one group: consecutive ids, the first reported.
    c.query_drop("INSERT INTO tickets (customer_id, note) VALUES (5, 'a'), (5, 'b'), (5, 'c')")
        .unwrap();
    let first = c.last_insert_id();
    let got: Vec<(u64, String)> = c
        .query("SELECT id, note FROM tickets WHERE customer_id = 5 ORDER BY id")
        .unwrap();
    assert_eq!(
        got,
        [
            (first, "a".to_string()),
            (first + 1, "b".to_string()),
            (first + 2, "c".to_string())
        ]
    );
    // Rows whose ids land in several groups: split by group, in one
    // distributed transaction; LAST_INSERT_ID() is the first id.
    c.query_drop("INSERT INTO ids (v) VALUES (9001), (9002)")
        .unwrap();
    let first: u64 = c.query_first("SELECT LAST_INSERT_ID()").unwrap().unwrap();
    let placed = crate::per_group::<(u64, i64)>("SELECT id, v FROM ids WHERE v > 9000");
    for (g, rows) in placed.iter().enumerate() {
        for (id, _) in rows {
            assert_eq!(*id as usize % 4, g, "id {id} in group data{}", g + 1);
        }
    }
    let mut all: Vec<(u64, i64)> = placed.into_iter().flatten().collect();
    all.sort();
    assert_eq!(all, [(first, 9001), (first + 1, 9002)]);
    // An INSERT the sequence cannot fill says so.
    let (errno, msg) = code(
        c.query_drop("INSERT INTO tickets SELECT * FROM tickets")
            .unwrap_err(),
    );
    assert_eq!(errno, 1235, "{msg}");
    assert!(msg.contains("ids only to rows of VALUES"), "{msg}");
    // The counter lives in the database's default group.
    let (p1, _) = lab().shards[0];
    let next: Option<u64> = direct(p1)
        .query_first(format!(
            "SELECT next FROM sextant.sequences WHERE name = '{DB}.ids'"
        ))
        .unwrap();
    assert!(next.is_some_and(|n| n > id), "{next:?}");
}

#[test]
fn a_deep_offset_streams_in_bounded_memory() {
    let (_serial, p) = start();
    let mut c = conn(&p);
    c.query_drop("DROP TABLE IF EXISTS big").unwrap();
    c.query_drop("CREATE TABLE big (id BIGINT PRIMARY KEY, customer_id BIGINT NOT NULL, v INT NOT NULL, KEY (v, id))")
        .unwrap();
    // A million rows in each group, loaded there directly: group g holds
    // the customers = g (mod 4), one row per v in 0..1,000,000.
    const PER_GROUP: u64 = 1_000_000;
    for (g, (port, _)) in lab().shards.iter().enumerate() {
        direct(*port)
            .query_drop(format!(
                "INSERT INTO {DB}.big (id, customer_id, v) SELECT seq * 4 + {g}, seq * 4 + {g}, seq FROM seq_0_to_{}",
                PER_GROUP - 1
            ))
            .unwrap();
    }
    sync_shards();
    let offset = 1_000_000u64;
    let got: Vec<(i64, i64)> = c
        .query(format!(
            "SELECT id, v FROM big ORDER BY v, id LIMIT 10 OFFSET {offset}"
        ))
        .unwrap();
    // In (v, id) order the i-th row is v = i / 4, id = 4v + i % 4.
    let want: Vec<(i64, i64)> = (offset..offset + 10)
        .map(|i| {
            let v = (i / 4) as i64;
            (4 * v + (i % 4) as i64, v)
        })
        .collect();
    assert_eq!(got, want);
    // Grouped in the keys' order: streamed too, one group at a time.
    let got: Vec<(i64, i64)> = c
        .query("SELECT v, COUNT(*) FROM big GROUP BY v ORDER BY v DESC LIMIT 3 OFFSET 999990")
        .unwrap();
    assert_eq!(got, [(9, 4), (8, 4), (7, 4)]);
    // Sorted by an aggregate: every group is held, past merge_memory_mb
    // the read fails, saying why, and the session goes on.
    let (errno, msg) = code(
        c.query_drop("SELECT v, COUNT(*) AS n FROM big GROUP BY v ORDER BY n DESC, v LIMIT 3")
            .unwrap_err(),
    );
    assert_eq!(errno, 1038, "{msg}");
    assert!(msg.contains("merge_memory_mb = 8"), "{msg}");
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM big").unwrap();
    assert_eq!(n, Some(4 * PER_GROUP as i64));
    let peak = p.peak_rss_kib();
    assert!(
        peak > 0 && peak < 50 * 1024,
        "sextant's peak RSS: {peak} KiB"
    );
    eprintln!("ORDER BY ... LIMIT 10 OFFSET {offset} over 4 x {PER_GROUP} rows: sextant peak RSS {peak} KiB");
    c.query_drop("DROP TABLE big").unwrap();
}

#[test]
fn sysbench_through_four_groups() {
    let (_serial, p) = start();
    // sysbench's tables laid out by the layout: prepared on each group,
    // then each keeps the ids that hash to it (id mod 4).
    for (g, (port, _)) in lab().shards.iter().enumerate() {
        sysbench_prepare(*port, 2, 4000);
        let mut c = direct(*port);
        for t in ["sbtest1", "sbtest2"] {
            c.query_drop(format!("DELETE FROM sbtest.{t} WHERE id % 4 <> {g}"))
                .unwrap();
        }
    }
    sync_shards();
    for ps_mode in ["--db-ps-mode=auto", "--db-ps-mode=disable"] {
        let out = sysbench_cmd(p.port, 2, 4000)
            .args(["--threads=8", "--time=4", ps_mode])
            .args(["oltp_point_select", "run"])
            .output()
            .expect("sysbench");
        let (text, errors) =
            sysbench_clean(&out, "point selects through four groups", "ignored errors:");
        assert_eq!(errors, 0, "{ps_mode}: {text}");
        assert!(text.contains("queries:"), "{text}");
        // Reads and writes: point selects, ranges over several groups
        // (plain, SUM, ORDER BY, DISTINCT ... ORDER BY), updates, deletes
        // and inserts by id; each statement its own transaction, and in
        // sysbench's transactions (each over several groups: XA).
        for trx in ["--skip_trx=on", "--skip_trx=off"] {
            let out = sysbench_cmd(p.port, 2, 4000)
                // One thread: without transactions, two threads deleting
                // and inserting the same id at once collide (1062) on one
                // server as on several; with them, two transactions may
                // wait for each other in different groups, which no
                // server sees as a deadlock.
                .args(["--threads=1", "--time=4", trx, ps_mode])
                .args(["oltp_read_write", "run"])
                .output()
                .expect("sysbench");
            let (text, errors) =
                sysbench_clean(&out, "read/write through four groups", "ignored errors:");
            assert_eq!(errors, 0, "{ps_mode} {trx}: {text}");
            assert!(text.contains("write:"), "{text}");
        }
    }
    // Every key found where it lives.
    let mut c =
        mysql::Conn::new(mysql::Opts::from_url(&p.url("app", "apppass", "sbtest")).unwrap())
            .unwrap();
    for id in [1, 2, 3, 4, 1999, 4000] {
        let k: Option<i64> = c
            .exec_first("SELECT k FROM sbtest1 WHERE id = ?", (id,))
            .unwrap();
        assert!(k.is_some(), "id {id}");
    }
}

/// A statement the layout sends to one group leaves the session as it
/// does unsharded, as text and prepared alike: after a
/// `SQL_CALC_FOUND_ROWS` read, `FOUND_ROWS()` answers for it, and `SET
/// insert_id` gives the id to the session's next INSERT and to no other
/// session's. Three connections per server and no hold; another session
/// runs between the steps, so a session that let its connection go shows
/// it.
#[test]
fn a_statement_in_one_group_leaves_the_session_as_unsharded() {
    let (_guard, _) = start();
    let p = Setup {
        proxy: "default_group = \"data1\"",
        groups: Some(format!(
            "{}\n[routing]\nhold_ms = 0\n\n[xa]\nlog_dir = \"{}\"\n\n{}",
            shard_groups("pool_max = 3\n"),
            std::env::temp_dir()
                .join(format!("sextant-xa-log-fx-{}", std::process::id()))
                .display(),
            hash_layout(4, "")
        )),
        ..Default::default()
    }
    .start();
    let mut a = conn(&p);
    let mut b = conn(&p);
    a.query_drop(
        "CREATE TABLE IF NOT EXISTS fx_sharded (id INT PRIMARY KEY AUTO_INCREMENT, v INT)",
    )
    .unwrap();
    a.query_drop("DELETE FROM fx_sharded WHERE id >= 8000")
        .unwrap();
    for i in 0..10 {
        a.query_drop(format!("INSERT INTO fx_sharded (v) VALUES ({i})"))
            .unwrap();
    }
    for round in 0..6u64 {
        let prepared = round % 2 == 1;
        let real: Option<i64> = a
            .query_first("/*#mode=READWRITE*/ SELECT COUNT(*) FROM fx_sharded")
            .unwrap();
        let read = "SELECT SQL_CALC_FOUND_ROWS id FROM fx_sharded LIMIT 2";
        let _: Vec<i64> = match prepared {
            true => a.exec(read, ()).unwrap(),
            false => a.query(read).unwrap(),
        };
        b.query_drop("SELECT SQL_CALC_FOUND_ROWS id FROM fx_sharded LIMIT 1")
            .unwrap_or_else(|e| panic!("round {round}: b's read: {e}"));
        let total: Option<i64> = a.query_first("SELECT FOUND_ROWS()").unwrap();
        assert_eq!(
            total, real,
            "round {round} (prepared: {prepared}): FOUND_ROWS()"
        );

        // Below the table's counter, so that b's own next id is never it.
        let id = 9000 - 10 * round;
        let set = format!("SET insert_id = {id}");
        match prepared {
            true => a.exec_drop(set, ()).unwrap(),
            false => a.query_drop(set).unwrap(),
        }
        b.query_drop("INSERT INTO fx_sharded (v) VALUES (-1)")
            .unwrap();
        let b_id: Option<u64> = b.query_first("SELECT LAST_INSERT_ID()").unwrap();
        assert_ne!(
            b_id,
            Some(id),
            "round {round}: b's insert took a's insert_id"
        );
        a.query_drop("INSERT INTO fx_sharded (v) VALUES (-2)")
            .unwrap();
        let a_id: Option<u64> = a.query_first("SELECT LAST_INSERT_ID()").unwrap();
        assert_eq!(
            a_id,
            Some(id),
            "round {round} (prepared: {prepared}): SET insert_id"
        );
    }
}
