//! Failures of real servers under load: a replica killed with SIGKILL while
//! sysbench reads through sextant. (Its own test binary: it kills and
//! restarts a lab server.)

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::time::{Duration, Instant};

#[test]
fn replica_killed_under_sysbench_read_load() {
    let lab = lab();
    let p = Proxy::start("", "[routing]\nhold_ms = 0\n");
    // (The monitor notices within an interval; reads in flight before that
    // are retried on another server.)
    sysbench_prepare(lab.primary, 2, 2000);
    sync_replicas();
    let victim = lab.replicas[0];
    p.wait_state(victim, "up", Duration::from_secs(5));

    // 16 threads of point selects through sextant for 8 s; the replica is
    // killed 2 s in. sysbench stops at the first error it does not ignore.
    let port = p.port;
    let load = std::thread::spawn(move || {
        sysbench_cmd(port, 2, 2000)
            .args(["--threads=16", "--time=8"])
            // Server-side prepared statements (sysbench's default) and a
            // borrow per statement: the hardest case for moving on.
            .arg("--db-ps-mode=auto")
            .args(["oltp_point_select", "run"])
            .output()
            .expect("sysbench")
    });
    std::thread::sleep(Duration::from_secs(2));
    let killed_at = Instant::now();
    kill_lab_server(1);
    let out = load.join().unwrap();
    let (text, errors) = sysbench_clean(&out, "a replica died", "ignored errors:");
    assert_eq!(errors, 0, "{text}");
    assert_eq!(
        p.state_of(victim),
        "down",
        "the killed replica should be out of rotation"
    );
    eprintln!(
        "replica killed {:?} ago; sysbench finished without errors",
        killed_at.elapsed()
    );

    // Restart it: it rejoins replication and the rotation.
    restart_lab_server(1);
    let took = p.wait_state(victim, "up", Duration::from_secs(30));
    eprintln!("restarted replica back in rotation after {took:?}");
    sync_replicas();
    let before = status_counter(victim, "Com_select");
    let mut c = p.conn();
    for _ in 0..200 {
        c.query_drop("SELECT 1").unwrap();
    }
    let after = status_counter(victim, "Com_select");
    assert!(
        after - before >= 50,
        "the restarted replica gets no reads: {}",
        after - before
    );
}
