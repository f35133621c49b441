//! A MySQL/MariaDB lexer that knows strings, quoted identifiers, comments
//! (including `/*! ... */` executable comments, whose content is code) and
//! variables. It never fails: bad input yields tokens the classifier treats
//! as "unknown", which routes conservatively.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// Keyword or unquoted identifier.
    Word,
    /// `back-quoted` identifier.
    QuotedIdent,
    /// '...' or "..." literal.
    Str,
    Number,
    /// `@name`, `@'name'`.
    UserVar,
    /// `@@name`, `@@session.name`.
    SysVar,
    /// `/*# ... */`: the text between the markers.
    Hint,
    Punct,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token<'a> {
    pub kind: TokenKind,
    pub text: &'a [u8],
}

impl Token<'_> {
    #[inline]
    pub fn is_word(&self, w: &str) -> bool {
        self.kind == TokenKind::Word && self.text.eq_ignore_ascii_case(w.as_bytes())
    }
    #[inline]
    pub fn is_punct(&self, c: u8) -> bool {
        self.kind == TokenKind::Punct && self.text == [c]
    }
}

/// Client character sets in which the trailing byte of a two-byte
/// character may be 0x5C (a backslash) or 0x60 (a backtick): inside a
/// string such a byte escapes nothing and ends nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Multibyte {
    /// gbk and gb18030 (whose four-byte characters hold no special byte).
    Gbk,
    Big5,
    /// sjis and cp932.
    Sjis,
}

impl Multibyte {
    /// The multibyte set a character set name stands for, if any.
    pub fn of_charset(name: &str) -> Option<Multibyte> {
        let n = name.trim().to_ascii_lowercase();
        match n.as_str() {
            "gbk" | "gb18030" => Some(Multibyte::Gbk),
            "big5" => Some(Multibyte::Big5),
            "sjis" | "cp932" => Some(Multibyte::Sjis),
            _ => None,
        }
    }

    /// The multibyte set of a collation id as a handshake sends it.
    pub fn of_collation(id: u8) -> Option<Multibyte> {
        match id {
            28 | 87 | 248..=250 => Some(Multibyte::Gbk),
            1 | 84 => Some(Multibyte::Big5),
            13 | 88 | 95 | 96 => Some(Multibyte::Sjis),
            _ => None,
        }
    }

    /// Whether `lead` and `trail` form one character, as the server's
    /// `ismbchar` decides.
    #[inline]
    pub fn pair(self, lead: u8, trail: u8) -> bool {
        match self {
            Multibyte::Gbk => {
                (0x81..=0xFE).contains(&lead) && matches!(trail, 0x40..=0x7E | 0x80..=0xFE)
            }
            Multibyte::Big5 => {
                (0xA1..=0xF9).contains(&lead) && matches!(trail, 0x40..=0x7E | 0xA1..=0xFE)
            }
            Multibyte::Sjis => {
                matches!(lead, 0x81..=0x9F | 0xE0..=0xFC)
                    && matches!(trail, 0x40..=0x7E | 0x80..=0xFC)
            }
        }
    }
}

/// How quotes are read, which depends on the session's sql_mode and
/// character set. The session's own mode may not be known exactly (a
/// procedure can change sql_mode), so a statement whose reading depends on
/// them is read several ways (see `classify`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LexMode {
    /// A backslash escapes the next character inside '...' and "..."
    /// (not with NO_BACKSLASH_ESCAPES, nor after the lead byte of a gbk,
    /// big5 or sjis character whose trailing byte is 0x5C).
    pub backslash_escapes: bool,
    /// "..." is a quoted identifier, not a string (ANSI_QUOTES).
    pub ansi_quotes: bool,
    /// The client character set, when it is one whose characters may end
    /// in a byte that is special in ASCII.
    pub multibyte: Option<Multibyte>,
    /// The server the statement runs on, which decides whether a
    /// versioned executable comment (`/*!50700 ... */`) is code or a
    /// comment. None: not known; such a comment is read as code and the
    /// statement is marked as depending on its reading.
    pub server: Option<ServerVersion>,
}

