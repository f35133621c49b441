//! Session state across pooled server connections. With hold_ms = 0 and a
//! pool of two connections per server, consecutive statements of one client
//! land on different server connections that other clients have just used,
//! so anything sextant fails to carry over shows up as a wrong answer.

mod common;
use common::*;
use mysql::prelude::Queryable;

/// Sessions of this proxy all share one server connection, in turn.
fn one_connection_proxy() -> Proxy {
    Setup {
        group: "pool_max = 1\n[routing]\nhold_ms = 0\n",
        no_replicas: true,
        ..Default::default()
    }
    .start()
}

fn tight_proxy() -> Proxy {
    Setup {
        group: "pool_max = 2\n[routing]\nhold_ms = 0\n",
        ..Default::default()
    }
    .start()
}

#[test]
fn variables_database_and_charset_follow_each_client() {
    let p = tight_proxy();
    let mut a = p.conn();
    let mut b = p.conn();
    a.query_drop("SET SESSION sql_mode = CONCAT('ANSI_QUOTES,', @@sql_mode)")
        .unwrap();
    a.query_drop("SET time_zone = '+05:00', max_join_size = 1000")
        .unwrap();
    a.query_drop("SET NAMES latin1 COLLATE latin1_bin").unwrap();
    a.query_drop("USE sbtest").unwrap();
    b.query_drop("SET time_zone = '-03:00'").unwrap();
    type Row = (String, String, String, String, u64, Option<String>);
    let q = "SELECT @@sql_mode, @@time_zone, @@character_set_client, @@collation_connection, @@max_join_size, DATABASE()";
    for _ in 0..40 {
        let ra: Row = a.query_first(q).unwrap().unwrap();
        assert!(ra.0.starts_with("ANSI_QUOTES"), "{ra:?}");
        assert_eq!(
            (ra.1.as_str(), ra.2.as_str(), ra.3.as_str(), ra.4),
            ("+05:00", "latin1", "latin1_bin", 1000)
        );
        assert_eq!(ra.5.as_deref(), Some("sbtest"));
        let rb: Row = b.query_first(q).unwrap().unwrap();
        assert!(!rb.0.contains("ANSI_QUOTES"), "{rb:?}");
        assert_eq!(
            (rb.1.as_str(), rb.2.as_str(), rb.4),
            ("-03:00", "utf8mb4", 18446744073709551615)
        );
        assert_eq!(rb.5.as_deref(), Some("sextant_test"));
        // Writes too (primary), interleaved with the reads (replicas).
        a.query_drop("DO 1").unwrap();
    }
    // A fresh client gets a clean session on the same pooled connections.
    let mut c = p.conn();
    let r: Row = c.query_first(q).unwrap().unwrap();
    assert_eq!(
        (r.1.as_str(), r.2.as_str(), r.4),
        ("SYSTEM", "utf8mb4", 18446744073709551615)
    );
}

#[test]
fn transactions_stay_on_one_connection() {
    let p = tight_proxy();
    let mut setup = p.conn();
    setup
        .query_drop("CREATE TABLE IF NOT EXISTS trx_t (id int primary key)")
        .unwrap();
    setup.query_drop("DELETE FROM trx_t").unwrap();
    let mut a = p.conn();
    let mut b = p.conn();
    for style in ["BEGIN", "START TRANSACTION", "SET autocommit = 0"] {
        a.query_drop(style).unwrap();
        a.query_drop("INSERT INTO trx_t VALUES (1)").unwrap();
        // Reads inside the transaction see its own uncommitted row.
        for _ in 0..5 {
            let n: Option<i64> = a.query_first("SELECT COUNT(*) FROM trx_t").unwrap();
            assert_eq!(n, Some(1), "{style}: own row not visible");
            let n: Option<i64> = b
                .query_first("/*#mode=READWRITE*/ SELECT COUNT(*) FROM trx_t")
                .unwrap();
            assert_eq!(
                n,
                Some(0),
                "{style}: uncommitted row visible to another client"
            );
        }
        a.query_drop("ROLLBACK").unwrap();
        if style.starts_with("SET") {
            a.query_drop("SET autocommit = 1").unwrap();
        }
        let n: Option<i64> = a
            .query_first("/*#mode=READWRITE*/ SELECT COUNT(*) FROM trx_t")
            .unwrap();
        assert_eq!(n, Some(0), "{style}: rollback lost");
    }
    // Commit is visible to others.
    a.query_drop("BEGIN").unwrap();
    a.query_drop("INSERT INTO trx_t VALUES (2)").unwrap();
    a.query_drop("COMMIT").unwrap();
    let n: Option<i64> = b
        .query_first("/*#mode=READWRITE*/ SELECT COUNT(*) FROM trx_t")
        .unwrap();
    assert_eq!(n, Some(1));
}

