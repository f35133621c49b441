//! A distributed transaction in doubt when a group's primary fails over:
//! sextant stops right after the decision was recorded (failpoint), and then
//! the primary of the group holding the other branch prepared dies (its
//! replica, which MariaDB gave the prepared branch, becomes the primary),
//! or the primary of the group holding the decision row dies (its replica
//! has the row); either way the restarted sextant's recovery commits the
//! branch. (Its own test binary, with its own lab: it kills and promotes
//! servers.)

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::time::{Duration, Instant};

const DB: &str = "sextant_xa_failover";

fn groups(primaries: [u16; 2]) -> String {
    let log = std::env::temp_dir().join(format!("sextant-xa-failover-{}", std::process::id()));
    let mut g = String::new();
    for (i, p) in primaries.iter().enumerate() {
        g += &format!(
            "[groups.data{}]\nprimary = \"127.0.0.1:{p}\"\nprimary_wait_ms = 10000\n",
            i + 1
        );
    }
    g += &format!(
        "[xa]\nlog_dir = \"{}\"\ninstance_id = \"failover-test\"\nrecover_interval_ms = 300\n",
        log.display()
    );
    g + &hash_layout(
        2,
        &format!(
            r#"
[sharding.default]
{DB} = "data1"

[[sharding.table]]
vdb = 1
db = "{DB}"
table = "acct"
pkey = "id"
"#
        ),
    )
}

fn prepared(port: u16) -> Vec<String> {
    let rows: Vec<(i64, i64, i64, Vec<u8>)> = direct(port).query("XA RECOVER").unwrap();
    rows.into_iter()
        .map(|r| String::from_utf8_lossy(&r.3).into_owned())
        .collect()
}

fn wait_for(what: &str, within: Duration, mut ok: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ok() {
        assert!(t.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_branch_in_doubt_is_committed_on_the_promoted_replica() {
    let _ = LAB_ARGS.set(&["--shards", "2", "--replicas", "1"]);
    let lab = lab();
    let (p1, _) = lab.shards[0];
    let (p2, ref r2) = lab.shards[1];
    let r2 = r2[0];
    for p in [p1, p2] {
        let mut c = direct(p);
        c.query_drop(format!("CREATE DATABASE IF NOT EXISTS {DB}"))
            .unwrap();
        c.query_drop(format!(
            "CREATE TABLE IF NOT EXISTS {DB}.acct (id INT PRIMARY KEY, balance INT NOT NULL)"
        ))
        .unwrap();
    }
    // id 2 lives in data1, id 1 in data2.
    direct(p1)
        .query_drop(format!("INSERT INTO {DB}.acct VALUES (2, 100)"))
        .unwrap();
    direct(p2)
        .query_drop(format!("INSERT INTO {DB}.acct VALUES (1, 100)"))
        .unwrap();
    let mut p = Setup {
        proxy: "default_group = \"data1\"",
        groups: Some(groups([p1, p2])),
        env: vec![("SEXTANT_XA_FAILPOINT", "after_decision".into())],
        ..Default::default()
    }
    .start();
    // data1 is touched first: it holds the decision, data2's branch is
    // prepared.
    let in_doubt = |p: &mut Proxy, amount: i64| {
        let mut c = mysql::Conn::new(mysql::Opts::from_url(&p.url("app", "apppass", DB)).unwrap())
            .expect("connect through sextant");
        let r = (|| -> mysql::Result<()> {
            c.query_drop("BEGIN")?;
            c.query_drop(format!(
                "UPDATE acct SET balance = balance + {amount} WHERE id = 2"
            ))?;
            c.query_drop(format!(
                "UPDATE acct SET balance = balance - {amount} WHERE id = 1"
            ))?;
            c.query_drop("COMMIT")
        })();
        assert!(r.is_err(), "the COMMIT must not be answered");
        assert!(p.exited_within(Duration::from_secs(5)), "no failpoint stop");
    };
    let balances = |d1: u16, d2: u16| -> (i64, i64) {
        let b1: i64 = direct(d2)
            .query_first(format!("SELECT balance FROM {DB}.acct WHERE id = 1"))
            .unwrap()
            .unwrap();
        let b2: i64 = direct(d1)
            .query_first(format!("SELECT balance FROM {DB}.acct WHERE id = 2"))
            .unwrap()
            .unwrap();
        (b1, b2)
    };
    let move_config = |p: &Proxy, from: u16, to: u16| {
        std::fs::write(
            &p.config,
            std::fs::read_to_string(&p.config)
                .unwrap()
                .replace(&format!("127.0.0.1:{from}"), &format!("127.0.0.1:{to}")),
        )
        .unwrap();
    };

    // 1. The prepared branch's primary fails over.
    in_doubt(&mut p, 30);
    // The decision is recorded in data1; both branches are prepared, and
    // data2's replica has data2's prepared too.
    assert_eq!(prepared(p1).len(), 1);
    assert_eq!(prepared(p2).len(), 1);
    wait_for(
        "the replica holds the prepared branch",
        Duration::from_secs(10),
        || prepared(r2).len() == 1,
    );
    kill_server_in(&lab.dir.join("shard2"), 0);
    let mut r = direct(r2);
    r.query_drop("STOP SLAVE").unwrap();
    r.query_drop("SET GLOBAL read_only = 0").unwrap();
    move_config(&p, p2, r2);
    p.restart(&[("SEXTANT_XA_FAILPOINT", "after_decision")]);
    wait_for(
        "recovery resolves every branch",
        Duration::from_secs(10),
        || prepared(p1).is_empty() && prepared(r2).is_empty(),
    );
    assert_eq!(balances(p1, r2), (70, 130), "the commit, in both groups");

    // 2. The decision row's primary fails over: data1's replica has the
    // row, and the restarted sextant commits data2's branch by it.
    let r1 = lab.shards[0].1[0];
    in_doubt(&mut p, 10);
    assert_eq!(prepared(r2).len(), 1);
    let decided = |port: u16| -> i64 {
        direct(port)
            .query_first("SELECT COUNT(*) FROM sextant.xa_decision WHERE decision = 'C'")
            .unwrap()
            .unwrap()
    };
    let rows = decided(p1);
    assert!(rows >= 1, "the decision row is on data1's primary");
    wait_for(
        "data1's replica has the decision row and data1's prepared branch",
        Duration::from_secs(10),
        || decided(r1) == rows && prepared(r1).len() == 1,
    );
    kill_server_in(&lab.dir.join("shard1"), 0);
    let mut r = direct(r1);
    r.query_drop("STOP SLAVE").unwrap();
    r.query_drop("SET GLOBAL read_only = 0").unwrap();
    move_config(&p, p1, r1);
    p.restart(&[]);
    wait_for(
        "recovery commits by the replicated decision",
        Duration::from_secs(10),
        || prepared(r2).is_empty() && prepared(r1).is_empty(),
    );
    assert_eq!(balances(r1, r2), (60, 140), "the commit, in both groups");
    // And through sextant.
    let mut c = mysql::Conn::new(mysql::Opts::from_url(&p.url("app", "apppass", DB)).unwrap())
        .expect("connect through sextant");
    let total: i64 = c
        .query_first("SELECT SUM(balance) FROM acct")
        .unwrap()
        .unwrap();
    assert_eq!(total, 200);
}