/// A server's version, as its lexer uses it for executable comments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerVersion {
    /// major * 10000 + minor * 100 + patch: 10.11.6 is 101106.
    pub id: u32,
    pub mariadb: bool,
}

impl ServerVersion {
    /// From a handshake's version string: `8.0.36`,
    /// `5.5.5-10.11.6-MariaDB-0+deb12u1` (MariaDB's replication-compatible
    /// prefix is skipped), `10.6.16-MariaDB-log`.
    pub fn parse(s: &str) -> Option<ServerVersion> {
        let mariadb = s.contains("MariaDB");
        let s = match s.strip_prefix("5.5.5-") {
            Some(rest) if mariadb => rest,
            _ => s,
        };
        let mut parts = s.splitn(3, '.');
        let mut num = |last: bool| -> Option<u32> {
            let p = parts.next()?;
            let digits: &str = if last {
                let end = p.find(|c: char| !c.is_ascii_digit()).unwrap_or(p.len());
                &p[..end]
            } else {
                p
            };
            digits.parse().ok()
        };
        let (major, minor, patch) = (num(false)?, num(false)?, num(true)?);
        if minor > 99 || patch > 99 {
            return None;
        }
        Some(ServerVersion {
            id: major.checked_mul(10000)? + minor * 100 + patch,
            mariadb,
        })
    }

    /// Whether this server runs the content of `/*!VERSION ... */`, or of
    /// `/*M!VERSION ... */` when `mariadb_marker`. MariaDB skips MySQL
    /// 5.7-and-later versions (50700-99999) unless marked `M!`; MySQL
    /// reads `/*M!` as a plain comment.
    pub fn runs(self, version: u32, mariadb_marker: bool) -> bool {
        if self.mariadb {
            version <= self.id && (mariadb_marker || !(50700..=99999).contains(&version))
        } else {
            !mariadb_marker && version <= self.id
        }
    }
}

impl LexMode {
    /// The server's defaults.
    pub const DEFAULT: LexMode = LexMode {
        backslash_escapes: true,
        ansi_quotes: false,
        multibyte: None,
        server: None,
    };
    /// The other reading: NO_BACKSLASH_ESCAPES and ANSI_QUOTES.
    pub const OTHER: LexMode = LexMode {
        backslash_escapes: false,
        ansi_quotes: true,
        multibyte: None,
        server: None,
    };

    /// The mode of a session with this sql_mode (as the server reports it)
    /// and client character set.
    pub fn of_session(sql_mode: &str, multibyte: Option<Multibyte>) -> LexMode {
        // One pass over the list (a session's statements each ask).
        let (mut backslash_escapes, mut ansi_quotes) = (true, false);
        for m in sql_mode.split(',') {
            let m = m.trim().as_bytes();
            if m.eq_ignore_ascii_case(b"NO_BACKSLASH_ESCAPES") {
                backslash_escapes = false;
            } else if m.eq_ignore_ascii_case(b"ANSI_QUOTES") || m.eq_ignore_ascii_case(b"ANSI") {
                ansi_quotes = true;
            }
        }
        LexMode {
            backslash_escapes,
            ansi_quotes,
            multibyte,
            server: None,
        }
    }

    /// The same mode on this server.
    pub fn on(self, server: Option<ServerVersion>) -> LexMode {
        LexMode { server, ..self }
    }
}

pub struct Lexer<'a> {
    s: &'a [u8],
    i: usize,
    /// Inside `/*! ... */`: its closing `*/` is skipped when reached.
    in_exec_comment: bool,
    mode: LexMode,
    /// A quoted run held a backslash, or "..." was met: under another
    /// sql_mode or character set the statement could read differently.
    pub mode_dependent: bool,
    /// A versioned executable comment (`/*!50708`, `/*M!`) was met: what
    /// it holds is code or comment by the server's version.
    pub versioned: bool,
}

impl<'a> Lexer<'a> {
    pub fn new(s: &'a [u8]) -> Self {
        Self::with_mode(s, LexMode::DEFAULT)
    }

    pub fn with_mode(s: &'a [u8], mode: LexMode) -> Self {
        Lexer {
            s,
            i: 0,
            in_exec_comment: false,
            mode,
            mode_dependent: false,
            versioned: false,
        }
    }

