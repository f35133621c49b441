//! The candidate among the replicas of a MySQL group (GTID sets), by the
//! rules `failover.rs` applies to MariaDB positions: the replica that
//! received the most, holding all every other replica received or
//! executed, never one with errant transactions. `failover::decide`
//! calls it for a group whose servers are MySQL.
//!
//! What differs from MariaDB: a MySQL replica's `Retrieved_Gtid_Set`
//! holds only what its IO thread received since its relay log began
//! (it is emptied when relay logs are reset, by a promotion that failed
//! half way for one), so "executed beyond received" is not errant by
//! itself: only what it neither received, nor the primary was last seen
//! to have executed, nor carries the primary's own server UUID (written
//! on the primary after sextant last looked) is.

use crate::gtid_set::GtidSet;

/// What one answering MySQL replica reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MySqlReplica {
    pub addr: String,
    pub promotable: bool,
    /// `Retrieved_Gtid_Set`.
    pub received: GtidSet,
    /// `Executed_Gtid_Set` (`@@gtid_executed`).
    pub executed: GtidSet,
}

impl MySqlReplica {
    /// Everything it holds or has in its relay log.
    fn holds(&self) -> GtidSet {
        self.executed.union(&self.received)
    }
}

/// The replica to promote, what it must have executed first, and who
/// follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub candidate: String,
    pub wait_for: GtidSet,
    pub repoint: Vec<String>,
    /// Replicas left out (errant), with why.
    pub left_out: Vec<String>,
}

/// What the monitor last saw of the primary: its `@@gtid_executed` and
/// its `@@server_uuid`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrimarySeen {
    pub executed: GtidSet,
    pub uuid: String,
}

/// What `r` executed that it never received and that the primary (as
/// last seen; when not known, any other replica) never had: written on
/// it directly.
fn errant(r: &MySqlReplica, all: &[MySqlReplica], primary_seen: Option<&PrimarySeen>) -> GtidSet {
    let own = r.executed.minus(&r.received);
    match primary_seen {
        Some(p) => own.minus(&p.executed).without(&p.uuid),
        None => all
            .iter()
            .filter(|o| o.addr != r.addr)
            .fold(own, |left, o| left.minus(&o.holds())),
    }
}

