//! Read-your-writes across a fleet: a write acknowledged by one instance
//! is seen by the same user's next read on another instance (another
//! connection), while the replicas lag in bursts (their SQL thread
//! stopped for up to 2 s at a time). Against the lab's primary and two
//! replicas and a real etcd; the same run with `consistency = "eventual"`
//! shows the stale reads the guarantee prevents.

mod common;

use common::*;
use mysql::prelude::Queryable;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Lag is no reason to leave rotation here (max_replica_lag_ms = 0), and
/// no read stays on the primary after its session's write (hold_ms = 0):
/// a lagging replica keeps taking reads, and only the consistency mode
/// keeps them from being stale.
fn member(etcd: &Etcd, id: &str) -> Proxy {
    let cluster = format!(
        "max_replica_lag_ms = 0\n[routing]\nhold_ms = 0\n{}",
        etcd.cluster("ryw", id)
    );
    Setup {
        group: &cluster,
        ..Default::default()
    }
    .start()
}

/// Stops one replica's SQL thread at a time for 0.1-2 s, with short
/// breaks, until `stop`.
fn lag_in_bursts(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u32> {
    std::thread::spawn(move || {
        let replicas = lab().replicas.clone();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut bursts = 0;
        while !stop.load(Ordering::Relaxed) {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let r = replicas[(rng % replicas.len() as u64) as usize];
            let pause = Duration::from_millis(100 + rng % 1900);
            let mut c = direct(r);
            c.query_drop("STOP SLAVE SQL_THREAD").unwrap();
            std::thread::sleep(pause);
            c.query_drop("START SLAVE SQL_THREAD").unwrap();
            bursts += 1;
            std::thread::sleep(Duration::from_millis(100));
        }
        bursts
    })
}

/// `pairs` pairs over 8 threads, each writing a row on one instance and
/// reading it back on the other (alternately A then B, B then A), each
/// thread with its own two connections. Returns the stale reads and the
/// reads' latencies (microseconds, sorted).
fn pairs(a: &Proxy, b: &Proxy, pairs: u64, base: u64) -> (u64, Vec<u64>) {
    let stale = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let (ua, ub) = (
                a.url("app", "apppass", "sextant_test"),
                b.url("app", "apppass", "sextant_test"),
            );
            let stale = stale.clone();
            std::thread::spawn(move || {
                let open = |u: &str| mysql::Conn::new(mysql::Opts::from_url(u).unwrap()).unwrap();
                let (mut ca, mut cb) = (open(&ua), open(&ub));
                let mut lat = Vec::new();
                for i in 0..pairs / 8 {
                    let id = base + t * 10_000_000 + i;
                    let (w, r) = match i % 2 {
                        0 => (&mut ca, &mut cb),
                        _ => (&mut cb, &mut ca),
                    };
                    w.query_drop(format!("INSERT INTO ryw VALUES ({id}, {t})"))
                        .unwrap();
                    let started = Instant::now();
                    let n: i64 = r
                        .query_first(format!("SELECT COUNT(*) FROM ryw WHERE id = {id}"))
                        .unwrap()
                        .unwrap();
                    lat.push(started.elapsed().as_micros() as u64);
                    if n != 1 {
                        stale.fetch_add(1, Ordering::Relaxed);
                    }
                }
                lat
            })
        })
        .collect();
    let mut lat: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("pair thread"))
        .collect();
    lat.sort_unstable();
    (stale.load(Ordering::Relaxed), lat)
}

fn pct(lat: &[u64], p: usize) -> u64 {
    lat[(lat.len() * p / 100).min(lat.len() - 1)]
}

#[test]
fn a_write_on_one_instance_is_read_on_another() {
    let etcd = Etcd::start();
    let (a, b) = (member(&etcd, "a"), member(&etcd, "b"));
    let mut p = direct(lab().primary);
    p.query_drop("DROP TABLE IF EXISTS sextant_test.ryw")
        .unwrap();
    p.query_drop("CREATE TABLE sextant_test.ryw (id BIGINT PRIMARY KEY, t INT) ENGINE=InnoDB")
        .unwrap();
    // What the guarantee costs a read, replicas in step; and the primary
    // (its SELECTs, which the reads' position queries are among).
    let selects = |c: &mut mysql::Conn| -> u64 {
        let (_, v): (String, u64) = c
            .query_first("SHOW GLOBAL STATUS LIKE 'Com_select'")
            .unwrap()
            .unwrap();
        v
    };
    let before = selects(&mut p);
    let (stale, quiet) = pairs(&a, &b, 4_000, 0);
    let primary_selects = selects(&mut p) - before - 1;
    assert_eq!(stale, 0, "stale reads with the replicas in step");

    // 100,000 pairs with the replicas lagging 0-2 s in bursts.
    let stop = Arc::new(AtomicBool::new(false));
    let lagger = lag_in_bursts(stop.clone());
    let started = Instant::now();
    let (stale, lagging) = pairs(&a, &b, 100_000, 1_000_000_000);
    stop.store(true, Ordering::Relaxed);
    let bursts = lagger.join().expect("lag thread");
    assert!(bursts >= 3, "the replicas lagged only {bursts} times");
    assert_eq!(
        stale, 0,
        "a read on one instance missed a write acknowledged on another"
    );
    let took = started.elapsed();

    // The same with consistency = "eventual", set for the whole fleet:
    // the stale reads exist.
    a.admin()
        .query_drop("SET consistency = 'eventual'")
        .expect("SET consistency");
    std::thread::sleep(Duration::from_millis(500));
    let (eventual_quiet_stale, eventual_quiet) = pairs(&a, &b, 4_000, 2_000_000_000);
    let stop = Arc::new(AtomicBool::new(false));
    let lagger = lag_in_bursts(stop.clone());
    let (eventual_stale, _) = pairs(&a, &b, 20_000, 3_000_000_000);
    stop.store(true, Ordering::Relaxed);
    lagger.join().expect("lag thread");
    assert!(
        eventual_stale > 0,
        "with eventual consistency and lagging replicas some reads should be stale"
    );
    eprintln!(
        "fleet read-your-writes: 100,000 pairs in {took:?} over {bursts} lag bursts, 0 stale; \
         read after a write on the other instance, replicas in step: p50 {} us, p99 {} us, \
         {primary_selects} SELECTs on the primary for 4,000 reads \
         (eventual: p50 {} us, p99 {} us, {eventual_quiet_stale} stale); \
         with lagging replicas: p50 {} us, p99 {} us; eventual with lagging replicas: {eventual_stale} of 20,000 stale",
        pct(&quiet, 50),
        pct(&quiet, 99),
        pct(&eventual_quiet, 50),
        pct(&eventual_quiet, 99),
        pct(&lagging, 50),
        pct(&lagging, 99),
    );
}
