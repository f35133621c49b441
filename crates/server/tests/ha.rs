//! Failures of real servers under load: a replica killed with SIGKILL while
//! sysbench reads through sextant. (Its own test binary: it kills and
//! restarts a lab server.)

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
// The restarted server belongs to the lab, which stops it by its pid file
// when the test binary exits; the test does not wait for it.
#[allow(clippy::zombie_processes)]
fn replica_killed_under_sysbench_read_load() {
    let lab = lab();
    let p = Proxy::start("", "[routing]\nhold_ms = 0\n");
    // (The monitor notices within an interval; reads in flight before that
    // are retried on another server.)
    assert_ok(
        &sysbench_cmd(lab.primary, 2, 2000)
            .args(["oltp_read_only", "prepare"])
            .output()
            .expect("sysbench"),
        "prepare",
    );
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
    let pidfile = lab.dir.join("s1.pid");
    let pid = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .to_string();
    let killed_at = Instant::now();
    assert!(Command::new("kill")
        .args(["-9", &pid])
        .status()
        .unwrap()
        .success());
    let out = load.join().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && !text.contains("FATAL"),
        "sysbench saw an error when a replica died:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let errors: u64 = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("ignored errors:"))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX);
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
    let _ = std::fs::remove_file(&pidfile);
    Command::new("mariadbd")
        .arg(format!(
            "--defaults-file={}",
            lab.dir.join("s1.cnf").display()
        ))
        .arg("--user=root")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("restart mariadbd");
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
