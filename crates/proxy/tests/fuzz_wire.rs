//! A wire-level fuzzer against sextant and the lab: sessions built from
//! real client commands (logins, text and prepared statements, utility
//! commands), most of their packets mutated (bits flipped, cut short,
//! lengthened, wrong sequence ids, headers that promise more than comes,
//! commands replaced), some sessions in the compressed protocol with their
//! frames mutated too (bodies that are not zlib or cut short, lengths that
//! lie, wrong frame sequence ids), sent from several threads at once. Throughout,
//! sextant must stay up and serve a normal client; afterwards no session is
//! left open, no descriptor or memory is held, and nothing panicked.
//!
//! Bounded for the test suite: SEXTANT_FUZZ_SESSIONS (default 3000) sessions,
//! SEXTANT_FUZZ_SEED to replay a run.

mod common;
use common::*;
use mysql::prelude::Queryable;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Commands a real client sends, as payloads (command byte first).
fn corpus() -> Vec<Vec<u8>> {
    let q = |s: &str| {
        let mut v = vec![0x03];
        v.extend_from_slice(s.as_bytes());
        v
    };
    let mut execute = vec![0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0x08, 0];
    execute.extend_from_slice(&7u64.to_le_bytes());
    vec![
        q("SELECT 1"),
        q("SELECT @@version, DATABASE()"),
        q("SET @a = 1"),
        q("SET SESSION sql_mode = 'ANSI_QUOTES'"),
        q("SET NAMES gbk"),
        q("BEGIN"),
        q("COMMIT"),
        q("ROLLBACK"),
        q("INSERT INTO fz_t (v) VALUES (1)"),
        q("SELECT * FROM fz_t ORDER BY id DESC LIMIT 5"),
        q("SELECT v FROM fz_t WHERE id = 1 FOR UPDATE"),
        q("USE sextant_test"),
        q("SHOW TABLES"),
        q("SELECT SLEEP(0.01)"),
        q("/*#mode=READONLY*/ SELECT 'a\\'', \"b\""),
        q("SELECT 1; SELECT 2"),
        q("CREATE TEMPORARY TABLE fz_tmp (id int)"),
        q("LOAD DATA LOCAL INFILE '/nonexistent' INTO TABLE fz_t"),
        q("START TRANSACTION READ ONLY"),
        q("SELECT GET_LOCK('fz', 0)"),
        vec![
            0x02, b's', b'e', b'x', b't', b'a', b'n', b't', b'_', b't', b'e', b's', b't',
        ],
        vec![0x0e],
        vec![0x09],
        vec![0x04, b'f', b'z', b'_', b't', 0],
        {
            let mut v = vec![0x16];
            v.extend_from_slice(b"SELECT ? + 1");
            v
        },
        execute,
        vec![0x1c, 1, 0, 0, 0, 10, 0, 0, 0],
        vec![0x1a, 1, 0, 0, 0],
        vec![0x18, 1, 0, 0, 0, 0, 0, b'x', b'y'],
        vec![0x19, 1, 0, 0, 0],
        vec![0x1f],
        vec![0x1b, 0, 0],
        vec![0x11, b'a', b'p', b'p', 0, 0],
        vec![0x01],
    ]
}

/// Commands that would act on the lab beyond this session: never sent,
/// however a mutation comes out (COM_SHUTDOWN, COM_PROCESS_KILL, KILL,
/// SHUTDOWN, and anything that drops or deletes).
fn harmless(p: &[u8]) -> bool {
    let Some(&cmd) = p.first() else { return true };
    if matches!(cmd, 0x08 | 0x0c) {
        return false;
    }
    if matches!(cmd, 0x03 | 0x16) {
        let text = String::from_utf8_lossy(&p[1..]).to_ascii_uppercase();
        return ![
            "KILL",
            "SHUTDOWN",
            "DROP",
            "DELETE",
            "TRUNCATE",
            "GRANT",
            "REVOKE",
            "ALTER",
            "RENAME",
            "SET GLOBAL",
            "@@GLOBAL",
            "PURGE",
            "RESET",
            "STOP",
            "CHANGE",
            "FLUSH",
            "INSTALL",
            "UNINSTALL",
            "OUTFILE",
            "DUMPFILE",
            "CREATE USER",
        ]
        .iter()
        .any(|w| text.contains(w));
    }
    true
}

