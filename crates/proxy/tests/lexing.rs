//! sextant's lexer against the server's own reading. Random statements made
//! of what changes a reading (quotes, backslashes, doubled quotes, comments,
//! multibyte characters whose second byte is a backslash or a backtick) go
//! to MariaDB in every sql_mode and client character set that matters;
//! whenever the server accepts one, it must return as many columns as
//! sextant's reading in that mode finds top-level commas, plus one. A
//! reading that disagrees with the server could hide a call from routing.

mod common;
use common::*;
use rand::{Rng, SeedableRng};
use sextant_sql::{LexMode, Lexer, Multibyte, TokenKind};

fn columns_by_lexer(sql: &[u8], mode: LexMode) -> usize {
    let (mut depth, mut commas) = (0usize, 0usize);
    for t in Lexer::with_mode(sql, mode) {
        if t.kind == TokenKind::Punct {
            match t.text[0] {
                b'(' => depth += 1,
                b')' => depth = depth.saturating_sub(1),
                b',' if depth == 0 => commas += 1,
                _ => {}
            }
        }
    }
    commas + 1
}

/// The server's column count, or None when it refused the statement.
fn columns_by_server(r: &mut Raw, sql: &[u8]) -> Option<usize> {
    let mut p = vec![3u8];
    p.extend_from_slice(sql);
    r.send(0, &p);
    let packets = r.read_response();
    match packets.first().map(|p| p[0]) {
        Some(0xff) | Some(0x00) | None => None,
        Some(n) if n < 0xfb => Some(n as usize),
        _ => None,
    }
}

/// Something to put inside quotes: the characters whose meaning depends on
/// the mode.
fn inner(rng: &mut impl Rng, pairs: &[&[u8]]) -> Vec<u8> {
    let mut v = Vec::new();
    for _ in 0..rng.gen_range(0..6) {
        let piece: &[u8] = match rng.gen_range(0..12) {
            0 => b"\\",
            1 => b"\\'",
            2 => b"''",
            3 => b"\"",
            4 => b"`",
            5 => b", ",
            6 => b"\\\\",
            7 | 8 => pairs[rng.gen_range(0..pairs.len())],
            9 => b"--",
            10 => b"#",
            _ => b"a",
        };
        v.extend_from_slice(piece);
    }
    v
}

fn statement(rng: &mut impl Rng, pairs: &[&[u8]]) -> Vec<u8> {
    let mut s = b"SELECT ".to_vec();
    for i in 0..rng.gen_range(1..5) {
        if i > 0 {
            s.extend_from_slice(match rng.gen_range(0..6) {
                0 => b" /* , */ , ",
                1 => b" -- ,\n, ",
                _ => b", ",
            });
        }
        let q = [b'\'', b'"', b'`'][rng.gen_range(0..3)];
        if q == b'`' || rng.gen_bool(0.3) {
            s.extend_from_slice(b"1 AS ");
        }
        s.push(q);
        s.extend_from_slice(&inner(rng, pairs));
        s.push(q);
        if rng.gen_bool(0.3) {
            s.extend_from_slice(&inner(rng, pairs));
        }
    }
    s
}

#[test]
fn the_lexer_reads_statements_as_the_server_does() {
    let lab = lab();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5e7a);
    let charsets: [(&str, &[&[u8]]); 4] = [
        ("utf8mb4", &[b"\xc3\xa9", b"\xe4\xb8\xad"]),
        // Characters whose second byte is 0x5C or 0x60.
        ("gbk", &[b"\xbf\x5c", b"\xbf\x60", b"\xd5\xe2"]),
        ("big5", &[b"\xa4\x5c", b"\xa4\x60", b"\xa4\xa4"]),
        ("sjis", &[b"\x95\x5c", b"\x95\x60", b"\x83\x41"]),
    ];
    let mut failures = Vec::new();
    let mut accepted_total = 0;
    for (cs, pairs) in charsets {
        for sql_mode in [
            "",
            "NO_BACKSLASH_ESCAPES",
            "ANSI_QUOTES",
            "NO_BACKSLASH_ESCAPES,ANSI_QUOTES",
        ] {
            let mut r = Raw::login(lab.primary, "app", "apppass", None);
            r.query(&format!("SET NAMES {cs}, SESSION sql_mode = '{sql_mode}'"));
            let ok = r.read_response();
            assert_eq!(ok[0][0], 0, "{}", String::from_utf8_lossy(&ok[0]));
            let mode = LexMode::of_session(sql_mode, Multibyte::of_charset(cs));
            let mut accepted = 0;
            for _ in 0..250 {
                let sql = statement(&mut rng, pairs);
                let Some(server) = columns_by_server(&mut r, &sql) else {
                    continue;
                };
                accepted += 1;
                let ours = columns_by_lexer(&sql, mode);
                if ours != server {
                    failures.push(format!(
                        "{cs} sql_mode={sql_mode:?}: {:?}: server {server} columns, sextant {ours}",
                        String::from_utf8_lossy(&sql)
                    ));
                }
            }
            // Enough statements must be valid for the comparison to mean
            // something in every mode.
            assert!(
                accepted >= 40,
                "{cs} {sql_mode:?}: only {accepted} of 250 accepted"
            );
            accepted_total += accepted;
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {accepted_total} readings differ from the server's:\n{}",
        failures.len(),
        failures[..failures.len().min(15)].join("\n")
    );
}
