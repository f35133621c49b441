//! What a read must see (docs/consistency.md), and what the session
//! remembers for it: its writes' GTIDs (read_your_writes), the server and
//! time of its last read (monotonic), the id its last insert generated
//! (LAST_INSERT_ID() wherever it lands).

use super::Session;
use crate::relay::RelayResult;
use sextant_backend::gtid::{self, Gtid};
use sextant_backend::{Role, Server};
use sextant_config::ConsistencyScope;
use sextant_routing::Plan;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// monotonic: `s` may serve a read of a session that last read from
/// `sticky` at `seen_us` if it is that server, the primary, or has applied
/// a heartbeat written after then.
pub(super) fn mono_ok(seen_us: i64, sticky: Option<&Arc<Server>>, s: &Arc<Server>) -> bool {
    seen_us == 0
        || s.role() == Role::Primary
        || sticky.is_some_and(|t| Arc::ptr_eq(t, s))
        || s.health.heartbeat_applied_us() >= seen_us
}

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

impl Session {
    /// Takes the plan's read requirement for the statement about to run:
    /// which write a replica must have applied, whether it may not go back
    /// in time.
    pub(super) fn require(&mut self, plan: &Plan) {
        self.need = plan.read.own_writes.and_then(|s| self.own_write(s));
        self.mono = plan.read.monotonic;
    }

    /// After the statement: requirements end, and a monotonic read is
    /// remembered as seen.
    pub(super) fn read_done(&mut self) {
        self.need = None;
        if std::mem::take(&mut self.mono) {
            self.note_seen();
        }
    }

    /// The newest write of this session, or of any session of its user.
    fn own_write(&self, scope: ConsistencyScope) -> Option<Gtid> {
        match scope {
            ConsistencyScope::Session => self.last_write,
            ConsistencyScope::User => {
                let u = &self.user;
                let packed = u.latest_write.load(Ordering::Acquire);
                if packed == 0 {
                    return self.last_write;
                }
                Some(Gtid {
                    domain: gtid::domain(packed) as u32,
                    server: u.latest_write_server.load(Ordering::Relaxed),
                    seq: gtid::seq(packed),
                    uuid: (u.latest_write_uuid[0].load(Ordering::Relaxed) as u128) << 64
                        | u.latest_write_uuid[1].load(Ordering::Relaxed) as u128,
                })
            }
        }
    }

    /// monotonic: after a read, remember where and when.
    fn note_seen(&mut self) {
        self.sticky = self.binding.direct().map(|a| a.server.clone());
        self.seen_us = now_us();
    }

    /// Records the GTID of a write the server just reported.
    pub(super) fn note_write(&mut self, g: Gtid) {
        self.last_write = Some(g);
        let packed = g.pack();
        let u = &self.user;
        // Keep the newest per user: concurrent sessions may report out of
        // order.
        let _ = u
            .latest_write
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                let newer = old == 0
                    || gtid::domain(old) != gtid::domain(packed)
                    || gtid::seq(packed) > gtid::seq(old);
                newer.then_some(packed)
            });
        u.latest_write_server.store(g.server, Ordering::Relaxed);
        // (Only the wait statement of causal_wait_ms uses the uuid; a torn
        // pair makes that wait time out and the read go to the primary.)
        u.latest_write_uuid[0].store((g.uuid >> 64) as u64, Ordering::Relaxed);
        u.latest_write_uuid[1].store(g.uuid as u64, Ordering::Relaxed);
    }

    /// Remembers the id a write generated, and on which connection
    /// LAST_INSERT_ID() returns it.
    pub(super) fn note_insert_id(&mut self, res: &RelayResult) {
        if res.last_insert_id != 0 {
            self.last_insert_id = res.last_insert_id;
            self.last_insert_conn = self
                .binding
                .direct()
                .map(|a| (a.server.addr.clone(), a.conn().connection_id));
        }
    }

    /// LAST_INSERT_ID() is per server connection: if this statement runs
    /// on another connection than the write that generated the id, make
    /// that connection return it too.
    pub(super) async fn restore_last_insert_id(&mut self) {
        let Some(a) = self.binding.direct_mut() else {
            return;
        };
        let here = (a.server.addr.clone(), a.conn().connection_id);
        if self.last_insert_conn.as_ref() == Some(&here) {
            return;
        }
        let sql = format!("DO LAST_INSERT_ID({})", self.last_insert_id);
        if a.conn_mut().exec_internal(&sql).await.is_ok() {
            self.last_insert_conn = Some(here);
        }
    }
}
