//! MariaDB GTIDs (domain-server-sequence), packed for lock-free comparison:
//! what matters for "has this replica applied that write" is the sequence
//! number within the write's replication domain.

/// A GTID's domain and sequence number in one u64 (domain in the top 16
/// bits, sequence in the low 48). 0 means none.
pub type Packed = u64;

const SEQ_BITS: u32 = 48;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gtid {
    pub domain: u32,
    pub server: u32,
    pub seq: u64,
}

impl Gtid {
    pub fn parse(s: &str) -> Option<Gtid> {
        let mut it = s.trim().splitn(3, '-');
        let domain = it.next()?.parse().ok()?;
        let server = it.next()?.parse().ok()?;
        let seq = it.next()?.parse().ok()?;
        Some(Gtid {
            domain,
            server,
            seq,
        })
    }

    pub fn pack(&self) -> Packed {
        ((self.domain as u64 & 0xffff) << SEQ_BITS) | (self.seq & SEQ_MASK)
    }

    /// For MASTER_GTID_WAIT.
    pub fn to_sql(&self) -> String {
        format!("{}-{}-{}", self.domain, self.server, self.seq)
    }
}

pub fn domain(p: Packed) -> u64 {
    p >> SEQ_BITS
}

pub fn seq(p: Packed) -> u64 {
    p & SEQ_MASK
}

/// Parses a position list like `0-1-100,1-2-7` (gtid_slave_pos).
pub fn parse_list(s: &str) -> impl Iterator<Item = Gtid> + '_ {
    s.split(',').filter_map(Gtid::parse)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
