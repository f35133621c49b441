//! Property tests of the codec, the handshake and the result tracker: on
//! any input they return an answer or an error, never panic; what they
//! encode they decode to the same values.

use proptest::prelude::*;
use sextant_protocol::codec::{
    parse_header, write_lenenc_bytes, write_lenenc_int, write_packet, Reader, MAX_PAYLOAD,
};
use sextant_protocol::consts::cap;
use sextant_protocol::handshake::{parse_auth_switch, HandshakeResponse, InitialHandshake};
use sextant_protocol::tracker::{Expect, Tracker};

/// Splits framed bytes back into (seq, payload) frames.
fn frames(mut b: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut v = Vec::new();
    while let Some(h) = parse_header(b) {
        v.push((h.seq, b[4..4 + h.len].to_vec()));
        b = &b[4 + h.len..];
    }
    assert!(b.is_empty());
    v
}

fn name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_\\-\u{e9}\u{4e2d}]{1,40}"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn packets_frame_and_unframe(payload in proptest::collection::vec(any::<u8>(), 0..3000), seq in any::<u8>()) {
        let mut out = Vec::new();
        let next = write_packet(&mut out, seq, &payload);
        let f = frames(&out);
        prop_assert_eq!(f.len(), 1);
        prop_assert_eq!(f[0].0, seq);
        prop_assert_eq!(&f[0].1, &payload);
        prop_assert_eq!(next, seq.wrapping_add(1));
    }

    #[test]
    fn lenenc_values_round_trip(v in any::<u64>(), b in proptest::collection::vec(any::<u8>(), 0..600)) {
        let mut out = Vec::new();
        write_lenenc_int(&mut out, v);
        write_lenenc_bytes(&mut out, &b);
        let mut r = Reader::new(&out);
        prop_assert_eq!(r.lenenc_int("v").unwrap(), v);
        prop_assert_eq!(r.lenenc_bytes("b").unwrap(), &b[..]);
        prop_assert!(r.is_empty());
    }

    #[test]
    fn readers_never_panic(b in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut r = Reader::new(&b);
        let _ = r.lenenc_int("x");
        let _ = r.lenenc_bytes("x");
        let _ = r.nul_bytes("x");
        let _ = r.u64("x");
        let _ = r.nul_or_eof_bytes();
    }

    #[test]
    fn handshake_parsers_never_panic(b in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = HandshakeResponse::parse(&b);
        let _ = InitialHandshake::parse(&b);
        let _ = parse_auth_switch(&b);
        // And with a valid 4.1 start, so that parsing gets further.
        let mut p = (cap::PROTOCOL_41 | cap::PLUGIN_AUTH | cap::CONNECT_ATTRS | cap::CONNECT_WITH_DB
            | cap::SECURE_CONNECTION).to_le_bytes().to_vec();
        p.extend_from_slice(&[0; 28]);
        p.extend_from_slice(&b);
        let _ = HandshakeResponse::parse(&p);
    }

    #[test]
    fn handshake_responses_round_trip(
        lenenc in any::<bool>(),
        user in name(),
        auth in proptest::collection::vec(any::<u8>(), 0..255),
        db in proptest::option::of(name()),
        plugin in name(),
        attrs in proptest::collection::vec((name(), name()), 0..5),
        charset in any::<u8>(),
        max_packet in any::<u32>(),
    ) {
        let mut caps = cap::PROTOCOL_41 | cap::SECURE_CONNECTION | cap::PLUGIN_AUTH | cap::CONNECT_ATTRS;
        if lenenc {
            caps |= cap::PLUGIN_AUTH_LENENC_CLIENT_DATA;
        }
        let resp = HandshakeResponse {
            zstd_level: 0,
            mariadb_caps: 0,
            capabilities: caps,
            max_packet,
            charset,
            user,
            auth_response: auth,
            database: db,
            auth_plugin: Some(plugin),
            attrs,
        };
        let mut out = Vec::new();
        resp.encode(&mut out);
        let back = HandshakeResponse::parse(&out).unwrap();
        prop_assert_eq!(back.capabilities & !cap::CONNECT_WITH_DB, resp.capabilities);
        prop_assert_eq!(&back.user, &resp.user);
        prop_assert_eq!(&back.auth_response, &resp.auth_response);
        prop_assert_eq!(&back.database, &resp.database);
        prop_assert_eq!(&back.auth_plugin, &resp.auth_plugin);
        prop_assert_eq!(&back.attrs, &resp.attrs);
        prop_assert_eq!(back.charset, resp.charset);
        prop_assert_eq!(back.max_packet, resp.max_packet);
    }

    #[test]
    fn the_tracker_never_panics(
        expect in prop_oneof![Just(Expect::Query), Just(Expect::Execute), Just(Expect::Prepare), Just(Expect::Fetch), Just(Expect::FieldList), Just(Expect::Single)],
        deprecate in any::<bool>(),
        packets in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..30),
    ) {
        let mut t = Tracker::new(expect, deprecate);
        for p in &packets {
            if t.is_done() {
                break;
            }
            if t.feed(p.len(), p).is_err() {
                break;
            }
        }
    }

    /// A well-formed text result set of any shape ends exactly at its last
    /// packet, with or without DEPRECATE_EOF.
    #[test]
    fn the_tracker_finds_the_end_of_any_result_set(
        columns in 1u64..40,
        rows in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..30), 0..20),
        deprecate in any::<bool>(),
    ) {
        let mut packets: Vec<Vec<u8>> = Vec::new();
        let mut count = Vec::new();
        write_lenenc_int(&mut count, columns);
        packets.push(count);
        for i in 0..columns {
            let mut def = Vec::new();
            for s in ["def", "db", "t", "t", &format!("c{i}"), &format!("c{i}")] {
                write_lenenc_bytes(&mut def, s.as_bytes());
            }
            def.extend_from_slice(&[0x0c, 0x21, 0, 0, 0, 0, 0xfd, 0, 0, 0, 0, 0]);
            packets.push(def);
        }
        if !deprecate {
            packets.push(vec![0xfe, 0, 0, 2, 0]);
        }
        for r in &rows {
            // A text row: each value as length-encoded bytes (never 0xfe/0xff first).
            let mut row = Vec::new();
            write_lenenc_bytes(&mut row, r);
            packets.push(row);
        }
        packets.push(if deprecate { vec![0xfe, 0, 0, 2, 0, 0, 0] } else { vec![0xfe, 0, 0, 2, 0] });
        let mut t = Tracker::new(Expect::Query, deprecate);
        for (i, p) in packets.iter().enumerate() {
            prop_assert!(!t.is_done(), "done early at packet {}", i);
            t.feed(p.len(), p).unwrap();
        }
        prop_assert!(t.is_done());
    }
}

/// The 16 MiB boundary: a payload of exactly MAX_PAYLOAD bytes is followed
/// by an empty frame; one byte more spills into a second frame.
#[test]
fn payloads_at_the_frame_boundary() {
    for (len, want_frames) in [(MAX_PAYLOAD - 1, 1), (MAX_PAYLOAD, 2), (MAX_PAYLOAD + 1, 2)] {
        let payload = vec![7u8; len];
        let mut out = Vec::new();
        let next = write_packet(&mut out, 3, &payload);
        let f = frames(&out);
        assert_eq!(f.len(), want_frames, "{len}");
        assert_eq!(f.iter().map(|x| x.1.len()).sum::<usize>(), len);
        assert_eq!(next, 3 + want_frames as u8);
    }
}
