//! A statement's shape: its text with each number written as `#` and
//! each string literal as `''`. Two plain statements of one shape
//! classify alike, because classification reads words, names and
//! punctuation but never a number's digits, and for the kinds of
//! statement [`Classification::strings_unread`] names, never a string's
//! contents; so a worker thread can remember what a shape classified as
//! (and its digest) and skip the lexer, the classifier and the catalogue
//! for the next statement of that shape. OLTP traffic is a few shapes
//! with different values in them.
//!
//! Only plain statements have a shape: ASCII outside strings, no
//! double quotes or backticks, no comments (so no hints), no
//! backslashes anywhere. Everything whose reading could depend on more
//! than the bytes outside values (the lexing mode, executable comments,
//! multibyte character sets) is left to the classifier. Inside a
//! single-quoted string only the closing quote matters: a doubled quote
//! is read alike in every mode, and no multibyte character set has a
//! quote byte inside a character (their second bytes start at 0x40), so
//! without a backslash the string ends at the same byte in every
//! reading.

use crate::catalogue::Catalogue;
use crate::classify::{Classification, Flags, Kind};
use crate::hints::Hints;
use std::sync::Arc;

/// Longer shapes are not remembered (longer statements are rarer, and
/// the lexer's part of their cost smaller).
pub const MAX_SHAPE: usize = 512;

/// Statements longer than this are not shaped at all: shaping a long
/// one only to find its shape too long would be wasted.
const MAX_TEXT: usize = 16 * MAX_SHAPE;

/// Slots in a [`Shapes`] (a power of two).
const SLOTS: usize = 256;

/// Whether a digit next to `c` is part of a word, as the lexer reads it
/// (the same table: a shape must never join what the lexer splits).
fn ident(c: u8) -> bool {
    crate::lexer::WORD_ASCII[c as usize]
}

/// What a byte is to [`shape`]: copied as it is, a digit, a byte that
/// makes the statement not plain, one that does when the next byte is
/// `*` (`/*`) or `-` (`--`), or a string's opening quote.
const PLAIN: u8 = 0;
const DIGIT: u8 = 1;
const NOT_PLAIN: u8 = 2;
const SLASH: u8 = 3;
const DASH: u8 = 4;
const QUOTE: u8 = 5;

const CLASSES: [u8; 256] = {
    let mut t = [PLAIN; 256];
    let mut c = 0;
    while c < 256 {
        t[c] = match c as u8 {
            b'0'..=b'9' => DIGIT,
            b'"' | b'`' | b'\\' | b'#' | 0x80..=0xff => NOT_PLAIN,
            b'\'' => QUOTE,
            b'/' => SLASH,
            b'-' => DASH,
            _ => PLAIN,
        };
        c += 1;
    }
    t
};

/// What [`shape`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shaped {
    /// The statement is not plain (or too long): it has no shape.
    No,
    /// A shape with no string in it.
    Plain,
    /// A shape with at least one string: it stands for its statements
    /// only where the classification reads no string.
    Strings,
}

/// Writes `sql`'s shape to `out` (meaningless when the answer is
/// [`Shaped::No`]). A run of digits becomes `#` unless it is part of a
/// word (`sbtest1`, `1e5`, `0x1F`, `2abc`): such runs stay. A string
/// becomes `''`, whatever its contents, so `''` in a shape always stands
/// for a string. (The bytes between values are copied in one piece
/// each: this runs for every text statement.)
pub fn shape(sql: &[u8], out: &mut Vec<u8>) -> Shaped {
    out.clear();
    if sql.len() > MAX_TEXT {
        return Shaped::No;
    }
    let mut strings = false;
    // Where the bytes not yet copied start.
    let mut from = 0;
    let mut i = 0;
    while i < sql.len() {
        let class = CLASSES[sql[i] as usize];
        if class == PLAIN {
            i += 1;
            continue;
        }
        match class {
            DIGIT => {
                let start = i;
                while i < sql.len() && sql[i].is_ascii_digit() {
                    i += 1;
                }
                let joined =
                    (start > 0 && ident(sql[start - 1])) || (i < sql.len() && ident(sql[i]));
                if !joined {
                    out.extend_from_slice(&sql[from..start]);
                    out.push(b'#');
                    from = i;
                }
            }
            QUOTE => {
                let Some(end) = string_end(sql, i + 1) else {
                    return Shaped::No;
                };
                out.extend_from_slice(&sql[from..i]);
                out.extend_from_slice(b"''");
                strings = true;
                i = end;
                from = i;
            }
            SLASH if sql.get(i + 1) == Some(&b'*') => return Shaped::No,
            DASH if sql.get(i + 1) == Some(&b'-') => return Shaped::No,
            NOT_PLAIN => return Shaped::No,
            _ => i += 1,
        }
    }
    out.extend_from_slice(&sql[from..]);
    match (out.len() > MAX_SHAPE, strings) {
        (true, _) => Shaped::No,
        (false, false) => Shaped::Plain,
        (false, true) => Shaped::Strings,
    }
}

