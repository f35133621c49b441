//! Where statements go on a sharded layout: a golden file of statements
//! (tests/golden/routes.sql) and their routes (routes.out). Run with
//! UPDATE_GOLDEN=1 to rewrite routes.out, then read the diff.

use sextant_sharding::{cetus, Route, Router, Unlisted};
use sextant_sql::LexMode;
use std::fmt::Write;
use std::path::Path;

fn golden(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

fn show(r: &Router, route: &Route) -> String {
    let names = |s: sextant_sharding::analyze::GroupSet| {
        s.iter()
            .map(|i| r.group_name(i))
            .collect::<Vec<_>>()
            .join(",")
    };
    match route {
        Route::Session => "session".into(),
        Route::One(g) => format!("one {}", r.group_name(*g)),
        Route::AnyOf(s) => format!("any of {}", names(*s)),
        Route::Scatter(s) => format!("scatter {}", names(*s)),
        Route::Broadcast(s) => format!("broadcast {}", names(*s)),
        Route::Refuse(why) => format!("refuse: {why}"),
        Route::Write(w) if w.split.is_empty() => format!(
            "write {}{}",
            names(w.groups),
            if w.copies { " (copies)" } else { "" }
        ),
        Route::Write(w) => format!(
            "write {}: {}",
            names(w.groups),
            w.split
                .iter()
                .map(|(g, q)| format!("{} <- {}", r.group_name(*g), String::from_utf8_lossy(q)))
                .collect::<Vec<_>>()
                .join(" | ")
        ),
        Route::Merge(m) => format!(
            "merge {} {}: {}",
            names(m.groups),
            match &m.grouped {
                Some(g) => g.describe(),
                None => format!(
                    "order {:?} offset {} count {:?}",
                    m.order, m.offset, m.count
                ),
            },
            String::from_utf8_lossy(&m.sql)
        ),
    }
}

#[test]
fn routes_golden() {
    let input = std::fs::read_to_string(golden("routes.sql")).expect("routes.sql");
    let mut out = String::new();
    let mut router: Option<(Router, String)> = None;
    let mut mode = LexMode::DEFAULT;
    for line in input.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        // The servers' version, for executable comments.
        if let Some(v) = line.strip_prefix("@server ") {
            mode = LexMode::DEFAULT.on(Some(
                sextant_sql::ServerVersion::parse(v.trim()).expect("a version"),
            ));
            let _ = writeln!(out, "{line}");
            continue;
        }
        if let Some(rest) = line.strip_prefix("@layout ") {
            let w: Vec<&str> = rest.split_whitespace().collect();
            let text = std::fs::read_to_string(golden(w[0])).expect("layout");
            let unlisted = match w[2] {
                "global" => Unlisted::Global,
                _ => Unlisted::DefaultGroup,
            };
            let layout = cetus::parse(&text, w[0], unlisted).expect("layout");
            router = Some((Router::new(layout), w[1].to_string()));
            let _ = writeln!(out, "{line}");
            continue;
        }
        let (r, db) = router.as_ref().expect("@layout first");
        let c = sextant_sql::classify_in(line.as_bytes(), || mode);
        // Twice: the second time from the shape cache, which must agree.
        let first = r.route(Some(db), line.as_bytes(), mode, &[], &c);
        let second = r.route(Some(db), line.as_bytes(), mode, &[], &c);
        assert_eq!(first, second, "{line}: cached route differs");
        let _ = writeln!(out, "{line}\n  -> {}", show(r, &first));
    }
    let path = golden("routes.out");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &out).expect("write golden");
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(out, want, "routes.out (UPDATE_GOLDEN=1 rewrites it)");
}

#[test]
fn placeholders_take_their_values_outside_strings_and_comments() {
    use sextant_sharding::route::with_values;
    let mode = sextant_sql::LexMode::DEFAULT;
    let sql = b"SELECT '?', x /* ? */ FROM t WHERE a = ? AND b IN (?, ?)";
    let lits = [b"1".to_vec(), b"'it''s'".to_vec(), b"NULL".to_vec()];
    assert_eq!(
        with_values(sql, mode, &lits).unwrap(),
        b"SELECT '?', x /* ? */ FROM t WHERE a = 1 AND b IN ('it''s', NULL)".to_vec()
    );
    assert!(with_values(sql, mode, &lits[..2]).is_none());
    assert!(with_values(b"SELECT 1", mode, &lits[..1]).is_none());
}

#[test]
fn sequence_ids_are_written_into_inserts() {
    use sextant_sharding::route::fill_ids;
    let mode = sextant_sql::LexMode::DEFAULT;
    let fill = |sql: &str, rows| {
        fill_ids(sql.as_bytes(), mode, "id", 1001, rows).map(|v| String::from_utf8(v).unwrap())
    };
    let cases = [
        (
            "INSERT INTO t (a, b) VALUES (1, 'x)'), (2, f(3))",
            2,
            "INSERT INTO t (a, b, id) VALUES (1, 'x)', LAST_INSERT_ID(1001)), (2, f(3), 1002)",
        ),
        (
            "INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = VALUES(a)",
            1,
            "INSERT INTO t (a, id) VALUES (1, LAST_INSERT_ID(1001)) ON DUPLICATE KEY UPDATE a = VALUES(a)",
        ),
        (
            "INSERT INTO t SET a = (1), b = 2",
            1,
            "INSERT INTO t SET a = (1), b = 2, id = LAST_INSERT_ID(1001)",
        ),
        (
            "INSERT INTO t SET a = 1 ON DUPLICATE KEY UPDATE a = 2",
            1,
            "INSERT INTO t SET a = 1 , id = LAST_INSERT_ID(1001) ON DUPLICATE KEY UPDATE a = 2",
        ),
    ];
    for (sql, rows, want) in cases {
        assert_eq!(fill(sql, rows).as_deref(), Some(want), "{sql}");
    }
    // The rows counted by the parse and by the text disagree: not filled.
    assert!(fill("INSERT INTO t (a) VALUES (1), (2)", 1).is_none());
}

/// A key written as a literal goes where the same key as a parameter
/// goes, at the ends of the integer range too (-2^63 is the literal
/// 2^63, past i64, negated).
#[test]
fn literal_keys_and_parameters_agree_at_the_ends_of_the_range() {
    use sextant_sharding::Lit;
    let text = std::fs::read_to_string(golden("part.json")).expect("layout");
    let layout = cetus::parse(&text, "part.json", Unlisted::DefaultGroup).expect("layout");
    let r = Router::new(layout);
    let mode = LexMode::DEFAULT;
    let prepared = "INSERT INTO warehouse (w_id, w_name) VALUES (?, 'x')";
    let c = sextant_sql::classify_in(prepared.as_bytes(), || mode);
    for key in [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX] {
        let by_param = r.route(
            Some("tpcc_shard"),
            prepared.as_bytes(),
            mode,
            &[Lit::Int(key)],
            &c,
        );
        let sql = format!("INSERT INTO warehouse (w_id, w_name) VALUES ({key}, 'x')");
        let c = sextant_sql::classify_in(sql.as_bytes(), || mode);
        let by_text = r.route(Some("tpcc_shard"), sql.as_bytes(), mode, &[], &c);
        assert!(
            matches!(by_text, Route::One(_)),
            "{sql}: {}",
            show(&r, &by_text)
        );
        assert_eq!(show(&r, &by_text), show(&r, &by_param), "{sql}");
    }
}
