//! Byte-exact vectors from a real MySQL 8.0.32 login (caching_sha2_password,
//! TLS, full authentication) and query, as captured and published packet by
//! packet in K. Kream's walkthrough "Exploring the MySQL protocol" (2024).
//! MySQL 8 cannot be installed on these machines; these bytes stand in for
//! it wherever its behaviour differs from MariaDB's.

use sextant_protocol::auth::{sha2_scramble, verify_sha2};
use sextant_protocol::consts::{cap, status};
use sextant_protocol::handshake::{is_ssl_request, HandshakeResponse, InitialHandshake};
use sextant_protocol::packets::{parse_eof_status, parse_ok};
use sextant_protocol::tracker::{Expect, Packet, Tracker};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

const GREETING: &str =
    "0a 38 2e 30 2e 33 32 00 08 00 00 00 1c 46 19 46 59 76 40 4b 00 ff ff ff 02 00 ff df 15
    00 00 00 00 00 00 00 00 00 00 3f 71 34 71 53 45 5e 5d 22 7a 32 3d 00
    63 61 63 68 69 6e 67 5f 73 68 61 32 5f 70 61 73 73 77 6f 72 64 00";

const SSL_REQUEST: &str = "08 aa 0a 00 ff ff ff 00 e0 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00";

const RESPONSE: &str = "08 aa 0a 00 ff ff ff 00 e0 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    72 6f 6f 74 00 20 38 24 94 b7 75 30 09 4f 7a a0 35 1e ee a1 3e b2 e5 fe 45 7f 1b b4 d9 40
    72 54 d3 a9 93 da eb 55 74 65 73 74 00
    63 61 63 68 69 6e 67 5f 73 68 61 32 5f 70 61 73 73 77 6f 72 64 00";

#[test]
fn mysql8_greeting() {
    let h = InitialHandshake::parse(&hex(GREETING)).unwrap();
    assert_eq!(h.server_version, "8.0.32");
    assert_eq!(h.connection_id, 8);
    assert_eq!(h.charset, 255, "utf8mb4_0900_ai_ci, MySQL 8's default");
    assert_eq!(h.status, status::AUTOCOMMIT);
    assert_eq!(h.auth_plugin, "caching_sha2_password");
    assert_eq!(
        h.nonce,
        hex("1c 46 19 46 59 76 40 4b 3f 71 34 71 53 45 5e 5d 22 7a 32 3d")
    );
    // MySQL 8 offers what MariaDB does not: query attributes, optional
    // metadata; sextant must not pass those on to its clients.
    for c in [
        cap::SSL,
        cap::DEPRECATE_EOF,
        cap::SESSION_TRACK,
        cap::QUERY_ATTRIBUTES,
        cap::OPTIONAL_RESULTSET_METADATA,
    ] {
        assert!(h.capabilities & c != 0, "capability {c:#x}");
    }
}

#[test]
fn mysql8_caching_sha2_scramble_matches_the_capture() {
    let h = InitialHandshake::parse(&hex(GREETING)).unwrap();
    let r = HandshakeResponse::parse(&hex(RESPONSE)).unwrap();
    assert_eq!(r.user, "root");
    assert_eq!(r.database.as_deref(), Some("test"));
    assert_eq!(r.auth_plugin.as_deref(), Some("caching_sha2_password"));
    assert_eq!(r.charset, 0xe0);
    // The client's answer, computed by a MySQL 8 client from password
    // "test": sextant computes the same bytes, and accepts them.
    assert_eq!(sha2_scramble(b"test", &h.nonce), r.auth_response);
    assert!(verify_sha2(b"test", &h.nonce, &r.auth_response));
    assert!(!verify_sha2(b"Test", &h.nonce, &r.auth_response));
    assert!(is_ssl_request(&hex(SSL_REQUEST)));
    assert!(!is_ssl_request(&hex(RESPONSE)));
}

#[test]
fn mysql8_auth_more_data_ok_and_resultset() {
    // "perform full authentication", then OK.
    assert_eq!(hex("01 04"), [0x01, 0x04]);
    let ok_bytes = hex("00 00 00 02 00 00 00");
    let ok = parse_ok(&ok_bytes, true).unwrap();
    assert_eq!(ok.status, status::AUTOCOMMIT);
    // SELECT user, plugin ... without CLIENT_DEPRECATE_EOF.
    let packets = [
        hex("02"),
        hex("03 64 65 66 05 6d 79 73 71 6c 04 75 73 65 72 04 75 73 65 72 04 75 73 65 72 04 55 73 65 72
             0c e0 00 80 00 00 00 fe 83 40 00 00 00"),
        hex("03 64 65 66 05 6d 79 73 71 6c 04 75 73 65 72 04 75 73 65 72 06 70 6c 75 67 69 6e 06 70 6c 75 67 69 6e
             0c e0 00 00 01 00 00 fe 81 00 00 00 00"),
        hex("fe 00 00 22 00"),
        hex("06 6b 6c 65 6d 65 6e 15 63 61 63 68 69 6e 67 5f 73 68 61 32 5f 70 61 73 73 77 6f 72 64"),
        hex("fe 00 00 22 00"),
    ];
    let mut t = Tracker::new(Expect::Query, false);
    let kinds: Vec<Packet> = packets
        .iter()
        .map(|p| t.feed(p.len(), p).unwrap())
        .collect();
    assert!(t.is_done());
    assert_eq!(kinds[0], Packet::ColumnCount(2));
    assert_eq!(kinds[3], Packet::Eof);
    assert_eq!(kinds[4], Packet::Data);
    assert_eq!(
        parse_eof_status(&packets[5]).unwrap(),
        status::AUTOCOMMIT | status::NO_INDEX_USED
    );
}
