//! A differential generator for sharded statements, against a real lab of
//! four groups: every statement runs through sextant on a table sharded
//! over the four and directly on one unsharded copy of the same rows, and
//! the answers must be equal (or sextant must refuse with 1235, having
//! changed nothing). It covers how names resolve (aliases that collide
//! with columns and with other aliases, in HAVING and ORDER BY; aggregates
//! by alias, by call and by position), SELECT's modifiers, and versioned
//! executable comments (`/*!` and `/*M!`, versions below, equal to and
//! above the servers'). Writes are compared by affected rows and by a
//! checksum of the table over every group.

mod common;
use common::*;
use mysql::prelude::Queryable;

const DB: &str = "sextant_diff";
/// The unsharded copy, on the first group's primary.
const REF: &str = "sextant_diff_ref";

fn layout() -> String {
    let mut g = shard_groups("");
    g += &format!(
        "\n[xa]\nlog_dir = \"{}\"\n\n",
        std::env::temp_dir()
            .join(format!("sextant-diff-xa-{}", std::process::id()))
            .display()
    );
    g += &hash_layout(
        4,
        &format!(
            "\n[sharding.default]\n{DB} = \"data1\"\n\n[[sharding.table]]\nvdb = 1\ndb = \"{DB}\"\ntable = \"orders\"\npkey = \"user_id\"\n\n[[sharding.table]]\nvdb = 1\ndb = \"{DB}\"\ntable = \"events\"\npkey = \"user_id\"\n"
        ),
    );
    g
}

const DDL: &str = "CREATE TABLE orders (id INT PRIMARY KEY, user_id INT NOT NULL, item_id INT NOT NULL, qty INT NOT NULL, status VARCHAR(8) NOT NULL, note VARCHAR(20), KEY (user_id))";

/// The same rows, sharded through sextant and whole in the reference.
fn load(c: &mut mysql::Conn, reference: &mut mysql::Conn) {
    c.query_drop("DROP TABLE IF EXISTS orders").unwrap();
    c.query_drop(DDL).unwrap();
    reference
        .query_drop(format!("DROP DATABASE IF EXISTS {REF}"))
        .unwrap();
    reference
        .query_drop(format!("CREATE DATABASE {REF}"))
        .unwrap();
    reference.query_drop(format!("USE {REF}")).unwrap();
    reference.query_drop(DDL).unwrap();
    let statuses = ["new", "paid", "sent"];
    let mut rows = Vec::new();
    for id in 1..=1200u64 {
        // A fixed scramble: spread over users, items and quantities.
        let h = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 33;
        let user = 1 + h % 97;
        let item = 1 + (h / 97) % 23;
        let qty = 1 + (h / 7) % 12;
        let status = statuses[(h % 3) as usize];
        rows.push(format!("({id}, {user}, {item}, {qty}, '{status}', NULL)"));
        if rows.len() == 100 {
            let sql = format!(
                "INSERT INTO orders (id, user_id, item_id, qty, status, note) VALUES {}",
                rows.join(", ")
            );
            c.query_drop(&sql).unwrap();
            reference.query_drop(&sql).unwrap();
            rows.clear();
        }
    }
}

type Rows = Vec<Vec<Option<String>>>;

fn rows_of(c: &mut mysql::Conn, sql: &str) -> Result<Rows, (u16, String)> {
    Ok(text_rows(c.query(sql).map_err(code)?))
}

fn code(e: mysql::Error) -> (u16, String) {
    match e {
        mysql::Error::MySqlError(e) => (e.code, e.message),
        other => panic!("not a server error: {other}"),
    }
}

/// Counts what was compared and what sextant refused.
#[derive(Default)]
struct Tally {
    compared: usize,
    refused: Vec<String>,
}

impl Tally {
    /// Runs `sql` both ways. A statement the server itself rejects is not
    /// part of the corpus (the generator writes some on purpose: a HAVING
    /// on a name the select list lacks).
    fn read(&mut self, c: &mut mysql::Conn, reference: &mut mysql::Conn, sql: &str, ordered: bool) {
        let Ok(mut want) = rows_of(reference, sql) else {
            return;
        };
        match rows_of(c, sql) {
            Ok(mut got) => {
                if !ordered {
                    got.sort();
                    want.sort();
                }
                assert_eq!(got, want, "{sql}");
                self.compared += 1;
            }
            Err((1235, msg)) => self.refused.push(format!("{sql}: {msg}")),
            Err(e) => panic!("{sql}: {e:?}"),
        }
    }
}

