//! A planned switchover (`SWITCHOVER GROUP g [TO 'addr']` on the admin
//! port), carried out by the group's failover task so that it never runs
//! beside a failover: writes are held (the old primary leaves sextant's
//! routing, so statements wait for a primary as they do in a failover),
//! the transactions already on the old primary finish, it is made
//! read-only, the target applies everything it wrote and is promoted as
//! in a failover, and the old primary replicates from it.

use crate::dialect::Position;
use crate::ha::{first_cell, Task};
use std::time::{Duration, Instant};

/// How long transactions already running on the old primary get to
/// finish before it is made read-only (one still open then gets the
/// server's read-only error).
const DRAIN: Duration = Duration::from_secs(5);

/// Just over InnoDB's 100 ms floor between refreshes of INNODB_TRX.
const INNODB_TRX_REFRESH: Duration = Duration::from_millis(110);

/// The transactions InnoDB's monitor output (`SHOW ENGINE INNODB
/// STATUS`, MariaDB or MySQL) lists as active, prepared ones included;
/// None when the output was cut short (a very long list) or has no
/// transactions section, so it cannot say.
fn active_transactions(status: &str) -> Option<u64> {
    let at = status.find("\nLIST OF TRANSACTIONS FOR EACH SESSION:")?;
    if !status.contains("END OF INNODB MONITOR OUTPUT") {
        return None;
    }
    let list = &status[at..];
    let list = &list[..list.find("\n--------\n").unwrap_or(list.len())];
    let mut n = 0;
    for line in list.lines() {
        if line.contains("more transactions not shown") {
            return None;
        }
        if line.starts_with("---TRANSACTION ") && line.contains(", ACTIVE") {
            n += 1;
        }
    }
    Some(n)
}

impl Task {
    pub(crate) async fn switchover(&mut self, to: Option<String>) -> Result<String, String> {
        let g = self.group.clone();
        match self.decides_now().await {
            Ok(true) => {}
            Ok(false) => {
                return Err(format!(
                    "instance {} performs this group's failovers and switchovers: run it there",
                    self.decider_name().await
                ))
            }
            Err(e) => {
                return Err(format!(
                    "the fleet's store cannot say which instance decides: {e}"
                ))
            }
        }
        let li = self.leader.ok_or("no primary is known")?;
        if self.member(li).health.unreachable_for_ms() > 0 {
            return Err(
                "the primary does not answer: a failover replaces it, not a switchover".into(),
            );
        }
        let mut best: Option<(usize, u64)> = None;
        let mut others = Vec::new();
        for i in self.replicas(li) {
            let addr = self.member(i).addr.to_string();
            let probe = self.probe(i).await;
            let ok = probe.as_ref().is_ok_and(|p| p.io_connected);
            let named = to.as_deref() == Some(addr.as_str());
            if named && !ok {
                return Err(format!(
                    "{addr} does not answer or does not replicate from the primary"
                ));
            }
            if named && !self.s.promotable.get(i).copied().unwrap_or(false) {
                return Err(format!("{addr} has promotable = false"));
            }
            if ok {
                others.push(i);
                let received: u64 = probe.map(|p| p.holds().size()).unwrap_or(0);
                let promotable = self.s.promotable.get(i).copied().unwrap_or(false);
                let pick = match &to {
                    Some(_) => named,
                    None => promotable && best.is_none_or(|(_, r)| received > r),
                };
                if pick {
                    best = Some((i, received));
                }
            }
        }
        let Some((c, _)) = best else {
            return Err(match to {
                Some(a) => format!("{a} is not a replica of group {}", g.name),
                None => "no replica that may be promoted replicates from the primary".into(),
            });
        };
        others.retain(|&i| i != c);
        let started = Instant::now();
        // Writes wait from here (no primary in sextant's routing).
        self.fence(li, g.ha.term() + 1);
        let old = self.member(li).clone();
        self.drain(li, started).await;
        let d = self.dialect();
        if let Err(e) = self.exec(li, &[d.fence()]).await {
            self.unfence(li);
            return Err(format!("the primary could not be made read-only: {e}"));
        }
        old.health.set_writable(false);
        let pos = match self.query(li, d.position()).await {
            Ok(rows) => Position::parse(d, first_cell(&rows).as_deref()),
            Err(e) => {
                self.back_out(li).await;
                return Err(format!("the primary's position could not be read: {e}"));
            }
        };
        let done = match self.promote_steps(li, c, &pos, &others).await {
            Ok(d) => d,
            Err(e) => {
                self.back_out(li).await;
                return Err(format!(
                    "promoting {} failed, the old primary takes writes again: {e}",
                    self.member(c).addr
                ));
            }
        };
        let held_ms = started.elapsed().as_millis() as u64;
        let rejoined = match self.rejoin(li).await {
            Ok(()) if !self.fenced[li] => "replicates from it".to_string(),
            Ok(()) => "is read-only and left out (see SHOW BACKENDS)".to_string(),
            Err(e) => format!("is read-only; rejoining it failed ({e}), retried each round"),
        };
        let summary = format!(
            "switchover, term {}: {} -> {}; writes held {held_ms} ms (catch-up {} ms); the old primary {rejoined}; at {}",
            done.term,
            old.addr,
            self.member(c).addr,
            done.catch_up_ms,
            done.at
        );
        tracing::warn!(group = %g.name, "{summary}");
        g.ha.note_failover(summary.clone());
        g.ha.set_state("healthy", "");
        Ok(summary)
    }

