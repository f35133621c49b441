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
    let kinds: [(&str, &mut Statement); 4] = [
        ("text read", &mut |c| {
            c.query_drop("SELECT v FROM alloc_t WHERE id = 1").unwrap()
        }),
        ("text write", &mut |c| {
            c.query_drop("UPDATE alloc_t SET v = v + 1 WHERE id = 1")
                .unwrap()
        }),
        ("prepared read", &mut |c| {
            let _: Option<i32> = c.exec_first(&read, (1,)).unwrap();
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