/// BIT_XOR of each row's CRC: combines over groups as over one table.
const CHECKSUM: &str =
    "SELECT COUNT(*), COALESCE(BIT_XOR(CRC32(CONCAT_WS('|', id, user_id, item_id, qty, status, IFNULL(note, '-')))), 0) FROM orders";

fn checksums_agree(reference: &mut mysql::Conn, what: &str) {
    let (n, x): (u64, u64) = reference.query_first(CHECKSUM).unwrap().unwrap();
    let (mut sn, mut sx) = (0u64, 0u64);
    for (p, _) in &lab().shards {
        let mut d = direct(*p);
        d.query_drop(format!("USE {DB}")).unwrap();
        let (gn, gx): (u64, u64) = d.query_first(CHECKSUM).unwrap().unwrap();
        sn += gn;
        sx ^= gx;
    }
    assert_eq!((sn, sx), (n, x), "the table differs after: {what}");
}

fn start() -> (Proxy, mysql::Conn, mysql::Conn) {
    let _ = LAB_ARGS.set(&["--shards", "4", "--replicas", "0"]);
    for (p, _) in &lab().shards {
        direct(*p)
            .query_drop(format!("CREATE DATABASE IF NOT EXISTS {DB}"))
            .unwrap();
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
    load(&mut c, &mut reference);
    (p, c, reference)
}

/// The tests share the groups' tables: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn names_resolve_as_in_the_server() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_p, mut c, mut reference) = start();
    let mut tally = Tally::default();
    // Select lists whose names collide: an aggregate aliased as a column
    // (qty, item_id), a column aliased as another column, aliases that
    // are also the names HAVING and ORDER BY use.
    for key in ["status", "item_id", "qty"] {
        let other = if key == "qty" { "item_id" } else { "qty" };
        let lists = [
            format!("{key}, COUNT(*) AS n"),
            format!("{key}, COUNT(*) AS {other}"),
            format!("{key} AS k, SUM(qty) AS s, COUNT(*) AS n"),
            format!("{key}, AVG(qty) AS a, MAX(id) AS {other}"),
            format!("{key} AS {key}, MIN(qty) AS n, SUM(id) AS s"),
            format!("{key}, COUNT(*) AS n, SUM(qty) AS {key}_sum"),
        ];
        let groupings = [key.to_string(), "1".into(), "k".into()];
        let havings = [
            String::new(),
            "HAVING n > 12".into(),
            "HAVING n < 60 AND n > 10".into(),
            "HAVING COUNT(*) > 40".into(),
            format!("HAVING {other} > 40"),
            format!("HAVING {other} BETWEEN 20 AND 60"),
            "HAVING s > 300".into(),
            "HAVING a > 6".into(),
            "HAVING NOT (n > 50)".into(),
            format!("HAVING {key} > 2"),
            format!("HAVING {key}_sum > 250"),
            "HAVING n IS NOT NULL AND SUM(qty) > 100".into(),
        ];
        let orders = [
            (String::new(), false),
            (format!("ORDER BY {key}"), true),
            ("ORDER BY 1 DESC".into(), true),
            ("ORDER BY k DESC".into(), true),
            (format!("ORDER BY n, {key}"), true),
            (format!("ORDER BY {other} DESC, {key}"), true),
            (format!("ORDER BY COUNT(*) DESC, {key}"), true),
            (format!("ORDER BY s, {key}"), true),
        ];
        for list in &lists {
            for g in &groupings {
                for h in &havings {
                    for (o, ordered) in &orders {
                        let sql = format!("SELECT {list} FROM orders GROUP BY {g} {h} {o}");
                        tally.read(&mut c, &mut reference, &sql, *ordered);
                    }
                }
            }
        }
    }
    // No GROUP BY: the whole table is one group.
    for (list, h) in [
        ("COUNT(*) AS n", "HAVING n > 1000"),
        ("COUNT(*) AS n", "HAVING n > 5000"),
        ("COUNT(*) AS qty", "HAVING qty > 1000"),
        ("AVG(qty) AS a", "HAVING a > 5"),
        ("AVG(qty) AS a", "HAVING a > 9"),
        ("SUM(qty) AS s, COUNT(*) AS n", "HAVING s > n"),
        ("MAX(qty) AS item_id", "HAVING item_id = 12"),
    ] {
        tally.read(
            &mut c,
            &mut reference,
            &format!("SELECT {list} FROM orders {h}"),
            false,
        );
    }
    // GROUP BY takes the column before an alias of that name (an
    // expression without values, so the alias reading groups otherwise).
    for sql in [
        "SELECT qty - qty AS item_id, COUNT(*) AS n FROM orders GROUP BY item_id",
        "SELECT id - id AS status, COUNT(*) AS n, SUM(qty) AS s FROM orders GROUP BY status",
        "SELECT o.qty - o.qty AS item_id, COUNT(*) AS n FROM orders o GROUP BY item_id HAVING n > 40",
        "SELECT `qty` - qty AS `qty`, MAX(id) AS m FROM orders GROUP BY `qty`",
        "SELECT qty - qty AS zero, COUNT(*) AS n FROM orders GROUP BY zero",
        "SELECT status, qty - qty AS item_id, COUNT(*) AS n FROM orders GROUP BY status, item_id",
    ] {
        tally.read(&mut c, &mut reference, sql, false);
    }
    // ORDER BY takes the alias before the column, outside grouping too.
    for sql in [
        "SELECT qty AS item_id, id FROM orders WHERE user_id IN (3, 4, 5, 6) ORDER BY item_id, id",
        "SELECT id, item_id AS qty FROM orders WHERE user_id IN (3, 4, 5, 6) ORDER BY qty DESC, id",
        "SELECT id, qty AS q FROM orders ORDER BY q, id LIMIT 7",
        "SELECT DISTINCT qty AS item_id FROM orders ORDER BY item_id",
    ] {
        tally.read(&mut c, &mut reference, sql, true);
    }
    eprintln!(
        "names: {} identical, {} refused",
        tally.compared,
        tally.refused.len()
    );
    // What is refused is refused for what it is (an expression over
    // aggregates named by alias in HAVING, ORDER BY a column not grouped
    // by), never because sextant misread a name.
    let mut reasons = std::collections::BTreeSet::new();
    for r in &tally.refused {
        let why = r.split_once(": ").map_or(r.as_str(), |x| x.1);
        assert!(!why.contains("cannot read this statement"), "{r}");
        reasons.insert(why.to_string());
    }
    eprintln!("refused: {reasons:#?}");
    assert!(tally.compared > 600, "only {} compared", tally.compared);
}

