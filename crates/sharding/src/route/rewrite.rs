//! Statements rewritten for groups: values put in, rows split by group.

use sextant_sql::{LexMode, Lexer, TokenKind};

/// A prepared statement's text with each `?` placeholder replaced by its
/// value written as a literal (None: a count that does not match).
pub fn with_values(sql: &[u8], mode: LexMode, literals: &[Vec<u8>]) -> Option<Vec<u8>> {
    let base = sql.as_ptr() as usize;
    let mut out = Vec::with_capacity(sql.len() + literals.iter().map(Vec::len).sum::<usize>());
    let mut at = 0;
    let mut next = literals.iter();
    for t in Lexer::with_mode(sql, mode) {
        if t.kind == TokenKind::Punct && t.text == b"?" {
            let start = t.text.as_ptr() as usize - base;
            out.extend_from_slice(&sql[at..start]);
            out.extend_from_slice(next.next()?);
            at = start + 1;
        }
    }
    if next.next().is_some() {
        return None;
    }
    out.extend_from_slice(&sql[at..]);
    Some(out)
}

/// The part of a statement the parser reads: MySQL's older `LOCK IN
/// SHARE MODE` (the parser knows only `FOR SHARE`) changes nothing of
/// where a statement goes, and is left off.
/// An INSERT's statement for each group: its text up to VALUES, the rows
/// of that group (`groups`: each row's group, in order), and the rest
/// (ON DUPLICATE KEY UPDATE ...). None when the VALUES list does not read
/// as exactly that many rows.
pub fn split_rows(sql: &[u8], mode: LexMode, groups: &[usize]) -> Option<Vec<(usize, Vec<u8>)>> {
    let at = |t: &[u8]| t.as_ptr() as usize - sql.as_ptr() as usize;
    let mut tokens = Lexer::with_mode(sql, mode).peekable();
    let mut depth = 0i32;
    let mut values_end = None;
    for t in tokens.by_ref() {
        match (t.kind, t.text) {
            (TokenKind::Punct, b"(") => depth += 1,
            (TokenKind::Punct, b")") => depth -= 1,
            (TokenKind::Word, w)
                if depth == 0
                    && (w.eq_ignore_ascii_case(b"VALUES") || w.eq_ignore_ascii_case(b"VALUE")) =>
            {
                values_end = Some(at(w) + w.len());
                break;
            }
            _ => {}
        }
    }
    let values_end = values_end?;
    // Each row's bytes: from its '(' to its ')'.
    let mut rows: Vec<(usize, usize)> = Vec::with_capacity(groups.len());
    let mut rest = sql.len();
    loop {
        let open = tokens.next()?;
        if open.kind != TokenKind::Punct || open.text != b"(" {
            return None;
        }
        let start = at(open.text);
        let mut depth = 1;
        let mut end = None;
        for t in tokens.by_ref() {
            match (t.kind, t.text) {
                (TokenKind::Punct, b"(") => depth += 1,
                (TokenKind::Punct, b")") => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(at(t.text) + 1);
                        break;
                    }
                }
                _ => {}
            }
        }
        rows.push((start, end?));
        match tokens.peek() {
            Some(t) if t.kind == TokenKind::Punct && t.text == b"," => {
                tokens.next();
            }
            Some(t) => {
                rest = at(t.text);
                break;
            }
            None => break,
        }
    }
    if rows.len() != groups.len() {
        return None;
    }
    let mut order: Vec<usize> = groups.to_vec();
    order.sort_unstable();
    order.dedup();
    let out = order
        .into_iter()
        .map(|g| {
            let mut q = Vec::with_capacity(sql.len());
            q.extend_from_slice(&sql[..values_end]);
            q.push(b' ');
            let mut first = true;
            for (&(s, e), _) in rows.iter().zip(groups).filter(|(_, rg)| **rg == g) {
                if !first {
                    q.push(b',');
                }
                first = false;
                q.extend_from_slice(&sql[s..e]);
            }
            if rest < sql.len() {
                q.push(b' ');
                q.extend_from_slice(&sql[rest..]);
            }
            (g, q)
        })
        .collect();
    Some(out)
}

pub(super) fn parseable(sql: &[u8]) -> &[u8] {
    const TAIL: &[u8] = b"lock in share mode";
    let t = sql.trim_ascii_end();
    let t = t.strip_suffix(b";").unwrap_or(t).trim_ascii_end();
    match t.len().checked_sub(TAIL.len()) {
        Some(at) if t[at..].eq_ignore_ascii_case(TAIL) => &t[..at],
        _ => sql,
    }
}
