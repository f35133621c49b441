//! topology = "replication": sextant follows which server is writable, as
//! after a switchover done by another tool, and refuses writes while two
//! servers are writable. (Its own test binary: it rearranges the lab.)

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::time::{Duration, Instant};

fn sql(port: u16, stmt: &str) {
    direct(port)
        .query_drop(stmt)
        .unwrap_or_else(|e| panic!("{port}: {stmt}: {e}"));
}

fn primary_of(p: &Proxy) -> String {
    let rows: Vec<mysql::Row> = p.admin().query("SHOW BACKENDS").unwrap();
    rows.iter()
        .filter(|r| r.get::<String, _>("role").unwrap() == "primary")
        .map(|r| r.get::<String, _>("address").unwrap())
        .next()
        .unwrap_or_default()
}

#[test]
fn switchover_is_followed_and_split_brain_refuses_writes() {
    let lab = lab();
    let (old, new) = (lab.primary, lab.replicas[0]);
    // An application account as it should be: no SUPER / READ ONLY ADMIN,
    // so a read-only server refuses its writes.
    sql(
        old,
        "CREATE USER IF NOT EXISTS 'limited'@'%' IDENTIFIED BY 'limitedpass'",
    );
    sql(
        old,
        "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON sextant_test.* TO 'limited'@'%'",
    );
    let p = Setup {
        group: "topology = \"replication\"\nprimary_wait_ms = 3000\n[routing]\nhold_ms = 0\n",
        users: "[[users]]\nname = \"limited\"\npassword = \"limitedpass\"\n",
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    c.query_drop("CREATE TABLE IF NOT EXISTS sw_t (id INT PRIMARY KEY AUTO_INCREMENT, src INT)")
        .unwrap();
    c.query_drop("INSERT INTO sw_t (src) VALUES (@@server_id)")
        .unwrap();
    assert_eq!(primary_of(&p), format!("127.0.0.1:{old}"));
    sync_replicas();

    // A switchover as a DBA (or orchestrator) does it: the old primary
    // read-only, the replica stops replicating and becomes writable.
    sql(old, "SET GLOBAL read_only = 1");
    sql(new, "STOP SLAVE");
    let switched = Instant::now();
    sql(new, "SET GLOBAL read_only = 0");
    // Writes keep coming while it happens; each runs where it is allowed.
    let mut rows_on_old_after = 0;
    let mut on_new = direct(new);
    loop {
        c.query_drop("INSERT INTO sw_t (src) VALUES (@@server_id)")
            .unwrap();
        // Where did it land? Ask the new primary directly (server 2 is
        // replica 1 in the lab), so the check does not race the routing.
        let n: Option<i64> = on_new
            .query_first("SELECT COUNT(*) FROM sw_t WHERE src = 2")
            .unwrap();
        if n.unwrap_or(0) > 0 {
            break;
        }
        rows_on_old_after += 1;
        assert!(
            switched.elapsed() < Duration::from_secs(2),
            "writes did not follow within 2 s"
        );
    }
    eprintln!(
        "writes followed the switchover after {:?} ({rows_on_old_after} writes before)",
        switched.elapsed()
    );
    assert_eq!(primary_of(&p), format!("127.0.0.1:{new}"));
    // No write went to the read-only old primary after the monitor saw it:
    // the app account may write there (SUPER), so count its inserts.
    let before = status_counter(old, "Com_insert");
    for _ in 0..50 {
        c.query_drop("INSERT INTO sw_t (src) VALUES (@@server_id)")
            .unwrap();
    }
    assert_eq!(
        status_counter(old, "Com_insert"),
        before,
        "a write went to the read-only old primary"
    );

    // Split brain: both writable. Writes wait primary_wait_ms and fail.
    sql(old, "SET GLOBAL read_only = 0");
    let t = Instant::now();
    while !primary_of(&p).is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "split brain not detected"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let t = Instant::now();
    let e = c
        .query_drop("INSERT INTO sw_t (src) VALUES (0)")
        .unwrap_err()
        .to_string();
    assert!(e.contains("9004") && e.contains("split brain"), "{e}");
    assert!(
        t.elapsed() >= Duration::from_millis(2500),
        "did not wait primary_wait_ms"
    );
    // Resolved: writes resume on the one writable server.
    sql(old, "SET GLOBAL read_only = 1");
    c.query_drop("INSERT INTO sw_t (src) VALUES (@@server_id)")
        .unwrap();
    assert_eq!(primary_of(&p), format!("127.0.0.1:{new}"));

    // Switch back while an account without SUPER writes without pause:
    // writes that reach the just-read-only server before the monitor's
    // next check are refused there (nothing runs) and sextant moves them
    // to the new primary. The client sees no error.
    let mut lim = mysql::Conn::new(
        mysql::Opts::from_url(&p.url("limited", "limitedpass", "sextant_test")).unwrap(),
    )
    .unwrap();
    let refused_before = status_counter(new, "Com_insert");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                lim.query_drop("INSERT INTO sw_t (src) VALUES (@@server_id)")
                    .unwrap_or_else(|e| panic!("write {n} failed during the switchover: {e}"));
                n += 1;
            }
            n
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    sql(new, "SET GLOBAL read_only = 1");
    sql(old, "SET GLOBAL read_only = 0");
    let t = Instant::now();
    while primary_of(&p) != format!("127.0.0.1:{old}") {
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "switch back not followed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let writes = writer.join().expect("no write failed");
    let tried_on_read_only = status_counter(new, "Com_insert") - refused_before;
    eprintln!(
        "{writes} writes across the switch back, no error; {tried_on_read_only} inserts reached the read-only server"
    );
    assert!(writes > 50);
    // The window was hit (a write between read_only = 1 and the monitor's
    // next check), so the test did exercise the retry.
    assert!(
        p.logs().contains("server answered read-only to a write"),
        "no write reached the read-only server before the monitor saw it"
    );
}
