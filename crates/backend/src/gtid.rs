//! GTIDs, packed for lock-free comparison: what matters for "has this
//! replica applied that write" is the sequence number within the write's
//! replication domain.
//!
//! MariaDB: `domain-server-sequence`. MySQL: `source_uuid:transaction`; the
//! uuid plays the domain's part (folded to 16 bits for the packed form) and
//! a replica's `gtid_executed` interval that starts at 1 gives the highest
//! transaction it certainly has (later, disjoint intervals are ignored: a
//! read may then go to the primary needlessly, never to a stale replica).

/// A GTID's domain and sequence number in one u64 (domain in the top 16
/// bits, sequence in the low 48). 0 means none.
pub type Packed = u64;

const SEQ_BITS: u32 = 48;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Gtid {
    pub domain: u32,
    pub server: u32,
    pub seq: u64,
    /// MySQL: the source's server_uuid; 0 for a MariaDB GTID.
    pub uuid: u128,
}

impl Gtid {
    /// A MariaDB GTID (`0-1-100`) or a MySQL one (`uuid:100`).
    pub fn parse(s: &str) -> Option<Gtid> {
        let s = s.trim();
        if s.contains(':') {
            return Self::parse_mysql(s);
        }
        let mut it = s.splitn(3, '-');
        let domain = it.next()?.parse().ok()?;
        let server = it.next()?.parse().ok()?;
        let seq = it.next()?.parse().ok()?;
        Some(Gtid {
            domain,
            server,
            seq,
            uuid: 0,
        })
    }

    /// `3e11fa47-71ca-11e1-9e33-c80aa9429562:23` (what session_track_gtids
    /// = OWN_GTID reports).
    pub fn parse_mysql(s: &str) -> Option<Gtid> {
        let (uuid, n) = s.trim().rsplit_once(':')?;
        let uuid = parse_uuid(uuid)?;
        Some(Gtid {
            domain: fold(uuid),
            server: 0,
            seq: n.parse().ok()?,
            uuid,
        })
    }

    pub fn is_mysql(&self) -> bool {
        self.uuid != 0
    }

    /// A statement that waits up to `secs` for this GTID to be applied and
    /// returns 0 once it is; its second column is the server's applied
    /// positions after the wait (evaluated after it: a replica that has
    /// applied later writes meanwhile says so, and reads needing those need
    /// no wait of their own).
    pub fn wait_sql(&self, secs: f64) -> String {
        if self.is_mysql() {
            format!(
                "SELECT WAIT_FOR_EXECUTED_GTID_SET('{}:{}', {secs}), @@gtid_executed",
                format_uuid(self.uuid),
                self.seq
            )
        } else {
            format!(
                "SELECT MASTER_GTID_WAIT('{}', {secs}), @@gtid_slave_pos",
                self.to_sql()
            )
        }
    }

    pub fn pack(&self) -> Packed {
        ((self.domain as u64 & 0xffff) << SEQ_BITS) | (self.seq & SEQ_MASK)
    }

    /// For MASTER_GTID_WAIT.
    pub fn to_sql(&self) -> String {
        format!("{}-{}-{}", self.domain, self.server, self.seq)
    }
}

/// The newest write of a set of sessions (a user's, for read_your_writes
/// with scope "user"), shared between threads without a lock. Published
/// as soon as a server reports the write, before its answer reaches the
/// client: a read sent after the client heard of the write must find it
/// here.
#[derive(Default)]
pub struct Newest {
    packed: std::sync::atomic::AtomicU64,
    server: std::sync::atomic::AtomicU32,
    /// MySQL: the source uuid (high, low halves); 0 for MariaDB.
    uuid: [std::sync::atomic::AtomicU64; 2],
}

impl Newest {
    /// Records `g` if it is newer than the write recorded (or of another
    /// domain): sessions may report out of order.
    pub fn publish(&self, g: &Gtid) {
        use std::sync::atomic::Ordering;
        let p = g.pack();
        let newer = self
            .packed
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                let newer = old == 0 || domain(old) != domain(p) || seq(p) > seq(old);
                newer.then_some(p)
            })
            .is_ok();
        if newer {
            // Only the wait statement uses these; a torn set makes that
            // wait time out and the read go to the primary.
            self.server.store(g.server, Ordering::Relaxed);
            self.uuid[0].store((g.uuid >> 64) as u64, Ordering::Relaxed);
            self.uuid[1].store(g.uuid as u64, Ordering::Relaxed);
        }
    }

    /// The newest write recorded, if any.
    pub fn load(&self) -> Option<Gtid> {
        use std::sync::atomic::Ordering;
        let p = self.packed.load(Ordering::Acquire);
        (p != 0).then(|| Gtid {
            domain: domain(p) as u32,
            server: self.server.load(Ordering::Relaxed),
            seq: seq(p),
            uuid: (self.uuid[0].load(Ordering::Relaxed) as u128) << 64
                | self.uuid[1].load(Ordering::Relaxed) as u128,
        })
    }
}

