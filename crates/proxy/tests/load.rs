//! Load through sextant: sysbench in both prepared-statement modes, and
//! 5,000 concurrent clients sharing 200 server connections per server.

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::process::Command;

fn sysbench(port: u16, args: &[&str]) -> String {
    let out = Command::new("sysbench")
        .args([
            "--db-driver=mysql",
            "--mysql-host=127.0.0.1",
            "--mysql-user=app",
            "--mysql-password=apppass",
        ])
        .args(["--mysql-db=sbtest", "--tables=4", "--table-size=10000"])
        .arg(format!("--mysql-port={port}"))
        .args(args)
        .output()
        .expect("sysbench (apt-get install sysbench)");
    assert_ok(&out, &format!("sysbench {args:?}"))
}

fn figure(out: &str, label: &str) -> u64 {
    out.lines()
        .find_map(|l| l.trim_start().strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {label:?} in sysbench output:\n{out}"))
}

#[test]
fn sysbench_oltp_64_threads_both_ps_modes() {
    let lab = lab();
    let p = Setup::default().start();
    sysbench(lab.primary, &["--threads=4", "oltp_read_write", "cleanup"]);
    sysbench(lab.primary, &["--threads=4", "oltp_read_write", "prepare"]);
    sync_replicas();
    for mode in ["disable", "auto"] {
        for workload in ["oltp_read_write", "oltp_point_select"] {
            let replica_selects: u64 = lab
                .replicas
                .iter()
                .map(|&r| status_counter(r, "Com_select"))
                .sum();
            let out = sysbench(
                p.port,
                &[
                    "--threads=64",
                    "--time=8",
                    &format!("--db-ps-mode={mode}"),
                    workload,
                    "run",
                ],
            );
            assert!(!out.contains("FATAL"), "{out}");
            let queries = figure(&out, "queries:");
            let errors = figure(&out, "ignored errors:");
            eprintln!("sysbench {workload} ps-mode={mode}: {queries} queries, {errors} ignored errors (deadlocks)");
            assert!(queries > 1000, "{out}");
            // sysbench ignores deadlocks only; a proxy fault would show as
            // a FATAL error and a non-zero exit above. Deadlocks on 4x10k
            // rows at 64 threads are rare: more than 1% means trouble.
            assert!(errors * 100 <= queries, "{out}");
            if workload == "oltp_point_select" {
                let after: u64 = lab
                    .replicas
                    .iter()
                    .map(|&r| status_counter(r, "Com_select"))
                    .sum();
                assert!(
                    after - replica_selects > queries / 2,
                    "point selects did not go to the replicas"
                );
            }
        }
    }
}

/// Resident memory of sextant and server connections in use while 5,000
/// clients are connected and each runs statements.
#[test]
fn five_thousand_clients_share_two_hundred_connections() {
    raise_test_fd_limit(12_000);
    let p = Setup {
        proxy: "max_connections = 6000",
        group: "pool_max = 200\n",
        ..Default::default()
    }
    .start();
    const THREADS: usize = 50;
    const PER_THREAD: usize = 100;
    let port = p.port;
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(THREADS + 1));
    let done = std::sync::Arc::new(std::sync::Barrier::new(THREADS + 1));
    let measured = std::sync::Arc::new(std::sync::Barrier::new(THREADS + 1));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let barrier = barrier.clone();
            let done = done.clone();
            let measured = measured.clone();
            std::thread::spawn(move || {
                let mut conns: Vec<Raw> = (0..PER_THREAD)
                    .map(|_| Raw::login(port, "app", "apppass", Some("sextant_test")))
                    .collect();
                barrier.wait();
                // Every connection runs statements while all are open:
                // reads, and writes to the primary.
                for round in 0..3 {
                    for (i, c) in conns.iter_mut().enumerate() {
                        let n = t * PER_THREAD + i;
                        if round == 1 {
                            c.query(&format!("DO {n}"));
                        } else {
                            c.query(&format!("SELECT {n}"));
                        }
                    }
                    for (i, c) in conns.iter_mut().enumerate() {
                        let n = t * PER_THREAD + i;
                        let resp = c.read_response();
                        if round == 1 {
                            assert_eq!(
                                resp[0][0],
                                0,
                                "DO failed: {:?}",
                                String::from_utf8_lossy(&resp[0])
                            );
                        } else {
                            let mut want = vec![n.to_string().len() as u8];
                            want.extend_from_slice(n.to_string().as_bytes());
                            assert_eq!(resp[3], want, "wrong answer for client {n}");
                        }
                    }
                }
                done.wait();
                // Keep every connection open until the main thread has
                // looked at sextant.
                measured.wait();
                conns.len()
            })
        })
        .collect();
    barrier.wait();
    done.wait();
    let rss_mib = p.rss_kib() as f64 / 1024.0;
    let mut admin = p.admin();
    let status: Vec<(String, String)> = admin.query("SHOW STATUS").unwrap();
    let clients: u64 = status
        .iter()
        .find(|(k, _)| k == "client_connections")
        .map(|(_, v)| v.parse().unwrap())
        .unwrap();
    let rows: Vec<mysql::Row> = admin.query("SHOW BACKENDS").unwrap();
    let mut opened = Vec::new();
    for r in &rows {
        let addr: String = r.get("address").unwrap();
        let open: u64 = r.get::<String, _>("conn_open").unwrap().parse().unwrap();
        let connects: u64 = r.get::<String, _>("connects").unwrap().parse().unwrap();
        assert!(
            open <= 200 && connects <= 200 + 10,
            "{addr}: {open} open, {connects} opened in all"
        );
        opened.push((addr, open));
    }
    eprintln!("5000 clients connected ({clients} counted): sextant RSS {rss_mib:.1} MiB; server connections open {opened:?}");
    measured.wait();
    assert!(clients >= 5000, "only {clients} clients connected");
    let total: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(total, THREADS * PER_THREAD);
}

fn raise_test_fd_limit(need: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain get/setrlimit on a local struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
    assert!(
        lim.rlim_cur >= need,
        "this test needs {need} file descriptors; the hard limit is {} (raise it with ulimit -Hn)",
        lim.rlim_cur
    );
}
