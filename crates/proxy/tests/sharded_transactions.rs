//! Transaction control on a sharded layout answered as one server answers
//! it: savepoints set before the transaction's first statement (ORMs'
//! nested atomic blocks), against a real lab of four groups. Each script
//! runs on the bank's accounts through sextant, and its effect is read on
//! the groups' primaries directly.

mod common;
use common::bank::*;
use common::*;
use mysql::prelude::Queryable;

/// The tests share the bank: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A fresh bank of 8 accounts, sextant in front of it, and a client of
/// it (the guard keeps the other tests off the bank meanwhile).
fn bank_session() -> (std::sync::MutexGuard<'static, ()>, Proxy, mysql::Conn) {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _ = LAB_ARGS.set(&["--shards", "4", "--replicas", "1"]);
    fresh_bank(8);
    let p = Setup {
        proxy: "default_group = \"data1\"",
        groups: Some(layout(&xa_table(&xa_dir(), 500, ""))),
        ..Default::default()
    }
    .start();
    let c = mysql::Conn::new(mysql::Opts::from_url(&p.url("app", "apppass", DB)).unwrap())
        .expect("connect through sextant");
    (serial, p, c)
}

fn run(c: &mut mysql::Conn, script: &[&str]) -> Vec<Result<(), u16>> {
    script
        .iter()
        .map(|s| match c.query_drop(*s) {
            Ok(()) => Ok(()),
            Err(mysql::Error::MySqlError(e)) => Err(e.code),
            Err(e) => panic!("{s}: {e}"),
        })
        .collect()
}

fn balance_of(id: i64) -> i64 {
    balances()
        .into_iter()
        .find(|(i, _)| *i == id)
        .map(|(_, b)| b)
        .expect("account")
}

/// A savepoint set before the first statement of a transaction (when no
/// group has it yet) is where ROLLBACK TO goes back to, in whichever group
/// the transaction then starts; a name never set is 1305, as on the
/// server. (ROLLBACK TO got 1305 and the COMMIT kept the update.)
#[test]
fn a_savepoint_before_the_first_statement_is_kept_for_the_group_that_starts() {
    let (_serial, _p, mut c) = bank_session();
    // Account 2 lives in data3 (id mod 4), not the default group.
    let rolled_back = run(
        &mut c,
        &[
            "BEGIN",
            "SAVEPOINT a",
            "UPDATE acct SET balance = balance + 5 WHERE id = 2",
            "ROLLBACK TO SAVEPOINT a",
            "COMMIT",
        ],
    );
    assert!(rolled_back.iter().all(Result::is_ok), "{rolled_back:?}");
    assert_eq!(
        balance_of(2),
        1000,
        "the update was rolled back to the savepoint"
    );

    // Nested: the inner savepoint released, the outer rolled back to.
    let nested = run(
        &mut c,
        &[
            "START TRANSACTION",
            "SAVEPOINT outer_sp",
            "SAVEPOINT inner_sp",
            "RELEASE SAVEPOINT inner_sp",
            "UPDATE acct SET balance = balance + 7 WHERE id = 3",
            "ROLLBACK WORK TO outer_sp",
            "UPDATE acct SET balance = balance + 1 WHERE id = 3",
            "COMMIT",
        ],
    );
    assert!(nested.iter().all(Result::is_ok), "{nested:?}");
    assert_eq!(balance_of(3), 1001);

    // Released before anything ran: ROLLBACK TO it is the server's 1305.
    let released = run(
        &mut c,
        &[
            "BEGIN",
            "SAVEPOINT a",
            "RELEASE SAVEPOINT a",
            "ROLLBACK TO SAVEPOINT a",
            "UPDATE acct SET balance = balance + 2 WHERE id = 2",
            "ROLLBACK TO SAVEPOINT nope",
            "COMMIT",
        ],
    );
    assert_eq!(
        released,
        vec![Ok(()), Ok(()), Ok(()), Err(1305), Ok(()), Err(1305), Ok(())]
    );
    assert_eq!(balance_of(2), 1002);
    // Directly, the same script gives the same answers.
    let mut d = direct(lab().shards[2].0);
    d.query_drop(format!("USE {DB}")).unwrap();
    assert_eq!(
        run(
            &mut d,
            &[
                "BEGIN",
                "SAVEPOINT a",
                "RELEASE SAVEPOINT a",
                "ROLLBACK TO SAVEPOINT a",
                "UPDATE acct SET balance = balance - 2 WHERE id = 2",
                "ROLLBACK TO SAVEPOINT nope",
                "COMMIT",
            ]
        ),
        released
    );
    assert_eq!(balance_of(2), 1000);
}

/// COMMIT AND CHAIN and ROLLBACK AND CHAIN open the next transaction, in
/// one group or several: a later ROLLBACK undoes what ran in it. (The
/// chained transaction's writes were autocommitted and survived.)
#[test]
fn and_chain_opens_the_next_transaction() {
    let (_serial, _p, mut c) = bank_session();
    let script = [
        // One group (account 2: data3).
        "BEGIN",
        "UPDATE acct SET balance = balance + 1 WHERE id = 2",
        "COMMIT AND CHAIN",
        "UPDATE acct SET balance = balance + 10 WHERE id = 2",
        "ROLLBACK AND CHAIN",
        "UPDATE acct SET balance = balance + 100 WHERE id = 2",
        "ROLLBACK",
        // Two groups (accounts 2 and 3).
        "START TRANSACTION",
        "UPDATE acct SET balance = balance + 1 WHERE id IN (2, 3)",
        "COMMIT WORK AND CHAIN",
        "UPDATE acct SET balance = balance + 10 WHERE id IN (2, 3)",
        "ROLLBACK",
        // AND NO CHAIN ends it.
        "BEGIN",
        "UPDATE acct SET balance = balance + 1 WHERE id = 3",
        "COMMIT AND NO CHAIN",
        "UPDATE acct SET balance = balance + 1 WHERE id = 3",
        "ROLLBACK",
    ];
    let answers = run(&mut c, &script);
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    assert_eq!((balance_of(2), balance_of(3)), (1002, 1003));
}

