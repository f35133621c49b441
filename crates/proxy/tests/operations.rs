//! Operating sextant while it serves: config reloads (SIGHUP and the admin
//! port's RELOAD CONFIG) under sysbench load, a refused reload, and
//! graceful shutdown (SIGTERM) under load.

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::time::{Duration, Instant};

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn sighup(p: &Proxy) {
    p.signal(libc::SIGHUP);
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

/// One client running transfers-like transactions until an error: every
/// COMMIT it sent and what came back, and the error that ended it with
/// the statement that got it.
struct TrxClient {
    commits_ok: u64,
    commit_errors: Vec<String>,
    /// (statement, errno or None for a lost connection)
    ended_by: Option<(String, Option<u16>)>,
}

fn trx_client(url: String, id: u32) -> TrxClient {
    let mut r = TrxClient {
        commits_ok: 0,
        commit_errors: Vec::new(),
        ended_by: None,
    };
    let mut c = mysql::Conn::new(mysql::Opts::from_url(&url).unwrap()).expect("connect");
    let code = |e: &mysql::Error| match e {
        mysql::Error::MySqlError(e) => Some(e.code),
        _ => None,
    };
    for n in 0u64.. {
        let steps = [
            "BEGIN".to_string(),
            format!("UPDATE shutdown_t SET n = n + 1 WHERE id = {id}"),
            format!("SELECT n FROM shutdown_t WHERE id = {id}"),
            "COMMIT".to_string(),
        ];
        for (i, sql) in steps.iter().enumerate() {
            if let Err(e) = c.query_drop(sql) {
                if i == 3 {
                    r.commit_errors.push(format!("{e}"));
                }
                r.ended_by = Some((sql.clone(), code(&e)));
                return r;
            }
        }
        r.commits_ok += 1;
        if n > 1_000_000 {
            break;
        }
    }
    r
}

#[test]
fn sigterm_lets_transactions_finish_and_tells_idle_clients() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lab = lab();
    let mut p = Setup {
        proxy: "shutdown_timeout_ms = 5000",
        ..Default::default()
    }
    .start();
    let mut d = direct(lab.primary);
    d.query_drop("DROP TABLE IF EXISTS sextant_test.shutdown_t")
        .unwrap();
    d.query_drop("CREATE TABLE sextant_test.shutdown_t (id INT PRIMARY KEY, n INT NOT NULL)")
        .unwrap();
    d.query_drop(
        "INSERT INTO sextant_test.shutdown_t VALUES (1,0),(2,0),(3,0),(4,0),(5,0),(6,0),(7,0),(8,0),(9,0)",
    )
    .unwrap();

    // An idle client, logged in before.
    let mut idle = Raw::login(p.port, "app", "apppass", Some("sextant_test"));
    // A client in a transaction when the signal comes, committing after.
    let mut open_trx = p.conn();
    open_trx.query_drop("BEGIN").unwrap();
    open_trx
        .query_drop("UPDATE shutdown_t SET n = n + 100 WHERE id = 9")
        .unwrap();
    // Eight clients running transactions back to back.
    let url = p.url("app", "apppass", "sextant_test");
    let busy: Vec<_> = (1..=8)
        .map(|id| {
            let url = url.clone();
            std::thread::spawn(move || trx_client(url, id))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let sent_at = Instant::now();
    p.signal(libc::SIGTERM);

    // The idle client is told: error 1053, unasked (sequence 0).
    let (seq, packet) = idle.read().expect("an error packet for the idle client");
    let (code, msg) = err_of(&packet);
    assert_eq!((seq, code), (0, 1053), "{msg}");
    assert!(idle.read().is_none(), "then the connection closes");
    eprintln!("idle client told after {:?}: {msg}", sent_at.elapsed());

    // New clients are refused: the listener is closed.
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", p.port)).is_err(),
        "sextant still accepts connections after SIGTERM"
    );

    // The open transaction finishes: its COMMIT succeeds, and its next
    // statement gets 1053.
    open_trx
        .query_drop("UPDATE shutdown_t SET n = n + 1 WHERE id = 9")
        .expect("a statement of an open transaction runs");
    open_trx
        .query_drop("COMMIT")
        .expect("the open transaction commits");
    match open_trx.query_drop("SELECT 1") {
        Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1053, "{e:?}"),
        other => panic!("after its transaction the session ends with 1053: {other:?}"),
    }

    let mut committed = 0;
    for b in busy {
        let r = b.join().expect("a client thread");
        assert!(
            r.commit_errors.is_empty(),
            "a COMMIT failed: {:?}",
            r.commit_errors
        );
        let (sql, code) = r.ended_by.expect("the client was ended");
        assert_eq!(
            (sql.as_str(), code),
            ("BEGIN", Some(1053)),
            "a client was ended outside a transaction, with 1053"
        );
        committed += r.commits_ok;
    }
    let st = p
        .exit_status(Duration::from_secs(6))
        .expect("sextant exits once its sessions ended");
    assert!(st.success(), "exit status {st}");
    let logs = p.logs();
    assert!(logs.contains("SIGTERM: shutting down"), "{logs}");
    assert!(
        logs.contains("every session ended: sextant stopped"),
        "{logs}"
    );
    // Every COMMIT answered OK is in the table, and nothing else.
    let total: Option<i64> = d
        .query_first("SELECT SUM(n) FROM sextant_test.shutdown_t WHERE id <= 8")
        .unwrap();
    assert_eq!(
        total,
        Some(committed as i64),
        "commits answered OK = rows changed"
    );
    let nine: Option<i64> = d
        .query_first("SELECT n FROM sextant_test.shutdown_t WHERE id = 9")
        .unwrap();
    assert_eq!(nine, Some(101));
    eprintln!(
        "{committed} transactions committed; sextant exited 0 after {:?}",
        sent_at.elapsed()
    );
}

