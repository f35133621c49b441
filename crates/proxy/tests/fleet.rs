//! A fleet of sextant instances sharing intent through a real etcd
//! (Debian's etcd-server, started by scripts/lab), in front of the lab's
//! MariaDB servers: membership, admin changes reaching every instance,
//! and an etcd outage that no client notices.

mod common;

use common::*;
use mysql::prelude::Queryable;
use std::time::{Duration, Instant};

/// Instance `id` of fleet `fleet` on `etcd`, with these [proxy] keys and
/// keys for the last built-in user, and an HTTP port.
fn member(etcd: &Etcd, fleet: &str, id: &str, proxy: &str, users: &str) -> Proxy {
    let cluster = etcd.cluster(fleet, id);
    Setup {
        proxy,
        users,
        group: &cluster,
        http: true,
        ..Default::default()
    }
    .start()
}

fn instance(etcd: &Etcd, fleet: &str, id: &str) -> Proxy {
    member(etcd, fleet, id, "", "")
}

/// An instance behind HAProxy (which sends the PROXY protocol header).
fn balanced_instance(etcd: &Etcd, fleet: &str, id: &str) -> Proxy {
    member(etcd, fleet, id, "proxy_protocol_from = [\"127.0.0.1\"]", "")
}

fn fleet_rows(p: &Proxy) -> Vec<mysql::Row> {
    p.admin().query("SHOW FLEET").expect("SHOW FLEET")
}

fn wait_for(what: &str, within: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    start.elapsed()
}

/// Whether one instance's SHOW BACKENDS has the server in maintenance.
fn in_maintenance(p: &Proxy, port: u16) -> bool {
    let rows: Vec<mysql::Row> = p.admin().query("SHOW BACKENDS").expect("SHOW BACKENDS");
    rows.iter()
        .find(|r| r.get::<String, _>("address").as_deref() == Some(&format!("127.0.0.1:{port}")))
        .and_then(|r| r.get::<String, _>("state"))
        .expect("the server in SHOW BACKENDS")
        == "maintenance"
}

