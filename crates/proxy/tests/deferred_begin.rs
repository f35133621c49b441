//! BEGIN held back by sextant and sent with the transaction's first
//! statement (session/deferred.rs), against the MariaDB lab: whatever a
//! client runs, it reads the same answers through sextant as from the
//! server itself, packet by packet (OK fields and status flags, warnings,
//! errors, rows). Sequences of statements are generated from a seed, from
//! a vocabulary of transaction control (BEGIN forms, COMMIT / ROLLBACK and
//! their chained forms, savepoints, autocommit, SET TRANSACTION, LOCK
//! TABLES), reads, writes and the statements that report on the one
//! before (warnings, ROW_COUNT(), @@in_transaction). Each runs once on a
//! direct connection to the primary and once through sextant, from the
//! same table contents.

mod common;
use common::answers::*;
use common::*;
use mysql::prelude::Queryable;

/// One test at a time: they share the table, and a TRUNCATE waits for
/// any transaction that read it.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one() -> std::sync::MutexGuard<'static, ()> {
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `script` in a new session on `port` and returns each answer.
fn run(port: u16, script: &[&str]) -> Vec<Answer> {
    run_script(port, CAPS, script)
}

/// The table every script works on, as it is before each run.
fn reset_table() {
    let mut d = direct(lab().primary);
    d.query_drop(
        "CREATE TABLE IF NOT EXISTS dbeg (id INT AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL)",
    )
    .unwrap();
    d.query_drop("TRUNCATE dbeg").unwrap();
    d.query_drop("INSERT INTO dbeg (v) VALUES (10), (20), (30)")
        .unwrap();
}

/// The script's answers from the primary itself and through sextant.
fn both(p: &Proxy, script: &[&str]) -> (Vec<Answer>, Vec<Answer>) {
    reset_table();
    let direct = run(lab().primary, script);
    reset_table();
    let through = run(p.port, script);
    (direct, through)
}

/// Compares a script's answers up to sextant's first refusal (1235 with
/// a message of sextant's: what only a connection given back to the pool
/// knew, like the warnings of a read before a BEGIN, is refused rather
/// than answered wrong; what follows a refusal may differ). Returns how
/// many statements were compared.
fn assert_same(p: &Proxy, script: &[&str]) -> usize {
    let (direct, through) = both(p, script);
    for (i, (d, t)) in direct.iter().zip(&through).enumerate() {
        if let Answer::Err {
            code: 1235,
            message,
            ..
        } = t
        {
            if message.starts_with("sextant: ") && d != t {
                return i;
            }
        }
        assert_eq!(
            d,
            t,
            "statement {} ({}) of {script:?} answered differently through sextant",
            i + 1,
            script[i]
        );
    }
    script.len()
}

const VOCABULARY: &[&str] = &[
    "BEGIN",
    "BEGIN",
    "START TRANSACTION",
    "BEGIN WORK",
    "START TRANSACTION READ WRITE",
    "START TRANSACTION READ ONLY",
    "START TRANSACTION WITH CONSISTENT SNAPSHOT",
    "COMMIT",
    "COMMIT",
    "ROLLBACK",
    "ROLLBACK",
    "COMMIT WORK",
    "COMMIT AND CHAIN",
    "ROLLBACK AND CHAIN",
    "SELECT @@in_transaction, @@autocommit",
    "SELECT COUNT(*), SUM(v) FROM dbeg",
    "SELECT v FROM dbeg WHERE id = 2",
    "SELECT 1",
    "INSERT INTO dbeg (v) VALUES (7)",
    "UPDATE dbeg SET v = v + 1 WHERE id = 1",
    "DELETE FROM dbeg WHERE id = 3",
    "SELECT 1/0",
    "SHOW WARNINGS",
    "SELECT @@warning_count",
    "SELECT ROW_COUNT()",
    "SET autocommit = 0",
    "SET autocommit = 1",
    "SAVEPOINT s",
    "ROLLBACK TO SAVEPOINT s",
    "RELEASE SAVEPOINT s",
    "SET TRANSACTION READ ONLY",
    "SET TRANSACTION ISOLATION LEVEL READ COMMITTED",
    "LOCK TABLES dbeg WRITE",
    "UNLOCK TABLES",
    "DO 1",
    "SET sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')",
];

/// sextant before the primary alone (a replica's answers could lag the
/// primary's), holding connections as it does by default: with hold_ms
/// = 0 what only the connection before knew (its warnings) is refused
/// once it went back to the pool, which is correct but not comparable.
fn proxy() -> Proxy {
    Setup {
        group: "pool_max = 2\n",
        no_replicas: true,
        ..Default::default()
    }
    .start()
}

