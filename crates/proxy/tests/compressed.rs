//! The compressed protocol against clients that lie: frames that do not
//! inflate to what their header says, out of order, over
//! max_allowed_packet, cut off, and statements that inflate from little
//! to a lot. Each gets a MySQL error and a closed connection, in bounded
//! time and memory, and sextant goes on serving.

mod common;
use common::*;
use mysql::prelude::Queryable;
use sextant_protocol::codec::MAX_PAYLOAD;
use sextant_protocol::compress::{Algorithm, Compression};
use std::io::Write;
use std::time::{Duration, Instant};

const CLIENT_COMPRESS: u32 = 0x20;

fn login(port: u16) -> Raw {
    Raw::login_with(port, "app", "apppass", None, CAPS | CLIENT_COMPRESS, vec![])
}

/// One compressed frame, its header written by hand.
fn frame(seq: u8, body: &[u8], ulen: usize) -> Vec<u8> {
    let mut f = (body.len() as u32).to_le_bytes()[..3].to_vec();
    f.push(seq);
    f.extend_from_slice(&(ulen as u32).to_le_bytes()[..3]);
    f.extend_from_slice(body);
    f
}

fn zlib(data: &[u8]) -> Vec<u8> {
    // A frame made by the product's own encoder, less its header.
    let mut wire = Vec::new();
    Compression::new(Algorithm::Zlib).encode(data, &mut wire);
    assert_ne!(&wire[4..7], &[0, 0, 0], "the test data compresses");
    wire[7..].to_vec()
}

fn query_packet(sql: &str) -> Vec<u8> {
    let mut p = vec![3u8];
    p.extend_from_slice(sql.as_bytes());
    let mut out = Vec::new();
    sextant_protocol::codec::write_packet(&mut out, 0, &p);
    out
}

/// What comes back until the connection closes (or `within` passes):
/// the packets, whether it closed, and how long that took.
fn answer(r: &mut Raw, within: Duration) -> (Vec<Vec<u8>>, bool, Duration) {
    let started = Instant::now();
    let (packets, closed) = read_compressed(&mut r.s, within);
    (packets, closed, started.elapsed())
}

#[test]
fn malformed_compressed_frames_get_an_error_then_a_close() {
    let p = Setup {
        proxy: "max_allowed_packet = 1048576",
        ..Default::default()
    }
    .start();
    // A well-formed compressed statement is answered.
    let mut r = login(p.port);
    let q = query_packet(&format!("SELECT '{}' AS compressible", "x".repeat(200)));
    r.send_raw(&frame(0, &zlib(&q), q.len()));
    let (packets, closed, _) = answer(&mut r, Duration::from_secs(1));
    assert!(!closed && packets.len() >= 4, "{packets:?}");
    assert_eq!(packets.last().unwrap()[0], 0xfe);

    let z = zlib(&q);
    let mut after_stream = z.clone();
    after_stream.extend_from_slice(b"junk");
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        (
            "sequence id 5 to start a command",
            frame(5, &z, q.len()),
            1156,
        ),
        (
            "announces more than it inflates to",
            frame(0, &z, q.len() + 100),
            1157,
        ),
        (
            "announces less than it inflates to",
            frame(0, &z, q.len() - 10),
            1157,
        ),
        ("not zlib data", frame(0, &[0x5a; 40], q.len()), 1157),
        (
            "truncated zlib data",
            frame(0, &z[..z.len() - 6], q.len()),
            1157,
        ),
        (
            "data after the zlib stream",
            frame(0, &after_stream, q.len()),
            1157,
        ),
        (
            "announces more than max_allowed_packet",
            frame(0, &z, 2 << 20),
            1153,
        ),
        (
            "uncompressed, longer than max_allowed_packet",
            frame(0, b"", 3 << 20)[..7].to_vec(),
            1153,
        ),
    ];
    for (what, bytes, errno) in cases {
        let mut r = login(p.port);
        r.send_raw(&bytes);
        let (packets, closed, took) = answer(&mut r, Duration::from_secs(5));
        let err = packets
            .iter()
            .find(|p| p[0] == 0xff)
            .unwrap_or_else(|| panic!("{what}: no error packet, got {packets:?}"));
        let (code, msg) = err_of(err);
        assert_eq!(code, errno, "{what}: {msg}");
        assert!(closed, "{what}: the connection stays open");
        assert!(took < Duration::from_secs(3), "{what}: took {took:?}");
    }

    // A frame that never arrives whole: an error within the session's
    // net_read_timeout (the server's own answer to a stalled packet).
    for (what, bytes) in [
        (
            "a frame announcing 100,000 bytes, 3 sent",
            vec![0xa0, 0x86, 0x01, 0, 0, 0, 0, b'a', b'b', b'c'],
        ),
        ("half a frame header", vec![0x10, 0, 0]),
        (
            "a zlib frame cut short",
            frame(0, &z, q.len())[..12].to_vec(),
        ),
    ] {
        let mut r = login(p.port);
        let set = query_packet("SET SESSION net_read_timeout = 2");
        r.send_raw(&frame(0, &set, 0));
        let (ok, _, _) = answer(&mut r, Duration::from_millis(500));
        assert_eq!(ok.first().map(|p| p[0]), Some(0), "{what}: SET answered");
        r.send_raw(&bytes);
        let (packets, closed, took) = answer(&mut r, Duration::from_secs(10));
        let (code, msg) = err_of(
            packets
                .first()
                .unwrap_or_else(|| panic!("{what}: no answer")),
        );
        assert_eq!(code, 1159, "{what}: {msg}");
        assert!(closed, "{what}: still open");
        assert!(
            took >= Duration::from_millis(1500) && took < Duration::from_secs(6),
            "{what}: took {took:?}"
        );
    }
    // Through all of it sextant served, and holds no session.
    let v: Option<i64> = p.conn().query_first("SELECT 6 * 7").unwrap();
    assert_eq!(v, Some(42));
}

