//! After a statement: what its answer changed in the session, as
//! `sextant_routing::effects` decides it, applied in one place for text
//! statements and prepared ones alike.

use super::Session;
use crate::relay::RelayResult;
use sextant_protocol::consts::status;
use sextant_routing::{effects, Answer, Effects, Ran, Statement, Target};
use std::sync::atomic::Ordering;
use tokio::time::Instant;

/// The answer as effects see it: the relay's result and what session
/// tracking reported.
pub(super) fn answer(res: &RelayResult) -> Answer {
    Answer {
        error: res.error,
        in_transaction: res.status & status::IN_TRANS != 0,
        cursor_open: res.status & status::CURSOR_EXISTS != 0,
        last_row_sent: res.status & status::LAST_ROW_SENT != 0,
        last_insert_id: res.last_insert_id,
        last_insert_id_set: res.tracked.last_insert_id_set,
        insert_id_reported: res.tracked.insert_id_reported,
        opaque: res.tracked.opaque,
        wrote: res.tracked.wrote.is_some(),
        vars_changed: res.vars_changed,
        connection_ending: res.connection_ending,
    }
}

impl Session {
    /// Works out and applies what statement `st` (run by `ran`, planned
    /// for `target`) changed; `res`: its relayed answer, None when it
    /// failed and the client has been told; `text`: the statement's, for
    /// a query or an execution.
    pub(super) fn after(
        &mut self,
        st: &Statement,
        ran: Ran,
        target: Target,
        res: Option<&RelayResult>,
        text: Option<&[u8]>,
    ) {
        let e = effects(st, ran, target, res.map(answer).as_ref());
        self.last = match ran {
            Ran::Query | Ran::Bulk | Ran::Execute { cursor: false } => {
                let scanned = text.map_or(super::last::Text::UNKNOWN, |t| {
                    super::last::Text::of_statement(st, t)
                });
                let last = self.last.after(st, res, scanned);
                match (text, res) {
                    (Some(t), Some(r)) => last.without_table(st, r, scanned, t),
                    _ => last,
                }
            }
            // Rows fetched from a cursor: the connection counts them.
            Ran::Execute { cursor: true } | Ran::Fetch => super::last::Last::default(),
            Ran::LongData | Ran::StmtReset => self.last,
        };
        if self.sharding.is_some()
            && self.last.found_rows == super::last::Val::Connection
            && matches!(
                st.kind,
                sextant_sql::Kind::Update
                    | sextant_sql::Kind::Delete
                    | sextant_sql::Kind::Insert
                    | sextant_sql::Kind::Replace
            )
        {
            // What a write sets FOUND_ROWS() to follows the plan the
            // server chose for one group's rows, not one server's.
            self.last.found_rows = super::last::Val::Nowhere;
        }
        self.apply(e, res);
    }

    /// Applies a statement's effects, then keeps or gives back its
    /// connection accordingly.
    pub(super) fn apply(&mut self, e: Effects, res: Option<&RelayResult>) {
        self.pins = e.pins_after(self.pins);
        if e.hold_primary_reads {
            self.primary_reads_until = Some(Instant::now() + self.hold);
        }
        if let Some(id) = e.insert_id {
            self.last_insert_id = id;
            self.last_insert_conn = self
                .binding
                .direct()
                .map(|a| (a.server.addr.clone(), a.conn().connection_id));
        }
        if let (true, Some(g)) = (e.record_write, res.and_then(|r| r.tracked.wrote)) {
            self.note_write(g);
        }
        if e.catalogue_stale {
            self.group.catalogue_stale.store(true, Ordering::Relaxed);
        }
        if e.client_timeouts {
            let secs = |name: &str| {
                let v = self.vars.client_side.get(name)?;
                v.parse().ok().map(std::time::Duration::from_secs)
            };
            self.client.write_timeout = secs("net_write_timeout");
            self.client.read_timeout = secs("net_read_timeout");
        }
        self.after_statement();
    }
}
