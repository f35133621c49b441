//! A client's own session tracking (`SET session_track_...`): what it
//! asked for applies to what it is told, while the server connection keeps
//! sextant's tracking.

use super::Session;

type Assigned = Vec<(&'static str, Option<Vec<u8>>)>;

impl Session {
    /// A SET of the client's session tracking: its literal values apply to
    /// the statement's own report. Returns what it assigns and the settings
    /// before it.
    pub(super) fn tracking_set(
        &mut self,
        sql: &[u8],
    ) -> Option<(Assigned, Option<Box<sextant_backend::Tracking>>)> {
        let assigned = sextant_sql::session_info::tracking_assignments(sql, self.lex_mode());
        if assigned.is_empty() {
            return None;
        }
        // The rest of the statement ran while the client's narrower
        // tracking was in force: the server may not have reported what it
        // changed, which is read back afterwards (listed without a value).
        for name in sextant_sql::session_info::session_assignments(sql, self.lex_mode()) {
            if !name.starts_with("session_track_") {
                self.tracking_readback.push(name);
            }
        }
        self.client.pending_tracking = assigned
            .iter()
            .filter_map(|(n, v)| Some((*n, v.clone()?)))
            .collect();
        Some((assigned, self.client.tracking.clone()))
    }

    /// After a SET of session tracking: the client keeps the values the
    /// server took (read back where the statement did not spell them out),
    /// and the server connection gets sextant's own tracking back. True
    /// when all of that was done.
    pub(super) async fn tracking_done(
        &mut self,
        assigned: Assigned,
        before: Option<Box<sextant_backend::Tracking>>,
        ran: bool,
    ) -> bool {
        let readback = std::mem::take(&mut self.tracking_readback);
        if !ran {
            self.client.pending_tracking.clear();
            self.client.tracking = before;
            return false;
        }
        let Some(a) = self.binding.direct_mut() else {
            return false;
        };
        let conn = a.conn_mut();
        let mut failed = false;
        let mut changed = false;
        for name in &readback {
            match conn
                .query_internal(&format!("SELECT @@session.{name}"))
                .await
            {
                Ok(rows) => {
                    let v = rows.first().and_then(|r| r.first()).cloned().flatten();
                    changed |= conn
                        .vars
                        .set_var(name.as_bytes(), v.unwrap_or_default().as_bytes());
                }
                Err(_) => failed = true,
            }
        }
        if changed {
            // As after a statement whose changes the server reported.
            super::binding::adopt_vars(&mut self.vars, &conn.vars);
        }
        let mut t = self
            .client
            .tracking
            .take()
            .unwrap_or_else(|| Box::new(conn.tracking_defaults.clone()));
        for (name, value) in self.client.pending_tracking.drain(..) {
            t.set(name.as_bytes(), &value);
        }
        for (name, literal) in &assigned {
            if literal.is_some() {
                continue;
            }
            match conn
                .query_internal(&format!("SELECT @@session.{name}"))
                .await
            {
                Ok(rows) => {
                    if let Some(Some(v)) = rows.first().and_then(|r| r.first()) {
                        t.set(name.as_bytes(), v.as_bytes());
                    }
                }
                Err(_) => failed = true,
            }
        }
        self.client.tracking = Some(t);
        if failed || conn.restore_tracking().await.is_err() {
            self.detach_discard();
            return false;
        }
        true
    }
}