/// Read-your-writes after writes over several groups: each group's
/// branch binds the session's later reads in that group, so with every
/// replica 2 s behind (and kept in rotation) the rows just written are
/// read back at once, for a write spread over four groups in autocommit,
/// a transaction over two, and an INSERT whose rows are split by group,
/// by the session that wrote and by another session of its user.
/// A row written on a primary directly is read stale: the replicas are in
/// use and behind, so a missed binding would show.
#[test]
fn writes_over_several_groups_are_read_back_at_once() {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _ = LAB_ARGS.set(&["--shards", "4", "--replicas", "1"]);
    fresh_bank(8);
    let groups = layout(&xa_table(&xa_dir(), 500, "")).replace(
        "primary_wait_ms = 15000\n",
        "primary_wait_ms = 15000\nmax_replica_lag_ms = 0\n",
    );
    let p = Setup {
        proxy: "default_group = \"data1\"",
        groups: Some(format!("{groups}\n[routing]\nhold_ms = 0\n")),
        ..Default::default()
    }
    .start();
    let url = p.url("app", "apppass", DB);
    let mut c =
        mysql::Conn::new(mysql::Opts::from_url(&url).unwrap()).expect("connect through sextant");
    // Another session of the same user (consistency_scope = "user").
    let mut other =
        mysql::Conn::new(mysql::Opts::from_url(&url).unwrap()).expect("connect through sextant");
    let _restore = RestoreReplication;
    // Each group in a GTID domain of its own, as independent topologies
    // often are: one group's GTID says nothing of another's.
    let _domains = Domains::distinct();
    for (_, replicas) in &lab().shards {
        for r in replicas {
            set_delay(*r, 2);
        }
    }
    let balance = |c: &mut mysql::Conn, id: i64| -> i64 {
        c.query_first(format!("SELECT balance FROM acct WHERE id = {id}"))
            .unwrap()
            .expect("the account")
    };
    // The control, before the session writes anything: written on data4's
    // primary directly (account 7 lives in data4), read through sextant
    // from the delayed replica.
    direct(lab().shards[3].0)
        .query_drop(format!("UPDATE {DB}.acct SET balance = 7777 WHERE id = 7"))
        .unwrap();
    let control = balance(&mut c, 7);
    let mut stale = Vec::new();
    for round in 1..=4i64 {
        c.query_drop(format!(
            "UPDATE acct SET balance = {} WHERE id IN (1, 2, 3, 4)",
            2000 + round
        ))
        .unwrap();
        for id in 1..=4 {
            if balance(&mut c, id) != 2000 + round {
                stale.push(format!(
                    "round {round}: account {id} after the spread UPDATE"
                ));
            }
            // Over the four groups at once, merged.
            let all: Vec<(i64, i64)> = c
                .query("SELECT id, balance FROM acct WHERE id IN (1, 2, 3, 4) ORDER BY id")
                .unwrap();
            if all.iter().any(|(_, b)| *b != 2000 + round) {
                stale.push(format!(
                    "round {round}: the merged read after the spread UPDATE: {all:?}"
                ));
            }
            if balance(&mut other, 5 - id) != 2000 + round {
                stale.push(format!(
                    "round {round}: account {} in another session after the spread UPDATE",
                    5 - id
                ));
            }
        }
        for s in [
            "BEGIN",
            "UPDATE acct SET balance = balance + 1 WHERE id = 5",
            "UPDATE acct SET balance = balance + 1 WHERE id = 6",
            "COMMIT",
        ] {
            c.query_drop(s).unwrap();
        }
        for id in [6, 5] {
            if balance(&mut other, id) != 1000 + round {
                stale.push(format!(
                    "round {round}: account {id} in another session after the transaction"
                ));
            }
            if balance(&mut c, id) != 1000 + round {
                stale.push(format!("round {round}: account {id} after the transaction"));
            }
        }
        let ids: Vec<i64> = (0..4).map(|k| round * 100 + k).collect();
        let values: Vec<String> = ids
            .iter()
            .map(|i| format!("({i}, 1, 2, {round})"))
            .collect();
        c.query_drop(format!(
            "INSERT INTO transfers (id, src, dst, amount) VALUES {}",
            values.join(", ")
        ))
        .unwrap();
        for i in &ids {
            let n: Option<i64> = c
                .query_first(format!("SELECT amount FROM transfers WHERE id = {i}"))
                .unwrap();
            if n != Some(round) {
                stale.push(format!(
                    "round {round}: transfer {i} after the split INSERT"
                ));
            }
        }
    }
    drop((c, other));
    drop(p);
    drop(serial);
    assert_ne!(
        control, 7777,
        "the control read was not stale: the replicas are not behind or not read"
    );
    assert!(stale.is_empty(), "{} stale reads: {stale:#?}", stale.len());
}

/// Gives each group's primary its own `gtid_domain_id` (1, 2, ...) until
/// dropped, then 0 again.
struct Domains;

impl Domains {
    fn distinct() -> Domains {
        for (k, (p, _)) in lab().shards.iter().enumerate() {
            direct(*p)
                .query_drop(format!("SET GLOBAL gtid_domain_id = {}", k + 1))
                .unwrap();
        }
        Domains
    }
}

impl Drop for Domains {
    fn drop(&mut self) {
        for (p, _) in &lab().shards {
            let _ = direct(*p).query_drop("SET GLOBAL gtid_domain_id = 0");
        }
    }
}
