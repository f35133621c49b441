//! SIMULATOR, not MySQL: MySQL 8 cannot be installed here, so a scripted
//! fake server speaks two of MySQL 8's optional capabilities as the
//! protocol documentation and libmysqlclient lay them out, and sextant runs
//! in-process in front of it:
//! - optional result-set metadata (CLIENT_OPTIONAL_RESULTSET_METADATA,
//!   `resultset_metadata = NONE`): the column count, a metadata_follows
//!   byte, and no column definitions when it is 0 (the EOF that ends
//!   metadata still comes without DEPRECATE_EOF);
//! - query attributes (CLIENT_QUERY_ATTRIBUTES): every COM_QUERY carries a
//!   parameter count, a parameter set count and the attributes before its
//!   text; COM_STMT_EXECUTE may carry them after its parameters.
//!
//! What they check: a client that negotiated a capability gets exactly
//! what the server sends such a client, and the server what such a client
//! sends; a client that did not gets connections opened without it.

mod common;
use common::{free_port, Raw, CAPS};
use sextant_protocol::codec::{write_lenenc_bytes, write_packet};
use sextant_protocol::consts::{cap, com};
use sextant_protocol::packets::{
    query_text_offset, write_eof, write_ok, write_simple_ok, OkPacket,
};
use sextant_protocol::tracker::Expect;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

fn column(name: &str) -> Vec<u8> {
    let mut c = Vec::new();
    for f in ["def", "", "", "", name, name] {
        write_lenenc_bytes(&mut c, f.as_bytes());
    }
    c.extend_from_slice(&[0x0c, 45, 0, 0, 1, 0, 0, 0xfd, 0, 0, 0, 0, 0]);
    c
}

/// A result set of one column: the metadata_follows byte when the
/// connection has the capability, definitions when it is FULL.
fn resultset(out: &mut Vec<u8>, optional: bool, none: bool, deprecate: bool, row: &[u8]) {
    let mut count = vec![1u8];
    if optional {
        count.push(u8::from(!none));
    }
    let mut seq = write_packet(out, 1, &count);
    if !(optional && none) {
        seq = write_packet(out, seq, &column("v"));
    }
    if !deprecate {
        write_eof(out, seq, 2);
        seq = seq.wrapping_add(1);
    }
    seq = write_packet(out, seq, row);
    if deprecate {
        let ok = OkPacket {
            header: 0xfe,
            status: 2,
            ..Default::default()
        };
        write_ok(out, seq, &ok, true);
    } else {
        write_eof(out, seq, 2);
    }
}

/// Capabilities of each connection the fake server accepted, and the
/// statements of clients (not sextant's own) it read, whole.
#[derive(Default)]
struct Log {
    caps: Vec<u32>,
    packets: Vec<Vec<u8>>,
}

type Seen = Arc<Mutex<Log>>;

fn fake_mysql8() -> (u16, Seen) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    let seen: Seen = Arc::default();
    let s2 = seen.clone();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(conn) = conn else { continue };
            let seen = s2.clone();
            std::thread::spawn(move || {
                let _ = serve(conn, &seen);
            });
        }
    });
    (port, seen)
}