    #[inline]
    fn peek(&self, k: usize) -> u8 {
        *self.s.get(self.i + k).unwrap_or(&0)
    }

    /// Skips a quoted run starting at the opening quote; handles backslash
    /// escapes (for ' and ") and doubled quotes.
    fn skip_quoted(&mut self, q: u8) {
        self.i += 1;
        if q == b'"' {
            self.mode_dependent = true;
        }
        while self.i < self.s.len() {
            let c = self.s[self.i];
            if self.is_pair(self.i) {
                self.i += 2;
                continue;
            }
            if c >= 0x80 && q == b'`' && matches!(self.peek(1), b'`' | b'\\') {
                // A multibyte character may end in this byte.
                self.mode_dependent = true;
            }
            if c == b'\\' && q != b'`' {
                self.mode_dependent = true;
                if self.mode.backslash_escapes && !(q == b'"' && self.mode.ansi_quotes) {
                    self.i += 2;
                    continue;
                }
            }
            self.i += 1;
            if c == q {
                if self.peek(0) == q {
                    self.i += 1;
                    continue;
                }
                return;
            }
        }
        self.i = self.s.len();
    }

    fn skip_to_eol(&mut self) {
        while self.i < self.s.len() && self.s[self.i] != b'\n' {
            self.i += 1;
        }
    }

    /// Whether a two-byte character of the session's character set starts
    /// at `j`.
    #[inline]
    fn is_pair(&self, j: usize) -> bool {
        match self.mode.multibyte {
            Some(m) => {
                self.s[j] >= 0x80 && j + 1 < self.s.len() && m.pair(self.s[j], self.s[j + 1])
            }
            None => false,
        }
    }

    /// At `/*!` or `/*M!`: reads the marker and its version as the server
    /// does. Its content is code (true: the lexer goes on inside it; its
    /// closing `*/` is skipped when reached) unless the comment carries a
    /// version the server does not run, or is `/*M!` on MySQL: then the
    /// whole comment is skipped, as a plain one.
    fn executable_comment(&mut self) {
        let maria = self.peek(2) == b'M';
        let at = self.i + if maria { 4 } else { 3 };
        let digits = self.s[at.min(self.s.len())..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        // Exactly five or six digits make a version; fewer are code.
        let (len, version) = if digits >= 5 {
            let len = digits.min(6);
            let v = std::str::from_utf8(&self.s[at..at + len])
                .ok()
                .and_then(|d| d.parse::<u32>().ok())
                .unwrap_or(u32::MAX);
            (len, Some(v))
        } else {
            (0, None)
        };
        self.versioned |= version.is_some() || maria;
        let runs = match self.mode.server {
            Some(server) => match version {
                Some(v) => server.runs(v, maria),
                None => !maria || server.mariadb,
            },
            None => {
                // Another server could read it otherwise.
                if version.is_some() || maria {
                    self.mode_dependent = true;
                }
                true
            }
        };
        if runs {
            self.i = at + len;
            self.in_exec_comment = true;
            return;
        }
        self.skip_comment(at + len);
    }

    /// Skips to the end of a comment whose content starts at `from`; one
    /// level of `/* ... */` inside it is allowed, as in the server.
    fn skip_comment(&mut self, from: usize) {
        let mut j = from;
        let mut nested = false;
        while j < self.s.len() {
            match (self.s[j], self.s.get(j + 1).copied().unwrap_or(0)) {
                (b'/', b'*') if !nested => {
                    nested = true;
                    j += 2;
                }
                (b'*', b'/') => {
                    j += 2;
                    if !nested {
                        self.i = j;
                        return;
                    }
                    nested = false;
                }
                _ => j += 1,
            }
        }
        self.i = self.s.len();
    }

    fn word_end(&mut self, mut j: usize) -> usize {
        // ASCII word bytes first, one table lookup each: statements are
        // nearly all ASCII, and every statement is read this way a few
        // times (classification, catalogue, digest).
        while j < self.s.len() && WORD_ASCII[self.s[j] as usize] {
            j += 1;
        }
        while j < self.s.len() {
            let c = self.s[j];
            if c >= 0x80 && matches!(self.s.get(j + 1), Some(b'`' | b'\\')) {
                // A multibyte character may end in this byte.
                self.mode_dependent = true;
            }
            if self.is_pair(j) {
                j += 2;
            } else if c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80 {
                j += 1;
            } else {
                break;
            }
        }
        j
    }
}

/// A string literal's bytes (a [`TokenKind::Str`] token's text): quotes
/// removed, doubled quotes and (unless NO_BACKSLASH_ESCAPES) backslash
/// escapes undone, as the server reads it.
pub fn string_literal(text: &[u8], mode: LexMode) -> std::borrow::Cow<'_, [u8]> {
    use std::borrow::Cow;
    let Some((&q, rest)) = text.split_first() else {
        return Cow::Borrowed(text);
    };
    let inner = rest.strip_suffix(&[q]).unwrap_or(rest);
    let escapes = mode.backslash_escapes && inner.contains(&b'\\');
    if !escapes && !inner.windows(2).any(|w| w == [q, q]) {
        return Cow::Borrowed(inner);
    }
    let mut out = Vec::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        let c = inner[i];
        if escapes && c == b'\\' && i + 1 < inner.len() {
            let e = inner[i + 1];
            out.push(match e {
                b'0' => 0,
                b'n' => b'\n',
                b'r' => b'\r',
                b't' => b'\t',
                b'b' => 8,
                b'Z' => 26,
                other => other,
            });
            i += 2;
        } else if c == q && inner.get(i + 1) == Some(&q) {
            out.push(q);
            i += 2;
        } else {
            out.push(c);
            i += 1;
        }
    }
    Cow::Owned(out)
}

