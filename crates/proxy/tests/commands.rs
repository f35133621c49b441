//! Every command and capability sextant offers, each against real MariaDB
//! through sextant, with the raw protocol where client libraries hide them.

mod common;
use common::*;
use mysql::prelude::Queryable;
use sextant_protocol::consts::{cap, status};
use sextant_protocol::packets::{parse_ok, session_changes, StateChange};
use sextant_protocol::tracker::Expect;

#[test]
fn com_field_list() {
    let p = Setup::default().start();
    p.conn()
        .query_drop("CREATE TABLE IF NOT EXISTS fl_t (a int, b varchar(10))")
        .unwrap();
    let mut r = Raw::login(p.port, "app", "apppass", Some("sextant_test"));
    r.send(0, b"\x04fl_t\x00");
    let resp = r.read_response_as(Expect::FieldList);
    assert_eq!(resp.len(), 3, "two column definitions and EOF: {resp:?}");
    assert!(resp[0].windows(4).any(|w| w == b"fl_t"));
    assert_eq!(resp[2][0], 0xfe);
    r.send(0, b"\x04no_such_table\x00");
    let resp = r.read_response_as(Expect::FieldList);
    assert_eq!(err_of(&resp[0]).0, 1146);
}

#[test]
fn com_set_option_toggles_multi_statements_across_connections() {
    let p = Setup {
        group: "[routing]\nhold_ms = 0\n",
        ..Default::default()
    }
    .start();
    // CAPS lacks CLIENT_MULTI_STATEMENTS.
    let mut r = Raw::login(p.port, "app", "apppass", None);
    let mut churn = p.conn();
    r.query("SELECT 1; SELECT 2");
    assert_eq!(err_of(&r.read_response()[0]).0, 1064);
    r.send(0, &[0x1b, 0, 0]); // MYSQL_OPTION_MULTI_STATEMENTS_ON
    let (_, eof) = r.read().unwrap();
    assert_eq!(eof[0], 0xfe);
    for _ in 0..5 {
        churn.query_drop("SELECT 1").unwrap();
        r.query("SELECT 1; SELECT 2");
        let resp = r.read_response();
        let rows: Vec<_> = resp.iter().filter(|p| p.len() == 2 && p[0] == 1).collect();
        assert_eq!(rows.len(), 2, "{resp:?}");
    }
    r.send(0, &[0x1b, 1, 0]); // OFF
    r.read().unwrap();
    churn.query_drop("SELECT 1").unwrap();
    r.query("SELECT 1; SELECT 2");
    assert_eq!(err_of(&r.read_response()[0]).0, 1064);
}

/// Connector/J with rewriteBatchedStatements: option on, a batch of
/// INSERTs as one multi-statement, option off, back to back on the
/// primary connection the session holds after a write. (The held
/// connection kept the option off: 1064, nothing written.)
#[test]
fn com_set_option_reaches_the_connection_a_session_holds() {
    let p = Setup {
        group: "[routing]\nhold_ms = 60000\n",
        ..Default::default()
    }
    .start();
    p.conn()
        .query_drop("CREATE OR REPLACE TABLE so_batch (id INT PRIMARY KEY)")
        .unwrap();
    let mut r = Raw::login(p.port, "app", "apppass", Some("sextant_test"));
    // A write: the session holds the primary connection from here.
    r.query("INSERT INTO so_batch VALUES (0)");
    assert_eq!(r.read_response()[0][0], 0x00);
    r.send(0, &[0x1b, 0, 0]); // MYSQL_OPTION_MULTI_STATEMENTS_ON
    assert_eq!(r.read().unwrap().1[0], 0xfe);
    let batch: Vec<String> = (1..=10)
        .map(|i| format!("INSERT INTO so_batch VALUES ({i})"))
        .collect();
    r.query(&batch.join(";"));
    let resp = r.read_response();
    assert!(resp.iter().all(|p| p[0] == 0x00), "{resp:?}");
    r.send(0, &[0x1b, 1, 0]); // OFF
    assert_eq!(r.read().unwrap().1[0], 0xfe);
    r.query("SELECT 1; SELECT 2");
    assert_eq!(err_of(&r.read_response()[0]).0, 1064);
    let n: Option<i64> = p
        .conn()
        .query_first("SELECT COUNT(*) FROM so_batch")
        .unwrap();
    assert_eq!(n, Some(11));
}