fn serve(mut s: TcpStream, seen: &Mutex<Log>) -> std::io::Result<()> {
    let resp = common::fake_login(&mut s, "8.0.36-simulated", 255)?;
    let caps = resp.capabilities;
    seen.lock()
        .unwrap_or_else(|e| e.into_inner())
        .caps
        .push(caps);
    let optional = caps & cap::OPTIONAL_RESULTSET_METADATA != 0;
    let attributes = caps & cap::QUERY_ATTRIBUTES != 0;
    let log = |p: &[u8]| {
        seen.lock()
            .unwrap_or_else(|e| e.into_inner())
            .packets
            .push(p.to_vec())
    };
    let deprecate = caps & cap::DEPRECATE_EOF != 0;
    let mut none = false;
    let mut out = Vec::new();
    loop {
        let (_, p) = common::fake_read(&mut s)?;
        out.clear();
        match p.first() {
            Some(&com::QUIT) | None => return Ok(()),
            Some(&com::QUERY) => {
                // On a connection with query attributes every statement,
                // sextant's own too, must carry the attribute block.
                let Ok(at) = query_text_offset(&p, attributes) else {
                    return Err(std::io::Error::other(
                        "COM_QUERY without its attribute block",
                    ));
                };
                let sql = String::from_utf8_lossy(&p[at..]).into_owned();
                let own = sql.starts_with("SET SESSION session_track")
                    || sql.starts_with("SELECT @@character_set_client");
                if !own {
                    log(&p);
                }
                if attributes && !sql.starts_with("SELECT") && !sql.starts_with("SET") {
                    return Err(std::io::Error::other(format!("not a statement: {sql:?}")));
                }
                if sql.starts_with("SELECT @@character_set_client") {
                    // sextant's own query, with this connection's setting.
                    resultset(&mut out, optional, none, deprecate, b"\x07utf8mb4");
                } else if sql.contains("resultset_metadata") {
                    none = sql.contains("NONE");
                    // Reported as servers report a variable sextant tracks.
                    let mut entry = Vec::new();
                    write_lenenc_bytes(&mut entry, b"resultset_metadata");
                    write_lenenc_bytes(&mut entry, if none { b"NONE" } else { b"FULL" });
                    let mut state = vec![0u8];
                    write_lenenc_bytes(&mut state, &entry);
                    let ok = OkPacket {
                        status: 2 | 0x4000,
                        session_state: &state,
                        ..Default::default()
                    };
                    write_ok(&mut out, 1, &ok, true);
                } else if sql.starts_with("SELECT") {
                    resultset(&mut out, optional, none, deprecate, b"\x011");
                } else {
                    write_simple_ok(&mut out, 1, 2);
                }
            }
            Some(&com::STMT_PREPARE) => {
                // One parameter, one column; metadata_follows after the
                // warning count.
                let mut ok = vec![0u8];
                ok.extend_from_slice(&5u32.to_le_bytes());
                ok.extend_from_slice(&1u16.to_le_bytes());
                ok.extend_from_slice(&1u16.to_le_bytes());
                ok.extend_from_slice(&[0, 0, 0]);
                if optional {
                    ok.push(u8::from(!none));
                }
                let mut seq = write_packet(&mut out, 1, &ok);
                if !(optional && none) {
                    for name in ["?", "v"] {
                        seq = write_packet(&mut out, seq, &column(name));
                        if !deprecate {
                            write_eof(&mut out, seq, 2);
                            seq = seq.wrapping_add(1);
                        }
                    }
                }
            }
            Some(&com::STMT_EXECUTE) => {
                log(&p);
                // A binary row: header, null bitmap, the value.
                resultset(&mut out, optional, none, deprecate, b"\x00\x00\x0242");
            }
            Some(_) => write_simple_ok(&mut out, 1, 2),
        }
        s.write_all(&out)?;
    }
}

/// sextant in this process, in front of the fake server (which it sees as
/// MySQL 8, so it offers MySQL's capabilities).
fn sextant(primary: u16) -> u16 {
    let port = free_port();
    let text = format!(
        r#"
[proxy]
listen = "127.0.0.1:{port}"
[[users]]
name = "app"
password = "apppass"
[groups.main]
primary = "127.0.0.1:{primary}"
[monitor]
enabled = false
"#
    );
    common::in_process(&text, port)
}

#[test]
fn simulator_mysql8_results_without_metadata() {
    let (server, seen) = fake_mysql8();
    let port = sextant(server);
    for deprecate in [true, false] {
        let caps = CAPS
            | cap::OPTIONAL_RESULTSET_METADATA
            | if deprecate { cap::DEPRECATE_EOF } else { 0 };
        let mut r = Raw::login_with(port, "app", "apppass", None, caps, vec![]);
        r.query("SET SESSION resultset_metadata = 'NONE'");
        r.read_response();
        r.query("SELECT 1");
        let resp = r.read_response();
        // Count with metadata_follows 0, no definition, [EOF,] row, end.
        assert_eq!(resp[0], [1, 0], "{resp:?}");
        assert_eq!(resp.len(), if deprecate { 3 } else { 4 }, "{resp:?}");
        assert_eq!(resp[resp.len() - 2], b"\x011");
        // Prepared: no definitions after the prepare OK, none in results.
        r.send(0, b"\x16SELECT ?");
        let prep = r.read_response_as(Expect::Prepare);
        assert_eq!(prep.len(), 1, "{prep:?}");
        assert_eq!(*prep[0].last().unwrap(), 0, "metadata_follows");
        let id = u32::from_le_bytes([prep[0][1], prep[0][2], prep[0][3], prep[0][4]]);
        r.execute_one(id, 0x08, &42i64.to_le_bytes());
        let resp = r.read_response_as(Expect::Execute);
        assert_eq!(resp[0], [1, 0], "{resp:?}");
        // And back to FULL.
        r.query("SET SESSION resultset_metadata = 'FULL'");
        r.read_response();
        r.query("SELECT 1");
        let resp = r.read_response();
        assert_eq!(resp[0], [1, 1]);
        assert_eq!(resp.len(), if deprecate { 4 } else { 5 }, "{resp:?}");
    }
    // A client without the capability: connections opened without it, and
    // results with their definitions.
    let mut r = Raw::login_with(port, "app", "apppass", None, CAPS, vec![]);
    r.query("SELECT 1");
    let resp = r.read_response();
    assert_eq!(resp[0], [1]);
    assert_eq!(resp.len(), 5, "{resp:?}");
    let caps = seen.lock().unwrap().caps.clone();
    assert!(caps
        .iter()
        .any(|c| c & cap::OPTIONAL_RESULTSET_METADATA != 0));
    assert!(caps
        .iter()
        .any(|c| c & cap::OPTIONAL_RESULTSET_METADATA == 0));
}