#[test]
fn sigterm_under_sysbench_fails_no_commit() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lab = lab();
    let mut p = Setup::default().start();
    sysbench_prepare(lab.primary, 2, 2000);
    let port = p.port;
    let load = std::thread::spawn(move || {
        sysbench_cmd(port, 2, 2000)
            .args([
                "--threads=8",
                "--time=30",
                // (Deadlocks between its own threads are sysbench's: they
                // roll back and retry.)
                "--mysql-ignore-errors=1213,1205",
                "oltp_read_write",
                "run",
            ])
            .output()
            .expect("sysbench")
    });
    std::thread::sleep(Duration::from_secs(3));
    p.signal(libc::SIGTERM);
    let out = load.join().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // sysbench stops at the first error: a thread told 1053 between two
    // transactions. No error may name a COMMIT or another statement of
    // a transaction, nor be a lost connection (2013).
    let errors: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("returned error"))
        .collect();
    assert!(!errors.is_empty(), "sysbench saw no error:\n{text}");
    for e in &errors {
        assert!(
            e.contains("error 1053") && e.contains("for query 'BEGIN'"),
            "a thread failed other than at BEGIN with 1053: {e}\n{text}"
        );
    }
    let st = p
        .exit_status(Duration::from_secs(10))
        .expect("sextant exits");
    assert!(st.success(), "exit status {st}");
}

#[test]
fn logs_have_no_colours_no_passwords_and_a_slow_statement_log() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let p = Setup {
        group: "[log]\nslow_query_ms = 200\n",
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    let v: Option<(i32, String)> = c
        .query_first("SELECT SLEEP(0.3), 'topsecret-literal'")
        .unwrap();
    assert_eq!(v.map(|v| v.0), Some(0));
    c.query_drop("SELECT 'fast-literal'").unwrap();
    let stmt = c.prep("SELECT SLEEP(?), ?").unwrap();
    let _: Vec<(i32, String)> = c.exec(&stmt, (0.25, "prepared-secret")).unwrap();
    // A failed login, an admin login and commands, a reload.
    assert!(mysql::Conn::new(
        mysql::Opts::from_url(&p.url("app", "wrongpass-xyz", "sextant_test")).unwrap()
    )
    .is_err());
    let mut admin = p.admin();
    admin.query_drop("RELOAD CONFIG").unwrap();
    let _: Vec<mysql::Row> = admin.query("SHOW BACKENDS").unwrap();
    std::thread::sleep(Duration::from_millis(200));

    let logs = p.logs();
    assert!(
        !logs.contains('\x1b'),
        "colour codes in a log file:\n{logs}"
    );
    for secret in [
        "apppass",
        "adminpass",
        "otherpass",
        "wrongpass",
        "topsecret",
        "prepared-secret",
    ] {
        assert!(!logs.contains(secret), "{secret:?} in the log:\n{logs}");
    }
    let slow: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("slow statement"))
        .collect();
    assert_eq!(slow.len(), 2, "two slow statements:\n{logs}");
    assert!(
        slow[0].contains("sextant::slow") && slow[0].contains("slow statement: SELECT SLEEP(?), ?")
    );
    assert!(
        slow[0].contains("user=\"app\"") && slow[0].contains("db=\"sextant_test\""),
        "{}",
        slow[0]
    );
    assert!(
        slow[1].contains("prepared=true") && slow[1].contains("SELECT SLEEP(?), ?"),
        "{}",
        slow[1]
    );
    assert!(!logs.contains("fast"), "a fast statement in the slow log");
    assert!(logs.contains("admin login"), "{logs}");
    assert!(logs.contains("admin command: RELOAD CONFIG"), "{logs}");
    assert!(logs.contains("config reloaded"), "{logs}");
    assert!(
        !logs.contains("admin command: SHOW"),
        "reads are not logged as changes"
    );
}

#[test]
fn json_logs_and_levels_per_module_from_the_config() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let p = Setup {
        group: "[log]\nformat = \"json\"\nlevel = \"warn,sextant_proxy::start=info\"\n",
        env: vec![("RUST_LOG", String::new())],
        ..Default::default()
    }
    .start();
    drop(p.conn());
    std::thread::sleep(Duration::from_millis(300));
    let out = std::fs::read_to_string(&p.log).unwrap();
    let mut messages = Vec::new();
    for line in out.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        let level = v["level"].as_str().expect("a level").to_string();
        let target = v["target"].as_str().expect("a target").to_string();
        let msg = v["fields"]["message"]
            .as_str()
            .expect("a message")
            .to_string();
        messages.push((level, target, msg));
    }
    assert!(
        messages.iter().any(|(l, t, m)| l == "INFO"
            && t == "sextant_proxy::start"
            && m.contains("listening on")),
        "{out}"
    );
    // Other modules log warnings only: the monitor's info line is not there.
    assert!(
        !messages
            .iter()
            .any(|(l, t, _)| l == "INFO" && t != "sextant_proxy::start"),
        "{out}"
    );

    // A reload changes the level: the session's debug events appear.
    let text = std::fs::read_to_string(&p.config).unwrap().replace(
        "level = \"warn,sextant_proxy::start=info\"",
        "level = \"warn,sextant_proxy::start=info,sextant_proxy::session=debug,sextant_proxy::reload=info\"",
    );
    std::fs::write(&p.config, text).unwrap();
    p.signal(libc::SIGHUP);
    wait_log(&p, "config reloaded", 1);
    drop(p.conn());
    wait_log(&p, "client logged in", 1);
}

