//! Session logic against SCRIPTED FAKE SERVERS, not MariaDB: small servers
//! that speak the MySQL protocol (native password login, sextant's set-up
//! statements, text results) and answer each client statement as a test
//! scripts it, including failures a real server cannot be made to produce
//! at a chosen moment (hanging up after reading a statement, before any
//! answer). sextant runs in-process, started through its library.
//!
//! What they check: how one attempt at a statement ends (done, retried,
//! reported) and that a statement that may have written is never run twice;
//! and, greeting as MySQL 8, read-your-writes' wait on a replica
//! (WAIT_FOR_EXECUTED_GTID_SET), which MariaDB cannot show.

mod common;
use common::{err_of, free_port, Raw};
use sextant_protocol::consts::{cap, com};
use sextant_protocol::packets::{coltype, write_simple_ok, write_text_resultset};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How a fake server answers one client statement.
#[derive(Clone, Copy)]
enum Reply {
    /// A one-column, one-row result with this text.
    Value(&'static str),
    Ok,
    /// Close the connection after reading the statement: nothing answered.
    HangUp,
    /// This OK packet, byte for byte.
    RawOk(&'static [u8]),
    /// This error (code, message; SQLSTATE HY000).
    Err(u16, &'static str),
}

type Script = fn(&str) -> Reply;

/// A fake server on a port of its own. `seen` lists every client statement
/// it read (not sextant's own set-up statements).
struct FakeServer {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
    /// Connections accepted so far, and the first one not killed: each
    /// connection numbered below it hangs up on the next packet it reads.
    accepted: Arc<AtomicU64>,
    killed_below: Arc<AtomicU64>,
}

impl FakeServer {
    fn start(script: Script) -> FakeServer {
        Self::start_as("10.11.99-MariaDB-scripted", script)
    }

    /// A fake server that greets as `version` (e.g. a MySQL 8 one).
    fn start_as(version: &'static str, script: Script) -> FakeServer {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::new(AtomicU64::new(0));
        let killed_below = Arc::new(AtomicU64::new(0));
        let (s2, a2, k2) = (seen.clone(), accepted.clone(), killed_below.clone());
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(conn) = conn else { continue };
                let seen = s2.clone();
                let killed = k2.clone();
                let id = a2.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || {
                    let _ = serve(conn, version, script, &seen, &|| {
                        id < killed.load(Ordering::SeqCst)
                    });
                });
            }
        });
        FakeServer {
            port,
            seen,
            accepted,
            killed_below,
        }
    }

    /// Every connection open now is killed, server-side, at the worst
    /// moment: it hangs up on the next packet it reads, without an answer
    /// (as a KILL landing just as sextant reuses the connection; a real
    /// KILL closes the socket at once, and sextant's check of an idle
    /// connection sees that only if the close arrived first).
    fn kill_open_connections(&self) {
        self.killed_below
            .store(self.accepted.load(Ordering::SeqCst), Ordering::SeqCst);
    }

    fn seen(&self, sql: &str) -> usize {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|s| *s == sql)
            .count()
    }
}