fn mutate(rng: &mut StdRng, p: &mut Vec<u8>) {
    match rng.gen_range(0..6) {
        0 => {
            for _ in 0..rng.gen_range(1..4) {
                if !p.is_empty() {
                    let i = rng.gen_range(0..p.len());
                    p[i] ^= 1 << rng.gen_range(0..8);
                }
            }
        }
        1 => {
            let n = rng.gen_range(0..=p.len());
            p.truncate(n);
        }
        2 => {
            for _ in 0..rng.gen_range(1..40) {
                p.push(rng.gen());
            }
        }
        3 => {
            if !p.is_empty() {
                p[0] = rng.gen();
            }
        }
        4 => {
            let i = rng.gen_range(0..=p.len());
            let junk: Vec<u8> = (0..rng.gen_range(1..8)).map(|_| rng.gen()).collect();
            p.splice(i..i, junk);
        }
        _ => p.reverse(),
    }
}

/// Frames `payload`, sometimes lying in the header.
fn frame(rng: &mut StdRng, seq: u8, payload: &[u8], lie: bool) -> Vec<u8> {
    let mut len = payload.len();
    let mut seq = seq;
    if lie {
        match rng.gen_range(0..3) {
            0 => len += rng.gen_range(1..100),
            1 => len = len.saturating_sub(rng.gen_range(1..4)),
            _ => seq = rng.gen(),
        }
    }
    let mut out = vec![len as u8, (len >> 8) as u8, (len >> 16) as u8, seq];
    out.extend_from_slice(payload);
    out
}

/// `plain` (packets) as a client of the compressed protocol sends it: in
/// one to three frames, zlib-compressed when that pays, sometimes lying.
fn compressed(rng: &mut StdRng, plain: &[u8], lie: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = plain;
    let mut seq = 0u8;
    while !rest.is_empty() {
        let n = if rng.gen_bool(0.5) {
            rest.len()
        } else {
            rng.gen_range(1..=rest.len())
        };
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        let (mut body, mut ulen) = if chunk.len() >= 50 {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(chunk).unwrap();
            (e.finish().unwrap(), chunk.len())
        } else {
            (chunk.to_vec(), 0)
        };
        let mut clen = body.len();
        if lie && rng.gen_bool(0.5) {
            match rng.gen_range(0..6) {
                0 => mutate(rng, &mut body),
                1 => ulen = (ulen + rng.gen_range(1..100)) & 0xff_ffff,
                2 => ulen = ulen.saturating_sub(rng.gen_range(1..10)),
                3 => clen += rng.gen_range(1..100),
                4 => seq = rng.gen(),
                _ => body.truncate(rng.gen_range(0..=body.len())),
            }
        }
        out.extend_from_slice(&(clen as u32).to_le_bytes()[..3]);
        out.push(seq);
        out.extend_from_slice(&(ulen as u32).to_le_bytes()[..3]);
        out.extend_from_slice(&body);
        seq = seq.wrapping_add(1);
    }
    out
}

fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut h = [0u8; 4];
    s.read_exact(&mut h).ok()?;
    let len = h[0] as usize | (h[1] as usize) << 8 | (h[2] as usize) << 16;
    let mut p = vec![0u8; len];
    s.read_exact(&mut p).ok()?;
    Some(p)
}