#[test]
fn passwords_as_native_hashes_environment_variables_and_files() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lab = lab();
    let hash: Option<String> = direct(lab.primary)
        .query_first("SELECT PASSWORD('hashed-pass')")
        .unwrap();
    let hash = hash.expect("a hash");
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("secrets");
    std::fs::create_dir_all(&dir).unwrap();
    let admin_file = dir.join("admin-password");
    std::fs::write(&admin_file, "admin-from-file\n").unwrap();
    for listener_plugin in ["mysql_native_password", "caching_sha2_password"] {
        let p = Setup {
            proxy: &format!("auth_plugin = \"{listener_plugin}\"\nsha2_full_auth = \"never\""),
            users: &format!(
                "[[users]]\nname = \"hashed\"\npassword = \"{hash}\"\nbackend_user = \"app\"\nbackend_password = {{ env = \"SEXTANT_TEST_BACKEND_PW\" }}\n"
            ),
            env: vec![("SEXTANT_TEST_BACKEND_PW", "apppass".to_string())],
            ..Default::default()
        }
        .start();
        let cfg = std::fs::read_to_string(&p.config).unwrap().replace(
            "password = \"adminpass\"",
            &format!(
                "password = {{ file = {:?} }}",
                admin_file.display().to_string()
            ),
        );
        std::fs::write(&p.config, cfg).unwrap();
        let url = |pw: &str| p.url("hashed", pw, "sextant_test");
        let mut c = mysql::Conn::new(mysql::Opts::from_url(&url("hashed-pass")).unwrap())
            .unwrap_or_else(|e| panic!("{listener_plugin}: login by hash: {e}"));
        let who: Option<String> = c.query_first("SELECT CURRENT_USER()").unwrap();
        assert!(
            who.unwrap().starts_with("app@"),
            "the backend account from the environment"
        );
        match mysql::Conn::new(mysql::Opts::from_url(&url("wrong-pass")).unwrap()) {
            Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1045),
            other => panic!("a wrong password is refused: {:?}", other.map(|_| ())),
        }
        // The admin password from a file: a reload reports that [admin]
        // changes at a restart; after one, the file's password is it.
        p.admin().query_drop("RELOAD CONFIG").unwrap();
        assert!(p
            .logs()
            .contains("[admin] changed but take(s) effect only at a restart"));
        let mut p = p;
        p.restart(&[("SEXTANT_TEST_BACKEND_PW", "apppass")]);
        p.admin_with("admin-from-file")
            .expect("the admin password from the file");
        assert!(
            p.admin_with("adminpass").is_err(),
            "the old admin password still works"
        );
        assert!(!p.logs().contains("hashed-pass") && !p.logs().contains("admin-from-file"));
    }
}

