//! SIMULATOR, not MySQL: MySQL 8 cannot be installed on these machines, so
//! this scripted fake server speaks MySQL 8's caching_sha2_password login
//! (fast path, full authentication with RSA key exchange, auth switch) to
//! sextant's real server-connection code, byte for byte as the protocol
//! documentation describes it, and checks what sextant sends.

use sextant_backend::{BackendConn, BackendError, ConnectParams, Flavor};
use sextant_net::RsaKeys;
use sextant_protocol::auth::{native_scramble, sha2_scramble};
use sextant_protocol::codec::{parse_header, write_lenenc_bytes, write_packet};
use sextant_protocol::handshake::{encode_auth_switch, HandshakeResponse, InitialHandshake};
use sextant_protocol::packets::{write_eof, write_err, write_simple_ok};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const KEY: &str = include_str!("../../net/testdata/rsa_test_key.pem");
const NONCE: &[u8; 20] = b"abcdefghij0123456789";

#[derive(Clone, Copy, PartialEq)]
enum Script {
    FastPath,
    FullAuthRsa,
    SwitchFromNative,
    /// An account with sha256_password: the switch, the RSA key request,
    /// the encrypted password.
    SwitchToSha256,
    /// An account whose plugin wants the password in clear
    /// (mysql_clear_password), on a connection without TLS.
    SwitchToClear,
}

async fn read(s: &mut TcpStream) -> (u8, Vec<u8>) {
    let mut h = [0u8; 4];
    s.read_exact(&mut h).await.unwrap();
    let h = parse_header(&h).unwrap();
    let mut p = vec![0; h.len];
    s.read_exact(&mut p).await.unwrap();
    (h.seq, p)
}

/// The client's next packet, or None when it closed instead.
async fn read_or_closed(s: &mut TcpStream) -> Option<(u8, Vec<u8>)> {
    let mut h = [0u8; 4];
    s.read_exact(&mut h).await.ok()?;
    let h = parse_header(&h)?;
    let mut p = vec![0; h.len];
    s.read_exact(&mut p).await.ok()?;
    Some((h.seq, p))
}

async fn fail(s: &mut TcpStream, seq: u8) {
    let mut e = Vec::new();
    write_err(&mut e, seq, 1045, "28000", "Access denied for user 'app'");
    s.write_all(&e).await.unwrap();
}

async fn send(s: &mut TcpStream, seq: u8, payload: &[u8]) {
    let mut out = Vec::new();
    write_packet(&mut out, seq, payload);
    s.write_all(&out).await.unwrap();
}

