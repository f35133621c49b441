//! Pool lifecycle against real servers: idle connections are closed, old
//! ones replaced, and server-side prepared statements per connection stay
//! within their bound. (Its own test binary, so the server's global
//! prepared-statement count is this file's alone.)

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::time::Duration;

fn backend(p: &Proxy, role: &str, column: &str) -> u64 {
    let rows: Vec<mysql::Row> = p.admin().query("SHOW BACKENDS").unwrap();
    rows.iter()
        .filter(|r| r.get::<String, _>("role").unwrap() == role)
        .map(|r| r.get::<String, _>(column).unwrap().parse::<u64>().unwrap())
        .sum()
}

#[test]
fn idle_connections_close_down_to_pool_min() {
    let p = Setup {
        group: "idle_timeout_ms = 300\npool_min = 1\n[routing]\nhold_ms = 0\n",
        ..Default::default()
    }
    .start();
    let mut conns: Vec<_> = (0..4).map(|_| p.conn()).collect();
    // Four clients in transactions: four primary connections.
    for c in &mut conns {
        c.query_drop("BEGIN").unwrap();
        c.query_drop("DO 1").unwrap();
    }
    // (Plus the one sextant opened at start-up to learn the server version.)
    assert!(backend(&p, "primary", "conn_open") >= 4);
    for c in &mut conns {
        c.query_drop("COMMIT").unwrap();
    }
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        backend(&p, "primary", "conn_open"),
        1,
        "idle connections above pool_min stay open"
    );
    // pool_min is per server: no replica keeps more than one either.
    let rows: Vec<mysql::Row> = p.admin().query("SHOW BACKENDS").unwrap();
    for r in rows {
        let open: u64 = r.get::<String, _>("conn_open").unwrap().parse().unwrap();
        assert!(
            open <= 1,
            "{:?} keeps {open}",
            r.get::<String, _>("address")
        );
    }
}

#[test]
fn connections_are_replaced_after_max_lifetime() {
    let p = Setup {
        group: "max_lifetime_ms = 300\n[routing]\nhold_ms = 0\n",
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    let mut ids = std::collections::BTreeSet::new();
    for _ in 0..30 {
        let id: Option<u64> = c
            .query_first("/*#mode=READWRITE*/ SELECT @@pseudo_thread_id")
            .unwrap();
        ids.insert(id.unwrap());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        ids.len() >= 3,
        "one server connection for 1.5 s despite max_lifetime_ms = 300: {ids:?}"
    );
    assert!(backend(&p, "primary", "conn_open") <= 1);
}

fn prepared_count() -> u64 {
    status_counter(lab().primary, "Prepared_stmt_count")
}

#[test]
fn prepared_statements_per_connection_are_bounded() {
    let p = Setup {
        group: "pool_max = 1\nmax_prepared_per_connection = 4\n",
        ..Default::default()
    }
    .start();
    let before = prepared_count();
    let mut r = Raw::login(p.port, "app", "apppass", None);
    let mut ids = Vec::new();
    for k in 0..20u32 {
        r.send(
            0,
            format!("\x16/*#mode=READWRITE*/ SELECT ? + {k}").as_bytes(),
        );
        let resp = r.read_response_as(sextant_protocol::tracker::Expect::Prepare);
        assert_eq!(resp[0][0], 0, "{}", String::from_utf8_lossy(&resp[0]));
        ids.push(u32::from_le_bytes(resp[0][1..5].try_into().unwrap()));
    }
    assert!(
        prepared_count() - before <= 4,
        "{} statements on the server",
        prepared_count() - before
    );
    // Every client statement still runs: evicted ones are prepared again.
    for (k, id) in ids.iter().enumerate().rev() {
        r.execute_one(*id, 0x08, &100i64.to_le_bytes()); // LONGLONG
        let resp = r.read_response_as(sextant_protocol::tracker::Expect::Execute);
        let row = resp
            .iter()
            .find(|p| p[0] == 0 && p.len() >= 10)
            .expect("a binary row");
        assert_eq!(
            i64::from_le_bytes(row[2..10].try_into().unwrap()),
            100 + k as i64
        );
    }
    assert!(prepared_count() - before <= 4);
}

/// More busy clients than server connections: the pool serves waiting
/// sessions in arrival order, so no client starves while others, already
/// running, keep re-taking the connections they give back.
#[test]
fn a_full_pool_serves_waiters_in_turn() {
    let p = Setup {
        group: "pool_max = 2\npool_wait_ms = 5000\n",
        no_replicas: true,
        ..Default::default()
    }
    .start();
    let stop = std::time::Instant::now() + Duration::from_secs(3);
    let clients: Vec<_> = (0..24)
        .map(|_| {
            let mut c = p.conn();
            std::thread::spawn(move || {
                let (mut n, mut worst) = (0u32, Duration::ZERO);
                while std::time::Instant::now() < stop {
                    let t = std::time::Instant::now();
                    c.query_drop("SELECT 1").unwrap();
                    worst = worst.max(t.elapsed());
                    n += 1;
                }
                (n, worst)
            })
        })
        .collect();
    let mut done: Vec<(u32, Duration)> = clients.into_iter().map(|t| t.join().unwrap()).collect();
    done.sort();
    let (least, most) = (done[0].0, done[done.len() - 1].0);
    let worst = done.iter().map(|d| d.1).max().unwrap();
    eprintln!("statements per client: {least}..{most}; slowest statement {worst:?}");
    assert!(least > 0, "a client never got a connection");
    assert!(
        least * 4 >= most,
        "unfair: one client ran {least} statements, another {most}"
    );
    assert!(
        worst < Duration::from_secs(1),
        "a statement waited {worst:?}"
    );
}