/// `text` parsed by Prometheus's own Python parser (a ValueError on any
/// line that is not valid exposition): every sample as
/// (name, labels, value).
fn prometheus_samples(
    text: &str,
) -> Vec<(String, std::collections::BTreeMap<String, String>, f64)> {
    use std::io::Write;
    let script = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for fam in text_string_to_metric_families(sys.stdin.read()):
    for s in fam.samples:
        out.append([s.name, s.labels, s.value])
print(json.dumps(out))
"#;
    let mut child = std::process::Command::new("/usr/bin/python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 (scripts/deps installs python3-prometheus-client)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "not valid Prometheus exposition: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Vec<(String, std::collections::BTreeMap<String, String>, f64)> =
        serde_json::from_slice(&out.stdout).expect("json");
    v
}

fn server_statements(p: &Proxy) -> std::collections::HashMap<String, f64> {
    let (code, text) = p.http_get("/metrics");
    assert_eq!(code, 200);
    prometheus_samples(&text)
        .into_iter()
        .filter(|(n, _, _)| n == "sextant_server_statements_total")
        .map(|(_, l, v)| (l["server"].clone(), v))
        .collect()
}

fn com_select(c: &mut mysql::Conn) -> u64 {
    let row: Option<(String, String)> = c
        .query_first("SHOW GLOBAL STATUS LIKE 'Com_select'")
        .unwrap();
    row.and_then(|(_, v)| v.parse().ok()).expect("Com_select")
}

#[test]
fn metrics_are_valid_prometheus_and_agree_with_the_servers() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lab = lab();
    // The monitor checks once at start, then not for a minute: the
    // replicas' Com_select then counts only what sextant relayed.
    let p = Setup {
        http: true,
        group: "[routing]\nhold_ms = 0\n[monitor]\ninterval_ms = 60000\n",
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    for i in 0..50 {
        let _: Option<i32> = c.query_first(format!("SELECT {i}")).unwrap();
    }
    // One open connection per replica (its own login counted before).
    let mut direct: Vec<(u16, mysql::Conn)> = lab
        .replicas
        .iter()
        .map(|&r| (r, common::direct(r)))
        .collect();
    let before_servers: Vec<u64> = direct.iter_mut().map(|(_, d)| com_select(d)).collect();
    let before = server_statements(&p);
    for i in 0..400 {
        let v: Option<i32> = c.query_first(format!("SELECT {i}")).unwrap();
        assert_eq!(v, Some(i));
    }
    let after = server_statements(&p);
    let mut total = 0.0;
    for ((port, d), b) in direct.iter_mut().zip(before_servers) {
        let server_delta = com_select(d) - b;
        let key = format!("127.0.0.1:{port}");
        let ours = after[&key] - before[&key];
        total += ours;
        assert_eq!(
            ours as u64, server_delta,
            "{key}: sextant counted {ours} statements, the server's Com_select grew by {server_delta}"
        );
    }
    assert_eq!(total, 400.0, "the reads went to the replicas");

    // Traffic: kinds, routing rules, sextant's own errors, bytes.
    assert!(mysql::Conn::new(
        mysql::Opts::from_url(&p.url("app", "wrong", "sextant_test")).unwrap()
    )
    .is_err());
    // The rest of the exposition: histograms, pools, health.
    let (_, text) = p.http_get("/metrics");
    let samples = prometheus_samples(&text);
    let find = |name: &'static str| samples.iter().filter(move |(n, _, _)| n == name);
    assert!(find("sextant_server_statement_duration_seconds_bucket")
        .any(|(_, l, v)| l["le"] == "+Inf" && *v >= 400.0 / 2.0));
    let value = |name: &'static str, label: &str, v: &str| -> f64 {
        find(name)
            .find(|(_, l, _)| l.get(label).map(String::as_str) == Some(v))
            .map(|(_, _, x)| *x)
            .unwrap_or_else(|| panic!("no {name}{{{label}={v}}}"))
    };
    assert!(value("sextant_statements_total", "kind", "read") >= 450.0);
    assert!(value("sextant_routing_decisions_total", "rule", "read") >= 450.0);
    assert_eq!(value("sextant_errors_total", "code", "1045"), 1.0);
    assert!(value("sextant_user_statements_total", "user", "app") >= 450.0);
    assert!(value("sextant_client_bytes_total", "direction", "received") > 400.0 * 10.0);
    assert!(value("sextant_client_bytes_total", "direction", "sent") > 400.0 * 20.0);
    assert_eq!(find("sextant_server_up").count(), 3);
    assert!(find("sextant_server_up").all(|(_, _, v)| *v == 1.0));
    assert!(find("sextant_pool_connections").any(|(_, l, _)| l["state"] == "idle"));
    assert!(find("sextant_client_connections").any(|(_, _, v)| *v >= 1.0));
    // The Grafana dashboard asks only for metrics sextant exposes.
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("packaging/grafana-dashboard.json")).unwrap(),
    )
    .expect("the dashboard is JSON");
    let families: std::collections::HashSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let mut asked = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            for (i, _) in expr.match_indices("sextant_") {
                let name: String = expr[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let base = name.strip_suffix("_bucket").unwrap_or(&name);
                assert!(
                    families.contains(base),
                    "the dashboard asks for {name}, which /metrics lacks"
                );
                asked += 1;
            }
        }
    }
    assert!(asked >= 10);
    // SHOW STATS reads the same figures.
    let rows: Vec<(String, String, String)> = p.admin().query("SHOW STATS").unwrap();
    assert!(rows
        .iter()
        .any(|(m, l, _)| m == "sextant_server_statements_total" && l.contains("role=replica")));
    // SHOW BACKENDS: statements, in flight, errors, applied GTID.
    let rows: Vec<mysql::Row> = p.admin().query("SHOW BACKENDS").unwrap();
    for r in &rows {
        for col in [
            "statements_per_s",
            "statements",
            "in_flight",
            "errors",
            "applied_gtid",
        ] {
            assert!(
                r.columns_ref().iter().any(|c| c.name_str() == col),
                "no {col}"
            );
        }
    }
}

#[test]
fn health_readiness_and_the_json_api() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lab = lab();
    let p = Setup {
        http: true,
        ..Default::default()
    }
    .start();
    assert_eq!(p.http_get("/healthz"), (200, "ok\n".into()));
    assert_eq!(p.http_get("/readyz").0, 200);
    let primary = format!("127.0.0.1:{}", lab.primary);
    p.admin()
        .query_drop(format!("SET MAINTENANCE ON '{primary}'"))
        .unwrap();
    // A group without a primary: the instance still serves (reads, other
    // groups), and says so.
    let (code, body) = p.http_get("/readyz");
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains("no reachable primary in group(s) main"),
        "{body}"
    );
    // No server at all: it cannot serve.
    let replicas: Vec<String> = lab
        .replicas
        .iter()
        .map(|r| format!("127.0.0.1:{r}"))
        .collect();
    for r in &replicas {
        p.admin()
            .query_drop(format!("SET MAINTENANCE ON '{r}'"))
            .unwrap();
    }
    let (code, body) = p.http_get("/readyz");
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("no server of any group"), "{body}");
    for a in replicas.iter().chain([&primary]) {
        p.admin()
            .query_drop(format!("SET MAINTENANCE OFF '{a}'"))
            .unwrap();
    }
    assert_eq!(p.http_get("/readyz"), (200, "ready\n".into()));
    let _c = p.conn();
    let (code, body) = p.http_get("/api/backends");
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let addrs: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["address"].as_str().unwrap())
        .collect();
    assert!(addrs.contains(&primary.as_str()), "{body}");
    assert_eq!(addrs.len(), 3);
    let (_, body) = p.http_get("/api/sessions");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 1, "one session: {body}");
    // Server thread ids stay on the admin port, which asks a password.
    assert!(!body.contains("server_thread"), "{body}");
    assert_eq!(p.http_get("/nope").0, 404);
    let (_, page) = p.http_get("/");
    assert!(
        page.contains("<title>sextant status</title>")
            && !page.contains("http://")
            && !page.contains("https://"),
        "the status page is self-contained"
    );
}

