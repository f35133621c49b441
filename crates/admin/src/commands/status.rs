//! `SHOW STATUS`: the process's counters.

use super::{AdminCommand, Query};
use crate::{Answer, Context, Counters, Table};
use std::sync::atomic::Ordering;

pub struct ShowStatus;

impl AdminCommand for ShowStatus {
    fn syntax(&self) -> &'static str {
        "SHOW STATUS"
    }
    fn help(&self) -> &'static str {
        "client connections, statements, client errors, distributed-transaction counts"
    }
    fn run(&self, q: &Query<'_>, ctx: &Context<'_>) -> Option<Answer> {
        q.is(&["SHOW", "STATUS"])
            .then(|| Answer::Table(status(ctx.counters)))
    }
}

fn status(c: &Counters) -> Table {
    let v = |n: &str, x: u64| vec![Some(n.to_string()), Some(x.to_string())];
    Table {
        columns: vec!["variable".into(), "value".into()],
        rows: vec![
            v(
                "client_connections",
                c.client_connections.load(Ordering::Relaxed) as u64,
            ),
            v(
                "client_connections_total",
                c.client_connections_total.load(Ordering::Relaxed),
            ),
            v("queries", c.queries.load(Ordering::Relaxed)),
            v("client_errors", c.client_errors.load(Ordering::Relaxed)),
            v(
                "xa_one_phase_commits",
                c.xa_one_phase.load(Ordering::Relaxed),
            ),
            v(
                "xa_two_phase_commits",
                c.xa_two_phase.load(Ordering::Relaxed),
            ),
            v("xa_rollbacks", c.xa_rolled_back.load(Ordering::Relaxed)),
            v(
                "xa_recovered_branches",
                c.xa_recovered_branches.load(Ordering::Relaxed),
            ),
            v("transaction_replays", c.replays.load(Ordering::Relaxed)),
            v(
                "transaction_replays_done",
                c.replays_done.load(Ordering::Relaxed),
            ),
            v(
                "transaction_replays_mismatched",
                c.replays_mismatched.load(Ordering::Relaxed),
            ),
            v(
                "transaction_replays_refused",
                c.replays_refused.load(Ordering::Relaxed),
            ),
            v(
                "transaction_replays_failed",
                c.replays_failed.load(Ordering::Relaxed),
            ),
        ]
        .into_iter()
        .chain(
            crate::REPLAY_REFUSALS
                .iter()
                .zip(&c.replays_refused_by)
                .map(|(r, n)| {
                    v(
                        &format!("transaction_replays_refused_{r}"),
                        n.load(Ordering::Relaxed),
                    )
                }),
        )
        .chain(
            c.allocations
                .map(|a| v("allocations", a.load(Ordering::Relaxed))),
        )
        .collect(),
    }
}