#[test]
fn com_stmt_reset_close_and_quit() {
    let p = Setup::default().start();
    let mut r = Raw::login(p.port, "app", "apppass", None);
    r.send(0, b"\x16SELECT ?");
    let resp = r.read_response_as(Expect::Prepare);
    let id = u32::from_le_bytes(resp[0][1..5].try_into().unwrap());
    let mut reset = vec![0x1a];
    reset.extend_from_slice(&id.to_le_bytes());
    r.send(0, &reset);
    let (_, ok) = r.read().unwrap();
    assert_eq!(ok[0], 0, "COM_STMT_RESET answers OK");
    let mut close = vec![0x19];
    close.extend_from_slice(&id.to_le_bytes());
    r.send(0, &close); // no answer
    r.send(0, &reset);
    let (_, e) = r.read().unwrap();
    assert_eq!(err_of(&e).0, 1243, "a closed statement is unknown");
    let before = client_count(&p);
    r.send(0, &[0x01]); // COM_QUIT
    assert!(r.read().is_none(), "sextant closes on COM_QUIT");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while client_count(&p) >= before {
        assert!(std::time::Instant::now() < deadline, "session not ended");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn client_count(p: &Proxy) -> u64 {
    let rows: Vec<(String, String)> = p.admin().query("SHOW STATUS").unwrap();
    rows.iter()
        .find(|(k, _)| k == "client_connections")
        .map(|(_, v)| v.parse().unwrap())
        .unwrap()
}

#[test]
fn session_track_and_deprecate_eof_as_the_client_negotiated() {
    let p = Setup::default().start();
    p.conn()
        .query_drop("CREATE TABLE IF NOT EXISTS st_t (id int primary key, v int)")
        .unwrap();
    p.conn()
        .query_drop("REPLACE INTO st_t VALUES (1, 0)")
        .unwrap();
    let attrs = vec![
        ("_client_name".to_string(), "sextant-test".to_string()),
        ("purpose".into(), "attrs".into()),
    ];
    // A client with session tracking and without EOF packets.
    let caps = CAPS | cap::SESSION_TRACK | cap::DEPRECATE_EOF | cap::CONNECT_ATTRS;
    let mut r = Raw::login_with(p.port, "app", "apppass", Some("sextant_test"), caps, attrs);
    // time_zone is among the variables servers report by default.
    r.query("SET SESSION time_zone = '+01:00'");
    let resp = r.read_response();
    let ok = parse_ok(&resp[0], true).unwrap();
    assert!(ok.status & status::SESSION_STATE_CHANGED != 0);
    let changes: Vec<_> = session_changes(ok.session_state)
        .map(|c| c.unwrap())
        .collect();
    assert!(
        changes.iter().any(
            |c| matches!(c, StateChange::SystemVariable { name, .. } if *name == b"time_zone")
        ),
        "{changes:?}"
    );
    r.query("SELECT 1");
    let resp = r.read_response();
    assert_eq!(resp.len(), 4, "count, definition, row, OK: {resp:?}");
    assert_eq!(resp[3][0], 0xfe);
    r.query("UPDATE st_t SET v = v + 1 WHERE id = 1");
    let ok_bytes = r.read_response().remove(0);
    let ok = parse_ok(&ok_bytes, true).unwrap();
    assert!(
        ok.info.starts_with(b"Rows matched: 1"),
        "{:?}",
        String::from_utf8_lossy(ok.info)
    );

    // A client with neither: no state in OK packets, info as a plain string,
    // EOF packets after definitions and rows.
    let mut r = Raw::login(p.port, "app", "apppass", Some("sextant_test"));
    r.query("SET SESSION sql_mode = 'ANSI'");
    let resp = r.read_response();
    let ok = parse_ok(&resp[0], false).unwrap();
    assert_eq!(ok.status & status::SESSION_STATE_CHANGED, 0);
    assert!(ok.info.is_empty(), "{:?}", ok.info);
    r.query("UPDATE st_t SET v = v + 1 WHERE id = 1");
    let ok_bytes = r.read_response().remove(0);
    let ok = parse_ok(&ok_bytes, false).unwrap();
    assert!(
        ok.info.starts_with(b"Rows matched: 1"),
        "{:?}",
        String::from_utf8_lossy(ok.info)
    );
    r.query("SELECT 1");
    let resp = r.read_response();
    assert_eq!(resp.len(), 5, "count, definition, EOF, row, EOF: {resp:?}");
}

/// A response as a client sees it: OK and ERR packets whole, and for a
/// result set its column names, rows and closing packet.
fn seen(r: &mut Raw, sql: &str) -> String {
    r.query(sql);
    let resp = r.read_response();
    if resp.len() == 1 {
        return match resp[0][0] {
            0xff => format!("ERR {}", err_of(&resp[0]).0),
            _ => ok_seen(&resp[0]),
        };
    }
    let columns = resp[0][0] as usize;
    let names: Vec<String> = resp[1..=columns]
        .iter()
        .map(|d| {
            let mut i = 0;
            let mut field = || {
                let n = d[i] as usize;
                let f = String::from_utf8_lossy(&d[i + 1..i + 1 + n]).to_string();
                i += 1 + n;
                f
            };
            (0..4).for_each(|_| {
                field();
            });
            field()
        })
        .collect();
    let rows: Vec<String> = resp[columns + 1..resp.len() - 1]
        .iter()
        .map(|row| String::from_utf8_lossy(row).to_string())
        .collect();
    format!("{names:?} {rows:?} {}", ok_seen(resp.last().unwrap()))
}

/// An OK packet with its session-state entries in a stable order (the
/// server's order follows its hash tables).
fn ok_seen(p: &[u8]) -> String {
    let ok = parse_ok(p, true).unwrap();
    let mut entries: Vec<String> = session_changes(ok.session_state)
        .map(|c| match c.unwrap() {
            StateChange::SystemVariable { name, value } => format!(
                "{}={}",
                String::from_utf8_lossy(name),
                String::from_utf8_lossy(value)
            ),
            other => format!("{other:?}"),
        })
        .collect();
    entries.sort();
    format!(
        "OK status {:#x} affected {} info {:?} state {entries:?}",
        ok.status,
        ok.affected_rows,
        String::from_utf8_lossy(ok.info)
    )
}

#[test]
fn session_state_reports_are_what_the_server_sends_a_direct_client() {
    // Servers track everything for sextant; a client with CLIENT_SESSION_TRACK
    // must see only what its own session_track_* settings ask for, and
    // read back its own settings and timeouts.
    let p = Setup::default().start();
    direct(lab().primary)
        .query_drop(
            "CREATE TABLE IF NOT EXISTS sextant_test.track_t (id int primary key, v int); \
             DELETE FROM sextant_test.track_t",
        )
        .unwrap();
    let script = [
        "SELECT @@session_track_system_variables, @@session_track_schema, @@SESSION.session_track_state_change",
        "USE sextant_test",
        "SET NAMES latin1",
        "SET time_zone = '+02:00'",
        "SET sql_mode = 'ANSI'",
        "SET autocommit = 0",
        "INSERT INTO track_t VALUES (ID, 1)",
        "COMMIT",
        "SET autocommit = 1",
        "SET @u = 1",
        "CREATE TEMPORARY TABLE track_tmp (x int)",
        "SET session_track_state_change = ON",
        "SET @u = 2",
        "SET session_track_system_variables = 'sql_mode,wait_timeout'",
        "SET sql_mode = 'TRADITIONAL'",
        "SET NAMES utf8mb4",
        "SET wait_timeout = 100",
        "SELECT @@wait_timeout, @@global.wait_timeout = @@global.wait_timeout AS same",
        "SET session_track_schema = OFF",
        "USE sextant_test",
        "SET session_track_transaction_info = CHARACTERISTICS",
        "START TRANSACTION READ ONLY",
        "SELECT COUNT(*) FROM track_t WHERE id = ID",
        "COMMIT",
        "SET session_track_system_variables = '*'",
        "SET lock_wait_timeout = 40",
        "SELECT @@session_track_system_variables, @@session_track_schema, @@session_track_state_change, @@session_track_transaction_info",
    ];
    let caps = CAPS | cap::SESSION_TRACK | cap::DEPRECATE_EOF;
    let run = |port: u16, id: u32| -> Vec<String> {
        let mut r = Raw::login_with(port, "app", "apppass", None, caps, vec![]);
        script
            .iter()
            .map(|sql| {
                let seen = seen(&mut r, &sql.replace("ID", &id.to_string()));
                format!("{sql} => {seen}")
            })
            .collect()
    };
    let want = run(lab().primary, 1);
    let got = run(p.port, 2);
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(g, w, "through sextant, then directly");
    }
    // The script is one that tells: a client that asked for nothing sees
    // no report of sextant's own tracking (last_gtid of the INSERT, the
    // user variable), and does see what it turned on later.
    assert!(want[6].ends_with("state []"), "{}", want[6]);
    assert!(want[9].ends_with("state []"), "{}", want[9]);
    assert!(want[12].contains("StateChanged(true)"), "{}", want[12]);
}

#[test]
fn mariadb_extended_metadata_as_the_client_negotiated() {
    // Column definitions of a JSON and an INET6 column, text and prepared,
    // must be byte for byte what the server sends a direct client: with
    // the extended type block for a client that asked for it (drivers tell
    // JSON from text by it), without for one that did not.
    let p = Setup::default().start();
    direct(lab().primary)
        .query_drop(
            "CREATE TABLE IF NOT EXISTS sextant_test.ext_t (id int primary key, j json, ip inet6); \
             REPLACE INTO sextant_test.ext_t VALUES (1, '{\"a\": 1}', '::1')",
        )
        .unwrap();
    sync_replicas();
    let ext = sextant_protocol::consts::mariadb_cap::EXTENDED_METADATA;
    let defs = |port: u16, mariadb_caps: u32| -> Vec<Vec<u8>> {
        let mut r = Raw::login_mariadb(
            port,
            "app",
            "apppass",
            Some("sextant_test"),
            CAPS | cap::DEPRECATE_EOF,
            vec![],
            mariadb_caps,
        );
        r.query("SELECT j, ip FROM ext_t WHERE id = 1");
        let mut got: Vec<Vec<u8>> = r.read_response()[1..3].to_vec();
        r.send(0, b"\x16SELECT j, ip FROM ext_t WHERE id = 1");
        let prep = r.read_response_as(Expect::Prepare);
        got.extend(prep[1..3].iter().cloned());
        got
    };
    for mariadb_caps in [0, ext] {
        let want = defs(lab().primary, mariadb_caps);
        let has_block = want[0].windows(4).any(|w| w == b"json");
        assert_eq!(has_block, mariadb_caps != 0, "the server's own answer");
        for _ in 0..3 {
            assert_eq!(
                defs(p.port, mariadb_caps),
                want,
                "extended caps {mariadb_caps}"
            );
        }
    }
}

#[test]
fn zstd_compression_for_mysql8_clients() {
    // SIMULATED MySQL 8 client (no MySQL 8 client library here): in front
    // of a MySQL-versioned server sextant offers
    // CLIENT_ZSTD_COMPRESSION_ALGORITHM as MySQL 8 does; a client taking
    // it (with level 3) talks zstd frames after the login's OK.
    use sextant_protocol::compress::{Algorithm, Compression};
    use std::io::{Read, Write};
    let p = Setup {
        proxy: "server_version = \"8.0.36-sextant\"",
        ..Default::default()
    }
    .start();
    let mut r = Raw::connect(p.port);
    let (_, greeting) = r.read().unwrap();
    let hs = sextant_protocol::handshake::InitialHandshake::parse(&greeting).unwrap();
    assert!(hs.capabilities & cap::ZSTD_COMPRESSION != 0, "zstd offered");
    let mut resp = Vec::new();
    sextant_protocol::handshake::HandshakeResponse {
        capabilities: CAPS | cap::ZSTD_COMPRESSION | cap::DEPRECATE_EOF,
        max_packet: 1 << 24,
        charset: 45,
        user: "app".into(),
        auth_response: sextant_protocol::auth::native_scramble(b"apppass", &hs.nonce),
        database: None,
        auth_plugin: Some("mysql_native_password".into()),
        attrs: vec![],
        mariadb_caps: 0,
        zstd_level: 3,
    }
    .encode(&mut resp);
    r.send(1, &resp);
    let (_, ok) = r.read().unwrap();
    assert_eq!(ok[0], 0, "the login OK comes uncompressed");
    let mut z = Compression::new(Algorithm::Zstd(3));
    let mut query = Vec::new();
    sextant_protocol::codec::write_packet(&mut query, 0, b"\x03SELECT REPEAT('a', 100000) AS r");
    let mut wire = Vec::new();
    z.encode(&query, &mut wire);
    r.s.write_all(&wire).unwrap();
    // Frames until the whole result (column count, definition, row, OK).
    let (mut raw, mut plain) = (Vec::new(), Vec::new());
    let mut buf = [0u8; 65536];
    let mut packets = Vec::new();
    while packets.len() < 4 {
        let n = r.s.read(&mut buf).unwrap();
        assert!(n > 0, "connection closed");
        raw.extend_from_slice(&buf[..n]);
        z.decode(&mut raw, &mut plain, usize::MAX, 1 << 24).unwrap();
        while let Some(h) = sextant_protocol::codec::parse_header(&plain) {
            if plain.len() < 4 + h.len {
                break;
            }
            packets.push(plain[4..4 + h.len].to_vec());
            plain.drain(..4 + h.len);
        }
    }
    let row = &packets[2];
    assert_eq!(row.len(), 100_000 + 4, "lenenc length and 100,000 bytes");
    assert_eq!(packets[3][0], 0xfe);
}

#[test]
fn mariadb_progress_reports_reach_clients_that_asked() {
    // A long ALTER sends progress reports (ERR-shaped packets, code 0xFFFF)
    // to a client with MARIADB_CLIENT_PROGRESS; through sextant they must
    // arrive as they do directly, and the answer go on to its OK.
    let p = Setup::default().start();
    direct(lab().primary)
        .query_drop(
            "DROP TABLE IF EXISTS sextant_test.progress_t; \
             CREATE TABLE sextant_test.progress_t (id int primary key, v varchar(100)) \
             SELECT seq AS id, REPEAT('x', 80) AS v FROM seq_1_to_500000",
        )
        .unwrap();
    let progress = sextant_protocol::consts::mariadb_cap::PROGRESS;
    let reports = |port: u16, mariadb_caps: u32| -> (usize, u8) {
        let mut r = Raw::login_mariadb(
            port,
            "app",
            "apppass",
            Some("sextant_test"),
            CAPS | cap::DEPRECATE_EOF,
            vec![],
            mariadb_caps,
        );
        r.query("SET SESSION progress_report_time = 1");
        r.read_response();
        r.query("ALTER TABLE progress_t FORCE, ALGORITHM=COPY");
        let resp = r.read_response();
        let n = resp
            .iter()
            .filter(|p| p.starts_with(&[0xff, 0xff, 0xff]))
            .count();
        (n, resp.last().unwrap()[0])
    };
    let (direct_n, end) = reports(lab().primary, progress);
    assert!(
        direct_n >= 1 && end == 0,
        "the server reports progress: {direct_n}"
    );
    let (n, end) = reports(p.port, progress);
    assert!(
        n >= 1 && end == 0,
        "through sextant: {n} reports, then {end:#x}"
    );
    let (n, end) = reports(p.port, 0);
    assert!(
        n == 0 && end == 0,
        "a client that did not ask gets none: {n}"
    );
}

#[test]
fn net_write_timeout_drops_a_client_that_stops_reading() {
    // A client that set net_write_timeout and stops reading a large result
    // loses its connection, as with the server (which sends what fits in
    // the socket buffers, then gives up); one that did not set it may pause
    // and read on.
    use std::io::Read;
    let p = Setup::default().start();
    let stalled = |port: u16, set: bool, rows: u32| -> (usize, bool) {
        let mut r = Raw::login(port, "app", "apppass", Some("sextant_test"));
        if set {
            r.query("SET SESSION net_write_timeout = 1");
            r.read_response();
        }
        r.query(&format!("SELECT REPEAT('x', 1000) FROM seq_1_to_{rows}"));
        std::thread::sleep(std::time::Duration::from_secs(4));
        let mut all = Vec::new();
        // A reset ends the reading too; what arrived before it counts.
        let _ = r.s.read_to_end(&mut all);
        // The result ends with an EOF packet (fe 00 00 ...), or not at all.
        let whole = all.len() >= 9 && all[all.len() - 5] == 0xfe;
        (all.len(), whole)
    };
    let (direct_bytes, whole) = stalled(lab().primary, true, 200_000);
    assert!(
        !whole,
        "the server gave up on the client ({direct_bytes} bytes)"
    );
    let (bytes, whole) = stalled(p.port, true, 200_000);
    assert!(
        !whole && bytes < 150_000_000,
        "sextant gave up on the client ({bytes} bytes)"
    );
    // Not set: the pause is fine (the server's own default is 60 s).
    let mut r = Raw::login(p.port, "app", "apppass", Some("sextant_test"));
    r.s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    r.query("SELECT REPEAT('x', 1000) FROM seq_1_to_20000");
    std::thread::sleep(std::time::Duration::from_secs(3));
    let (packets, _) = r.drain_result();
    assert_eq!(
        packets,
        20_000 + 4,
        "column count, definition, EOF, rows, EOF"
    );
}

/// Column names and first row of a text query.
fn named_row(c: &mut mysql::Conn, sql: &str) -> (Vec<String>, Vec<String>) {
    let mut res = c.query_iter(sql).unwrap();
    let names = res
        .columns()
        .as_ref()
        .iter()
        .map(|c| c.name_str().to_string())
        .collect();
    let row: mysql::Row = res.next().unwrap().unwrap();
    let values = (0..row.len())
        .map(|i| match row.as_ref(i).unwrap() {
            mysql::Value::Bytes(b) => String::from_utf8_lossy(b).to_string(),
            v => v.as_sql(true),
        })
        .collect();
    (names, values)
}

#[test]
fn connection_id_and_timeouts_read_back_as_the_client_knows_them() {
    let p = Setup::default().start();
    let mut c = p.conn();
    let id = c.connection_id();
    // The id of the handshake, which KILL takes, under the name the
    // server gives the column; in any position, and in prepared statements.
    let (names, row) = named_row(&mut c, "SELECT CONNECTION_ID(), connection_id() AS id");
    assert_eq!(names, ["CONNECTION_ID()", "id"]);
    assert_eq!(row, [id.to_string(), id.to_string()]);
    let n: Option<u64> = c
        .query_first(
            "SELECT COUNT(*) FROM (SELECT CONNECTION_ID() AS i) x WHERE i = CONNECTION_ID()",
        )
        .unwrap();
    assert_eq!(n, Some(1));
    let got: Option<u64> = c.exec_first("SELECT CONNECTION_ID() + ?", (0,)).unwrap();
    assert_eq!(got, Some(id as u64));
    c.query_drop("BEGIN").unwrap();
    let got: Option<u64> = c.query_first("SELECT CONNECTION_ID()").unwrap();
    c.query_drop("COMMIT").unwrap();
    assert_eq!(got, Some(id as u64), "inside a transaction too");

    // A client's timeouts are its own, and read back as a direct
    // connection reads them.
    let script = "SELECT @@wait_timeout, @@SESSION.net_read_timeout, @@session_track_schema";
    let global = named_row(&mut direct(lab().primary), script);
    assert_eq!(named_row(&mut c, script), global, "before any SET");
    let set = "SET SESSION wait_timeout = 77, net_read_timeout = 45";
    c.query_drop(set).unwrap();
    let mut d = direct(lab().primary);
    d.query_drop(set).unwrap();
    let want = named_row(&mut d, script);
    assert_eq!(want.1[..2], ["77", "45"]);
    assert_eq!(named_row(&mut c, script), want);
    // Other sessions (on the same pooled server connections) are not
    // affected.
    for _ in 0..4 {
        assert_eq!(named_row(&mut p.conn(), script), global);
    }
    // SHOW VARIABLES too, including session tracking, which sextant's
    // server connections have set their own way.
    let show = "SHOW SESSION VARIABLES WHERE Variable_name IN ('wait_timeout', \
                'net_read_timeout', 'session_track_schema', 'session_track_state_change', \
                'session_track_system_variables', 'sql_mode')";
    let rows = |c: &mut mysql::Conn| -> Vec<(String, String)> { c.query(show).unwrap() };
    let want = rows(&mut d);
    assert!(
        want.contains(&("wait_timeout".into(), "77".into())),
        "{want:?}"
    );
    assert_eq!(rows(&mut c), want, "after SET");
    assert_eq!(
        rows(&mut p.conn()),
        rows(&mut direct(lab().primary)),
        "a new session"
    );
}

#[test]
fn procedures_through_prepared_statements() {
    let p = Setup::default().start();
    let mut c = p.conn();
    c.query_drop("DROP PROCEDURE IF EXISTS ps_two_sets")
        .unwrap();
    c.query_drop("CREATE PROCEDURE ps_two_sets(IN n INT) BEGIN SELECT n; SELECT n * 2, 'x'; END")
        .unwrap();
    let mut sets: Vec<Vec<mysql::Row>> = Vec::new();
    let mut result = c.exec_iter("CALL ps_two_sets(?)", (21,)).unwrap();
    while let Some(set) = result.iter() {
        sets.push(set.map(|r| r.unwrap()).collect());
    }
    drop(result);
    assert_eq!(sets.len(), 3, "two result sets and the CALL's own status");
    assert_eq!(sets[0][0].get::<i64, _>(0), Some(21));
    assert_eq!(sets[1][0].get::<i64, _>(0), Some(42));
    let v: Option<i32> = c.query_first("SELECT 5").unwrap();
    assert_eq!(v, Some(5));
}

#[test]
fn lock_tables_pins_until_unlock() {
    let p = Setup {
        group: "pool_max = 2\n[routing]\nhold_ms = 0\n",
        ..Default::default()
    }
    .start();
    let mut a = p.conn();
    let mut b = p.conn();
    a.query_drop("CREATE TABLE IF NOT EXISTS lt_t (id int)")
        .unwrap();
    a.query_drop("LOCK TABLES lt_t WRITE").unwrap();
    for i in 0..5 {
        b.query_drop("SELECT 1").unwrap();
        a.query_drop(format!("INSERT INTO lt_t VALUES ({i})"))
            .unwrap();
        // Only the locking connection may read the table now.
        let n: Option<i64> = a.query_first("SELECT COUNT(*) FROM lt_t").unwrap();
        assert!(n.unwrap() > i);
    }
    a.query_drop("UNLOCK TABLES").unwrap();
    let n: Option<i64> = b
        .query_first("/*#mode=READWRITE*/ SELECT COUNT(*) >= 5 FROM lt_t")
        .unwrap();
    assert_eq!(n, Some(1));
}

#[test]
fn hold_window_keeps_the_connection_between_statements() {
    let borrows = |p: &Proxy| -> u64 { p.backends_sum("borrows") };
    // Default hold (256 ms): back-to-back statements, one borrow, one
    // server connection.
    let p = Setup::default().start();
    let mut c = p.conn();
    // Let the connection used by the client library's own start-up
    // queries go back first.
    std::thread::sleep(std::time::Duration::from_millis(600));
    let before = borrows(&p);
    let ids: Vec<u64> = (0..20)
        .map(|_| {
            c.query_first::<u64, _>("SELECT @@pseudo_thread_id")
                .unwrap()
                .unwrap()
        })
        .collect();
    assert!(ids.iter().all(|&i| i == ids[0]), "{ids:?}");
    assert_eq!(borrows(&p) - before, 1);
    // After the window the connection goes back (and the next statement
    // borrows again).
    std::thread::sleep(std::time::Duration::from_millis(600));
    c.query_drop("SELECT 1").unwrap();
    assert_eq!(borrows(&p) - before, 2);
    // hold_ms = 0: a borrow per statement.
    let p = Setup {
        group: "[routing]\nhold_ms = 0\n",
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    let before = borrows(&p);
    for _ in 0..20 {
        c.query_drop("SELECT 1").unwrap();
    }
    assert_eq!(borrows(&p) - before, 20);
}

#[test]
fn command_line() {
    let bin = env!("CARGO_BIN_EXE_sextant");
    let run = |args: &[&str]| std::process::Command::new(bin).args(args).output().unwrap();
    let out = run(&["--version"]);
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).starts_with("sextant "));
    let out = run(&["--help"]);
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("check-config"));
    for name in ["sextant", "failover"] {
        let example = repo_root().join(format!("examples/{name}.toml"));
        let out = run(&["check-config", example.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("OK"));
    }
    let bad = std::env::temp_dir().join(format!("sextant-bad-{}.toml", std::process::id()));
    std::fs::write(&bad, "[proxy]\nlisten = \"127.0.0.1:6033\"\nlisen = 1\n").unwrap();
    let out = run(&["--config", bad.to_str().unwrap(), "--check"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err.contains(bad.to_str().unwrap()) && err.contains("line 3") && err.contains("lisen"),
        "{err}"
    );
    let out = run(&["--frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
    // A sharded layout, explained by check-config.
    let sharded = repo_root().join("examples/sharding.toml");
    let out = run(&["check-config", sharded.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("table tpcc_shard.warehouse: sharded by w_id (vdb 1)")
            && text.contains("slot 3 -> data4")
            && text.contains("tables not listed are in data4"),
        "{text}"
    );
    let _ = std::fs::remove_file(bad);
}

#[test]
fn connections_go_back_after_every_kind_of_command() {
    let p = Setup::default().start();
    let used = |p: &Proxy| -> u64 { p.backends_sum("conn_used") };
    let mut r = Raw::login(p.port, "app", "apppass", None);
    for (what, payload, expect) in [
        ("COM_INIT_DB", b"\x02sextant_test".to_vec(), Expect::Single),
        (
            "COM_FIELD_LIST",
            b"\x04fl_t\x00".to_vec(),
            Expect::FieldList,
        ),
        ("COM_STATISTICS", b"\x09".to_vec(), Expect::Single),
        ("COM_QUERY", b"\x03SELECT 1".to_vec(), Expect::Query),
        (
            "COM_STMT_PREPARE",
            b"\x16SELECT 1".to_vec(),
            Expect::Prepare,
        ),
    ] {
        r.send(0, &payload);
        r.read_response_as(expect);
        // The hold window is 256 ms: after it, nothing may stay borrowed by
        // an idle client.
        std::thread::sleep(std::time::Duration::from_millis(600));
        assert_eq!(
            used(&p),
            0,
            "a server connection stayed with an idle client after {what}"
        );
    }
}

fn kill_error(c: &mut mysql::Conn, sql: &str) -> Option<u16> {
    match c.query_drop(sql) {
        Ok(()) => None,
        Err(mysql::Error::MySqlError(e)) => Some(e.code),
        Err(e) => panic!("{sql}: {e}"),
    }
}

/// KILL's odd ids answered as the server answers them (its answers,
/// directly, on MariaDB 10.11): NULL and a string without digits are id 0
/// (1094), `KILL QUERY CONNECTION_ID()` interrupts itself (1317) and the
/// session goes on; an expression sextant cannot evaluate is refused
/// naming it. (NULL and strings got 1235 "KILL QUERY ID and KILL USER";
/// KILL QUERY CONNECTION_ID() got OK.)
#[test]
fn kill_of_odd_ids_is_answered_as_the_server_does() {
    let p = Setup::default().start();
    let mut c = p.conn();
    let mut d = direct(lab().primary);
    for sql in [
        "KILL NULL",
        "KILL QUERY NULL",
        "KILL 'abc'",
        "KILL QUERY CONNECTION_ID()",
    ] {
        let server = kill_error(&mut d, sql);
        let through = kill_error(&mut c, sql);
        assert_eq!(
            through, server,
            "{sql}: through sextant {through:?}, directly {server:?}"
        );
    }
    assert_eq!(kill_error(&mut c, "KILL QUERY CONNECTION_ID()"), Some(1317));
    match c.query_drop("KILL CONNECTION_ID() + 1000") {
        Err(mysql::Error::MySqlError(e)) => {
            assert_eq!(e.code, 1235);
            assert!(e.message.contains("not an expression"), "{}", e.message);
        }
        r => panic!("{r:?}"),
    }
    let v: Option<i64> = c.query_first("SELECT 1").unwrap();
    assert_eq!(v, Some(1), "the session goes on");
}

#[test]
fn kill_by_a_connection_admin_and_from_the_admin_port() {
    let p = Setup {
        users: "\n[[users]]\nname = \"ops\"\npassword = \"opspass\"\nbackend_user = \"app\"\nbackend_password = \"apppass\"\nconnection_admin = true\n",
        ..Default::default()
    }
    .start();
    let sleep_in = |mut c: mysql::Conn| {
        std::thread::spawn(move || {
            let t0 = std::time::Instant::now();
            let r: Result<Option<i64>, _> = c.query_first("SELECT SLEEP(20)");
            (c, r.map_err(|e| e.to_string()), t0.elapsed())
        })
    };
    let quick = |took: std::time::Duration| took < std::time::Duration::from_secs(5);
    let ops_url = p.url("ops", "opspass", "sextant_test");
    let mut ops = mysql::Conn::new(mysql::Opts::from_url(&ops_url).unwrap()).unwrap();
    let mut other = mysql::Conn::new(
        mysql::Opts::from_url(&p.url("other", "otherpass", "sextant_test")).unwrap(),
    )
    .unwrap();

    // An ordinary user may not kill app's session; a connection admin may.
    let a = p.conn();
    let a_id = a.connection_id();
    let sleeper = sleep_in(a);
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert_eq!(
        kill_error(&mut other, &format!("KILL QUERY {a_id}")),
        Some(1095)
    );
    assert_eq!(kill_error(&mut ops, &format!("KILL QUERY {a_id}")), None);
    let (_a, r, took) = sleeper.join().unwrap();
    assert!(quick(took), "SLEEP ran {took:?}: {r:?}");

    // The admin port lists sessions, with the server running a statement.
    let b = p.conn();
    let b_id = b.connection_id();
    let sleeper = sleep_in(b);
    std::thread::sleep(std::time::Duration::from_millis(400));
    let mut admin = p.admin();
    let rows: Vec<mysql::Row> = admin.query("SHOW SESSIONS").unwrap();
    let row = rows
        .iter()
        .find(|r| r.get::<String, _>("id").as_deref() == Some(&b_id.to_string()))
        .expect("the session is listed");
    assert_eq!(row.get::<String, _>("user").as_deref(), Some("app"));
    assert_eq!(row.get::<String, _>("state").as_deref(), Some("running"));
    let server: String = row.get("server").unwrap();
    assert!(server.starts_with("127.0.0.1:"), "{server}");
    // ...and KILL there cancels the statement, then ends the session.
    admin.query_drop(format!("KILL QUERY {b_id}")).unwrap();
    let (mut b, r, took) = sleeper.join().unwrap();
    assert!(quick(took), "SLEEP ran {took:?}: {r:?}");
    let one: Option<i64> = b.query_first("SELECT 1").unwrap();
    assert_eq!(one, Some(1));
    admin.query_drop(format!("KILL {b_id}")).unwrap();
    assert!(b.query_drop("SELECT 1").is_err(), "the session was ended");
    match admin.query_drop("KILL 999999") {
        Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1094),
        other => panic!("{other:?}"),
    }
    // After COM_CHANGE_USER the session belongs to its new user.
    let mut changed = p.conn();
    let changed_id = changed.connection_id();
    changed
        .change_user(
            mysql::ChangeUserOpts::default()
                .with_user(Some("other".into()))
                .with_pass(Some("otherpass".into())),
        )
        .unwrap();
    let mut app = p.conn();
    assert_eq!(
        kill_error(&mut app, &format!("KILL QUERY {changed_id}")),
        Some(1095)
    );
    assert_eq!(
        kill_error(&mut other, &format!("KILL QUERY {changed_id}")),
        None
    );
}

/// KILL names sextant's sessions by the id their handshake gave them (what
/// the mysql client's Ctrl-C sends): KILL QUERY cancels that session's
/// statement on whichever server runs it, KILL ends the session, and an id
/// that is no session of sextant's is refused (1094) instead of reaching a
/// server, where it would name another thread.
#[test]
fn kill_names_sextant_sessions_never_server_threads() {
    let p = Setup::default().start();
    let mut a = p.conn();
    let a_id = a.connection_id();
    let sleeper = std::thread::spawn(move || {
        let t0 = std::time::Instant::now();
        let r: Result<Option<i64>, _> = a.query_first("SELECT SLEEP(20)");
        (a, r.map_err(|e| e.to_string()), t0.elapsed())
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    let mut b = p.conn();
    assert_eq!(kill_error(&mut b, &format!("KILL QUERY {a_id}")), None);
    let (mut a, r, took) = sleeper.join().unwrap();
    assert!(
        took < std::time::Duration::from_secs(5),
        "SLEEP ran {took:?}"
    );
    // MariaDB's SLEEP returns 1 when interrupted.
    assert!(matches!(r, Ok(Some(1))) || r.is_err(), "{r:?}");
    let v: Option<i64> = a.query_first("SELECT 1").unwrap();
    assert_eq!(v, Some(1), "the session goes on after KILL QUERY");

    // A server thread's id: refused, and the thread untouched.
    let mut victim = direct(lab().primary);
    let vid: Option<u64> = victim.query_first("SELECT CONNECTION_ID()").unwrap();
    let vid = vid.unwrap();
    let busy = std::thread::spawn(move || {
        let v: Option<i64> = victim.query_first("SELECT SLEEP(1)").unwrap();
        v
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(kill_error(&mut b, &format!("KILL QUERY {vid}")), Some(1094));
    assert_eq!(kill_error(&mut b, &format!("KILL {vid}")), Some(1094));
    assert_eq!(
        busy.join().unwrap(),
        Some(0),
        "a direct client's query was killed"
    );
    for &r in &lab().replicas {
        let rows: Vec<mysql::Row> = direct(r).query("SHOW SLAVE STATUS").unwrap();
        let io: String = rows[0].get("Slave_IO_Running").unwrap();
        assert_eq!(io, "Yes", "replication on {r}");
    }

    // Another user's session: not this user's to kill.
    let mut other = mysql::Conn::new(
        mysql::Opts::from_url(&p.url("other", "otherpass", "sextant_test")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        kill_error(&mut other, &format!("KILL QUERY {a_id}")),
        Some(1095)
    );
    assert_eq!(kill_error(&mut b, "KILL QUERY ID 5"), Some(1235));

    // KILL ends the session.
    assert_eq!(kill_error(&mut b, &format!("KILL {a_id}")), None);
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        a.query_drop("SELECT 1").is_err(),
        "the killed session still runs statements"
    );
    let v: Option<i64> = b.query_first("SELECT 2").unwrap();
    assert_eq!(v, Some(2));
}

/// A KILL a server would run with its own thread ids never reaches one.
/// Among other statements of one packet it is sextant's, and the
/// statements after it still run (a failed KILL stops the packet there,
/// as a failed statement does); as the text of dynamic SQL or prepared it
/// is refused (1235). An unrelated connection with that thread id lives
/// on.
#[test]
fn a_kill_among_statements_is_sextants_and_never_reaches_a_server() {
    let p = Setup::default().start();
    let mut bystander = direct(lab().primary);
    let tid: u64 = bystander
        .query_first("SELECT CONNECTION_ID()")
        .unwrap()
        .unwrap();
    let mut c = p.conn();
    c.query_drop("CREATE TABLE IF NOT EXISTS kill_marks (n INT)")
        .unwrap();
    c.query_drop("DELETE FROM kill_marks").unwrap();
    let err = |c: &mut mysql::Conn, sql: &str| -> (u16, String) {
        match c.query_iter(sql).and_then(|mut r| {
            while let Some(set) = r.iter() {
                for row in set {
                    row?;
                }
            }
            Ok(())
        }) {
            Err(mysql::Error::MySqlError(e)) => (e.code, e.message),
            other => panic!("{sql}: {other:?}"),
        }
    };
    // tid is a server thread, no sextant session: 1094, where the KILL is.
    assert_eq!(err(&mut c, &format!("SELECT 1; KILL {tid}")).0, 1094);
    assert_eq!(
        err(
            &mut c,
            &format!("INSERT INTO kill_marks VALUES (1); KILL QUERY {tid}")
        )
        .0,
        1094
    );
    assert_eq!(
        err(
            &mut c,
            &format!("KILL {tid}; INSERT INTO kill_marks VALUES (2)")
        )
        .0,
        1094
    );
    for sql in [
        format!("EXECUTE IMMEDIATE 'KILL {tid}'"),
        format!("EXECUTE IMMEDIATE 'KILL QUERY {tid}'"),
        format!("PREPARE k FROM ' kill {tid}'"),
    ] {
        let (code, msg) = err(&mut c, &sql);
        assert_eq!(code, 1235, "{sql}: {msg}");
        assert!(msg.contains("not as the text of PREPARE"), "{msg}");
    }
    match c.prep("KILL ?") {
        Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1235, "{}", e.message),
        other => panic!("KILL ? prepared: {other:?}"),
    }
    // Dynamic SQL whose text is in a variable: sextant reads it first.
    c.query_drop(format!(
        "SET @k = ' KILL QUERY {tid}', @id = {tid}, @s = 'SELECT 5'"
    ))
    .unwrap();
    for sql in [
        "PREPARE k FROM @k",
        "EXECUTE IMMEDIATE @k",
        "EXECUTE IMMEDIATE CONCAT('KI', 'LL ', @id)",
    ] {
        assert_eq!(err(&mut c, sql).0, 1235, "{sql}");
    }
    c.query_drop("PREPARE s FROM @s").unwrap();
    let five: Option<u32> = c.query_first("EXECUTE s").unwrap();
    assert_eq!(five, Some(5));
    let five: Option<u32> = c.query_first("EXECUTE IMMEDIATE @s").unwrap();
    assert_eq!(five, Some(5));
    // Among other statements its text cannot be read first: refused.
    let (code, msg) = err(&mut c, "SET @k2 = 'SELECT 1'; PREPARE k2 FROM @k2");
    assert_eq!(code, 1235, "{msg}");
    // What came before a failed KILL ran; what came after did not.
    let marks: Vec<u32> = c.query("SELECT n FROM kill_marks ORDER BY n").unwrap();
    assert_eq!(marks, [1]);
    let alive: u64 = bystander
        .query_first("SELECT CONNECTION_ID()")
        .unwrap()
        .unwrap();
    assert_eq!(alive, tid, "the bystander's connection was not killed");
    // A KILL that succeeds: the other session's statement ends, and the
    // statements after the KILL answer (mysql2's pool sends this).
    let mut sleeper = p.conn();
    let sid: u64 = sleeper
        .query_first("SELECT CONNECTION_ID()")
        .unwrap()
        .unwrap();
    let t = std::thread::spawn(move || {
        let t0 = std::time::Instant::now();
        let _ = sleeper.query_drop("SELECT SLEEP(20)");
        t0.elapsed()
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut sets = Vec::new();
    let mut r = c
        .query_iter(format!("KILL QUERY {sid}; SELECT 7 AS seven"))
        .unwrap();
    while let Some(set) = r.iter() {
        let rows: Vec<mysql::Row> = set.map(|row| row.unwrap()).collect();
        sets.push(rows.len());
    }
    drop(r);
    assert_eq!(sets, [0, 1], "an OK for the KILL, then the SELECT's row");
    let took = t.join().unwrap();
    assert!(
        took < std::time::Duration::from_secs(10),
        "the sleep was killed: {took:?}"
    );
    // A string that only mentions KILL is not one.
    let s: Vec<String> = c.query("SELECT 'KILL 5'").unwrap();
    assert_eq!(s, ["KILL 5"]);
}

/// A SET that narrows the client's session tracking and, in the same
/// statement, changes other variables (MariaDB Connector/J's connect-time
/// statement for a read-only connection) keeps those changes the
/// session's own: the server does not report them, sextant reads them
/// back. The session is read-only; the next clients of its pooled
/// connection are not.
#[test]
fn variables_set_beside_session_tracking_stay_with_their_session() {
    let p = Setup {
        group: "pool_max = 1",
        no_replicas: true,
        ..Default::default()
    }
    .start();
    let connj = "set sql_mode=CONCAT(@@sql_mode, ',NO_ENGINE_SUBSTITUTION'), session_track_system_variables = CONCAT(@@global.session_track_system_variables, ',tx_isolation'), @@session.tx_read_only=1, NAMES utf8mb4";
    {
        let mut c = p.conn();
        c.query_drop(connj).unwrap();
        let ro: i64 = c.query_first("SELECT @@tx_read_only").unwrap().unwrap();
        assert_eq!(ro, 1, "the session itself is read-only");
        match c.query_drop("CREATE TABLE IF NOT EXISTS tracking_probe (a INT)") {
            Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1792, "{}", e.message),
            other => panic!("a read-only session wrote: {other:?}"),
        }
    }
    for i in 0..10 {
        let mut o = p.conn();
        let ro: i64 = o.query_first("SELECT @@tx_read_only").unwrap().unwrap();
        assert_eq!(ro, 0, "client {i} inherited tx_read_only");
        o.query_drop("CREATE TABLE IF NOT EXISTS tracking_probe (a INT)")
            .unwrap_or_else(|e| panic!("client {i}: {e}"));
    }
}