/// An error packet carries no status flags. A statement that fails inside
/// a transaction leaves the transaction open: the session keeps its
/// connection, and no other client ever borrows it mid-transaction.
#[test]
fn an_error_inside_a_transaction_keeps_it() {
    let p = tight_proxy();
    let mut setup = p.conn();
    setup
        .query_drop("CREATE TABLE IF NOT EXISTS trx_err (id int primary key)")
        .unwrap();
    setup.query_drop("DELETE FROM trx_err").unwrap();
    let mut a = p.conn();
    for style in ["BEGIN", "SET autocommit = 0"] {
        a.query_drop(style).unwrap();
        a.query_drop("INSERT INTO trx_err VALUES (1)").unwrap();
        let dup = a.query_drop("INSERT INTO trx_err VALUES (1)");
        assert!(dup.is_err(), "{style}: duplicate key accepted");
        // Other clients churn the pool meanwhile (two connections per
        // server): none may get the open transaction's connection.
        for _ in 0..4 {
            let mut o = p.conn();
            let n: Option<i64> = o
                .query_first("/*#mode=READWRITE*/ SELECT COUNT(*) FROM trx_err")
                .unwrap();
            assert_eq!(
                n,
                Some(0),
                "{style}: another client sees the open transaction"
            );
            let t: Option<i64> = o
                .query_first("/*#mode=READWRITE*/ SELECT @@in_transaction")
                .unwrap();
            assert_eq!(
                t,
                Some(0),
                "{style}: another client inherited a transaction"
            );
        }
        let n: Option<i64> = a.query_first("SELECT COUNT(*) FROM trx_err").unwrap();
        assert_eq!(
            n,
            Some(1),
            "{style}: the read after an error left the transaction"
        );
        a.query_drop("ROLLBACK").unwrap();
        if style.starts_with("SET") {
            a.query_drop("SET autocommit = 1").unwrap();
        }
    }
    // Outside a transaction, an error changes nothing either: plain reads
    // still go to the replicas (an error once made the session look like
    // autocommit was off).
    let before = status_counter(lab().primary, "Com_select");
    for _ in 0..20 {
        // (eventual: the session's own writes above would send its reads
        // to the primary until the monitor sees the replicas apply them)
        assert!(a
            .query_drop("/*# consistency=eventual */ SELECT * FROM no_such_table")
            .is_err());
    }
    let on_primary = status_counter(lab().primary, "Com_select") - before;
    assert!(
        on_primary < 10,
        "{on_primary} of 20 failing reads ran on the primary"
    );
}

#[test]
fn unmovable_state_pins_the_session() {
    let p = tight_proxy();
    let mut a = p.conn();
    let mut others: Vec<_> = (0..3).map(|_| p.conn()).collect();
    a.query_drop("SET @x = 5").unwrap();
    a.query_drop("CREATE TEMPORARY TABLE tmp_t (v int)")
        .unwrap();
    a.query_drop("INSERT INTO tmp_t VALUES (7)").unwrap();
    let lock: Option<i64> = a.query_first("SELECT GET_LOCK('sextant_lock', 0)").unwrap();
    assert_eq!(lock, Some(1));
    for round in 0..20 {
        for o in &mut others {
            o.query_drop("SELECT 1").unwrap();
        }
        let x: Option<i64> = a.query_first("SELECT @x").unwrap();
        assert_eq!(x, Some(5), "round {round}");
        let v: Option<i64> = a.query_first("SELECT v FROM tmp_t").unwrap();
        assert_eq!(v, Some(7), "round {round}");
    }
    // The named lock is held by a's connection and nobody else's.
    let other: Option<i64> = others[0]
        .query_first("SELECT GET_LOCK('sextant_lock', 0)")
        .unwrap();
    assert_eq!(other, Some(0));
    let rel: Option<i64> = a
        .query_first("SELECT RELEASE_LOCK('sextant_lock')")
        .unwrap();
    assert_eq!(rel, Some(1));
    // COM_RESET_CONNECTION ends the pin and the state.
    a.reset().unwrap();
    let x: Option<Option<i64>> = a.query_first("SELECT @x").unwrap();
    assert_eq!(x, Some(None));
}

#[test]
fn last_insert_id_and_found_rows() {
    let p = Setup::default().start();
    let mut a = p.conn();
    a.query_drop("CREATE TABLE IF NOT EXISTS ai_t (id int auto_increment primary key, v int)")
        .unwrap();
    for i in 0..20 {
        a.query_drop(format!("INSERT INTO ai_t (v) VALUES ({i})"))
            .unwrap();
        let want = a.last_insert_id();
        let got: Option<u64> = a.query_first("SELECT LAST_INSERT_ID()").unwrap();
        assert_eq!(got, Some(want));
    }
    let _: Vec<i64> = a
        .query("SELECT SQL_CALC_FOUND_ROWS id FROM ai_t LIMIT 3")
        .unwrap();
    let total: Option<i64> = a.query_first("SELECT FOUND_ROWS()").unwrap();
    let real: Option<i64> = a
        .query_first("/*#mode=READWRITE*/ SELECT COUNT(*) FROM ai_t")
        .unwrap();
    assert_eq!(total, real);
}