#[test]
fn generated_sequences_answer_as_the_server_does() {
    let _one = one();
    let p = proxy();
    // DEFERRED_SEED: other sequences, to look further.
    let seed = std::env::var("DEFERRED_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let mut rng = Rng(seed.unwrap_or(0x5eed_0b16_1234_5678));
    let (mut compared, mut total) = (0, 0);
    for _ in 0..400 {
        let n = 3 + rng.below(10);
        let script: Vec<&str> = (0..n)
            .map(|_| VOCABULARY[rng.below(VOCABULARY.len())])
            .collect();
        compared += assert_same(&p, &script);
        total += n;
    }
    eprintln!("{compared} of {total} statements compared (the rest followed a refusal)");
    assert!(
        compared * 10 >= total * 8,
        "only {compared} of {total} statements compared"
    );
}

#[test]
fn transaction_control_around_a_held_back_begin_answers_as_the_server_does() {
    let _one = one();
    let p = proxy();
    for script in [
        &["BEGIN", "COMMIT", "SELECT @@in_transaction"][..],
        &[
            "SELECT 1/0",
            "BEGIN",
            "SHOW WARNINGS",
            "SELECT @@warning_count",
        ],
        &["SELECT 1/0", "BEGIN", "COMMIT", "SHOW WARNINGS"],
        &[
            "INSERT INTO dbeg (v) VALUES (1)",
            "BEGIN",
            "SELECT ROW_COUNT()",
        ],
        &[
            "BEGIN",
            "BEGIN",
            "INSERT INTO dbeg (v) VALUES (1)",
            "ROLLBACK",
            "SELECT COUNT(*) FROM dbeg",
        ],
        &["BEGIN", "SET autocommit = 1", "SELECT @@in_transaction"],
        &[
            "SET autocommit = 0",
            "BEGIN",
            "COMMIT",
            "SELECT @@in_transaction",
        ],
        &[
            "SET autocommit = 0",
            "SELECT 1",
            "BEGIN",
            "SELECT @@in_transaction",
            "ROLLBACK",
        ],
        &[
            "BEGIN",
            "ROLLBACK TO SAVEPOINT nowhere",
            "SELECT @@in_transaction",
        ],
        &[
            "BEGIN",
            "COMMIT AND CHAIN",
            "SELECT @@in_transaction",
            "ROLLBACK",
        ],
        &[
            "SET TRANSACTION READ ONLY",
            "BEGIN",
            "INSERT INTO dbeg (v) VALUES (1)",
        ],
        &[
            "LOCK TABLES dbeg READ",
            "BEGIN",
            "INSERT INTO dbeg (v) VALUES (1)",
            "COMMIT",
        ],
        &[
            "XA START 'dbeg1'",
            "BEGIN",
            "XA END 'dbeg1'",
            "XA ROLLBACK 'dbeg1'",
        ],
        &["BEGIN", "XA START 'dbeg2'", "ROLLBACK"],
        &["SELECT * FROM dbeg WHERE v > 0", "BEGIN", "COMMIT"],
        // MariaDB keeps READ ONLY for the next transaction of a
        // connection whose READ ONLY one SET autocommit = 1 ended.
        &[
            "START TRANSACTION READ ONLY",
            "SET autocommit = 0",
            "SET autocommit = 1",
            "START TRANSACTION",
            "INSERT INTO dbeg (v) VALUES (1)",
        ],
        &[
            "BEGIN",
            "SELECT v FROM dbeg WHERE id = 1",
            "UPDATE dbeg SET v = 99 WHERE id = 1",
            "ROLLBACK",
            "SELECT v FROM dbeg WHERE id = 1",
        ],
    ] {
        assert_eq!(assert_same(&p, script), script.len(), "{script:?}");
    }
}

/// A prepared statement's execution as a transaction's first statement
/// (what sysbench's prepared mode does) sees the transaction.
#[test]
fn an_execution_after_begin_runs_in_the_transaction() {
    let _one = one();
    let p = proxy();
    reset_table();
    let mut c = p.conn();
    let mut other = p.conn();
    c.query_drop("BEGIN").unwrap();
    let (v, in_trx): (i64, i64) = c
        .exec_first("SELECT v, @@in_transaction FROM dbeg WHERE id = ?", (1,))
        .unwrap()
        .unwrap();
    assert_eq!((v, in_trx), (10, 1));
    // Its snapshot was taken by that read: a write committed since is not
    // seen until the transaction ends.
    other
        .exec_drop("UPDATE dbeg SET v = 11 WHERE id = ?", (1,))
        .unwrap();
    let v: i64 = c
        .exec_first("SELECT v FROM dbeg WHERE id = ?", (1,))
        .unwrap()
        .unwrap();
    assert_eq!(v, 10, "the transaction's snapshot");
    c.query_drop("COMMIT").unwrap();
    let v: i64 = c
        .exec_first("SELECT v FROM dbeg WHERE id = ?", (1,))
        .unwrap()
        .unwrap();
    assert_eq!(v, 11);
}

/// A prepared BEGIN and COMMIT (sysbench prepares both) are held back and
/// answered as the text ones are: a transaction that runs nothing reaches
/// no server, and one that runs something is open on the server for it.
#[test]
fn prepared_begin_and_commit_are_held_back_too() {
    let _one = one();
    let p = proxy();
    reset_table();
    let mut c = p.conn();
    let begin = c.prep("BEGIN").unwrap();
    let commit = c.prep("COMMIT").unwrap();
    let counters = || {
        // (An executed BEGIN counts in Com_begin as a text one does.)
        ["Com_begin", "Com_commit"].map(|n| status_counter(lab().primary, n))
    };
    let before = counters();
    for _ in 0..20 {
        c.exec_drop(&begin, ()).unwrap();
        c.exec_drop(&commit, ()).unwrap();
    }
    assert_eq!(counters(), before, "empty transactions reached the primary");
    c.exec_drop(&begin, ()).unwrap();
    let in_trx: i64 = c
        .exec_first("SELECT @@in_transaction", ())
        .unwrap()
        .unwrap();
    assert_eq!(in_trx, 1);
    c.exec_drop("INSERT INTO dbeg (v) VALUES (?)", (5,))
        .unwrap();
    c.query_drop("ROLLBACK").unwrap();
    let n: i64 = c.query_first("SELECT COUNT(*) FROM dbeg").unwrap().unwrap();
    assert_eq!(n, 3, "the insert was rolled back with its transaction");
    let after = counters();
    assert_eq!(after[0], before[0] + 1, "one BEGIN reached the primary");
}