pub fn domain(p: Packed) -> u64 {
    p >> SEQ_BITS
}

pub fn seq(p: Packed) -> u64 {
    p & SEQ_MASK
}

/// Parses a position list: MariaDB's `0-1-100,1-2-7` (gtid_slave_pos) or
/// MySQL's `uuid:1-100:200-300,\nuuid2:1-5` (gtid_executed), one GTID per
/// domain: the highest it certainly contains.
pub fn parse_list(s: &str) -> impl Iterator<Item = Gtid> + '_ {
    s.split(',').filter_map(|e| {
        let e = e.trim();
        match e.split_once(':') {
            None => Gtid::parse(e),
            Some((uuid, intervals)) => {
                let uuid = parse_uuid(uuid)?;
                // The interval that starts at 1: "1-N" or "1".
                let first = intervals.split(':').next()?;
                let end = match first.split_once('-') {
                    Some(("1", end)) => end.parse().ok()?,
                    None if first == "1" => 1,
                    _ => return None,
                };
                Some(Gtid {
                    domain: fold(uuid),
                    server: 0,
                    seq: end,
                    uuid,
                })
            }
        }
    })
}

fn parse_uuid(s: &str) -> Option<u128> {
    let hex: String = s.trim().chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 {
        return None;
    }
    u128::from_str_radix(&hex, 16).ok().filter(|&u| u != 0)
}

fn format_uuid(u: u128) -> String {
    let h = format!("{u:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// A uuid folded to the 16 bits a packed GTID has for its domain.
/// (Two sources of one topology folding alike would make a replica look
/// further along in one of them; a group has a handful of sources.)
fn fold(u: u128) -> u32 {
    let mut x = u;
    let mut f: u32 = 0;
    for _ in 0..8 {
        f ^= (x & 0xffff) as u32;
        x >>= 16;
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_keeps_the_newest_write_of_its_domain() {
        let n = Newest::default();
        assert_eq!(n.load(), None);
        let a = Gtid::parse("0-1-100").unwrap();
        let b = Gtid::parse("0-2-99").unwrap();
        n.publish(&a);
        n.publish(&b);
        assert_eq!(n.load(), Some(a), "an older write reported later loses");
        let c = Gtid::parse("1-3-5").unwrap();
        n.publish(&c);
        assert_eq!(n.load(), Some(c), "another domain: the last one reported");
    }

    #[test]
    fn parse_and_pack() {
        let g = Gtid::parse("0-1-12345").unwrap();
        assert_eq!((g.domain, g.server, g.seq), (0, 1, 12345));
        assert_eq!(seq(g.pack()), 12345);
        assert_eq!(domain(Gtid::parse("7-2-5").unwrap().pack()), 7);
        assert!(Gtid::parse("").is_none());
        assert!(Gtid::parse("0-1").is_none());
        assert!(Gtid::parse("a-b-c").is_none());
        let v: Vec<_> = parse_list("0-1-100,1-2-7")
            .map(|g| (g.domain, g.seq))
            .collect();
        assert_eq!(v, vec![(0, 100), (1, 7)]);
        assert_eq!(g.to_sql(), "0-1-12345");
        assert!(g
            .wait_sql(1.5)
            .starts_with("SELECT MASTER_GTID_WAIT('0-1-12345', 1.5)"));
    }

    #[test]
    fn mysql_gtids_and_gtid_executed() {
        let g = Gtid::parse("3E11FA47-71CA-11E1-9E33-C80AA9429562:23").unwrap();
        assert!(g.is_mysql());
        assert_eq!(g.seq, 23);
        assert_eq!(
            g.wait_sql(2.0),
            "SELECT WAIT_FOR_EXECUTED_GTID_SET('3e11fa47-71ca-11e1-9e33-c80aa9429562:23', 2), @@gtid_executed"
        );
        let set = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-30:35-40,\n\
                   aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee:5-9,\n\
                   11111111-2222-3333-4444-555555555555:1";
        let v: Vec<Gtid> = parse_list(set).collect();
        // The interval from 1 counts; one that does not start at 1 says
        // nothing certain.
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].domain, g.domain);
        assert_eq!(v[0].seq, 30);
        assert_eq!(v[1].seq, 1);
        assert!(seq(v[0].pack()) >= seq(g.pack()));
        assert!(Gtid::parse("nonsense:5").is_none());
        assert!(Gtid::parse("00000000-0000-0000-0000-000000000000:5").is_none());
    }
}
