//! `SHOW XA`, `XA COMMIT '<gtrid>'`, `XA ROLLBACK '<gtrid>'`: distributed
//! transactions in doubt, resolved by hand (carried out by the proxy).

use super::{AdminCommand, Query};
use crate::{Answer, Context};

pub struct ShowXa;

impl AdminCommand for ShowXa {
    fn syntax(&self) -> &'static str {
        "SHOW XA"
    }
    fn help(&self) -> &'static str {
        "distributed transactions in flight and prepared branches in doubt"
    }
    fn run(&self, q: &Query<'_>, _: &Context<'_>) -> Option<Answer> {
        q.is(&["SHOW", "XA"]).then_some(Answer::ShowXa)
    }
}

pub struct ShowAccounts;

impl AdminCommand for ShowAccounts {
    fn syntax(&self) -> &'static str {
        "SHOW ACCOUNTS"
    }
    fn help(&self) -> &'static str {
        "each user's server account and what its grants reach beyond its own schemas (sextant's tables, other sessions)"
    }
    fn run(&self, q: &Query<'_>, _: &Context<'_>) -> Option<Answer> {
        q.is(&["SHOW", "ACCOUNTS"]).then_some(Answer::ShowAccounts)
    }
}

pub struct XaResolve;

impl AdminCommand for XaResolve {
    fn syntax(&self) -> &'static str {
        "XA COMMIT | ROLLBACK '<gtrid>'"
    }
    fn help(&self) -> &'static str {
        "resolves one distributed transaction's prepared branches by hand (a logged commit cannot be rolled back)"
    }
    fn run(&self, q: &Query<'_>, _: &Context<'_>) -> Option<Answer> {
        for (verb, commit) in [("COMMIT", true), ("ROLLBACK", false)] {
            if let Some(rest) = q.after(&["XA", verb]) {
                let gtrid = rest.trim().trim_end_matches(';').trim();
                let quoted = gtrid.len() >= 2
                    && (gtrid.starts_with('\'') && gtrid.ends_with('\'')
                        || gtrid.starts_with('"') && gtrid.ends_with('"'));
                if !quoted {
                    return Some(Answer::Error(format!(
                        "XA {verb} '<gtrid>': the transaction's gtrid in quotes, as SHOW XA lists it"
                    )));
                }
                return Some(Answer::XaResolve {
                    gtrid: gtrid[1..gtrid.len() - 1].to_string(),
                    commit,
                });
            }
        }
        None
    }
}
