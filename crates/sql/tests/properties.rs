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

/// Words, names, operators and numbers (`N`) to build statements of.
const PIECES: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "UPDATE",
    "SET",
    "INSERT",
    "INTO",
    "VALUES",
    "DELETE",
    "FOR",
    "SHARE",
    "LIMIT",
    "KILL",
    "QUERY",
    "BEGIN",
    "COMMIT",
    "LOCK",
    "TABLES",
    "READ",
    "WITH",
    "t",
    "t1",
    "v1",
    "f1",
    "x",
    "e",
    "e5",
    "@@identity",
    "@@session",
    "@v",
    "@",
    "LAST_INSERT_ID",
    "NEXTVAL",
    "SLEEP",
    "GET_LOCK",
    "FOUND_ROWS",
    "(",
    ")",
    ",",
    ";",
    "=",
    "+",
    "-",
    ".",
    "*",
    "/",
    "N",
    "N",
    "N",
    "N",
];

/// The catalogue the shape properties classify with besides none: a
/// function that may write, a view calling it, a listed table.
fn catalogue() -> sextant_sql::Catalogue {
    sextant_sql::Catalogue::new(
        Some(sextant_sql::ServerKind::MariaDb),
        ["f1".to_string()],
        [("v1".to_string(), "SELECT f1()".to_string())],
    )
    .with_tables(["t".to_string()])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// What remembering classifications by shape rests on: two plain
    /// statements of one shape (they differ in numbers only) classify
    /// alike, with or without a catalogue.
    #[test]
    fn numbers_never_change_a_classification(
        pieces in proptest::collection::vec((0..PIECES.len(), any::<bool>()), 1..16),
        a in any::<u64>(),
        b in any::<u64>(),
    ) {
        use sextant_sql::shape::{shape, Shaped};
        let build = |seed: u64| {
            let mut s = String::new();
            for (i, (p, glued)) in pieces.iter().enumerate() {
                if !glued && !s.is_empty() {
                    s.push(' ');
                }
                match PIECES[*p] {
                    "N" => s.push_str(&(seed.wrapping_mul(i as u64 + 1) % 100_000).to_string()),
                    w => s.push_str(w),
                }
            }
            s
        };
        let (x, y) = (build(a), build(b));
        let (mut sx, mut sy) = (Vec::new(), Vec::new());
        let plain = |s: &str, out: &mut Vec<u8>| shape(s.as_bytes(), out) == Shaped::Plain;
        if plain(&x, &mut sx) && plain(&y, &mut sy) && sx == sy {
            let cat = catalogue();
            for (p, q) in [
                (classify(x.as_bytes()), classify(y.as_bytes())),
                (cat.classify(x.as_bytes()), cat.classify(y.as_bytes())),
            ] {
                prop_assert_eq!((p.kind, p.flags, p.read_only), (q.kind, q.flags, q.read_only),
                    "{:?} and {:?}", x, y);
            }
        }
    }
}

/// How statements start: the kinds whose strings the classifier never
/// reads, and those whose strings it does (dynamic SQL, also inside a
/// compound statement or after another statement).
const STARTS: &[&str] = &[
    "SELECT",
    "SELECT * FROM t WHERE x =",
    "INSERT INTO t VALUES (",
    "UPDATE t SET x =",
    "DELETE FROM t WHERE x =",
    "REPLACE INTO t1 VALUES (",
    "WITH w AS (SELECT",
    "PREPARE s FROM",
    "EXECUTE IMMEDIATE",
    "SET @v =",
    "SET NAMES",
    "BEGIN NOT ATOMIC PREPARE s FROM",
    "CREATE PROCEDURE p() BEGIN EXECUTE IMMEDIATE",
    "CALL p(",
    "SHOW TABLES LIKE",
    "XA START",
    "KILL",
    "DO",
    "SELECT 1; PREPARE s FROM",
];

/// What strings hold: text that would change a classification if it were
/// read as SQL.
const CONTENTS: &[&str] = &[
    "",
    "a",
    "KILL 5",
    "KILL QUERY 7",
    "SELECT f1()",
    "; DELETE FROM t",
    "XA COMMIT 'x'",
    "\"",
    "`",
    "--",
    "/*",
    "*/",
    "#",
    "@v",
    "'",
    "é",
    "FOR UPDATE",
    "NEXTVAL(s)",
    "GET_LOCK('l', 1)",
    "SELECT * FROM v1",
    "INTO OUTFILE 'f'",
    "sextant.t",
    "LAST_INSERT_ID()",
    "(",
    ")",
    ";",
    "END",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// What remembering classifications of statements with strings rests
    /// on: two statements of one shape (they differ in numbers and in
    /// what their strings hold) classify alike whenever the first one's
    /// classification says it read no string.
    #[test]
    fn unread_strings_never_change_a_classification(
        start in 0..STARTS.len(),
        pieces in proptest::collection::vec((0..PIECES.len() + 1, any::<bool>()), 0..12),
        contents in proptest::collection::vec((0..CONTENTS.len(), 0..CONTENTS.len()), 12..13),
        a in any::<u64>(),
        b in any::<u64>(),
    ) {
        use sextant_sql::shape::{shape, Shaped};
        let build = |seed: u64, second: bool| {
            let mut s = STARTS[start].to_string();
            // A string right after the start, then the pieces.
            let strings = std::iter::once((PIECES.len(), false)).chain(pieces.iter().copied());
            for (i, (p, glued)) in strings.enumerate() {
                if !glued {
                    s.push(' ');
                }
                match PIECES.get(p).copied() {
                    None => {
                        let (x, y) = contents[i % contents.len()];
                        let text = CONTENTS[if second { y } else { x }];
                        s.push('\'');
                        s.push_str(&text.replace('\'', "''"));
                        s.push('\'');
                    }
                    Some("N") => s.push_str(&(seed.wrapping_mul(i as u64 + 1) % 100_000).to_string()),
                    Some(w) => s.push_str(w),
                }
            }
            s
        };
        let (x, y) = (build(a, false), build(b, true));
        let (mut sx, mut sy) = (Vec::new(), Vec::new());
        let shaped = shape(x.as_bytes(), &mut sx);
        if shaped == Shaped::Strings && shape(y.as_bytes(), &mut sy) == shaped && sx == sy {
            let cat = catalogue();
            for (p, q) in [
                (classify(x.as_bytes()), classify(y.as_bytes())),
                (cat.classify(x.as_bytes()), cat.classify(y.as_bytes())),
            ] {
                if p.strings_unread() {
                    prop_assert_eq!((p.kind, p.flags, p.read_only), (q.kind, q.flags, q.read_only),
                        "{:?} and {:?}", x, y);
                }
            }
        }
    }
}
