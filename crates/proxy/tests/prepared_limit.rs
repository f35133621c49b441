//! The server's max_prepared_stmt_count is shared by all its clients:
//! sextant's pooled connections keep their cached server-side statements
//! within half of it, so that no client's prepare fails with 1461 because
//! of statements other clients left. (Its own test binary: it lowers the
//! lab primary's global limit.)

mod common;
use common::*;
use mysql::prelude::Queryable;

/// Puts the server's limit back when the test ends, however it ends.
struct Limit(u64);

impl Drop for Limit {
    fn drop(&mut self) {
        let _ = direct(lab().primary)
            .query_drop(format!("SET GLOBAL max_prepared_stmt_count = {}", self.0));
    }
}

/// The tests change the server's global limit: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The primary's limit set to `n` until the returned guards drop, and a
/// direct connection to it.
fn limited(n: u64) -> (std::sync::MutexGuard<'static, ()>, Limit, mysql::Conn) {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut d = direct(lab().primary);
    let old: Option<u64> = d
        .query_first("SELECT @@global.max_prepared_stmt_count")
        .unwrap();
    let restore = Limit(old.unwrap_or(16382));
    d.query_drop(format!("SET GLOBAL max_prepared_stmt_count = {n}"))
        .unwrap();
    (serial, restore, d)
}

#[test]
fn many_clients_preparing_stay_within_the_servers_limit() {
    let (_serial, _restore, mut d) = limited(2000);
    let p = Setup {
        group: "pool_max = 40\n",
        no_replicas: true,
        ..Default::default()
    }
    .start();
    // The monitor reads the limit at its first check.
    p.wait_state(lab().primary, "up", std::time::Duration::from_secs(10));
    std::thread::sleep(std::time::Duration::from_millis(500));
    // 1,000 clients (200 at a time, on 40 server connections), each
    // preparing, running and closing 100 statements of its own: 100,000
    // distinct statements against a server that holds at most 2,000.
    let errors = std::sync::Mutex::new(Vec::new());
    for batch in 0..5 {
        std::thread::scope(|scope| {
            for t in 0..200 {
                let p = &p;
                let errors = &errors;
                scope.spawn(move || {
                    let client = batch * 200 + t;
                    let mut c = p.conn();
                    for i in 0..100 {
                        let sql = format!("SELECT ? + {}", client * 1000 + i);
                        match c.prep(&sql) {
                            Ok(st) => {
                                let v: Option<i64> = c.exec_first(&st, (1,)).unwrap();
                                assert_eq!(v, Some(1 + (client * 1000 + i) as i64));
                                c.close(st).unwrap();
                            }
                            Err(e) => errors.lock().unwrap().push(e.to_string()),
                        }
                    }
                });
            }
        });
    }
    let errors = errors.into_inner().unwrap();
    assert!(
        errors.is_empty(),
        "{} prepares failed, e.g. {:?}",
        errors.len(),
        errors.first()
    );
    let held: Option<(String, u64)> = d
        .query_first("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'")
        .unwrap();
    let held = held.map_or(0, |r| r.1);
    assert!(held <= 1000, "the server holds {held} prepared statements");
}

/// The limit lowered at run time below what sextant's connections keep:
/// a prepare the server refuses with 1461 makes sextant close the
/// statements it keeps and send the prepare again, so clients that
/// prepare, run and close go on working.
#[test]
fn a_limit_lowered_at_run_time_frees_what_sextant_keeps() {
    let (_serial, _restore, mut d) = limited(16382);
    let p = Setup {
        group: "pool_max = 4\n",
        no_replicas: true,
        ..Default::default()
    }
    .start();
    p.wait_state(lab().primary, "up", std::time::Duration::from_secs(10));
    let run = |from: usize, n: usize| -> Vec<String> {
        let mut errors = Vec::new();
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|t| {
                    let p = &p;
                    scope.spawn(move || {
                        let mut errors = Vec::new();
                        let mut c = p.conn();
                        for i in 0..n {
                            let sql = format!("SELECT ? + {}", from + t * 1000 + i);
                            match c.prep(&sql) {
                                Ok(st) => {
                                    let v: Option<i64> = c.exec_first(&st, (1,)).unwrap();
                                    assert_eq!(v, Some(1 + (from + t * 1000 + i) as i64));
                                    c.close(st).unwrap();
                                }
                                Err(e) => errors.push(e.to_string()),
                            }
                        }
                        errors
                    })
                })
                .collect();
            for h in handles {
                errors.extend(h.join().unwrap());
            }
        });
        errors
    };
    // sextant keeps the statements its connections prepared.
    assert!(run(0, 40).is_empty());
    let held: Option<(String, u64)> = d
        .query_first("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'")
        .unwrap();
    let held = held.map_or(0, |r| r.1);
    assert!(held > 10, "sextant keeps {held} statements");
    d.query_drop("SET GLOBAL max_prepared_stmt_count = 10")
        .unwrap();
    // At once, before the monitor has read the new limit.
    let errors = run(100_000, 10);
    assert!(
        errors.is_empty(),
        "{} prepares failed after the limit was lowered, e.g. {:?}",
        errors.len(),
        errors.first()
    );
}
