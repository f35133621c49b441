//! A statement's digest text: what it does without its values. Every
//! string and number becomes `?`, a list of them (`IN (1, 2, 3)`, a row of
//! VALUES) becomes `?,...`, comments and hints go, and spacing is one
//! blank where the statement had any. Statements that differ only in
//! their values share a digest, and a digest never carries a value, so
//! it can be logged (the slow log) or listed (query digests) without
//! leaking a password or personal data a statement held.
//!
//! Counting a statement needs only its digest's key ([`digest_key`]):
//! the digest is built as bytes and hashed, and becomes text only when
//! it is seen for the first time.

use crate::lexer::{LexMode, Lexer, Token, TokenKind};

/// Longest digest kept; longer ones end with `...`.
pub const MAX_DIGEST: usize = 1024;

/// Writes `sql`'s digest into `out` (cleared first).
pub fn digest(sql: &[u8], mode: LexMode, out: &mut String) {
    let mut bytes = Vec::new();
    digest_bytes(sql, mode, &mut bytes);
    out.clear();
    out.push_str(&String::from_utf8_lossy(&bytes));
}

/// Writes `sql`'s digest into `out` (cleared first) as bytes: the digest
/// text when the statement's names are UTF-8 (nearly always), and what
/// [`digest`] turns into text otherwise.
pub fn digest_bytes(sql: &[u8], mode: LexMode, out: &mut Vec<u8>) {
    out.clear();
    let mut d = Digester::new(sql);
    for t in Lexer::with_mode(sql, mode) {
        if !d.token(&t, out) {
            return;
        }
    }
    d.finish(out);
}

/// Builds a digest one token at a time, so that a pass over the
/// statement's tokens made for something else (classification) builds it
/// too. Tokens must come from a lexer over the `sql` given to
/// [`Digester::new`], into an `out` cleared first.
pub struct Digester {
    base: usize,
    prev_end: usize,
    /// The output ends with `?` then a comma not written yet.
    pending_comma: bool,
    /// Inside a run of `?, ?, ...` collapsed to one `?`.
    in_list: bool,
    /// Cut at [`MAX_DIGEST`]: later tokens change nothing.
    cut: bool,
}

impl Digester {
    pub fn new(sql: &[u8]) -> Digester {
        Digester {
            base: sql.as_ptr() as usize,
            prev_end: 0,
            pending_comma: false,
            in_list: false,
            cut: false,
        }
    }

    /// Adds one token; false once the digest is complete (cut at its
    /// longest).
    pub fn token(&mut self, t: &Token<'_>, out: &mut Vec<u8>) -> bool {
        if self.cut {
            return false;
        }
        let start = t.text.as_ptr() as usize - self.base;
        let end = start + t.text.len();
        if t.kind == TokenKind::Hint {
            self.prev_end = end + 2;
            return true;
        }
        let gap = start > self.prev_end;
        // (A quoted name's text is inside its quotes; a string's is not.)
        self.prev_end = match t.kind {
            TokenKind::QuotedIdent => end + 1,
            _ => end,
        };
        // A word starting with a digit is a number with a fraction or an
        // exponent, or a hex literal (0xBEEF): a value too.
        let literal = matches!(t.kind, TokenKind::Str | TokenKind::Number)
            || t.kind == TokenKind::Word && t.text.first().is_some_and(u8::is_ascii_digit);
        if t.is_punct(b',') && !self.pending_comma && (self.in_list || out.last() == Some(&b'?')) {
            self.pending_comma = true;
            return true;
        }
        if self.pending_comma {
            self.pending_comma = false;
            if literal {
                self.in_list = true;
                return true;
            }
            if self.in_list {
                out.extend_from_slice(b",...");
                self.in_list = false;
            }
            out.push(b',');
        } else if self.in_list {
            out.extend_from_slice(b",...");
            self.in_list = false;
        }
        if gap && !out.is_empty() && out.last() != Some(&b'(') && !t.is_punct(b')') {
            out.push(b' ');
        }
        match t.kind {
            _ if literal => out.push(b'?'),
            // `'user'@'host'` lexes as a string and a quoted user
            // variable: the host is a value.
            TokenKind::UserVar if matches!(t.text.get(1), Some(b'\'' | b'"')) => {
                out.extend_from_slice(b"@?")
            }
            TokenKind::QuotedIdent => {
                out.push(b'`');
                out.extend_from_slice(t.text);
                out.push(b'`');
            }
            _ => out.extend_from_slice(t.text),
        }
        if out.len() > MAX_DIGEST {
            // Never inside a character: back off over continuation bytes.
            let mut cut = MAX_DIGEST;
            while cut > 0 && out[cut] & 0xC0 == 0x80 {
                cut -= 1;
            }
            out.truncate(cut);
            out.extend_from_slice(b"...");
            self.cut = true;
            return false;
        }
        true
    }

    /// The statement ended.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if self.cut {
            return;
        }
        if self.in_list {
            out.extend_from_slice(b",...");
        }
        if self.pending_comma {
            out.push(b',');
        }
        self.cut = true;
    }
}

/// The key a digest is counted under: a hash of its bytes, the same on
/// every thread and in every run, so that one digest's rows merge across
/// threads. Never 0.
pub fn digest_key(digest: &[u8]) -> u64 {
    fnv1a(digest).max(1)
}