/// ASCII bytes that continue a word: letters, digits, `_` and `$`.
pub(crate) static WORD_ASCII: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 128 {
        let b = c as u8;
        t[c] = b.is_ascii_alphanumeric() || b == b'_' || b == b'$';
        c += 1;
    }
    t
};

impl<'a> Iterator for Lexer<'a> {
    type Item = Token<'a>;

    fn next(&mut self) -> Option<Token<'a>> {
        loop {
            let c = *self.s.get(self.i)?;
            match c {
                b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => self.i += 1,
                b'#' => self.skip_to_eol(),
                b'-' if self.peek(1) == b'-'
                    && (self.peek(2) <= b' ' || self.i + 2 >= self.s.len()) =>
                {
                    self.skip_to_eol()
                }
                b'*' if self.in_exec_comment && self.peek(1) == b'/' => {
                    self.in_exec_comment = false;
                    self.i += 2;
                }
                b'/' if self.peek(1) == b'*' => {
                    let start = self.i;
                    if self.peek(2) == b'!' || (self.peek(2) == b'M' && self.peek(3) == b'!') {
                        self.executable_comment();
                        continue;
                    }
                    let body = start + 2;
                    let end = find(self.s, body, b"*/");
                    self.i = end.map_or(self.s.len(), |e| e + 2);
                    if self.s.get(body) == Some(&b'#') {
                        let stop = end.unwrap_or(self.s.len());
                        return Some(Token {
                            kind: TokenKind::Hint,
                            text: &self.s[body + 1..stop],
                        });
                    }
                }
                b'\'' | b'"' if c == b'\'' || !self.mode.ansi_quotes => {
                    let start = self.i;
                    self.skip_quoted(c);
                    return Some(Token {
                        kind: TokenKind::Str,
                        text: &self.s[start..self.i],
                    });
                }
                // `...`, and "..." under ANSI_QUOTES.
                b'`' | b'"' => {
                    let start = self.i;
                    self.skip_quoted(c);
                    let end = self.i.saturating_sub(1).max(start + 1);
                    return Some(Token {
                        kind: TokenKind::QuotedIdent,
                        text: &self.s[start + 1..end],
                    });
                }
                b'@' => {
                    let start = self.i;
                    let sys = self.peek(1) == b'@';
                    self.i += if sys { 2 } else { 1 };
                    match self.peek(0) {
                        q @ (b'\'' | b'"' | b'`') => self.skip_quoted(q),
                        _ => {
                            self.i = self.word_end(self.i);
                            // @@session.var, @@global.var
                            while self.peek(0) == b'.' {
                                self.i = self.word_end(self.i + 1);
                            }
                        }
                    }
                    return Some(Token {
                        kind: if sys {
                            TokenKind::SysVar
                        } else {
                            TokenKind::UserVar
                        },
                        text: &self.s[start..self.i],
                    });
                }
                b'0'..=b'9' => {
                    let start = self.i;
                    // Identifiers may start with digits (1abc); numbers may
                    // have a fraction or exponent. Either way one token.
                    self.i = self.word_end(self.i);
                    if self.peek(0) == b'.' && self.peek(1).is_ascii_digit() {
                        self.i = self.word_end(self.i + 1);
                    }
                    let text = &self.s[start..self.i];
                    let kind = if text.iter().all(|c| c.is_ascii_digit()) {
                        TokenKind::Number
                    } else {
                        TokenKind::Word
                    };
                    return Some(Token { kind, text });
                }
                c if c.is_ascii_alphabetic() || c == b'_' || c == b'$' || c >= 0x80 => {
                    let start = self.i;
                    self.i = self.word_end(self.i);
                    return Some(Token {
                        kind: TokenKind::Word,
                        text: &self.s[start..self.i],
                    });
                }
                _ => {
                    self.i += 1;
                    return Some(Token {
                        kind: TokenKind::Punct,
                        text: &self.s[self.i - 1..self.i],
                    });
                }
            }
        }
    }
}

