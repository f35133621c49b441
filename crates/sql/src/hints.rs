//! `/*# key=value ... */` routing hints (Cetus style: `/*#mode=READWRITE*/`,
//! `/*# group="all" */`). Keys are case-insensitive, values may be quoted.

pub const MAX_HINTS: usize = 8;

/// Hint comments kept per statement; more are dropped.
pub const MAX_HINT_COMMENTS: usize = 4;

/// A statement's hints, kept as the texts of its hint comments and read
/// into pairs when asked. Nearly every statement has none, and the
/// classification that carries them is returned and moved several times
/// per statement: parsed pairs made it four times the size (a fifth of a
/// point select's copying).
#[derive(Clone, Copy, Default)]
pub struct Hints<'a> {
    texts: [&'a [u8]; MAX_HINT_COMMENTS],
    len: u8,
}

impl<'a> Hints<'a> {
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// The `key=value` pairs in order, at most [`MAX_HINTS`].
    pub fn iter(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + '_ {
        self.texts[..self.len as usize]
            .iter()
            .flat_map(|&text| Pairs { text, i: 0 })
            .take(MAX_HINTS)
    }

    /// The value of `key` (case-insensitive); the last one wins.
    pub fn get(&self, key: &str) -> Option<&'a [u8]> {
        self.iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(key.as_bytes()))
            .last()
            .map(|(_, v)| v)
    }

    /// Adds one hint comment's text. Text that is not `key=value` is
    /// ignored; pairs beyond [`MAX_HINTS`] and comments beyond
    /// [`MAX_HINT_COMMENTS`] are dropped.
    pub fn add_comment(&mut self, text: &'a [u8]) {
        if (self.len as usize) < MAX_HINT_COMMENTS {
            self.texts[self.len as usize] = text;
            self.len += 1;
        }
    }
}

impl PartialEq for Hints<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Hints<'_> {}

impl std::fmt::Debug for Hints<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(|(k, v)| {
                (
                    String::from_utf8_lossy(k).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            }))
            .finish()
    }
}

/// The pairs of one hint comment's text.
struct Pairs<'a> {
    text: &'a [u8],
    i: usize,
}

impl<'a> Iterator for Pairs<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let text = self.text;
        let n = text.len();
        let i = &mut self.i;
        let skip_sep = |i: &mut usize| {
            while *i < n && (text[*i].is_ascii_whitespace() || text[*i] == b',' || text[*i] == b';')
            {
                *i += 1;
            }
        };
        loop {
            skip_sep(i);
            if *i >= n {
                return None;
            }
            let ks = *i;
            while *i < n
                && (text[*i].is_ascii_alphanumeric() || matches!(text[*i], b'_' | b'-' | b'.'))
            {
                *i += 1;
            }
            let key = &text[ks..*i];
            while *i < n && text[*i] == b' ' {
                *i += 1;
            }
            if key.is_empty() || *i >= n || text[*i] != b'=' {
                // Not a pair: a bare word is dropped and the scan goes on
                // from the next word; a stray character is skipped.
                if key.is_empty() {
                    *i += 1;
                }
                continue;
            }
            *i += 1;
            while *i < n && text[*i] == b' ' {
                *i += 1;
            }
            let value = if *i < n && (text[*i] == b'"' || text[*i] == b'\'') {
                let q = text[*i];
                let vs = *i + 1;
                *i = vs;
                while *i < n && text[*i] != q {
                    *i += 1;
                }
                let v = &text[vs..*i];
                *i = (*i + 1).min(n);
                v
            } else {
                let vs = *i;
                while *i < n
                    && !text[*i].is_ascii_whitespace()
                    && text[*i] != b','
                    && text[*i] != b';'
                {
                    *i += 1;
                }
                &text[vs..*i]
            };
            return Some((key, value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Vec<(String, String)> {
        let mut h = Hints::default();
        h.add_comment(s.as_bytes());
        h.iter()
            .map(|(k, v)| {
                (
                    String::from_utf8_lossy(k).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn forms() {
        let cases: &[(&str, &[(&str, &str)])] = &[
            ("mode=READWRITE", &[("mode", "READWRITE")]),
            (" mode = READONLY ", &[("mode", "READONLY")]),
            (" group=\"all\" ", &[("group", "all")]),
            (
                "group='data 1', consistency=strong",
                &[("group", "data 1"), ("consistency", "strong")],
            ),
            ("junk mode=READWRITE", &[("mode", "READWRITE")]),
            ("=x a=", &[("a", "")]),
            ("", &[]),
            ("k=\"unterminated", &[("k", "unterminated")]),
        ];
        for (input, want) in cases {
            let want: Vec<_> = want
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect();
            assert_eq!(parse(input), want, "input {input:?}");
        }
    }

    #[test]
    fn bounded_and_case_insensitive() {
        let mut h = Hints::default();
        let s = "a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8 i=9 MODE=x";
        h.add_comment(s.as_bytes());
        assert_eq!(h.iter().count(), MAX_HINTS);
        let mut h = Hints::default();
        h.add_comment(b"MODE=ReadWrite");
        assert_eq!(h.get("mode"), Some(&b"ReadWrite"[..]));
    }

    #[test]
    fn pairs_across_comments_in_order_the_last_wins() {
        let mut h = Hints::default();
        assert!(h.is_empty());
        h.add_comment(b"just words");
        assert!(h.is_empty(), "a comment without pairs is no hint");
        h.add_comment(b"mode=READONLY group=a");
        h.add_comment(b"mode=READWRITE");
        assert!(!h.is_empty());
        assert_eq!(h.get("mode"), Some(&b"READWRITE"[..]));
        assert_eq!(h.get("group"), Some(&b"a"[..]));
        assert_eq!(h.get("table"), None);
        let mut same = Hints::default();
        same.add_comment(b"mode=READONLY, group=a mode=READWRITE");
        assert_eq!(h, same, "equal when their pairs are");
        // Pairs beyond the bound are dropped across comments too.
        let mut h = Hints::default();
        h.add_comment(b"a=1 b=2 c=3 d=4 e=5");
        h.add_comment(b"f=6 g=7 h=8 MODE=x");
        assert_eq!(h.iter().count(), MAX_HINTS);
        assert_eq!(h.get("mode"), None);
    }
}
