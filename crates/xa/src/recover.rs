//! What recovery does with each prepared branch it finds: a pure function
//! of what `XA RECOVER` showed on each group, the decision log, and the
//! transactions a session of this process is still carrying out.

use crate::xid::{Xid, FORMAT};

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
}

/// The plan for the branches found. `owner`: this instance's gtrid prefix
/// (`xid::owner_prefix`); branches of another format id (a client's own XA
/// transactions) are not sextant's and get no action at all.
pub fn plan(
    found: &[Found],
    owner: &str,
    committed: &dyn Fn(&str) -> bool,
    in_flight: &dyn Fn(&str) -> bool,
) -> Vec<Action> {
    let mut out = Vec::with_capacity(found.len());
    for f in found {
        if f.xid.format != FORMAT {
            continue;
        }
        let Ok(g) = std::str::from_utf8(&f.xid.gtrid) else {
            continue;
        };
        if !g.starts_with(owner) {
            out.push(Action::Foreign(f.clone()));
        } else if in_flight(g) {
            out.push(Action::InFlight(f.clone()));
        } else if committed(g) {
            out.push(Action::Commit(f.clone()));
        } else {
            out.push(Action::Rollback(f.clone()));
        }
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
        let p = plan(&f, "sx:me:", &committed, &flying);
        assert_eq!(
            p,
            vec![
                Action::Commit(f[0].clone()),
                Action::Commit(f[1].clone()),
                Action::Rollback(f[2].clone()),
                Action::InFlight(f[3].clone()),
                Action::Foreign(f[4].clone()),
            ]
        );
    }

    #[test]
    fn an_instance_whose_name_prefixes_another_is_not_it() {
        // "sx:me:" must not own "sx:me2:...".
        let f = vec![found("sx:me2:1:1", 0)];
        let p = plan(&f, "sx:me:", &|_| true, &|_| false);
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
