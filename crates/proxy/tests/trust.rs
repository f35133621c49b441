//! Trust boundaries, tried as an application account would try them
//! through sextant against real MariaDB: a stored program's body is one
//! statement whatever it holds (and what it holds that reaches other
//! sessions is refused), a session finishes only the XA transactions it
//! started, and sextant's own schema is out of every client's reach.

mod common;
use common::*;
use mysql::prelude::Queryable;

/// The error a statement gets (all its results read), or None.
fn error(c: &mut mysql::Conn, sql: &str) -> Option<(u16, String)> {
    let r = c.query_iter(sql).and_then(|mut r| {
        while let Some(set) = r.iter() {
            for row in set {
                row?;
            }
        }
        Ok(())
    });
    match r {
        Ok(()) => None,
        Err(mysql::Error::MySqlError(e)) => Some((e.code, e.message)),
        Err(other) => panic!("{sql}: not a server error: {other}"),
    }
}

fn routine_body(name: &str) -> Option<String> {
    direct(lab().primary)
        .query_first(format!(
            "SELECT ROUTINE_DEFINITION FROM information_schema.ROUTINES \
             WHERE ROUTINE_SCHEMA = 'sextant_test' AND ROUTINE_NAME = '{name}'"
        ))
        .unwrap()
}

#[test]
fn a_compound_statements_semicolons_are_its_own() {
    let p = Setup::default().start();
    let mut c = p.conn();
    let mut victim = p.conn();
    let vid: u32 = victim
        .query_first("SELECT CONNECTION_ID()")
        .unwrap()
        .unwrap();
    for name in ["trust_two", "trust_kill", "trust_dyn"] {
        c.query_drop(format!("DROP PROCEDURE IF EXISTS {name}"))
            .unwrap();
    }

    // Stored as written, and it runs as written.
    c.query_drop("CREATE PROCEDURE trust_two() BEGIN SELECT 1; SELECT 2; END")
        .unwrap();
    assert_eq!(
        routine_body("trust_two").as_deref(),
        Some("BEGIN SELECT 1; SELECT 2; END")
    );
    let mut sets = Vec::new();
    let mut r = c.query_iter("CALL trust_two()").unwrap();
    while let Some(set) = r.iter() {
        let rows: Vec<i64> = set.map(|row| mysql::from_row(row.unwrap())).collect();
        sets.push(rows);
    }
    drop(r);
    assert_eq!(sets, [vec![1], vec![2], vec![]]);

    // A KILL inside a body is neither carried out nor stored.
    let (code, msg) = error(
        &mut c,
        &format!("CREATE PROCEDURE trust_kill() BEGIN SELECT 1; KILL {vid}; END"),
    )
    .expect("a KILL in a body is refused");
    assert_eq!(code, 1235, "{msg}");
    assert!(msg.contains("inside a stored program"), "{msg}");
    assert_eq!(routine_body("trust_kill"), None);
    let alive: Option<i64> = victim.query_first("SELECT 7").unwrap();
    assert_eq!(alive, Some(7), "the session named in the body is alive");
    for sql in [
        format!("BEGIN NOT ATOMIC SELECT 1; KILL {vid}; END"),
        format!("IF 1 THEN KILL QUERY {vid}; END IF"),
    ] {
        assert_eq!(error(&mut c, &sql).map(|e| e.0), Some(1235), "{sql}");
    }
    assert_eq!(victim.query_first::<i64, _>("SELECT 8").unwrap(), Some(8));

    // Dynamic SQL inside a body (as Connector/J's own tests create it).
    c.query_drop(
        "CREATE PROCEDURE trust_dyn() BEGIN SET @s = 'SELECT 41 + 1'; PREPARE st FROM @s; EXECUTE st; END",
    )
    .unwrap();
    let got: Option<i64> = c.query_first("CALL trust_dyn()").unwrap();
    assert_eq!(got, Some(42));

    // MariaDB's compound statements outside stored programs: one
    // statement, several results.
    let mut r = c
        .query_iter("IF 1 THEN SELECT 3; SELECT 4; END IF")
        .unwrap();
    let mut seen = Vec::new();
    while let Some(set) = r.iter() {
        seen.extend(set.map(|row| mysql::from_row::<i64>(row.unwrap())));
    }
    drop(r);
    assert_eq!(seen, [3, 4]);

    // A KILL after a compound statement in one packet is sextant's.
    assert_eq!(
        error(
            &mut c,
            &format!("BEGIN NOT ATOMIC SELECT 1; SELECT 2; END; KILL {vid}")
        ),
        None
    );
    assert!(victim.query_drop("SELECT 1").is_err(), "killed by sextant");
}