/// Headless Chromium (Debian's package) loads the status page: it lists
/// the lab's servers, and its numbers move under load. Leaves a
/// screenshot in target/ (docs/status-page.png is one).
#[test]
fn status_page_in_headless_chromium() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lab = lab();
    let p = Setup {
        http: true,
        group: "[routing]\nhold_ms = 0\n",
        ..Default::default()
    }
    .start();
    let url = format!("http://127.0.0.1:{}/", p.http_port.unwrap());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load: Vec<_> = (0..4)
        .map(|_| {
            let (url, stop) = (p.url("app", "apppass", "sextant_test"), stop.clone());
            std::thread::spawn(move || {
                let mut c = mysql::Conn::new(mysql::Opts::from_url(&url).unwrap()).unwrap();
                let deadline = Instant::now() + Duration::from_secs(60);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < deadline
                {
                    let _: Option<i32> = c.query_first("SELECT 1").unwrap();
                }
            })
        })
        .collect();
    let dump = |extra: &[&str]| chromium(&url, extra);
    // The number in the element with this id.
    let figure = |dom: &str, id: &str| -> f64 {
        let at = dom
            .find(&format!("id=\"{id}\""))
            .unwrap_or_else(|| panic!("no #{id}:\n{dom}"));
        let rest = &dom[at..];
        let text = &rest[rest.find('>').unwrap() + 1..rest.find('<').unwrap()];
        text.trim()
            .parse()
            .unwrap_or_else(|_| panic!("#{id} is {text:?}"))
    };
    // (Rates are per whole second: let one pass under load.)
    std::thread::sleep(Duration::from_millis(1500));
    let first = dump(&["--dump-dom"]);
    for port in std::iter::once(lab.primary).chain(lab.replicas.iter().copied()) {
        assert!(
            first.contains(&format!("data-server=\"127.0.0.1:{port}\"")),
            "the page lists server {port}:\n{first}"
        );
    }
    assert!(
        figure(&first, "qps") > 0.0,
        "statements per second under load:\n{first}"
    );
    assert!(figure(&first, "sessions") >= 4.0);
    assert!(
        first.contains("id=\"fleet-panel\" hidden"),
        "an instance alone shows no fleet panel"
    );
    std::thread::sleep(Duration::from_secs(1));
    let second = dump(&["--dump-dom"]);
    assert!(
        figure(&second, "total") > figure(&first, "total"),
        "the statement count moves"
    );
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("status-page.png");
    dump(&[&format!("--screenshot={}", shot.display())]);
    assert!(
        std::fs::metadata(&shot)
            .map(|m| m.len() > 10_000)
            .unwrap_or(false),
        "a screenshot"
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for l in load {
        l.join().unwrap();
    }
}

/// systemd's side of Type=notify, simulated: the notification socket the
/// unit gets (NOTIFY_SOCKET), read here. sextant says READY=1 once it
/// listens, RELOADING=1 (with MONOTONIC_USEC) then READY=1 around a
/// SIGHUP reload, and STOPPING=1 at SIGTERM. The unit and the example
/// config of packaging/ are checked as well.
#[test]
fn systemd_notifications_and_the_packaged_unit() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let sock_path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("notify.sock");
    let _ = std::fs::remove_file(&sock_path);
    let sock = std::os::unix::net::UnixDatagram::bind(&sock_path).expect("notify socket");
    sock.set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    let next = || {
        let mut buf = [0u8; 4096];
        let n = sock.recv(&mut buf).expect("a notification from sextant");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let mut p = Setup {
        env: vec![("NOTIFY_SOCKET", sock_path.display().to_string())],
        ..Default::default()
    }
    .start();
    let ready = next();
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready}");
    p.signal(libc::SIGHUP);
    let reloading = next();
    assert!(reloading.lines().any(|l| l == "RELOADING=1"), "{reloading}");
    assert!(reloading.contains("MONOTONIC_USEC="), "{reloading}");
    let again = next();
    assert!(again.lines().any(|l| l == "READY=1"), "{again}");
    p.signal(libc::SIGTERM);
    let stopping = next();
    assert!(stopping.lines().any(|l| l == "STOPPING=1"), "{stopping}");
    assert!(p
        .exit_status(Duration::from_secs(10))
        .expect("exits")
        .success());

    // The unit runs what this test ran, the way it was run.
    let unit = std::fs::read_to_string(repo_root().join("packaging/sextant.service")).unwrap();
    for line in [
        "Type=notify",
        "ExecStart=/usr/bin/sextant --config /etc/sextant/sextant.toml",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "KillSignal=SIGTERM",
    ] {
        assert!(unit.lines().any(|l| l == line), "the unit lacks {line:?}");
    }
    // The packaged example config is valid.
    let check = std::process::Command::new(env!("CARGO_BIN_EXE_sextant"))
        .arg("check-config")
        .arg(repo_root().join("packaging/sextant.toml"))
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
}

