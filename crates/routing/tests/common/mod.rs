//! What the golden-file tests share: a folder's case files, reading and
//! writing them, and checking one case against its expectation (or, with
//! `UPDATE_GOLDEN=1`, recording what it now gives).

use serde::{de::DeserializeOwned, Serialize};
use std::fmt::Debug;
use std::path::{Path, PathBuf};

/// The `*.json` files of `testdata/<sub>` (not those of its folders).
pub fn json_files(sub: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(sub);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    v.sort();
    v
}

pub fn read_cases<T: DeserializeOwned>(f: &Path) -> Vec<T> {
    let text = std::fs::read_to_string(f).expect("read");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()))
}

pub fn write_cases<T: Serialize>(f: &Path, cases: &[T]) {
    let mut out = serde_json::to_string_pretty(cases).expect("json");
    out.push('\n');
    std::fs::write(f, out).expect("write");
}

pub fn updating() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some()
}

/// One case: what it gives equals what it expects; when updating, what
/// it gives is recorded instead; otherwise a failure, named `what`.
pub fn check<E: PartialEq + Debug>(
    expect: &mut Option<E>,
    got: E,
    what: String,
    failures: &mut Vec<String>,
) {
    match expect {
        Some(want) if *want == got => {}
        _ if updating() => *expect = Some(got),
        Some(want) => failures.push(format!("{what}:\n  want {want:?}\n  got  {got:?}")),
        None => failures.push(format!("{what} has no expect")),
    }
}
