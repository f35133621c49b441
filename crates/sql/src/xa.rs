//! A client's XA statement read: what it does and to which transaction,
//! so that a session finishes only the XA transactions it started (a
//! server lets any account commit or roll back any prepared one).

use crate::lexer::{string_literal, LexMode, Lexer, Token, TokenKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XaVerb {
    Start,
    End,
    Prepare,
    Commit,
    Rollback,
    Recover,
}

/// An XA statement: its verb and, but for RECOVER, its transaction's id
/// as the server compares it (gtrid, bqual and formatID, each however it
/// was spelt: 'a', X'61' and 0x61 are one id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XaStatement {
    pub verb: XaVerb,
    pub xid: Option<Xid>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xid {
    pub gtrid: Vec<u8>,
    pub bqual: Vec<u8>,
    pub format_id: u64,
}

impl std::fmt::Display for Xid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02X}")).collect::<String>();
        write!(
            f,
            "X'{}',X'{}',{}",
            hex(&self.gtrid),
            hex(&self.bqual),
            self.format_id
        )
    }
}

/// Reads an XA statement; None: not one, or not one sextant can read
/// (the caller refuses what it cannot read).
pub fn xa_statement(sql: &[u8], mode: LexMode) -> Option<XaStatement> {
    let toks: Vec<Token<'_>> = Lexer::with_mode(sql, mode)
        .filter(|t| t.kind != TokenKind::Hint)
        .collect();
    let toks = match toks.last() {
        Some(t) if t.is_punct(b';') => &toks[..toks.len() - 1],
        _ => &toks[..],
    };
    let [xa, verb, rest @ ..] = toks else {
        return None;
    };
    if !xa.is_word("XA") {
        return None;
    }
    let verb = match () {
        _ if verb.is_word("START") || verb.is_word("BEGIN") => XaVerb::Start,
        _ if verb.is_word("END") => XaVerb::End,
        _ if verb.is_word("PREPARE") => XaVerb::Prepare,
        _ if verb.is_word("COMMIT") => XaVerb::Commit,
        _ if verb.is_word("ROLLBACK") => XaVerb::Rollback,
        _ if verb.is_word("RECOVER") => {
            return Some(XaStatement {
                verb: XaVerb::Recover,
                xid: None,
            })
        }
        _ => return None,
    };
    Some(XaStatement {
        verb,
        xid: Some(xid(rest, mode)?),
    })
}

/// `gtrid [, bqual [, formatID]]`, then the statement's own words (JOIN,
/// RESUME, SUSPEND [FOR MIGRATE], ONE PHASE) which are not read.
fn xid(toks: &[Token<'_>], mode: LexMode) -> Option<Xid> {
    let mut parts: Vec<Vec<u8>> = Vec::new();
    let mut format_id = 1u64;
    let mut i = 0;
    loop {
        let (value, used) = component(&toks[i..], parts.len() == 2, mode)?;
        match value {
            Component::Bytes(b) => parts.push(b),
            Component::Format(n) => {
                format_id = n;
                parts.push(Vec::new());
            }
        }
        i += used;
        match toks.get(i) {
            Some(t) if t.is_punct(b',') && parts.len() < 3 => i += 1,
            _ => break,
        }
    }
    let mut parts = parts.into_iter();
    Some(Xid {
        gtrid: parts.next()?,
        bqual: parts.next().unwrap_or_default(),
        format_id,
    })
}

enum Component {
    Bytes(Vec<u8>),
    Format(u64),
}

fn component(toks: &[Token<'_>], format: bool, mode: LexMode) -> Option<(Component, usize)> {
    let t = toks.first()?;
    if format {
        let n = std::str::from_utf8(t.text).ok()?.parse::<u64>().ok()?;
        return Some((Component::Format(n), 1));
    }
    match t.kind {
        TokenKind::Str => Some((
            Component::Bytes(string_literal(t.text, mode).into_owned()),
            1,
        )),
        // X'61'
        TokenKind::Word if t.text.eq_ignore_ascii_case(b"X") => {
            let s = toks.get(1).filter(|s| s.kind == TokenKind::Str)?;
            Some((
                Component::Bytes(unhex(s.text.get(1..s.text.len() - 1)?)?),
                2,
            ))
        }
        // 0x61
        TokenKind::Number | TokenKind::Word
            if t.text.len() > 2 && t.text[..2].eq_ignore_ascii_case(b"0x") =>
        {
            Some((Component::Bytes(unhex(&t.text[2..])?), 1))
        }
        TokenKind::Number => Some((Component::Bytes(t.text.to_vec()), 1)),
        _ => None,
    }
}

fn unhex(h: &[u8]) -> Option<Vec<u8>> {
    if !h.len().is_multiple_of(2) {
        return None;
    }
    h.chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).ok()?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(s: &str) -> Option<XaStatement> {
        xa_statement(s.as_bytes(), LexMode::DEFAULT)
    }

    #[test]
    fn one_id_however_spelt() {
        let a = read("XA START 'a'").unwrap();
        assert_eq!(a.verb, XaVerb::Start);
        let ids = [
            "XA COMMIT 'a'",
            "xa commit X'61'",
            "XA COMMIT 0x61",
            "XA COMMIT 'a', ''",
            "XA COMMIT 'a','',1 ONE PHASE",
            "XA COMMIT \"a\";",
        ];
        for s in ids {
            assert_eq!(read(s).unwrap().xid, a.xid, "{s}");
        }
        let other = ["XA COMMIT 'a','b'", "XA COMMIT 'a','',2", "XA COMMIT 'A'"];
        for s in other {
            assert_ne!(read(s).unwrap().xid, a.xid, "{s}");
        }
        let x = read("XA BEGIN X'73783a01',X'02',21336 JOIN").unwrap();
        assert_eq!(x.verb, XaVerb::Start);
        assert_eq!(x.xid.unwrap().to_string(), "X'73783A01',X'02',21336");
        assert_eq!(
            read("XA RECOVER FORMAT='SQL'").unwrap().verb,
            XaVerb::Recover
        );
        assert_eq!(read("XA END 'a' SUSPEND").unwrap().verb, XaVerb::End);
        assert_eq!(read("SELECT 1"), None);
        assert_eq!(read("XA COMMIT @v"), None);
        assert_eq!(read("XA COMMIT X'6'"), None);
    }
}