#[test]
fn select_modifiers_change_nothing_or_are_refused() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_p, mut c, mut reference) = start();
    let mut tally = Tally::default();
    for m in [
        "SQL_NO_CACHE",
        "SQL_CACHE",
        "HIGH_PRIORITY",
        "STRAIGHT_JOIN",
        "SQL_SMALL_RESULT",
        "SQL_BIG_RESULT",
        "SQL_BUFFER_RESULT",
        "HIGH_PRIORITY SQL_NO_CACHE SQL_BUFFER_RESULT",
        "DISTINCTROW",
        "DISTINCT SQL_NO_CACHE",
    ] {
        let distinct = m.starts_with("DISTINCT");
        for (rest, ordered) in [
            ("id, qty FROM orders ORDER BY id LIMIT 5", true),
            ("item_id FROM orders ORDER BY item_id", true),
            ("status, COUNT(*) AS n FROM orders GROUP BY status", false),
            ("status, MAX(qty) FROM orders GROUP BY status", false),
            ("qty FROM orders WHERE user_id = 7 ORDER BY qty, id", true),
            ("user_id FROM orders WHERE id < 40", false),
        ] {
            tally.read(
                &mut c,
                &mut reference,
                &format!("SELECT {m} {rest}"),
                ordered,
            );
        }
        // DISTINCT with GROUP BY is refused over several groups whichever
        // way it is spelt; nothing else is.
        for r in tally.refused.drain(..) {
            assert!(
                distinct && r.contains("DISTINCT together with GROUP BY"),
                "{r}"
            );
        }
    }
    // Over several groups FOUND_ROWS() would be one group's count: refused.
    let e = c
        .query_drop("SELECT SQL_CALC_FOUND_ROWS id FROM orders ORDER BY id LIMIT 5")
        .unwrap_err();
    let (n, msg) = code(e);
    assert_eq!(n, 1235, "{msg}");
    assert!(msg.contains("SQL_CALC_FOUND_ROWS"), "{msg}");
    // In one group it is the server's, and FOUND_ROWS() answers it.
    let ids: Vec<u32> = c
        .query("SELECT SQL_CALC_FOUND_ROWS id FROM orders WHERE user_id = 7 ORDER BY id LIMIT 2")
        .unwrap();
    let found: u64 = c.query_first("SELECT FOUND_ROWS()").unwrap().unwrap();
    let want: u64 = reference
        .query_first("SELECT COUNT(*) FROM orders WHERE user_id = 7")
        .unwrap()
        .unwrap();
    assert_eq!(ids.len(), 2);
    assert_eq!(found, want);
    eprintln!("modifiers: {} identical", tally.compared);
}

