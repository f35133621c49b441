//! Shard-key values of a statement: from its slots, parameters and
//! literals, as the layout's key type reads them.

use crate::fingerprint::{Lit, Slot, Val};
use crate::layout::KeyType;
use crate::placement::KeyValue;

/// The three columns a merge compares a value by: the value, its
/// `WEIGHT_STRING` and that of it with a space appended (bytes that sort as
/// the server's collation sorts strings, and the weight of a space).
pub(super) fn key_columns(e: &str) -> [String; 3] {
    [
        e.to_string(),
        format!("WEIGHT_STRING({e})"),
        format!("WEIGHT_STRING(CONCAT({e}, ' '))"),
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
        (KeyType::Int, Lit::Int(i)) => Some(OwnedKey::Int(if neg { i.checked_neg()? } else { *i })),
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
        (KeyType::Date | KeyType::DateTime, Lit::Str(s)) if !neg => {
            crate::dates::epoch(std::str::from_utf8(s).ok()?).map(OwnedKey::Int)
        }
        _ => None,
    }
}