#[test]
fn a_session_finishes_only_its_own_xa_transactions() {
    let p = Setup::default().start();
    let mut a = p.conn();
    let mut b = p.conn();
    a.query_drop("CREATE TABLE IF NOT EXISTS trust_xa (id INT PRIMARY KEY) ENGINE=InnoDB")
        .unwrap();
    a.query_drop("DELETE FROM trust_xa").unwrap();
    a.query_drop("XA START 'trust-mine'").unwrap();
    a.query_drop("INSERT INTO trust_xa VALUES (1)").unwrap();
    a.query_drop("XA END 'trust-mine'").unwrap();
    a.query_drop("XA PREPARE 'trust-mine'").unwrap();

    // Another session neither lists it nor finishes it, however it
    // spells the statement.
    let attempts: [(&str, u16); 8] = [
        ("XA RECOVER", 1235),
        ("XA COMMIT 'trust-mine'", 1397),
        ("XA ROLLBACK X'74727573742d6d696e65'", 1397),
        ("EXECUTE IMMEDIATE \"XA ROLLBACK 'trust-mine'\"", 1235),
        ("EXECUTE IMMEDIATE 'XA RECOVER'", 1235),
        ("PREPARE s FROM \"XA COMMIT 'trust-mine'\"", 1235),
        ("DO 1; XA ROLLBACK 'trust-mine'", 1235),
        ("SELECT 1; XA RECOVER", 1235),
    ];
    for (sql, want) in attempts {
        let got = error(&mut b, sql).map(|e| e.0);
        assert_eq!(got, Some(want), "{sql}");
    }
    b.query_drop("SET @x = CONCAT('XA ROLL', 'BACK ''trust-mine''')")
        .unwrap();
    for sql in ["PREPARE s FROM @x", "EXECUTE IMMEDIATE @x"] {
        assert_eq!(error(&mut b, sql).map(|e| e.0), Some(1235), "{sql}");
    }
    assert_eq!(
        error(
            &mut b,
            "CREATE PROCEDURE trust_xa_p() BEGIN XA RECOVER; END"
        )
        .map(|e| e.0),
        Some(1235)
    );
    match b.prep("XA COMMIT 'trust-mine'") {
        Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1235, "{}", e.message),
        other => panic!("XA prepared: {other:?}"),
    }
    let rows: Vec<(i64, i64, i64, Vec<u8>)> = direct(lab().primary).query("XA RECOVER").unwrap();
    assert!(
        rows.iter().any(|r| r.3 == b"trust-mine"),
        "still prepared: {rows:?}"
    );

    // Its own session commits it (by any spelling of its id).
    a.query_drop("XA COMMIT X'74727573742d6d696e65'").unwrap();
    let n: Option<i64> = b.query_first("SELECT COUNT(*) FROM trust_xa").unwrap();
    assert_eq!(n, Some(1));
}