#[test]
fn admin_changes_routing_keys_and_backend_states_live() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lab = lab();
    let p = Setup {
        group: "primary_wait_ms = 300\n[routing]\nhold_ms = 0\n",
        ..Default::default()
    }
    .start();
    let mut admin = p.admin();
    // Writes from `c` (user app), reads from `r` (user other): app's
    // writes do not pull other's reads to the primary (read-your-writes).
    let mut c = p.conn();
    let mut r = mysql::Conn::new(
        mysql::Opts::from_url(&p.url("other", "otherpass", "sextant_test")).unwrap(),
    )
    .unwrap();
    direct(lab.primary)
        .query_drop("CREATE TABLE IF NOT EXISTS sextant_test.live_t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        .unwrap();
    sync_replicas();
    let port = |c: &mut mysql::Conn| -> u16 { c.query_first("SELECT @@port").unwrap().unwrap() };
    assert!(
        lab.replicas.contains(&port(&mut r)),
        "a plain read goes to a replica"
    );

    // A routing key, live: the open session follows at its next statement.
    admin.query_drop("SET `master-preferred` = ON").unwrap();
    assert_eq!(
        port(&mut r),
        lab.primary,
        "primary_preferred sends reads to the primary"
    );
    let vars: Vec<(String, String)> = admin.query("SHOW VARIABLES").unwrap();
    assert!(
        vars.contains(&("primary_preferred".into(), "true".into())),
        "{vars:?}"
    );
    admin.query_drop("SET primary_preferred = 0").unwrap();
    assert!(lab.replicas.contains(&port(&mut r)));
    match admin.query_drop("SET balance = 'fastest'") {
        Err(mysql::Error::MySqlError(e)) => {
            assert_eq!(e.code, 1231);
            assert!(e.message.contains("balance"), "{}", e.message);
        }
        other => panic!("a bad value is refused: {other:?}"),
    }
    // A name that is no key is refused too, naming the keys there are.
    match admin.query_drop("SET totally_bogus_key = 'x'") {
        Err(mysql::Error::MySqlError(e)) => {
            assert_eq!(e.code, 1193);
            assert!(e.message.contains("consistency"), "{}", e.message);
        }
        other => panic!("an unknown key is refused: {other:?}"),
    }
    assert!(p.logs().contains("routing.primary_preferred = false"));

    // A primary in maintenance: an open transaction on it finishes, new
    // writes wait primary_wait_ms and fail saying why, reads go on.
    let primary = format!("127.0.0.1:{}", lab.primary);
    let mut t = p.conn();
    t.query_drop("BEGIN").unwrap();
    t.query_drop("INSERT INTO live_t (v) VALUES (1)").unwrap();
    admin
        .query_drop(format!("SET BACKEND '{primary}' STATE maintenance"))
        .unwrap();
    t.query_drop("INSERT INTO live_t (v) VALUES (2)")
        .expect("the open transaction goes on");
    t.query_drop("COMMIT").expect("and commits");
    let started = Instant::now();
    match c.query_drop("INSERT INTO live_t (v) VALUES (3)") {
        Err(mysql::Error::MySqlError(e)) => {
            assert_eq!(e.code, 9004, "{e:?}");
            assert!(
                e.message.contains("in maintenance") && e.message.contains(&primary),
                "{}",
                e.message
            );
        }
        other => panic!("a write to a primary in maintenance fails: {other:?}"),
    }
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "it waited primary_wait_ms"
    );
    assert!(lab.replicas.contains(&port(&mut r)), "reads go on");
    // Back online within the wait: the write waits and runs.
    let back = {
        let mut a = p.admin();
        let primary = primary.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            a.query_drop(format!("SET BACKEND '{primary}' STATE online"))
                .unwrap();
        })
    };
    c.query_drop("INSERT INTO live_t (v) VALUES (4)")
        .expect("the write waits for the primary to come back");
    back.join().unwrap();
    let values: Vec<i32> = direct(lab.primary)
        .query("SELECT v FROM sextant_test.live_t ORDER BY id")
        .unwrap();
    assert_eq!(
        values,
        vec![1, 2, 4],
        "nothing refused ran, nothing ran twice"
    );

    // Offline: a replica leaves rotation and its idle connections close.
    let replica = format!("127.0.0.1:{}", lab.replicas[0]);
    for _ in 0..20 {
        port(&mut r);
    }
    admin
        .query_drop(format!("SET BACKEND '{replica}' STATE offline"))
        .unwrap();
    let rows: Vec<mysql::Row> = admin.query("SHOW BACKENDS").unwrap();
    let row = rows
        .iter()
        .find(|r| r.get::<String, _>("address").as_deref() == Some(replica.as_str()))
        .unwrap();
    assert_eq!(
        row.get::<String, _>("state").as_deref(),
        Some("maintenance")
    );
    assert_eq!(row.get::<String, _>("conn_idle").as_deref(), Some("0"));
    for _ in 0..10 {
        assert_eq!(
            port(&mut r),
            lab.replicas[1],
            "reads avoid the offline replica"
        );
    }
    admin
        .query_drop(format!("SET BACKEND '{replica}' STATE online"))
        .unwrap();
    assert!(p.logs().contains(&format!(
        "admin command: SET BACKEND '{replica}' STATE offline"
    )));

    // SHOW CONFIG hides passwords; HELP lists the commands.
    let config: Vec<(String, String)> = admin.query("SHOW CONFIG").unwrap();
    assert!(
        config.contains(&("routing.hold_ms".into(), "0".into())),
        "{config:?}"
    );
    assert!(
        config
            .iter()
            .all(|(_, v)| !["apppass", "adminpass", "otherpass"]
                .iter()
                .any(|pw| v.contains(pw))),
        "{config:?}"
    );
    let help: Vec<(String, String)> = admin.query("HELP").unwrap();
    assert!(help.len() >= 15, "{help:?}");
    direct(lab.primary)
        .query_drop("DROP TABLE sextant_test.live_t")
        .unwrap();
}