fn serve(
    mut s: TcpStream,
    version: &str,
    script: Script,
    seen: &Mutex<Vec<String>>,
    killed: &dyn Fn() -> bool,
) -> std::io::Result<()> {
    let resp = common::fake_login(&mut s, version, 45)?;
    // (Any password: the login itself is tested against MariaDB.)
    let deprecate_eof = resp.capabilities & cap::DEPRECATE_EOF != 0;
    let mut out = Vec::new();
    loop {
        let (_, p) = common::fake_read(&mut s)?;
        if killed() {
            return Ok(());
        }
        out.clear();
        match p.first() {
            Some(&com::QUIT) | None => return Ok(()),
            Some(&com::QUERY) => {
                let sql = String::from_utf8_lossy(&p[1..]).into_owned();
                let reply = if sql.starts_with("SET SESSION session_track") {
                    Reply::Ok
                } else if sql.starts_with("SELECT @@character_set_client") {
                    let cols = ["a", "b", "c", "d"].map(|c| (c, coltype::VAR_STRING));
                    let row = ["utf8mb4", "utf8mb4", "utf8mb4", "utf8mb4_general_ci"]
                        .map(|v| Some(v.to_string()))
                        .to_vec();
                    write_text_resultset(&mut out, 1, &cols, &[row], deprecate_eof, 2);
                    s.write_all(&out)?;
                    continue;
                } else {
                    let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
                    seen.push(sql.clone());
                    if sql.starts_with("BEGIN") {
                        // Whether the next statement was sent before
                        // this one was answered: it is, within the
                        // moment, if it came in the same write.
                        s.set_read_timeout(Some(std::time::Duration::from_millis(700)))?;
                        let next = s.peek(&mut [0u8; 1]).is_ok_and(|n| n > 0);
                        s.set_read_timeout(None)?;
                        if next {
                            seen.push(format!("{sql} (the next statement with it)"));
                        }
                    }
                    script(&sql)
                };
                match reply {
                    Reply::Ok => write_simple_ok(&mut out, 1, 2),
                    Reply::Value(v) => {
                        write_text_resultset(
                            &mut out,
                            1,
                            &[("v", coltype::VAR_STRING)],
                            &[vec![Some(v.to_string())]],
                            deprecate_eof,
                            2,
                        );
                    }
                    Reply::HangUp => return Ok(()),
                    Reply::RawOk(p) => {
                        sextant_protocol::codec::write_packet(&mut out, 1, p);
                    }
                    Reply::Err(code, message) => {
                        sextant_protocol::packets::write_err(&mut out, 1, code, "HY000", message);
                    }
                }
            }
            // COM_INIT_DB, COM_PING, COM_RESET_CONNECTION...
            Some(_) => write_simple_ok(&mut out, 1, 2),
        }
        s.write_all(&out)?;
    }
}

/// sextant in this process (its library), in front of the fake servers,
/// with no monitor (the fake servers know no replication) and no hold.
fn sextant(primary: u16, replica: u16) -> u16 {
    sextant_as("10.11.99-MariaDB-scripted", primary, replica)
}

fn sextant_as(version: &str, primary: u16, replica: u16) -> u16 {
    sextant_with(version, primary, &[replica])
}

fn sextant_with(version: &str, primary: u16, replicas: &[u16]) -> u16 {
    let port = free_port();
    let replicas: Vec<String> = replicas
        .iter()
        .map(|r| format!("\"127.0.0.1:{r}\""))
        .collect();
    let replicas = replicas.join(", ");
    let text = format!(
        r#"
[proxy]
listen = "127.0.0.1:{port}"
server_version = "{version}"
[[users]]
name = "app"
password = "apppass"
[groups.main]
primary = "127.0.0.1:{primary}"
replicas = [{replicas}]
[routing]
hold_ms = 0
[monitor]
enabled = false
"#
    );
    common::in_process(&text, port)
}

fn answer_text(r: &[Vec<u8>]) -> String {
    // column count, column, EOF, row, EOF: the row is a length-prefixed text.
    let row = &r[r.len() - 2];
    String::from_utf8_lossy(&row[1..]).into_owned()
}

#[test]
fn scripted_a_read_whose_replica_hangs_up_is_retried_on_the_primary() {
    let primary = FakeServer::start(|_| Reply::Value("from the primary"));
    let replica = FakeServer::start(|sql| match sql {
        "SELECT v FROM t" => Reply::HangUp,
        _ => Reply::Value("from the replica"),
    });
    let port = sextant(primary.port, replica.port);
    let mut c = Raw::login(port, "app", "apppass", None);
    c.query("SELECT v FROM t");
    let r = c.read_response();
    assert_ne!(r[0][0], 0xff, "{}", String::from_utf8_lossy(&r[0]));
    assert_eq!(answer_text(&r), "from the primary");
    // The replica read it and hung up; the primary answered it.
    assert_eq!(replica.seen("SELECT v FROM t"), 1);
    assert_eq!(primary.seen("SELECT v FROM t"), 1);
    // The session goes on.
    c.query("SELECT 1");
    assert_ne!(c.read_response()[0][0], 0xff);
}