/// ROW_COUNT() and FOUND_ROWS() describe the session's statement before
/// wherever they run: with hold_ms = 0 a read after a read on a replica, or
/// after a write, runs on whichever connection the pool gives (and
/// FOUND_ROWS() after a LIMIT read answered 0 or another session's count).
/// Each is compared with a direct connection running the same statements.
#[test]
fn row_count_and_found_rows_follow_the_session() {
    let p = tight_proxy();
    let mut a = p.conn();
    let mut d = direct(lab().primary);
    d.query_drop("CREATE DATABASE IF NOT EXISTS sextant_test")
        .unwrap();
    d.query_drop("USE sextant_test").unwrap();
    // The same rows twice: rc_t for sextant, rc_d for the direct session.
    for t in ["rc_t", "rc_d"] {
        d.query_drop(format!(
            "CREATE TABLE IF NOT EXISTS {t} (id INT PRIMARY KEY, v INT)"
        ))
        .unwrap();
        d.query_drop(format!("DELETE FROM {t}")).unwrap();
        d.query_drop(format!(
            "INSERT INTO {t} VALUES (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)"
        ))
        .unwrap();
    }
    sync_replicas();
    // Another session keeps the pool's connections busy with answers of
    // its own.
    let mut b = p.conn();
    let script = [
        ("SELECT id FROM rc_t WHERE id < 4", "SELECT FOUND_ROWS()"),
        (
            "SELECT id FROM rc_t LIMIT 2",
            "SELECT FOUND_ROWS(), ROW_COUNT()",
        ),
        (
            "UPDATE rc_t SET v = v + 1 WHERE id > 2",
            "SELECT ROW_COUNT()",
        ),
        // A write that reads no table keeps FOUND_ROWS() (of SELECT 1).
        ("SELECT id FROM rc_t WHERE id > 1", "SELECT 1"),
        ("INSERT INTO rc_t VALUES (6, 6)", "SELECT FOUND_ROWS()"),
        (
            "UPDATE rc_t SET v = v WHERE id = 1",
            "SELECT ROW_COUNT() AS n",
        ),
        (
            "SELECT * FROM rc_t WHERE id > 2",
            "SELECT FOUND_ROWS() + 10",
        ),
        (
            "INSERT INTO rc_t VALUES (1, 1)",
            "SELECT ROW_COUNT(), FOUND_ROWS()",
        ),
        ("DELETE FROM rc_t WHERE id = 5", "SELECT ROW_COUNT()"),
        ("BEGIN", "SELECT ROW_COUNT()"),
        ("SELECT id FROM rc_t", "SELECT FOUND_ROWS()"),
        ("COMMIT", "SELECT FOUND_ROWS()"),
    ];
    for (before, read) in script {
        let _ = d.query_drop(before.replace("rc_t", "rc_d"));
        let want: Vec<mysql::Row> = d.query(read).unwrap();
        let _ = a.query_drop(before);
        let _: Vec<mysql::Row> = b.query("SELECT id FROM rc_t WHERE id = 2").unwrap();
        let got: Vec<mysql::Row> = a
            .query(read)
            .unwrap_or_else(|e| panic!("{read} after {before}: {e}"));
        assert_eq!(
            text_rows(got.clone()),
            text_rows(want.clone()),
            "{read} after {before}"
        );
        let names = |r: &[mysql::Row]| -> Vec<String> {
            r.first()
                .map(|r| {
                    r.columns_ref()
                        .iter()
                        .map(|c| c.name_str().into_owned())
                        .collect()
                })
                .unwrap_or_default()
        };
        assert_eq!(names(&got), names(&want), "column names of {read}");
    }
    // A write whose subquery reads a table sets FOUND_ROWS() on its
    // connection only; with hold_ms = 0 that connection is back in the
    // pool before the next statement: refused, not another connection's.
    a.query_drop("UPDATE rc_t SET v = v WHERE id IN (SELECT id FROM (SELECT id FROM rc_t) s)")
        .unwrap();
    match a.query_drop("SELECT FOUND_ROWS()") {
        Err(mysql::Error::MySqlError(e)) => {
            assert_eq!(e.code, 1235, "{}", e.message);
            assert!(e.message.contains("FOUND_ROWS()"), "{}", e.message);
        }
        other => panic!("FOUND_ROWS() after its connection went back to the pool: {other:?}"),
    }
    // Rows skipped by an offset count, and a union's before its LIMIT:
    // the server's value, or refused, never the rows sent.
    // So does an aggregate's whose WHERE the optimizer finds impossible
    // (FOUND_ROWS() stays as it was), and a read of one row or none may
    // be one.
    let mut refused = 0;
    for read in [
        "SELECT id FROM rc_t ORDER BY id LIMIT 1 OFFSET 2",
        "SELECT id FROM rc_t ORDER BY id LIMIT 2, 1",
        "SELECT id FROM rc_t UNION ALL SELECT id FROM rc_t LIMIT 2",
        "SELECT COUNT(*) FROM rc_t WHERE id BETWEEN 4 AND 3",
    ] {
        d.query_drop(read.replace("rc_t", "rc_d")).unwrap();
        let want: Option<u64> = d.query_first("SELECT FOUND_ROWS()").unwrap();
        assert!(want > Some(2) || read.contains("COUNT"), "{want:?}");
        let _: Vec<mysql::Row> = a.query(read).unwrap();
        match a.query_first::<u64, _>("SELECT FOUND_ROWS()") {
            Ok(n) => assert_eq!(n, want, "FOUND_ROWS() after {read}"),
            Err(mysql::Error::MySqlError(e)) => {
                assert_eq!(e.code, 1235, "{}", e.message);
                refused += 1;
            }
            Err(e) => panic!("{e}"),
        }
    }
    // With hold_ms = 0 the reads' connections went back to the pool.
    assert_eq!(refused, 4);
    // The next SELECT sets it again.
    let _: Vec<i32> = a.query("SELECT id FROM rc_t WHERE id < 3").unwrap();
    let n: Option<u64> = a.query_first("SELECT FOUND_ROWS()").unwrap();
    assert_eq!(n, Some(2));
}

