//! `SHOW STATS`: every metric `/metrics` exposes, as rows.

use super::{AdminCommand, Query};
use crate::{metrics, Answer, Context};

pub struct ShowStats;

impl AdminCommand for ShowStats {
    fn syntax(&self) -> &'static str {
        "SHOW STATS"
    }
    fn help(&self) -> &'static str {
        "every metric of /metrics (statements, errors and response times per server, pools, sessions, distributed transactions)"
    }
    fn run(&self, q: &Query<'_>, ctx: &Context<'_>) -> Option<Answer> {
        q.is(&["SHOW", "STATS"])
            .then(|| Answer::Table(metrics::table(&metrics::collect(ctx))))
    }
}
