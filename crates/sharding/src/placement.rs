//! Which group holds a shard-key value, computed as Cetus computes it, so
//! that data Cetus laid out is found where Cetus put it: an integer's slot
//! is the value modulo the vdb's slot count (never negative); a string's is
//! Cetus's string hash modulo the slot count; a range vdb holds a value in
//! the partition whose bounds enclose it, (lower, upper].

use crate::layout::{Method, Partition, Vdb};

/// A shard-key value as the statement gave it. Dates and datetimes are
/// given as seconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyValue<'a> {
    Int(i64),
    Str(&'a [u8]),
}

/// Cetus's string hash: the first eight bytes (and, for longer strings,
/// the last eight) folded four bits at a time, then mixed.
pub fn cetus_str_hash(s: &[u8]) -> u32 {
    let fold = |bytes: &[u8]| {
        bytes
            .iter()
            .fold(0u32, |h, &b| h.wrapping_shl(4).wrapping_add(b as u32))
    };
    let head = fold(&s[..s.len().min(8)]);
    let h = if s.len() > 8 {
        head ^ fold(&s[s.len() - 8..])
    } else {
        head
    };
    let h = h ^ ((h >> 20) ^ (h >> 12));
    h ^ ((h >> 7) ^ (h >> 4))
}

/// The slot of a value in a hash vdb of `num` slots.
pub fn slot(value: KeyValue<'_>, num: u32) -> u32 {
    let n = num.max(1) as i64;
    let v = match value {
        KeyValue::Int(i) => i,
        KeyValue::Str(s) => cetus_str_hash(s) as i64,
    };
    v.rem_euclid(n) as u32
}

/// The group that holds `value` in `vdb` (None: no partition does).
pub fn group_of<'v>(vdb: &'v Vdb, value: KeyValue<'_>) -> Option<&'v str> {
    match vdb.method {
        Method::Hash => {
            let s = slot(value, vdb.num);
            vdb.partitions.iter().find_map(|p| match p {
                Partition::Hash { group, slots } if slots.contains(&s) => Some(group.as_str()),
                _ => None,
            })
        }
        // Partitions are sorted by upper bound: the first whose bound is
        // at or above the value holds it.
        Method::Range => vdb.partitions.iter().find_map(|p| match (p, value) {
            (Partition::RangeInt { group, upper }, KeyValue::Int(v)) => {
                upper.is_none_or(|u| v <= u).then_some(group.as_str())
            }
            (Partition::RangeStr { group, upper }, KeyValue::Str(v)) => upper
                .as_deref()
                .is_none_or(|u| v <= u.as_bytes())
                .then_some(group.as_str()),
            _ => None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::KeyType;

    #[test]
    fn string_hash() {
        // "a": 0x61, mixed: 0x61 ^ (0x61 >> 7 ^ 0x61 >> 4) = 0x61 ^ 0x6 = 0x67.
        assert_eq!(cetus_str_hash(b"a"), 0x67);
        assert_eq!(cetus_str_hash(b""), 0);
        // Up to eight bytes only the head counts; beyond, the last eight
        // are folded in too.
        let head = |s: &[u8]| {
            s.iter()
                .fold(0u32, |h, &b| h.wrapping_shl(4).wrapping_add(b as u32))
        };
        let mix = |h: u32| {
            let h = h ^ ((h >> 20) ^ (h >> 12));
            h ^ ((h >> 7) ^ (h >> 4))
        };
        assert_eq!(cetus_str_hash(b"abcdefgh"), mix(head(b"abcdefgh")));
        assert_eq!(
            cetus_str_hash(b"abcdefghij"),
            mix(head(b"abcdefgh") ^ head(b"cdefghij"))
        );
    }

    #[test]
    fn slots_never_negative() {
        assert_eq!(slot(KeyValue::Int(10), 4), 2);
        assert_eq!(slot(KeyValue::Int(-1), 4), 3);
        assert_eq!(
            slot(KeyValue::Int(i64::MIN), 7),
            i64::MIN.rem_euclid(7) as u32
        );
        assert_eq!(slot(KeyValue::Str(b"a"), 4), 0x67 % 4);
    }

    #[test]
    fn groups_of_values() {
        let hash = Vdb {
            id: 1,
            key_type: KeyType::Int,
            method: Method::Hash,
            num: 4,
            partitions: (0..4)
                .map(|i| Partition::Hash {
                    group: format!("data{}", i + 1),
                    slots: vec![i],
                })
                .collect(),
        };
        assert_eq!(group_of(&hash, KeyValue::Int(5)), Some("data2"));
        assert_eq!(group_of(&hash, KeyValue::Int(-5)), Some("data4"));
        let range = Vdb {
            id: 2,
            key_type: KeyType::Int,
            method: Method::Range,
            num: 0,
            partitions: vec![
                Partition::RangeInt {
                    group: "a".into(),
                    upper: Some(100),
                },
                Partition::RangeInt {
                    group: "b".into(),
                    upper: Some(200),
                },
                Partition::RangeInt {
                    group: "c".into(),
                    upper: None,
                },
            ],
        };
        assert_eq!(group_of(&range, KeyValue::Int(-7)), Some("a"));
        assert_eq!(group_of(&range, KeyValue::Int(100)), Some("a"));
        assert_eq!(group_of(&range, KeyValue::Int(101)), Some("b"));
        assert_eq!(group_of(&range, KeyValue::Int(1 << 40)), Some("c"));
        assert_eq!(group_of(&range, KeyValue::Str(b"x")), None);
    }
}
