//! Transaction replay against the MariaDB lab: a transaction whose server
//! connection is killed on the server goes on, on a new connection, when
//! every answer of its second run matches the first; otherwise the client
//! gets 9003 (SQLSTATE 40001) saying why it was not replayed, and nothing
//! of it is applied.

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One transaction at a time on the lab's primary: each test finds the
/// server connection to kill as the only transaction open there.
static ONE: Mutex<()> = Mutex::new(());

fn table(c: &mut mysql::Conn, name: &str) {
    c.query_drop(format!(
        "CREATE TABLE IF NOT EXISTS {name} (id INT PRIMARY KEY, v INT NOT NULL, seq INT AUTO_INCREMENT UNIQUE)"
    ))
    .unwrap();
    c.query_drop(format!("DELETE FROM {name}")).unwrap();
    c.query_drop(format!(
        "INSERT INTO {name} (id, v) VALUES (1, 10), (2, 20)"
    ))
    .unwrap();
}

/// Kills, on the primary, the server connection holding the one open
/// transaction (sextant's, for the session under test).
fn kill_the_transaction() {
    let mut d = direct(lab().primary);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        // INNODB_TRX is refreshed at most every 100 ms.
        std::thread::sleep(Duration::from_millis(150));
        let ids: Vec<u64> = d
            .query(
                "SELECT trx_mysql_thread_id FROM information_schema.INNODB_TRX \
                 WHERE trx_mysql_thread_id <> CONNECTION_ID()",
            )
            .unwrap();
        if ids.len() == 1 {
            d.query_drop(format!("KILL {}", ids[0])).unwrap();
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not one open transaction on the primary: {ids:?}"
        );
    }
}

/// A SHOW STATUS counter of the admin port.
fn status(p: &Proxy, name: &str) -> u64 {
    let rows: Vec<(String, String)> = p.admin().query("SHOW STATUS").unwrap();
    rows.into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.parse().unwrap())
        .unwrap_or_else(|| panic!("no {name} in SHOW STATUS"))
}

fn rows(c: &mut mysql::Conn, name: &str) -> Vec<(i32, i32)> {
    c.query(format!(
        "/*#mode=READWRITE*/ SELECT id, v FROM {name} ORDER BY id"
    ))
    .unwrap()
}

fn error(e: mysql::Error) -> (u16, String, String) {
    match e {
        mysql::Error::MySqlError(m) => (m.code, m.state, m.message),
        other => panic!("not a server error: {other}"),
    }
}

#[test]
fn a_transaction_whose_connection_is_killed_goes_on_once() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let p = Setup::default().start();
    let mut c = p.conn();
    table(&mut c, "rp_on");
    c.query_drop("BEGIN").unwrap();
    c.query_drop("INSERT INTO rp_on (id, v) VALUES (3, 30)")
        .unwrap();
    let seen: Vec<(i32, i32)> = c.query("SELECT id, v FROM rp_on ORDER BY id").unwrap();
    assert_eq!(seen, [(1, 10), (2, 20), (3, 30)]);
    c.query_drop("UPDATE rp_on SET v = v + 1 WHERE id = 1")
        .unwrap();
    assert_eq!(c.affected_rows(), 1);
    c.query_drop("SAVEPOINT s").unwrap();
    c.query_drop("INSERT INTO rp_on (id, v) VALUES (9, 90)")
        .unwrap();
    c.query_drop("ROLLBACK TO SAVEPOINT s").unwrap();
    kill_the_transaction();
    // The next statement runs after the transaction was run again on a
    // new connection: the client sees nothing of it.
    c.query_drop("INSERT INTO rp_on (id, v) VALUES (4, 40)")
        .expect("the transaction goes on");
    let seen: Vec<(i32, i32)> = c.query("SELECT id, v FROM rp_on ORDER BY id").unwrap();
    assert_eq!(seen, [(1, 11), (2, 20), (3, 30), (4, 40)]);
    c.query_drop("COMMIT").unwrap();
    // Applied once: the UPDATE did not run twice, the rolled-back insert
    // is not there.
    assert_eq!(
        rows(&mut p.conn(), "rp_on"),
        [(1, 11), (2, 20), (3, 30), (4, 40)]
    );
    let logs = p.logs();
    assert!(logs.contains("transaction replayed"), "{logs}");
    assert_eq!(status(&p, "transaction_replays"), 1);
    assert_eq!(status(&p, "transaction_replays_done"), 1);
}

