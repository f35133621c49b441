//! Servers failing under write load: the primary killed with SIGKILL and
//! restarted, and every connection sextant holds killed from the server
//! side. (Its own test binary, with its own lab: it kills lab servers.)

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::sync::Mutex;
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Kill -9 of the primary while four clients insert numbered rows, then a
/// restart: every row a client saw acknowledged is there, none is there
/// twice (a write that may have run is never sent again), and writing
/// resumes once the primary is back.
#[test]
fn primary_killed_under_numbered_writes_loses_and_repeats_nothing() {
    let _g = serial();
    let p = Setup {
        group: "connect_timeout_ms = 500\n[routing]\nhold_ms = 0\n[monitor]\ninterval_ms = 200\n",
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    c.query_drop("DROP TABLE IF EXISTS kn_t").unwrap();
    c.query_drop(
        "CREATE TABLE kn_t (id BIGINT AUTO_INCREMENT PRIMARY KEY, writer INT NOT NULL, seq INT NOT NULL)",
    )
    .unwrap();
    let url = p.url("app", "apppass", "sextant_test");
    let writers = NumberedWriters::start(vec![url; 4], "kn_t");
    std::thread::sleep(Duration::from_secs(1));
    kill_lab_server(0);
    std::thread::sleep(Duration::from_millis(1500));
    restart_lab_server(0);
    p.wait_state(lab().primary, "up", Duration::from_secs(30));
    writers.mark();
    std::thread::sleep(Duration::from_secs(2));
    let reports = writers.stop();
    let total = check_numbered_rows(
        &mut direct(lab().primary),
        |_| "sextant_test.kn_t".into(),
        &reports,
    );
    for (w, r) in reports.iter().enumerate() {
        assert!(
            r.acked_after_mark > 0,
            "writer {w} wrote nothing after the restart; errors {:?}",
            r.errors
        );
    }
    eprintln!("{total} acknowledged rows, all present once");
}

/// Sextant routing each statement on its own, reads to any replica.
fn eventual_proxy() -> Proxy {
    Setup {
        group: "[routing]\nhold_ms = 0\nconsistency = \"eventual\"\n",
        ..Default::default()
    }
    .start()
}

/// An operator with a connection to every lab server, killing the app
/// account's connections (sextant's pooled ones and its monitor's).
struct Killer {
    servers: Vec<u16>,
    conns: Vec<mysql::Conn>,
}

impl Killer {
    fn new() -> Killer {
        let servers: Vec<u16> = std::iter::once(lab().primary)
            .chain(lab().replicas.iter().copied())
            .collect();
        let conns = servers.iter().map(|&s| direct(s)).collect();
        Killer { servers, conns }
    }

    /// Kills every connection of the app account but its own; how many.
    fn kill_all(&mut self) -> usize {
        let mut n = 0;
        for k in &mut self.conns {
            let ids: Vec<u64> = k
                .query(
                    "SELECT ID FROM information_schema.PROCESSLIST \
                     WHERE USER = 'app' AND ID <> CONNECTION_ID()",
                )
                .unwrap();
            for id in ids {
                // Gone already, some of them.
                if k.query_drop(format!("KILL CONNECTION {id}")).is_ok() {
                    n += 1;
                }
            }
        }
        n
    }
}

/// An operator kills every connection sextant holds (server-side KILL) on
/// every server, over and over: no statement that had not started when its
/// connection was killed fails, and every server is in rotation afterwards
/// (the monitor's own connections die too).
#[test]
fn server_side_kill_of_pooled_connections() {
    let _g = serial();
    let p = eventual_proxy();
    let mut c = p.conn();
    c.query_drop("CREATE TABLE IF NOT EXISTS kk_t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        .unwrap();
    sync_replicas();
    let mut killer = Killer::new();
    let mut sessions: Vec<mysql::Conn> = (0..4).map(|_| p.conn()).collect();
    let mut killed = 0;
    for round in 0..15 {
        for (i, s) in sessions.iter_mut().enumerate() {
            s.exec_drop("INSERT INTO kk_t (v) VALUES (?)", (round * 10 + i as i32,))
                .unwrap_or_else(|e| panic!("round {round}: a write on a killed connection: {e}"));
            let n: Option<i64> = s
                .query_first("SELECT COUNT(*) FROM kk_t")
                .unwrap_or_else(|e| panic!("round {round}: a read on a killed connection: {e}"));
            assert!(n.is_some());
            s.query_drop("BEGIN").unwrap();
            s.query_drop("UPDATE kk_t SET v = v + 1 WHERE id = 1")
                .unwrap();
            s.query_drop("COMMIT").unwrap();
        }
        // Every pooled connection (and the monitor's) dies between two
        // statements; the FIN reaches sextant before the next one.
        killed += killer.kill_all();
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(killed >= 15, "only {killed} connections were killed");
    // A connection found dead only when a statement is written to it (the
    // kill raced the check before lending) takes its server out of read
    // rotation until the monitor's next check: back within an interval.
    for &s in &killer.servers {
        p.wait_state(s, "up", Duration::from_secs(3));
    }
}

/// The same under load: four clients read without pause while every
/// connection sextant holds is killed every 200 ms. A read whose
/// connection dies before any of its answer reached the client runs again
/// elsewhere, so the clients see no error.
#[test]
fn server_side_kill_of_pooled_connections_under_read_load() {
    let _g = serial();
    let p = eventual_proxy();
    let mut c = p.conn();
    c.query_drop("CREATE TABLE IF NOT EXISTS kr_t (id INT PRIMARY KEY, v INT)")
        .unwrap();
    c.query_drop("REPLACE INTO kr_t VALUES (1, 1)").unwrap();
    sync_replicas();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let mut s = p.conn();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let (mut ok, mut errors) = (0u64, Vec::new());
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    match s.query_first::<i32, _>("SELECT v FROM kr_t WHERE id = 1") {
                        Ok(Some(1)) => ok += 1,
                        Ok(v) => errors.push(format!("wrong answer {v:?}")),
                        Err(e) => errors.push(e.to_string()),
                    }
                }
                (ok, errors)
            })
        })
        .collect();
    let mut killer = Killer::new();
    let mut killed = 0;
    for _ in 0..15 {
        std::thread::sleep(Duration::from_millis(200));
        killed += killer.kill_all();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut total = 0;
    for r in readers {
        let (ok, errors) = r.join().expect("reader");
        assert!(
            errors.is_empty(),
            "{} errors, e.g. {:?}",
            errors.len(),
            &errors[..errors.len().min(3)]
        );
        total += ok;
    }
    assert!(killed >= 15, "only {killed} connections were killed");
    assert!(total > 500, "only {total} reads in 3 s");
    eprintln!("{total} reads, {killed} connections killed under them, no error");
}