fn statements_on(p: &Proxy, port: u16) -> u64 {
    let rows: Vec<mysql::Row> = p.admin().query("SHOW BACKENDS").expect("SHOW BACKENDS");
    rows.iter()
        .find(|r| r.get::<String, _>("address").as_deref() == Some(&format!("127.0.0.1:{port}")))
        .and_then(|r| r.get::<String, _>("statements"))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn variable_on(p: &Proxy, key: &str) -> String {
    let rows: Vec<(String, String)> = p.admin().query("SHOW VARIABLES").expect("SHOW VARIABLES");
    rows.into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
        .unwrap_or_default()
}

/// The lab's sbtest tables: one test at a time prepares, uses and drops
/// them.
static SBTEST: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Instances a, b and c, once each lists all three.
fn three(start: impl Fn(&str) -> Proxy) -> Vec<Proxy> {
    let fleet: Vec<Proxy> = ["a", "b", "c"].iter().map(|id| start(id)).collect();
    wait_for(
        "every instance lists the three",
        Duration::from_secs(10),
        || fleet.iter().all(|p| fleet_rows(p).len() == 3),
    );
    fleet
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

#[test]
fn instances_list_each_other_and_admin_changes_reach_every_one_within_a_second() {
    let etcd = Etcd::start();
    let fleet = three(|id| instance(&etcd, "f1", id));
    let rows = fleet_rows(&fleet[1]);
    let ids: Vec<String> = rows.iter().map(|r| r.get("id").unwrap()).collect();
    assert_eq!(ids, ["a", "b", "c"]);
    let me: Vec<String> = rows.iter().map(|r| r.get("this").unwrap()).collect();
    assert_eq!(me, ["", "yes", ""]);
    for r in &rows {
        let store: String = r.get("store").unwrap();
        assert_eq!(store, "reachable");
    }
    let (code, body) = fleet[0].http_get("/api/fleet");
    assert_eq!(code, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json.as_array().map(|a| a.len()), Some(3), "{body}");
    // The status page's fleet panel lists the three.
    let page = chromium(
        &format!("http://127.0.0.1:{}/", fleet[0].http_port.unwrap()),
        &["--dump-dom"],
    );
    assert!(
        !page.contains("id=\"fleet-panel\" hidden"),
        "the fleet panel is hidden:\n{page}"
    );
    for id in ["a (this one)", ">b<", ">c<"] {
        assert!(page.contains(id), "the fleet panel lacks {id}:\n{page}");
    }

    // 100 changes on instances in turn (a pseudo-random order), each
    // timed until all three show it.
    let replica = lab().replicas[0];
    let mut took = Vec::new();
    let mut seed = 0x2545_f491_u32;
    for n in 0..100 {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        let on = &fleet[(seed % 3) as usize];
        let start = Instant::now();
        if n % 2 == 0 {
            let state = if n % 4 == 0 { "maintenance" } else { "online" };
            on.admin()
                .query_drop(format!("SET BACKEND '127.0.0.1:{replica}' STATE {state}"))
                .expect("SET BACKEND");
            wait_for(
                "a backend state on every instance",
                Duration::from_secs(5),
                || {
                    fleet
                        .iter()
                        .all(|p| in_maintenance(p, replica) == (state == "maintenance"))
                },
            );
        } else {
            let pct = (n % 50).to_string();
            on.admin()
                .query_drop(format!("SET read_primary_percent = {pct}"))
                .expect("SET routing key");
            wait_for(
                "a routing key on every instance",
                Duration::from_secs(5),
                || {
                    fleet
                        .iter()
                        .all(|p| variable_on(p, "read_primary_percent") == pct)
                },
            );
        }
        took.push(start.elapsed());
    }
    took.sort();
    let (p50, p99) = (percentile(&took, 0.5), percentile(&took, 0.99));
    println!(
        "100 admin changes: every instance had each within p50 {p50:?}, p99 {p99:?}, max {:?}",
        took[99]
    );
    assert!(p99 < Duration::from_secs(1), "p99 {p99:?}");

    // Maintenance set on one instance: after that second, no instance
    // sends the replica a new statement, while reads go on through all.
    for p in &fleet {
        p.admin()
            .query_drop("SET read_primary_percent = 0")
            .unwrap();
    }
    fleet[2]
        .admin()
        .query_drop(format!(
            "SET BACKEND '127.0.0.1:{replica}' STATE maintenance"
        ))
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let before: Vec<u64> = fleet.iter().map(|p| statements_on(p, replica)).collect();
    let mut clients: Vec<mysql::Conn> = fleet.iter().map(|p| p.conn()).collect();
    for _ in 0..50 {
        for c in &mut clients {
            let _: Option<u32> = c.query_first("SELECT 1").unwrap();
        }
    }
    let after: Vec<u64> = fleet.iter().map(|p| statements_on(p, replica)).collect();
    assert_eq!(
        before, after,
        "statements sent to the replica in maintenance, per instance"
    );
    let other = lab().replicas[1];
    assert!(fleet.iter().all(|p| statements_on(p, other) > 0));
    fleet[0]
        .admin()
        .query_drop(format!("SET BACKEND '127.0.0.1:{replica}' STATE online"))
        .unwrap();
}

#[test]
fn without_etcd_instances_serve_on_refuse_changes_and_catch_up_when_it_returns() {
    let etcd = Etcd::start();
    let _sbtest = SBTEST.lock().unwrap_or_else(|e| e.into_inner());
    let fleet = three(|id| balanced_instance(&etcd, "f3", id));
    let haproxy = HaProxy::start(&fleet.iter().collect::<Vec<_>>());
    let port = haproxy.port;
    // sysbench through HAProxy for the whole outage. One write per
    // transaction: two clients' transactions cannot deadlock, so every
    // error would be the proxies' (and ends sysbench, saying which).
    let prepare = sysbench_cmd(port, 2, 1000)
        .arg("oltp_read_write")
        .arg("prepare")
        .output()
        .expect("sysbench");
    assert!(
        prepare.status.success(),
        "{}",
        String::from_utf8_lossy(&prepare.stderr)
    );
    let outage = Duration::from_secs(
        std::env::var("SEXTANT_FLEET_OUTAGE_S")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(60),
    );
    let run = sysbench_cmd(port, 2, 1000)
        .args([
            "oltp_read_write",
            "run",
            "--threads=4",
            "--index_updates=0",
            "--non_index_updates=1",
            "--delete_inserts=0",
            "--mysql-ignore-errors=none",
        ])
        .arg(format!("--time={}", outage.as_secs() + 8))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("sysbench");
    std::thread::sleep(Duration::from_secs(3));
    etcd.stop();
    let replica = lab().replicas[0];
    wait_for(
        "the store is seen unreachable",
        Duration::from_secs(10),
        || {
            fleet.iter().all(|p| {
                fleet_rows(p)
                    .first()
                    .and_then(|r| r.get::<String, _>("store"))
                    .is_some_and(|s| s.starts_with("unreachable"))
            })
        },
    );
    let err = fleet[1]
        .admin()
        .query_drop(format!(
            "SET BACKEND '127.0.0.1:{replica}' STATE maintenance"
        ))
        .unwrap_err();
    match err {
        mysql::Error::MySqlError(e) => {
            assert_eq!(e.code, 9007, "{}", e.message);
            assert!(
                e.message.contains("unreachable") && e.message.contains("nothing was changed"),
                "{}",
                e.message
            );
        }
        e => panic!("{e}"),
    }
    assert!(
        !in_maintenance(&fleet[1], replica),
        "a refused change was applied"
    );
    let (code, body) = fleet[0].http_get("/readyz");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("fleet store is unreachable"), "{body}");
    std::thread::sleep(outage.saturating_sub(Duration::from_secs(3)));
    etcd.resume();
    wait_for("the store is seen again", Duration::from_secs(15), || {
        fleet.iter().all(|p| {
            fleet_rows(p)
                .first()
                .and_then(|r| r.get::<String, _>("store"))
                .as_deref()
                == Some("reachable")
        })
    });
    let start = Instant::now();
    fleet[2]
        .admin()
        .query_drop(format!(
            "SET BACKEND '127.0.0.1:{replica}' STATE maintenance"
        ))
        .expect("a change once etcd is back");
    wait_for(
        "the change on every instance",
        Duration::from_secs(1),
        || fleet.iter().all(|p| in_maintenance(p, replica)),
    );
    println!(
        "after the outage, a change reached all three in {:?}",
        start.elapsed()
    );
    let out = run.wait_with_output().expect("sysbench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let errors = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("ignored errors:"))
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|n| n.parse::<u64>().ok())
        .expect("sysbench's ignored errors");
    assert_eq!(errors, 0, "{stdout}");
    assert!(stdout.contains("transactions:"), "{stdout}");
    println!(
        "{}",
        stdout
            .lines()
            .filter(|l| l.contains("transactions:") || l.contains("errors:"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    fleet[0]
        .admin()
        .query_drop(format!("SET BACKEND '127.0.0.1:{replica}' STATE online"))
        .unwrap();
    let cleanup = sysbench_cmd(port, 2, 1000)
        .arg("oltp_read_write")
        .arg("cleanup")
        .output();
    drop(cleanup);
}

#[test]
fn a_restarted_instance_keeps_its_id_and_a_reload_keeps_the_fleets_intent() {
    let etcd = Etcd::start();
    let cluster = etcd.cluster("f4", "x").replace("instance_id = \"x\"\n", "");
    let mut p = Setup {
        group: &cluster,
        ..Default::default()
    }
    .start();
    wait_for("listed", Duration::from_secs(10), || {
        fleet_rows(&p).len() == 1
    });
    let id: String = fleet_rows(&p)[0].get("id").unwrap();
    p.admin()
        .query_drop("SET read_primary_percent = 37")
        .unwrap();
    p.admin().query_drop("RELOAD CONFIG").unwrap();
    assert_eq!(variable_on(&p, "read_primary_percent"), "37");
    p.restart(&[]);
    wait_for("listed again", Duration::from_secs(10), || {
        fleet_rows(&p)
            .iter()
            .any(|r| r.get::<String, _>("this").as_deref() == Some("yes"))
    });
    let rows = fleet_rows(&p);
    let again: Vec<String> = rows.iter().map(|r| r.get("id").unwrap()).collect();
    assert_eq!(again, [id], "the restarted instance's id");
    wait_for(
        "the intent applied after the restart",
        Duration::from_secs(5),
        || variable_on(&p, "read_primary_percent") == "37",
    );
}

fn sextant(args: &[&std::ffi::OsStr]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_sextant"))
        .args(args)
        .output()
        .expect("run sextant")
}

#[test]
fn a_pushed_config_is_checked_then_applied_by_every_instance_and_a_stale_push_is_refused() {
    let etcd = Etcd::start();
    let fleet = three(|id| instance(&etcd, "f5", id));
    let own = std::fs::read_to_string(&fleet[0].config).unwrap();
    let dir = etcd.dir.join("push");
    std::fs::create_dir_all(&dir).unwrap();

    // An invalid file: refused with what check-config says of it.
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        format!("{own}\n[routing]\nread_primary_percent = 200\n"),
    )
    .unwrap();
    let check = sextant(&["check-config".as_ref(), bad.as_os_str()]);
    assert!(!check.status.success());
    let explained = String::from_utf8_lossy(&check.stderr)
        .trim()
        .trim_start_matches("sextant: ")
        .to_string();
    assert!(explained.contains("read_primary_percent"), "{explained}");
    let e = fleet[1]
        .admin()
        .query_drop(format!("PUSH CONFIG FROM '{}'", bad.display()))
        .unwrap_err();
    match e {
        mysql::Error::MySqlError(e) => {
            assert_eq!(e.code, 9006, "{}", e.message);
            assert!(
                e.message.contains(&explained),
                "{}\nvs check-config:\n{explained}",
                e.message
            );
        }
        e => panic!("{e}"),
    }

    // A good one, from the command line: every instance runs it (each on
    // its own listen address, a local key).
    let good = dir.join("good.toml");
    std::fs::write(
        &good,
        format!("{own}\n[routing]\nread_primary_percent = 25\n"),
    )
    .unwrap();
    let out = sextant(&[
        "--config".as_ref(),
        fleet[0].config.as_os_str(),
        "fleet".as_ref(),
        "push".as_ref(),
        good.as_os_str(),
    ]);
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rev: i64 = said
        .split("at revision ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("no revision in {said:?}"));
    let took = wait_for(
        "every instance runs the pushed config",
        Duration::from_secs(5),
        || {
            fleet
                .iter()
                .all(|p| variable_on(p, "read_primary_percent") == "25")
                && fleet.iter().all(|p| {
                    fleet_rows(p).iter().all(|r| {
                        r.get::<String, _>("config_revision").as_deref() == Some(&rev.to_string())
                    })
                })
        },
    );
    println!("a pushed config ran on all three within {took:?}");
    for p in &fleet {
        let _: Option<u32> = p.conn().query_first("SELECT 1").unwrap();
    }

    // `fleet config` names the revision; an edit of it pushes on it.
    let out = sextant(&[
        "--config".as_ref(),
        fleet[2].config.as_os_str(),
        "fleet".as_ref(),
        "config".as_ref(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let current = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        current.starts_with(&format!("# sextant fleet config revision {rev} ")),
        "{current}"
    );
    let edited = dir.join("edited.toml");
    std::fs::write(
        &edited,
        current.replace("read_primary_percent = 25", "read_primary_percent = 30"),
    )
    .unwrap();
    let out = sextant(&[
        "--config".as_ref(),
        fleet[2].config.as_os_str(),
        "fleet".as_ref(),
        "push".as_ref(),
        edited.as_os_str(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for("the edit everywhere", Duration::from_secs(5), || {
        fleet
            .iter()
            .all(|p| variable_on(p, "read_primary_percent") == "30")
    });

    // A push based on the revision before: refused, nothing changes.
    let out = sextant(&[
        "--config".as_ref(),
        fleet[1].config.as_os_str(),
        "fleet".as_ref(),
        "push".as_ref(),
        good.as_os_str(),
        "--base".as_ref(),
        rev.to_string().as_ref(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("by another instance") && err.contains("nothing was changed"),
        "{err}"
    );
    let e = fleet[0]
        .admin()
        .query_drop(format!(
            "PUSH CONFIG FROM '{}' BASED ON {rev}",
            good.display()
        ))
        .unwrap_err();
    assert!(
        matches!(&e, mysql::Error::MySqlError(m) if m.code == 9007),
        "{e}"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(fleet
        .iter()
        .all(|p| variable_on(p, "read_primary_percent") == "30"));
}

fn other_user(p: &Proxy) -> mysql::Conn {
    mysql::Conn::new(mysql::Opts::from_url(&p.url("other", "otherpass", "")).unwrap())
        .expect("other user")
}

#[test]
fn a_kill_on_one_instance_reaches_a_session_on_another() {
    let etcd = Etcd::start();
    let a = instance(&etcd, "f6", "a");
    let b = instance(&etcd, "f6", "b");
    wait_for(
        "both listed with their slots",
        Duration::from_secs(10),
        || {
            let rows = fleet_rows(&a);
            rows.len() == 2
                && rows
                    .iter()
                    .all(|r| r.get::<String, _>("slot").as_deref() != Some("0"))
        },
    );
    let mut on_b = b.conn();
    let id = on_b.connection_id();
    let mut on_a = a.conn();
    assert_ne!(id >> 24, 0, "connection ids carry the instance's slot");
    assert_ne!(
        id >> 24,
        on_a.connection_id() >> 24,
        "two instances, two slots"
    );

    // Another user may not; an id no session has is unknown.
    match other_user(&a).query_drop(format!("KILL QUERY {id}")) {
        Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1095, "{}", e.message),
        r => panic!("another user's KILL: {r:?}"),
    }
    match on_a.query_drop(format!("KILL {}", id + 5000)) {
        Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1094, "{}", e.message),
        r => panic!("KILL of an unknown id: {r:?}"),
    }

    // KILL QUERY from the same user on a: b's SLEEP(20) ends within 1 s.
    let sleeper = std::thread::spawn(move || {
        let start = Instant::now();
        let r: mysql::Result<Option<u32>> = on_b.query_first("SELECT SLEEP(20)");
        (
            start,
            Instant::now(),
            r.map(|_| ()).map_err(|e| e.to_string()),
            on_b,
        )
    });
    std::thread::sleep(Duration::from_millis(500));
    let killed_at = Instant::now();
    on_a.query_drop(format!("KILL QUERY {id}"))
        .expect("KILL QUERY across instances");
    let (_, ended, r, mut on_b) = sleeper.join().unwrap();
    let took = ended.duration_since(killed_at);
    println!("KILL QUERY across instances: the statement ended {took:?} after it ({r:?})");
    assert!(took < Duration::from_secs(1), "{took:?}");
    // The session lives on after KILL QUERY.
    let one: Option<u32> = on_b.query_first("SELECT 1").unwrap();
    assert_eq!(one, Some(1));

    // a's admin port lists b's session, as b's.
    let listed: Vec<mysql::Row> = a.admin().query("SHOW FLEET SESSIONS").unwrap();
    let on: Vec<(String, String)> = listed
        .iter()
        .map(|r| (r.get("instance").unwrap(), r.get("id").unwrap()))
        .collect();
    assert!(on.contains(&("b".to_string(), id.to_string())), "{on:?}");
    assert!(on.iter().any(|(i, _)| i == "a"), "{on:?}");

    // The admin port of a ends b's session.
    a.admin()
        .query_drop(format!("KILL {id}"))
        .expect("admin KILL across instances");
    wait_ended(&mut on_b, "the KILL from a's admin port");

    // COM_PROCESS_KILL (what older clients send) on a ends another of b's.
    let mut on_b = b.conn();
    let id = on_b.connection_id();
    let mut raw = Raw::login(a.port, "app", "apppass", None);
    let mut kill = vec![0x0c];
    kill.extend_from_slice(&id.to_le_bytes());
    raw.send(0, &kill);
    let answer = raw.read_response();
    assert_eq!(
        answer[0][0],
        0x00,
        "COM_PROCESS_KILL: {:?}",
        err_of(&answer[0])
    );
    wait_ended(&mut on_b, "COM_PROCESS_KILL on a");
}

/// Waits until `c`'s session is gone (within 2 s).
fn wait_ended(c: &mut mysql::Conn, by: &str) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        if c.query_drop("SELECT 1").is_err() {
            return;
        }
        assert!(Instant::now() < deadline, "the session survived {by}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_users_max_connections_is_shared_out_over_the_live_instances() {
    let etcd = Etcd::start();
    let start = |id: &str| member(&etcd, "f7", id, "", "max_connections = 4");
    let a = start("a");
    let b = start("b");
    wait_for("both listed", Duration::from_secs(10), || {
        fleet_rows(&a).len() == 2 && fleet_rows(&b).len() == 2
    });
    // (Each recounts the fleet every half second.)
    std::thread::sleep(Duration::from_secs(1));
    let limit_error = |p: &Proxy| match mysql::Conn::new(
        mysql::Opts::from_url(&p.url("other", "otherpass", "")).unwrap(),
    ) {
        Err(mysql::Error::MySqlError(e)) => Some((e.code, e.message)),
        Ok(_) => None,
        Err(e) => panic!("{e}"),
    };
    let held: Vec<mysql::Conn> = [&a, &a, &b, &b].iter().map(|p| other_user(p)).collect();
    for p in [&a, &b] {
        let (code, msg) = limit_error(p).expect("a third session on one instance of two");
        assert_eq!(code, 1226, "{msg}");
        assert!(msg.contains("current value: 2"), "{msg}");
    }
    // b goes: a's share becomes the whole limit once b's lease expires.
    drop(b);
    let took = wait_for("a takes the whole limit", Duration::from_secs(10), || {
        let extra: Vec<_> = (0..2).map(|_| limit_error(&a)).collect();
        extra.iter().all(|e| e.is_none())
    });
    println!("after an instance stopped, the other's share grew within {took:?}");
    drop(held);
}

/// One client of the ledger: numbered transactions shaped as sysbench's
/// oltp_read_write (point selects, a range, an update) plus one insert
/// into the ledger; it reconnects (through HAProxy) when its instance
/// goes, and retries a transaction only when it cannot have committed.
/// (sysbench itself cannot be this client: Debian's sysbench 1.0.20 with
/// libmariadb crashes when it reconnects, akopytov/sysbench#527.)
struct Ledger {
    acked: Vec<u64>,
    in_doubt: Vec<u64>,
    /// Errors by (code, where: "BEGIN" at a transaction's boundary, else
    /// "inside" or "COMMIT").
    errors: std::collections::BTreeMap<(u16, &'static str), u64>,
}

fn ledger_client(
    port: u16,
    client: u32,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Ledger {
    // (prefer_socket off: the mysql crate would otherwise ask @@socket
    // and go straight to that server's Unix socket, past HAProxy and
    // sextant, when the servers run on this host as the lab's do.)
    let url = format!("mysql://app:apppass@127.0.0.1:{port}/sextant_test?prefer_socket=false");
    let connect = || loop {
        match mysql::Conn::new(mysql::Opts::from_url(&url).unwrap()) {
            Ok(c) => return c,
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let mut l = Ledger {
        acked: Vec::new(),
        in_doubt: Vec::new(),
        errors: Default::default(),
    };
    let mut conn = connect();
    let mut seq = 0u64;
    let code = |e: &mysql::Error| match e {
        mysql::Error::MySqlError(e) => e.code,
        _ => 2013,
    };
    let mut rng = 0x9e37_79b9_u64.wrapping_mul(client as u64 + 1);
    let mut id = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        1 + rng % 1000
    };
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        seq += 1;
        if let Err(e) = conn.query_drop("BEGIN") {
            *l.errors.entry((code(&e), "BEGIN")).or_default() += 1;
            seq -= 1;
            conn = connect();
            continue;
        }
        let mut body = Ok(());
        for _ in 0..4 {
            body = body.and_then(|_| {
                conn.query_drop(format!("SELECT c FROM sbtest.sbtest1 WHERE id = {}", id()))
            });
        }
        let from = id();
        let body = body
            .and_then(|_| {
                conn.query_drop(format!(
                    "SELECT c FROM sbtest.sbtest2 WHERE id BETWEEN {from} AND {}",
                    from + 99
                ))
            })
            .and_then(|_| {
                conn.query_drop(format!(
                    "UPDATE sbtest.sbtest1 SET k = k + 1 WHERE id = {}",
                    id()
                ))
            })
            .and_then(|_| {
                conn.query_drop(format!(
                    "INSERT INTO fleet_ledger (client, seq) VALUES ({client}, {seq})"
                ))
            });
        if let Err(e) = body {
            // Before COMMIT: nothing committed; the same number again.
            *l.errors.entry((code(&e), "inside")).or_default() += 1;
            seq -= 1;
            conn = connect();
            continue;
        }
        match conn.query_drop("COMMIT") {
            Ok(()) => l.acked.push(seq),
            Err(e) => {
                *l.errors.entry((code(&e), "COMMIT")).or_default() += 1;
                l.in_doubt.push(seq);
                conn = connect();
            }
        }
    }
    l
}

#[test]
fn a_rolling_restart_under_load_loses_and_doubles_nothing() {
    let etcd = Etcd::start();
    let start = |id: &str| {
        let proxy = "proxy_protocol_from = [\"127.0.0.1\"]\ndrain_delay_ms = 5000";
        member(&etcd, "f8", id, proxy, "")
    };
    let _sbtest = SBTEST.lock().unwrap_or_else(|e| e.into_inner());
    let mut fleet = three(start);
    let haproxy = HaProxy::start(&fleet.iter().collect::<Vec<_>>());
    let port = haproxy.port;
    let mut d = direct(lab().primary);
    d.query_drop("DROP TABLE IF EXISTS sextant_test.fleet_ledger")
        .unwrap();
    d.query_drop("CREATE TABLE sextant_test.fleet_ledger (id BIGINT AUTO_INCREMENT PRIMARY KEY, client INT, seq BIGINT)")
        .unwrap();
    let prepare = sysbench_cmd(port, 2, 1000)
        .args(["oltp_read_write", "prepare"])
        .output()
        .expect("sysbench");
    assert!(
        prepare.status.success(),
        "{}",
        String::from_utf8_lossy(&prepare.stderr)
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..8)
        .map(|c| {
            let stop = stop.clone();
            std::thread::spawn(move || ledger_client(port, c, stop))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    for p in fleet.iter_mut() {
        p.signal(libc::SIGTERM);
        assert!(
            p.exited_within(Duration::from_secs(30)),
            "an instance did not stop after SIGTERM"
        );
        p.restart(&[]);
        let http = p.http_port.unwrap();
        wait_for("the instance ready again", Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", http)).is_ok()
                && p.http_get("/readyz").0 == 200
        });
        // HAProxy's check brings it back (rise 2 x inter 2 s).
        std::thread::sleep(Duration::from_secs(5));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let ledgers: Vec<Ledger> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    // Count rows: every acknowledged commit is there once; a commit whose
    // answer was lost is there at most once; nothing else is.
    let rows: Vec<(u32, u64, u64)> = d
        .query("SELECT client, seq, COUNT(*) FROM sextant_test.fleet_ledger GROUP BY client, seq")
        .unwrap();
    let mut errors = std::collections::BTreeMap::new();
    let (mut acked, mut doubt) = (0, 0);
    let missing: Vec<(usize, u64)> = ledgers
        .iter()
        .enumerate()
        .flat_map(|(c, l)| l.acked.iter().map(move |s| (c, *s)))
        .filter(|(c, s)| !rows.iter().any(|(rc, rs, _)| *rc == *c as u32 && rs == s))
        .collect();
    assert!(
        missing.is_empty(),
        "{} rows; {} acknowledged; {} missing: {:?}",
        rows.len(),
        ledgers.iter().map(|l| l.acked.len()).sum::<usize>(),
        missing.len(),
        &missing[..missing.len().min(20)]
    );
    for (c, l) in ledgers.iter().enumerate() {
        for (k, v) in &l.errors {
            *errors.entry(*k).or_insert(0u64) += v;
        }
        acked += l.acked.len();
        doubt += l.in_doubt.len();
        for s in &l.acked {
            let n = rows
                .iter()
                .find(|(rc, rs, _)| *rc == c as u32 && rs == s)
                .map_or(0, |r| r.2);
            assert_eq!(
                n, 1,
                "client {c}'s acknowledged transaction {s} is there {n} times"
            );
        }
    }
    assert!(rows.iter().all(|r| r.2 == 1), "a transaction doubled");
    let unacked = rows
        .iter()
        .filter(|(c, s, _)| {
            !ledgers[*c as usize].acked.contains(s) && !ledgers[*c as usize].in_doubt.contains(s)
        })
        .count();
    assert_eq!(unacked, 0, "rows of transactions never committed");
    println!("rolling restart: {acked} transactions acknowledged, {doubt} in doubt, errors (code, where) {errors:?}");
    assert!(acked > 100, "too little load to tell: {acked}");
    // The only errors clients saw: 1053, at a transaction's boundary.
    assert!(errors.keys().all(|k| *k == (1053, "BEGIN")), "{errors:?}");
    assert!(
        errors.values().sum::<u64>() > 0,
        "no session was ended: was anything restarted?"
    );
    // Each came back as itself (its id kept across the restart).
    wait_for("the three listed again", Duration::from_secs(10), || {
        let ids: Vec<String> = fleet_rows(&fleet[0])
            .iter()
            .map(|r| r.get("id").unwrap())
            .collect();
        ids == ["a", "b", "c"]
    });
    d.query_drop("DROP TABLE sextant_test.fleet_ledger")
        .unwrap();
    let _ = sysbench_cmd(port, 2, 1000)
        .args(["oltp_read_write", "cleanup"])
        .output();
}