/// Prepared statements (the binary protocol) are replayed too: each
/// execution is prepared again on the new connection and run with the
/// parameters and types it first ran with.
#[test]
fn prepared_statements_are_replayed() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let p = Setup::default().start();
    let mut c = p.conn();
    table(&mut c, "rp_prep");
    let insert = c.prep("INSERT INTO rp_prep (id, v) VALUES (?, ?)").unwrap();
    let read = c.prep("SELECT v, seq FROM rp_prep WHERE id = ?").unwrap();
    c.query_drop("BEGIN").unwrap();
    c.exec_drop(&insert, (3, 30)).unwrap();
    let seen: Option<(i32, i64)> = c.exec_first(&read, (3,)).unwrap();
    c.exec_drop("UPDATE rp_prep SET v = v + ? WHERE id = ?", (5, 1))
        .unwrap();
    kill_the_transaction();
    c.exec_drop(&insert, (4, 40))
        .expect("a transaction of prepared statements is replayed");
    let again: Option<(i32, i64)> = c.exec_first(&read, (3,)).unwrap();
    assert_eq!(again, seen, "the same row, the same auto-increment value");
    c.query_drop("COMMIT").unwrap();
    assert_eq!(
        rows(&mut p.conn(), "rp_prep"),
        [(1, 15), (2, 20), (3, 30), (4, 40)]
    );
    assert_eq!(status(&p, "transaction_replays_done"), 1);
}

/// NOW() and UNIX_TIMESTAMP() answer in a replay what they answered the
/// first time (the session's timestamp is pinned to when the statement
/// was first sent), though the replay runs more than a second later.
#[test]
fn the_time_a_transaction_saw_is_the_time_its_replay_sees() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let p = Setup::default().start();
    let mut c = p.conn();
    table(&mut c, "rp_time");
    c.query_drop("BEGIN").unwrap();
    c.query_drop("INSERT INTO rp_time (id, v) VALUES (3, UNIX_TIMESTAMP() % 1000)")
        .unwrap();
    let first: Option<i64> = c.query_first("SELECT UNIX_TIMESTAMP()").unwrap();
    let at: Option<i64> = c.query_first("SELECT v FROM rp_time WHERE id = 3").unwrap();
    kill_the_transaction();
    std::thread::sleep(Duration::from_millis(1500));
    c.query_drop("INSERT INTO rp_time (id, v) VALUES (4, 40)")
        .expect("a transaction that read the time is replayed");
    let again: Option<i64> = c.query_first("SELECT v FROM rp_time WHERE id = 3").unwrap();
    assert_eq!(again, at, "the replayed INSERT took the first run's time");
    c.query_drop("COMMIT").unwrap();
    let now: Option<i64> = c.query_first("SELECT UNIX_TIMESTAMP()").unwrap();
    assert!(
        now > first,
        "the session's clock runs again after the replay"
    );
}

#[test]
fn an_answer_that_differs_the_second_time_rolls_the_transaction_back() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let p = Setup::default().start();
    let mut c = p.conn();
    table(&mut c, "rp_diff");
    c.query_drop("BEGIN").unwrap();
    c.query_drop("INSERT INTO rp_diff (id, v) VALUES (3, 30)")
        .unwrap();
    let v: Option<i32> = c.query_first("SELECT v FROM rp_diff WHERE id = 2").unwrap();
    assert_eq!(v, Some(20));
    kill_the_transaction();
    // Another client changes the row the transaction read.
    direct(lab().primary)
        .query_drop("UPDATE rp_diff SET v = 21 WHERE id = 2")
        .unwrap();
    let (code, state, msg) = error(
        c.query_drop("INSERT INTO rp_diff (id, v) VALUES (4, 40)")
            .expect_err("a transaction whose read differs went on"),
    );
    assert_eq!((code, state.as_str()), (9003, "40001"), "{msg}");
    assert!(
        msg.contains("could not be replayed")
            && msg.contains("statement 3")
            && msg.contains("answered differently"),
        "{msg}"
    );
    // Nothing of it applied, and the session goes on.
    assert_eq!(rows(&mut c, "rp_diff"), [(1, 10), (2, 21)]);
    assert_eq!(status(&p, "transaction_replays_mismatched"), 1);
}