/// The candidate among `replicas` (those that answer), or why none.
pub fn choose(
    replicas: &[MySqlReplica],
    primary_seen: Option<&PrimarySeen>,
) -> Result<Choice, String> {
    let mut left_out = Vec::new();
    let mut clean = Vec::new();
    for r in replicas {
        let e = errant(r, replicas, primary_seen);
        if e.is_empty() {
            clean.push(r);
        } else {
            left_out.push(format!(
                "{}: executed transactions the primary never sent it ({e})",
                r.addr
            ));
        }
    }
    let best = clean
        .iter()
        .copied()
        .filter(|r| r.promotable)
        .max_by_key(|r| {
            (
                r.holds().count(),
                r.executed.count(),
                std::cmp::Reverse(replicas.iter().position(|x| x.addr == r.addr)),
            )
        })
        .ok_or_else(|| match left_out.is_empty() {
            true => "no replica that answers may be promoted (promotable = false)".to_string(),
            false => format!("no replica can be promoted: {}", left_out.join("; ")),
        })?;
    let wait_for = best.holds();
    // Errant replicas count too, for what they hold from the primary: it
    // may be acknowledged commits no other replica has.
    let behind: Vec<String> = replicas
        .iter()
        .filter(|r| r.addr != best.addr)
        .filter_map(|r| {
            let from_primary = r.holds().minus(&errant(r, replicas, primary_seen));
            let lacks = from_primary.minus(&wait_for);
            (!lacks.is_empty()).then(|| format!("{} ({lacks})", r.addr))
        })
        .collect();
    if !behind.is_empty() {
        return Err(format!(
            "no candidate has received everything the others have: {} lacks what {} holds",
            best.addr,
            behind.join(", ")
        ));
    }
    Ok(Choice {
        candidate: best.addr.clone(),
        wait_for,
        repoint: clean
            .iter()
            .filter(|r| r.addr != best.addr)
            .map(|r| r.addr.clone())
            .collect(),
        left_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const A: &str = "aaaaaaaa-0000-11e1-9e33-c80aa9429562";

    fn set(s: &str) -> GtidSet {
        GtidSet::parse(s).expect("a GTID set")
    }

    fn r(addr: &str, received: &str, executed: &str) -> MySqlReplica {
        MySqlReplica {
            addr: addr.into(),
            promotable: true,
            received: set(received),
            executed: set(executed),
        }
    }

    fn seen(executed: &str) -> PrimarySeen {
        PrimarySeen {
            executed: set(executed),
            uuid: P.into(),
        }
    }

    #[test]
    fn choices() {
        let seen = seen(&format!("{P}:1-100"));
        type Case = (
            &'static str,
            Vec<MySqlReplica>,
            Option<PrimarySeen>,
            Result<&'static str, &'static str>,
        );
        let cases: Vec<Case> = vec![
            (
                "the one that received the most",
                vec![
                    r("a", &format!("{P}:90-110"), &format!("{P}:1-105")),
                    r("b", &format!("{P}:90-120"), &format!("{P}:1-101")),
                ],
                Some(seen.clone()),
                Ok("b"),
            ),
            (
                "relay logs reset: old executed transactions are not errant",
                vec![
                    r("a", "", &format!("{P}:1-100")),
                    r("b", &format!("{P}:95-101"), &format!("{P}:1-101")),
                ],
                Some(seen.clone()),
                Ok("b"),
            ),
            (
                "an errant replica ahead of every clean one: refused (what it received may be acknowledged)",
                vec![
                    r("a", &format!("{P}:90-130"), &format!("{P}:1-130,{A}:1")),
                    r("b", &format!("{P}:90-120"), &format!("{P}:1-120")),
                ],
                Some(seen.clone()),
                Err("no candidate has received everything"),
            ),
            (
                "an errant replica not ahead: left out, the clean one promoted",
                vec![
                    r("a", &format!("{P}:90-120"), &format!("{P}:1-120,{A}:1")),
                    r("b", &format!("{P}:90-120"), &format!("{P}:1-120")),
                ],
                Some(seen.clone()),
                Ok("b"),
            ),
            (
                "primary never seen: errant is what no other replica holds",
                vec![
                    r("a", "", &format!("{P}:1-100,{A}:1-2")),
                    r("b", "", &format!("{P}:1-100")),
                ],
                None,
                Ok("b"),
            ),
            (
                "relay logs reset after the primary was last seen: its own later transactions are not errant",
                vec![
                    r("a", "", &format!("{P}:1-120")),
                    r("b", "", &format!("{P}:1-110")),
                ],
                Some(seen.clone()),
                Ok("a"),
            ),
            (
                "as much held: the one with less left to apply",
                vec![
                    r("a", &format!("{P}:1-100"), &format!("{P}:1-10")),
                    r("b", &format!("{P}:1-100"), &format!("{P}:1-99")),
                ],
                Some(seen.clone()),
                Ok("b"),
            ),
        ];
        for (what, replicas, seen, want) in cases {
            let got = choose(&replicas, seen.as_ref());
            match (want, &got) {
                (Ok(c), Ok(choice)) => {
                    assert_eq!(choice.candidate, c, "{what}: {got:?}");
                    let best = replicas.iter().find(|r| r.addr == c).unwrap();
                    assert_eq!(choice.wait_for, best.holds(), "{what}");
                }
                (Err(w), Err(why)) => assert!(why.contains(w), "{what}: {why}"),
                _ => panic!("{what}: {got:?}"),
            }
        }
    }

    #[test]
    fn errant_ones_are_named_and_not_repointed() {
        let seen = seen(&format!("{P}:1-100"));
        let replicas = vec![
            r("a", &format!("{P}:90-115"), &format!("{P}:1-115,{A}:1")),
            r("b", &format!("{P}:90-120"), &format!("{P}:1-120")),
            r("c", &format!("{P}:90-110"), &format!("{P}:1-110")),
        ];
        let c = choose(&replicas, Some(&seen)).unwrap();
        assert_eq!(c.candidate, "b");
        assert_eq!(c.repoint, vec!["c".to_string()]);
        assert_eq!(c.left_out.len(), 1);
        assert!(c.left_out[0].starts_with("a: ") && c.left_out[0].contains(&format!("{A}:1")));
        let mut none = replicas.clone();
        none.iter_mut().for_each(|r| r.promotable = false);
        assert!(choose(&none, Some(&seen))
            .unwrap_err()
            .starts_with("no replica can be promoted: a: "));
    }
}