#[test]
fn query_digests_count_statements_without_their_values() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lab = lab();
    let p = Setup {
        proxy: "query_digests_max = 6",
        group: "[routing]\nhold_ms = 0\n",
        ..Default::default()
    }
    .start();
    direct(lab.primary)
        .query_drop("CREATE TABLE IF NOT EXISTS sextant_test.digest_t (id INT PRIMARY KEY, secret VARCHAR(20))")
        .unwrap();
    direct(lab.primary)
        .query_drop("REPLACE INTO sextant_test.digest_t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        .unwrap();
    sync_replicas();
    let mut admin = p.admin();
    admin.query_drop("RESET QUERY DIGESTS").unwrap();
    // Two sessions (one per worker thread): their counts are merged.
    let mut sessions = [p.conn(), p.conn()];
    for i in 0..100 {
        let c = &mut sessions[i % 2];
        let _: Vec<i32> = c
            .query(format!(
                "SELECT id FROM digest_t WHERE id IN ({}, 'pw-{i}')",
                i % 3 + 1
            ))
            .unwrap();
    }
    let c = &mut sessions[0];
    assert!(c
        .query_drop("SELECT nope FROM digest_t WHERE id = 'hunter2'")
        .is_err());
    c.query_drop("UPDATE digest_t SET secret = 'topsecret' WHERE id <= 2")
        .unwrap();
    for i in 0..10 {
        let got: Vec<String> = sessions[1]
            .exec("SELECT secret FROM digest_t WHERE id = ?", (i % 3 + 1,))
            .unwrap();
        assert_eq!(got.len(), 1);
    }
    let rows: Vec<mysql::Row> = admin.query("SHOW QUERY DIGESTS").unwrap();
    let find = |text: &str| {
        rows.iter()
            .find(|r| r.get::<String, _>("digest_text").as_deref() == Some(text))
            .unwrap_or_else(|| {
                panic!(
                    "no digest {text:?} in {:?}",
                    rows.iter()
                        .map(|r| r.get::<String, _>("digest_text"))
                        .collect::<Vec<_>>()
                )
            })
    };
    let num = |r: &mysql::Row, c: &str| -> f64 { r.get::<String, _>(c).unwrap().parse().unwrap() };
    let select = find("SELECT id FROM digest_t WHERE id IN (?,...)");
    assert_eq!(num(select, "count"), 100.0);
    assert_eq!(num(select, "rows"), 100.0, "one row each");
    assert_eq!(num(select, "replica"), 100.0, "plain reads ran on replicas");
    assert_eq!(num(select, "errors"), 0.0);
    assert!(
        num(select, "min_ms") <= num(select, "p99_ms")
            && num(select, "p99_ms") <= num(select, "max_ms")
    );
    assert!(num(select, "total_ms") > 0.0);
    let bad = find("SELECT nope FROM digest_t WHERE id = ?");
    assert_eq!(num(bad, "errors"), 1.0);
    let update = find("UPDATE digest_t SET secret = ? WHERE id <= ?");
    assert_eq!((num(update, "rows"), num(update, "primary")), (2.0, 1.0));
    // Prepared executions count under their statement's digest (read
    // once, at prepare).
    let executed = find("SELECT secret FROM digest_t WHERE id = ?");
    assert_eq!(num(executed, "count"), 10.0);
    assert_eq!(num(executed, "rows"), 10.0);
    let all = format!("{rows:?}");
    for secret in ["hunter2", "topsecret", "pw-"] {
        assert!(!all.contains(secret), "{secret} in the digests");
    }
    // Bounded: past query_digests_max a thread counts new digests together.
    for i in 0..12 {
        sessions[0]
            .query_drop(format!(
                "SELECT id{} FROM digest_t WHERE id = 1",
                ", id".repeat(i)
            ))
            .unwrap();
    }
    let rows: Vec<mysql::Row> = admin.query("SHOW QUERY DIGESTS").unwrap();
    assert!(rows.len() <= 2 * 7, "{} digests", rows.len());
    assert!(rows.iter().any(|r| r
        .get::<String, _>("digest_text")
        .is_some_and(|t| t.starts_with("(other digests"))));
    admin.query_drop("RESET QUERY DIGESTS").unwrap();
    let rows: Vec<mysql::Row> = admin.query("SHOW QUERY DIGESTS").unwrap();
    assert!(rows.is_empty(), "reset");
    direct(lab.primary)
        .query_drop("DROP TABLE sextant_test.digest_t")
        .unwrap();
}

