//! MySQL GTID sets (`uuid:1-5:7,uuid2:1-3`, as `@@gtid_executed` and
//! SHOW REPLICA STATUS print them) and the set arithmetic a failover
//! decision needs: whether one server holds all another holds, what it
//! holds beyond, and how much it holds. MariaDB positions (one GTID per
//! domain) are compared in `failover.rs`; these are MySQL's.
//!
//! Written here rather than taken from a crate: no maintained crate
//! parses MySQL GTID sets, and the four operations below are all that is
//! needed.

use std::collections::BTreeMap;
use std::fmt;

/// A set of GTIDs: per source UUID (lowercase, as MySQL prints it), its
/// transaction numbers as sorted, disjoint, non-adjacent closed intervals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GtidSet {
    sets: BTreeMap<String, Vec<(u64, u64)>>,
}

impl GtidSet {
    /// Parses MySQL's text form; None when it is not one (an empty
    /// string is the empty set). Whitespace and newlines between parts,
    /// as SHOW REPLICA STATUS prints them, are allowed; a tag (MySQL
    /// 8.4's `uuid:tag:1-5`) is kept as part of the source's name.
    pub fn parse(s: &str) -> Option<GtidSet> {
        let mut out = GtidSet::default();
        for part in s.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let mut fields = part.split(':');
            let uuid = fields.next()?.trim().to_ascii_lowercase();
            if uuid.len() != 36 || !uuid.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
                return None;
            }
            let mut name = uuid;
            for f in fields {
                let f = f.trim();
                let (a, b) = match f.split_once('-') {
                    Some((a, b)) => (a.parse::<u64>(), b.parse::<u64>()),
                    None => (f.parse::<u64>(), f.parse::<u64>()),
                };
                match (a, b) {
                    (Ok(a), Ok(b)) if a >= 1 && a <= b => out.add(&name, a, b),
                    // A tag: what follows belongs to `uuid:tag`.
                    _ if f.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                        && !f.is_empty() =>
                    {
                        name = format!(
                            "{}:{}",
                            name.split(':').next().unwrap_or_default(),
                            f.to_ascii_lowercase()
                        );
                    }
                    _ => return None,
                }
            }
        }
        Some(out)
    }

    /// Adds the interval `a..=b` of `source`.
    fn add(&mut self, source: &str, a: u64, b: u64) {
        let v = self.sets.entry(source.to_string()).or_default();
        v.push((a, b));
        v.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(v.len());
        for &(a, b) in v.iter() {
            match merged.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        *v = merged;
    }

    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }

    /// How many transactions it holds.
    pub fn count(&self) -> u64 {
        self.sets
            .values()
            .flat_map(|v| v.iter())
            .map(|(a, b)| b - a + 1)
            .sum()
    }

    /// Everything in `self` or `other`.
    pub fn union(&self, other: &GtidSet) -> GtidSet {
        let mut out = self.clone();
        for (s, v) in &other.sets {
            for &(a, b) in v {
                out.add(s, a, b);
            }
        }
        out
    }

    /// What `self` holds that `other` does not.
    pub fn minus(&self, other: &GtidSet) -> GtidSet {
        let mut out = GtidSet::default();
        for (s, v) in &self.sets {
            let holes = other.sets.get(s).map_or(&[][..], |v| &v[..]);
            for &(a, b) in v {
                let mut from = a;
                for &(ha, hb) in holes {
                    if hb < from || ha > b {
                        continue;
                    }
                    if ha > from {
                        out.add(s, from, ha - 1);
                    }
                    from = hb.saturating_add(1);
                    if from > b {
                        break;
                    }
                }
                if from <= b {
                    out.add(s, from, b);
                }
            }
        }
        out
    }

    /// `self` without the transactions of source `uuid`.
    pub fn without(&self, uuid: &str) -> GtidSet {
        let mut out = self.clone();
        out.sets.remove(&uuid.to_ascii_lowercase());
        out
    }

    /// Whether `self` holds every transaction of `other`.
    pub fn contains(&self, other: &GtidSet) -> bool {
        other.minus(self).is_empty()
    }
}

impl fmt::Display for GtidSet {
    /// MySQL's text form (what WAIT_FOR_EXECUTED_GTID_SET takes).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (s, v) in &self.sets {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            f.write_str(s)?;
            for &(a, b) in v {
                match a == b {
                    true => write!(f, ":{a}")?,
                    false => write!(f, ":{a}-{b}")?,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const B: &str = "4f22ab58-82db-22f2-af44-d91bb0530673";

    fn set(s: &str) -> GtidSet {
        GtidSet::parse(s).unwrap_or_else(|| panic!("not a GTID set: {s}"))
    }

    #[test]
    fn parses_merges_and_prints() {
        let s = set(&format!("{A}:1-5:7:6,\n{B}:3"));
        assert_eq!(s.to_string(), format!("{A}:1-7,{B}:3"));
        assert_eq!(s.count(), 8);
        assert!(set("").is_empty());
        assert_eq!(
            set(&format!("{}:1-2", A.to_uppercase())).to_string(),
            format!("{A}:1-2")
        );
        for bad in [
            "x:1-2",
            &format!("{A}:0-2"),
            &format!("{A}:5-2"),
            &format!("{A}:1-"),
        ] {
            assert_eq!(GtidSet::parse(bad), None, "{bad}");
        }
        let tagged = set(&format!("{A}:1-3:big:1-2"));
        assert_eq!(tagged.count(), 5);
        assert_eq!(tagged.to_string(), format!("{A}:1-3,{A}:big:1-2"));
    }

    #[test]
    fn set_arithmetic() {
        // (left, right, left minus right)
        let cases = [
            (
                format!("{A}:1-10"),
                format!("{A}:3-4:8"),
                format!("{A}:1-2:5-7:9-10"),
            ),
            (format!("{A}:1-10"), format!("{A}:1-10"), String::new()),
            (
                format!("{A}:1-10"),
                format!("{A}:1-20,{B}:1"),
                String::new(),
            ),
            (
                format!("{A}:5-6,{B}:1-3"),
                format!("{A}:1-5"),
                format!("{A}:6,{B}:1-3"),
            ),
            (format!("{A}:1-3"), String::new(), format!("{A}:1-3")),
        ];
        for (l, r, want) in cases {
            let (l, r) = (set(&l), set(&r));
            assert_eq!(l.minus(&r).to_string(), want, "{l} minus {r}");
            assert_eq!(r.contains(&l), want.is_empty(), "{r} contains {l}");
            let u = l.union(&r);
            assert!(u.contains(&l) && u.contains(&r));
            assert_eq!(u.count(), r.count() + l.minus(&r).count());
        }
    }
}