/// SHOW WARNINGS, SHOW COUNT(*) WARNINGS and @@warning_count describe the
/// session's own statement before (hold_ms = 0, two connections per
/// server, compared with a direct connection), never what a pooled
/// connection's last user left on it.
#[test]
fn warnings_are_the_sessions_own() {
    let p = tight_proxy();
    let mut d = direct(lab().primary);
    d.query_drop("CREATE DATABASE IF NOT EXISTS sextant_test")
        .unwrap();
    d.query_drop("USE sextant_test").unwrap();
    d.query_drop("CREATE TABLE IF NOT EXISTS w_t (id INT PRIMARY KEY, v INT)")
        .unwrap();
    d.query_drop("DELETE FROM w_t").unwrap();
    d.query_drop("INSERT INTO w_t VALUES (1, 1), (2, 2), (3, 3)")
        .unwrap();
    sync_replicas();
    let warn = "SELECT CAST('1x' AS INT), CAST('2y' AS INT) FROM w_t WHERE id < 3";
    let rows = |c: &mut mysql::Conn, q: &str| -> Vec<Vec<Option<String>>> {
        text_rows(c.query(q).unwrap_or_else(|e| panic!("{q}: {e}")))
    };
    // Other sessions leave warnings on every pooled connection (of the
    // primary and of the replicas) and go.
    for _ in 0..3 {
        let mut others: Vec<mysql::Conn> = (0..2).map(|_| p.conn()).collect();
        for o in &mut others {
            let _ = rows(o, warn);
            let _ = o.query_drop("UPDATE w_t SET v = CAST('9z' AS INT) WHERE id = 3");
        }
    }
    let mut a = p.conn();
    for q in [
        "SHOW WARNINGS",
        "SHOW ERRORS",
        "SHOW COUNT(*) WARNINGS",
        "SELECT @@warning_count",
    ] {
        let want = rows(&mut direct(lab().primary), q);
        assert_eq!(rows(&mut a, q), want, "{q} as a session's first statement");
    }
    // Another session keeps the pool's connections busy meanwhile.
    let mut b = p.conn();
    let script = [
        (warn, "SHOW WARNINGS"),
        (warn, "SHOW COUNT(*) WARNINGS"),
        (warn, "SELECT @@warning_count"),
        (warn, "SHOW WARNINGS LIMIT 1, 1"),
        ("SELECT id FROM w_t", "SHOW WARNINGS"),
        ("SELECT 1/0", "SELECT @@warning_count"),
        ("SELECT 1/0", "SHOW WARNINGS"),
        ("UPDATE w_t SET v = v + 1 WHERE id = 1", "SHOW WARNINGS"),
        (
            "UPDATE w_t SET v = CAST('7q' AS INT) WHERE id = 2",
            "SHOW WARNINGS",
        ),
        ("SELECT nosuch FROM w_t", "SHOW ERRORS"),
        ("SELECT nosuch FROM w_t", "SHOW COUNT(*) ERRORS"),
        ("SELECT id FROM w_t WHERE id = 1", "SHOW COUNT(*) WARNINGS"),
    ];
    for (before, read) in script {
        let _ = d.query_drop(before);
        let want = rows(&mut d, read);
        let _ = a.query_drop(before);
        let _ = rows(&mut b, warn);
        assert_eq!(rows(&mut a, read), want, "{read} after {before}");
    }
    // A pause longer than the connection is kept: the count is known, the
    // conditions' text went with the connection (refused, not another's).
    let _ = rows(&mut a, warn);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let _ = rows(&mut b, warn);
    // Two rows, two conditions each.
    let four = vec![vec![Some("4".to_string())]];
    assert_eq!(rows(&mut a, "SELECT @@warning_count"), four);
    assert_eq!(rows(&mut a, "SHOW COUNT(*) WARNINGS"), four);
    let e = match a.query_drop("SHOW WARNINGS") {
        Err(mysql::Error::MySqlError(e)) => e,
        other => panic!("SHOW WARNINGS after its connection went back to the pool: {other:?}"),
    };
    assert_eq!(e.code, 1235, "{}", e.message);
    assert!(e.message.contains("warnings"), "{}", e.message);
    // Sextant's own error is what SHOW WARNINGS lists after it.
    assert_eq!(
        rows(&mut a, "SHOW WARNINGS"),
        vec![vec![
            Some("Error".into()),
            Some("1235".into()),
            Some(e.message.clone())
        ]]
    );
    assert_eq!(
        rows(&mut a, "SELECT @@warning_count"),
        vec![vec![Some("1".to_string())]]
    );
}

