//! Drivers of three more ecosystems, as applications use them: Go
//! (go-sql-driver/mysql), Node (mysql2, and MariaDB's own connector for
//! bulk execution) and Java (MariaDB Connector/J), installed by
//! `scripts/deps`.
//! Each runs the same checks (types, errors, transactions, session state,
//! KILL QUERY, its own wait_timeout, prepare/close churn, 5 MB values,
//! multi-statements, TLS, compression) directly against the primary and
//! through sextant with its default settings, and must get the same answers.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn drivers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/drivers")
}

fn go() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("go"))
                .find(|g| g.is_file())
        })
        .unwrap_or_default();
    on_path
        .or_else(|| Some(PathBuf::from("/usr/local/go/bin/go")).filter(|g| g.is_file()))
        .expect("Go is needed for the driver checks: run scripts/deps")
}

/// Runs a driver's checks against `port`; one "name: answer" line each.
fn run(cmd: &mut Command, port: u16, tag: &str) -> Vec<String> {
    let out = cmd
        .env("HOST", "127.0.0.1")
        .env("PORT", port.to_string())
        .env("TAG", format!("{tag}_{}", std::process::id()))
        .output()
        .expect("driver checks start");
    assert!(
        out.status.success(),
        "driver checks failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The same answers directly and through sextant, and the answers that
/// show each check did what it is for.
fn compare(direct: &[String], proxied: &[String], expect: &[(&str, &str)]) {
    // Shown when a check fails (the test's output is kept then).
    eprintln!(
        "directly:\n{}\nthrough sextant:\n{}",
        direct.join("\n"),
        proxied.join("\n")
    );
    assert_eq!(
        proxied
            .iter()
            .map(|l| l.split(':').next())
            .collect::<Vec<_>>(),
        direct
            .iter()
            .map(|l| l.split(':').next())
            .collect::<Vec<_>>(),
        "the same checks ran"
    );
    for (d, p) in direct.iter().zip(proxied) {
        assert_eq!(p, d, "through sextant (left), directly (right)");
    }
    for (check, want) in expect {
        let line = direct
            .iter()
            .find(|l| l.starts_with(&format!("{check}:")))
            .unwrap_or_else(|| panic!("no {check} check in {direct:#?}"));
        assert!(line.contains(want), "{line} should contain {want}");
    }
}

const EXPECT: &[(&str, &str)] = &[
    ("types", "18446744073709551615"),
    ("error", "ERR 1146 42S02"),
    ("transaction", "inside=2 after=1"),
    ("kill_query", "quick=true usable=true"),
    ("wait_timeout", "wait_timeout=1 closed=true"),
    ("prepare_close", "ok=300"),
    ("large", "same=true"),
    ("tls", "version=TLSv1"),
    ("compress", "length=3000000"),
    ("compress", "compression=ON"),
];

#[test]
fn go_driver_gets_the_answers_it_gets_directly() {
    let bin = Path::new(env!("CARGO_TARGET_TMPDIR")).join("drivercheck-go");
    let built = Command::new(go())
        .args(["build", "-o"])
        .arg(&bin)
        .arg(".")
        .current_dir(drivers().join("go"))
        .env("GOFLAGS", "-mod=readonly")
        .output()
        .expect("go build");
    assert!(
        built.status.success(),
        "go build (run scripts/deps first):\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    // client_ed25519: an account with it on the servers, and a sextant user
    // with it in front.
    ed25519_account();
    let p = Setup {
        users: "\n[[users]]\nname = \"ed_front\"\npassword = \"ed-secret\"\n\
                auth_plugin = \"ed25519\"\nbackend_user = \"app\"\nbackend_password = \"apppass\"\n",
        ..Default::default()
    }
    .start();
    let go = |user: &str| {
        let mut c = Command::new(&bin);
        c.env("ED_USER", user).env("ED_PASS", "ed-secret");
        c
    };
    let direct = run(&mut go("ed_app"), lab().primary, "d");
    let proxied = run(&mut go("ed_front"), p.port, "p");
    let mut expect = EXPECT.to_vec();
    expect.push(("ed25519", "login=1 wrong_password=[ERR 1045 28000]"));
    compare(&direct, &proxied, &expect);
}

#[test]
fn node_driver_gets_the_answers_it_gets_directly() {
    let dir = drivers().join("node");
    assert!(
        dir.join("node_modules/mysql2").is_dir(),
        "mysql2 is not installed: run scripts/deps"
    );
    let node = || {
        let mut c = Command::new("node");
        c.arg("checks.js").current_dir(&dir);
        c
    };
    let p = Setup::default().start();
    let direct = run(&mut node(), lab().primary, "d");
    let proxied = run(&mut node(), p.port, "p");
    let mut expect = EXPECT.to_vec();
    // mysql2 reads MariaDB's extended metadata (JSON as objects) and
    // session-state reports, and knows its connection id.
    expect.extend([
        ("types", "\"jtype\":\"object\""),
        ("session_state", "\"schema\":\"sextant_test\""),
        ("connection_id", "matches_handshake=true"),
        ("compress", "prepared=42"),
        ("bulk", "offered=true affected=1000 rows=1000 sum=499500"),
    ]);
    compare(&direct, &proxied, &expect);
}

/// MariaDB Connector/J: server-side prepared statements (PREPARE and
/// EXECUTE in one write, the execute naming "the statement just
/// prepared"), batches (bulk execution), setAutoCommit, setReadOnly,
/// LOAD DATA LOCAL as a statement and prepared, and TLS status through a
/// prepared statement; with useServerPrepStmts false and true.
#[test]
fn java_driver_gets_the_answers_it_gets_directly() {
    let dir = drivers().join("java");
    assert!(
        dir.join("lib/mariadb-java-client-3.5.6.jar").is_file(),
        "Connector/J is not installed: run scripts/deps"
    );
    let cp = javac(&dir, "Checks");
    let java = || java(&cp, "Checks");
    let p = Setup::default().start();
    let direct = run(&mut java(), lab().primary, "d");
    let proxied = run(&mut java(), p.port, "p");
    let mut expect = Vec::new();
    for mode in ["client", "server"] {
        for (check, want) in [
            ("prepared", "1|v1 é|1.25|2024-01-01 03:04:05.678|0001FF;2|"),
            ("batch", "rows=203"),
            ("autocommit", "seen=1001,1002 autocommit=true"),
            ("readonly", "read_only=ERR 1792 others=[ok, ok, ok, ok, ok]"),
            ("load_data", "statement=3 prepared=3 rows=209"),
            ("tls", "cipher=true same=true"),
        ] {
            expect.push((format!("{check}_{mode}"), want));
        }
    }
    let expect: Vec<(&str, &str)> = expect.iter().map(|(c, w)| (c.as_str(), *w)).collect();
    compare(&direct, &proxied, &expect);
}

/// Oracle's MySQL Connector/J, as its users run it: it sets
/// character_set_results to NULL at connect (session tracking reports ''),
/// and with rewriteBatchedStatements sends a batch of more than four
/// statements as one multi-statement between COM_SET_OPTION on and off,
/// right after a write (on the connection the session holds) and after
/// pauses longer than the hold window (on other pooled connections).
/// (Through sextant: 9002 after each pause, and the batch got 1064.)
#[test]
fn oracle_java_driver_gets_the_answers_it_gets_directly() {
    let dir = drivers().join("java");
    assert!(
        dir.join("lib/mysql-connector-j-9.1.0.jar").is_file(),
        "MySQL Connector/J is not installed: run scripts/deps"
    );
    let cp = javac(&dir, "OracleChecks");
    let java = || {
        let mut c = java(&cp, "OracleChecks");
        c.env("PAUSE_MS", "300");
        c
    };
    let p = Setup {
        group: "[routing]\nhold_ms = 100\n",
        ..Default::default()
    }
    .start();
    let direct = run(&mut java(), lab().primary, "d");
    let proxied = run(&mut java(), p.port, "p");
    compare(
        &direct,
        &proxied,
        &[
            ("rewritten_batch", "statements=10 rows=11"),
            ("rewritten_prepared_batch", "rows=31"),
            ("after_pauses", "31/1 31/1 31/1"),
            ("batch_after_pause", "rows=37"),
        ],
    );
}

/// `class` of the Java checks in `dir`, compiled against the drivers in
/// `dir/lib`: the classpath to run it with.
fn javac(dir: &Path, class: &str) -> String {
    let classes = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("drivercheck-java-{class}"));
    let cp = format!("{}/*", dir.join("lib").display());
    let built = Command::new("javac")
        .args(["-d"])
        .arg(&classes)
        .args(["-cp", &cp, &format!("{class}.java")])
        .current_dir(dir)
        .output()
        .expect("javac (run scripts/deps first)");
    assert!(
        built.status.success(),
        "javac:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    format!("{}:{cp}", classes.display())
}

/// `java` running `class` with classpath `cp`.
fn java(cp: &str, class: &str) -> Command {
    let mut c = Command::new("java");
    c.args(["-cp", cp, class]);
    c
}
