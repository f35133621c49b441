//! Transaction ids. A distributed transaction has one global id (gtrid)
//! and one branch per group (bqual: the group's name); the format id marks
//! the xid as sextant's, and the gtrid names the sextant instance that
//! coordinates it, so that recovery resolves only its own branches and
//! leaves a client's own XA transactions and other instances' alone.

use std::fmt::Write as _;

/// The XA format id of sextant's branches ("SX").
pub const FORMAT: i64 = 0x5358;

/// Longest gtrid and bqual the servers take.
pub const MAX_PART: usize = 64;

/// One branch's xid, as the servers know it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Xid {
    pub format: i64,
    pub gtrid: Vec<u8>,
    pub bqual: Vec<u8>,
}

impl Xid {
    /// The xid as `XA ...` statements take it: hex literals, so that no
    /// byte needs quoting.
    pub fn sql(&self) -> String {
        let mut s = String::with_capacity(2 * (self.gtrid.len() + self.bqual.len()) + 16);
        s.push_str("X'");
        hex(&mut s, &self.gtrid);
        s.push_str("',X'");
        hex(&mut s, &self.bqual);
        let _ = write!(s, "',{}", self.format);
        s
    }

    /// The gtrid as text (sextant's are ASCII).
    pub fn gtrid_text(&self) -> String {
        String::from_utf8_lossy(&self.gtrid).into_owned()
    }

    pub fn bqual_text(&self) -> String {
        String::from_utf8_lossy(&self.bqual).into_owned()
    }

    /// A row of `XA RECOVER`: formatID, gtrid_length, bqual_length, data
    /// (the gtrid's bytes followed by the bqual's).
    pub fn from_recover_row(
        format: &str,
        gtrid_len: &str,
        bqual_len: &str,
        data: &[u8],
    ) -> Option<Xid> {
        let format = format.trim().parse::<i64>().ok()?;
        let g = gtrid_len.trim().parse::<usize>().ok()?;
        let b = bqual_len.trim().parse::<usize>().ok()?;
        if data.len() != g + b {
            return None;
        }
        Some(Xid {
            format,
            gtrid: data[..g].to_vec(),
            bqual: data[g..].to_vec(),
        })
    }
}

fn hex(s: &mut String, b: &[u8]) {
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
}

/// Whether `id` may name a sextant instance in gtrids: 1 to 32 of
/// `[A-Za-z0-9_.-]`.
pub fn valid_instance(id: &str) -> bool {
    (1..=32).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// The default instance id: the proxy's listen address with what a gtrid
/// may not hold replaced, so that two sextants on one host differ.
pub fn instance_from_listen(listen: &str) -> String {
    let mut id: String = listen
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '.' | '-' => c,
            _ => '-',
        })
        .collect();
    id.truncate(32);
    if id.is_empty() {
        id.push_str("sextant");
    }
    id
}

/// Makes the gtrids of one sextant instance: `sx:<instance>:<boot>:<seq>`,
/// `boot` the start time in milliseconds (so ids never repeat across
/// restarts), `seq` counting up.
#[derive(Debug)]
pub struct Ids {
    prefix: String,
    seq: std::sync::atomic::AtomicU64,
}

impl Ids {
    pub fn new(instance: &str, boot_ms: u64) -> Ids {
        Ids {
            prefix: format!("{}{boot_ms:x}:", owner_prefix(instance)),
            seq: std::sync::atomic::AtomicU64::new(1),
        }
    }

    /// A new gtrid.
    pub fn next(&self) -> String {
        let n = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut s = String::with_capacity(self.prefix.len() + 16);
        s.push_str(&self.prefix);
        let _ = write!(s, "{n:x}");
        s
    }
}

/// What every gtrid of `instance` starts with.
pub fn owner_prefix(instance: &str) -> String {
    format!("sx:{instance}:")
}

/// The branch of `gtrid` in a group: the group's name as bqual when it
/// fits, else its index.
pub fn branch(gtrid: &str, group: &str, index: usize) -> Xid {
    let bqual = match group.len() <= MAX_PART {
        true => group.as_bytes().to_vec(),
        false => format!("g{index}").into_bytes(),
    };
    Xid {
        format: FORMAT,
        gtrid: gtrid.as_bytes().to_vec(),
        bqual,
    }
}

/// A group, by name and index, as a branch names it.
#[derive(Debug, Clone, Copy)]
pub struct GroupRef<'a> {
    pub name: &'a str,
    pub index: usize,
}

/// The branch of `gtrid` in `group` when `decider` holds the
/// transaction's decision: `<group>@<decider>` (by index, `g3@g0`, when
/// the names do not fit), so that whoever finds the branch prepared knows
/// where its decision is. The decider's own branch names itself
/// (`data1@data1`). ([`branch`], naming no decider, is how earlier
/// versions named the decider's branch, which was never prepared.)
pub fn branch_deciding(gtrid: &str, group: GroupRef<'_>, decider: GroupRef<'_>) -> Xid {
    let named = format!("{}@{}", group.name, decider.name);
    let bqual = match named.len() <= MAX_PART {
        true => named.into_bytes(),
        false => format!("g{}@g{}", group.index, decider.index).into_bytes(),
    };
    Xid {
        format: FORMAT,
        gtrid: gtrid.as_bytes().to_vec(),
        bqual,
    }
}

