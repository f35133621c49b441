//! failover = "auto" beyond a clean kill, on a lab of its own (it freezes
//! and kills the lab's servers): a semi-sync group whose replicas stopped
//! acknowledging is not failed over (a commit acknowledged before then may
//! be on no replica); a frozen primary (SIGSTOP: its connections stay
//! open, so replicas still say they are connected) is replaced once the
//! replicas stop hearing its heartbeats, a transaction left open on it is
//! replayed on the new primary, and when it resumes it takes no write through
//! sextant and is fenced. A replica far behind in applying when the
//! primary dies is not the one promoted, and catches up from the new one.

mod common;
use common::failover::*;
use common::*;
use mysql::prelude::Queryable;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[test]
fn semi_sync_without_acknowledging_replicas_and_a_frozen_primary() {
    no_failover_when_no_replica_was_acknowledging();
    a_replica_far_behind_is_not_the_one_promoted();
    a_frozen_primary_is_replaced_and_fenced_when_it_resumes();
    a_primary_cut_from_everyone_is_replaced_and_fenced_when_the_cut_heals();
}

/// Sets the semi-sync replica side of the lab's replicas (`ports` minus
/// the primary) and reconnects their IO threads so the primary sees it.
fn replicas_acknowledge(ports: &[u16], primary: u16, on: bool) {
    for p in ports.iter().filter(|p| **p != primary) {
        let v = if on { "ON" } else { "OFF" };
        direct(*p)
            .query_drop(format!(
                "SET GLOBAL rpl_semi_sync_slave_enabled = {v}; STOP SLAVE IO_THREAD; START SLAVE IO_THREAD"
            ))
            .unwrap();
    }
    let want = if on { 2 } else { 0 };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let n: Option<(String, u64)> = direct(primary)
            .query_first("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_clients'")
            .unwrap();
        if n.as_ref().map(|(_, n)| *n) == Some(want) {
            return;
        }
        assert!(Instant::now() < deadline, "semi-sync clients: {n:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// With `semi_sync = true`, the group's primary dies while no replica was
/// acknowledging its commits (it had fallen back to asynchronous
/// replication): sextant refuses to promote, says why, and leaves every
/// replica read-only. The primary's return ends the outage.
fn no_failover_when_no_replica_was_acknowledging() {
    let (lab, ports) = failover_lab();
    let p = sextant_under_load_tables();
    sync_with(&ports);
    let primary = writable(&ports);
    let pi = ports.iter().position(|x| *x == primary).unwrap();
    replicas_acknowledge(&ports, primary, false);
    // The failover task reads each replica's semi-sync state while the
    // primary answers: a few rounds.
    std::thread::sleep(Duration::from_secs(2));
    let term = groups_row(&p)["term"].clone();
    p.conn()
        .query_drop("INSERT INTO fo_ledger (token, writer) VALUES (7000000001, 70)")
        .unwrap();
    kill_and_reap(&lab.dir, pi);
    let deadline = Instant::now() + Duration::from_secs(20);
    let g = loop {
        let g = groups_row(&p);
        if g["ha_state"] == "refused" {
            break g;
        }
        assert!(
            Instant::now() < deadline,
            "not refused within 20 s: {g:?}\n{}",
            p.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(g["term"], term, "{g:?}");
    assert!(
        g["detail"].contains("semi-sync") && g["detail"].contains("acknowledg"),
        "{g:?}"
    );
    let refusals: u64 = g["refusals"].parse().unwrap();
    assert!(refusals >= 1, "{g:?}");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(groups_row(&p)["term"], term);
    assert_read_only_but(&ports, primary, "after a refused failover");
    // Back: the same primary, writable again, takes writes through
    // sextant; the replicas acknowledge again for what follows.
    restart_server_in(&lab.dir, pi);
    wait_server_up(primary);
    let deadline = Instant::now() + Duration::from_secs(30);
    while p
        .conn()
        .query_drop("INSERT INTO fo_ledger (token, writer) VALUES (7000000002, 70)")
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "writes did not come back: {:?}\n{}",
            groups_row(&p),
            p.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(writable(&ports), primary);
    direct(primary)
        .query_drop("SET GLOBAL rpl_semi_sync_master_enabled = ON")
        .unwrap();
    replicas_acknowledge(&ports, primary, true);
    sync_with(&ports);
}

/// The first replica (the one a tie would pick) has applied little of
/// what it received (its SQL thread stopped) when the primary dies: the
/// other is promoted, without a catch-up wait, and the lagging one, now
/// replicating from it, has every acknowledged row once it applied them.
fn a_replica_far_behind_is_not_the_one_promoted() {
    let (lab, ports) = failover_lab();
    let p = sextant_under_load_tables();
    sync_with(&ports);
    let primary = writable(&ports);
    let pi = ports.iter().position(|x| *x == primary).unwrap();
    let old_addr = format!("127.0.0.1:{primary}");
    let lagging = *ports.iter().find(|x| **x != primary).unwrap();
    let other = *ports
        .iter()
        .find(|x| **x != primary && **x != lagging)
        .unwrap();
    let term0: u64 = groups_row(&p)["term"].parse().unwrap();
    direct(lagging).query_drop("STOP SLAVE SQL_THREAD").unwrap();
    let mut c = p.conn();
    let mut acked = Vec::new();
    for batch in 0..20u64 {
        let values: Vec<String> = (0..100u64)
            .map(|k| format!("({}, 60)", 6_000_000_000 + batch * 100 + k))
            .collect();
        c.query_drop(format!(
            "INSERT INTO fo_ledger (token, writer) VALUES {}",
            values.join(", ")
        ))
        .unwrap();
        acked.extend((0..100u64).map(|k| 6_000_000_000 + batch * 100 + k));
    }
    // It received them all (semi-sync acknowledged them) and applied none.
    let (behind, _) = count(lagging);
    let (ahead, _) = count(other);
    assert!(
        ahead >= behind + 2000,
        "the lagging replica has {behind} rows, the other {ahead}"
    );
    // A transaction open on the primary when it dies: its next
    // statement (before the failover) is told it was rolled back.
    let mut open = p.conn();
    open.query_drop("BEGIN").unwrap();
    open.query_drop("INSERT INTO fo_ledger (token, writer) VALUES (6100000001, 61)")
        .unwrap();
    kill_and_reap(&lab.dir, pi);
    // Its next statement waits for the new primary, where the
    // transaction is replayed and goes on.
    open.query_drop("INSERT INTO fo_ledger (token, writer) VALUES (6100000002, 61)")
        .unwrap_or_else(|e| panic!("the transaction was not replayed: {e}"));
    open.query_drop("COMMIT").unwrap();
    drop(open);
    let g = wait_term(&p, term0 + 1, Instant::now(), "a failover");
    eprintln!("lagging replica: {}", g["last_failover"]);
    let on_new = count(other).1;
    assert!(
        on_new.contains(&6100000001) && on_new.contains(&6100000002),
        "the replayed transaction committed on the new primary"
    );
    assert_eq!(g["primary"], format!("127.0.0.1:{other}"), "{g:?}");
    sync_with(&[other, lagging]);
    let (_, on_lagging) = count(lagging);
    let missing: Vec<&u64> = acked.iter().filter(|t| !on_lagging.contains(t)).collect();
    assert!(
        missing.is_empty(),
        "the lagging replica lacks {} rows",
        missing.len()
    );
    assert_eq!(count(lagging).0, count(other).0);
    // The old primary back, for what follows.
    restart_server_in(&lab.dir, pi);
    wait_server_up(primary);
    let deadline = Instant::now() + Duration::from_secs(30);
    while backend_state(&p, &old_addr) != ("replica".to_string(), None) {
        assert!(
            Instant::now() < deadline,
            "the old primary was not rejoined: {:?}",
            backend_state(&p, &old_addr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    sync_with(&ports);
}

/// SIGSTOP of the primary under load. Its replicas' IO threads stay
/// connected (slave_net_timeout is a minute), but the heartbeats stop:
/// sextant promotes. A client's transaction open on the frozen primary
/// is replayed on the new primary at its next statement, and commits
/// there once (the frozen one never gets its COMMIT). When
/// the primary resumes, writable as it was, sextant sends it nothing,
/// makes it read-only, and rejoins it or leaves it out as diverged; every
/// write acknowledged through sextant is on the new primary.
fn a_frozen_primary_is_replaced_and_fenced_when_it_resumes() {
    let (_, ports) = failover_lab();
    let p = sextant_under_load_tables();
    sync_with(&ports);
    let primary = writable(&ports);
    let pi = ports.iter().position(|x| *x == primary).unwrap();
    let old_addr = format!("127.0.0.1:{primary}");
    let term0: u64 = groups_row(&p)["term"].parse().unwrap();
    // A transaction open on the primary, idle when it freezes.
    let mut open = p.conn();
    open.query_drop("BEGIN").unwrap();
    open.query_drop("INSERT INTO fo_ledger (token, writer) VALUES (8000000001, 80)")
        .unwrap();
    let stop = AtomicBool::new(false);
    let seen = Mutex::new(Seen::default());
    let (frozen_at, new_addr) = std::thread::scope(|s| {
        let h = s.spawn(|| load(&p, 80, &stop, &seen));
        let _stop = StopOnDrop(&stop);
        std::thread::sleep(Duration::from_secs(1));
        let stalled = stall_lab_server(pi);
        let frozen_at = Instant::now();
        let g = wait_term(&p, term0 + 1, frozen_at, "a frozen primary replaced");
        eprintln!(
            "frozen primary replaced after {} ms: {}",
            frozen_at.elapsed().as_millis(),
            g["last_failover"]
        );
        assert_ne!(g["primary"], old_addr);
        std::thread::sleep(Duration::from_secs(2));
        // The transaction left on the frozen primary is replayed on the
        // new one and commits there (the frozen one never gets a COMMIT).
        open.query_drop("INSERT INTO fo_ledger (token, writer) VALUES (8000000002, 80)")
            .unwrap_or_else(|e| panic!("the transaction was not replayed: {e}"));
        open.query_drop("COMMIT").unwrap();
        open.query_drop("INSERT INTO fo_ledger (token, writer) VALUES (8000000003, 80)")
            .unwrap();
        // It resumes, writable, with the statements sextant had sent it
        // before it froze still to read.
        drop(stalled);
        std::thread::sleep(Duration::from_secs(2));
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
        (frozen_at, g["primary"].clone())
    });
    let seen = seen.into_inner().unwrap();
    let new = ports
        .iter()
        .position(|port| format!("127.0.0.1:{port}") == new_addr)
        .expect("the new primary is a lab server");
    let first_write = seen
        .write_done
        .iter()
        .filter(|(start, _)| *start > frozen_at)
        .map(|(_, done)| done.duration_since(frozen_at))
        .min()
        .expect("writes succeeded after the freeze");
    eprintln!(
        "frozen: first write {} ms after SIGSTOP; {} acknowledged, {} waited, {} unknown",
        first_write.as_millis(),
        seen.acked.len(),
        seen.waited,
        seen.unknown.len()
    );
    assert!(seen.read_errors.is_empty(), "{:?}", seen.read_errors);
    assert!(seen.write_errors.is_empty(), "{:?}", seen.write_errors);
    assert!(seen.unknown.len() <= 4, "{:?}", seen.unknown);
    // Sextant makes it read-only and never routes to it.
    let deadline = Instant::now() + Duration::from_secs(30);
    let state = loop {
        let ro: i64 = direct(primary)
            .query_first("SELECT @@read_only")
            .unwrap()
            .unwrap();
        let (role, state) = backend_state(&p, &old_addr);
        assert_ne!(role, "primary", "the resumed old primary is routed to");
        match state {
            None if role == "replica" && ro == 1 => break "rejoined".to_string(),
            Some(s) if s.starts_with("diverged") && ro == 1 => break s,
            _ => {}
        }
        assert!(
            Instant::now() < deadline,
            "the resumed old primary was not fenced within 30 s: {role} {:?} read_only={ro}\n{}",
            backend_state(&p, &old_addr).1,
            p.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let e = app_direct(primary)
        .query_drop("INSERT INTO fo_ledger (token, writer) VALUES (8000000004, 80)")
        .expect_err("the old primary took a write");
    assert_eq!(error_code(&e).0, 1290, "{e}");
    let (_, on_new) = count(ports[new]);
    let missing: Vec<&u64> = seen.acked.iter().filter(|t| !on_new.contains(t)).collect();
    assert!(missing.is_empty(), "acknowledged writes lost: {missing:?}");
    assert!(on_new.contains(&8000000003));
    assert!(
        on_new.contains(&8000000001) && on_new.contains(&8000000002),
        "the replayed transaction's rows are not on the new primary"
    );
    // Whatever the old primary holds beyond the new one was never
    // acknowledged: writes told their outcome is unknown.
    let (_, on_old) = count(primary);
    let extra: Vec<&u64> = on_old
        .difference(&on_new)
        .filter(|t| !seen.unknown.contains(t) && **t != 8000000001)
        .collect();
    assert!(
        extra.is_empty(),
        "the old primary holds acknowledged-looking rows: {extra:?} ({state})"
    );
    eprintln!("frozen: old primary {state}");
    if state != "rejoined" {
        rebuild_from(primary, ports[new]);
        wait_rejoined(&p, &old_addr);
    }
    sync_with(&ports);
}

/// A network cut around the primary: sextant and both replicas reach it
/// only through gates, all closed at once; the primary itself runs on,
/// and a client beside it (not through sextant) writes there during the
/// cut. Sextant promotes a replica; when the cut heals it makes the old
/// primary read-only and, since it holds that write, leaves it out as
/// diverged and never rejoins it; nothing written through sextant is
/// missing from the new primary.
fn a_primary_cut_from_everyone_is_replaced_and_fenced_when_the_cut_heals() {
    let (_, ports) = failover_lab();
    sync_with(&ports);
    let primary = writable(&ports);
    let replicas: Vec<u16> = ports.iter().copied().filter(|p| *p != primary).collect();
    let to_sextant = Gate::start(primary);
    let gates: Vec<Gate> = replicas.iter().map(|_| Gate::start(primary)).collect();
    for (r, g) in replicas.iter().zip(&gates) {
        direct(*r)
            .query_drop(format!(
                "STOP SLAVE; CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = {}; START SLAVE",
                g.port
            ))
            .unwrap();
    }
    let old_addr = format!("127.0.0.1:{}", to_sextant.port);
    let p = Setup {
        groups: Some(format!(
            "[groups.main]\nprimary = \"{old_addr}\"\nreplicas = [{}]\n{GROUP}",
            replicas
                .iter()
                .map(|r| format!("\"127.0.0.1:{r}\""))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        http: true,
        ..Default::default()
    }
    .start();
    wait_healthy(&p);
    let term0: u64 = groups_row(&p)["term"].parse().unwrap();
    let stop = AtomicBool::new(false);
    let seen = Mutex::new(Seen::default());
    let new_addr = std::thread::scope(|s| {
        let h = s.spawn(|| load(&p, 81, &stop, &seen));
        let _stop = StopOnDrop(&stop);
        std::thread::sleep(Duration::from_secs(1));
        to_sextant.close();
        for g in &gates {
            g.close();
        }
        let cut_at = Instant::now();
        // Beside the primary, a client still reaches it: its commit waits
        // for a semi-sync acknowledgement that no replica sends, then
        // commits (rpl_semi_sync_master_timeout).
        let beside = s.spawn(move || {
            app_direct(primary).exec_drop(
                "INSERT INTO fo_ledger (token, writer) VALUES (?, 81)",
                (8_100_000_000u64,),
            )
        });
        let g = wait_term(
            &p,
            term0 + 1,
            cut_at,
            "a primary cut from everyone replaced",
        );
        eprintln!(
            "cut from everyone: replaced after {} ms: {}",
            cut_at.elapsed().as_millis(),
            g["last_failover"]
        );
        beside
            .join()
            .unwrap()
            .expect("the write beside the cut primary");
        std::thread::sleep(Duration::from_secs(1));
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
        g["primary"].clone()
    });
    let seen = seen.into_inner().unwrap();
    assert!(seen.read_errors.is_empty(), "{:?}", seen.read_errors);
    assert!(seen.write_errors.is_empty(), "{:?}", seen.write_errors);
    assert!(seen.unknown.len() <= 4, "{:?}", seen.unknown);
    let new = *ports
        .iter()
        .find(|port| format!("127.0.0.1:{port}") == new_addr)
        .expect("the new primary is a lab server");
    // The cut heals.
    to_sextant.open();
    for g in &gates {
        g.open();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let state = loop {
        let (role, state) = backend_state(&p, &old_addr);
        assert_ne!(
            role, "primary",
            "the old primary is routed to after the cut healed"
        );
        if let Some(s) = state.filter(|s| s.starts_with("diverged")) {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the old primary was not left out as diverged: {role} {:?}\n{}",
            backend_state(&p, &old_addr).1,
            p.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let e = app_direct(primary)
        .query_drop("INSERT INTO fo_ledger (token, writer) VALUES (8100000001, 81)")
        .expect_err("the old primary took a write after the cut healed");
    assert_eq!(error_code(&e).0, 1290, "{e}");
    // Never rejoined: a few more rounds, still out.
    std::thread::sleep(Duration::from_secs(3));
    let (role, again) = backend_state(&p, &old_addr);
    assert_eq!(again.as_deref(), Some(state.as_str()), "{role}");
    let (_, on_new) = count(new);
    let missing: Vec<&u64> = seen.acked.iter().filter(|t| !on_new.contains(t)).collect();
    assert!(missing.is_empty(), "acknowledged writes lost: {missing:?}");
    assert!(!on_new.contains(&8_100_000_000));
    eprintln!("cut from everyone: old primary {state}");
}