/// A COM_QUERY with one string attribute, `trace` = `value`.
fn with_attribute(sql: &str, value: &str) -> Vec<u8> {
    let mut p = vec![com::QUERY, 1, 1, 0, 1, 0xfe, 0];
    write_lenenc_bytes(&mut p, b"trace");
    write_lenenc_bytes(&mut p, value.as_bytes());
    p.extend_from_slice(sql.as_bytes());
    p
}

#[test]
fn simulator_mysql8_query_attributes() {
    let (server, seen) = fake_mysql8();
    let port = sextant(server);
    let caps = CAPS | cap::QUERY_ATTRIBUTES | cap::DEPRECATE_EOF;
    let mut r = Raw::login_with(port, "app", "apppass", None, caps, vec![]);
    let last = |seen: &Seen| seen.lock().unwrap().packets.last().cloned().unwrap();
    // Passed on as sent, attributes and all.
    let sent = with_attribute("SELECT 1", "abc");
    r.send(0, &sent);
    assert_eq!(r.read_response().len(), 4);
    assert_eq!(last(&seen), sent);
    // sextant reads the text after the attributes: it answers
    // CONNECTION_ID() itself and keeps the attributes in front.
    r.send(0, &with_attribute("SELECT CONNECTION_ID()", "xyz"));
    r.read_response();
    let got = last(&seen);
    assert!(got.starts_with(&with_attribute("", "xyz")), "{got:?}");
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(
        text.ends_with("AS UNSIGNED) AS `CONNECTION_ID()`"),
        "{text:?}"
    );
    // Without attributes: a count of 0.
    let mut plain = vec![com::QUERY, 0, 1];
    plain.extend_from_slice(b"SELECT 2");
    r.send(0, &plain);
    r.read_response();
    assert_eq!(last(&seen), plain);
    // An execute with an attribute after its parameter (parameter count
    // available): passed on with the server's statement id.
    r.send(0, b"\x16SELECT ?");
    let prep = r.read_response_as(Expect::Prepare);
    let id = u32::from_le_bytes([prep[0][1], prep[0][2], prep[0][3], prep[0][4]]);
    let mut e = vec![com::STMT_EXECUTE];
    e.extend_from_slice(&id.to_le_bytes());
    e.push(0x08); // PARAMETER_COUNT_AVAILABLE
    e.extend_from_slice(&1u32.to_le_bytes());
    e.push(2); // the parameter and one attribute
    e.push(0); // null bitmap
    e.push(1); // types follow
    e.extend_from_slice(&[0x08, 0, 0]); // LONGLONG, no name
    e.extend_from_slice(&[0xfe, 0]);
    write_lenenc_bytes(&mut e, b"trace");
    e.extend_from_slice(&42i64.to_le_bytes());
    write_lenenc_bytes(&mut e, b"abc");
    r.send(0, &e);
    r.read_response_as(Expect::Execute);
    let got = last(&seen);
    assert_eq!(got[5..], e[5..], "the execute as the client sent it");
    assert_eq!(
        u32::from_le_bytes([got[1], got[2], got[3], got[4]]),
        5,
        "server id"
    );
    // A client without the capability: plain statements, on connections
    // opened without it.
    let mut r = Raw::login_with(port, "app", "apppass", None, CAPS, vec![]);
    r.query("SELECT 3");
    r.read_response();
    assert_eq!(last(&seen), b"\x03SELECT 3");
    let caps = seen.lock().unwrap().caps.clone();
    assert!(caps.iter().any(|c| c & cap::QUERY_ATTRIBUTES != 0));
    assert!(caps.iter().any(|c| c & cap::QUERY_ATTRIBUTES == 0));
}