impl Xid {
    /// Where this branch's decision is, for a branch found prepared in
    /// `own` among `groups` (names by index).
    pub fn decider(&self, own: GroupRef<'_>, groups: &[&str]) -> Decider {
        let Ok(b) = std::str::from_utf8(&self.bqual) else {
            return Decider::Log;
        };
        let index = format!("g{}", own.index);
        let rest = [own.name, index.as_str()]
            .into_iter()
            .find_map(|p| b.strip_prefix(p).and_then(|r| r.strip_prefix('@')));
        let Some(rest) = rest else {
            return Decider::Log;
        };
        if let Some(i) = groups.iter().position(|g| *g == rest) {
            return Decider::Group(i);
        }
        match rest.strip_prefix('g').and_then(|n| n.parse::<usize>().ok()) {
            Some(i) if i < groups.len() => Decider::Group(i),
            _ => Decider::Missing,
        }
    }
}

/// Where a prepared branch's decision is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decider {
    /// In the decider group's `sextant.xa_decision` (its index).
    Group(usize),
    /// In the owner's decision log (a branch whose bqual names only its
    /// own group, from before decisions were kept with the data).
    Log,
    /// In a group that is no longer configured: nobody can tell.
    Missing,
}

/// The instance a gtrid of sextant's names (`sx:<instance>:...`).
pub fn owner_of(gtrid: &[u8]) -> Option<&str> {
    let g = std::str::from_utf8(gtrid).ok()?;
    let rest = g.strip_prefix("sx:")?;
    let (id, _) = rest.split_once(':')?;
    valid_instance(id).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_form_is_hex_and_format() {
        let x = branch("sx:a:1:2", "g1", 0);
        assert_eq!(x.sql(), "X'73783a613a313a32',X'6731',21336");
    }

    #[test]
    fn recover_row_splits_data_by_lengths() {
        let x = Xid::from_recover_row("21336", "8", "2", b"sx:a:1:2g1").unwrap();
        assert_eq!(x, branch("sx:a:1:2", "g1", 0));
        assert!(Xid::from_recover_row("1", "3", "3", b"abcde").is_none());
        assert!(Xid::from_recover_row("x", "1", "0", b"a").is_none());
    }

    #[test]
    fn ids_are_unique_prefixed_and_fit() {
        // Boot stamps stay below 2^44 ms until the year 2527.
        let ids = Ids::new(&"i".repeat(32), (1 << 44) - 1);
        let a = ids.next();
        let b = ids.next();
        assert_ne!(a, b);
        assert!(a.starts_with(&owner_prefix(&"i".repeat(32))));
        // The longest instance and boot stamp still leave room for any
        // sequence (16 hex digits) within the servers' 64 bytes.
        assert!(a.len() - 1 + 16 <= MAX_PART, "{a}");
    }

    #[test]
    fn instance_ids() {
        assert!(valid_instance("127.0.0.1-6033"));
        assert!(!valid_instance(""));
        assert!(!valid_instance("a:b"));
        assert!(!valid_instance(&"x".repeat(33)));
        assert_eq!(instance_from_listen("127.0.0.1:6033"), "127.0.0.1-6033");
        assert!(valid_instance(&instance_from_listen("[::1]:6033")));
    }

    #[test]
    fn a_prepared_branch_names_the_group_holding_its_decision() {
        let groups = ["data1", "data2", "data3"];
        let own = GroupRef {
            name: "data3",
            index: 2,
        };
        let d = GroupRef {
            name: "data1",
            index: 0,
        };
        let x = branch_deciding("sx:a:1:2", own, d);
        assert_eq!(x.bqual, b"data3@data1");
        assert_eq!(x.decider(own, &groups), Decider::Group(0));
        // The decision log's branches name no decider.
        assert_eq!(
            branch("sx:a:1:2", "data3", 2).decider(own, &groups),
            Decider::Log
        );
        // Names too long for the bqual: indexes.
        let long = "n".repeat(40);
        let (own, d) = (
            GroupRef {
                name: &long,
                index: 2,
            },
            GroupRef {
                name: &long,
                index: 0,
            },
        );
        let x = branch_deciding("g", own, d);
        assert_eq!(x.bqual, b"g2@g0");
        assert_eq!(x.decider(own, &groups), Decider::Group(0));
        // A decider no longer configured is not guessed.
        let gone = branch_deciding(
            "g",
            GroupRef {
                name: "data3",
                index: 2,
            },
            GroupRef {
                name: "old",
                index: 7,
            },
        );
        assert_eq!(
            gone.decider(
                GroupRef {
                    name: "data3",
                    index: 2
                },
                &groups
            ),
            Decider::Missing
        );
    }

    #[test]
    fn the_owner_is_read_from_the_gtrid() {
        assert_eq!(owner_of(b"sx:host-1a2b:18f:3"), Some("host-1a2b"));
        assert_eq!(owner_of(b"client-xa"), None);
        assert_eq!(owner_of(b"sx:bad id:1:2"), None);
    }

    #[test]
    fn long_group_names_use_the_index() {
        let x = branch("g", &"n".repeat(65), 3);
        assert_eq!(x.bqual, b"g3");
    }
}