/// Raw protocol: a server-side cursor (COM_STMT_EXECUTE with
/// CURSOR_TYPE_READ_ONLY, then COM_STMT_FETCH) and COM_STMT_SEND_LONG_DATA.
#[test]
fn cursors_and_long_data() {
    let p = tight_proxy();
    let mut r = Raw::login(p.port, "app", "apppass", Some("sextant_test"));
    // Prepare.
    let mut q = vec![0x16];
    q.extend_from_slice(b"SELECT seq FROM seq_1_to_100");
    r.send(0, &q);
    let (_, ok) = r.read().unwrap();
    assert_eq!(ok[0], 0, "{:?}", String::from_utf8_lossy(&ok));
    let id = u32::from_le_bytes([ok[1], ok[2], ok[3], ok[4]]);
    let cols = u16::from_le_bytes([ok[5], ok[6]]);
    for _ in 0..cols + 1 {
        r.read().unwrap(); // column definitions + EOF
    }
    // Execute with a read-only cursor: metadata and EOF, no rows.
    let mut e = vec![0x17];
    e.extend_from_slice(&id.to_le_bytes());
    e.push(1);
    e.extend_from_slice(&1u32.to_le_bytes());
    r.send(0, &e);
    let (_, cc) = r.read().unwrap();
    assert_eq!(cc, vec![1]);
    r.read().unwrap();
    let (_, eof) = r.read().unwrap();
    assert_eq!(eof[0], 0xfe);
    let st = u16::from_le_bytes([eof[3], eof[4]]);
    assert!(st & 0x40 != 0, "no cursor opened");
    // Other clients churn the pool meanwhile.
    let mut churn = p.conn();
    let mut rows = 0;
    loop {
        churn.query_drop("SELECT 1").unwrap();
        let mut f = vec![0x1c];
        f.extend_from_slice(&id.to_le_bytes());
        f.extend_from_slice(&30u32.to_le_bytes());
        r.send(0, &f);
        let last = loop {
            let (_, pk) = r.read().unwrap();
            assert_ne!(
                pk[0],
                0xff,
                "fetch failed: {}",
                String::from_utf8_lossy(&pk)
            );
            if pk[0] == 0xfe && pk.len() < 9 {
                break u16::from_le_bytes([pk[3], pk[4]]) & 0x80 != 0;
            }
            rows += 1;
        };
        if last {
            break;
        }
    }
    assert_eq!(rows, 100);

    // Long data: a parameter sent in pieces before the execute.
    let mut q = vec![0x16];
    q.extend_from_slice(b"SELECT LENGTH(?)");
    r.send(0, &q);
    let (_, ok) = r.read().unwrap();
    let id = u32::from_le_bytes([ok[1], ok[2], ok[3], ok[4]]);
    for _ in 0..4 {
        r.read().unwrap(); // param def, EOF, column def, EOF
    }
    for _ in 0..3 {
        churn.query_drop("SELECT 1").unwrap();
        let mut l = vec![0x18];
        l.extend_from_slice(&id.to_le_bytes());
        l.extend_from_slice(&0u16.to_le_bytes());
        l.extend_from_slice(&[b'z'; 1000]);
        r.send(0, &l);
    }
    r.execute_one(id, 0xfc, &[]); // BLOB, sent as long data
    let resp = r.read_response();
    // Binary row: header, null bitmap, LENGTH() as a 4-byte LONG.
    let row = resp
        .iter()
        .find(|p| p[0] == 0 && p.len() == 1 + 1 + 4)
        .unwrap_or_else(|| panic!("no binary row in {resp:?}"));
    let len = u32::from_le_bytes(row[2..6].try_into().unwrap());
    assert_eq!(len, 3000);
}

/// One pooled connection shared in turn by sessions of the same user: a
/// session sees none of the state another one left on it (its current
/// database, its LAST_INSERT_ID()).
#[test]
fn the_next_session_on_a_connection_inherits_nothing() {
    let p = one_connection_proxy();
    let mut a = p.conn();
    a.query_drop("CREATE TABLE IF NOT EXISTS lid_t (id int primary key auto_increment, v int)")
        .unwrap();
    a.query_drop("INSERT INTO lid_t (v) VALUES (1)").unwrap();
    let a_id: Option<u64> = a.query_first("SELECT LAST_INSERT_ID()").unwrap();
    assert!(a_id.unwrap_or(0) > 0);
    // A session connected without a database has none, though the only
    // connection was just in sextant_test.
    let mut b =
        mysql::Conn::new(mysql::Opts::from_url(&p.url("app", "apppass", "")).unwrap()).unwrap();
    for _ in 0..3 {
        let db: Option<Option<String>> = b.query_first("SELECT DATABASE()").unwrap();
        assert_eq!(db, Some(None), "a session without a database got one");
        // ...and never another session's generated id.
        let id: Option<u64> = b.query_first("SELECT LAST_INSERT_ID()").unwrap();
        assert_eq!(id, Some(0), "LAST_INSERT_ID() of another session");
        let db: Option<String> = a.query_first("SELECT DATABASE()").unwrap();
        assert_eq!(db.as_deref(), Some("sextant_test"));
        let id: Option<u64> = a.query_first("SELECT LAST_INSERT_ID()").unwrap();
        assert_eq!(id, a_id, "a session's own LAST_INSERT_ID() changed");
    }
    // b's own insert is b's; a's stays a's.
    b.query_drop("INSERT INTO sextant_test.lid_t (v) VALUES (2)")
        .unwrap();
    let b_id: Option<u64> = b.query_first("SELECT LAST_INSERT_ID()").unwrap();
    assert!(b_id > a_id);
    let id: Option<u64> = a.query_first("SELECT LAST_INSERT_ID()").unwrap();
    assert_eq!(id, a_id);
}

