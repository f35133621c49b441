//! `SHOW BACKENDS` (alias `SHOW SERVERS`): every server, its health, pool
//! and the client statements it ran.

use super::{AdminCommand, Query};
use crate::{Answer, Context, Table};
use sextant_backend::Pool;

pub struct ShowBackends;

impl AdminCommand for ShowBackends {
    fn syntax(&self) -> &'static str {
        "SHOW BACKENDS"
    }
    fn help(&self) -> &'static str {
        "every server: group, role, weight, state, pool, lag, statements per second, in flight, errors, applied GTID"
    }
    fn run(&self, q: &Query<'_>, ctx: &Context<'_>) -> Option<Answer> {
        (q.is(&["SHOW", "BACKENDS"]) || q.is(&["SHOW", "SERVERS"]))
            .then(|| Answer::Table(backends(ctx.pool)))
    }
}

fn backends(pool: &Pool) -> Table {
    let mut rows = Vec::new();
    for s in pool.servers() {
        let st = s.stats();
        rows.push(vec![
            Some(s.group.to_string()),
            Some(s.role().to_string()),
            Some(s.addr.to_string()),
            Some(s.weight().to_string()),
            Some(s.health.state_name().into()),
            Some(st.open.to_string()),
            Some(st.idle.to_string()),
            Some((st.open - st.idle.min(st.open)).to_string()),
            Some(st.waiters.to_string()),
            Some(st.borrows.to_string()),
            Some(st.connects.to_string()),
            Some(st.connect_failures.to_string()),
            Some(st.pipes.to_string()),
            Some(st.pipelined.to_string()),
            Some(st.pipe_sends.to_string()),
            s.health.version(),
            Some(s.health.lag_ms().to_string()),
            s.health.last_error(),
            s.health.member_state(),
            Some(s.health.stats.per_second().to_string()),
            Some(s.health.stats.read().statements.to_string()),
            Some(s.health.outstanding().to_string()),
            Some(s.health.stats.read().errors.to_string()),
            Some(s.health.applied_list()).filter(|a| !a.is_empty()),
        ]);
    }
    Table {
        columns: [
            "group",
            "role",
            "address",
            "weight",
            "state",
            "conn_open",
            "conn_idle",
            "conn_used",
            "waiters",
            "borrows",
            "connects",
            "connect_errors",
            "pipes",
            "pipelined",
            "pipe_sends",
            "version",
            "lag_ms",
            "last_error",
            "member_state",
            "statements_per_s",
            "statements",
            "in_flight",
            "errors",
            "applied_gtid",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    }
}