/// One MySQL 8 login as scripted, then sextant's setup statements.
/// Returns what the fake server saw: the passwords it could check.
async fn fake_mysql8(
    listener: TcpListener,
    script: Script,
    password: &'static str,
    write_after: bool,
) -> Result<(), String> {
    let (mut s, _) = listener.accept().await.unwrap();
    let keys = RsaKeys::from_pem(KEY).unwrap();
    let plugin = if script != Script::FastPath && script != Script::FullAuthRsa {
        "mysql_native_password"
    } else {
        "caching_sha2_password"
    };
    let hs = InitialHandshake {
        server_version: "8.0.36".into(),
        connection_id: 42,
        nonce: NONCE.to_vec(),
        capabilities: 0xdfff_ffff & !(1 << 11), // everything but SSL
        charset: 255,
        status: 2,
        auth_plugin: plugin.into(),
        mariadb_caps: 0,
    };
    let mut g = Vec::new();
    hs.encode(&mut g);
    send(&mut s, 0, &g).await;
    let (seq, p) = read(&mut s).await;
    let resp = HandshakeResponse::parse(&p).map_err(|e| e.to_string())?;
    if resp.user != "app" {
        return Err(format!("user {}", resp.user));
    }
    let mut seq = seq + 1;
    match script {
        Script::SwitchFromNative => {
            if resp.auth_response != native_scramble(password.as_bytes(), NONCE) {
                fail(&mut s, seq).await;
                return Err("bad native scramble".into());
            }
            let nonce2 = b"ZYXWVUTSRQ9876543210";
            let mut sw = Vec::new();
            encode_auth_switch(&mut sw, "caching_sha2_password", nonce2);
            send(&mut s, seq, &sw).await;
            let (s2, p) = read(&mut s).await;
            if p != sha2_scramble(password.as_bytes(), nonce2) {
                fail(&mut s, s2 + 1).await;
                return Err("bad sha2 scramble after switch".into());
            }
            send(&mut s, s2 + 1, &[0x01, 0x03]).await;
            seq = s2 + 2;
        }
        Script::SwitchToSha256 => {
            let nonce2 = b"ZYXWVUTSRQ9876543210";
            let mut sw = Vec::new();
            encode_auth_switch(&mut sw, "sha256_password", nonce2);
            send(&mut s, seq, &sw).await;
            // A client that will not send the password closes; one with
            // the key pinned sends it encrypted at once.
            let Some((s3, ct)) = read_or_closed(&mut s).await else {
                return Ok(());
            };
            if ct == [0x01] {
                return Err("the client asked for the server's key, to encrypt its password to whatever key it is sent".into());
            }
            let got = keys.decrypt_password(&ct, nonce2).ok_or("undecryptable")?;
            if got != password.as_bytes() {
                fail(&mut s, s3 + 1).await;
                return Err("wrong password after RSA".into());
            }
            seq = s3 + 1;
        }
        Script::SwitchToClear => {
            let mut sw = Vec::new();
            encode_auth_switch(&mut sw, "mysql_clear_password", b"");
            send(&mut s, seq, &sw).await;
            let mut buf = [0u8; 256];
            return match tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => Ok(()),
                Ok(Ok(n)) => Err(format!(
                    "the client answered with {n} bytes on a plain connection"
                )),
                Err(_) => Err("the client neither answered nor closed".into()),
            };
        }
        Script::FastPath => {
            if resp.auth_response != sha2_scramble(password.as_bytes(), NONCE) {
                fail(&mut s, seq).await;
                return Err("bad sha2 scramble".into());
            }
            send(&mut s, seq, &[0x01, 0x03]).await;
            seq += 1;
        }
        Script::FullAuthRsa => {
            // Cache miss: the scramble cannot be checked; ask for the password.
            send(&mut s, seq, &[0x01, 0x04]).await;
            let Some((s3, ct)) = read_or_closed(&mut s).await else {
                return Ok(());
            };
            if ct == [0x02] {
                return Err("the client asked for the server's key, to encrypt its password to whatever key it is sent".into());
            }
            let got = keys.decrypt_password(&ct, NONCE).ok_or("undecryptable")?;
            if got != password.as_bytes() {
                fail(&mut s, s3 + 1).await;
                return Err("wrong password after RSA".into());
            }
            seq = s3 + 1;
        }
    }
    let mut ok = Vec::new();
    write_simple_ok(&mut ok, seq, 2);
    s.write_all(&ok).await.unwrap();
    // sextant's setup: SET session tracking, then the charset query.
    let (_, q) = read(&mut s).await;
    if !q[1..].starts_with(b"SET SESSION session_track_system_variables")
        || !q.ends_with(b"session_track_gtids = OWN_GTID")
    {
        return Err(format!(
            "unexpected setup {:?}",
            String::from_utf8_lossy(&q)
        ));
    }
    let mut ok = Vec::new();
    write_simple_ok(&mut ok, 1, 2);
    s.write_all(&ok).await.unwrap();
    let (_, q) = read(&mut s).await;
    if !q[1..].starts_with(b"SELECT @@character_set_client") {
        return Err("unexpected charset query".into());
    }
    let mut out = Vec::new();
    let mut seq = write_packet(&mut out, 1, &[4]);
    for name in ["a", "b", "c", "d"] {
        let mut col = Vec::new();
        for f in ["def", "", "", "", name, name] {
            write_lenenc_bytes(&mut col, f.as_bytes());
        }
        col.extend_from_slice(&[0x0c, 255, 0, 0, 1, 0, 0, 0xfd, 0, 0, 0, 0, 0]);
        seq = write_packet(&mut out, seq, &col);
    }
    write_eof(&mut out, seq, 2);
    let mut row = Vec::new();
    for v in ["utf8mb4", "utf8mb4", "utf8mb4", "utf8mb4_0900_ai_ci"] {
        write_lenenc_bytes(&mut row, v.as_bytes());
    }
    let seq = write_packet(&mut out, seq + 1, &row);
    write_eof(&mut out, seq, 2);
    s.write_all(&out).await.unwrap();
    if write_after {
        let (_, q) = read(&mut s).await;
        if !q[1..].starts_with(b"INSERT") {
            return Err("expected the INSERT".into());
        }
        send(&mut s, 1, OK_WITH_OWN_GTID).await;
    }
    Ok(())
}

/// The OK packet of a write with session_track_gtids = OWN_GTID, laid out
/// as the MySQL 8 protocol documentation describes (OK_Packet with
/// SERVER_SESSION_STATE_CHANGED, one SESSION_TRACK_GTIDS entry: encoding
/// specification 0, then the GTID as a length-encoded string).
const OK_WITH_OWN_GTID: &[u8] = b"\x00\x01\x00\x02\x40\x00\x00\x00\
\x2b\x03\x29\x00\x27\
3e11fa47-71ca-11e1-9e33-c80aa9429562:23";

async fn run(
    script: Script,
    server_pw: &'static str,
    client_pw: &str,
) -> (Result<BackendConn, BackendError>, Result<(), String>) {
    run_pinned(script, server_pw, client_pw, false).await
}

