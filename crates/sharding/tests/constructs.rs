//! The planner does, for every construct of `sextant_sharding::constructs`,
//! what the list says: each example over several groups runs there (a
//! merge, a scatter, a distributed write) or is refused, and each example
//! within one group runs in that group. docs/sharding.md's table is the
//! list's (UPDATE_GOLDEN=1 writes it).

use sextant_sharding::constructs::{markdown, Reach, CONSTRUCTS};
use sextant_sharding::{cetus, Route, Router, Unlisted};
use sextant_sql::LexMode;

fn router() -> Router {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let text = std::fs::read_to_string(dir.join("part.json")).expect("layout");
    Router::new(cetus::parse(&text, "part.json", Unlisted::Global).expect("layout"))
}

fn route(r: &Router, sql: &str) -> Route {
    let mode = LexMode::DEFAULT.on(Some(
        sextant_sql::ServerVersion::parse("10.11.6").expect("version"),
    ));
    let c = sextant_sql::classify_in(sql.as_bytes(), || mode);
    r.route(Some("tpcc_shard"), sql.as_bytes(), mode, &[], &c)
}

#[test]
fn the_planner_does_what_the_construct_list_says() {
    let r = router();
    let mut wrong = Vec::new();
    for k in CONSTRUCTS {
        let several = route(&r, k.several);
        let ok = matches!(
            (k.reach, &several),
            (
                Reach::Several,
                Route::Merge(_) | Route::Scatter(_) | Route::Write(_)
            ) | (Reach::OneGroup, Route::Refuse(_))
        );
        if !ok {
            wrong.push(format!("{}: {} -> {several:?}", k.name, k.several));
        }
        if let Some(one) = k.one {
            let r1 = route(&r, one);
            if !matches!(r1, Route::One(_)) {
                wrong.push(format!("{} within one group: {one} -> {r1:?}", k.name));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the planner and the list differ:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_docs_show_the_list() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/sharding.md");
    let docs = std::fs::read_to_string(&path).expect("docs/sharding.md");
    let (begin, end) = ("<!-- constructs: begin -->\n", "<!-- constructs: end -->");
    let a = docs.find(begin).expect("the begin marker") + begin.len();
    let b = docs[a..].find(end).expect("the end marker") + a;
    let table = markdown();
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        let out = format!("{}{table}{}", &docs[..a], &docs[b..]);
        std::fs::write(&path, out).expect("write docs/sharding.md");
        return;
    }
    assert_eq!(
        &docs[a..b],
        table,
        "docs/sharding.md's construct table (UPDATE_GOLDEN=1 writes it)"
    );
}
