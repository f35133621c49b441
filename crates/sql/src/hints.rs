//! `/*# key=value ... */` routing hints (Cetus style: `/*#mode=READWRITE*/`,
//! `/*# group="all" */`). Keys are case-insensitive, values may be quoted.

pub const MAX_HINTS: usize = 8;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hints<'a> {
    pairs: [(&'a [u8], &'a [u8]); MAX_HINTS],
    len: usize,
}

impl<'a> Hints<'a> {
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + '_ {
        self.pairs[..self.len].iter().copied()
    }

    /// The value of `key` (case-insensitive); the last one wins.
    pub fn get(&self, key: &str) -> Option<&'a [u8]> {
        self.pairs[..self.len]
            .iter()
            .rev()
            .find(|(k, _)| k.eq_ignore_ascii_case(key.as_bytes()))
            .map(|(_, v)| *v)
    }

    /// Adds the pairs found in one hint comment's text. Text that is not
    /// `key=value` is ignored; pairs beyond [`MAX_HINTS`] are dropped.
    pub fn parse_into(&mut self, text: &'a [u8]) {
        let mut i = 0;
        let n = text.len();
        let skip_sep = |i: &mut usize| {
            while *i < n && (text[*i].is_ascii_whitespace() || text[*i] == b',' || text[*i] == b';')
            {
                *i += 1;
            }
        };
        loop {
            skip_sep(&mut i);
            if i >= n {
                return;
            }
            let ks = i;
            while i < n
                && (text[i].is_ascii_alphanumeric() || matches!(text[i], b'_' | b'-' | b'.'))
            {
                i += 1;
            }
            let key = &text[ks..i];
            while i < n && text[i] == b' ' {
                i += 1;
            }
            if key.is_empty() || i >= n || text[i] != b'=' {
                // Not a pair: a bare word is dropped and the scan goes on
                // from the next word; a stray character is skipped.
                if key.is_empty() {
                    i += 1;
                }
                continue;
            }
            i += 1;
            while i < n && text[i] == b' ' {
                i += 1;
            }
            let value = if i < n && (text[i] == b'"' || text[i] == b'\'') {
                let q = text[i];
                let vs = i + 1;
                i = vs;
                while i < n && text[i] != q {
                    i += 1;
                }
                let v = &text[vs..i];
                i = (i + 1).min(n);
                v
            } else {
                let vs = i;
                while i < n && !text[i].is_ascii_whitespace() && text[i] != b',' && text[i] != b';'
                {
                    i += 1;
                }
                &text[vs..i]
            };
            if self.len < MAX_HINTS {
                self.pairs[self.len] = (key, value);
                self.len += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Vec<(String, String)> {
        let mut h = Hints::default();
        h.parse_into(s.as_bytes());
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
        h.parse_into(s.as_bytes());
        assert_eq!(h.iter().count(), MAX_HINTS);
        let mut h = Hints::default();
        h.parse_into(b"MODE=ReadWrite");
        assert_eq!(h.get("mode"), Some(&b"ReadWrite"[..]));
    }
}
