//! What the failover test binaries share: a lab running semi-sync whose
//! servers start read-only, sextant with failover = "auto" in front of
//! it, a load of numbered writes and plain reads, and what that load saw.

use super::*;
use mysql::prelude::Queryable;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const GROUP: &str = "topology = \"replication\"\nfailover = \"auto\"\nsemi_sync = true\n\
replication_user = \"repl\"\nreplication_password = \"replpass\"\n[routing]\nhold_ms = 0\n";

pub fn groups_row(p: &Proxy) -> HashMap<String, String> {
    let rows: Vec<mysql::Row> = p.admin().query("SHOW GROUPS").expect("SHOW GROUPS");
    let r = rows.first().expect("one group");
    r.columns_ref()
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let v: Option<String> = r.get(i).flatten();
            (c.name_str().to_string(), v.unwrap_or_default())
        })
        .collect()
}

pub fn backend_state(p: &Proxy, addr: &str) -> (String, Option<String>) {
    let rows: Vec<mysql::Row> = p.admin().query("SHOW BACKENDS").expect("SHOW BACKENDS");
    rows.iter()
        .find(|r| r.get::<String, _>("address").as_deref() == Some(addr))
        .map(|r| {
            (
                r.get::<String, _>("role").unwrap_or_default(),
                r.get::<Option<String>, _>("member_state").flatten(),
            )
        })
        .unwrap_or_default()
}

pub fn app_direct(port: u16) -> mysql::Conn {
    mysql::Conn::new(
        mysql::Opts::from_url(&format!(
            "mysql://app:apppass@127.0.0.1:{port}/sextant_test?prefer_socket=false"
        ))
        .expect("url"),
    )
    .expect("app connection to a lab server")
}

pub fn count(port: u16) -> (u64, BTreeSet<u64>) {
    let tokens: Vec<u64> = direct(port)
        .query("SELECT token FROM fo_ledger")
        .expect("read the ledger");
    (tokens.len() as u64, tokens.into_iter().collect())
}

/// What the load saw.
#[derive(Default)]
pub struct Seen {
    pub acked: Vec<u64>,
    /// Writes whose answer said their outcome is unknown (9003), by token.
    pub unknown: Vec<u64>,
    /// Any other write error: (code, message).
    pub write_errors: Vec<(u16, String)>,
    pub read_errors: Vec<String>,
    /// Start and completion times of successful writes.
    pub write_done: Vec<(Instant, Instant)>,
    /// Writes that took over 500 ms and succeeded: they waited for the
    /// new primary.
    pub waited: u64,
    pub ready_failures: Vec<String>,
}

pub fn error_code(e: &mysql::Error) -> (u16, String) {
    match e {
        mysql::Error::MySqlError(m) => (m.code, m.message.clone()),
        other => (0, other.to_string()),
    }
}