/// `SET insert_id = N` gives N to the session's next INSERT, wherever the
/// pool would have sent it, and never to another session's.
#[test]
fn set_insert_id_is_the_sessions_own() {
    let p = Setup {
        group: "pool_max = 2\n[routing]\nhold_ms = 0\n",
        no_replicas: true,
        ..Default::default()
    }
    .start();
    let mut a = p.conn();
    a.query_drop("CREATE TABLE IF NOT EXISTS iid_t (id int primary key auto_increment, v int)")
        .unwrap();
    a.query_drop("DELETE FROM iid_t WHERE id IN (1000, 2000)")
        .unwrap();
    let mut b = p.conn();
    for round in 0..4 {
        // a sets an id and does not use it; then b inserts on whichever
        // connection it gets (with two, sometimes a's).
        a.query_drop("SET insert_id = 1000").unwrap();
        a.query_drop("SELECT 1").unwrap();
        b.query_drop("INSERT INTO iid_t (v) VALUES (2)").unwrap();
        let id: Option<u64> = b.query_first("SELECT LAST_INSERT_ID()").unwrap();
        assert_ne!(
            id,
            Some(1000),
            "round {round}: b's insert took a's insert_id"
        );
    }
    let n: Option<i64> = a
        .query_first("SELECT COUNT(*) FROM iid_t WHERE id = 1000")
        .unwrap();
    assert_eq!(n, Some(0));
    // The session's own: the next statement's INSERT gets it.
    a.query_drop("SET insert_id = 2000").unwrap();
    a.query_drop("INSERT INTO iid_t (v) VALUES (3)").unwrap();
    let id: Option<u64> = a.query_first("SELECT LAST_INSERT_ID()").unwrap();
    assert_eq!(id, Some(2000));
}

/// A prepared statement leaves the session as the same statement sent as
/// text does: after a prepared `SQL_CALC_FOUND_ROWS` read, FOUND_ROWS()
/// answers for it, and a prepared `SET insert_id` gives the id to the
/// session's next INSERT and to no other session's. Another session
/// inserts between the statements, so with two connections per server and
/// no hold a session that let its connection go shows it.
#[test]
fn prepared_statements_leave_the_session_as_text_ones_do() {
    let p = tight_proxy();
    let mut a = p.conn();
    let mut b = p.conn();
    a.query_drop("CREATE TABLE IF NOT EXISTS prep_fx (id int primary key auto_increment, v int)")
        .unwrap();
    a.query_drop("DELETE FROM prep_fx WHERE id >= 5000")
        .unwrap();
    for i in 0..12 {
        a.query_drop(format!("INSERT INTO prep_fx (v) VALUES ({i})"))
            .unwrap();
    }
    for round in 0..6u64 {
        let real: Option<i64> = a
            .query_first("/*#mode=READWRITE*/ SELECT COUNT(*) FROM prep_fx")
            .unwrap();
        let _: Vec<i64> = a
            .exec("SELECT SQL_CALC_FOUND_ROWS id FROM prep_fx LIMIT 2", ())
            .unwrap();
        b.query_drop("SELECT SQL_CALC_FOUND_ROWS 1 FROM DUAL")
            .unwrap();
        let total: Option<i64> = match round % 2 {
            0 => a.query_first("SELECT FOUND_ROWS()").unwrap(),
            _ => a.exec_first("SELECT FOUND_ROWS()", ()).unwrap(),
        };
        assert_eq!(
            total, real,
            "round {round}: FOUND_ROWS() after a prepared read"
        );

        // Below the table's counter, so that b's own next id is never it.
        let id = 9000 - 10 * round;
        a.exec_drop(format!("SET insert_id = {id}"), ()).unwrap();
        b.query_drop("INSERT INTO prep_fx (v) VALUES (-1)").unwrap();
        let b_id: Option<u64> = b.query_first("SELECT LAST_INSERT_ID()").unwrap();
        assert_ne!(
            b_id,
            Some(id),
            "round {round}: b's insert took a's insert_id"
        );
        a.query_drop("INSERT INTO prep_fx (v) VALUES (-2)").unwrap();
        let a_id: Option<u64> = a.query_first("SELECT LAST_INSERT_ID()").unwrap();
        assert_eq!(a_id, Some(id), "round {round}: a prepared SET insert_id");
    }
}

