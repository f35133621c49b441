//! Failures of real servers under load: a replica killed with SIGKILL while
//! sysbench reads through sextant. (Its own test binary: it kills and
//! restarts a lab server.)

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::time::{Duration, Instant};

/// Both tests kill and restart the same replica.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn replica_killed_under_sysbench_read_load() {
    // Server-side prepared statements (sysbench's default) and a borrow
    // per statement: the hardest case for moving on.
    replica_killed_under_load("", "--db-ps-mode=auto");
}

#[test]
fn replica_killed_under_pipelined_reads() {
    // Text protocol, reads of 16 sessions pipelined on shared connections:
    // every read queued on the dead replica's pipes runs again elsewhere.
    replica_killed_under_load("pipeline_depth = 8\n", "--db-ps-mode=disable");
}

fn replica_killed_under_load(group: &str, ps_mode: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lab = lab();
    let p = Setup {
        group: &format!("{group}[routing]\nhold_ms = 0\n"),
        ..Default::default()
    }
    .start();
    // (The monitor notices within an interval; reads in flight before that
    // are retried on another server.)
    sysbench_prepare(lab.primary, 2, 2000);
    sync_replicas();
    let victim = lab.replicas[0];
    p.wait_state(victim, "up", Duration::from_secs(5));

    // 16 threads of point selects through sextant for 8 s; the replica is
    // killed 2 s in. sysbench stops at the first error it does not ignore.
    let port = p.port;
    let ps_mode = ps_mode.to_string();
    let load = std::thread::spawn(move || {
        sysbench_cmd(port, 2, 2000)
            .args(["--threads=16", "--time=8"])
            .arg(ps_mode)
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
    if group.contains("pipeline_depth") {
        let pipelined = p.backends_sum("pipelined");
        assert!(pipelined > 1000, "only {pipelined} reads were pipelined");
    }
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