#[test]
fn scripted_a_write_whose_server_hangs_up_is_reported_and_never_run_twice() {
    let primary = FakeServer::start(|sql| match sql {
        "INSERT INTO t VALUES (1)" => Reply::HangUp,
        _ => Reply::Ok,
    });
    let replica = FakeServer::start(|_| Reply::Value("from the replica"));
    let port = sextant(primary.port, replica.port);
    let mut c = Raw::login(port, "app", "apppass", None);
    c.query("INSERT INTO t VALUES (1)");
    let r = c.read_response();
    let (code, msg) = err_of(&r[0]);
    assert_eq!(code, 9003, "{msg}");
    assert!(msg.contains("may or may not have run"), "{msg}");
    assert_eq!(primary.seen("INSERT INTO t VALUES (1)"), 1);
    assert_eq!(replica.seen("INSERT INTO t VALUES (1)"), 0);
    // The client's connection to sextant is still good.
    c.query("UPDATE t SET v = 2");
    let r = c.read_response();
    assert_eq!(r[0][0], 0x00, "{}", String::from_utf8_lossy(&r[0]));
    assert_eq!(primary.seen("UPDATE t SET v = 2"), 1);
}

/// The OK packet of a write with session_track_gtids = OWN_GTID, laid out
/// as the MySQL 8 protocol documentation describes (OK_Packet with
/// SERVER_SESSION_STATE_CHANGED, one SESSION_TRACK_GTIDS entry: encoding
/// specification 0, then the GTID as a length-encoded string).
const OK_WITH_OWN_GTID: &[u8] = b"\x00\x01\x00\x02\x40\x00\x00\x00\
\x2b\x03\x29\x00\x27\
3e11fa47-71ca-11e1-9e33-c80aa9429562:23";

const MYSQL8: &str = "8.0.36-scripted";
const WAIT: &str =
    "SELECT WAIT_FOR_EXECUTED_GTID_SET('3e11fa47-71ca-11e1-9e33-c80aa9429562:23', 0.05), @@gtid_executed";

/// MySQL 8 (SIMULATED: scripted servers greeting as 8.0.36): a write
/// reports its GTID with OWN_GTID; the next read goes to the replica with
/// WAIT_FOR_EXECUTED_GTID_SET ahead of it. `replica` scripts the
/// replica, including its answer to the wait (0: it has the write; 1:
/// timed out). Returns what the client read, and the fake servers.
fn mysql8_read_after_write(replica: Script) -> (String, FakeServer, FakeServer) {
    let primary = FakeServer::start_as(MYSQL8, |sql| match sql {
        "INSERT INTO t VALUES (1)" => Reply::RawOk(OK_WITH_OWN_GTID),
        _ => Reply::Value("from the primary"),
    });
    let replica = FakeServer::start_as(MYSQL8, replica);
    let port = sextant_as(MYSQL8, primary.port, replica.port);
    let mut c = Raw::login(port, "app", "apppass", None);
    c.query("INSERT INTO t VALUES (1)");
    let r = c.read_response();
    assert_eq!(r[0][0], 0x00, "{}", String::from_utf8_lossy(&r[0]));
    c.query("SELECT v FROM t");
    let r = c.read_response();
    assert_ne!(r[0][0], 0xff, "{}", String::from_utf8_lossy(&r[0]));
    (answer_text(&r), primary, replica)
}

#[test]
fn scripted_mysql8_a_read_after_a_write_waits_on_the_replica_with_the_read() {
    let (got, primary, replica) = mysql8_read_after_write(|sql| match sql {
        WAIT => Reply::Value("0"),
        _ => Reply::Value("from the replica"),
    });
    assert_eq!(got, "from the replica");
    assert_eq!(replica.seen(WAIT), 1, "the wait for the write's GTID");
    assert_eq!(replica.seen("SELECT v FROM t"), 1);
    assert_eq!(primary.seen("SELECT v FROM t"), 0);
}

