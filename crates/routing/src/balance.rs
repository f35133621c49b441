//! Which server of a role takes a read: the balance modes, each a pure
//! function of the servers' weights and load and the session's own cursor.

use crate::Cursor;
use sextant_config::Balance;

/// A server's load as seen by the balancer; None when it cannot be used.
#[derive(Debug, Clone, Copy, Default)]
pub struct Load {
    pub outstanding: u32,
    /// Moving average of response time in microseconds (0 = no sample yet).
    pub latency_us: u64,
}

/// Picks a server for a read among `weights.len()` candidates.
pub fn pick(
    balance: Balance,
    weights: &[u32],
    load: impl Fn(usize) -> Option<Load>,
    cur: &mut Cursor,
    random: u64,
) -> Option<usize> {
    // A server of weight 0 takes no reads.
    let load = |i: usize| load(i).filter(|_| weights[i] > 0);
    let n = weights.len();
    if n == 0 {
        return None;
    }
    match balance {
        Balance::RoundRobin => pick_weighted(weights, |i| load(i).is_some(), &mut cur.rr),
        Balance::Weighted => {
            let total: u64 = (0..n)
                .filter(|&i| load(i).is_some())
                .map(|i| weights[i] as u64)
                .sum();
            if total == 0 {
                return None;
            }
            let mut r = random % total;
            (0..n).filter(|&i| load(i).is_some()).find(|&i| {
                if r < weights[i] as u64 {
                    true
                } else {
                    r -= weights[i] as u64;
                    false
                }
            })
        }
        Balance::LeastLatency if cur.rr % 8 == 7 => {
            // One pick in eight explores in turn, so a server that was slow
            // once gets new samples instead of being shunned for good.
            pick_weighted(weights, |i| load(i).is_some(), &mut cur.rr)
        }
        Balance::LeastOutstanding | Balance::LeastLatency => {
            // Scan from a rotating start so ties spread out.
            let start = (cur.rr % n as u64) as usize;
            cur.rr = cur.rr.wrapping_add(1);
            let mut best: Option<(usize, u128)> = None;
            for k in 0..n {
                let i = (start + k) % n;
                let Some(l) = load(i) else { continue };
                let w = weights[i].max(1) as u128;
                // Cost per unit of weight, compared without division.
                let cost = match balance {
                    Balance::LeastOutstanding => (l.outstanding as u128 + 1) * 1_000_000 / w,
                    // Latency scaled by the queue it would join, so that
                    // concurrent reads do not all pile onto the fastest.
                    _ => l.latency_us as u128 * (l.outstanding as u128 + 1) * 1_000 / w,
                };
                if best.is_none_or(|(_, c)| cost < c) {
                    best = Some((i, cost));
                }
            }
            best.map(|(i, _)| i)
        }
    }
}

/// Weighted round robin over servers, with a cursor owned by the caller
/// (one per session), so picking takes no shared lock and no atomic.
/// `weights[i]` is server i's weight; `usable(i)` says whether it may be
/// used now. Returns None when no server is usable.
pub fn pick_weighted(
    weights: &[u32],
    usable: impl Fn(usize) -> bool,
    cursor: &mut u64,
) -> Option<usize> {
    let total: u64 = weights.iter().map(|&w| w as u64).sum();
    if total == 0 {
        return None;
    }
    for _ in 0..weights.len() {
        let mut slot = *cursor % total;
        *cursor = cursor.wrapping_add(1);
        for (i, &w) in weights.iter().enumerate() {
            if slot < w as u64 {
                if usable(i) {
                    return Some(i);
                }
                break;
            }
            slot -= w as u64;
        }
    }
    // Skipping unusable servers slot by slot may miss the usable ones when
    // weights are large; fall back to a scan.
    (0..weights.len()).find(|&i| usable(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balance_modes() {
        let mut cur = Cursor::default();
        let loads = [
            Load {
                outstanding: 5,
                latency_us: 900,
            },
            Load {
                outstanding: 1,
                latency_us: 300,
            },
            Load {
                outstanding: 3,
                latency_us: 100,
            },
        ];
        let up = |i: usize| Some(loads[i]);
        assert_eq!(
            pick(Balance::LeastOutstanding, &[1, 1, 1], up, &mut cur, 0),
            Some(1)
        );
        assert_eq!(
            pick(Balance::LeastLatency, &[1, 1, 1], up, &mut cur, 0),
            Some(2)
        );
        // Weight counts: 3 in flight on a weight-4 server beats 1 on weight 1.
        assert_eq!(
            pick(Balance::LeastOutstanding, &[1, 1, 4], up, &mut cur, 0),
            Some(2)
        );
        let only0 = |i: usize| (i == 0).then_some(loads[0]);
        for b in [
            Balance::RoundRobin,
            Balance::Weighted,
            Balance::LeastOutstanding,
            Balance::LeastLatency,
        ] {
            assert_eq!(pick(b, &[1, 1, 1], only0, &mut cur, 7), Some(0), "{b:?}");
            assert_eq!(pick(b, &[1, 1], |_| None, &mut cur, 7), None, "{b:?}");
        }
        let mut hits = [0u32; 2];
        for r in 0..400u64 {
            hits[pick(
                Balance::Weighted,
                &[1, 3],
                |_| Some(Load::default()),
                &mut cur,
                r,
            )
            .unwrap()] += 1;
        }
        assert_eq!(hits, [100, 300]);
    }

    #[test]
    fn weighted_round_robin() {
        let mut cursor = 0;
        let mut hits = [0u32; 2];
        for _ in 0..400 {
            hits[pick_weighted(&[1, 3], |_| true, &mut cursor).unwrap()] += 1;
        }
        assert_eq!(hits, [100, 300]);
        let mut hits = [0u32; 2];
        for _ in 0..10 {
            hits[pick_weighted(&[1, 3], |i| i == 0, &mut cursor).unwrap()] += 1;
        }
        assert_eq!(hits, [10, 0]);
        assert_eq!(pick_weighted(&[1, 1], |_| false, &mut cursor), None);
        assert_eq!(pick_weighted(&[], |_| true, &mut cursor), None);
    }
}
