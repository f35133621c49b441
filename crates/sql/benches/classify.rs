//! Classification cost per statement (budget: well under 1 us).
//! Run: cargo bench -p sextant-sql

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use sextant_sql::{classify, Catalogue, ServerKind};

const STATEMENTS: &[(&str, &str)] = &[
    ("point_select", "SELECT c FROM sbtest1 WHERE id=4523"),
    ("hinted", "/*#mode=READWRITE*/ SELECT c FROM sbtest1 WHERE id=4523"),
    ("range_order", "SELECT c FROM sbtest3 WHERE id BETWEEN 5012 AND 5111 ORDER BY c"),
    ("update", "UPDATE sbtest2 SET k=k+1 WHERE id=5012"),
    (
        "insert",
        "INSERT INTO sbtest1 (id, k, c, pad) VALUES (0, 5021, '68487932199-96439406143-93774651418-41631865787', '22195207048-70116052123-74140395089-76317954521-98694025897')",
    ),
    (
        "join_functions",
        "SELECT o.id, COUNT(*), SUM(l.qty * l.price), MAX(o.created_at) FROM orders o JOIN lines l ON l.order_id = o.id WHERE o.customer_id IN (1, 2, 3) AND o.status <> 'void' GROUP BY o.id ORDER BY 3 DESC LIMIT 20",
    ),
    ("for_update", "SELECT k FROM sbtest1 WHERE id = 17 FOR UPDATE"),
    ("set_names", "SET NAMES utf8mb4 COLLATE utf8mb4_general_ci"),
];

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("classify");
    for (name, sql) in STATEMENTS {
        g.bench_function(*name, |b| b.iter(|| classify(black_box(sql.as_bytes()))));
    }
    g.finish();
    // What a group's catalogue adds when it lists the server's tables (a
    // read's names in a table's place are looked up).
    let tables = (1..=16)
        .map(|i| format!("sbtest{i}"))
        .chain(["orders", "lines"].map(String::from));
    let cat = Catalogue::new(Some(ServerKind::MariaDb), Vec::<String>::new(), Vec::new())
        .with_tables(tables);
    let mut g = c.benchmark_group("classify_with_tables");
    for (name, sql) in STATEMENTS {
        g.bench_function(*name, |b| {
            b.iter(|| cat.classify(black_box(sql.as_bytes())))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
