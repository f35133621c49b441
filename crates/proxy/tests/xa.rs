//! Transactions over several groups of a sharded layout, against a real
//! lab of four groups (each a primary and a replica): they commit on every
//! group or on none, whether they end in COMMIT, ROLLBACK, a client that
//! leaves, a branch that fails, or sextant stopped as kill -9 would at
//! each step of its two-phase commit (failpoints) and started again.
//! (Its own test binary, with its own lab: it kills sextant and servers.)

mod common;
use common::bank::*;
use common::*;
use mysql::prelude::Queryable;
use std::time::{Duration, Instant};

/// The tests share the groups' tables: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Bank {
    _guard: std::sync::MutexGuard<'static, ()>,
    proxy: Proxy,
    accounts: i64,
}

/// A fresh bank of `accounts` accounts of 1000 each, and sextant in front
/// of it (with `env`, e.g. a failpoint).
fn bank(accounts: i64, env: &[(&'static str, &str)]) -> Bank {
    bank_every(accounts, env, 500)
}

/// As [`bank`], with recovery passes every `recover_ms`.
fn bank_every(accounts: i64, env: &[(&'static str, &str)], recover_ms: u64) -> Bank {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _ = LAB_ARGS.set(&["--shards", "4", "--replicas", "1"]);
    fresh_bank(accounts);
    let proxy = Setup {
        proxy: "default_group = \"data1\"",
        groups: Some(layout(&xa_table(
            &xa_dir(),
            recover_ms,
            "instance_id = \"xa-test\"\n",
        ))),
        env: env.iter().map(|(k, v)| (*k, v.to_string())).collect(),
        ..Default::default()
    }
    .start();
    Bank {
        _guard: guard,
        proxy,
        accounts,
    }
}

impl Bank {
    fn conn(&self) -> mysql::Conn {
        connect(&self.proxy)
    }

    fn balances(&self) -> Vec<(i64, i64)> {
        balances()
    }

    fn total(&self) -> i64 {
        self.balances().iter().map(|(_, b)| b).sum()
    }

    fn transfers(&self) -> std::collections::BTreeMap<i64, (i64, i64, i64)> {
        transfers()
    }
}

fn connect(p: &Proxy) -> mysql::Conn {
    mysql::Conn::new(mysql::Opts::from_url(&p.url("app", "apppass", DB)).unwrap())
        .expect("connect through sextant")
}

fn code(e: mysql::Error) -> u16 {
    match e {
        mysql::Error::MySqlError(e) => e.code,
        other => panic!("not a server error: {other}"),
    }
}

/// Every copy's rows of the global table, by group.
fn copies() -> Vec<Vec<(i64, i64)>> {
    lab()
        .shards
        .iter()
        .map(|(p, _)| {
            direct(*p)
                .query(format!("SELECT id, v FROM {GLOBAL}.rates ORDER BY id"))
                .unwrap()
        })
        .collect()
}

/// One transfer per group pair, and the transfer's log row: a
/// transaction touching three or four groups.
fn transfer(c: &mut mysql::Conn, id: i64, src: i64, dst: i64, amount: i64) -> mysql::Result<()> {
    c.query_drop("BEGIN")?;
    add(c, src, -amount)?;
    add(c, dst, amount)?;
    c.query_drop(format!(
        "INSERT INTO transfers (id, src, dst, amount) VALUES ({id}, {src}, {dst}, {amount})"
    ))?;
    c.query_drop("COMMIT")
}

#[test]
fn commit_rollback_and_a_leaving_client_are_all_or_nothing() {
    let b = bank(8, &[]);
    let mut c = b.conn();
    // Accounts 1 and 2 are in groups data2 and data3; transfer 4 in data1.
    transfer(&mut c, 4, 1, 2, 100).unwrap();
    let bal = b.balances();
    assert_eq!((bal[0].1, bal[1].1), (900, 1100), "{bal:?}");
    assert_eq!(b.transfers().len(), 1);

    // ROLLBACK undoes every group's part.
    c.query_drop("BEGIN").unwrap();
    add(&mut c, 1, -5).unwrap();
    add(&mut c, 2, 5).unwrap();
    // Inside the transaction, a read over every group sees its writes.
    let sum: i64 = c
        .query_first("SELECT SUM(balance) FROM acct")
        .unwrap()
        .unwrap();
    assert_eq!(sum, 8000);
    let mine: Vec<(i64, i64)> = c
        .query("SELECT id, balance FROM acct ORDER BY id LIMIT 2")
        .unwrap();
    assert_eq!(mine, vec![(1, 895), (2, 1105)]);
    c.query_drop("ROLLBACK").unwrap();
    let bal = b.balances();
    assert_eq!((bal[0].1, bal[1].1), (900, 1100));

    // A client that leaves mid-transaction changes nothing.
    {
        let mut gone = b.conn();
        gone.query_drop("BEGIN").unwrap();
        gone.query_drop("UPDATE acct SET balance = 0 WHERE id = 3")
            .unwrap();
        gone.query_drop("UPDATE acct SET balance = 0 WHERE id = 4")
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    let bal = b.balances();
    assert_eq!((bal[2].1, bal[3].1), (1000, 1000));

    // autocommit off: each transaction is one over the groups it touches.
    c.query_drop("SET autocommit = 0").unwrap();
    add(&mut c, 5, -7).unwrap();
    add(&mut c, 6, 7).unwrap();
    c.query_drop("ROLLBACK").unwrap();
    add(&mut c, 5, -7).unwrap();
    add(&mut c, 6, 7).unwrap();
    c.query_drop("COMMIT").unwrap();
    c.query_drop("SET autocommit = 1").unwrap();
    let bal = b.balances();
    assert_eq!((bal[4].1, bal[5].1), (993, 1007));

    // BEGIN inside a transaction commits it, as the server does.
    c.query_drop("BEGIN").unwrap();
    add(&mut c, 7, 1).unwrap();
    add(&mut c, 8, -1).unwrap();
    c.query_drop("BEGIN").unwrap();
    c.query_drop("ROLLBACK").unwrap();
    let bal = b.balances();
    assert_eq!((bal[6].1, bal[7].1), (1001, 999));

    // What cannot run in a transaction over several groups is refused,
    // and the transaction goes on.
    c.query_drop("BEGIN").unwrap();
    add(&mut c, 1, 1).unwrap();
    add(&mut c, 2, -1).unwrap();
    assert_eq!(code(c.query_drop("SAVEPOINT s").unwrap_err()), 1235);
    assert_eq!(code(c.query_drop("XA END 'x'").unwrap_err()), 1235);
    c.query_drop("COMMIT").unwrap();
    let bal = b.balances();
    assert_eq!((bal[0].1, bal[1].1), (901, 1099));
    // A client's own XA is sextant's job on a sharded layout.
    assert_eq!(code(c.query_drop("XA START 'mine'").unwrap_err()), 1235);

    assert_eq!(b.total(), 8000);
    assert!(prepared_everywhere().is_empty());
}

/// A branch that cannot prepare (its server connection killed from the
/// server side before COMMIT): the client's COMMIT fails with 1402 and no
/// group keeps anything.
#[test]
fn a_branch_that_fails_before_the_decision_rolls_back_every_group() {
    let b = bank(8, &[]);
    let mut c = b.conn();
    c.query_drop("BEGIN").unwrap();
    add(&mut c, 1, -50).unwrap();
    add(&mut c, 2, 50).unwrap();
    // data3 holds account 2: kill the connection holding its branch.
    let port = lab().shards[2].0;
    let mut admin = direct(port);
    let ids: Vec<u64> = admin
        .query(format!(
            "SELECT id FROM information_schema.processlist WHERE user = 'app' AND id <> CONNECTION_ID() AND db = '{DB}'"
        ))
        .unwrap();
    assert!(!ids.is_empty());
    for id in ids {
        let _ = admin.query_drop(format!("KILL {id}"));
    }
    let e = c.query_drop("COMMIT").unwrap_err();
    assert_eq!(code(e), 1402, "the COMMIT is answered as rolled back");
    let bal = b.balances();
    assert_eq!((bal[0].1, bal[1].1), (1000, 1000));
    assert!(prepared_everywhere().is_empty());
    // The session goes on.
    transfer(&mut c, 9, 1, 2, 1).unwrap();
    assert_eq!(b.total(), 8000);
}

/// sextant stopped as kill -9 would at each step of a commit over four
/// groups, then started again: before the decision commits every group
/// rolls back, after it every group commits; no prepared branch is left
/// on any server within 10 s of the restart.
#[test]
fn a_crash_at_each_step_of_two_phase_commit_is_recovered() {
    let cases: &[(&str, bool)] = &[
        ("before_prepare", false),
        ("after_prepare:1", false),
        ("after_prepare:3", false),
        ("after_decision", true),
        ("after_commit:1", true),
        ("after_commit:3", true),
    ];
    for (k, &(point, commits)) in cases.iter().enumerate() {
        let mut b = bank(8, &[("SEXTANT_XA_FAILPOINT", point)]);
        let mut c = b.conn();
        // Four groups: accounts 1 and 2, the transfer row (id 4k+7: data4,
        // since 4k+7 mod 4 = 3) and account 4 (data1).
        let id = 4 * k as i64 + 7;
        let r = (|| -> mysql::Result<()> {
            c.query_drop("BEGIN")?;
            add(&mut c, 1, -10)?;
            add(&mut c, 2, 5)?;
            add(&mut c, 4, 5)?;
            c.query_drop(format!(
                "INSERT INTO transfers (id, src, dst, amount) VALUES ({id}, 1, 2, 10)"
            ))?;
            c.query_drop("COMMIT")
        })();
        assert!(r.is_err(), "{point}: the COMMIT must not be answered");
        assert!(
            b.proxy.exited_within(Duration::from_secs(5)),
            "{point}: sextant did not stop at its failpoint"
        );
        b.proxy.restart(&[]);
        let took = until_no_prepared(Duration::from_secs(10));
        let bal = b.balances();
        let got = (
            bal[0].1,
            bal[1].1,
            bal[3].1,
            b.transfers().contains_key(&id),
        );
        let want = match commits {
            true => (990, 1005, 1005, true),
            false => (1000, 1000, 1000, false),
        };
        assert_eq!(
            got, want,
            "{point}: every group or none ({took:?} to recover)"
        );
        assert_eq!(b.total(), 8000, "{point}");
        // The restarted sextant serves transactions over groups again.
        transfer(&mut b.conn(), 1000 + id, 3, 4, 1).unwrap();
    }
}

/// The admin port lists a prepared branch recovery cannot resolve
/// (another instance's) and resolves it by hand.
#[test]
fn admin_lists_and_resolves_in_doubt_branches() {
    let b = bank(8, &[]);
    // Another sextant instance's branch, prepared on data2's primary.
    let port = lab().shards[1].0;
    let mut d = direct(port);
    let xid = "X'73783a6f746865723a313a31',X'6461746132',21336"; // sx:other:1:1, data2
    d.query_drop(format!("XA START {xid}")).unwrap();
    d.query_drop(format!("UPDATE {DB}.acct SET balance = 0 WHERE id = 1"))
        .unwrap();
    d.query_drop(format!("XA END {xid}")).unwrap();
    d.query_drop(format!("XA PREPARE {xid}")).unwrap();
    drop(d);
    let mut admin = b.proxy.admin();
    let deadline = Instant::now() + Duration::from_secs(5);
    let row = loop {
        let rows: Vec<mysql::Row> = admin.query("SHOW XA").unwrap();
        let found = rows
            .into_iter()
            .find(|r| r.get::<String, _>("gtrid").as_deref() == Some("sx:other:1:1"));
        if let Some(r) = found {
            break r;
        }
        assert!(Instant::now() < deadline, "SHOW XA never listed the branch");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        row.get::<String, _>("decision").unwrap(),
        "another sextant's"
    );
    assert!(row.get::<String, _>("groups").unwrap().starts_with("data2"));
    // Recovery leaves it alone...
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(prepared_everywhere().len(), 1);
    // ...and the operator rolls it back.
    admin.query_drop("XA ROLLBACK 'sx:other:1:1'").unwrap();
    assert_eq!(admin.affected_rows(), 1);
    assert!(prepared_everywhere().is_empty());
    assert_eq!(b.balances()[0].1, 1000);
    let e = admin.query_drop("XA COMMIT nope").unwrap_err();
    assert_eq!(code(e), 1064);
}

/// A transaction stopped with one branch prepared (sextant killed at
/// its failpoint), and a client of another instance that knows the
/// branch's id (a server lists it to any account) tries to commit it in
/// every form dynamic SQL and multi-statement packets offer: each is
/// refused, and recovery rolls the whole transaction back (before,
/// the client's commit made a partial one).
#[test]
fn no_client_finishes_a_branch_sextant_prepared() {
    let mut b = bank(8, &[("SEXTANT_XA_FAILPOINT", "after_prepare:1")]);
    let r = transfer(&mut b.conn(), 7, 1, 2, 10);
    assert!(r.is_err(), "the COMMIT must not be answered");
    assert!(
        b.proxy.exited_within(Duration::from_secs(5)),
        "no failpoint stop"
    );
    let mut found = None;
    for (k, (port, _)) in lab().shards.iter().enumerate() {
        let rows: Vec<(i64, i64, i64, Vec<u8>)> = direct(*port).query("XA RECOVER").unwrap();
        if let Some((f, g, _, data)) = rows.into_iter().next() {
            let hex = |x: &[u8]| x.iter().map(|b| format!("{b:02x}")).collect::<String>();
            let (gt, bq) = data.split_at(g as usize);
            found = Some((k + 1, format!("X'{}',X'{}',{f}", hex(gt), hex(bq))));
        }
    }
    let (group, xid) = found.expect("a branch prepared");
    let before = prepared_everywhere();
    let other = Setup {
        proxy: "default_group = \"data1\"",
        groups: Some(layout(&xa_table(
            &xa_dir(),
            600_000,
            "instance_id = \"xa-other\"\n",
        ))),
        ..Default::default()
    }
    .start();
    let mut c = connect(&other);
    let hint = format!("/*# group=data{group} */ ");
    let attempts = [
        format!("{hint}EXECUTE IMMEDIATE \"XA COMMIT {xid}\""),
        format!("{hint}EXECUTE IMMEDIATE CONCAT('XA COM', \"MIT {xid}\")"),
        format!("{hint}PREPARE s FROM \"XA COMMIT {xid}\""),
        format!("{hint}DO 1; XA COMMIT {xid}"),
        format!("{hint}SELECT 1; XA COMMIT {xid}"),
        format!("{hint}EXECUTE IMMEDIATE 'XA RECOVER'"),
        format!("{hint}XA COMMIT {xid}"),
        format!("{hint}BEGIN NOT ATOMIC XA COMMIT {xid}; END"),
        format!("{hint}CREATE PROCEDURE finish_it() BEGIN XA COMMIT {xid}; END"),
        format!("{hint}CREATE PROCEDURE finish_later() BEGIN PREPARE s FROM @x; EXECUTE s; END"),
    ];
    for sql in &attempts {
        let e = c.query_drop(sql).expect_err(sql);
        assert_eq!(code(e), 1235, "{sql}");
    }
    // Text held by the server connection is read before it runs.
    c.query_drop(format!("{hint}SET @x = CONCAT('XA COM', \"MIT {xid}\")"))
        .unwrap();
    for sql in ["PREPARE s FROM @x", "EXECUTE IMMEDIATE @x"] {
        let e = c.query_drop(format!("{hint}{sql}")).expect_err(sql);
        assert_eq!(code(e), 1235, "{sql}");
    }
    assert_eq!(
        prepared_everywhere(),
        before,
        "the branches are still prepared"
    );
    drop(c);
    drop(other);
    b.proxy.restart(&[]);
    until_no_prepared(Duration::from_secs(10));
    let bal = b.balances();
    assert_eq!((bal[0].1, bal[1].1), (1000, 1000), "none of it committed");
    assert!(!b.transfers().contains_key(&7));
    assert_eq!(b.total(), 8000);
}

/// An application account with privileges on its own schemas only (none
/// on `sextant`) commits transactions over several groups: the decision
/// row is written by sextant's own account (`[xa] user`), and that
/// account alone needs the sextant schema. (Before, the row was written
/// in the client's own branch and its account needed INSERT there.)
#[test]
fn an_application_account_needs_nothing_on_sextants_schema() {
    let b = bank(8, &[]);
    for (p, _) in &lab().shards {
        let mut d = direct(*p);
        for sql in [
            "CREATE USER IF NOT EXISTS 'xa_own'@'%' IDENTIFIED BY 'ownpass'".to_string(),
            format!("GRANT ALL ON {DB}.* TO 'xa_own'@'%'"),
            format!("GRANT ALL ON {GLOBAL}.* TO 'xa_own'@'%'"),
        ] {
            d.query_drop(sql).unwrap();
        }
        let grants: Vec<String> = d.query("SHOW GRANTS FOR 'xa_own'@'%'").unwrap();
        assert!(
            grants
                .iter()
                .all(|g| !g.contains("*.*") || g.starts_with("GRANT USAGE")),
            "{grants:?}"
        );
    }
    let p = Setup {
        proxy: "default_group = \"data1\"",
        users: "\n[[users]]\nname = \"xa_own\"\npassword = \"ownpass\"\n",
        groups: Some(layout(&xa_table(
            &xa_dir(),
            500,
            "instance_id = \"xa-own\"\nuser = \"sextant\"\npassword = \"sextantpass\"\n",
        ))),
        ..Default::default()
    }
    .start();
    drop(b.proxy);
    let mut c = mysql::Conn::new(mysql::Opts::from_url(&p.url("xa_own", "ownpass", DB)).unwrap())
        .expect("connect through sextant");
    transfer(&mut c, 7, 1, 2, 10).expect("a transfer over three groups commits");
    let denied = c
        .query_drop(
            "INSERT INTO sextant.xa_decision (gtrid, decision, owner) VALUES (X'01', 'R', 'x')",
        )
        .unwrap_err();
    assert_eq!(code(denied), 1044);
    let bal = balances();
    assert_eq!((bal[0].1, bal[1].1), (990, 1010));
    assert!(transfers().contains_key(&7));
    assert!(prepared_everywhere().is_empty());
}

/// How a client's transfer ended, as the client saw it.
/// What happens to the bank while its clients run.
enum Trouble {
    /// sextant killed with SIGKILL at these seconds into the run.
    SextantKilled(&'static [u64]),
    /// sextant stopped at each of these failpoints in turn.
    Failpoints(&'static [&'static str]),
    /// Group `i`'s primary killed with SIGKILL at `at` s, restarted 2 s
    /// later.
    PrimaryKilled { group: usize, at: u64 },
}

/// The bank: 1,000 accounts over four groups, 16 clients doing transfers
/// (most touch three or four groups) for 60 s through `trouble`. After
/// recovery: the total is unchanged, every account's balance is what the
/// logged transfers make it, every transfer a client saw committed is
/// logged and none it saw fail is, and no server holds a prepared branch
/// within 10 s.
fn bank_run(trouble: Trouble) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let mut b = bank(1000, &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let port = b.proxy.port;
    let accounts = b.accounts;
    let clients: Vec<_> = (0..16u64)
        .map(|n| {
            let stop = stop.clone();
            std::thread::spawn(move || transfer_client(&[port], n, accounts, &stop))
        })
        .collect();
    let start = Instant::now();
    let at = |s: u64| {
        let t = start + Duration::from_secs(s);
        if let Some(d) = t.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    };
    let mut events = Vec::new();
    match trouble {
        Trouble::SextantKilled(times) => {
            for &t in times {
                at(t);
                // Not on a round second: anywhere in a transaction.
                std::thread::sleep(Duration::from_millis(
                    u64::from(std::process::id()).wrapping_mul(t + 7) % 1000,
                ));
                b.proxy.kill9();
                events.push(format!("sextant killed at {:?}", start.elapsed()));
                b.proxy.restart(&[]);
            }
        }
        Trouble::Failpoints(points) => {
            at(3);
            for point in points {
                b.proxy.restart(&[("SEXTANT_XA_FAILPOINT", point)]);
                assert!(
                    b.proxy.exited_within(Duration::from_secs(30)),
                    "sextant did not reach failpoint {point} under load"
                );
                events.push(format!("{point} at {:?}", start.elapsed()));
                b.proxy.restart(&[]);
                std::thread::sleep(Duration::from_secs(2));
            }
        }
        Trouble::PrimaryKilled { group, at: t } => {
            at(t);
            let shard = lab().dir.join(format!("shard{}", group + 1));
            kill_server_in(&shard, 0);
            events.push(format!("data{}'s primary killed", group + 1));
            std::thread::sleep(Duration::from_secs(2));
            restart_server_in(&shard, 0);
            wait_server_up(lab().shards[group].0);
        }
    }
    at(60);
    stop.store(true, Ordering::Relaxed);
    let mut seen = Vec::new();
    for c in clients {
        seen.extend(c.join().expect("client thread"));
    }
    let took = until_no_prepared(Duration::from_secs(10));
    let (ok, failed, unknown) = check_bank(&seen, b.accounts);
    eprintln!(
        "bank: {} transfers tried, {ok} committed, {failed} failed, {unknown} unknown; events {events:?}; recovered in {took:?}",
        seen.len(),
    );
    assert!(ok > 1000, "too few transfers committed under load: {ok}");
}

#[test]
fn bank_survives_sextant_killed_at_random_times() {
    bank_run(Trouble::SextantKilled(&[8, 23, 41]));
}

#[test]
fn bank_survives_a_crash_at_each_failpoint() {
    bank_run(Trouble::Failpoints(&[
        "before_prepare@40",
        "after_prepare:1@40",
        "after_prepare:2@40",
        "after_decision@40",
        "after_commit:1@40",
        // A transfer touches three groups: two commit after the decision.
        "after_commit:2@40",
    ]));
}

#[test]
fn bank_survives_a_primary_killed() {
    bank_run(Trouble::PrimaryKilled { group: 2, at: 20 });
}

/// Writes to several groups (an UPDATE or DELETE over every group, an
/// INSERT whose rows belong to several, a write to a global table's
/// copies) run as one distributed transaction: alone, inside a client's
/// transaction, and prepared; a failure in one group leaves nothing in any.
#[test]
fn writes_to_several_groups_are_all_or_nothing() {
    let b = bank(8, &[]);
    let mut c = b.conn();
    // Every group's rows at once.
    c.query_drop("UPDATE acct SET balance = balance + 1")
        .unwrap();
    assert_eq!(c.affected_rows(), 8);
    assert!(b.balances().iter().all(|(_, v)| *v == 1001));
    // Rows split by group: ids 1, 2, 3 go to data2, data3, data4.
    c.query_drop(
        "INSERT INTO transfers (id, src, dst, amount) VALUES (1, 1, 2, 5), (2, 2, 3, 6), (3, 3, 4, 7)",
    )
    .unwrap();
    assert_eq!(c.affected_rows(), 3);
    for (g, (p, _)) in lab().shards.iter().enumerate() {
        let ids: Vec<i64> = direct(*p)
            .query(format!("SELECT id FROM {DB}.transfers"))
            .unwrap();
        assert!(
            ids.iter().all(|id| id % 4 == g as i64),
            "group {g}: {ids:?}"
        );
    }
    // One group's rows fail (a duplicate of id 1): the whole INSERT fails
    // with the server's error and no group keeps its rows.
    let e = c
        .query_drop("INSERT INTO transfers (id, src, dst, amount) VALUES (10, 1, 2, 1), (11, 1, 2, 1), (1, 1, 2, 1)")
        .unwrap_err();
    assert_eq!(code(e), 1062);
    assert_eq!(b.transfers().len(), 3);
    // A global table: every copy, one copy's affected rows.
    c.query_drop(format!("INSERT INTO {GLOBAL}.rates (id, v) VALUES (1, 5)"))
        .unwrap();
    assert_eq!(c.affected_rows(), 1);
    c.query_drop(format!("UPDATE {GLOBAL}.rates SET v = 6 WHERE id = 1"))
        .unwrap();
    assert_eq!(c.affected_rows(), 1);
    assert!(
        copies().iter().all(|g| g == &vec![(1, 6)]),
        "{:?}",
        copies()
    );
    // One copy refuses (it has id 2 already): no copy changes.
    direct(lab().shards[2].0)
        .query_drop(format!("INSERT INTO {GLOBAL}.rates VALUES (2, 0)"))
        .unwrap();
    let e = c
        .query_drop(format!("INSERT INTO {GLOBAL}.rates (id, v) VALUES (2, 9)"))
        .unwrap_err();
    assert_eq!(code(e), 1062);
    let cp = copies();
    assert_eq!(
        (cp[0].len(), cp[1].len(), cp[2].len(), cp[3].len()),
        (1, 1, 2, 1)
    );
    direct(lab().shards[2].0)
        .query_drop(format!("DELETE FROM {GLOBAL}.rates WHERE id = 2"))
        .unwrap();

    // Inside a client's transaction: undone by ROLLBACK, kept by COMMIT.
    c.query_drop("BEGIN").unwrap();
    c.query_drop("UPDATE acct SET balance = balance - 1")
        .unwrap();
    c.query_drop("DELETE FROM transfers WHERE id > 0").unwrap();
    assert_eq!(c.affected_rows(), 3);
    let sum: i64 = c
        .query_first("SELECT SUM(balance) FROM acct")
        .unwrap()
        .unwrap();
    assert_eq!(sum, 8000);
    c.query_drop("ROLLBACK").unwrap();
    assert_eq!(b.total(), 8008);
    assert_eq!(b.transfers().len(), 3);
    c.query_drop("BEGIN").unwrap();
    c.query_drop("UPDATE acct SET balance = balance - 1")
        .unwrap();
    c.query_drop(format!("DELETE FROM {GLOBAL}.rates")).unwrap();
    c.query_drop("COMMIT").unwrap();
    assert_eq!(b.total(), 8000);
    assert!(copies().iter().all(Vec::is_empty));

    // Inside a transaction, a write that ran in some groups and failed in
    // another is undone in every group, as one server undoes a statement
    // that failed, and the transaction goes on (here to a ROLLBACK).
    direct(lab().shards[3].0)
        .query_drop(format!("INSERT INTO {DB}.transfers VALUES (7, 0, 0, 0)"))
        .unwrap();
    c.query_drop("BEGIN").unwrap();
    add(&mut c, 1, 100).unwrap();
    let e = c
        .query_drop("INSERT INTO transfers (id, src, dst, amount) VALUES (4, 1, 2, 1), (5, 1, 2, 1), (7, 1, 2, 1)")
        .unwrap_err();
    assert_eq!(code(e), 1062, "the server's own error");
    let seen: i64 = c
        .query_first("SELECT COUNT(*) FROM transfers WHERE id IN (4, 5)")
        .unwrap()
        .unwrap();
    assert_eq!(seen, 0, "the failed INSERT's rows in the other groups");
    c.query_drop("UPDATE acct SET balance = 0 WHERE id = 2")
        .unwrap();
    c.query_drop("ROLLBACK").unwrap();
    assert_eq!(b.total(), 8000);
    assert_eq!(b.transfers().len(), 4);

    // Prepared: executed as one distributed transaction too.
    let stmt = c
        .prep("UPDATE acct SET balance = balance + ? WHERE id IN (?, ?, ?)")
        .unwrap();
    c.exec_drop(&stmt, (3, 1, 2, 3)).unwrap();
    assert_eq!(c.affected_rows(), 3);
    let bal = b.balances();
    assert_eq!(
        (bal[0].1, bal[1].1, bal[2].1, bal[3].1),
        (1003, 1003, 1003, 1000)
    );
    assert!(prepared_everywhere().is_empty());
    // SHOW STATUS counts them: six two-phase commits above (the UPDATE
    // over every group, the split INSERT, two global writes, the COMMIT,
    // the prepared UPDATE), and the rollbacks (the failed INSERT, the
    // failed global write, ROLLBACK, and the doomed transaction).
    let get = |k: &str| -> u64 {
        let status: Vec<(String, String)> = b.proxy.admin().query("SHOW STATUS").unwrap();
        status
            .iter()
            .find(|(n, _)| n == k)
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or_else(|| panic!("{k} missing from SHOW STATUS"))
    };
    assert_eq!(get("xa_two_phase_commits"), 6);
    assert_eq!(get("xa_rollbacks"), 4);
    // Reads of a global table inside a transaction stay in its group (any
    // group's copy would do): the transaction commits in one phase.
    let one = get("xa_one_phase_commits");
    c.query_drop("BEGIN").unwrap();
    add(&mut c, 1, 0).unwrap();
    for _ in 0..4 {
        let _: Vec<(i64, i64)> = c
            .query(format!("SELECT id, v FROM {GLOBAL}.rates"))
            .unwrap();
    }
    add(&mut c, 5, 0).unwrap();
    c.query_drop("COMMIT").unwrap();
    assert_eq!(get("xa_one_phase_commits"), one + 1);
    assert_eq!(get("xa_two_phase_commits"), 6);
}

/// Recovery never touches a branch of a transaction this instance's own
/// sessions are carrying out, even when a session finishes it between the
/// pass's XA RECOVER and its decision: with passes every 20 ms under a
/// stream of transfers over two groups, no pass commits, rolls back or
/// lists anything (each would be a branch of a live session).
#[test]
fn recovery_leaves_live_transactions_alone() {
    let b = bank_every(40, &[], 20);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..3)
        .map(|t| {
            let mut c = connect(&b.proxy);
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0i64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let id = 1_000_000 * (t + 1) + n;
                    // Accounts in two groups (ids 1 and 2 are in different ones).
                    transfer(&mut c, id, 1 + (n % 2) * 4, 2 + t * 4, 1).unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut admin = b.proxy.admin();
    let mut listed = 0;
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline {
        // Sessions' own transactions are listed by stage; branches in
        // doubt as "prepared (...)".
        let states: Vec<(String, String)> = admin
            .query_map("SHOW XA", |r: mysql::Row| {
                let g: String = r.get(0).unwrap();
                let s: String = r.get(1).unwrap();
                (g, s)
            })
            .unwrap();
        listed += states
            .iter()
            .filter(|(_, s)| s.starts_with("prepared"))
            .count();
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let done: i64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(done > 50, "only {done} transfers");
    let logs = b.proxy.logs();
    let touched = logs
        .lines()
        .filter(|l| l.contains("XA recovery: branch"))
        .count();
    assert_eq!(touched, 0, "recovery acted on live branches:\n{logs}");
    assert_eq!(listed, 0, "SHOW XA listed live branches as in doubt");
}

/// Without a configured instance id each sextant makes its own once and
/// keeps it beside its decision log; a second sextant started with an id
/// another live one holds refuses to start, saying why.
#[test]
fn instance_ids_are_unique_and_a_duplicate_does_not_start() {
    let b = bank(4, &[]);
    // A second sextant with the same config but its own ports and log.
    let cfg = std::fs::read_to_string(&b.proxy.config).unwrap();
    let (port, admin) = (free_port(), free_port());
    let other_log =
        std::env::temp_dir().join(format!("sextant-xa-dup-{}-{port}", std::process::id()));
    let mut dup = cfg
        .replace(
            &format!("127.0.0.1:{}", b.proxy.port),
            &format!("127.0.0.1:{port}"),
        )
        .replace(
            &format!("127.0.0.1:{}", b.proxy.admin_port),
            &format!("127.0.0.1:{admin}"),
        );
    let log_line = dup
        .lines()
        .find(|l| l.starts_with("log_dir = "))
        .unwrap()
        .to_string();
    dup = dup.replace(&log_line, &format!("log_dir = \"{}\"", other_log.display()));
    let path = b
        .proxy
        .config
        .with_file_name(format!("sextant-dup-{port}.toml"));
    std::fs::write(&path, &dup).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sextant"))
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "a second xa-test started: {text}");
    assert!(text.contains("instance id \"xa-test\" is in use"), "{text}");
    // Nor with the first group's primary down: the id is claimed on every
    // group (a majority is needed), not on the first group alone. (It
    // started, and served, when that primary was away.)
    let shard1 = lab().dir.join("shard1");
    kill_server_in(&shard1, 0);
    // A duplicate that starts would serve until stopped: 30 s to exit.
    let mut dup_run = std::process::Command::new(env!("CARGO_BIN_EXE_sextant"))
        .arg("--config")
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while dup_run.try_wait().unwrap().is_none() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = dup_run.kill();
    let out = dup_run.wait_with_output().unwrap();
    restart_server_in(&shard1, 0);
    // The next test (they take turns) starts by writing to it.
    wait_server_up(lab().shards[0].0);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.status.success(),
        "a second xa-test started with data1's primary down: {text}"
    );
    assert!(
        text.contains("instance id \"xa-test\" is in use")
            && text.contains("on group data2's primary"),
        "{text}"
    );
    // The first one goes on, once data1's primary is back.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let tried = mysql::Opts::from_url(&b.proxy.url("app", "apppass", DB))
            .map_err(mysql::Error::from)
            .and_then(mysql::Conn::new)
            .and_then(|mut c| transfer(&mut c, 77, 1, 2, 5));
        match tried {
            Ok(()) => break,
            Err(e) => assert!(std::time::Instant::now() < deadline, "{e}"),
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    drop(b);

    // No id configured: one is made, kept, and differs per log directory.
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ids: Vec<String> = (0..2)
        .map(|i| {
            let dir = std::env::temp_dir().join(format!(
                "sextant-xa-id-{}-{i}-{}",
                std::process::id(),
                free_port()
            ));
            let mut p = Setup {
                proxy: "default_group = \"data1\"",
                groups: Some(layout(&xa_table(&dir, 500, ""))),
                ..Default::default()
            }
            .start();
            let id = instance_id_in(&dir);
            // Kept across a restart.
            p.restart(&[]);
            assert_eq!(instance_id_in(&dir), id);
            assert!(p.logs().contains(&format!("instance={id}")), "{}", p.logs());
            id
        })
        .collect();
    assert_ne!(ids[0], ids[1], "two sextants of one config share an id");
    assert!(!ids[0].starts_with("127.0.0.1"), "{}", ids[0]);
}

/// An account's balance, read on its group's primary.
fn balance(id: i64) -> i64 {
    let mut d = direct(lab().shards[(id % 4) as usize].0);
    d.query_first(format!("SELECT balance FROM {DB}.acct WHERE id = {id}"))
        .unwrap()
        .unwrap()
}

/// With autocommit off (as PyMySQL and MySQLdb connect, and JDBC's
/// setAutoCommit(false)), a transaction spans groups with or without an
/// explicit BEGIN, and `SET autocommit = 1` commits it, as on a server.
#[test]
fn autocommit_off_transactions_span_groups_and_setting_it_on_commits() {
    let b = bank(8, &[]);
    let mut c = connect(&b.proxy);
    // SET autocommit = 1 commits the open transaction (two groups, then one).
    c.query_drop("SET autocommit = 0").unwrap();
    add(&mut c, 1, -5).unwrap();
    add(&mut c, 2, 5).unwrap();
    c.query_drop("SET autocommit = 1").unwrap();
    let ac: i64 = c.query_first("SELECT @@autocommit").unwrap().unwrap();
    assert_eq!(ac, 1);
    c.query_drop("ROLLBACK").unwrap();
    assert_eq!((balance(1), balance(2)), (995, 1005));
    c.query_drop("SET autocommit = 0").unwrap();
    add(&mut c, 3, -1).unwrap();
    c.query_drop("SET @@session.autocommit = ON").unwrap();
    c.query_drop("ROLLBACK").unwrap();
    assert_eq!(balance(3), 999);
    // A value only the server could read is refused inside the transaction.
    c.query_drop("SET autocommit = 0").unwrap();
    add(&mut c, 3, -1).unwrap();
    assert_eq!(
        code(c.query_drop("SET autocommit = @nothing").unwrap_err()),
        1235
    );
    c.query_drop("ROLLBACK").unwrap();
    assert_eq!(balance(3), 999);
    // BEGIN with autocommit off: still one transaction over groups.
    c.query_drop("BEGIN").unwrap();
    add(&mut c, 4, -3).unwrap();
    add(&mut c, 5, 3).unwrap();
    c.query_drop("COMMIT").unwrap();
    assert_eq!((balance(4), balance(5)), (997, 1003));
    c.query_drop("BEGIN").unwrap();
    add(&mut c, 6, -2).unwrap();
    add(&mut c, 7, 2).unwrap();
    c.query_drop("ROLLBACK").unwrap();
    assert_eq!((balance(6), balance(7)), (1000, 1000));
    // A BEGIN that ran nothing ends with SET autocommit = 1.
    c.query_drop("SET autocommit = 1").unwrap();
    c.query_drop("BEGIN").unwrap();
    c.query_drop("SET autocommit = 1").unwrap();
    add(&mut c, 8, -1).unwrap();
    assert_eq!(balance(8), 999, "committed on its own");
}
