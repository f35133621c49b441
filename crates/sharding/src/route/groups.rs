//! Which groups hold a vdb's rows for given shard-key values.

use super::keys::OwnedKey;
use super::Router;
use crate::analyze::{GroupSet, Keys};
use crate::fingerprint::Val;
use crate::layout::{KeyType, Method, Partition, Vdb};
use crate::placement::group_of;
use std::sync::atomic::Ordering;

impl Router {
    /// One of `set`, taking turns (spreads reads of global tables).
    pub fn pick(&self, set: GroupSet) -> Option<usize> {
        let n = set.len() as u64;
        if n == 0 {
            return None;
        }
        let k = self.turn.fetch_add(1, Ordering::Relaxed) % n;
        set.iter().nth(k as usize)
    }

    pub(super) fn names_of(&self, set: GroupSet) -> String {
        set.iter()
            .map(|i| self.group_name(i))
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub(super) fn vdb_groups(&self, vdb: &Vdb) -> GroupSet {
        let mut set = GroupSet::default();
        for p in &vdb.partitions {
            if let Some(i) = self.layout.group_index(p.group()) {
                set = set.union(GroupSet::one(i));
            }
        }
        set
    }

    pub(super) fn groups_of_value(&self, vdb: &Vdb, v: Option<OwnedKey>) -> GroupSet {
        let Some(v) = v else {
            return self.vdb_groups(vdb);
        };
        let Some(kv) = v.as_key() else {
            return GroupSet::default();
        };
        match group_of(vdb, kv).and_then(|g| self.layout.group_index(g)) {
            Some(i) => GroupSet::one(i),
            None => self.vdb_groups(vdb),
        }
    }

    pub(super) fn keys_groups(
        &self,
        vdb: &Vdb,
        keys: &Keys,
        value: &dyn Fn(&Val, KeyType) -> Option<OwnedKey>,
    ) -> GroupSet {
        match keys {
            Keys::Any => self.vdb_groups(vdb),
            Keys::In(vals) => vals.iter().fold(GroupSet::default(), |s, v| {
                s.union(self.groups_of_value(vdb, value(v, vdb.key_type)))
            }),
            Keys::And(ks) => ks.iter().fold(self.vdb_groups(vdb), |s, k| {
                s.intersect(self.keys_groups(vdb, k, value))
            }),
            Keys::Or(ks) => ks.iter().fold(GroupSet::default(), |s, k| {
                s.union(self.keys_groups(vdb, k, value))
            }),
            Keys::Range { lo, hi } => {
                // An integer bound that excludes itself is the next one in.
                let bound = |b: &Option<(Val, bool)>, step: i64| match b {
                    Some((v, incl)) => match value(v, vdb.key_type) {
                        Some(OwnedKey::Int(i)) if !incl => {
                            i.checked_add(step).map(OwnedKey::Int).map(Some).ok_or(())
                        }
                        Some(k) => Ok(Some(k)),
                        None => Err(()),
                    },
                    None => Ok(None),
                };
                let (Ok(lo), Ok(hi)) = (bound(lo, 1), bound(hi, -1)) else {
                    return self.vdb_groups(vdb);
                };
                if matches!(lo, Some(OwnedKey::Null)) || matches!(hi, Some(OwnedKey::Null)) {
                    return GroupSet::default();
                }
                match (vdb.method, &lo, &hi) {
                    (Method::Range, _, _) => self.range_groups(vdb, lo, hi),
                    // A short run of integers: each one's group.
                    (Method::Hash, Some(OwnedKey::Int(l)), Some(OwnedKey::Int(h)))
                        if h.checked_sub(*l).is_some_and(|n| n < vdb.num as i64) =>
                    {
                        (*l..=*h).fold(GroupSet::default(), |s, i| {
                            s.union(self.groups_of_value(vdb, Some(OwnedKey::Int(i))))
                        })
                    }
                    (Method::Hash, _, _) => self.vdb_groups(vdb),
                }
            }
        }
    }

    /// The groups of a range vdb holding values in [lo, hi] (bounds
    /// taken inclusive: a group too many is visited, never one too few).
    pub(super) fn range_groups(
        &self,
        vdb: &Vdb,
        lo: Option<OwnedKey>,
        hi: Option<OwnedKey>,
    ) -> GroupSet {
        let mut set = GroupSet::default();
        let mut add = |g: &str| {
            if let Some(i) = self.layout.group_index(g) {
                set = set.union(GroupSet::one(i));
            }
        };
        let mut prev_int: Option<i64> = None;
        let mut prev_str: Option<&str> = None;
        for p in &vdb.partitions {
            match p {
                Partition::RangeInt { group, upper } => {
                    let (lo, hi) = match (&lo, &hi) {
                        (Some(OwnedKey::Str(_)), _) | (_, Some(OwnedKey::Str(_))) => {
                            return self.vdb_groups(vdb)
                        }
                        (l, h) => (
                            l.as_ref().and_then(|k| match k {
                                OwnedKey::Int(i) => Some(*i),
                                _ => None,
                            }),
                            h.as_ref().and_then(|k| match k {
                                OwnedKey::Int(i) => Some(*i),
                                _ => None,
                            }),
                        ),
                    };
                    // (prev, upper] meets [lo, hi]
                    let above_prev = hi.is_none_or(|h| prev_int.is_none_or(|p| h > p));
                    let below_upper = lo.is_none_or(|l| upper.is_none_or(|u| l <= u));
                    if above_prev && below_upper {
                        add(group);
                    }
                    prev_int = *upper;
                }
                Partition::RangeStr { group, upper } => {
                    let (lo, hi) = match (&lo, &hi) {
                        (Some(OwnedKey::Int(_)), _) | (_, Some(OwnedKey::Int(_))) => {
                            return self.vdb_groups(vdb)
                        }
                        (l, h) => (
                            l.as_ref().and_then(|k| match k {
                                OwnedKey::Str(s) => Some(s.as_slice()),
                                _ => None,
                            }),
                            h.as_ref().and_then(|k| match k {
                                OwnedKey::Str(s) => Some(s.as_slice()),
                                _ => None,
                            }),
                        ),
                    };
                    let above_prev = hi.is_none_or(|h| prev_str.is_none_or(|p| h > p.as_bytes()));
                    let below_upper =
                        lo.is_none_or(|l| upper.as_deref().is_none_or(|u| l <= u.as_bytes()));
                    if above_prev && below_upper {
                        add(group);
                    }
                    prev_str = upper.as_deref();
                }
                Partition::Hash { .. } => return self.vdb_groups(vdb),
            }
        }
        set
    }
}