/// Where the single-quoted string whose contents start at `from` ends
/// (just after its closing quote), reading `''` as a quote inside it:
/// none when it holds a backslash (whose reading depends on the session's
/// sql_mode) or is not closed.
fn string_end(sql: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let at = from + memchr::memchr2(b'\'', b'\\', &sql[from..])?;
        if sql[at] == b'\\' {
            return None;
        }
        if sql.get(at + 1) == Some(&b'\'') {
            from = at + 2;
            continue;
        }
        return Some(at + 1);
    }
}

/// What a shape classified as, with the catalogue of the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remembered {
    pub kind: Kind,
    pub flags: Flags,
    pub read_only: bool,
    /// The statement's digest key, when it was taken.
    pub digest: Option<u64>,
}

impl Remembered {
    pub fn of(c: &Classification<'_>, digest: Option<u64>) -> Remembered {
        Remembered {
            kind: c.kind,
            flags: c.flags,
            read_only: c.read_only,
            digest,
        }
    }

    /// The classification again (a plain statement has no hints).
    pub fn classification<'a>(&self) -> Classification<'a> {
        Classification {
            kind: self.kind,
            flags: self.flags,
            read_only: self.read_only,
            hints: Hints::default(),
        }
    }
}

struct Slot {
    shape: Vec<u8>,
    /// The catalogue the shape was classified with: held, so that its
    /// address is never another catalogue's while the slot lives.
    catalogue: Arc<Catalogue>,
    remembered: Remembered,
}

/// Classifications by shape, for one worker thread: a fixed number of
/// slots, each shape in the slot its hash picks (a newer shape takes the
/// slot of an older one). An entry holds only with the catalogue it was
/// classified with: a new catalogue (a view or function learned, the
/// primary's flavor found) makes every entry of the old one a miss.
pub struct Shapes {
    slots: Vec<Option<Slot>>,
}

impl Default for Shapes {
    fn default() -> Self {
        Shapes {
            slots: (0..SLOTS).map(|_| None).collect(),
        }
    }
}

impl Shapes {
    fn index(shape: &[u8]) -> usize {
        use std::hash::BuildHasher;
        foldhash::fast::FixedState::with_seed(0).hash_one(shape) as usize & (SLOTS - 1)
    }

    pub fn get(&self, catalogue: &Arc<Catalogue>, shape: &[u8]) -> Option<Remembered> {
        match &self.slots[Self::index(shape)] {
            Some(s) if Arc::ptr_eq(&s.catalogue, catalogue) && s.shape == shape => {
                Some(s.remembered)
            }
            _ => None,
        }
    }