/// Sets the flag when dropped: a failed assertion in a scope that runs the
/// load stops the load, rather than waiting for it forever.
pub struct StopOnDrop<'a>(pub &'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs writers and readers through sextant until `stop`.
pub fn load(p: &Proxy, trial: u64, stop: &AtomicBool, seen: &Mutex<Seen>) {
    std::thread::scope(|s| {
        for w in 0..4u64 {
            s.spawn(move || {
                let mut c = p.conn();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let token = w * 1_000_000_000 + trial * 1_000_000 + n;
                    let t = Instant::now();
                    let r = c.exec_drop(
                        "INSERT INTO fo_ledger (token, writer) VALUES (?, ?)",
                        (token, w),
                    );
                    let mut s = seen.lock().unwrap();
                    match r {
                        Ok(()) => {
                            s.acked.push(token);
                            s.write_done.push((t, Instant::now()));
                            if t.elapsed() > Duration::from_millis(500) {
                                s.waited += 1;
                            }
                        }
                        Err(e) => {
                            let (code, msg) = error_code(&e);
                            if code == 9003 {
                                s.unknown.push(token);
                            } else {
                                s.write_errors.push((code, msg));
                            }
                            drop(s);
                            c = p.conn();
                        }
                    }
                }
            });
        }
        for _ in 0..2 {
            s.spawn(|| {
                let mut c = p.conn();
                while !stop.load(Ordering::Relaxed) {
                    if let Err(e) = c.query_drop("SELECT COUNT(*) FROM fo_read") {
                        seen.lock().unwrap().read_errors.push(e.to_string());
                        c = p.conn();
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            });
        }
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let (code, body) = p.http_get("/readyz");
                if code != 200 {
                    seen.lock()
                        .unwrap()
                        .ready_failures
                        .push(format!("{code} {body}"));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
    });
}

/// Kills lab server `i` with SIGKILL; the moment it is gone (a signal is
/// delivered, and the process dies, a little later: writes finishing in
/// between are the old primary's).
pub fn kill_and_reap(dir: &std::path::Path, i: usize) -> Instant {
    let pid = std::fs::read_to_string(dir.join(format!("s{i}.pid"))).expect("pid file");
    let proc_dir = format!("/proc/{}", pid.trim());
    kill_server_in(dir, i);
    while std::path::Path::new(&proc_dir).exists()
        && !std::fs::read_to_string(format!("{proc_dir}/stat")).is_ok_and(|s| s.contains(") Z "))
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    Instant::now()
}

/// The lab of this binary: semi-sync, every server read-only at start but
/// the first one sextant finds writable.
pub fn failover_lab() -> (&'static Lab, [u16; 3]) {
    let _ = LAB_ARGS.set(&["--semi-sync", "--server-option", "read-only=1"]);
    let lab = lab();
    let ports = [lab.primary, lab.replicas[0], lab.replicas[1]];
    let writable = ports.iter().any(|p| {
        direct(*p)
            .query_first::<i64, _>("SELECT @@read_only")
            .unwrap()
            == Some(0)
    });
    if !writable {
        direct(ports[0])
            .query_drop("SET GLOBAL read_only = 0")
            .unwrap();
    }
    (lab, ports)
}

/// Waits until every server has what the writable one has.
pub fn sync_with(ports: &[u16]) {
    let primary = writable(ports);
    let pos: String = direct(primary)
        .query_first("SELECT @@gtid_binlog_pos")
        .unwrap()
        .unwrap_or_default();
    for p in ports.iter().filter(|p| **p != primary) {
        let w: Option<i64> = direct(*p)
            .exec_first("SELECT MASTER_GTID_WAIT(?, 30)", (pos.clone(),))
            .unwrap();
        assert_eq!(w, Some(0), "{p} did not catch up with {primary}");
    }
}

/// Sextant with failover on the lab, the load's tables there, and its
/// failover task's first round done.
pub fn sextant_under_load_tables() -> Proxy {
    let p = Setup {
        group: GROUP,
        http: true,
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    c.query_drop(
        "CREATE TABLE IF NOT EXISTS fo_ledger (token BIGINT PRIMARY KEY, writer INT NOT NULL)",
    )
    .unwrap();
    c.query_drop("CREATE TABLE IF NOT EXISTS fo_read (id INT PRIMARY KEY, v INT)")
        .unwrap();
    c.query_drop("INSERT IGNORE INTO fo_read VALUES (1, 1), (2, 2)")
        .unwrap();
    wait_healthy(&p);
    p
}

/// Waits until the failover task's state is healthy (its first round has
/// read the group's term), 10 s at most.
pub fn wait_healthy(p: &Proxy) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while groups_row(p)["ha_state"] != "healthy" {
        assert!(Instant::now() < deadline, "{:?}", groups_row(p));
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The lab server that is writable now.
pub fn writable(ports: &[u16]) -> u16 {
    *ports
        .iter()
        .find(|p| {
            direct(**p)
                .query_first::<i64, _>("SELECT @@read_only")
                .unwrap()
                == Some(0)
        })
        .expect("a writable server")
}

/// Rebuilds lab server `old` (an old primary left out as diverged) from
/// `new`, as an operator would: its binary log reset, the test databases
/// loaded from a consistent dump of `new` without logging them, its
/// replication position set to the dump's. Sextant's next round finds it
/// holding nothing the new primary lacks and rejoins it.
pub fn rebuild_from(old: u16, new: u16) {
    use std::process::{Command, Stdio};
    let dump = Command::new("mariadb-dump")
        .args([
            "-h127.0.0.1",
            &format!("-P{new}"),
            "-udba",
            "-pdbapass",
            "--single-transaction",
            "--gtid",
            "--master-data=2",
            "--databases",
            "sextant_test",
            "sextant",
        ])
        .output()
        .expect("mariadb-dump");
    assert!(
        dump.status.success(),
        "{}",
        String::from_utf8_lossy(&dump.stderr)
    );
    let text = String::from_utf8_lossy(&dump.stdout).to_string();
    let gtid = text
        .split("gtid_slave_pos='")
        .nth(1)
        .and_then(|t| t.split('\'').next())
        .expect("the dump's GTID position")
        .to_string();
    // Its binary log keeps the transactions that made it diverged until
    // the very end, so that sextant (which rejoins a server holding
    // nothing past the promotion) leaves it alone while it is rebuilt;
    // once its log is reset, its position is the dump's.
    direct(old)
        .query_drop(
            "STOP SLAVE; RESET SLAVE ALL; SET sql_log_bin = 0; \
             DROP DATABASE IF EXISTS sextant_test; DROP DATABASE IF EXISTS sextant",
        )
        .unwrap();
    let mut load = Command::new("mariadb")
        .args([
            "-h127.0.0.1",
            &format!("-P{old}"),
            "-udba",
            "-pdbapass",
            "--init-command=SET sql_log_bin = 0",
        ])
        .stdin(Stdio::piped())
        .spawn()
        .expect("mariadb");
    {
        use std::io::Write;
        let mut stdin = load.stdin.take().expect("stdin");
        stdin.write_all(&dump.stdout).expect("load the dump");
    }
    assert!(load.wait().expect("mariadb").success());
    let mut d = direct(old);
    d.exec_drop("SET GLOBAL gtid_slave_pos = ?", (gtid,))
        .unwrap();
    d.query_drop("RESET MASTER").unwrap();
}

/// Waits (30 s at most) until sextant has `addr` back as a replica with no
/// member state.
pub fn wait_rejoined(p: &Proxy, addr: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while backend_state(p, addr) != ("replica".to_string(), None) {
        assert!(
            Instant::now() < deadline,
            "{addr} was not rejoined: {:?}\n{}",
            backend_state(p, addr),
            p.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits (30 s from `from` at most) until SHOW GROUPS shows term `term`
/// and a primary; that row. `what` names the failover awaited.
pub fn wait_term(p: &Proxy, term: u64, from: Instant, what: &str) -> HashMap<String, String> {
    let deadline = from + Duration::from_secs(30);
    loop {
        let g = groups_row(p);
        if g["term"] == term.to_string() && !g["primary"].is_empty() {
            return g;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within 30 s: {g:?}\n{}",
            p.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Asserts that every server of `ports` but `primary` is read-only.
pub fn assert_read_only_but(ports: &[u16], primary: u16, why: &str) {
    for port in ports.iter().filter(|p| **p != primary) {
        let ro: i64 = direct(*port)
            .query_first("SELECT @@read_only")
            .unwrap()
            .unwrap();
        assert_eq!(ro, 1, "{port} was made writable {why}");
    }
}