#[test]
fn executable_comments_are_code_only_where_the_server_runs_them() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_p, mut c, mut reference) = start();
    let version: String = reference.query_first("SELECT VERSION()").unwrap().unwrap();
    let server = sextant_sql::ServerVersion::parse(&version).expect("the server's version");
    let v = server.id;
    // Below, equal to and above the server's version; MySQL 5.7's range
    // (MariaDB runs it only when marked M!); five and six digits.
    let versions = [v - 1, v, v + 1, 999_999, 50_708, 50_100, 100_000, 99_999];
    let mut tally = Tally::default();
    let mut ran = 0;
    for marker in ["/*!", "/*M!"] {
        for ver in versions {
            let cm = |inner: &str| format!("{marker}{ver} {inner} */");
            let runs = server.runs(ver, marker == "/*M!");
            ran += runs as usize;
            for sql in [
                format!(
                    "SELECT COUNT(*), SUM(qty) FROM orders WHERE qty = 9 {}",
                    cm("AND user_id = 17")
                ),
                format!(
                    "SELECT id FROM orders WHERE item_id = 3 {} ORDER BY id",
                    cm("AND user_id IN (5, 6)")
                ),
                format!(
                    "SELECT user_id, COUNT(*) FROM orders {} GROUP BY user_id",
                    cm("WHERE user_id = 5")
                ),
                format!(
                    "SELECT id FROM orders WHERE user_id = 8 {} ORDER BY id",
                    cm("OR user_id = 9")
                ),
                format!(
                    "SELECT {} id FROM orders WHERE user_id = 11 ORDER BY id",
                    cm("SQL_NO_CACHE")
                ),
            ] {
                tally.read(&mut c, &mut reference, &sql, true);
            }
            // Writes: the rows changed and the table after must agree.
            let n = tally.compared;
            for sql in [
                format!(
                    "UPDATE orders SET note = 'u{n}' WHERE qty = 9 {}",
                    cm("AND user_id = 5")
                ),
                format!(
                    "UPDATE orders SET note = 'v{n}' WHERE user_id = 13 {}",
                    cm("OR qty = 2")
                ),
                format!(
                    "DELETE FROM orders WHERE qty = 11 AND item_id = {} {}",
                    1 + n % 23,
                    cm("AND user_id = 7")
                ),
            ] {
                reference.query_drop(&sql).unwrap();
                let want = reference.affected_rows();
                c.query_drop(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
                assert_eq!(c.affected_rows(), want, "{sql}");
                checksums_agree(&mut reference, &sql);
            }
        }
    }
    assert!((4..16).contains(&ran), "versions that run: {ran}");
    assert!(tally.refused.is_empty(), "{:?}", tally.refused);
    eprintln!("comments: {} reads identical, writes exact", tally.compared);
}