    pub fn put(&mut self, catalogue: &Arc<Catalogue>, shape: &[u8], remembered: Remembered) {
        match &mut self.slots[Self::index(shape)] {
            // The slot's buffer is reused: no allocation once warm.
            Some(s) => {
                s.shape.clear();
                s.shape.extend_from_slice(shape);
                if !Arc::ptr_eq(&s.catalogue, catalogue) {
                    s.catalogue = catalogue.clone();
                }
                s.remembered = remembered;
            }
            empty => {
                *empty = Some(Slot {
                    shape: shape.to_vec(),
                    catalogue: catalogue.clone(),
                    remembered,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape_of(sql: &str) -> Option<String> {
        let mut out = Vec::new();
        let shaped = shape(sql.as_bytes(), &mut out);
        let strings = out.windows(2).any(|w| w == b"''");
        match shaped {
            Shaped::No => None,
            Shaped::Plain | Shaped::Strings => {
                assert_eq!(shaped == Shaped::Strings, strings, "{sql}");
                Some(String::from_utf8(out).unwrap())
            }
        }
    }

    #[test]
    fn numbers_become_marks_and_words_keep_their_digits() {
        let cases = [
            (
                "SELECT c FROM sbtest1 WHERE id=5000",
                Some("SELECT c FROM sbtest1 WHERE id=#"),
            ),
            (
                "SELECT c FROM sbtest12 WHERE id BETWEEN 7 AND 106",
                Some("SELECT c FROM sbtest12 WHERE id BETWEEN # AND #"),
            ),
            (
                "SELECT 1e5, 0x1F, 2abc, t1.c2",
                Some("SELECT 1e5, 0x1F, 2abc, t1.c2"),
            ),
            ("SELECT 1.5, -3, 4.x", Some("SELECT #.#, -#, #.x")),
            (
                "SELECT @@max_allowed_packet, @1",
                Some("SELECT @@max_allowed_packet, @#"),
            ),
            (
                "UPDATE t SET k=k+1 WHERE id=9",
                Some("UPDATE t SET k=k+# WHERE id=#"),
            ),
            ("SELECT 10/2", Some("SELECT #/#")),
            ("SELECT 'a'", Some("SELECT ''")),
            ("SELECT '', 'it''s', 'a' 'b'", Some("SELECT '', '', '' ''")),
            ("SELECT ''''", Some("SELECT ''")),
            ("SELECT '''a'", Some("SELECT ''")),
            (
                "INSERT INTO t VALUES (5, 'x\"`#-- /* ;é', 'y')",
                Some("INSERT INTO t VALUES (#, '', '')"),
            ),
            (
                "SELECT x'4F', _utf8'a', N'b'",
                Some("SELECT x'', _utf8'', N''"),
            ),
            ("SELECT 'a'1, 2'b'", Some("SELECT ''#, #''")),
            ("SELECT 'a\\'b'", None),
            ("SELECT 'a\\\\'", None),
            ("SELECT 'open", None),
            ("SELECT 'a''", None),
            ("SELECT 'a' é", None),
            ("SELECT \"a\"", None),
            ("SELECT `a`", None),
            ("SELECT 1 -- x", None),
            ("SELECT 1 # x", None),
            ("SELECT /*# to=primary */ 1", None),
            ("SELECT /*!50700 1 */", None),
            ("SELECT é", None),
            ("SELECT 1\\", None),
        ];
        for (sql, want) in cases {
            assert_eq!(shape_of(sql).as_deref(), want, "{sql}");
        }
        let long = format!("SELECT {}", "1, ".repeat(200));
        assert_eq!(shape_of(&long), None, "longer than MAX_SHAPE");
        let long = format!("SELECT '{}'", "a".repeat(4 * MAX_SHAPE));
        assert_eq!(
            shape_of(&long).as_deref(),
            Some("SELECT ''"),
            "a long string"
        );
        let long = format!("SELECT '{}'", "a".repeat(MAX_TEXT));
        assert_eq!(shape_of(&long), None, "longer than MAX_TEXT");
    }

    #[test]
    fn a_shape_is_remembered_with_its_catalogue_only() {
        let mut shapes = Shapes::default();
        let cat = Arc::new(Catalogue::default());
        let other = Arc::new(Catalogue::default());
        let c = cat.classify(b"SELECT c FROM t WHERE id=1");
        let r = Remembered::of(&c, Some(7));
        let s = shape_of("SELECT c FROM t WHERE id=1").unwrap();
        assert_eq!(shapes.get(&cat, s.as_bytes()), None);
        shapes.put(&cat, s.as_bytes(), r);
        assert_eq!(shapes.get(&cat, s.as_bytes()), Some(r));
        assert_eq!(shapes.get(&other, s.as_bytes()), None, "another catalogue");
        assert_eq!(shapes.get(&cat, b"SELECT c FROM t WHERE id=#+#"), None);
        assert_eq!(r.classification().kind, Kind::Select);
        assert!(r.classification().read_only);
    }
}