/// The subject of the certificate sextant presents to a TLS client
/// (openssl's MySQL STARTTLS).
fn presented_subject(port: u16) -> String {
    let out = std::process::Command::new("openssl")
        .args(["s_client", "-starttls", "mysql", "-connect"])
        .arg(format!("127.0.0.1:{port}"))
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find(|l| l.starts_with("subject="))
        .unwrap_or_else(|| {
            panic!(
                "no certificate from sextant: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .to_string()
}

#[test]
fn a_reload_picks_up_renewed_tls_certificates() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lab = lab();
    let p = Setup {
        proxy: &format!(
            "tls_cert = \"{}\"\ntls_key = \"{}\"",
            lab.tls_cert, lab.tls_key
        ),
        ..Default::default()
    }
    .start();
    assert!(presented_subject(p.port).contains("CN = 127.0.0.1"));
    // A renewed certificate in new files, and a client logged in before.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("renewed-cert");
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=sextant-renewed"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(made.status.success());
    let mut before = p.conn();
    let text = std::fs::read_to_string(&p.config)
        .unwrap()
        .replace(&lab.tls_cert, &cert.display().to_string())
        .replace(&lab.tls_key, &key.display().to_string());
    std::fs::write(&p.config, text).unwrap();
    p.signal(libc::SIGHUP);
    wait_log(&p, "config reloaded", 1);
    assert!(
        presented_subject(p.port).contains("CN = sextant-renewed"),
        "new clients get the renewed certificate"
    );
    let one: Option<i32> = before.query_first("SELECT 1").unwrap();
    assert_eq!(one, Some(1), "a session from before goes on");
}

#[test]
fn the_http_port_times_out_idle_and_slow_connections_and_caps_them() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    let p = Setup {
        http: true,
        ..Default::default()
    }
    .start();
    let port = p.http_port.expect("http port");
    let open = |n: usize| -> Vec<TcpStream> {
        (0..n)
            .map(|_| TcpStream::connect(("127.0.0.1", port)).expect("connect"))
            .collect()
    };
    // Is the connection closed (the server ended it), within `wait`?
    let closed = |s: &mut TcpStream, wait: Duration| -> bool {
        s.set_read_timeout(Some(wait)).unwrap();
        let mut buf = [0u8; 512];
        loop {
            match s.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
    };
    // More idle connections than the port serves: the extra ones are told
    // so at once.
    let mut idle = open(256);
    std::thread::sleep(Duration::from_millis(300));
    let mut extra = TcpStream::connect(("127.0.0.1", port)).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut got = String::new();
    let _ = extra.read_to_string(&mut got);
    assert!(got.starts_with("HTTP/1.1 503"), "over the cap: {got:?}");
    let started = std::time::Instant::now();
    // The idle ones are closed once the header timeout passes.
    for s in &mut idle {
        assert!(
            closed(s, Duration::from_secs(10)),
            "an idle connection still open after {:?}",
            started.elapsed()
        );
    }
    assert!(started.elapsed() < Duration::from_secs(9));
    drop(idle);
    // A slow client: a request line, then a header byte a second.
    let mut slow2 = TcpStream::connect(("127.0.0.1", port)).unwrap();
    slow2.write_all(b"GET / HTTP/1.1\r\n").unwrap();
    let t = std::time::Instant::now();
    let mut cut = false;
    for _ in 0..20 {
        if slow2.write_all(b"X").is_err() {
            cut = true;
            break;
        }
        if closed(&mut slow2, Duration::from_secs(1)) {
            cut = true;
            break;
        }
    }
    assert!(cut, "a slowloris connection was never closed");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    // A request bigger than any GET needs is refused.
    let mut big = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut req = b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-pad: ".to_vec();
    req.extend(std::iter::repeat_n(b'a', 64 * 1024));
    let _ = big.write_all(&req);
    let mut got = Vec::new();
    big.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = big.read_to_end(&mut got);
    let got = String::from_utf8_lossy(&got);
    assert!(!got.contains("200 OK"), "a 64 KiB header was served: {got}");
    // And the port still serves.
    let (status, body) = p.http_get("/healthz");
    assert_eq!(status, 200, "{body}");
}

/// With `drain_delay_ms`, SIGTERM first turns /readyz to 503 while new
/// clients are still accepted and served (a load balancer's health check
/// notices and stops sending them), then the graceful shutdown begins.
#[test]
fn a_drain_delay_fails_readyz_first_and_keeps_serving_new_clients() {
    // Its monitor's checks would count in the servers' statement counters
    // that other tests here compare with sextant's.
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut p = Setup {
        proxy: "drain_delay_ms = 2000",
        http: true,
        ..Default::default()
    }
    .start();
    assert_eq!(p.http_get("/readyz").0, 200);
    let sent_at = Instant::now();
    p.signal(libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(300));
    let (code, body) = p.http_get("/readyz");
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("draining"), "{body}");
    // A client that arrives now is served as usual.
    let mut c = p.conn();
    let one: Option<i64> = c.query_first("SELECT 1").unwrap();
    assert_eq!(one, Some(1));
    assert!(
        sent_at.elapsed() < Duration::from_millis(1800),
        "the check took too long to mean anything: {:?}",
        sent_at.elapsed()
    );
    // Once the delay is over, the shutdown of every session begins.
    match c.query_drop("SELECT 1") {
        Ok(()) => {}
        Err(e) => panic!("still within the drain delay: {e}"),
    }
    assert!(
        p.exited_within(Duration::from_secs(8)),
        "sextant did not stop after its drain delay"
    );
    assert!(
        sent_at.elapsed() >= Duration::from_millis(2000),
        "stopped after {:?}, before the drain delay",
        sent_at.elapsed()
    );
    assert!(p.logs().contains("draining"), "{}", p.logs());
}