/// Each reason a transaction is not replayed: the client is told which.
#[test]
fn transactions_that_cannot_be_replayed_say_why() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let p = Setup {
        proxy: "replay_max_bytes = 300\n",
        ..Default::default()
    }
    .start();
    let cases: &[(&str, &str)] = &[
        (
            "CREATE TEMPORARY TABLE rp_tmp (a INT)",
            "a temporary table",
        ),
        ("SELECT GET_LOCK('rp_lock', 1)", "a named lock (GET_LOCK)"),
        ("SET @rp = 5", "a user variable"),
        ("SET SESSION sql_mode = 'ANSI'", "a session setting changed"),
        (
            "INSERT INTO rp_why (id, v) VALUES (50, 1), (51, 1), (52, 1), (53, 1), (54, 1), (55, 1), (56, 1), (57, 1), (58, 1), (59, 1), (60, 1), (61, 1), (62, 1), (63, 1), (64, 1), (65, 1), (66, 1), (67, 1), (68, 1), (69, 1), (70, 1), (71, 1), (72, 1), (73, 1), (74, 1), (75, 1)",
            "replay_max_bytes (300 bytes)",
        ),
    ];
    for (stmt, why) in cases {
        let mut c = p.conn();
        table(&mut c, "rp_why");
        c.query_drop("BEGIN").unwrap();
        c.query_drop("INSERT INTO rp_why (id, v) VALUES (3, 30)")
            .unwrap();
        c.query_drop(*stmt).unwrap();
        kill_the_transaction();
        let (code, state, msg) = error(
            c.query_drop("INSERT INTO rp_why (id, v) VALUES (4, 40)")
                .expect_err("not replayed"),
        );
        assert_eq!((code, state.as_str()), (9003, "40001"), "{stmt}: {msg}");
        assert!(
            msg.contains("could not be replayed (") && msg.contains(why),
            "{stmt}: {msg}"
        );
        assert_eq!(rows(&mut c, "rp_why"), [(1, 10), (2, 20)], "{stmt}");
    }
    for (reason, n) in [
        ("connection_state", 2),
        ("user_variable", 1),
        ("session_change", 1),
        ("size", 1),
    ] {
        let name = format!("transaction_replays_refused_{reason}");
        assert_eq!(status(&p, &name), n, "{name}");
    }
    // A statement that may end the transaction is never replayed: a
    // COMMIT, or one that commits implicitly (DDL); its outcome is
    // unknown, and it is not run again.
    for end in ["COMMIT", "CREATE TABLE IF NOT EXISTS rp_why2 (a INT)"] {
        let mut c = p.conn();
        table(&mut c, "rp_why");
        c.query_drop("BEGIN").unwrap();
        c.query_drop("INSERT INTO rp_why (id, v) VALUES (3, 30)")
            .unwrap();
        kill_the_transaction();
        let (code, _, msg) = error(c.query_drop(end).expect_err("a killed connection"));
        assert_eq!(code, 9003, "{end}: {msg}");
        assert!(msg.contains("may or may not have run"), "{end}: {msg}");
        assert_eq!(rows(&mut c, "rp_why"), [(1, 10), (2, 20)], "{end}");
    }
}

/// A BEGIN sent with no transaction open commits nothing: when the
/// connection it was sent on turns out dead (killed while the session
/// held it), it runs again on another, and the client never knows.
#[test]
fn a_begin_on_a_dead_connection_runs_again() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let p = Setup {
        group: "[routing]\nhold_ms = 60000\n",
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    table(&mut c, "rp_begin");
    // The session holds the primary connection of its last write.
    c.query_drop("UPDATE rp_begin SET v = 11 WHERE id = 1")
        .unwrap();
    let mut d = direct(lab().primary);
    let ids: Vec<u64> = d
        .query("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'app' AND COMMAND = 'Sleep'")
        .unwrap();
    assert!(
        !ids.is_empty(),
        "no idle connection of the app's on the primary"
    );
    for id in ids {
        let _ = d.query_drop(format!("KILL {id}"));
    }
    std::thread::sleep(Duration::from_millis(200));
    c.query_drop("BEGIN")
        .expect("a BEGIN on a dead connection runs again");
    c.query_drop("INSERT INTO rp_begin (id, v) VALUES (5, 50)")
        .unwrap();
    c.query_drop("COMMIT").unwrap();
    assert_eq!(rows(&mut c, "rp_begin"), [(1, 11), (2, 20), (5, 50)]);
}

/// With replay off, a transaction whose connection is killed gets the
/// plain transaction-lost error.
#[test]
fn replay_off_reports_the_loss() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let p = Setup {
        proxy: "replay_max_bytes = 0\n",
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    table(&mut c, "rp_off");
    c.query_drop("BEGIN").unwrap();
    c.query_drop("INSERT INTO rp_off (id, v) VALUES (3, 30)")
        .unwrap();
    kill_the_transaction();
    let (code, _, msg) = error(
        c.query_drop("INSERT INTO rp_off (id, v) VALUES (4, 40)")
            .expect_err("not replayed"),
    );
    assert_eq!(code, 9003, "{msg}");
    assert!(
        msg.contains("the transaction is rolled back;") && !msg.contains("replayed"),
        "{msg}"
    );
}