#[test]
fn sextants_own_schema_is_out_of_reach() {
    let p = Setup::default().start();
    let mut c = p.conn();
    for sql in [
        "SELECT * FROM sextant.heartbeat",
        "DELETE FROM `sextant`.`heartbeat`",
        "INSERT INTO SEXTANT.xa_decision (gtrid, decision, owner) VALUES (X'01', 'R', 'x')",
        "DROP TABLE sextant.xa_decision",
        "DELETE FROM sextant.xa_decision WHERE decision = 'C'",
        "UPDATE sextant.xa_decision SET decision = 'C'",
        "REPLACE INTO sextant.xa_decision (gtrid, decision, owner) VALUES (X'02', 'C', 'x')",
        "CREATE TRIGGER trust_t BEFORE UPDATE ON sextant.heartbeat FOR EACH ROW SET NEW.ts_us = 0",
        "USE sextant",
        "SHOW TABLES FROM sextant",
        "DROP DATABASE sextant",
        "EXECUTE IMMEDIATE 'DELETE FROM sextant.heartbeat'",
        "SELECT 1; DELETE FROM sextant.heartbeat",
    ] {
        let e = error(&mut c, sql);
        assert_eq!(e.as_ref().map(|e| e.0), Some(1044), "{sql}: {e:?}");
    }
    c.query_drop("SET @t = 'DELETE FROM sextant.heartbeat'")
        .unwrap();
    assert_eq!(error(&mut c, "PREPARE s FROM @t").map(|e| e.0), Some(1044));
    // COM_INIT_DB, and a login naming it.
    let mut r = Raw::login(p.port, "app", "apppass", None);
    r.send(0, b"\x02sextant");
    assert_eq!(err_of(&r.read_response()[0]).0, 1044);
    let url = p.url("app", "apppass", "sextant");
    match mysql::Conn::new(mysql::Opts::from_url(&url).unwrap()) {
        Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1044, "{}", e.message),
        other => panic!("login into sextant's schema: {:?}", other.map(|_| ())),
    }
    // The heartbeat still beats: nothing above reached it.
    let rows: Option<i64> = direct(lab().primary)
        .query_first("SELECT COUNT(*) FROM sextant.heartbeat")
        .unwrap();
    assert!(rows.unwrap_or(0) >= 1);
}

