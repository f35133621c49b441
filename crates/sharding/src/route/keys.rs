//! Shard-key values of a statement: from its slots, parameters and
//! literals, as the layout's key type reads them.

use crate::fingerprint::{Lit, Slot, Val};
use crate::layout::KeyType;
use crate::placement::KeyValue;

/// The three columns a merge compares a value by: the value, its
/// `WEIGHT_STRING` and that of it with a space appended (bytes that sort as
/// the server's collation sorts strings, and the weight of a space). In a
/// NO PAD collation ('abc' < 'abc ') the third is the second again, a
/// space weighing nothing to add: the server says which by comparing the
/// value with itself and a space, in the value's own collation (the
/// column definitions name the results' character set, not it).
pub(super) fn key_columns(e: &str) -> [String; 3] {
    [
        e.to_string(),
        format!("WEIGHT_STRING({e})"),
        format!("IF(CONCAT({e}) = CONCAT({e}, ' '), WEIGHT_STRING(CONCAT({e}, ' ')), WEIGHT_STRING({e}))"),
    ]
}

/// A HAVING value as a number written out (an integer; sextant reads no
/// other literal there).
pub(super) fn literal_number(v: &Val, slots: &[Slot<'_>], params: &[Lit<'_>]) -> Option<Vec<u8>> {
    match key_value(v, slots, params, KeyType::Int)? {
        OwnedKey::Int(i) => Some(i.to_string().into_bytes()),
        _ => None,
    }
}

/// A key value owned (a string's bytes may come from an unescaped
/// literal or a parameter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnedKey {
    Int(i64),
    Str(Vec<u8>),
    /// NULL: equal to nothing, in no group.
    Null,
}

impl OwnedKey {
    pub(super) fn as_key(&self) -> Option<KeyValue<'_>> {
        match self {
            OwnedKey::Int(i) => Some(KeyValue::Int(*i)),
            OwnedKey::Str(s) => Some(KeyValue::Str(s)),
            OwnedKey::Null => None,
        }
    }
}

/// A statement value read as a key of type `kt`, as the server would
/// compare it with the column: None when sextant cannot tell.
/// A LIMIT's count or offset: a non-negative integer up to 2^64 - 1.
pub(super) fn count_value(v: &Val, slots: &[Slot<'_>], params: &[Lit<'_>]) -> Option<u64> {
    let lit = match v {
        Val::Slot(i) => match slots.get(*i as usize)? {
            Slot::Lit(l) => l,
            Slot::Param(n) => params.get(*n as usize)?,
        },
        Val::Lit(l) => l,
        Val::Neg(_) => return None,
    };
    match lit {
        Lit::Int(i) => u64::try_from(*i).ok(),
        Lit::Big(u) => Some(*u),
        _ => None,
    }
}

pub(super) fn key_value(
    v: &Val,
    slots: &[Slot<'_>],
    params: &[Lit<'_>],
    kt: KeyType,
) -> Option<OwnedKey> {
    let (lit, neg) = match v {
        Val::Slot(i) | Val::Neg(i) => {
            let lit = match slots.get(*i as usize)? {
                Slot::Lit(l) => l,
                Slot::Param(n) => params.get(*n as usize)?,
            };
            (lit, matches!(v, Val::Neg(_)))
        }
        Val::Lit(l) => (l, false),
    };
    match (kt, lit) {
        (_, Lit::Null) => Some(OwnedKey::Null),
        (KeyType::Int, Lit::Int(_) | Lit::Big(_)) => match (neg, lit.negated(), lit) {
            (true, Lit::Int(n), _) => Some(OwnedKey::Int(n)),
            (false, _, Lit::Int(i)) => Some(OwnedKey::Int(*i)),
            _ => None,
        },
        (KeyType::Int, Lit::Str(s)) if !neg => {
            // '42' compares with an integer column as 42.
            let s = std::str::from_utf8(s).ok()?.trim();
            s.parse::<i64>().ok().map(OwnedKey::Int)
        }
        (KeyType::Str, Lit::Str(s)) if !neg => Some(OwnedKey::Str(s.to_vec())),
        (KeyType::Str, Lit::Int(i)) => {
            let i = if neg { i.checked_neg()? } else { *i };
            Some(OwnedKey::Str(i.to_string().into_bytes()))
        }
        (KeyType::Str, Lit::Big(u)) if !neg => Some(OwnedKey::Str(u.to_string().into_bytes())),
        (KeyType::Date | KeyType::DateTime, Lit::Str(s)) if !neg => {
            crate::dates::epoch(std::str::from_utf8(s).ok()?).map(OwnedKey::Int)
        }
        _ => None,
    }
}