/// Reads whatever comes until the connection is quiet or closed.
fn drain(s: &mut TcpStream, quiet: Duration) {
    s.set_read_timeout(Some(quiet)).ok();
    let mut b = [0u8; 16384];
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        match s.read(&mut b) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Returns whether the session logged in and sent its commands.
fn fuzz_session(rng: &mut StdRng, port: u16, corpus: &[Vec<u8>]) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let Some(greeting) = read_frame(&mut s) else {
        return false;
    };
    let Ok(hs) = sextant_protocol::handshake::InitialHandshake::parse(&greeting) else {
        return false;
    };
    let compress = rng.gen_bool(0.3);
    let resp = sextant_protocol::handshake::HandshakeResponse {
        zstd_level: 0,
        mariadb_caps: 0,
        capabilities: CAPS
            | if rng.gen_bool(0.5) { 1 << 24 } else { 0 }
            | 1 << 16
            | if compress { 0x20 } else { 0 },
        max_packet: 1 << 24,
        charset: if rng.gen_bool(0.2) { 28 } else { 45 },
        user: "app".into(),
        auth_response: sextant_protocol::auth::native_scramble(b"apppass", &hs.nonce),
        database: rng.gen_bool(0.5).then(|| "sextant_test".into()),
        auth_plugin: Some("mysql_native_password".into()),
        attrs: vec![],
    };
    let mut login = Vec::new();
    resp.encode(&mut login);
    let bad_login = rng.gen_bool(0.15);
    if bad_login {
        mutate(rng, &mut login);
    }
    let lie = bad_login && rng.gen_bool(0.3);
    if s.write_all(&frame(rng, 1, &login, lie)).is_err() {
        return false;
    }
    if bad_login {
        drain(&mut s, Duration::from_millis(50));
        return false;
    }
    match read_frame(&mut s) {
        Some(p) if p.first() == Some(&0) => {}
        _ => return false,
    }
    let mut out = Vec::new();
    let mut lied = false;
    for _ in 0..rng.gen_range(1..8) {
        let mut p = corpus[rng.gen_range(0..corpus.len())].clone();
        let mutated = rng.gen_bool(0.5);
        if mutated {
            mutate(rng, &mut p);
        }
        if !harmless(&p) {
            continue;
        }
        let lie = mutated && rng.gen_bool(0.2);
        lied |= mutated;
        out.extend_from_slice(&frame(rng, 0, &p, lie));
    }
    if compress {
        out = compressed(rng, &out, lied);
    }
    // Sometimes all at once (pipelined), sometimes cut off mid-packet.
    if rng.gen_bool(0.1) {
        let n = rng.gen_range(0..=out.len());
        out.truncate(n);
    }
    if s.write_all(&out).is_err() {
        return false;
    }
    drain(&mut s, Duration::from_millis(30));
    true
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

fn client_connections(p: &Proxy) -> u64 {
    let rows: Vec<(String, String)> = p.admin().query("SHOW STATUS").unwrap();
    rows.iter()
        .find(|(k, _)| k == "client_connections")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(u64::MAX)
}

#[test]
fn mutated_sessions_leave_sextant_serving_and_clean() {
    let sessions: usize = std::env::var("SEXTANT_FUZZ_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let seed: u64 = std::env::var("SEXTANT_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    eprintln!("fuzzing {sessions} sessions, SEXTANT_FUZZ_SEED={seed}");
    let p = Setup {
        proxy: "handshake_timeout_ms = 2000\nmax_failed_logins = 0",
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    c.query_drop("CREATE TABLE IF NOT EXISTS fz_t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        .unwrap();
    c.query_drop("INSERT INTO fz_t (v) VALUES (1)").unwrap();
    drop(c);
    std::thread::sleep(Duration::from_millis(300));
    let fds_before = open_fds(p.pid());
    let rss_before = p.rss_kib();
    let corpus = corpus();
    let threads = 6;
    let served = std::sync::atomic::AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..threads {
            let corpus = &corpus;
            let p = &p;
            let served = &served;
            scope.spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed.wrapping_add(t as u64));
                for i in 0..sessions / threads {
                    if fuzz_session(&mut rng, p.port, corpus) {
                        served.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    if i % 50 == 49 {
                        // A normal client is served all along.
                        let t0 = Instant::now();
                        let mut c = p.conn();
                        let v: Option<i64> = c.query_first("SELECT 41 + 1").unwrap();
                        assert_eq!(v, Some(42), "seed {seed}");
                        assert!(
                            t0.elapsed() < Duration::from_secs(5),
                            "a normal client waited {:?} (seed {seed})",
                            t0.elapsed()
                        );
                    }
                }
            });
        }
    });
    let served = served.into_inner();
    eprintln!(
        "{sessions} sessions in {:?}, {served} logged in and sent their commands",
        started.elapsed()
    );
    // Most sessions get past the login, so that commands are fuzzed too.
    assert!(
        served * 2 > sessions,
        "only {served} of {sessions} logged in"
    );
    // Every fuzzed session ends: those cut off mid-packet by the handshake
    // or the server's own timeouts at the latest.
    let deadline = Instant::now() + Duration::from_secs(15);
    while client_connections(&p) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        client_connections(&p),
        0,
        "sessions left open (seed {seed})"
    );
    let logs = p.logs();
    assert!(
        !logs.contains("panicked"),
        "sextant panicked (seed {seed}):\n{logs}"
    );
    // Server connections stay pooled (up to pool_max per server); client
    // sockets must all be gone.
    let fds_after = open_fds(p.pid());
    assert!(
        fds_after <= fds_before + 3 * 64,
        "{fds_before} descriptors before, {fds_after} after (seed {seed})"
    );
    let grown_mib = p.rss_kib().saturating_sub(rss_before) / 1024;
    assert!(grown_mib < 64, "sextant grew {grown_mib} MiB (seed {seed})");
    let mut c = p.conn();
    let v: Option<i64> = c.query_first("SELECT COUNT(*) FROM fz_t").unwrap();
    assert!(v.unwrap_or(0) >= 1);
}

/// What a lying compressed frame must get: its error, then a closed
/// connection.
#[derive(Debug, Clone, Copy)]
enum Lie {
    AnnouncesMore,
    AnnouncesLess,
    Corrupted,
    OutOfOrder,
    OverMaxPacket,
}