#[test]
fn scripted_mysql8_a_wait_that_times_out_reads_the_primary_instead() {
    let (got, primary, replica) = mysql8_read_after_write(|sql| match sql {
        WAIT => Reply::Value("1"),
        _ => Reply::Value("from the replica"),
    });
    // The replica's answer (after a wait that timed out) is dropped.
    assert_eq!(got, "from the primary");
    assert_eq!(replica.seen(WAIT), 1);
    assert_eq!(replica.seen("SELECT v FROM t"), 1);
    assert_eq!(primary.seen("SELECT v FROM t"), 1);
}

/// Every connection sextant holds in its pools, on all three servers, is
/// killed server-side just as it is reused: a read still gets its answer
/// (each dead pooled connection is dropped with its server's other idle
/// ones, and the read runs again on a new connection, without counting a
/// server failure), and no server is taken out of rotation for it.
#[test]
fn scripted_a_read_survives_every_pooled_connection_killed() {
    let primary = FakeServer::start(|sql| match sql {
        "INSERT INTO t VALUES (1)" => Reply::Ok,
        _ => Reply::Value("from the primary"),
    });
    let replicas = [
        FakeServer::start(|_| Reply::Value("from a replica")),
        FakeServer::start(|_| Reply::Value("from a replica")),
    ];
    let port = sextant_with(
        "10.11.99-MariaDB-scripted",
        primary.port,
        &[replicas[0].port, replicas[1].port],
    );
    let mut c = Raw::login(port, "app", "apppass", None);
    // A pooled connection on each server.
    c.query("INSERT INTO t VALUES (1)");
    assert_eq!(c.read_response()[0][0], 0x00);
    for _ in 0..40 {
        c.query("SELECT v FROM t");
        assert_ne!(c.read_response()[0][0], 0xff);
    }
    for r in &replicas {
        assert!(r.seen("SELECT v FROM t") > 0, "both replicas took reads");
    }
    primary.kill_open_connections();
    for r in &replicas {
        r.kill_open_connections();
    }
    c.query("SELECT v FROM t");
    let r = c.read_response();
    assert_ne!(r[0][0], 0xff, "{}", String::from_utf8_lossy(&r[0]));
    assert_eq!(answer_text(&r), "from a replica");
    // The replicas stayed in rotation: the reads after it keep to them.
    let before = primary.seen("SELECT v FROM t");
    for _ in 0..20 {
        c.query("SELECT v FROM t");
        let r = c.read_response();
        assert_ne!(r[0][0], 0xff, "{}", String::from_utf8_lossy(&r[0]));
        assert_eq!(answer_text(&r), "from a replica");
    }
    assert_eq!(primary.seen("SELECT v FROM t"), before);
}

/// An OK in a transaction (IN_TRANS | AUTOCOMMIT), as for a BEGIN.
const OK_IN_TRANS: &[u8] = b"\x00\x00\x00\x03\x00\x00\x00";

/// A status flag of an OK packet the client read.
fn ok_status(p: &[u8]) -> u16 {
    assert_eq!(p[0], 0x00, "{}", String::from_utf8_lossy(p));
    // Affected rows and insert id are one byte each in these OKs.
    u16::from_le_bytes([p[3], p[4]])
}

