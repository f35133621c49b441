//! A server that stops answering without closing its connections (SIGSTOP:
//! a frozen machine, a stalled disk). Its own lab: the other tests'
//! servers must not freeze under them.

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::time::{Duration, Instant};

/// The tests freeze the same replica: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// With query_timeout_ms, a plain read stuck on a stalled replica moves to
/// another server within the timeout; the client sees no error and no read
/// waits for the replica to come back.
#[test]
fn reads_on_a_stalled_replica_move_within_the_query_timeout() {
    let _g = serial();
    let p = Setup {
        group: "query_timeout_ms = 1000\n[routing]\nhold_ms = 0\nconsistency = \"eventual\"\n",
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    for _ in 0..4 {
        let _: Option<i32> = c.query_first("SELECT 1").unwrap();
    }
    let stalled = stall_lab_server(1);
    // Thawed after 8 s whatever happens, so that a read stuck on it shows
    // as a long wait instead of hanging the test.
    let thaw = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(8));
        drop(stalled);
    });
    let mut worst = Duration::ZERO;
    for _ in 0..10 {
        let t = Instant::now();
        let v: Option<i32> = c.query_first("SELECT 41 + 1").unwrap();
        assert_eq!(v, Some(42));
        worst = worst.max(t.elapsed());
    }
    let _ = thaw.join();
    assert!(
        worst < Duration::from_millis(2500),
        "a read waited {worst:?} on the stalled replica"
    );
    // The replica is back in rotation once it answers again.
    p.wait_state(lab().replicas[0], "up", Duration::from_secs(10));
}

/// Without query_timeout_ms, a read already running on a replica that
/// freezes is abandoned once the monitor finds the replica down (within
/// its interval plus connect timeout), and runs again on another server:
/// the client sees its answer, not a wait for the replica to come back.
#[test]
fn reads_on_a_frozen_replica_move_once_the_monitor_finds_it_down() {
    let _g = serial();
    let p = Setup {
        group: "connect_timeout_ms = 500\n[routing]\nhold_ms = 0\nconsistency = \"eventual\"\n[monitor]\ninterval_ms = 300\n",
        ..Default::default()
    }
    .start();
    p.wait_state(lab().replicas[0], "up", Duration::from_secs(10));
    let started = Instant::now();
    let readers: Vec<_> = (0..6)
        .map(|_| {
            let mut c = p.conn();
            std::thread::spawn(move || {
                let v: Option<(i32, i32)> = c.query_first("SELECT SLEEP(2), 42").unwrap();
                assert_eq!(v, Some((0, 42)));
                Instant::now()
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    // The replica running reads now (which one the readers reached is the
    // balancing's choice, not the test's).
    let busy = busy_replica(&p);
    let stalled = stall_lab_server(1 + lab().replicas.iter().position(|r| *r == busy).unwrap());
    let thaw = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(10));
        drop(stalled);
    });
    let mut worst = Duration::ZERO;
    for r in readers {
        worst = worst.max(r.join().expect("reader").duration_since(started));
    }
    let logs = p.logs();
    let _ = thaw.join();
    assert!(
        logs.contains("the monitor found the server down"),
        "no read was abandoned on the frozen replica"
    );
    assert!(
        worst < Duration::from_secs(7),
        "a read took {worst:?}: it waited for the frozen replica"
    );
    p.wait_state(busy, "up", Duration::from_secs(10));
}

/// A replica with statements in flight, by SHOW BACKENDS (within 2 s).
fn busy_replica(p: &Proxy) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let rows: Vec<mysql::Row> = p.admin().query("SHOW BACKENDS").unwrap();
        for r in &rows {
            let address: String = r.get("address").unwrap();
            let in_flight: String = r.get("in_flight").unwrap();
            let port = lab()
                .replicas
                .iter()
                .find(|port| address == format!("127.0.0.1:{port}"));
            if let (Some(port), true) = (port, in_flight != "0") {
                return *port;
            }
        }
        assert!(Instant::now() < deadline, "no replica runs a read");
        std::thread::sleep(Duration::from_millis(20));
    }
}
