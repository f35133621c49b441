//! SIMULATOR, not MySQL: MySQL 8 cannot be installed on these machines.
//! The three "servers" are the scripted model in `repl_sim` (GTID sets,
//! replica threads, read_only and super_read_only, semi-sync
//! acknowledgements, as MySQL 8.0.26+ documents them). The server
//! monitors and the failover task under test are sextant's real code.
//!
//! One group, in turn:
//! 1. the primary is killed with a replica behind in receiving: the one
//!    that received every acknowledged transaction is promoted after
//!    applying it, the other is repointed by GTID auto-positioning, and
//!    no acknowledged transaction is lost;
//! 2. the old primary returns writable holding a transaction nobody
//!    acknowledged: super_read_only at once, left out as diverged with
//!    that GTID named;
//! 3. the only replica left has an errant transaction: the next primary
//!    failure is refused, naming it, and no replica is changed;
//! 4. the old primary, rebuilt from the new one, is rejoined as its
//!    replica;
//! 5. a planned switchover back to it.

mod repl_sim;
mod sim;
use repl_sim::{commit, format_set, start, write_directly, World};
use sextant_backend::ha::SwitchRequest;
use sextant_backend::{Group, Role, Server, Topology};
use sextant_monitor::ha::{run, FailoverSettings};
use sextant_monitor::{watch, Settings};
use sim::pool_settings;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Waits up to `secs` for `ok`, saying `what` (and the group's HA
/// report) if it never holds.
async fn until(group: &Group, secs: u64, what: &str, mut ok: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ok() {
        let r = group.ha.report();
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "{what}: not within {secs} s (ha: {} / {})",
            r.state,
            r.detail
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn log_of(w: &World, i: usize) -> Vec<String> {
    w.lock()[i].log.clone()
}

/// The statements sent to node `i` after the first `from` that change
/// replication or read_only.
fn changes(w: &World, i: usize, from: usize) -> Vec<String> {
    log_of(w, i)[from..]
        .iter()
        .filter(|q| {
            let u = q.to_ascii_uppercase();
            [
                "STOP ",
                "RESET ",
                "CHANGE ",
                "START ",
                "SET GLOBAL",
                "REPLACE",
                "CREATE",
            ]
            .iter()
            .any(|p| u.starts_with(p))
        })
        .cloned()
        .collect()
}

fn position(log: &[String], prefix: &str) -> usize {
    log.iter()
        .position(|q| q.starts_with(prefix))
        .unwrap_or_else(|| panic!("never sent {prefix:?}: {log:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulator_mysql8_failover_fencing_rejoin_and_switchover() {
    let w = start(3, true).await;
    let settings = pool_settings(Duration::from_millis(300));
    let addr: Vec<String> = w.lock().iter().map(|n| n.addr.clone()).collect();
    let uuid: Vec<String> = w.lock().iter().map(|n| n.uuid.clone()).collect();
    let mut servers: Vec<Arc<Server>> = (0..3)
        .map(|i| {
            let role = if i == 0 { Role::Primary } else { Role::Replica };
            Arc::new(Server::new(&addr[i], "g", role, 1, settings.clone()))
        })
        .collect();
    let primary = servers.remove(0);
    let group = Arc::new(Group::with_topology(
        "g",
        primary,
        servers,
        0,
        Topology::Replication,
        Duration::ZERO,
    ));
    group.ha.set_auto(true);
    let s = Settings {
        interval: Duration::from_millis(100),
        user: "sextant".into(),
        password: "x".into(),
        heartbeat: false,
        max_lag_ms: 1000,
        instance_id: 1,
    };
    for m in &group.members {
        tokio::spawn(watch(m.clone(), group.clone(), s.clone()));
    }
    tokio::spawn(run(
        group.clone(),
        FailoverSettings {
            interval: s.interval,
            user: s.user.clone(),
            password: s.password.clone(),
            after_ms: 500,
            semi_sync: true,
            replication: Some(("repl".into(), "r'pw".into())),
            promotable: vec![true; 3],
            coordinator: None,
        },
    ));
    let is_primary = |i: usize| {
        group
            .primary()
            .is_some_and(|p| Arc::ptr_eq(p, &group.members[i]))
    };
    until(&group, 5, "the monitor sees the group, as MySQL", || {
        group
            .members
            .iter()
            .all(|m| m.health.server_version().is_some_and(|v| !v.mariadb))
            && is_primary(0)
            && group.ha.report().state == "healthy"
    })
    .await;
    // Two healthy rounds: the replicas' semi-sync state and the
    // primary's executed set are known.
    tokio::time::sleep(Duration::from_millis(400)).await;

    // 1. Kill, with node 2 behind in receiving.
    let mut acked = Vec::new();
    for _ in 0..50 {
        let (g, ok) = commit(&w, 0).expect("the primary takes writes");
        assert!(ok, "node 1 acknowledges");
        acked.push(g);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    w.lock()[2].paused = true;
    for _ in 0..20 {
        acked.push(commit(&w, 0).expect("a write").0);
    }
    // A commit nobody acknowledged (node 1 cut too): on node 0 only.
    w.lock()[1].paused = true;
    let (lone, ok) = commit(&w, 0).expect("a write");
    assert!(!ok);
    let before1 = log_of(&w, 1).len();
    w.lock()[0].dead = true;
    w.lock()[1].paused = false;
    let killed = Instant::now();
    until(&group, 10, "node 1 promoted", || {
        is_primary(1) && group.ha.term() == 1
    })
    .await;
    let took = killed.elapsed();
    {
        let nodes = w.lock();
        assert!(!nodes[1].read_only && !nodes[1].super_read_only);
        assert!(nodes[1].semi_source && !nodes[1].semi_replica);
        assert_eq!(nodes[1].source, None);
        assert_eq!(nodes[2].source, Some(1), "node 2 repointed to node 1");
        let row = nodes[1].term_row.clone().expect("the term recorded");
        assert_eq!((row.0.as_str(), row.1.as_str()), ("1", addr[1].as_str()));
        for g in &acked {
            assert!(
                nodes[1].holds(g),
                "acknowledged {g} lost: {}",
                format_set(&nodes[1].executed)
            );
        }
    }
    // The statements, in the order that keeps two primaries from ever
    // taking writes.
    let log = log_of(&w, 1)[before1..].to_vec();
    let wait = position(&log, "SELECT WAIT_FOR_EXECUTED_GTID_SET(");
    assert!(
        log[wait].contains(&format!("{}:1-70", uuid[0])),
        "{}",
        log[wait]
    );
    let stop = position(&log, "STOP REPLICA");
    let reset = position(&log, "RESET REPLICA ALL");
    let unsuper = position(&log, "SET GLOBAL super_read_only = 0");
    let record = position(&log, "REPLACE INTO sextant.failover");
    let writable = position(&log, "SET GLOBAL read_only = 0");
    assert!(stop < wait || wait < reset, "{log:#?}");
    assert!(
        wait < reset && reset < unsuper && unsuper < record && record < writable,
        "{log:#?}"
    );
    let change = log_of(&w, 2)
        .into_iter()
        .find(|q| q.starts_with("CHANGE REPLICATION SOURCE TO"))
        .expect("node 2 repointed");
    assert!(
        change.contains("SOURCE_AUTO_POSITION = 1")
            && change.contains(&format!("SOURCE_PORT = {}", w.lock()[1].port)),
        "{change}"
    );
    until(
        &group,
        5,
        "node 2 has every acknowledged transaction",
        || {
            let nodes = w.lock();
            acked.iter().all(|g| nodes[2].holds(g))
        },
    )
    .await;
    eprintln!(
        "MySQL 8 simulator: killed primary replaced in {} ms",
        took.as_millis()
    );

    // 2. The old primary returns, writable, with its lone transaction.
    {
        let mut nodes = w.lock();
        nodes[0].dead = false;
        nodes[0].read_only = false;
        nodes[0].super_read_only = false;
    }
    until(&group, 5, "the old primary fenced and diverged", || {
        let state = group.members[0].health.member_state().unwrap_or_default();
        w.lock()[0].super_read_only && state.starts_with("diverged")
    })
    .await;
    let state = group.members[0].health.member_state().unwrap_or_default();
    assert!(state.contains(&lone), "the lone GTID named: {state}");
    assert!(is_primary(1), "writes stay on node 1");
    assert_eq!(
        w.lock()[0].source,
        None,
        "a diverged server is not rejoined"
    );

    // 3. An errant write on node 2, the only replica left: node 1's
    // failure is refused and nothing changes.
    let errant = write_directly(&w, 2);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let before2 = log_of(&w, 2).len();
    w.lock()[1].dead = true;
    until(&group, 10, "refused", || {
        group.ha.report().state == "refused"
    })
    .await;
    let why = group.ha.report().detail;
    assert!(
        why.contains(&addr[2]) && why.contains(&errant),
        "the errant replica and GTID named: {why}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(group.ha.term(), 1);
    assert_eq!(
        changes(&w, 2, before2),
        Vec::<String>::new(),
        "node 2 changed"
    );
    w.lock()[1].dead = false;
    until(&group, 5, "healthy again on node 1", || {
        is_primary(1) && group.ha.report().state == "healthy"
    })
    .await;

    // 4. Node 0 rebuilt from node 1 (a clone): rejoined as its replica.
    {
        let mut nodes = w.lock();
        let copy = nodes[1].clone();
        let n = &mut nodes[0];
        n.executed = copy.executed;
        n.has_table = copy.has_table;
        n.term_row = copy.term_row;
    }
    until(&group, 5, "node 0 rejoined", || {
        let n = w.lock()[0].clone();
        n.source == Some(1) && n.io_on && group.members[0].health.member_state().is_none()
    })
    .await;
    let rejoin = log_of(&w, 0)
        .into_iter()
        .rfind(|q| q.starts_with("CHANGE REPLICATION SOURCE TO"))
        .expect("a CHANGE");
    assert!(
        rejoin.contains("SOURCE_USER = 'repl'")
            && rejoin.contains("SOURCE_PASSWORD = 'r''pw'")
            && rejoin.contains("GET_SOURCE_PUBLIC_KEY = 1")
            && rejoin.contains("SOURCE_AUTO_POSITION = 1"),
        "{rejoin}"
    );
    assert!(w.lock()[0].super_read_only && w.lock()[0].semi_replica);

    // 5. Switchover to node 0 under writes.
    let writer = {
        let (w, group) = (w.clone(), group.clone());
        tokio::spawn(async move {
            let mut done = Vec::new();
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(3) {
                let p = group
                    .primary()
                    .and_then(|p| group.members.iter().position(|m| Arc::ptr_eq(m, p)));
                if let Some((g, true)) = p.and_then(|p| commit(&w, p)) {
                    done.push(g);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            done
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (tx, rx) = tokio::sync::oneshot::channel();
    assert!(group
        .ha
        .request_switchover(SwitchRequest {
            to: Some(addr[0].clone()),
            reply: tx,
        })
        .is_ok());
    let out = tokio::time::timeout(Duration::from_secs(10), rx)
        .await
        .expect("the switchover answers")
        .expect("a reply");
    let summary = out.expect("the switchover succeeds");
    assert!(
        summary.contains("term 2") && summary.contains("replicates from it"),
        "{summary}"
    );
    assert!(is_primary(0));
    let written = writer.await.expect("the writer");
    assert!(written.len() > 50, "writes went on: {}", written.len());
    {
        let nodes = w.lock();
        assert!(
            nodes[1].super_read_only,
            "the old primary fenced with super_read_only"
        );
        assert_eq!(nodes[1].source, Some(0));
        assert!(!nodes[0].read_only);
    }
    until(
        &group,
        5,
        "every write of the switchover on node 0 and node 1",
        || {
            let nodes = w.lock();
            written
                .iter()
                .all(|g| nodes[0].holds(g) && nodes[1].holds(g))
        },
    )
    .await;
    let log = log_of(&w, 1);
    let fence = log
        .iter()
        .rposition(|q| q == "SET GLOBAL super_read_only = 1")
        .expect("node 1 fenced");
    assert!(
        log[fence..]
            .iter()
            .any(|q| q.starts_with("SELECT @@GLOBAL.gtid_executed")),
        "the old primary's set read after it was fenced"
    );
}