/// State a stored procedure creates (a user variable, a temporary table)
/// stays with the session that called it, and no other session sees it.
#[test]
fn state_created_inside_call_stays_with_its_session() {
    let p = one_connection_proxy();
    let mut setup = p.conn();
    setup
        .query_drop("DROP PROCEDURE IF EXISTS proc_state")
        .unwrap();
    setup
        .query_drop("CREATE TABLE IF NOT EXISTS proc_log (id int primary key auto_increment)")
        .unwrap();
    // It writes too: the server then reports a variable (the write's GTID)
    // beside the unexplained state change.
    setup
        .query_drop(
            "CREATE PROCEDURE proc_state() BEGIN SET @from_proc = 42; \
             CREATE TEMPORARY TABLE IF NOT EXISTS proc_tmp (id int); \
             INSERT INTO proc_log VALUES (NULL); SELECT 1 AS one; END",
        )
        .unwrap();
    drop(setup);
    let mut a = p.conn();
    // (It returns a result too, as procedures often do.)
    a.query_drop("CALL proc_state()").unwrap();
    let v: Option<Option<i64>> = a.query_first("SELECT @from_proc").unwrap();
    assert_eq!(v, Some(Some(42)), "the caller lost its variable");
    let n: Option<i64> = a.query_first("SELECT COUNT(*) FROM proc_tmp").unwrap();
    assert_eq!(n, Some(0));
    // The caller keeps its connection (the only one): another session
    // waits for it, and once a is gone gets a clean one.
    drop(a);
    let mut b = p.conn();
    let v: Option<Option<i64>> = b.query_first("SELECT @from_proc").unwrap();
    assert_eq!(
        v,
        Some(None),
        "another session sees the procedure's variable"
    );
    let e = b.query_drop("SELECT COUNT(*) FROM proc_tmp");
    assert!(
        e.is_err(),
        "another session sees the procedure's temporary table"
    );
}

/// Two sessions preparing the same unqualified text in different
/// databases each read their own database's table, though their
/// statements share one server connection.
#[test]
fn prepared_statements_follow_each_sessions_database() {
    let p = one_connection_proxy();
    let mut setup = p.conn();
    for (db, v) in [("ps_db1", 1), ("ps_db2", 2)] {
        setup
            .query_drop(format!("CREATE DATABASE IF NOT EXISTS {db}"))
            .unwrap();
        setup
            .query_drop(format!("CREATE OR REPLACE TABLE {db}.s (v int)"))
            .unwrap();
        setup
            .query_drop(format!("INSERT INTO {db}.s VALUES ({v})"))
            .unwrap();
    }
    drop(setup);
    let open = |db: &str| {
        mysql::Conn::new(mysql::Opts::from_url(&p.url("app", "apppass", db)).unwrap()).unwrap()
    };
    let (mut a, mut b) = (open("ps_db1"), open("ps_db2"));
    let sa = a.prep("SELECT v FROM s WHERE ? = ?").unwrap();
    let sb = b.prep("SELECT v FROM s WHERE ? = ?").unwrap();
    for round in 0..20 {
        let va: Option<i64> = a.exec_first(&sa, (1, 1)).unwrap();
        let vb: Option<i64> = b.exec_first(&sb, (1, 1)).unwrap();
        assert_eq!((va, vb), (Some(1), Some(2)), "round {round}");
    }
}

/// The value a probe gives, or None when the server refused it.
fn probe(c: &mut mysql::Conn, sql: &str) -> Option<String> {
    let row: Option<mysql::Row> = c.query_first(sql).ok()?;
    Some(row.map_or("no row".into(), |r| {
        r.as_ref(0).map_or("no column".into(), |v| v.as_sql(false))
    }))
}

