//! The statement path allocates nothing: sextant counts its heap
//! allocations (SEXTANT_COUNT_ALLOCATIONS=1, shown by SHOW STATUS) while a
//! client runs thousands of reads and writes, text and prepared, through it.

mod common;
use common::*;
use mysql::prelude::Queryable;

type Statement<'a> = dyn FnMut(&mut mysql::Conn) + 'a;

fn allocations(p: &Proxy) -> u64 {
    let rows: Vec<(String, String)> = p.admin().query("SHOW STATUS").unwrap();
    rows.iter()
        .find(|(k, _)| k == "allocations")
        .map(|(_, v)| v.parse().unwrap())
        .expect("SHOW STATUS has allocations when counting is on")
}

#[test]
fn relaying_statements_allocates_nothing_per_statement() {
    // No monitor: its checks allocate on their own schedule and would blur
    // the count. hold_ms default: the session keeps its connection.
    let p = Setup {
        group: "[monitor]\nenabled = false\n",
        count_allocations: true,
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    c.query_drop("CREATE TABLE IF NOT EXISTS alloc_t (id INT PRIMARY KEY, v INT)")
        .unwrap();
    c.query_drop("REPLACE INTO alloc_t VALUES (1, 1)").unwrap();
    sync_replicas();
    let read = c.prep("SELECT v FROM alloc_t WHERE id = ?").unwrap();
    let write = c.prep("UPDATE alloc_t SET v = v + 1 WHERE id = ?").unwrap();
    // Warm up: connections opened, statements prepared, buffers grown.
    for _ in 0..200 {
        c.query_drop("SELECT v FROM alloc_t WHERE id = 1").unwrap();
        c.query_drop("UPDATE alloc_t SET v = v + 1 WHERE id = 1")
            .unwrap();
        let _: Option<i32> = c.exec_first(&read, (1,)).unwrap();
        c.exec_drop(&write, (1,)).unwrap();
    }
    // What asking costs (an admin login and query), to subtract.
    let a0 = allocations(&p);
    let a1 = allocations(&p);
    let asking = a1 - a0;
    // Enough statements that what background tasks allocate now and then
    // (a few dozen per second, whichever phase they fall in) stays far
    // under the bound, while one allocation per hundred statements fails.
    let rounds = 5_000;
    let mut total = 0;
    let mut last = a1;
    // The reads go first: right after thousands of writes, reads that
    // must see them wait on replicas still applying them (a path of its
    // own, which the monitor, off here, would otherwise spare them), and
    // how many do depends on the machine's load.
    let kinds: [(&str, &mut Statement); 4] = [
        ("text read", &mut |c| {
            c.query_drop("SELECT v FROM alloc_t WHERE id = 1").unwrap()
        }),
        ("prepared read", &mut |c| {
            let _: Option<i32> = c.exec_first(&read, (1,)).unwrap();
        }),
        ("text write", &mut |c| {
            c.query_drop("UPDATE alloc_t SET v = v + 1 WHERE id = 1")
                .unwrap()
        }),
        ("prepared write", &mut |c| {
            c.exec_drop(&write, (1,)).unwrap()
        }),
    ];
    let mut report = Vec::new();
    for (name, run) in kinds {
        for _ in 0..rounds {
            run(&mut c);
        }
        let now = allocations(&p);
        let spent = (now - last).saturating_sub(asking);
        report.push(format!("{name}: {spent}"));
        total += spent;
        last = now;
    }
    let statements = 4 * rounds;
    eprintln!(
        "allocations per {rounds} statements: {} (asking costs {asking})",
        report.join(", ")
    );
    assert!(
        total * 100 < statements,
        "{total} allocations for {statements} statements: the statement path allocates ({})",
        report.join(", ")
    );
}

/// `sessions` clients, each running `rounds` plain reads at once with the
/// others, text and then prepared, after a warm-up (pool and pipes
/// opened, statements prepared, buffers grown). Returns the statements
/// run, the allocations sextant made meanwhile, how many of the reads went
/// through pipes, and a line to report.
fn concurrent_reads(p: &Proxy, sessions: usize, rounds: usize) -> (u64, u64, u64, String) {
    let mut c = p.conn();
    c.query_drop("CREATE TABLE IF NOT EXISTS alloc_p (id INT PRIMARY KEY, v INT)")
        .unwrap();
    c.query_drop("REPLACE INTO alloc_p VALUES (1, 1)").unwrap();
    sync_replicas();
    drop(c);
    let mut conns: Vec<mysql::Conn> = (0..sessions).map(|_| p.conn()).collect();
    let reads: Vec<mysql::Statement> = conns
        .iter_mut()
        .map(|c| c.prep("SELECT v FROM alloc_p WHERE id = ?").unwrap())
        .collect();
    let phase = |conns: &mut Vec<mysql::Conn>, prepared: bool, n: usize| {
        std::thread::scope(|s| {
            for (c, read) in conns.iter_mut().zip(&reads) {
                s.spawn(move || {
                    for _ in 0..n {
                        let v: Option<i32> = if prepared {
                            c.exec_first(read, (1,)).unwrap()
                        } else {
                            c.query_first("SELECT v FROM alloc_p WHERE id = 1").unwrap()
                        };
                        assert_eq!(v, Some(1));
                    }
                });
            }
        })
    };
    phase(&mut conns, false, 300);
    phase(&mut conns, true, 300);
    let a0 = allocations(p);
    let a1 = allocations(p);
    let asking = a1 - a0;
    let piped0 = p.backends_sum("pipelined");
    let mut report = Vec::new();
    let mut total = 0;
    let mut last = allocations(p);
    for (name, prepared) in [("text reads", false), ("prepared reads", true)] {
        phase(&mut conns, prepared, rounds);
        let now = allocations(p);
        let spent = (now - last).saturating_sub(asking);
        report.push(format!("{name}: {spent}"));
        total += spent;
        last = now;
    }
    let statements = (2 * sessions * rounds) as u64;
    let piped = p.backends_sum("pipelined") - piped0;
    let report = format!(
        "{piped} of {statements} reads pipelined; allocations: {} (asking costs {asking})",
        report.join(", ")
    );
    eprintln!("{report}");
    (statements, total, piped, report)
}

#[test]
fn pipelined_reads_allocate_nothing_per_statement() {
    // Sessions that hold no connection between statements, on one worker
    // thread (crowded enough that reads take pipes), and pipes deep enough
    // for all of them: concurrent plain reads share the pipes, each
    // waiting for its turn on the connection.
    let p = Setup {
        proxy: "threads = 1\n",
        group: "pipeline_depth = 16\npipeline_connections = 1\n[routing]\nhold_ms = 0\n\
                [monitor]\nenabled = false\n",
        count_allocations: true,
        ..Default::default()
    }
    .start();
    let (statements, total, piped, report) = concurrent_reads(&p, 16, 1_250);
    assert!(
        piped * 2 > statements,
        "most reads should have gone through pipes: {report}"
    );
    assert!(
        total * 100 < statements,
        "the pipelined path allocates: {report}"
    );
}

#[test]
fn sessions_of_two_threads_sharing_a_pool_rarely_move_connections() {
    // Sessions that take a connection from the pool for each statement and
    // give it back, on two worker threads: the connections they take must
    // not move between the threads' reactors on every statement (each move
    // is an allocation in tokio, and two epoll_ctl calls). A thread whose
    // own connections are all busy still takes the other's: that happens
    // on a few statements per thousand (6-13 measured, more on a loaded
    // machine), where taking any connection moved one on 780.
    let p = Setup {
        proxy: "threads = 2\n",
        group: "pipeline_depth = 0\n[routing]\nhold_ms = 0\n[monitor]\nenabled = false\n",
        count_allocations: true,
        ..Default::default()
    }
    .start();
    let (statements, total, piped, report) = concurrent_reads(&p, 8, 2_500);
    assert_eq!(piped, 0, "no pipes: {report}");
    assert!(
        total * 25 < statements,
        "taking connections from the pool allocates: {report}"
    );
}
