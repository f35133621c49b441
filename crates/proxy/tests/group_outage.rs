//! One group's primary down on a four-group fleet behind HAProxy: the
//! rest of the data stays served. New clients log in naming a database
//! whose default group is the one down, set their session up as drivers
//! do, and work with the other groups; /readyz stays 200 on every
//! instance, so HAProxy keeps sending clients. (Its own test binary, with its own lab: it kills a
//! primary.)

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::time::{Duration, Instant};

const DB: &str = "sextant_outage";

fn layout() -> String {
    shard_groups("primary_wait_ms = 500\n")
        + &hash_layout(
        4,
        &format!(
            "\n[sharding.default]\n{DB} = \"data1\"\n\n[[sharding.table]]\nvdb = 1\ndb = \"{DB}\"\ntable = \"acct\"\npkey = \"id\"\n"
        ),
    )
}

fn wait_for(what: &str, within: Duration, mut ok: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ok() {
        assert!(t.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Which group's primary holds account `id`.
fn group_of(id: u32) -> usize {
    lab()
        .shards
        .iter()
        .position(|(p, _)| {
            direct(*p)
                .query_first::<u32, _>(format!("SELECT id FROM {DB}.acct WHERE id = {id}"))
                .unwrap()
                .is_some()
        })
        .expect("every account is in some group")
}

#[test]
fn one_groups_primary_down_stays_that_groups() {
    let _ = LAB_ARGS.set(&["--shards", "4", "--replicas", "1"]);
    let lab = lab();
    for (p, replicas) in &lab.shards {
        let mut d = direct(*p);
        d.query_drop(format!("DROP DATABASE IF EXISTS {DB}"))
            .unwrap();
        d.query_drop(format!("CREATE DATABASE {DB}")).unwrap();
        d.query_drop(format!(
            "CREATE TABLE {DB}.acct (id INT PRIMARY KEY, v INT NOT NULL)"
        ))
        .unwrap();
        for r in replicas {
            wait_for("the replica has the table", Duration::from_secs(20), || {
                direct(*r)
                    .query_first::<u32, _>(format!(
                        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '{DB}'"
                    ))
                    .unwrap()
                    == Some(1)
            });
        }
    }
    let etcd = Etcd::start();
    let fleet: Vec<Proxy> = ["a", "b"]
        .iter()
        .map(|id| {
            Setup {
                proxy: "default_group = \"data1\"\nproxy_protocol_from = [\"127.0.0.1\"]",
                groups: Some(layout()),
                group: &etcd.cluster("outage", id),
                http: true,
                ..Default::default()
            }
            .start()
        })
        .collect();
    let haproxy = HaProxy::start(&fleet.iter().collect::<Vec<_>>());
    let url = format!(
        "mysql://app:apppass@127.0.0.1:{}/{DB}?prefer_socket=false",
        haproxy.port
    );
    let connect = || mysql::Conn::new(mysql::Opts::from_url(&url).unwrap());
    let mut c = connect().expect("connect through HAProxy");
    for id in 0..40 {
        c.query_drop(format!("INSERT INTO acct VALUES ({id}, 0)"))
            .unwrap();
    }
    drop(c);
    let groups: Vec<usize> = (0..40).map(group_of).collect();
    let dead = groups[0];
    assert_eq!(
        dead, 0,
        "account 0 is in data1, the database's default group"
    );
    let live: Vec<u32> = (0..40).filter(|&i| groups[i as usize] != dead).collect();
    let down: Vec<u32> = (0..40).filter(|&i| groups[i as usize] == dead).collect();
    assert!(live.len() > 20 && !down.is_empty(), "{groups:?}");
    // Every replica has the accounts before the primary goes.
    for (p, replicas) in &lab.shards {
        let n: Option<u32> = direct(*p)
            .query_first(format!("SELECT COUNT(*) FROM {DB}.acct"))
            .unwrap();
        for r in replicas {
            wait_for("the replica has the rows", Duration::from_secs(20), || {
                direct(*r)
                    .query_first::<u32, _>(format!("SELECT COUNT(*) FROM {DB}.acct"))
                    .unwrap()
                    == n
            });
        }
    }

    kill_server_in(&lab.dir.join("shard1"), 0);
    // New clients at once, before and after the monitors notice: each
    // logs in naming the database, sets its session up as drivers do, and
    // reads and writes accounts of the other groups.
    let started = Instant::now();
    let mut errors: Vec<String> = Vec::new();
    let mut clients = 0;
    let mut noticed = false;
    while started.elapsed() < Duration::from_secs(8) {
        clients += 1;
        let k = live[clients % live.len()];
        let mut step = "connect";
        let mut run = || -> mysql::Result<()> {
            let mut c = connect()?;
            let steps = [
                "SET NAMES utf8mb4".to_string(),
                "SET SESSION sql_mode = 'STRICT_TRANS_TABLES', time_zone = '+00:00'".into(),
                format!("USE {DB}"),
                format!("SELECT v FROM acct WHERE id = {k}"),
                format!("UPDATE acct SET v = v + 1 WHERE id = {k}"),
                "SET autocommit = 0".into(),
                format!("UPDATE acct SET v = v + 1 WHERE id = {k}"),
                "COMMIT".into(),
            ];
            for (i, sql) in steps.iter().enumerate() {
                step = [
                    "SET NAMES",
                    "SET SESSION",
                    "USE",
                    "read",
                    "read of the group down",
                    "UPDATE",
                    "SET autocommit",
                    "UPDATE in a transaction",
                    "COMMIT",
                ][i];
                c.query_drop(sql)?;
            }
            Ok(())
        };
        if let Err(e) = run() {
            errors.push(format!(
                "client {clients} at {:?}, {step}: {e}",
                started.elapsed()
            ));
        }
        for p in &fleet {
            let (code, body) = p.http_get("/readyz");
            assert_eq!(code, 200, "/readyz with one group down: {body}");
            noticed |= body.contains("no reachable primary in group(s) data1");
        }
    }
    eprintln!(
        "{clients} new clients in {:?} with one group down, {} failed",
        started.elapsed(),
        errors.len()
    );
    assert!(noticed, "/readyz never named the group that is down");
    assert!(
        errors.is_empty(),
        "{} of {clients} new clients failed with one group down:\n{}",
        errors.len(),
        errors.join("\n")
    );
    // The group's writes, though, wait and fail: it has no primary.
    let mut c = connect().unwrap();
    let e = c
        .query_drop(format!("UPDATE acct SET v = v + 1 WHERE id = {}", down[0]))
        .unwrap_err();
    assert!(e.to_string().contains("data1"), "{e}");

    restart_server_in(&lab.dir.join("shard1"), 0);
    for p in &fleet {
        wait_for("the primary is back", Duration::from_secs(30), || {
            p.http_get("/readyz") == (200, "ready\n".into())
        });
    }
    let mut c = connect().unwrap();
    c.query_drop(format!("UPDATE acct SET v = v + 1 WHERE id = {}", down[0]))
        .unwrap();
    // Each client's two updates of its live account, and nothing else.
    let total: Option<i64> = c.query_first("SELECT SUM(v) FROM acct").unwrap();
    assert_eq!(total, Some(2 * clients as i64 + 1));
}