/// Every kind of session state, set by one session on the only pooled
/// connection: the next session of the same user sees a fresh session's
/// value (as a direct connection to the server shows it), both after the
/// first session ended and, for state that does not bind the session,
/// while it is still open between statements; and the first session keeps
/// its own.
#[test]
fn no_kind_of_session_state_reaches_the_next_session() {
    // (set, probe, binds the session to its connection)
    let cases: &[(&str, &str, bool)] = &[
        ("SET @u = 5", "SELECT @u", true),
        (
            "SET timestamp = 1000000000",
            "SELECT UNIX_TIMESTAMP() > 1500000000",
            false,
        ),
        ("SET SESSION sql_mode = 'ANSI'", "SELECT @@sql_mode", false),
        ("SET NAMES latin1", "SELECT @@character_set_client", false),
        ("SET time_zone = '+05:00'", "SELECT @@time_zone", false),
        (
            "SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            "SELECT @@tx_isolation",
            false,
        ),
        ("SET autocommit = 0", "SELECT @@autocommit", true),
        (
            "SET sql_select_limit = 1",
            "SELECT @@sql_select_limit",
            false,
        ),
        (
            "SET max_statement_time = 5",
            "SELECT @@max_statement_time",
            false,
        ),
        (
            "SET group_concat_max_len = 4",
            "SELECT @@group_concat_max_len",
            false,
        ),
        ("SET sql_log_bin = 0", "SELECT @@sql_log_bin", false),
        (
            "SET foreign_key_checks = 0",
            "SELECT @@foreign_key_checks",
            false,
        ),
        ("SET unique_checks = 0", "SELECT @@unique_checks", false),
        ("SET LAST_INSERT_ID = 55", "SELECT LAST_INSERT_ID()", false),
        ("USE sbtest", "SELECT DATABASE()", false),
        // Session tracking reports NULL as ''; Connector/J sends this at
        // every connect.
        (
            "SET character_set_results = NULL",
            "SELECT @@character_set_results",
            false,
        ),
        (
            "CREATE TEMPORARY TABLE st_tmp (id int)",
            "SELECT COUNT(*) FROM st_tmp",
            true,
        ),
        (
            "SELECT GET_LOCK('st_lock', 0)",
            "SELECT IS_USED_LOCK('st_lock') IS NOT NULL",
            true,
        ),
        ("PREPARE st_s FROM 'SELECT 1'", "EXECUTE st_s", true),
    ];
    // An account that may also set sql_log_bin (BINLOG ADMIN), as a
    // migration tool's would; its own schemas otherwise.
    let mut d = direct(lab().primary);
    for sql in [
        "CREATE USER IF NOT EXISTS 'st_admin'@'%' IDENTIFIED BY 'stpass'",
        "GRANT BINLOG ADMIN ON *.* TO 'st_admin'@'%'",
        "GRANT ALL ON sextant_test.* TO 'st_admin'@'%'",
        "GRANT ALL ON sbtest.* TO 'st_admin'@'%'",
    ] {
        d.query_drop(sql).unwrap();
    }
    let p = Setup {
        users: "\n[[users]]\nname = \"st_admin\"\npassword = \"stpass\"\n",
        group: "pool_max = 1\n[routing]\nhold_ms = 0\n",
        no_replicas: true,
        ..Default::default()
    }
    .start();
    let url = p.url("st_admin", "stpass", "sextant_test");
    let open = || mysql::Conn::new(mysql::Opts::from_url(&url).unwrap()).unwrap();
    let mut failures = Vec::new();
    for &(set, probe_sql, binds) in cases {
        let fresh = {
            let mut d = mysql::Conn::new(
                mysql::OptsBuilder::new()
                    .ip_or_hostname(Some("127.0.0.1"))
                    .tcp_port(lab().primary)
                    .user(Some("st_admin"))
                    .pass(Some("stpass"))
                    .db_name(Some("sextant_test"))
                    .prefer_socket(false),
            )
            .unwrap();
            probe(&mut d, probe_sql)
        };
        let mut a = open();
        a.query_drop(set).unwrap_or_else(|e| panic!("{set}: {e}"));
        let own = probe(&mut a, probe_sql);
        if own == fresh {
            failures.push(format!("{set}: the probe cannot tell ({own:?})"));
            continue;
        }
        if !binds {
            // The connection goes back to the pool between a's statements.
            let mut b = open();
            let seen = probe(&mut b, probe_sql);
            if seen != fresh {
                failures.push(format!(
                    "{set}: another open session saw {seen:?}, not {fresh:?}"
                ));
            }
            drop(b);
            let again = probe(&mut a, probe_sql);
            if again != own {
                failures.push(format!(
                    "{set}: the session itself lost it: {again:?}, not {own:?}"
                ));
            }
        }
        drop(a);
        let mut b = open();
        let seen = probe(&mut b, probe_sql);
        if seen != fresh {
            failures.push(format!(
                "{set}: the next session saw {seen:?}, not {fresh:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A client's `SET wait_timeout` is its own: sextant closes that client
/// once it idles longer (as the server would), and the server connections
/// it used are not given the short timeout, so the pooled connection the
/// next client borrows is still open.
#[test]
fn a_clients_wait_timeout_is_its_own() {
    let p = one_connection_proxy();
    let mut a = p.conn();
    a.query_drop("SET SESSION wait_timeout = 2").unwrap();
    a.query_drop("SELECT 1").unwrap();
    let mut b = p.conn();
    let v: Option<u64> = b.query_first("SELECT 1").unwrap();
    assert_eq!(v, Some(1));
    let connects = p.backends_sum("connects");
    std::thread::sleep(std::time::Duration::from_millis(3500));
    let v: Option<u64> = b.query_first("SELECT @@session.wait_timeout").unwrap();
    let fresh: Option<u64> = direct(lab().primary)
        .query_first("SELECT @@session.wait_timeout")
        .unwrap();
    assert_eq!(v, fresh, "another session's wait_timeout");
    assert_eq!(
        p.backends_sum("connects"),
        connects,
        "the pooled connection was closed by the server (the client's wait_timeout reached it)"
    );
    assert!(
        a.query_drop("SELECT 1").is_err(),
        "the client idled past its own wait_timeout and is still served"
    );
}
