//! Servers failing under write load: the primary killed with SIGKILL and
//! restarted, and every connection sextant holds killed from the server
//! side. (Its own test binary, with its own lab: it kills lab servers.)

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn code(e: &mysql::Error) -> Option<u16> {
    match e {
        mysql::Error::MySqlError(e) => Some(e.code),
        _ => None,
    }
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
    let stop = Arc::new(AtomicBool::new(false));
    let restarted_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (stop, restarted_at) = (stop.clone(), restarted_at.clone());
            let url = p.url("app", "apppass", "sextant_test");
            std::thread::spawn(move || {
                let connect = || mysql::Conn::new(mysql::Opts::from_url(&url).unwrap()).ok();
                let mut conn = connect();
                let (mut acked, mut after_restart, mut errors) = (Vec::new(), 0, Vec::new());
                let mut seq = 0;
                while !stop.load(Ordering::Relaxed) {
                    seq += 1;
                    let Some(c) = conn.as_mut() else {
                        std::thread::sleep(Duration::from_millis(50));
                        conn = connect();
                        continue;
                    };
                    match c.exec_drop("INSERT INTO kn_t (writer, seq) VALUES (?, ?)", (w, seq)) {
                        Ok(()) => {
                            acked.push(seq);
                            if restarted_at.lock().unwrap().is_some() {
                                after_restart += 1;
                            }
                        }
                        Err(e) => {
                            errors.push(code(&e));
                            if code(&e).is_none() {
                                // The session itself was lost: a new one.
                                conn = None;
                            } else {
                                std::thread::sleep(Duration::from_millis(20));
                            }
                        }
                    }
                }
                (acked, after_restart, errors)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    kill_lab_server(0);
    std::thread::sleep(Duration::from_millis(1500));
    restart_lab_server(0);
    p.wait_state(lab().primary, "up", Duration::from_secs(30));
    *restarted_at.lock().unwrap() = Some(Instant::now());
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let mut d = direct(lab().primary);
    let mut total_acked = 0;
    for (w, h) in writers.into_iter().enumerate() {
        let (acked, after_restart, errors) = h.join().expect("writer");
        let rows: Vec<i32> = d
            .exec("SELECT seq FROM sextant_test.kn_t WHERE writer = ?", (w,))
            .unwrap();
        let present: HashSet<i32> = rows.iter().copied().collect();
        assert_eq!(
            present.len(),
            rows.len(),
            "writer {w}: {} rows written twice",
            rows.len() - present.len()
        );
        let lost: Vec<_> = acked.iter().filter(|s| !present.contains(s)).collect();
        assert!(
            lost.is_empty(),
            "writer {w}: acknowledged rows lost: {lost:?}"
        );
        assert!(
            after_restart > 0,
            "writer {w} wrote nothing after the restart; errors {errors:?}"
        );
        // What a client may see meanwhile: 9003 (may or may not have
        // run), 9004 (no primary), 9001 (no connection), never a silent loss.
        for e in &errors {
            assert!(
                matches!(e, None | Some(9001 | 9003 | 9004)),
                "writer {w}: unexpected error {e:?}"
            );
        }
        total_acked += acked.len();
    }
    eprintln!("{total_acked} acknowledged rows, all present once");
}

/// An operator kills every connection sextant holds (server-side KILL) on
/// every server, over and over: no statement that had not started when its
/// connection was killed fails, and the monitor (whose connections die
/// too) keeps every server in rotation.
#[test]
fn server_side_kill_of_pooled_connections() {
    let _g = serial();
    let p = Setup {
        group: "[routing]\nhold_ms = 0\nconsistency = \"eventual\"\n",
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    c.query_drop("CREATE TABLE IF NOT EXISTS kk_t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        .unwrap();
    sync_replicas();
    let servers: Vec<u16> = std::iter::once(lab().primary)
        .chain(lab().replicas.iter().copied())
        .collect();
    let mut killers: Vec<mysql::Conn> = servers.iter().map(|&s| direct(s)).collect();
    let kill_all = |killers: &mut Vec<mysql::Conn>| -> usize {
        let mut n = 0;
        for k in killers.iter_mut() {
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
    };
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
        killed += kill_all(&mut killers);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(killed >= 15, "only {killed} connections were killed");
    for &s in &servers {
        assert_eq!(p.state_of(s), "up", "server {s} left rotation");
    }
}
