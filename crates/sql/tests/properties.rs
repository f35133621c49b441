//! Property tests of the lexer and the classifier: any bytes are read
//! without panicking, every token lies inside the statement, and a call
//! after a string literal of any content, written as a client library
//! escapes it for the session's mode, is always seen.

use proptest::prelude::*;
use sextant_sql::{classify, classify_in, Flags, LexMode, Lexer, Multibyte, ServerVersion};

fn modes() -> impl Strategy<Value = LexMode> {
    (
        any::<bool>(),
        any::<bool>(),
        prop_oneof![
            Just(None),
            Just(Some(Multibyte::Gbk)),
            Just(Some(Multibyte::Big5)),
            Just(Some(Multibyte::Sjis))
        ],
        prop_oneof![
            Just(None),
            Just(ServerVersion::parse("5.5.5-10.11.6-MariaDB")),
            Just(ServerVersion::parse("8.0.36")),
        ],
    )
        .prop_map(
            |(backslash_escapes, ansi_quotes, multibyte, server)| LexMode {
                backslash_escapes,
                ansi_quotes,
                multibyte,
                server,
            },
        )
}

/// A string literal holding `content`, escaped as a client library does
/// for a session in `mode`: quotes and backslashes escaped with a
/// backslash where it escapes (quotes doubled elsewhere), a two-byte
/// character of the session's set copied whole.
fn literal(content: &[u8], mode: LexMode) -> Vec<u8> {
    let mut v = vec![b'\''];
    let mut i = 0;
    while i < content.len() {
        let c = content[i];
        i += 1;
        if let (Some(m), Some(&t)) = (mode.multibyte, content.get(i)) {
            if m.pair(c, t) {
                v.extend_from_slice(&[c, t]);
                i += 1;
                continue;
            }
        }
        if c >= 0x80 && mode.multibyte.is_some() {
            // Not a character of the session's set: a client library would
            // have refused or mangled it. Something valid instead.
            v.push(b'a');
            continue;
        }
        match c {
            // mysql_real_escape_string's way where backslashes escape.
            b'\'' if mode.backslash_escapes => v.extend_from_slice(b"\\'"),
            b'\'' => v.extend_from_slice(b"''"),
            b'\\' if mode.backslash_escapes => v.extend_from_slice(b"\\\\"),
            c => v.push(c),
        }
    }
    v.push(b'\'');
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn any_bytes_lex_and_classify(sql in proptest::collection::vec(any::<u8>(), 0..200), mode in modes()) {
        let base = sql.as_ptr() as usize;
        for t in Lexer::with_mode(&sql, mode) {
            let at = t.text.as_ptr() as usize;
            prop_assert!(at >= base && at + t.text.len() <= base + sql.len());
        }
        let _ = classify(&sql);
        let c = classify_in(&sql, || mode);
        // The session's reading only ever adds care.
        prop_assert!(c.flags.contains(classify(&sql).flags));
        prop_assert!(!c.read_only || classify(&sql).read_only);
    }

    #[test]
    fn sql_like_text_classifies(sql in "[ a-zA-Z0-9_'\"`\\\\,;()@#*/=.-]{0,80}", mode in modes()) {
        let _ = classify_in(sql.as_bytes(), || mode);
    }

    /// Whatever a string holds (backslashes, quotes, multibyte characters
    /// ending in a backslash, comment markers), a call after it is a call.
    #[test]
    fn a_call_after_any_literal_is_seen(
        content in proptest::collection::vec(prop_oneof![
            Just(b'\\'), Just(b'\''), Just(b'"'), Just(b'`'), Just(b'#'), Just(b'-'), Just(b'/'),
            Just(b'*'), Just(b','), Just(b'a'), Just(0xbf), Just(0x95), Just(0xa4), Just(0x5c), Just(0x60)
        ], 0..24),
        content2 in proptest::collection::vec(prop_oneof![
            Just(b'\\'), Just(b'\''), Just(b'a'), Just(0xbf), Just(0x95), Just(0xa4), Just(0x5c)
        ], 0..12),
        mode in modes(),
    ) {
        let mut sql = b"SELECT ".to_vec();
        // Two literals: a quote escaped in the first changes how another
        // reading sees the second.
        sql.extend_from_slice(&literal(&content, mode));
        sql.extend_from_slice(b", ");
        sql.extend_from_slice(&literal(&content2, mode));
        sql.extend_from_slice(b", my_func()");
        let c = classify_in(&sql, || mode);
        prop_assert!(c.may_write(), "{:?} in {:?}: {:?}", String::from_utf8_lossy(&sql), mode, c);
        prop_assert!(c.flags.contains(Flags::STORED_FUNCTION));
    }
}
