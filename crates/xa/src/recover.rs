//! What recovery does with each prepared branch it finds: a pure function
//! of what `XA RECOVER` showed on each group, which instances are known
//! gone, the decision log (for branches from before decisions were kept
//! with the data), and the transactions a session of this process is
//! still carrying out.

use crate::xid::{owner_of, Decider, GroupRef, Xid, FORMAT};

/// A prepared branch `XA RECOVER` showed on a group's primary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub group: usize,
    pub xid: Xid,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// The log holds the commit: finish it.
    Commit(Found),
    /// No commit logged, and nobody is deciding it: presumed abort.
    Rollback(Found),
    /// A session of this process is between its prepares and its commits:
    /// it finishes the branch itself.
    InFlight(Found),
    /// Another sextant instance's branch: its own recovery resolves it.
    Foreign(Found),
    /// Settled by the decision row in group `decider`: this instance's
    /// (no session of it is carrying it out), or an instance's that is
    /// gone (its fleet lease expired).
    Settle { found: Found, decider: usize },
    /// Its decision is in a group no longer configured: left to a person.
    Undecidable(Found),
}

/// What recovery knows of the world beyond the branches.
pub struct Context<'a> {
    /// This instance's gtrid prefix (`xid::owner_prefix`).
    pub owner: &'a str,
    /// The groups' names, by index.
    pub groups: &'a [&'a str],
    /// The decision log holds the commit of this gtrid.
    pub committed: &'a (dyn Fn(&str) -> bool + Sync),
    /// A session of this process is carrying this gtrid out.
    pub in_flight: &'a (dyn Fn(&str) -> bool + Sync),
    /// The instance that owns this gtrid is known gone: its lease expired
    /// (only with a fleet; alone, no other instance is ever known gone).
    pub gone: &'a (dyn Fn(&str) -> bool + Sync),
}

/// The plan for the branches found. Branches of another format id (a
/// client's own XA transactions) are not sextant's and get no action.
pub fn plan(found: &[Found], cx: &Context<'_>) -> Vec<Action> {
    let mut out = Vec::with_capacity(found.len());
    for f in found {
        if f.xid.format != FORMAT {
            continue;
        }
        let Ok(g) = std::str::from_utf8(&f.xid.gtrid) else {
            continue;
        };
        let ours = g.starts_with(cx.owner);
        let own = GroupRef {
            name: cx.groups.get(f.group).copied().unwrap_or(""),
            index: f.group,
        };
        if ours && (cx.in_flight)(g) {
            out.push(Action::InFlight(f.clone()));
            continue;
        }
        let gone = !ours && owner_of(&f.xid.gtrid).is_some() && (cx.gone)(g);
        out.push(match f.xid.decider(own, cx.groups) {
            Decider::Group(d) if ours || gone => Action::Settle {
                found: f.clone(),
                decider: d,
            },
            Decider::Missing if ours || gone => Action::Undecidable(f.clone()),
            Decider::Log if ours && (cx.committed)(g) => Action::Commit(f.clone()),
            Decider::Log if ours => Action::Rollback(f.clone()),
            _ => Action::Foreign(f.clone()),
        });
    }
    out
}

/// The logged decisions that are done: no group showed a branch of them
/// and no session is still committing them. Only meaningful when every
/// group was asked (a group that could not be asked may still hold one).
pub fn finished<'a>(
    pending: impl IntoIterator<Item = &'a str>,
    found: &[Found],
    in_flight: &dyn Fn(&str) -> bool,
) -> Vec<String> {
    pending
        .into_iter()
        .filter(|g| !in_flight(g) && !found.iter().any(|f| f.xid.gtrid == g.as_bytes()))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xid::branch;

    fn found(gtrid: &str, group: usize) -> Found {
        Found {
            group,
            xid: branch(gtrid, &format!("g{group}"), group),
        }
    }

    const GROUPS: [&str; 4] = ["g0", "g1", "g2", "g3"];

    fn cx<'a>(
        committed: &'a (dyn Fn(&str) -> bool + Sync),
        in_flight: &'a (dyn Fn(&str) -> bool + Sync),
        gone: &'a (dyn Fn(&str) -> bool + Sync),
    ) -> Context<'a> {
        Context {
            owner: "sx:me:",
            groups: &GROUPS,
            committed,
            in_flight,
            gone,
        }
    }

    #[test]
    fn each_branch_gets_what_the_log_says() {
        let f = vec![
            found("sx:me:1:1", 0),
            found("sx:me:1:1", 1),
            found("sx:me:1:2", 2),
            found("sx:me:1:3", 3),
            found("sx:other:1:1", 0),
            Found {
                group: 1,
                xid: Xid {
                    format: 1,
                    gtrid: b"client-xa".to_vec(),
                    bqual: vec![],
                },
            },
        ];
        let committed = |g: &str| g == "sx:me:1:1";
        let flying = |g: &str| g == "sx:me:1:3";
        let p = plan(&f, &cx(&committed, &flying, &|_| true));
        assert_eq!(
            p,
            vec![
                Action::Commit(f[0].clone()),
                Action::Commit(f[1].clone()),
                Action::Rollback(f[2].clone()),
                Action::InFlight(f[3].clone()),
                // Another's log is on its own disk: never settled here.
                Action::Foreign(f[4].clone()),
            ]
        );
    }

    fn deciding(gtrid: &str, group: usize, decider: usize) -> Found {
        Found {
            group,
            xid: crate::xid::branch_deciding(
                gtrid,
                GroupRef {
                    name: GROUPS[group],
                    index: group,
                },
                GroupRef {
                    name: GROUPS[decider],
                    index: decider,
                },
            ),
        }
    }

    #[test]
    fn branches_deciding_by_row_are_settled_by_their_owner_or_once_it_is_gone() {
        let f = vec![
            deciding("sx:me:1:1", 1, 0),
            deciding("sx:me:1:2", 2, 0),
            deciding("sx:dead:1:1", 3, 2),
            deciding("sx:alive:1:1", 3, 2),
            Found {
                group: 1,
                xid: Xid {
                    format: FORMAT,
                    gtrid: b"sx:me:1:4".to_vec(),
                    bqual: b"g1@gone".to_vec(),
                },
            },
        ];
        let flying = |g: &str| g == "sx:me:1:2";
        let gone = |g: &str| g.starts_with("sx:dead:");
        let p = plan(&f, &cx(&|_| false, &flying, &gone));
        assert_eq!(
            p,
            vec![
                Action::Settle {
                    found: f[0].clone(),
                    decider: 0
                },
                Action::InFlight(f[1].clone()),
                Action::Settle {
                    found: f[2].clone(),
                    decider: 2
                },
                Action::Foreign(f[3].clone()),
                Action::Undecidable(f[4].clone()),
            ]
        );
    }

    #[test]
    fn an_instance_whose_name_prefixes_another_is_not_it() {
        // "sx:me:" must not own "sx:me2:...".
        let f = vec![found("sx:me2:1:1", 0)];
        let p = plan(&f, &cx(&|_| true, &|_| false, &|_| false));
        assert!(matches!(p[0], Action::Foreign(_)));
    }

    #[test]
    fn finished_decisions_are_those_no_group_holds() {
        let f = vec![found("sx:me:1:1", 0)];
        let done = finished(["sx:me:1:1", "sx:me:1:2", "sx:me:1:3"], &f, &|g: &str| {
            g == "sx:me:1:3"
        });
        assert_eq!(done, vec!["sx:me:1:2".to_string()]);
    }
}