/// A BEGIN is answered by sextant and sent in the same write as the
/// transaction's first read (the fake server finds the read already sent
/// when it reads the BEGIN, before answering it); a write waits for the
/// BEGIN's answer; a transaction that ran nothing is ended by sextant and
/// no server hears of it.
#[test]
fn scripted_a_begin_travels_with_the_first_read_and_an_empty_one_stays_home() {
    let primary = FakeServer::start(|sql| match sql {
        "BEGIN" | "START TRANSACTION" => Reply::RawOk(OK_IN_TRANS),
        "INSERT INTO t VALUES (1)" | "COMMIT" => Reply::Ok,
        _ => Reply::Value("from the primary"),
    });
    let port = sextant_with("10.11.99-MariaDB-scripted", primary.port, &[]);
    let mut c = Raw::login(port, "app", "apppass", None);
    let run = |c: &mut Raw, sql: &str| {
        c.query(sql);
        c.read_response()
    };
    let r = run(&mut c, "BEGIN");
    assert_eq!(ok_status(&r[0]), 0x0003, "IN_TRANS | AUTOCOMMIT");
    assert_eq!(primary.seen("BEGIN"), 0, "answered by sextant");
    let r = run(&mut c, "SELECT 1");
    assert_eq!(answer_text(&r), "from the primary");
    assert_eq!(primary.seen("BEGIN"), 1);
    assert_eq!(primary.seen("BEGIN (the next statement with it)"), 1);
    assert_eq!(primary.seen("SELECT 1"), 1);
    assert_eq!(ok_status(&run(&mut c, "COMMIT")[0]), 0x0002);
    assert_eq!(primary.seen("COMMIT"), 1);
    // Nothing ran: nothing is sent.
    for end in ["COMMIT", "ROLLBACK", "COMMIT WORK"] {
        assert_eq!(ok_status(&run(&mut c, "START TRANSACTION")[0]), 0x0003);
        assert_eq!(ok_status(&run(&mut c, end)[0]), 0x0002, "{end}");
    }
    assert_eq!(primary.seen("START TRANSACTION"), 0);
    assert_eq!(primary.seen("COMMIT"), 1);
    assert_eq!(primary.seen("ROLLBACK"), 0);
    // A write is sent only once the BEGIN has answered.
    run(&mut c, "BEGIN");
    assert_eq!(run(&mut c, "INSERT INTO t VALUES (1)")[0][0], 0x00);
    assert_eq!(primary.seen("BEGIN"), 2);
    assert_eq!(primary.seen("BEGIN (the next statement with it)"), 1);
    assert_eq!(primary.seen("INSERT INTO t VALUES (1)"), 1);
    run(&mut c, "COMMIT");
}

/// A BEGIN the server refuses: the client hears the server's error on the
/// transaction's first statement, no transaction is open after it, and a
/// write behind it never ran (a read that rode along ran alone, and its
/// answer is dropped).
#[test]
fn scripted_a_failed_begin_is_the_first_statements_error_and_a_write_never_runs() {
    let primary = FakeServer::start(|sql| match sql {
        "BEGIN" => Reply::Err(1290, "refused for this test"),
        "INSERT INTO t VALUES (1)" => Reply::Ok,
        _ => Reply::Value("from the primary"),
    });
    let port = sextant_with("10.11.99-MariaDB-scripted", primary.port, &[]);
    let mut c = Raw::login(port, "app", "apppass", None);
    for first in ["SELECT 1", "INSERT INTO t VALUES (1)"] {
        c.query("BEGIN");
        assert_eq!(ok_status(&c.read_response()[0]), 0x0003);
        c.query(first);
        let r = c.read_response();
        assert_eq!(r.len(), 1, "{first}: only the error");
        assert_eq!(err_of(&r[0]), (1290, "refused for this test".to_string()));
        // No transaction: the next statement is sent on its own.
        c.query("SELECT 2");
        let r = c.read_response();
        assert_eq!(answer_text(&r), "from the primary");
        assert_eq!(
            u16::from_le_bytes([r[r.len() - 1][3], r[r.len() - 1][4]]) & 1,
            0,
            "{first}: not in a transaction"
        );
    }
    assert_eq!(primary.seen("BEGIN"), 2);
    assert_eq!(primary.seen("SELECT 1"), 1, "the read rode along");
    assert_eq!(
        primary.seen("INSERT INTO t VALUES (1)"),
        0,
        "the write never ran"
    );
}
