//! The fleet's etcd as the failover coordinator: one instance per group
//! decides (the group's leader key under its membership lease), and each
//! term is recorded with a compare-and-swap (`sextant_fleet::failover`).

use sextant_fleet::Fleet;
use sextant_monitor::ha::{Coordinator, Pending};
use std::sync::Arc;

pub struct FleetCoordinator(pub Arc<Fleet>);

impl Coordinator for FleetCoordinator {
    fn may_decide<'a>(&'a self, group: &'a str) -> Pending<'a, Result<bool, String>> {
        Box::pin(async move { self.0.lead_failover(group).await.map_err(|e| e.to_string()) })
    }

    fn decider<'a>(&'a self, group: &'a str) -> Pending<'a, Option<String>> {
        Box::pin(async move { self.0.failover_leader(group).await.ok().flatten() })
    }

    fn newest_term<'a>(&'a self, group: &'a str) -> Pending<'a, Option<(u64, i64)>> {
        Box::pin(async move {
            self.0
                .failover_term(group)
                .await
                .ok()
                .flatten()
                .map(|t| (t.term, t.revision))
        })
    }

    fn record_term<'a>(
        &'a self,
        group: &'a str,
        term: u64,
        primary: &'a str,
        base: i64,
    ) -> Pending<'a, Result<bool, String>> {
        Box::pin(async move {
            self.0
                .record_failover_term(group, term, primary, base)
                .await
                .map_err(|e| e.to_string())
        })
    }
}