/// The frames of `payload` as a client sends it: 16 MiB packets, each in a
/// compressed frame of its own.
fn compressed_statement(payload: &[u8]) -> Vec<Vec<u8>> {
    let mut packets = Vec::new();
    sextant_protocol::codec::write_packet(&mut packets, 0, payload);
    let mut z = Compression::new(Algorithm::Zlib);
    packets
        .chunks(MAX_PAYLOAD)
        .map(|chunk| {
            let mut f = Vec::new();
            z.encode(chunk, &mut f);
            f
        })
        .collect()
}

#[test]
fn compressed_statements_that_inflate_a_thousandfold_stay_within_the_memory_budget() {
    let p = Setup {
        proxy: "statement_memory_mb = 256",
        ..Default::default()
    }
    .start();
    // 96 MiB of statement in about 100 KiB of zlib.
    let mut sql = b"\x03SELECT LENGTH('".to_vec();
    sql.resize(96 << 20, b'a');
    sql.extend_from_slice(b"')");
    let frames = compressed_statement(&sql);
    let wire: usize = frames.iter().map(Vec::len).sum();
    assert!(wire < 1 << 20, "{wire} bytes of zlib");
    drop(sql);
    let rss_before = p.rss_kib();

    // Over max_allowed_packet (64 MiB): refused when the packet that
    // passes it begins, not after the whole statement is inflated.
    let mut r = login(p.port);
    for f in &frames {
        if r.s.write_all(f).is_err() {
            break;
        }
    }
    let (packets, closed, _) = answer(&mut r, Duration::from_secs(10));
    let (code, msg) = err_of(&packets[0]);
    assert_eq!(code, 1153, "{msg}");
    assert!(closed);

    // Sessions that stop after 48 MiB of their statement each hold it
    // until their net_read_timeout: all together, no more than
    // statement_memory_mb (each counts 112 MB: the statement, the copy
    // for the server it will need, a frame); those that would pass it
    // get 1041 at once.
    let mut held = Vec::new();
    let mut refused = 0;
    for _ in 0..6 {
        let mut r = login(p.port);
        for f in &frames[..3] {
            r.s.write_all(f).unwrap();
        }
        let (packets, closed, _) = answer(&mut r, Duration::from_millis(1500));
        match packets.first() {
            None => {
                assert!(!closed);
                held.push(r);
            }
            Some(e) => {
                let (code, msg) = err_of(e);
                assert_eq!(code, 1041, "{msg}");
                assert!(msg.contains("statement_memory_mb"), "{msg}");
                assert!(closed);
                refused += 1;
            }
        }
    }
    assert_eq!(held.len(), 2, "two sessions' 48 MiB fit in 256 MB");
    assert_eq!(refused, 4);
    let grown_mib = p.rss_kib().saturating_sub(rss_before) / 1024;
    eprintln!(
        "RSS grew {grown_mib} MiB; peak {} MiB",
        p.peak_rss_kib() / 1024
    );
    assert!(
        grown_mib < 256,
        "sextant grew {grown_mib} MiB holding 96 MiB of statements"
    );
    // Given back when those sessions end: a large statement runs again.
    drop(held);
    std::thread::sleep(Duration::from_millis(500));
    let mut c = p.conn();
    let big = "b".repeat(8 << 20);
    let n: Option<i64> = c.query_first(format!("SELECT LENGTH('{big}')")).unwrap();
    assert_eq!(n, Some(8 << 20));
}