    /// Waits (up to DRAIN) until no transaction is open on the old
    /// primary `li`: none can start there any more, and one still open
    /// when it turns read-only would fail at its next write.
    ///
    /// The server's live list is `SHOW ENGINE INNODB STATUS` (needs
    /// PROCESS). information_schema.INNODB_TRX is a cache that InnoDB
    /// refreshes only when it was last read more than 100 ms before:
    /// polled any faster it never changes, and the drain always ran to
    /// its bound. It is the fallback (read at that spacing) when the
    /// status cannot be read or was cut short; without either, until
    /// sextant's sessions hold none of the server's connections.
    async fn drain(&mut self, li: usize, started: Instant) {
        const OPEN: &str = "SELECT COUNT(*) FROM information_schema.INNODB_TRX \
                            WHERE trx_mysql_thread_id <> CONNECTION_ID()";
        let old = self.member(li).clone();
        while started.elapsed() < DRAIN {
            let live = match self.query(li, "SHOW ENGINE INNODB STATUS").await {
                Ok(rows) => rows
                    .first()
                    .and_then(|r| r.get(2))
                    .and_then(|s| s.as_deref())
                    .and_then(active_transactions),
                Err(_) => None,
            };
            let (open, pause) = match live {
                Some(n) => (n, Duration::from_millis(2)),
                None => {
                    let n = match self.query(li, OPEN).await {
                        Ok(rows) => first_cell(&rows)
                            .and_then(|n| n.parse::<u64>().ok())
                            .unwrap_or(0),
                        Err(_) => {
                            let st = old.stats();
                            st.open.saturating_sub(st.idle + st.pipes) as u64
                        }
                    };
                    (n, INNODB_TRX_REFRESH)
                }
            };
            if open == 0 {
                return;
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// A switchover that could not go on: the old primary takes writes
    /// again.
    async fn back_out(&mut self, li: usize) {
        let writable = self.dialect().writable();
        if self.exec(li, &[writable]).await.is_ok() {
            self.member(li).health.set_writable(true);
        }
        self.unfence(li);
    }
}

#[cfg(test)]
mod tests {
    use super::active_transactions;

    const HEAD: &str = "=====================================\n\
        2026-11-29 13:50:01 0x7f3a INNODB MONITOR OUTPUT\n\
        ------------\nTRANSACTIONS\n------------\nTrx id counter 21733\n\
        History list length 2\nLIST OF TRANSACTIONS FOR EACH SESSION:\n";
    const TAIL: &str = "--------\nFILE I/O\n--------\nPending flushes (fsync): 0\n\
        ----------------------------\nEND OF INNODB MONITOR OUTPUT\n\
        ============================\n";

    fn status(list: &str) -> String {
        format!("{HEAD}{list}{TAIL}")
    }

    #[test]
    fn counts_active_and_prepared_not_idle_sessions() {
        let s = status(
            "---TRANSACTION (0x7f3a901c6380), ACTIVE 0 sec\n\
             0 lock struct(s), heap size 1128, 0 row lock(s)\n\
             MariaDB thread id 155, OS thread handle 1, query id 28433 127.0.0.1 app\n\
             ---TRANSACTION (0x7f3a901c5880), not started\n\
             0 lock struct(s), heap size 1128, 0 row lock(s)\n\
             ---TRANSACTION 421, ACTIVE (PREPARED) 3 sec\n\
             ---TRANSACTION 422, ACTIVE 2 sec starting index read\n\
             mysql tables in use 1, locked 1\nLOCK WAIT 2 lock struct(s)\n",
        );
        assert_eq!(active_transactions(&s), Some(3));
        let idle = status("---TRANSACTION (0x1), not started\n---TRANSACTION (0x2), not started\n");
        assert_eq!(active_transactions(&idle), Some(0));
    }

    #[test]
    fn cut_short_or_missing_says_nothing() {
        let more = status("---TRANSACTION 1, ACTIVE 0 sec\n--- 12 more transactions not shown\n");
        assert_eq!(active_transactions(&more), None);
        let cut = format!("{HEAD}---TRANSACTION 1, ACTIVE 0 sec\n");
        assert_eq!(active_transactions(&cut), None);
        assert_eq!(active_transactions("Empty set"), None);
        // "ACTIVE" in a later section does not count.
        let later = format!("{HEAD}---TRANSACTION (0x1), not started\n--------\nFILE I/O\n---TRANSACTION 9, ACTIVE 1 sec\n----------------------------\nEND OF INNODB MONITOR OUTPUT\n");
        assert_eq!(active_transactions(&later), Some(0));
    }
}