/// The admin port's PUSH CONFIG FROM reads only a regular file of at most
/// 1 MiB, off the worker threads, and its errors name file, line and key
/// but show none of the file: not a private key, /etc/shadow's lines or
/// the process's environment; a FIFO or /dev/zero freeze nothing.
#[test]
fn push_config_reads_only_regular_files_and_shows_none_of_them() {
    use std::time::{Duration, Instant};
    let etcd = Etcd::start();
    let cluster = etcd.cluster("trust", "t1");
    let p = Setup {
        group: &cluster,
        http: true,
        env: vec![("SEXTANT_TRUST_SECRET", "env-secret-4711".into())],
        ..Default::default()
    }
    .start();
    let dir = etcd.dir.join("trust-files");
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("key.pem");
    std::fs::write(
        &key,
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSj\nkeyline = \"hunter2-key\"\nAAoIBAQC7=\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let shadow = dir.join("shadow");
    std::fs::write(
        &shadow,
        "root:$y$j9T$saltsecret$hashsecret:19000:0:99999:7:::\n",
    )
    .unwrap();
    let fifo = dir.join("fifo");
    let _ = std::fs::remove_file(&fifo);
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let big = dir.join("big.toml");
    std::fs::write(&big, "#".repeat(2 << 20)).unwrap();
    // A config naming the FIFO as its admin password file.
    let own = std::fs::read_to_string(&p.config).unwrap();
    assert!(own.contains("password = \"adminpass\""));
    let secret_fifo = dir.join("fifo-secret.toml");
    std::fs::write(
        &secret_fifo,
        own.replacen(
            "password = \"adminpass\"",
            &format!("password = {{ file = \"{}\" }}", fifo.display()),
            1,
        ),
    )
    .unwrap();
    let admin = || {
        mysql::Conn::new(
            mysql::OptsBuilder::new()
                .ip_or_hostname(Some("127.0.0.1"))
                .tcp_port(p.admin_port)
                .user(Some("admin"))
                .pass(Some("adminpass"))
                .read_timeout(Some(Duration::from_secs(8)))
                .prefer_socket(false),
        )
        .expect("the admin port answers")
    };
    let secrets = [
        "MIIE",
        "hunter2",
        "AAoIBAQC7",
        "saltsecret",
        "hashsecret",
        "env-secret-4711",
    ];
    let paths = [
        key.clone(),
        shadow.clone(),
        "/proc/self/environ".into(),
        fifo.clone(),
        "/dev/zero".into(),
        dir.clone(),
        big.clone(),
        secret_fifo.clone(),
    ];
    for path in &paths {
        let t = Instant::now();
        let e = admin()
            .query_drop(format!("PUSH CONFIG FROM '{}'", path.display()))
            .expect_err("refused");
        let took = t.elapsed();
        let (code, msg) = match e {
            mysql::Error::MySqlError(e) => (e.code, e.message),
            other => panic!("{}: {other}", path.display()),
        };
        assert_eq!(code, 9006, "{}: {msg}", path.display());
        assert!(
            msg.contains(&path.display().to_string()),
            "names the file: {msg}"
        );
        for s in secrets {
            assert!(!msg.contains(s), "{}: shows {s:?}: {msg}", path.display());
        }
        assert!(
            took < Duration::from_secs(3),
            "{}: {took:?}",
            path.display()
        );
    }
    // The instance serves on: clients, the admin port, its HTTP port.
    assert_eq!(p.conn().query_first::<i64, _>("SELECT 1").unwrap(), Some(1));
    let rows: Vec<mysql::Row> = admin().query("SHOW BACKENDS").unwrap();
    assert!(!rows.is_empty());
    assert_eq!(p.http_get("/healthz").0, 200);
}

/// SHOW ACCOUNTS reads each user's server account's grants and says what
/// reaches beyond its own schemas; the log warns of each at start. The
/// lab's `app` holds its own schemas only; `trust_wide` holds ALL ON *.*
/// and is the monitor's account too.
#[test]
fn an_over_privileged_account_is_reported() {
    let mut d = direct(lab().primary);
    for sql in [
        "CREATE USER IF NOT EXISTS 'trust_narrow'@'%' IDENTIFIED BY 'narrowpass'",
        "GRANT ALL ON sextant_test.* TO 'trust_narrow'@'%'",
        "CREATE USER IF NOT EXISTS 'trust_decider'@'%' IDENTIFIED BY 'deciderpass'",
        "GRANT SELECT ON sextant_test.* TO 'trust_decider'@'%'",
        "GRANT INSERT ON sextant.* TO 'trust_decider'@'%'",
        // What the lab's application account had before it was narrowed,
        // and what many deployments still give theirs.
        "CREATE USER IF NOT EXISTS 'trust_wide'@'%' IDENTIFIED BY 'widepass'",
        "GRANT ALL PRIVILEGES ON *.* TO 'trust_wide'@'%' WITH GRANT OPTION",
    ] {
        d.query_drop(sql).unwrap();
    }
    let p = Setup {
        users: "\n[[users]]\nname = \"narrow\"\npassword = \"np\"\nbackend_user = \"trust_narrow\"\nbackend_password = \"narrowpass\"\n\n[[users]]\nname = \"decider\"\npassword = \"dp\"\nbackend_user = \"trust_decider\"\nbackend_password = \"deciderpass\"\n\n[[users]]\nname = \"wide\"\npassword = \"wp\"\nbackend_user = \"trust_wide\"\nbackend_password = \"widepass\"\n",
        // The wide account is also the monitor's: an operator who runs
        // sextant's machinery and an application on one account.
        group: "[monitor]\nuser = \"trust_wide\"\npassword = \"widepass\"\n",
        http: true,
        ..Default::default()
    }
    .start();
    let rows: Vec<(String, String, String, String)> = p.admin().query("SHOW ACCOUNTS").unwrap();
    let of = |u: &str| {
        rows.iter()
            .find(|r| r.0 == u)
            .unwrap_or_else(|| panic!("{u} missing: {rows:?}"))
            .clone()
    };
    let wide = of("wide");
    assert_eq!(wide.1, "trust_wide");
    assert!(wide.2.contains("monitor"), "{wide:?}");
    for want in [
        "can write sextant's own tables (ALL PRIVILEGES ON *.*)",
        "can end or outlast other sessions",
        "is also sextant's own account",
    ] {
        assert!(wide.3.contains(want), "{want}: {wide:?}");
    }
    // The lab's own application account holds its schemas only.
    assert_eq!(of("app").3, "its own schemas only", "{:?}", of("app"));
    assert_eq!(of("narrow").3, "its own schemas only");
    assert!(
        of("decider")
            .3
            .contains("can write sextant's own tables (INSERT ON `sextant`)"),
        "{:?}",
        of("decider")
    );
    // The log says it too, at start.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !p.logs().contains("reaches beyond its own schemas") {
        assert!(
            std::time::Instant::now() < deadline,
            "no warning: {}",
            p.logs()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // And the status page's API, from the audit read at start: which
    // users, not what their accounts can do (the HTTP port asks no
    // password).
    let (status, body) = p.http_get("/api/accounts");
    assert_eq!(status, 200);
    assert!(
        body.contains("{\"beyond_own_schemas\":\"yes\",\"user\":\"wide\"}"),
        "{body}"
    );
    assert!(
        body.contains("{\"beyond_own_schemas\":\"no\",\"user\":\"app\"}"),
        "{body}"
    );
    assert!(
        !body.contains("PRIVILEGES") && !body.contains("trust_wide"),
        "{body}"
    );
    assert!(!p
        .logs()
        .lines()
        .any(|l| l.contains("beyond its own schemas") && l.contains("\"narrow\"")));
}

/// A statement larger than the servers' max_allowed_packet (but within
/// sextant's) is refused by sextant with 1153 after its last frame (the
/// sequence id the client expects), not sent on for the server to drop
/// the pooled connection (the client got 9003, or an error out of
/// sequence for a statement of several frames).
#[test]
fn a_statement_larger_than_the_servers_take_is_refused_as_they_would() {
    use std::time::Duration;
    let servers: Vec<u16> = std::iter::once(lab().primary)
        .chain(lab().replicas.iter().copied())
        .collect();
    let set = |bytes: u64| {
        for port in &servers {
            direct(*port)
                .query_drop(format!("SET GLOBAL max_allowed_packet = {bytes}"))
                .unwrap();
        }
    };
    set(16 << 20);
    let p = Setup::default().start();
    // The monitor reads the servers' limit at its first check.
    std::thread::sleep(Duration::from_millis(1500));
    let open = |port: u16| {
        mysql::Conn::new(
            mysql::OptsBuilder::new()
                .ip_or_hostname(Some("127.0.0.1"))
                .tcp_port(port)
                .user(Some("app"))
                .pass(Some("apppass"))
                .db_name(Some("sextant_test"))
                .prefer_socket(false)
                .max_allowed_packet(Some(64 << 20)),
        )
        .unwrap()
    };
    let big = format!("SELECT LENGTH('{}')", "x".repeat(40 << 20));
    let code_of = |port: u16| match open(port).query_drop(&big) {
        Err(mysql::Error::MySqlError(e)) => Ok(e.code),
        Err(other) => Err(other.to_string()),
        Ok(()) => Err("ran".into()),
    };
    // (Directly, MariaDB answers 1153 and closes without reading the
    // rest: this client library sees the reset first.)
    let through = code_of(p.port);
    set(256 << 20);
    assert_eq!(through, Ok(1153), "sextant's answer");
    // Statements within the limit, and other clients, are served.
    let len: Option<i64> = open(p.port)
        .query_first(format!("SELECT LENGTH('{}')", "y".repeat(1 << 20)))
        .unwrap();
    assert_eq!(len, Some(1 << 20));
}

/// A member record and an intent written straight into etcd by someone
/// without the fleet's secret are ignored and listed as such: a KILL of an
/// id in the forged member's slot never logs in to its address (before,
/// sextant believed it and sent its [admin] login there), and a forged
/// "offline" for the primary changes nothing.
#[test]
fn records_no_member_signed_are_ignored() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let etcd = Etcd::start();
    let cluster = etcd.cluster("rogue", "r1");
    let p = Setup {
        group: &cluster,
        ..Default::default()
    }
    .start();
    // A listener that would take sextant's login.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let trap = listener.local_addr().unwrap().to_string();
    let called = Arc::new(AtomicUsize::new(0));
    {
        let called = called.clone();
        std::thread::spawn(move || {
            for c in listener.incoming() {
                called.fetch_add(1, Ordering::SeqCst);
                drop(c);
            }
        });
    }
    let record = |id: &str, slot: u8| {
        format!(
            "{{\"id\":\"{id}\",\"slot\":{slot},\"version\":\"9\",\"host\":\"h\",\"pid\":1,\"listen\":\"{trap}\",\"admin\":\"{trap}\",\"http\":null,\"started_ms\":0,\"applied_revision\":0,\"refused\":null,\"sessions\":0,\"statements_per_s\":0.0,\"updated_ms\":0}}"
        )
    };
    etcd_put(
        &etcd.endpoint,
        "/sextant/rogue/members/evil",
        &record("evil", 200),
    );
    // Sealed, but with another secret.
    let other = sextant_fleet::Seal::new("not-the-fleets-secret-42");
    let key = "/sextant/rogue/members/evil2";
    etcd_put(&etcd.endpoint, key, &other.seal(key, &record("evil2", 201)));
    let primary = format!("127.0.0.1:{}", lab().primary);
    etcd_put(
        &etcd.endpoint,
        &format!("/sextant/rogue/intent/backend/{primary}"),
        "offline",
    );
    // Wait for a renewal or two to read the members back.
    let mut admin = p.admin();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let rows = loop {
        let rows: Vec<mysql::Row> = admin.query("SHOW FLEET").unwrap();
        let ignored = rows
            .iter()
            .filter(|r| {
                r.get::<Option<String>, _>("this")
                    .flatten()
                    .is_some_and(|t| t.starts_with("ignored"))
            })
            .count();
        if ignored >= 3 {
            break rows;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not listed as ignored: {rows:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let members: Vec<String> = rows
        .iter()
        .filter(|r| {
            r.get::<Option<String>, _>("this").flatten().as_deref()
                != Some("ignored: not signed with the fleet's secret")
        })
        .filter_map(|r| r.get::<String, _>("id"))
        .collect();
    assert_eq!(members, ["r1"]);
    // A KILL of an id in the forged slots: nobody is asked.
    let mut c = p.conn();
    for slot in [200u32, 201] {
        let e = c
            .query_drop(format!("KILL {}", (slot << 24) | 5))
            .unwrap_err();
        match e {
            mysql::Error::MySqlError(e) => assert_eq!(e.code, 1094, "{}", e.message),
            other => panic!("{other}"),
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        called.load(Ordering::SeqCst),
        0,
        "sextant logged in to a forged member"
    );
    // The forged intent changed nothing: the primary takes writes.
    let backends: Vec<mysql::Row> = admin.query("SHOW BACKENDS").unwrap();
    let state = backends
        .iter()
        .find(|r| r.get::<String, _>("address").as_deref() == Some(primary.as_str()))
        .and_then(|r| r.get::<String, _>("state"));
    assert_eq!(state.as_deref(), Some("up"), "{backends:?}");
    c.query_drop("CREATE TABLE IF NOT EXISTS trust_rogue (a INT)")
        .unwrap();
    // The peers' login: derived from the secret, good for KILL and SHOW
    // SESSIONS only.
    let peer_pw = sextant_fleet::Seal::new(FLEET_SECRET).derive("peer admin login");
    let mut peer = mysql::Conn::new(
        mysql::OptsBuilder::new()
            .ip_or_hostname(Some("127.0.0.1"))
            .tcp_port(p.admin_port)
            .user(Some("sextant-peer"))
            .pass(Some(peer_pw))
            .prefer_socket(false),
    )
    .expect("a peer's login");
    let _: Vec<mysql::Row> = peer.query("SHOW SESSIONS").unwrap();
    for sql in [
        "SHOW CONFIG".to_string(),
        format!("SET BACKEND '{primary}' STATE offline"),
        "PUSH CONFIG".to_string(),
    ] {
        match peer.query_drop(&sql) {
            Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1227, "{sql}: {}", e.message),
            other => panic!("{sql}: {other:?}"),
        }
    }
    assert!(p.admin_with("adminpass").is_ok());
    let wrong = mysql::Conn::new(
        mysql::OptsBuilder::new()
            .ip_or_hostname(Some("127.0.0.1"))
            .tcp_port(p.admin_port)
            .user(Some("sextant-peer"))
            .pass(Some("adminpass"))
            .prefer_socket(false),
    );
    assert!(wrong.is_err(), "the peer login takes only its own password");
}

/// A second process with a live instance's fleet id (a copied state
/// directory, a second start) does not start: the id is claimed in the
/// fleet's etcd under the instance's lease before any client is taken,
/// wherever the servers stand (before, it served, and SHOW FLEET showed
/// one record for two processes).
#[test]
fn a_live_instances_fleet_id_is_not_taken_twice() {
    let etcd = Etcd::start();
    let cluster = etcd.cluster("dup", "same");
    let a = Setup {
        group: &cluster,
        ..Default::default()
    }
    .start();
    // The port is bound before the id is claimed; a served query says the
    // claim is made (two processes started together race for the id, and
    // either may win: the one that loses does not start).
    assert_eq!(a.conn().query_first::<i64, _>("SELECT 1").unwrap(), Some(1));
    let cfg = std::fs::read_to_string(&a.config).unwrap();
    let (port, admin) = (free_port(), free_port());
    let dup = cfg
        .replace(
            &format!("127.0.0.1:{}", a.port),
            &format!("127.0.0.1:{port}"),
        )
        .replace(
            &format!("127.0.0.1:{}", a.admin_port),
            &format!("127.0.0.1:{admin}"),
        )
        .replace("state-same", "state-same-copy");
    let path = a.config.with_file_name(format!("sextant-dup-{port}.toml"));
    std::fs::write(&path, &dup).unwrap();
    let log = path.with_extension("log");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sextant"))
        .arg("--config")
        .arg(&path)
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(log.with_extension("err")).unwrap())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t.elapsed() > std::time::Duration::from_secs(25) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let text = format!(
        "{}{}",
        std::fs::read_to_string(&log).unwrap_or_default(),
        std::fs::read_to_string(log.with_extension("err")).unwrap_or_default()
    );
    assert!(
        status.is_some_and(|s| !s.success()),
        "a second 'same' started and served: {text}"
    );
    assert!(
        text.contains("instance id \"same\" is held in the fleet by a live process"),
        "{text}"
    );
    // The first goes on, alone in the fleet.
    assert_eq!(a.conn().query_first::<i64, _>("SELECT 3").unwrap(), Some(3));
    let rows: Vec<mysql::Row> = a.admin().query("SHOW FLEET").unwrap();
    assert_eq!(rows.len(), 1);
}

/// KILLs forwarded to the instance holding a session go over one kept
/// connection: 150 KILL QUERYs from one client cost the peer one login
/// (before, one login each).
#[test]
fn forwarded_kills_share_one_peer_login() {
    let etcd = Etcd::start();
    let (ca, cb) = (etcd.cluster("kills", "ka"), etcd.cluster("kills", "kb"));
    let a = Setup {
        group: &ca,
        ..Default::default()
    }
    .start();
    let b = Setup {
        group: &cb,
        ..Default::default()
    }
    .start();
    let mut on_b = b.conn();
    let id: u32 = on_b.query_first("SELECT CONNECTION_ID()").unwrap().unwrap();
    assert_ne!(id >> 24, 0, "a fleet id carries its instance's slot");
    let mut c = a.conn();
    // a learns of b's record at a renewal.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while c.query_drop(format!("KILL QUERY {id}")).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "b's session never found"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    for _ in 0..150 {
        c.query_drop(format!("KILL QUERY {id}")).unwrap();
    }
    let logins = b
        .logs()
        .lines()
        .filter(|l| l.contains("admin login") && l.contains("sextant-peer"))
        .count();
    assert!((1..=2).contains(&logins), "{logins} peer logins on b");
    assert_eq!(on_b.query_first::<i64, _>("SELECT 4").unwrap(), Some(4));
}

/// `statement_memory_mb` bounds what sextant holds for the large
/// statements it admits, not their size alone: each admitted statement
/// also holds the client frame it is read through. With a 128 MB budget
/// and four clients sending 40 MiB statements at once, sextant's memory
/// grows by no more than the budget (and a little for its own runtime);
/// the clients past the budget get 1041 after their statement's last
/// frame, and their sessions go on. (It counted 40 MiB per statement:
/// three were admitted, and RSS grew by several times that.)
#[test]
fn the_statement_budget_counts_what_sextant_holds() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;
    let p = Setup {
        proxy: "statement_memory_mb = 128",
        ..Default::default()
    }
    .start();
    // Every client logged in first: their sessions are not the growth.
    let mut conns: Vec<mysql::Conn> = (0..4).map(|_| p.conn()).collect();
    for c in &mut conns {
        let _: Option<i64> = c.query_first("SELECT 1").unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    let before = p.rss_kib();
    let big = Arc::new(format!(
        "SELECT SLEEP(3) + LENGTH('{}')",
        "a".repeat(40 << 20)
    ));
    let done = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = conns
        .into_iter()
        .map(|mut c| {
            let big = big.clone();
            std::thread::spawn(move || match c.query_first::<i64, _>(big.as_str()) {
                Ok(v) => {
                    assert_eq!(v, Some(40 << 20));
                    true
                }
                Err(mysql::Error::MySqlError(e)) => {
                    assert_eq!(e.code, 1041, "{}", e.message);
                    assert!(e.message.contains("statement_memory_mb"), "{}", e.message);
                    // Refused after its last frame: the session goes on.
                    let v: Option<i64> = c.query_first("SELECT 7").unwrap();
                    assert_eq!(v, Some(7));
                    false
                }
                Err(e) => panic!("{e}"),
            })
        })
        .collect();
    let sampler = {
        let done = done.clone();
        let pid = p.pid();
        std::thread::spawn(move || {
            let mut most = 0u64;
            while !done.load(Ordering::Relaxed) {
                most = most.max(rss_kib_of(pid));
                std::thread::sleep(Duration::from_millis(20));
            }
            most
        })
    };
    let admitted = clients
        .into_iter()
        .map(|t| t.join().unwrap())
        .filter(|a| *a)
        .count();
    done.store(true, Ordering::Relaxed);
    let most = sampler.join().unwrap();
    let grown_mib = most.saturating_sub(before) / 1024;
    eprintln!("admitted {admitted} of 4; RSS grew up to {grown_mib} MiB");
    assert!(admitted >= 1, "no statement was admitted");
    assert!(
        admitted < 3,
        "{admitted} statements of 40 MiB admitted in 128 MB"
    );
    assert!(
        grown_mib <= 128 + 32,
        "sextant grew {grown_mib} MiB with a 128 MB statement budget ({admitted} admitted)"
    );
}