impl Lie {
    const ALL: [Lie; 5] = [
        Lie::AnnouncesMore,
        Lie::AnnouncesLess,
        Lie::Corrupted,
        Lie::OutOfOrder,
        Lie::OverMaxPacket,
    ];

    fn errno(self) -> u16 {
        match self {
            Lie::AnnouncesMore | Lie::AnnouncesLess | Lie::Corrupted => 1157,
            Lie::OutOfOrder => 1156,
            Lie::OverMaxPacket => 1153,
        }
    }
}

/// `packet` in one zlib frame that tells `lie`.
fn lying_frame(rng: &mut StdRng, packet: &[u8], lie: Lie) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(packet).unwrap();
    let mut body = e.finish().unwrap();
    let (mut seq, mut ulen) = (0u8, packet.len());
    match lie {
        Lie::AnnouncesMore => ulen += rng.gen_range(1..100),
        Lie::AnnouncesLess => ulen -= rng.gen_range(1..packet.len().min(10)),
        Lie::Corrupted => {
            // Past the zlib header, and such that the data no longer
            // inflates to the packet (a few bits of an encoding do not
            // matter: flipped, it still inflates to the same).
            let good = body.clone();
            loop {
                body.clone_from(&good);
                let i = rng.gen_range(2..body.len());
                body[i] ^= 1 << rng.gen_range(0..8);
                let mut out = Vec::new();
                let inflates = flate2::read::ZlibDecoder::new(&body[..])
                    .read_to_end(&mut out)
                    .is_ok();
                if !inflates || out != packet {
                    break;
                }
            }
        }
        Lie::OutOfOrder => seq = rng.gen_range(1..=255),
        Lie::OverMaxPacket => ulen = rng.gen_range((1 << 20) + 100..0xff_ffff),
    }
    let mut out = (body.len() as u32).to_le_bytes()[..3].to_vec();
    out.push(seq);
    out.extend_from_slice(&(ulen as u32).to_le_bytes()[..3]);
    out.extend_from_slice(&body);
    out
}

/// Every compressed frame that lies about its length, its data or its
/// order gets the error a server would give and a closed connection, at
/// once: the fuzzer's statements, each in a frame that tells one lie.
#[test]
fn every_lying_compressed_frame_gets_its_error_and_a_close() {
    let sessions: usize = std::env::var("SEXTANT_FUZZ_SESSIONS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(300, |n| n / 10);
    let seed: u64 = std::env::var("SEXTANT_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    eprintln!("{sessions} lying compressed sessions, SEXTANT_FUZZ_SEED={seed}");
    let p = Setup {
        proxy: "max_allowed_packet = 1048576",
        ..Default::default()
    }
    .start();
    let corpus: Vec<Vec<u8>> = corpus().into_iter().filter(|q| harmless(q)).collect();
    // Each closed session is drained for a moment first (so the client
    // reads its error): several at once.
    const THREADS: usize = 6;
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (corpus, p) = (&corpus, &p);
            scope.spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed.wrapping_add(t as u64));
                for i in 0..sessions / THREADS {
                    let lie = Lie::ALL[i % Lie::ALL.len()];
                    let mut payload = corpus[rng.gen_range(0..corpus.len())].clone();
                    // Long enough to shrink when compressed, and to be told less of.
                    payload.resize(payload.len() + 64, b' ');
                    let mut packet = Vec::new();
                    sextant_protocol::codec::write_packet(&mut packet, 0, &payload);
                    let mut r =
                        Raw::login_with(p.port, "app", "apppass", None, CAPS | 0x20, vec![]);
                    r.s.write_all(&lying_frame(&mut rng, &packet, lie)).unwrap();
                    let started = Instant::now();
                    let (packets, closed) = read_compressed(&mut r.s, Duration::from_secs(5));
                    let what = format!(
                        "{lie:?} on {:?} (seed {seed})",
                        String::from_utf8_lossy(&payload)
                    );
                    let err = packets
                        .iter()
                        .find(|p| p.first() == Some(&0xff))
                        .unwrap_or_else(|| panic!("{what}: no error, got {packets:?}"));
                    let (code, msg) = err_of(err);
                    assert_eq!(code, lie.errno(), "{what}: {msg}");
                    assert!(closed, "{what}: the connection stays open");
                    assert!(
                        started.elapsed() < Duration::from_secs(3),
                        "{what}: took {:?}",
                        started.elapsed()
                    );
                }
            });
        }
    });
    let mut c = p.conn();
    let v: Option<i64> = c.query_first("SELECT 41 + 1").unwrap();
    assert_eq!(v, Some(42));
}
