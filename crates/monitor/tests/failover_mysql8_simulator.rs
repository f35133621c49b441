//! SIMULATOR, not MySQL: MySQL 8 cannot be installed on these machines.
//! Each "server" here is a small scripted fake that logs sextant in and
//! answers what the server monitor and the failover task ask of a
//! replication group (read_only, the GTID set, SHOW REPLICA STATUS, with
//! MariaDB's SHOW ALL SLAVES STATUS refused as MySQL refuses it). The
//! monitor and the failover task under test are sextant's real code.
//!
//! What it shows: with `failover = "auto"` on MySQL servers, sextant's
//! failover (whose rules read MariaDB GTID positions) refuses to promote
//! when the primary dies, says why, and sends no server a statement that
//! changes replication or read_only.

mod sim;
use parking_lot::Mutex;
use sextant_backend::{Group, Role, Server, Topology};
use sextant_monitor::failover::MYSQL_REFUSAL;
use sextant_monitor::ha::{run, FailoverSettings};
use sextant_monitor::{watch, Settings};
use sextant_protocol::packets::{coltype, write_err, write_simple_ok, write_text_resultset};
use sim::{login, pool_settings, read_packet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

const UUID: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

/// One fake server: whether it is the primary, and whether it is dead
/// (connections closed at once, as after a crash).
struct Fake {
    primary: bool,
    dead: AtomicBool,
    queries: Mutex<Vec<String>>,
}

async fn listen(l: TcpListener, f: Arc<Fake>) {
    while let Ok((s, _)) = l.accept().await {
        if f.dead.load(Ordering::Relaxed) {
            continue;
        }
        let f = f.clone();
        tokio::spawn(async move {
            let _ = serve(s, f).await;
        });
    }
}

fn rows(out: &mut Vec<u8>, names: &[&str], values: &[&str]) {
    let cols: Vec<(&str, u8)> = names.iter().map(|n| (*n, coltype::VAR_STRING)).collect();
    let row = values.iter().map(|v| Some(v.to_string())).collect();
    write_text_resultset(out, 1, &cols, &[row], false, 2);
}

async fn serve(mut s: TcpStream, f: Arc<Fake>) -> Option<()> {
    login(&mut s, 9).await?;
    let mut out = Vec::new();
    loop {
        let p = read_packet(&mut s).await?;
        if f.dead.load(Ordering::Relaxed) {
            return None;
        }
        out.clear();
        match p.first() {
            Some(0x01) => return Some(()),
            Some(0x03) => {
                let q = String::from_utf8_lossy(&p[1..]).to_string();
                f.queries.lock().push(q.clone());
                let ro = if f.primary { "0" } else { "1" };
                let gtids = format!("{UUID}:1-100");
                if q == "SELECT @@read_only" {
                    rows(&mut out, &["@@read_only"], &[ro]);
                } else if q.starts_with("SELECT @@global.max_prepared_stmt_count") {
                    rows(&mut out, &["a", "b"], &["16382", "67108864"]);
                } else if q.starts_with("SELECT @@character_set_client") {
                    rows(
                        &mut out,
                        &["a", "b", "c", "d"],
                        &["utf8mb4", "utf8mb4", "utf8mb4", "utf8mb4_0900_ai_ci"],
                    );
                } else if q == "SELECT @@gtid_executed" {
                    rows(&mut out, &["@@gtid_executed"], &[&gtids]);
                } else if q.starts_with("SHOW ALL SLAVES STATUS") || q.contains("@@gtid_binlog_pos")
                {
                    // As MySQL 8 answers MariaDB's statements.
                    write_err(
                        &mut out,
                        1,
                        1064,
                        "42000",
                        "You have an error in your SQL syntax",
                    );
                } else if q.starts_with("SHOW REPLICA STATUS") {
                    if f.primary {
                        write_text_resultset(&mut out, 1, &[], &[], false, 2);
                    } else {
                        // The primary is gone: the IO thread reconnects.
                        rows(
                            &mut out,
                            &[
                                "Replica_IO_Running",
                                "Replica_SQL_Running",
                                "Seconds_Behind_Source",
                                "Retrieved_Gtid_Set",
                                "Executed_Gtid_Set",
                            ],
                            &["Connecting", "Yes", "0", &gtids, &gtids],
                        );
                    }
                } else {
                    write_simple_ok(&mut out, 1, 2);
                }
            }
            _ => write_simple_ok(&mut out, 1, 2),
        }
        s.write_all(&out).await.ok()?;
    }
}

#[tokio::test]
async fn simulator_mysql8_failover_is_refused_and_changes_nothing() {
    let settings = pool_settings(Duration::from_millis(500));
    let mut fakes = Vec::new();
    let mut servers = Vec::new();
    for i in 0..3 {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let f = Arc::new(Fake {
            primary: i == 0,
            dead: AtomicBool::new(false),
            queries: Mutex::new(Vec::new()),
        });
        tokio::spawn(listen(l, f.clone()));
        let role = if i == 0 { Role::Primary } else { Role::Replica };
        servers.push(Arc::new(Server::new(&addr, "g", role, 1, settings.clone())));
        fakes.push(f);
    }
    let primary = servers.remove(0);
    let group = Arc::new(Group::with_topology(
        "g",
        primary,
        servers,
        0,
        Topology::Replication,
        Duration::ZERO,
    ));
    group.ha.set_auto(true);
    let s = Settings {
        interval: Duration::from_millis(100),
        user: "monitor".into(),
        password: "x".into(),
        heartbeat: false,
        max_lag_ms: 1000,
        instance_id: 1,
    };
    for m in &group.members {
        tokio::spawn(watch(m.clone(), group.clone(), s.clone()));
    }
    tokio::spawn(run(
        group.clone(),
        FailoverSettings {
            interval: s.interval,
            user: s.user.clone(),
            password: s.password.clone(),
            after_ms: 500,
            semi_sync: false,
            replication: Some(("repl".into(), "x".into())),
            promotable: vec![true; 3],
            coordinator: None,
        },
    ));
    // The monitor has seen every server answer, as MySQL 8.
    let t = Instant::now();
    while !group
        .members
        .iter()
        .all(|m| m.health.server_version().is_some_and(|v| !v.mariadb))
        || group.primary().is_none()
        || group.ha.report().state != "healthy"
    {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the monitor never saw the fakes"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    fakes[0].dead.store(true, Ordering::Relaxed);
    let t = Instant::now();
    loop {
        let r = group.ha.report();
        if r.state == "refused" {
            assert_eq!(r.detail, MYSQL_REFUSAL);
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "not refused within 10 s: {} {}",
            r.state,
            r.detail
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A few more rounds: still nothing changed anywhere.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(group.ha.term(), 0);
    assert!(group.ha.refusals() >= 1);
    for f in &fakes {
        let q = f.queries.lock();
        let changed: Vec<&String> = q
            .iter()
            .filter(|q| {
                let u = q.to_ascii_uppercase();
                [
                    "STOP ",
                    "RESET ",
                    "CHANGE ",
                    "START ",
                    "SET GLOBAL",
                    "CREATE",
                    "REPLACE",
                    "INSERT",
                ]
                .iter()
                .any(|w| u.starts_with(w))
            })
            .collect();
        assert!(
            changed.is_empty(),
            "the failover task changed a server: {changed:?}"
        );
    }
}