/// 64-bit FNV-1a: stable across threads, processes and versions (where a
/// value must hash alike everywhere: digests, a schema's writer), and
/// quick on short keys.
pub fn fnv1a(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= x as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(sql: &str) -> String {
        let mut out = String::new();
        digest(sql.as_bytes(), LexMode::DEFAULT, &mut out);
        out
    }

    #[test]
    fn values_become_placeholders() {
        let cases = [
            (
                "SELECT c FROM sbtest1 WHERE id=42",
                "SELECT c FROM sbtest1 WHERE id=?",
            ),
            (
                "SELECT  c\n FROM t WHERE name = 'O''Brien' AND x > -1.5e3",
                "SELECT c FROM t WHERE name = ? AND x > -?",
            ),
            (
                "SELECT * FROM t WHERE id IN (1, 2, 3)",
                "SELECT * FROM t WHERE id IN (?,...)",
            ),
            (
                "SELECT * FROM t WHERE id IN (7)",
                "SELECT * FROM t WHERE id IN (?)",
            ),
            (
                "INSERT INTO t (a, b) VALUES (1, 'x'), (2, 'y')",
                "INSERT INTO t (a, b) VALUES (?,...), (?,...)",
            ),
            ("SELECT a, b FROM t", "SELECT a, b FROM t"),
            ("SELECT f(1, a) FROM t", "SELECT f(?, a) FROM t"),
            (
                "/* app: checkout */ SELECT /*# group=\"a\" */ 1",
                "SELECT ?",
            ),
            (
                "SET PASSWORD FOR 'app'@'%' = PASSWORD('s3cret')",
                "SET PASSWORD FOR ?@? = PASSWORD(?)",
            ),
            (
                "CREATE USER x IDENTIFIED BY \"hunter2\"",
                "CREATE USER x IDENTIFIED BY ?",
            ),
            (
                "SELECT `select` FROM `my table`",
                "SELECT `select` FROM `my table`",
            ),
            (
                "SELECT ?, ? FROM t WHERE id = ?",
                "SELECT ?, ? FROM t WHERE id = ?",
            ),
        ];
        for (sql, want) in cases {
            assert_eq!(d(sql), want, "{sql}");
        }
    }

    #[test]
    fn same_shape_same_digest_and_bounded() {
        assert_eq!(
            d("SELECT 1 FROM t WHERE a = 'x'"),
            d("select 1 from t where a = 'yy'")
                .replace("select", "SELECT")
                .replace("from", "FROM")
                .replace("where", "WHERE")
        );
        let long = format!("SELECT {} FROM t", vec!["col"; 1000].join(" + "));
        let out = d(&long);
        assert!(out.len() <= MAX_DIGEST + 3 && out.ends_with("..."));
        // A cut that would split a character backs off to its start.
        let wide = format!("SELECT {} FROM t", vec!["\u{e9}t\u{e9}"; 400].join(" + "));
        let out = d(&wide);
        assert!(out.len() <= MAX_DIGEST + 3 && out.ends_with("..."), "{out}");
        assert!(!out.contains('\u{fffd}'), "{out}");
    }

    fn key(sql: &str) -> u64 {
        let mut b = Vec::new();
        digest_bytes(sql.as_bytes(), LexMode::DEFAULT, &mut b);
        digest_key(&b)
    }

    #[test]
    fn keys_follow_the_digest_text() {
        // The first two share a digest; the third is spaced otherwise.
        assert_eq!(
            key("SELECT c FROM sbtest1 WHERE id=42"),
            key("SELECT c FROM sbtest1 WHERE id=7")
        );
        assert_ne!(
            key("SELECT c FROM sbtest1 WHERE id=42"),
            key("SELECT  c FROM sbtest1 WHERE id = 'x'")
        );
        let all = [
            "SELECT c FROM sbtest1 WHERE id=?",
            "SELECT c FROM sbtest2 WHERE id=?",
            "SELECT c FROM sbtest1 WHERE id IN (1, 2)",
            "UPDATE sbtest1 SET k=k+1 WHERE id=1",
            "SELECT `c` FROM sbtest1 WHERE id=1",
        ];
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(key(a), key(b), "{a} / {b}");
            }
        }
        // Text and key come from the same bytes.
        let mut b = Vec::new();
        digest_bytes(b"SELECT 'x', 1 FROM t", LexMode::DEFAULT, &mut b);
        assert_eq!(b, d("SELECT 'x', 1 FROM t").as_bytes());
        assert_ne!(digest_key(b""), 0);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// A digest built on classification's pass over the tokens is the
        /// one a reading of its own gives, whenever the tokens do not
        /// depend on the lexing mode (the caller reads it again when they
        /// do).
        #[test]
        fn a_digest_built_while_classifying_is_the_digest(
            words in proptest::collection::vec(0usize..WORDS.len(), 0..40),
            ansi in proptest::prelude::any::<bool>(),
        ) {
            let sql: Vec<u8> = words.iter().flat_map(|&w| [WORDS[w], " "].concat().into_bytes()).collect();
            let session = LexMode { ansi_quotes: ansi, ..LexMode::DEFAULT };
            let mut fused = Vec::new();
            let mut d = Digester::new(&sql);
            let (_, dependent) = crate::Catalogue::default()
                .classify_observing(&sql, || session, |t| {
                    d.token(t, &mut fused);
                });
            d.finish(&mut fused);
            let mut own = Vec::new();
            digest_bytes(&sql, session, &mut own);
            if !dependent {
                proptest::prop_assert_eq!(&fused, &own, "{}", String::from_utf8_lossy(&sql));
            }
        }
    }

    const WORDS: &[&str] = &[
        "SELECT",
        "FROM",
        "t",
        "WHERE",
        "id",
        "=",
        "1",
        "2.5e3",
        "0xBEEF",
        "'a'",
        "'it''s'",
        "\"dq\"",
        "`q`",
        ",",
        "(",
        ")",
        "IN",
        "VALUES",
        ";",
        "/*+ hint */",
        "/* c */",
        "-- c\n",
        "@v",
        "@@port",
        "'u'@'h'",
        "?",
        "x.y",
        "NULL",
        "'\\''",
        "/*!50000 a */",
        "#c\n",
    ];
}
