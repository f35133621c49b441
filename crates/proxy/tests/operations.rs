//! Operating sextant while it serves: config reloads (SIGHUP and the admin
//! port's RELOAD CONFIG) under sysbench load, and a refused reload.

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::time::{Duration, Instant};

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn sighup(p: &Proxy) {
    // SAFETY: kill() with a pid this test started.
    let r = unsafe { libc::kill(p.pid() as i32, libc::SIGHUP) };
    assert_eq!(r, 0, "kill -HUP");
}

/// Waits until sextant's log holds `needle` `n` times.
fn wait_log(p: &Proxy, needle: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while p.logs().matches(needle).count() < n {
        assert!(
            Instant::now() < deadline,
            "sextant did not log {needle:?} ({n}x):\n{}",
            p.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A backend row of SHOW BACKENDS: (weight, connects) of the server at
/// `port`.
fn backend(p: &Proxy, port: u16) -> (u32, u64) {
    let rows: Vec<mysql::Row> = p.admin().query("SHOW BACKENDS").expect("SHOW BACKENDS");
    let addr = format!("127.0.0.1:{port}");
    let r = rows
        .iter()
        .find(|r| r.get::<String, _>("address").as_deref() == Some(&addr))
        .unwrap_or_else(|| panic!("{addr} not in SHOW BACKENDS"));
    let num = |c: &str| r.get::<String, _>(c).and_then(|v| v.parse().ok());
    (
        num("weight").expect("weight") as u32,
        num("connects").expect("connects"),
    )
}

/// sysbench through sextant for `secs` seconds, on connections opened at
/// the start: 6 threads of read-only transactions and 2 of single-row
/// updates (which cannot deadlock, so any error is sextant's). sysbench
/// stops at the first error (none is ignored).
fn load(port: u16, secs: u32) -> Vec<std::thread::JoinHandle<std::process::Output>> {
    [("oltp_read_only", 6), ("oltp_update_index", 2)]
        .into_iter()
        .map(|(workload, threads)| {
            std::thread::spawn(move || {
                sysbench_cmd(port, 2, 2000)
                    .arg(format!("--threads={threads}"))
                    .arg(format!("--time={secs}"))
                    .args(["--mysql-ignore-errors=none", workload, "run"])
                    .output()
                    .expect("sysbench")
            })
        })
        .collect()
}

#[test]
fn reloads_under_load_change_weights_users_and_groups_without_an_error() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lab = lab();
    let p = Setup {
        replica_weights: Some(vec![1, 1]),
        group: "[routing]\nhold_ms = 0\n",
        ..Default::default()
    }
    .start();
    sysbench_prepare(lab.primary, 2, 2000);
    sync_replicas();
    let (r1, r2) = (lab.replicas[0], lab.replicas[1]);
    p.wait_state(r2, "up", Duration::from_secs(5));
    let original = std::fs::read_to_string(&p.config).expect("config");

    let load = load(p.port, 10);
    std::thread::sleep(Duration::from_secs(2));
    let connects_before = backend(&p, r2).1;

    // 1. SIGHUP: the second replica's weight 1 -> 9, and a new user.
    let weighted = original.replace(
        &format!("{{ addr = \"127.0.0.1:{r2}\", weight = 1 }}"),
        &format!("{{ addr = \"127.0.0.1:{r2}\", weight = 9 }}"),
    );
    assert_ne!(weighted, original, "the config names the replica");
    let with_user = weighted.replace(
        "[[users]]\nname = \"other\"",
        "[[users]]\nname = \"newbie\"\npassword = \"newpass\"\nbackend_user = \"app\"\nbackend_password = \"apppass\"\n\n[[users]]\nname = \"other\"",
    );
    assert_ne!(with_user, weighted);
    std::fs::write(&p.config, &with_user).expect("write config");
    sighup(&p);
    wait_log(&p, "config reloaded", 1);
    let (weight, connects) = backend(&p, r2);
    assert_eq!(weight, 9, "SHOW BACKENDS shows the new weight");
    // A weight-only change keeps the group: its pools and counters stay.
    assert!(
        connects >= connects_before,
        "the pool was rebuilt ({connects} < {connects_before} connects)"
    );
    let mut c = mysql::Conn::new(
        mysql::Opts::from_url(&p.url("newbie", "newpass", "sextant_test")).unwrap(),
    )
    .expect("the new user logs in after the reload");
    let one: Option<i32> = c.query_first("SELECT 1").unwrap();
    assert_eq!(one, Some(1));
    drop(c);

    // 2. An invalid file: refused with check-config's explanation, over
    // the admin port; the running config stays (sextant serves, the new
    // user still logs in).
    std::fs::write(
        &p.config,
        with_user.replace(
            "[routing]\nhold_ms = 0",
            "[routing]\nhold_ms = 0\nno_such_key = 1",
        ),
    )
    .expect("write config");
    let err = p
        .admin()
        .query_drop("RELOAD CONFIG")
        .expect_err("an invalid config is refused");
    match &err {
        mysql::Error::MySqlError(e) => {
            assert_eq!(e.code, 9006, "{e:?}");
            assert!(
                e.message.contains("no_such_key") && e.message.contains("running config stays"),
                "the error says what is wrong: {}",
                e.message
            );
        }
        other => panic!("not a server error: {other:?}"),
    }
    let check = std::process::Command::new(env!("CARGO_BIN_EXE_sextant"))
        .arg("check-config")
        .arg(&p.config)
        .output()
        .expect("check-config");
    let check_err = String::from_utf8_lossy(&check.stderr);
    assert!(!check.status.success());
    assert!(
        check_err.contains("no_such_key"),
        "check-config says the same: {check_err}"
    );
    assert_eq!(backend(&p, r2).0, 9, "the running config stayed");

    // 3. RELOAD CONFIG with a change that rebuilds the group (pool size):
    // sessions opened before keep their connections to the end.
    std::fs::write(
        &p.config,
        with_user.replace(
            "[routing]\nhold_ms = 0",
            "pool_max = 40\n[routing]\nhold_ms = 0",
        ),
    )
    .expect("write config");
    p.admin()
        .query_drop("RELOAD CONFIG")
        .expect("a valid config is applied");
    wait_log(&p, "1 new or changed", 1);

    for out in load.into_iter().map(|l| l.join().unwrap()) {
        let (text, errors) = sysbench_clean(&out, "the config was reloaded", "ignored errors:");
        assert_eq!(errors, 0, "{text}");
    }

    // The weights hold in the rebuilt group: reads go 1:9.
    sync_replicas();
    let before = (
        status_counter(r1, "Com_select"),
        status_counter(r2, "Com_select"),
    );
    let mut c = p.conn();
    for i in 0..600 {
        let v: Option<i32> = c.query_first(format!("SELECT {i}")).unwrap();
        assert_eq!(v, Some(i));
    }
    let (a, b) = (
        status_counter(r1, "Com_select") - before.0,
        status_counter(r2, "Com_select") - before.1,
    );
    assert!(
        b > 4 * a && a + b >= 600,
        "reads went {a} : {b} to weights 1 : 9"
    );
    // SIGHUP no longer ends the process.
    assert!(!p.logs().contains("panicked"));
}