fn find(h: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    if from >= h.len() {
        return None;
    }
    h[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sessions_mode_from_its_sql_mode() {
        // (sql_mode, backslash escapes, ANSI quotes)
        for (m, bs, ansi) in [
            ("", true, false),
            ("STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION", true, false),
            ("NO_BACKSLASH_ESCAPES", false, false),
            ("ansi_quotes", true, true),
            (
                "REAL_AS_FLOAT,PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ANSI",
                true,
                true,
            ),
            ("ANSI", true, true),
            (
                "STRICT_ALL_TABLES, NO_BACKSLASH_ESCAPES ,ANSI_QUOTES",
                false,
                true,
            ),
            // Names that only start like one of them.
            ("ANSI_QUOTESX,NO_BACKSLASH_ESCAPESY,ANSIX", true, false),
        ] {
            let l = LexMode::of_session(m, None);
            assert_eq!((l.backslash_escapes, l.ansi_quotes), (bs, ansi), "{m:?}");
        }
    }

    fn kinds(s: &str) -> Vec<(TokenKind, String)> {
        Lexer::new(s.as_bytes())
            .map(|t| (t.kind, String::from_utf8_lossy(t.text).into_owned()))
            .collect()
    }

    #[test]
    fn strings_and_comments_hide_keywords() {
        let t = kinds(
            "SELECT 'FOR UPDATE', \"x\\\"y\" -- FOR UPDATE\n # for update\n /* for update */ 1",
        );
        assert_eq!(t.len(), 5, "{t:?}");
        assert_eq!(t[1].0, TokenKind::Str);
        assert_eq!(t[4], (TokenKind::Number, "1".into()));
    }

    #[test]
    fn executable_comments_are_code() {
        let t = kinds("/*!40101 SET NAMES utf8 */");
        assert_eq!(t[0], (TokenKind::Word, "SET".into()));
        assert_eq!(t.len(), 3);
        let t = kinds("/*M!100101 SET x=1 */ SELECT");
        assert_eq!(t[0], (TokenKind::Word, "SET".into()));
        assert_eq!(t.last().unwrap().1, "SELECT");
    }

    fn on(s: &str, version: &str) -> Vec<String> {
        let server = ServerVersion::parse(version).expect("a version");
        Lexer::with_mode(s.as_bytes(), LexMode::DEFAULT.on(Some(server)))
            .map(|t| String::from_utf8_lossy(t.text).into_owned())
            .collect()
    }

    #[test]
    fn versions_parse_as_the_server_reports_them() {
        let v = |s| ServerVersion::parse(s).map(|v| (v.id, v.mariadb));
        assert_eq!(v("5.5.5-10.11.6-MariaDB-0+deb12u1"), Some((101106, true)));
        assert_eq!(v("10.6.16-MariaDB-log"), Some((100616, true)));
        assert_eq!(v("8.0.36"), Some((80036, false)));
        assert_eq!(v("8.0.36-sextant"), Some((80036, false)));
        assert_eq!(v("5.5.5"), Some((50505, false)));
        assert_eq!(v("garbage"), None);
        assert_eq!(v("8.0"), None);
    }

    #[test]
    fn versioned_comments_run_only_where_the_server_runs_them() {
        let maria = "5.5.5-10.11.6-MariaDB-0+deb12u1";
        let sql = "SELECT 1 /*!999999 AND x */ FROM t";
        assert_eq!(on(sql, maria), ["SELECT", "1", "FROM", "t"]);
        // Equal to the server's version: runs.
        assert_eq!(
            on("SELECT 1 /*!101106 , 2 */", maria),
            ["SELECT", "1", ",", "2"]
        );
        assert_eq!(on("SELECT 1 /*!101107 , 2 */", maria), ["SELECT", "1"]);
        assert_eq!(
            on("SELECT 1 /*M!100100 , 2 */", maria),
            ["SELECT", "1", ",", "2"]
        );
        assert_eq!(on("SELECT 1 /*M!999999 , 2 */", maria), ["SELECT", "1"]);
        // MySQL 5.7+ versions are MySQL's own: MariaDB skips them unless M!.
        assert_eq!(on("SELECT 1 /*!50708 , 2 */", maria), ["SELECT", "1"]);
        assert_eq!(
            on("SELECT 1 /*M!50708 , 2 */", maria),
            ["SELECT", "1", ",", "2"]
        );
        assert_eq!(
            on("SELECT 1 /*!50100 , 2 */", maria),
            ["SELECT", "1", ",", "2"]
        );
        // MySQL: its own versions run; /*M! is a plain comment.
        assert_eq!(
            on("SELECT 1 /*!50708 , 2 */", "8.0.36"),
            ["SELECT", "1", ",", "2"]
        );
        assert_eq!(on("SELECT 1 /*!80037 , 2 */", "8.0.36"), ["SELECT", "1"]);
        assert_eq!(on("SELECT 1 /*M!50100 , 2 */", "8.0.36"), ["SELECT", "1"]);
        // Fewer than five digits: no version, the digits are code.
        assert_eq!(on("SELECT /*!12 */", maria), ["SELECT", "12"]);
        // One comment may nest inside a skipped one.
        assert_eq!(
            on("SELECT 1 /*!999999 , /* x */ 2 */ , 3", maria),
            ["SELECT", "1", ",", "3"]
        );
        // Not knowing the server: read as code, and marked as depending.
        let mut l = Lexer::new(b"SELECT 1 /*!999999 , 2 */");
        assert_eq!(l.by_ref().count(), 4);
        assert!(l.mode_dependent);
        let mut l = Lexer::new(b"SELECT 1 /*! , 2 */");
        assert_eq!(l.by_ref().count(), 4);
        assert!(!l.mode_dependent);
    }

    #[test]
    fn hints_and_variables() {
        let t = kinds("/*# mode=READWRITE */ SELECT @a, @@session.sql_mode, @'q x', `b``c`");
        assert_eq!(t[0], (TokenKind::Hint, " mode=READWRITE ".into()));
        assert!(t.contains(&(TokenKind::UserVar, "@a".into())));
        assert!(t.contains(&(TokenKind::SysVar, "@@session.sql_mode".into())));
        assert!(t.contains(&(TokenKind::UserVar, "@'q x'".into())));
        assert!(t.contains(&(TokenKind::QuotedIdent, "b``c".into())));
    }

    #[test]
    fn unterminated_input_does_not_panic() {
        for s in [
            "'abc", "/* x", "`x", "@'", "/*#", "--", "\"\\", "/*!", "@@", "1.",
        ] {
            let _ = kinds(s);
        }
    }
}