/// Subqueries correlated on the shard key (and `k IN (SELECT k ...)` of
/// one vdb) run in each group and equal one server; `!(...)` and
/// `ORDER BY NULL` read as the server reads them.
#[test]
fn correlated_subqueries_and_negation_equal_one_server() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_p, mut c, mut reference) = start();
    let ddl = "CREATE TABLE events (id INT PRIMARY KEY, user_id INT NOT NULL, kind CHAR(1) NOT NULL, KEY (user_id))";
    c.query_drop("DROP TABLE IF EXISTS events").unwrap();
    c.query_drop(ddl).unwrap();
    reference.query_drop(ddl).unwrap();
    let kinds = ["x", "y", "z"];
    let rows: Vec<String> = (1..=300u64)
        .map(|id| {
            let h = id.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40;
            format!("({id}, {}, '{}')", 1 + h % 120, kinds[(h % 3) as usize])
        })
        .collect();
    for chunk in rows.chunks(50) {
        let sql = format!(
            "INSERT INTO events (id, user_id, kind) VALUES {}",
            chunk.join(", ")
        );
        c.query_drop(&sql).unwrap();
        reference.query_drop(&sql).unwrap();
    }
    let mut tally = Tally::default();
    for (sql, ordered) in [
        ("SELECT id FROM orders o WHERE EXISTS (SELECT 1 FROM events e WHERE e.user_id = o.user_id AND e.kind = 'x') ORDER BY id", true),
        ("SELECT id FROM orders o WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.user_id = o.user_id) ORDER BY id", true),
        ("SELECT o.id FROM orders o WHERE o.qty > 6 AND EXISTS (SELECT 1 FROM events WHERE events.user_id = o.user_id AND events.kind <> 'z') ORDER BY o.id LIMIT 20", true),
        ("SELECT id FROM orders WHERE user_id IN (SELECT user_id FROM events WHERE kind = 'y') ORDER BY id", true),
        ("SELECT COUNT(*) FROM orders WHERE user_id NOT IN (SELECT user_id FROM events WHERE kind = 'y')", false),
        ("SELECT status, COUNT(*) FROM orders WHERE user_id IN (SELECT e.user_id FROM events e) GROUP BY status", false),
        ("SELECT id FROM orders o WHERE o.user_id = 17 AND EXISTS (SELECT 1 FROM events e WHERE e.user_id = o.user_id) ORDER BY id", true),
        ("SELECT COUNT(*) FROM orders WHERE !(user_id = 5)", false),
        ("SELECT COUNT(*) FROM orders WHERE !(qty > 3) AND !(user_id IN (1, 2, 3))", false),
        ("SELECT id FROM orders WHERE user_id = 9 AND !(qty = 4) ORDER BY id", true),
        ("SELECT status, COUNT(*) FROM orders GROUP BY status ORDER BY NULL", false),
        ("SELECT id FROM orders WHERE user_id < 4 ORDER BY NULL", false),
    ] {
        tally.read(&mut c, &mut reference, sql, ordered);
    }
    assert!(tally.refused.is_empty(), "{:#?}", tally.refused);
    // Correlated on something else than the shard key, or unqualified:
    // refused, not answered from each group alone.
    for sql in [
        "SELECT id FROM orders o WHERE EXISTS (SELECT 1 FROM events e WHERE e.id = o.id)",
        "SELECT id FROM orders o WHERE EXISTS (SELECT 1 FROM events e WHERE e.user_id = user_id)",
        "SELECT id FROM orders WHERE item_id IN (SELECT user_id FROM events)",
        "SELECT id FROM orders WHERE user_id IN (SELECT user_id FROM events GROUP BY kind)",
        "SELECT id FROM orders WHERE user_id IN (SELECT MAX(user_id) FROM events)",
    ] {
        match c.query_drop(sql) {
            Err(e) => assert_eq!(code(e).0, 1235, "{sql}"),
            Ok(()) => panic!("{sql} ran over several groups"),
        }
    }
    eprintln!("subqueries: {} identical", tally.compared);
}