/// As [`run`]; `pinned`: the server's public key is pinned in config.
async fn run_pinned(
    script: Script,
    server_pw: &'static str,
    client_pw: &str,
    pinned: bool,
) -> (Result<BackendConn, BackendError>, Result<(), String>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let server = tokio::spawn(fake_mysql8(l, script, server_pw, false));
    let key = RsaKeys::from_pem(KEY).unwrap().public_pem;
    let p = ConnectParams {
        addr: &addr,
        user: "app",
        password: client_pw,
        flavor: Flavor::new(0, 45),
        timeout: Duration::from_secs(5),
        tls: None,
        min_wait_timeout: None,
        server_key: pinned.then_some(key.as_str()),
    };
    let c = BackendConn::connect(&p).await;
    let s = tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .unwrap()
        .unwrap();
    (c, s)
}

#[tokio::test]
async fn simulator_mysql8_write_reports_its_gtid() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let server = tokio::spawn(fake_mysql8(l, Script::FastPath, "pw8", true));
    let p = ConnectParams {
        addr: &addr,
        user: "app",
        password: "pw8",
        flavor: Flavor::new(0, 45),
        timeout: Duration::from_secs(5),
        tls: None,
        min_wait_timeout: None,
        server_key: None,
    };
    let mut c = BackendConn::connect(&p).await.unwrap();
    assert!(!c.is_mariadb());
    c.exec_internal("INSERT INTO t VALUES (1)").await.unwrap();
    server.await.unwrap().unwrap();
    let g = c.track.last_gtid.expect("the write's GTID");
    assert!(g.is_mysql());
    assert_eq!(g.seq, 23);
    assert_eq!(
        g.wait_sql(1.0),
        "SELECT WAIT_FOR_EXECUTED_GTID_SET('3e11fa47-71ca-11e1-9e33-c80aa9429562:23', 1), @@gtid_executed"
    );
    // A replica whose gtid_executed covers it has applied it.
    let replica = sextant_backend::gtid::parse_list("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-23")
        .next()
        .unwrap();
    assert_eq!(replica.domain, g.domain);
    assert!(replica.seq >= g.seq);
}

#[tokio::test]
async fn simulator_mysql8_fast_path() {
    let (c, s) = run(Script::FastPath, "pw8", "pw8").await;
    s.unwrap();
    let c = c.unwrap();
    assert_eq!(c.server_version, "8.0.36");
    assert_eq!(&*c.baseline["collation_connection"], "utf8mb4_0900_ai_ci");
}

#[tokio::test]
async fn simulator_mysql8_full_auth_with_a_pinned_key() {
    let (c, s) = run_pinned(Script::FullAuthRsa, "pw8", "pw8", true).await;
    s.unwrap();
    c.unwrap();
    let (c, s) = run_pinned(Script::FullAuthRsa, "pw8", "wrong", true).await;
    assert!(s.is_err());
    match c {
        Err(BackendError::Auth { code: 1045, .. }) => {}
        Err(e) => panic!("expected 1045, got {e}"),
        Ok(_) => panic!("login with a wrong password succeeded"),
    }
}

/// Whoever answers at a server's address (a rogue listener, a fleet
/// member that is not one) may ask for full authentication and offer a
/// key of its own: without verified TLS or a pinned key, sextant sends
/// nothing and says why (before, it asked for the key and encrypted the
/// password to it).
#[tokio::test]
async fn simulator_full_auth_never_sends_the_password_to_a_key_the_server_offers() {
    for script in [Script::FullAuthRsa, Script::SwitchToSha256] {
        let (c, s) = run(script, "pw8", "pw8").await;
        s.unwrap();
        match c {
            Err(e @ BackendError::Auth { code: 2061, .. }) => {
                assert!(
                    e.to_string().contains("never to a key the server offers"),
                    "{e}"
                )
            }
            Err(e) => panic!("expected 2061, got {e}"),
            Ok(_) => panic!("logged in by sending the password"),
        }
    }
}

#[tokio::test]
async fn simulator_mysql8_auth_switch_to_caching_sha2() {
    let (c, s) = run(Script::SwitchFromNative, "pw8", "pw8").await;
    s.unwrap();
    c.unwrap();
}

#[tokio::test]
async fn simulator_mysql8_sha256_password() {
    let (c, s) = run_pinned(Script::SwitchToSha256, "pw8", "pw8", true).await;
    s.unwrap();
    c.unwrap();
    let (c, s) = run_pinned(Script::SwitchToSha256, "pw8", "wrong", true).await;
    assert!(s.is_err());
    assert!(matches!(c, Err(BackendError::Auth { code: 1045, .. })));
}

#[tokio::test]
async fn simulator_clear_password_never_sent_without_tls() {
    let (c, s) = run(Script::SwitchToClear, "pw8", "pw8").await;
    s.unwrap();
    match c {
        Err(e @ BackendError::Auth { code: 2059, .. }) => {
            assert!(e.to_string().contains("only over TLS"), "{e}")
        }
        Err(e) => panic!("expected 2059, got {e}"),
        Ok(_) => panic!("logged in by sending the password in clear"),
    }
}
