//! What the failover task asks a replica: whether its IO thread is
//! connected to the primary and still hears from it, what it received
//! and applied, and whether it acknowledges semi-sync commits. MariaDB
//! answers in `SHOW ALL SLAVES STATUS`; MySQL 8 in performance_schema's
//! replication tables (its SHOW REPLICA STATUS has no heartbeat count).

use crate::dialect::{list, merge};
use crate::dialect::{Dialect, Position, MYSQL_REPLICA_STATUS};
use crate::ha::Task;
use crate::FailoverError;
use sextant_backend::BackendError;

/// What one replica said.
#[derive(Debug, Default, Clone)]
pub(crate) struct Probe {
    pub(crate) io_connected: bool,
    /// What it received from the primary (MariaDB: the relay log
    /// included, merged with what it applied from it; MySQL: its
    /// received transaction set).
    pub(crate) received: Position,
    /// What it applied, its own writes included.
    pub(crate) applied: Position,
    pub(crate) semi_sync_on: bool,
    /// Heartbeats its IO thread received.
    pub(crate) heartbeats: u64,
    /// Its heartbeat period, in ms (0: none).
    pub(crate) heartbeat_ms: u64,
    /// The `host:port` it replicates from, as its settings say.
    pub(crate) source: Option<String>,
}

impl Probe {
    /// Everything it holds or has in its relay log.
    pub(crate) fn holds(&self) -> Position {
        match (&self.received, &self.applied) {
            (Position::MySql(r), Position::MySql(a)) => Position::MySql(a.union(r)),
            _ => self.received.clone(),
        }
    }
}

/// Seconds (as the server prints them) in ms.
fn ms(v: Option<&str>) -> u64 {
    v.and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |s| (s * 1000.0) as u64)
}

impl Task {
    /// Rows and column names of `sql` on member `i`, bound by the task's
    /// budget; a connection in doubt is dropped.
    async fn named(
        &mut self,
        i: usize,
        sql: &str,
    ) -> Result<(Vec<String>, Vec<Vec<Option<String>>>), FailoverError> {
        let budget = self.budget(i);
        let r = tokio::time::timeout(budget, async {
            if self.conns[i].is_none() {
                self.query_unbounded(i, "DO 1").await?;
            }
            match self.conns[i].as_mut() {
                Some(c) => c.query_named(sql).await,
                None => Ok((Vec::new(), Vec::new())),
            }
        })
        .await;
        match r {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => {
                if !matches!(e, BackendError::Server { .. }) {
                    self.conns[i] = None;
                }
                Err(e.into())
            }
            Err(_) => {
                self.conns[i] = None;
                Err(self.timeout(i, budget))
            }
        }
    }

    /// What replica `i` received and applied, and whether its IO thread
    /// is connected to a primary.
    pub(crate) async fn probe(&mut self, i: usize) -> Result<Probe, FailoverError> {
        let d = self.dialect();
        let semi = match self.s.semi_sync {
            true => d.semi_sync_status(),
            false => "'OFF'",
        };
        match d {
            Dialect::MariaDb => {
                let (names, rows) = self.named(i, "SHOW ALL SLAVES STATUS").await?;
                let col = |name: &str| {
                    names
                        .iter()
                        .position(|n| n.eq_ignore_ascii_case(name))
                        .and_then(|c| rows.first().and_then(|r| r.get(c)).cloned().flatten())
                };
                let io = col("Slave_IO_Running");
                let heartbeats = col("Slave_received_heartbeats")
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
                let heartbeat_ms = ms(col("Slave_heartbeat_period").as_deref());
                let io_pos = list(col("Gtid_IO_Pos").as_deref());
                let source = col("Master_Host").zip(col("Master_Port"));
                let rows = self
                    .query(
                        i,
                        &format!("SELECT @@gtid_binlog_pos, @@gtid_slave_pos, {semi}"),
                    )
                    .await?;
                let field = |k: usize| rows.first().and_then(|r| r.get(k)).cloned().flatten();
                let binlog = list(field(0).as_deref());
                let slave = list(field(1).as_deref());
                Ok(Probe {
                    io_connected: io.as_deref() == Some("Yes"),
                    received: Position::MariaDb(merge(&io_pos, &slave)),
                    applied: Position::MariaDb(merge(&binlog, &slave)),
                    semi_sync_on: field(2).is_some_and(|v| v.eq_ignore_ascii_case("ON")),
                    heartbeats,
                    heartbeat_ms,
                    source: source.map(|(h, p)| format!("{h}:{p}")),
                })
            }
            Dialect::MySql => {
                let rows = self.query(i, MYSQL_REPLICA_STATUS).await?;
                let f = |k: usize| rows.first().and_then(|r| r.get(k)).cloned().flatten();
                let state = f(0);
                let received = Position::parse(d, Some(f(1).as_deref().unwrap_or("")));
                let heartbeats = f(2).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
                let heartbeat_ms = ms(f(3).as_deref());
                let source = f(4).zip(f(5)).map(|(h, p)| format!("{h}:{p}"));
                let rows = self
                    .query(i, &format!("SELECT @@GLOBAL.gtid_executed, {semi}"))
                    .await?;
                let field = |k: usize| rows.first().and_then(|r| r.get(k)).cloned().flatten();
                Ok(Probe {
                    io_connected: state.as_deref() == Some("ON"),
                    received,
                    applied: Position::parse(d, field(0).as_deref()),
                    semi_sync_on: field(1).is_some_and(|v| v.eq_ignore_ascii_case("ON")),
                    heartbeats,
                    heartbeat_ms,
                    source,
                })
            }
        }
    }

    /// Whether the probe's replica replicates from a member of the group
    /// other than `primary` (a candidate of a promotion that failed half
    /// way repointed it): connected, it still does not hear the primary.
    /// An address written differently (a name for an IP) counts as the
    /// primary's: that errs towards not promoting.
    pub(crate) fn follows_other(&self, p: &Probe, primary: usize) -> bool {
        let Some(src) = p.source.as_deref() else {
            return false;
        };
        self.group
            .members
            .iter()
            .enumerate()
            .any(|(i, m)| i != primary && *m.addr == *src)
    }

    /// How long replica `i` has received nothing from the primary, by
    /// this probe and those before it in this failure (its first counts
    /// as having just heard: the silence before sextant looked is not
    /// known).
    pub(crate) fn silence(&mut self, i: usize, p: &Probe) -> u64 {
        let now = sextant_backend::clock_ms();
        let pos = p.received.to_string();
        match &self.heard[i] {
            Some((hb, seen, since)) if *hb == p.heartbeats && *seen == pos => {
                now.saturating_sub(*since)
            }
            _ => {
                self.heard[i] = Some((p.heartbeats, pos, now));
                0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gtid_set::GtidSet;

    #[test]
    fn seconds_and_sets() {
        assert_eq!(ms(Some("0.500")), 500);
        assert_eq!(ms(Some("30.000")), 30_000);
        assert_eq!(ms(None), 0);
        assert_eq!(ms(Some("x")), 0);
        let u = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
        let set = |s: String| Position::MySql(GtidSet::parse(&s).unwrap());
        let p = Probe {
            received: set(format!("{u}:90-120")),
            applied: set(format!("{u}:1-100")),
            ..Probe::default()
        };
        assert_eq!(p.holds(), set(format!("{u}:1-120")));
    }
}