/// INSERTs that name no columns (classic loaders' form) are placed by the
/// shard key's position in the table's column order, as text and
/// prepared, in one group or split over several; after DDL through
/// sextant the new order is used.
#[test]
fn inserts_without_a_column_list_land_where_named_ones_do() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_p, mut c, mut reference) = start();
    let both = |c: &mut mysql::Conn, reference: &mut mysql::Conn, sql: &str| {
        reference.query_drop(sql).unwrap();
        c.query_drop(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(c.affected_rows(), reference.affected_rows(), "{sql}");
    };
    both(
        &mut c,
        &mut reference,
        "INSERT INTO orders VALUES (5001, 42, 3, 2, 'new', NULL)",
    );
    both(
        &mut c,
        &mut reference,
        "INSERT INTO orders VALUES (5002, 1, 1, 1, 'paid', 'a'), (5003, 2, 1, 1, 'paid', 'b'), (5004, 3, 1, 1, 'sent', NULL), (5005, 96, 2, 2, 'new', 'd')",
    );
    both(
        &mut c,
        &mut reference,
        "REPLACE INTO orders VALUE (5001, 42, 4, 4, 'sent', 'r')",
    );
    let st = c
        .prep("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)")
        .unwrap();
    for (id, user) in [(5100, 7), (5101, 8), (5102, 9), (5103, 77)] {
        c.exec_drop(&st, (id, user, 5, 6, "new", "p")).unwrap();
        reference
            .exec_drop(
                "INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)",
                (id, user, 5, 6, "new", "p"),
            )
            .unwrap();
    }
    checksums_agree(&mut reference, "inserts without a column list");
    // Each row is in its key's group: a read by key finds it.
    for (id, user) in [(5001, 42), (5002, 1), (5005, 96), (5101, 8), (5103, 77)] {
        let found: Option<u32> = c
            .query_first(format!(
                "SELECT id FROM orders WHERE user_id = {user} AND id = {id}"
            ))
            .unwrap();
        assert_eq!(found, Some(id), "row {id} of user {user}");
    }
    // DDL through sextant changes the order: the next INSERT follows it.
    both(
        &mut c,
        &mut reference,
        "ALTER TABLE orders ADD COLUMN extra INT NOT NULL DEFAULT 0 FIRST",
    );
    both(
        &mut c,
        &mut reference,
        "INSERT INTO orders VALUES (9, 5200, 55, 1, 1, 'new', NULL)",
    );
    let found: Option<(u32, u32)> = c
        .query_first("SELECT id, extra FROM orders WHERE user_id = 55 AND id = 5200")
        .unwrap();
    assert_eq!(found, Some((5200, 9)));
    checksums_agree(&mut reference, "an INSERT after ALTER TABLE ... FIRST");
}

