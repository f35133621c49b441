//! A service registry's incremental sync through a fleet: writers replace
//! an instance row and upsert its metadata rows in one transaction, readers read
//! the instances changed since their last look and then, in a second
//! statement, those instances' metadata. Through HAProxy to three sextant
//! instances (each statement may reach any of them) on the lab's primary
//! and two replicas, made to lag in bursts: with read-your-writes (the
//! default) no reader ever finds an instance without its metadata; with
//! `consistency = "eventual"` the same run does.

mod common;

use common::*;
use mysql::prelude::Queryable;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Metadata rows per instance.
const META: i64 = 4;

fn member(etcd: &Etcd, id: &str) -> Proxy {
    let cluster = format!(
        "max_replica_lag_ms = 0\n[routing]\nhold_ms = 0\n{}",
        etcd.cluster("registry", id)
    );
    Setup {
        proxy: "proxy_protocol_from = [\"127.0.0.1\"]",
        group: &cluster,
        http: true,
        ..Default::default()
    }
    .start()
}

struct Outcome {
    replaced: u64,
    looked: u64,
    without_metadata: u64,
}

/// `writers` and `readers` threads for `seconds` through `port`, the
/// replicas' SQL threads stopped in bursts of 0.1-1 s meanwhile. Each
/// writer registers a new instance (ids from `base` up) and replaces it
/// once more after: a reader that finds a new instance without its
/// metadata read it from a replica that had not applied it.
fn run(port: u16, base: i64, writers: u64, readers: u64, seconds: u64) -> Outcome {
    let url = format!("mysql://app:apppass@127.0.0.1:{port}/sextant_test?prefer_socket=false");
    let stop = Arc::new(AtomicBool::new(false));
    let (replaced, looked, missing) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    // Until the run stops: a fleet that cannot take a client (its
    // primary gone) ends the run, not hangs it.
    let open = |url: &str, stop: &AtomicBool| loop {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        match mysql::Conn::new(mysql::Opts::from_url(url).unwrap()) {
            Ok(c) => return Some(c),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    // Readers start from now: what earlier runs wrote is not theirs.
    let start: String = direct(lab().primary)
        .query_first("SELECT CAST(NOW(6) AS CHAR)")
        .unwrap()
        .unwrap();
    let mut threads = Vec::new();
    for w in 0..writers {
        let (url, stop, replaced) = (url.clone(), stop.clone(), replaced.clone());
        threads.push(std::thread::spawn(move || {
            let Some(mut c) = open(&url, &stop) else {
                return;
            };
            let mut k = 0i64;
            while !stop.load(Ordering::Relaxed) {
                let id = base + w as i64 * 1_000_000 + k / 2;
                k += 1;
                let meta: Vec<String> = (0..META)
                    .map(|k| format!("({id}, 'k{k}', 'v{w}')"))
                    .collect();
                let r = (|| -> mysql::Result<()> {
                    c.query_drop("BEGIN")?;
                    c.query_drop(format!(
                        "REPLACE INTO registry_instance (id, mtime) VALUES ({id}, NOW(6))"
                    ))?;
                    // An upsert, not DELETE + INSERT: the DELETE's gap locks
                    // would have 200 writers deadlock on each other.
                    c.query_drop(format!(
                        "INSERT INTO registry_metadata (id, mkey, mvalue) VALUES {} \
                         ON DUPLICATE KEY UPDATE mvalue = VALUES(mvalue)",
                        meta.join(",")
                    ))?;
                    c.query_drop("COMMIT")
                })();
                match r {
                    Ok(()) => {
                        replaced.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(_) => {
                        // A deadlock between writers of one id: again.
                        if c.query_drop("ROLLBACK").is_err() {
                            match open(&url, &stop) {
                                Some(n) => c = n,
                                None => return,
                            }
                        }
                    }
                }
            }
        }));
    }
    for _ in 0..readers {
        let (url, stop, looked, missing) =
            (url.clone(), stop.clone(), looked.clone(), missing.clone());
        let mut since = start.clone();
        threads.push(std::thread::spawn(move || {
            let Some(mut c) = open(&url, &stop) else {
                return;
            };
            while !stop.load(Ordering::Relaxed) {
                let changed: Vec<(i64, String)> = match c.query(format!(
                    "SELECT id, CAST(mtime AS CHAR) FROM registry_instance WHERE mtime >= '{since}' ORDER BY mtime LIMIT 100"
                )) {
                    Ok(rows) => rows,
                    Err(_) => {
                        match open(&url, &stop) {
                            Some(n) => c = n,
                            None => return,
                        }
                        continue;
                    }
                };
                if changed.is_empty() {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                let ids: Vec<String> = changed.iter().map(|(id, _)| id.to_string()).collect();
                let with: Vec<(i64, i64)> = match c.query(format!(
                    "SELECT id, COUNT(*) FROM registry_metadata WHERE id IN ({}) GROUP BY id",
                    ids.join(",")
                )) {
                    Ok(rows) => rows,
                    Err(_) => {
                        match open(&url, &stop) {
                            Some(n) => c = n,
                            None => return,
                        }
                        continue;
                    }
                };
                looked.fetch_add(changed.len() as u64, Ordering::Relaxed);
                for (id, _) in &changed {
                    if with.iter().find(|(i, _)| i == id).map(|(_, n)| *n) != Some(META) {
                        missing.fetch_add(1, Ordering::Relaxed);
                    }
                }
                if let Some((_, m)) = changed.last() {
                    since = m.clone();
                }
            }
        }));
    }
    // Lag in bursts.
    let lagger = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut rng = 0x2545_f491_4f6c_dd1du64;
            while !stop.load(Ordering::Relaxed) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let replicas = &lab().replicas;
                let r = replicas[(rng % replicas.len() as u64) as usize];
                let mut c = direct(r);
                c.query_drop("STOP SLAVE SQL_THREAD").unwrap();
                std::thread::sleep(Duration::from_millis(100 + rng % 900));
                c.query_drop("START SLAVE SQL_THREAD").unwrap();
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("client thread");
    }
    lagger.join().expect("lag thread");
    Outcome {
        replaced: replaced.load(Ordering::Relaxed),
        looked: looked.load(Ordering::Relaxed),
        without_metadata: missing.load(Ordering::Relaxed),
    }
}

#[test]
fn no_reader_finds_an_instance_without_its_metadata_on_any_instance() {
    let etcd = Etcd::start();
    let fleet: Vec<Proxy> = ["a", "b", "c"].iter().map(|id| member(&etcd, id)).collect();
    let mut p = direct(lab().primary);
    for sql in [
        "DROP TABLE IF EXISTS sextant_test.registry_instance",
        "DROP TABLE IF EXISTS sextant_test.registry_metadata",
        "CREATE TABLE sextant_test.registry_instance (id BIGINT PRIMARY KEY, mtime DATETIME(6) NOT NULL, KEY (mtime)) ENGINE=InnoDB",
        "CREATE TABLE sextant_test.registry_metadata (id BIGINT NOT NULL, mkey VARCHAR(32) NOT NULL, mvalue VARCHAR(64), PRIMARY KEY (id, mkey)) ENGINE=InnoDB",
    ] {
        p.query_drop(sql).unwrap();
    }
    let haproxy = HaProxy::start(&fleet.iter().collect::<Vec<_>>());
    let ryw = run(haproxy.port, 0, 200, 200, 20);
    assert!(ryw.replaced > 1_000, "too few writes: {}", ryw.replaced);
    assert!(ryw.looked > 1_000, "too few instances read: {}", ryw.looked);
    assert_eq!(
        ryw.without_metadata, 0,
        "instances read without their metadata under read_your_writes ({} read)",
        ryw.looked
    );
    // The same with eventual consistency: the failure exists.
    fleet[0]
        .admin()
        .query_drop("SET consistency = 'eventual'")
        .expect("SET consistency");
    std::thread::sleep(Duration::from_millis(500));
    let eventual = run(haproxy.port, 1_000_000_000, 200, 200, 10);
    assert!(
        eventual.without_metadata > 0,
        "with eventual consistency and lagging replicas some instances should lack their metadata ({} read)",
        eventual.looked
    );
    eprintln!(
        "registry through HAProxy to 3 instances: read_your_writes: {} replaced, {} instances read, 0 without metadata; eventual: {} replaced, {} read, {} without metadata",
        ryw.replaced, ryw.looked, eventual.replaced, eventual.looked, eventual.without_metadata
    );
}
