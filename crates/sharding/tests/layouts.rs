//! Layouts from Cetus's files: what lives where (golden files, explained
//! as `check-config` prints it), where values go, and every kind of bad
//! file refused with its file, line and key.

use sextant_sharding::placement::{group_of, KeyValue};
use sextant_sharding::{cetus, Layout, LayoutError, Placement, Unlisted};
use std::path::Path;

fn golden(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn load(name: &str, unlisted: Unlisted) -> Layout {
    let path = golden(name);
    let text = std::fs::read_to_string(&path).expect("golden file");
    cetus::parse(&text, name, unlisted).unwrap_or_else(|e| panic!("{e}"))
}

fn check_explained(layout: &Layout, name: &str) {
    let got = layout.explain();
    let path = golden(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &got).expect("write golden");
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(got, want, "{name} (UPDATE_GOLDEN=1 rewrites it)");
}

#[test]
fn cetus_part_json_of_the_tpcc_report() {
    let l = load("part.json", Unlisted::DefaultGroup);
    check_explained(&l, "part.explain");
    let Placement::Sharded { table, vdb } = l.placement("TPCC_SHARD", "Warehouse") else {
        panic!("warehouse is sharded");
    };
    assert_eq!(table.key, "w_id");
    // Warehouse w lives in data((w mod 4) + 1).
    for w in 0..12i64 {
        let want = format!("data{}", w % 4 + 1);
        assert_eq!(
            group_of(vdb, KeyValue::Int(w)),
            Some(want.as_str()),
            "w_id {w}"
        );
    }
    assert_eq!(
        l.placement("tpcc_shard", "item"),
        Placement::Default { group: "data4" }
    );
    assert_eq!(l.placement("other_db", "t"), Placement::Unknown);
    assert_eq!(l.groups, ["data1", "data2", "data3", "data4"]);
    assert_eq!(l.undefined_groups(&["data1", "data2", "data3"]), ["data4"]);
    // Cetus's newer rule: tables not listed are global.
    let g = load("part.json", Unlisted::Global);
    match g.placement("tpcc_shard", "item") {
        Placement::Global { groups } => assert_eq!(groups.len(), 4),
        other => panic!("{other:?}"),
    }
}

#[test]
fn cetus_sharding_json_every_method() {
    let l = load("sharding.json", Unlisted::DefaultGroup);
    check_explained(&l, "sharding.explain");
    let vdb = |db: &str, t: &str| match l.placement(db, t) {
        Placement::Sharded { vdb, .. } => vdb,
        other => panic!("{t}: {other:?}"),
    };
    let orders = vdb("shop", "orders");
    assert_eq!(group_of(orders, KeyValue::Int(3)), Some("data1"));
    assert_eq!(group_of(orders, KeyValue::Int(13)), Some("data2"));
    assert_eq!(group_of(orders, KeyValue::Int(-1)), Some("data3"));
    let invoices = vdb("shop", "invoices");
    assert_eq!(group_of(invoices, KeyValue::Int(1000)), Some("data1"));
    assert_eq!(group_of(invoices, KeyValue::Int(2500)), Some("data2"));
    assert_eq!(group_of(invoices, KeyValue::Int(3001)), Some("data3"));
    let events = vdb("shop", "events");
    let t = sextant_sharding::dates::epoch("2024-06-30 12:00:00").unwrap();
    assert_eq!(group_of(events, KeyValue::Int(t)), Some("data2"));
    let users = vdb("shop", "users");
    assert_eq!(group_of(users, KeyValue::Str(b"alice")), Some("data1"));
    assert_eq!(group_of(users, KeyValue::Str(b"mallory")), Some("data2"));
    assert_eq!(group_of(users, KeyValue::Str(b"zoe")), Some("data3"));
    let sessions = vdb("shop", "sessions");
    assert!(group_of(sessions, KeyValue::Str(b"any token")).is_some());
    assert_eq!(
        l.placement("shop", "settings"),
        Placement::Single { group: "data2" }
    );
    assert_eq!(l.placement("shop", "unlisted"), Placement::Unknown);
}

#[test]
fn bad_files_are_refused_with_file_line_and_key() {
    let cases: &[(&str, &str)] = &[
        ("{\"vdb\": [", "bad.json: line 1, column 9"),
        (
            "{\"vdb\": [{\"id\": 1, \"type\": \"int\", \"method\": \"hash\", \"num\": 4,\n \"partitions\": {\"a\": [0, 1], \"b\": [2]}}]}",
            "bad.json: line 2: vdb[0].partitions: slots 3 are in no group",
        ),
        (
            "{\"vdb\": [{\"id\": 1, \"type\": \"int\", \"method\": \"hash\", \"num\": 4,\n \"partitions\": {\"a\": [0, 1, 2], \"b\": [2, 3]}}]}",
            "vdb[0].partitions: slot 2 is in both a and b",
        ),
        (
            "{\"vdb\": [{\"id\": 1, \"type\": \"int\", \"method\": \"hash\", \"num\": 2,\n \"partitions\": {\"a\": [0, 1, 2]}}]}",
            "line 2: vdb[0].partitions.a: slot 2 is outside the vdb's 2 slots",
        ),
        (
            "{\"vdb\": [{\"id\": 1, \"type\": \"int\", \"method\": \"range\", \"num\": 0,\n \"partitions\": {\"a\": 10, \"b\": 10}}]}",
            "vdb[0].partitions: two partitions end at 10: ranges must increase",
        ),
        (
            "{\"vdb\": [{\"id\": 1, \"type\": \"float\", \"method\": \"hash\", \"num\": 1, \"partitions\": {\"a\": [0]}}]}",
            "vdb[0].type: Some(\"float\") is not a key type",
        ),
        (
            "{\"vdb\": [{\"id\": 1, \"type\": \"int\", \"method\": \"hash\", \"num\": 1, \"partitions\": {\"a\": [0]}}],\n\"table\": [\n{\"vdb\": 1, \"db\": \"d\", \"table\": \"t\", \"pkey\": \"k\"},\n{\"vdb\": 1, \"db\": \"d\", \"table\": \"t\", \"pkey\": \"k\"}]}",
            "bad.json: line 4: table[1]: table d.t is listed twice",
        ),
        (
            "{\"vdb\": [{\"id\": 1, \"type\": \"int\", \"method\": \"hash\", \"num\": 1, \"partitions\": {\"a\": [0]}}],\n\"table\": [{\"vdb\": 2, \"db\": \"d\", \"table\": \"t\", \"pkey\": \"k\"}]}",
            "table[0].vdb: table d.t names vdb 2, which is not defined",
        ),
        (
            "{\"vdb\": [{\"id\": 1, \"type\": \"date\", \"method\": \"range\", \"num\": 0, \"partitions\": {\"a\": \"soon\"}}]}",
            "vdb[0].partitions.a: \"soon\" is not a date",
        ),
        ("{}", "nothing is placed"),
    ];
    for (text, want) in cases {
        let got = cetus::parse(text, "bad.json", Unlisted::DefaultGroup)
            .err()
            .unwrap_or_else(|| panic!("accepted: {text}"));
        assert!(
            matches!(
                got,
                LayoutError::Syntax { .. } | LayoutError::Invalid { .. }
            ),
            "{got:?}"
        );
        assert!(
            got.to_string().contains(want),
            "{got}\nshould contain: {want}"
        );
    }
}
