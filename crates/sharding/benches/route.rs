//! What routing by a sharded layout costs a statement, once its shape is
//! cached: sysbench's point select and a TPC-C statement, text and
//! prepared. Compare with `classify` (crates/sql/benches), which every
//! statement pays with or without sharding.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use sextant_sharding::{cetus, Lit, Router, Unlisted};
use sextant_sql::LexMode;

fn router() -> Router {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/part.json"
    ))
    .expect("part.json");
    let mut layout = cetus::parse(&text, "part.json", Unlisted::DefaultGroup).expect("layout");
    // sysbench's table, sharded on id.
    let t = sextant_sharding::ShardedTable {
        db: "sbtest".into(),
        table: "sbtest1".into(),
        key: "id".into(),
        vdb: 1,
    };
    layout.tables.insert(("sbtest".into(), "sbtest1".into()), t);
    Router::new(layout)
}

fn bench(c: &mut Criterion) {
    let r = router();
    let point = b"SELECT c FROM sbtest1 WHERE id=5021";
    let cp = sextant_sql::classify(point);
    c.bench_function("route point select (text)", |b| {
        b.iter(|| black_box(r.route(Some("sbtest"), black_box(point), LexMode::DEFAULT, &[], &cp)))
    });
    let prepared = b"SELECT c FROM sbtest1 WHERE id=?";
    let pp = sextant_sql::classify(prepared);
    let params = [Lit::Int(5021)];
    c.bench_function("route point select (prepared)", |b| {
        b.iter(|| {
            black_box(r.route(
                Some("sbtest"),
                black_box(prepared),
                LexMode::DEFAULT,
                &params,
                &pp,
            ))
        })
    });
    let tpcc = b"SELECT c_discount, c_last, c_credit, w_tax FROM customer, warehouse WHERE w_id = 3 AND c_w_id = w_id AND c_d_id = 7 AND c_id = 1234";
    let ct = sextant_sql::classify(tpcc);
    c.bench_function("route TPC-C customer/warehouse join", |b| {
        b.iter(|| {
            black_box(r.route(
                Some("tpcc_shard"),
                black_box(tpcc),
                LexMode::DEFAULT,
                &[],
                &ct,
            ))
        })
    });
    c.bench_function("classify point select (every statement)", |b| {
        b.iter(|| black_box(sextant_sql::classify(black_box(point))))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