/// ROW_COUNT(), FOUND_ROWS(), @@warning_count and SHOW WARNINGS after a
/// statement in one group read that group's connection, whichever group
/// it is (a statement naming no table otherwise goes to the default
/// group); state held on one connection is named as such when a read
/// over several groups is refused for it.
#[test]
fn session_functions_follow_the_statement_before_into_its_group() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_p, mut c, mut reference) = start();
    // Users in each of the four groups (the hash spreads 1..=12 over all).
    for user in 1..=12 {
        for (sql, then) in [
            (
                format!("UPDATE orders SET note = 'n{user}' WHERE user_id = {user}"),
                "SELECT ROW_COUNT()",
            ),
            (
                format!("SELECT id FROM orders WHERE user_id = {user} ORDER BY id LIMIT 2"),
                "SELECT FOUND_ROWS()",
            ),
            (
                format!(
                    "SELECT CAST(CONCAT(qty, 'x') AS SIGNED) FROM orders WHERE user_id = {user}"
                ),
                "SELECT @@warning_count",
            ),
            (
                format!(
                    "SELECT CAST(CONCAT(id, 'y') AS SIGNED) FROM orders WHERE user_id = {user}"
                ),
                "SHOW WARNINGS",
            ),
        ] {
            let before = rows_of(&mut reference, &sql).expect("the reference runs it");
            let got = rows_of(&mut c, &sql).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
            assert_eq!(got.len(), before.len(), "{sql}");
            let want = rows_of(&mut reference, then).unwrap();
            let got = rows_of(&mut c, then).unwrap_or_else(|e| panic!("{then} after {sql}: {e:?}"));
            assert_eq!(got, want, "{then} after {sql}");
        }
    }
    checksums_agree(&mut reference, "the notes' updates");
    // After an error sextant gave (a form it refuses over several
    // groups), as after a statement the server failed: ROW_COUNT() -1,
    // FOUND_ROWS() as it was, the one condition in @@warning_count.
    rows_of(&mut reference, "SELECT id FROM orders WHERE user_id = 5").unwrap();
    rows_of(&mut c, "SELECT id FROM orders WHERE user_id = 5").unwrap();
    rows_of(&mut reference, "SELECT * FROM sextant_diff_no_such_table").unwrap_err();
    let (n, _) = code(
        c.query_drop("SELECT status, COUNT(*) FROM orders GROUP BY status WITH ROLLUP")
            .unwrap_err(),
    );
    assert_eq!(n, 1235);
    let read = "SELECT ROW_COUNT(), FOUND_ROWS(), @@warning_count";
    assert_eq!(
        rows_of(&mut c, read).unwrap(),
        rows_of(&mut reference, read).unwrap(),
        "{read} after a refusal"
    );
    // Not a transaction: state on one connection, and the refusal says so.
    for (tie, named) in [
        ("SET @x = 1", "user variables"),
        ("SELECT GET_LOCK('sextant_diff_lock', 0)", "named locks"),
    ] {
        c.query_drop(tie).unwrap();
        let (n, msg) = code(c.query_drop("SELECT COUNT(*) FROM orders").unwrap_err());
        assert_eq!(n, 1235, "{msg}");
        assert!(
            msg.contains(named) && !msg.contains("transaction"),
            "after {tie}: {msg}"
        );
        c.reset().unwrap();
        c.query_drop(format!("USE {DB}")).unwrap();
    }
}

/// Forms sextant's parser does not read run as written when the rest of
/// the statement puts them in one group, and are refused naming the form
/// over several.
#[test]
fn forms_sextant_does_not_read_run_in_one_group() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_p, mut c, mut reference) = start();
    let mut tally = Tally::default();
    for user in [3, 7, 11, 20] {
        tally.read(
            &mut c,
            &mut reference,
            &format!("SELECT status, item_id, SUM(qty) FROM orders WHERE user_id = {user} GROUP BY status, item_id WITH ROLLUP"),
            true,
        );
        let sql = format!("UPDATE orders SET note = 'top{user}' WHERE user_id = {user} ORDER BY qty DESC, id LIMIT 2");
        let want = reference.query_iter(&sql).unwrap().affected_rows();
        let got = c.query_iter(&sql).unwrap().affected_rows();
        assert_eq!(got, want, "{sql}");
        let plan: Vec<mysql::Row> = c
            .query(format!(
                "EXPLAIN SELECT * FROM orders WHERE user_id = {user}"
            ))
            .unwrap();
        assert!(!plan.is_empty());
        c.query_drop(format!(
            "EXPLAIN UPDATE orders SET qty = 1 WHERE user_id = {user}"
        ))
        .unwrap();
    }
    assert_eq!(tally.compared, 4, "{:?}", tally.refused);
    checksums_agree(&mut reference, "UPDATE ... ORDER BY ... LIMIT in one group");
    for (sql, form) in [
        (
            "SELECT status, COUNT(*) FROM orders GROUP BY status WITH ROLLUP",
            "WITH ROLLUP",
        ),
        ("EXPLAIN SELECT * FROM orders", "EXPLAIN over 4 groups"),
        ("UPDATE orders SET note = 'x' ORDER BY id LIMIT 1", "LIMIT"),
    ] {
        let (n, msg) = code(c.query_drop(sql).unwrap_err());
        assert_eq!(n, 1235, "{sql}: {msg}");
        assert!(msg.contains(form), "{sql}: {msg}");
    }
    checksums_agree(&mut reference, "the refused statements");
}
