//! A text statement (COM_QUERY), top to bottom: classify, plan, run the
//! plan (with its retries), then note what the statement left behind on
//! the session.

use super::busy::Busy;
use super::forward::Work;
use super::{Pins, Session};
use crate::errors::SessionError;
use sextant_protocol::consts::{cap, status};
use sextant_protocol::packets::query_text_offset;
use sextant_routing::{plan, Command, Rule, Target};
use sextant_sql::{Flags, Kind};
use std::sync::atomic::Ordering;
use tokio::time::Instant;

impl Session {
    pub(super) async fn query(&mut self, p: &[u8]) -> Result<(), SessionError> {
        let _busy = Busy::enter();
        // Under MySQL's query attributes the text follows them.
        let at = match self.flavor.caps & cap::QUERY_ATTRIBUTES {
            0 => 1,
            _ => match query_text_offset(p, true) {
                Ok(at) => at,
                Err(e) => return self.reply_error(SessionError::Malformed(e)).await,
            },
        };
        let mut c = self.group.classify_in(&p[at..], || self.lex_mode());
        if self.learn_names(&c, &p[at..]).await {
            c = self.group.classify_in(&p[at..], || self.lex_mode());
        }
        if c.flags.contains(Flags::DYNAMIC_KILL) {
            return self.reply_error(SessionError::KillNotAlone).await;
        }
        if c.flags.contains(Flags::SQL_PREPARE) && c.flags.contains(Flags::MULTI) {
            let mode = self.lex_mode();
            let sql = &p[at..];
            let hidden = sextant_sql::statement_spans(sql, mode)
                .into_iter()
                .any(|r| sextant_sql::dynamic_source(&sql[r], mode).is_some());
            if hidden {
                return self.reply_error(SessionError::DynamicSqlNotAlone).await;
            }
        }
        if c.flags.contains(Flags::KILL) {
            return Box::pin(self.kills_among(p, at)).await;
        }
        if c.kind == Kind::Kill {
            return Box::pin(self.kill(crate::kill::parse(&p[at..]))).await;
        }
        if let Some(sh) = self.sharding.clone() {
            match Box::pin(self.shard_query(&sh, &c, &p[at..], p)).await? {
                super::shard::Sharded::Done => return Ok(()),
                super::shard::Sharded::Continue => {}
            }
        }
        let answered;
        let p = match c.flags.contains(Flags::SESSION_INFO) {
            true => match self.answer_session_info(p, at) {
                Some(q) => {
                    answered = q;
                    &answered[..]
                }
                None => p,
            },
            false => p,
        };
        let plan = plan(
            &c,
            self.facts(),
            &self.user.policy(),
            self.group.plan_facts(),
            Command::Query,
            &mut self.cursor,
        );
        sextant_admin::traffic::statement(c.kind, plan.rule);
        if let Some(r) = plan.refuse {
            return self.reply_error(SessionError::WriteOnReplica(r)).await;
        }
        self.require(&plan);
        if plan.rule == Rule::Hint && plan.target == Target::Replica && !self.pinned() {
            // A READONLY hint outranks the hold window after a write: the
            // window is there for reading one's own writes, which the
            // read's consistency requirement (above) already looks after.
            self.primary_reads_until = None;
        }
        if c.kind == Kind::Show {
            if let Some(show) = sextant_sql::session_info::session_show(&p[at..], self.lex_mode()) {
                return Box::pin(self.session_show(show, plan.target, &p[at..], false)).await;
            }
        }
        if plan.restore_insert_id {
            if let Err(e) = self.attach(plan.target).await {
                return self.reply_error(e).await;
            }
            Box::pin(self.restore_last_insert_id()).await;
        }
        tracing::trace!(parent: &self.span, to = ?plan.target, rule = plan.rule.name(), "COM_QUERY {:?}", String::from_utf8_lossy(&p[at..p.len().min(at + 200)]));
        let retrack = match c.flags.contains(Flags::TRACKING) && c.kind == Kind::Set {
            true => self.tracking_set(&p[at..]),
            false => None,
        };
        if matches!(c.kind, Kind::Prepare | Kind::Execute) {
            if let Some(src) = sextant_sql::dynamic_source(&p[at..], self.lex_mode()) {
                if Box::pin(self.dynamic_text_is_kill(plan.target, src)).await {
                    return self.reply_error(SessionError::KillNotAlone).await;
                }
            }
        }
        let res = self.run_plan(&plan, Work::Query(p)).await;
        self.read_done();
        if let Some((assigned, before)) = retrack {
            let ran = matches!(&res, Ok(Some(r)) if !r.error);
            Box::pin(self.tracking_done(assigned, before, ran)).await;
        }
        let Some(res) = res? else { return Ok(()) };
        self.note_insert_id(&res);
        if c.kind != Kind::Set {
            // The statement after SET insert_id has run: it used it.
            self.pins.remove(Pins::INSERT_ID);
        }
        if c.flags.contains(Flags::FOUND_ROWS) {
            self.pins.insert(Pins::FOUND_ROWS);
        } else {
            self.pins.remove(Pins::FOUND_ROWS);
        }
        if plan.target == Target::Primary && !c.read_only {
            self.primary_reads_until = Some(Instant::now() + self.hold);
        }
        if c.flags.contains(Flags::CATALOGUE) {
            // A new view or function may change how reads classify.
            self.group.catalogue_stale.store(true, Ordering::Relaxed);
        }
        if c.pins_session() {
            self.pins.insert(Pins::OPAQUE);
        }
        if c.flags.contains(Flags::LOCK_TABLES) {
            self.pins.insert(Pins::LOCK_TABLES);
        }
        if c.flags.contains(Flags::UNLOCK_TABLES) {
            self.pins.remove(Pins::LOCK_TABLES);
        }
        if c.flags.contains(Flags::NEXT_TRX) && !res.error {
            self.pins.insert(Pins::NEXT_TRX);
        } else if c.kind != Kind::Set && res.status & status::IN_TRANS == 0 {
            self.pins.remove(Pins::NEXT_TRX);
        }
        self.after_statement();
        Ok(())
    }
}

type Assigned = Vec<(&'static str, Option<Vec<u8>>)>;

/// Session status rows about the client's own connection, which the server
/// connection's rows would misdescribe.
const CLIENT_STATUS: &[&str] = &[
    "Compression",
    "Compression_algorithm",
    "Compression_level",
    "Ssl_cipher",
    "Ssl_cipher_list",
    "Ssl_default_timeout",
    "Ssl_server_not_after",
    "Ssl_server_not_before",
    "Ssl_verify_depth",
    "Ssl_verify_mode",
    "Ssl_version",
];

impl Session {
    /// A SET of the client's session tracking: its literal values apply to
    /// the statement's own report. Returns what it assigns and the settings
    /// before it.
    fn tracking_set(
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
    /// and the server connection gets sextant's own tracking back.
    async fn tracking_done(
        &mut self,
        assigned: Assigned,
        before: Option<Box<sextant_backend::Tracking>>,
        ran: bool,
    ) {
        let readback = std::mem::take(&mut self.tracking_readback);
        if !ran {
            self.client.pending_tracking.clear();
            self.client.tracking = before;
            return;
        }
        let Some(a) = self.binding.direct_mut() else {
            return;
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
        }
    }

    /// `SHOW [SESSION] STATUS | VARIABLES ...`: the server's rows, with
    /// those about the connection itself (TLS, compression, timeouts,
    /// session tracking) describing the client's.
    /// `binary`: the answer to an execute of the statement prepared.
    pub(super) async fn session_show(
        &mut self,
        show: sextant_sql::session_info::SessionShow,
        target: Target,
        sql: &[u8],
        binary: bool,
    ) -> Result<(), SessionError> {
        use sextant_protocol::compress::Algorithm;
        use sextant_protocol::packets::{coltype, write_err, write_resultset, ResultsetFormat};
        if let Err(e) = self.attach(target).await {
            return self.reply_error(e).await;
        }
        let Some(a) = self.binding.direct_mut() else {
            return Ok(());
        };
        let rows = match a
            .conn_mut()
            .query_internal(&String::from_utf8_lossy(sql))
            .await
        {
            Ok(rows) => rows,
            Err(sextant_backend::BackendError::Server {
                code,
                sql_state,
                message,
                ..
            }) => {
                write_err(&mut self.client.out, 1, code, &sql_state, &message);
                self.after_statement();
                return self.client.flush().await;
            }
            Err(e) => {
                self.detach_discard();
                return self.reply_error(e.into()).await;
            }
        };
        let tls = self.client.stream.tls_info();
        let compression = self.client.compression();
        let tracking = self
            .client
            .tracking
            .as_deref()
            .unwrap_or(&a.conn().tracking_defaults)
            .clone();
        // A pooled connection's own wait_timeout is raised above the pool's
        // idle timeout; the client's session starts from the server's
        // default (interactive_timeout for an interactive client).
        let wait_default = match show {
            sextant_sql::session_info::SessionShow::Variables
                if !self.vars.client_side.contains_key("wait_timeout")
                    && rows.iter().any(|r| {
                        r.first().cloned().flatten().as_deref() == Some("wait_timeout")
                    }) =>
            {
                let q = match self.interactive {
                    true => "SELECT @@global.interactive_timeout",
                    false => "SELECT @@global.wait_timeout",
                };
                match a.conn_mut().query_internal(q).await {
                    Ok(r) => r.first().and_then(|r| r.first().cloned().flatten()),
                    Err(_) => None,
                }
            }
            _ => None,
        };
        let client_side = &self.vars.client_side;
        let variable = |name: &str| -> Option<String> {
            let lower = name.to_ascii_lowercase();
            if let Some(which) = lower.strip_prefix("session_track_") {
                return tracking.value(which);
            }
            match client_side.get(lower.as_str()) {
                Some(v) => Some(v.to_string()),
                None if lower == "wait_timeout" => wait_default.clone(),
                None => None,
            }
        };
        let status = |name: &str| -> Option<String> {
            let on_tls = |v: &str| tls.as_ref().map_or(String::new(), |_| v.to_string());
            Some(match name {
                "Compression" => if compression.is_some() { "ON" } else { "OFF" }.into(),
                "Compression_algorithm" => match compression {
                    Some(Algorithm::Zlib) => "zlib".into(),
                    Some(Algorithm::Zstd(_)) => "zstd".into(),
                    None => String::new(),
                },
                "Compression_level" => match compression {
                    Some(Algorithm::Zstd(l)) => l.to_string(),
                    Some(Algorithm::Zlib) => "6".into(),
                    None => "0".into(),
                },
                "Ssl_cipher" => tls.as_ref().map_or(String::new(), |t| t.1.clone()),
                "Ssl_version" => tls.as_ref().map_or(String::new(), |t| t.0.to_string()),
                "Ssl_cipher_list" => match tls {
                    Some(_) => sextant_net::tls::offered_suites(),
                    None => String::new(),
                },
                // As MariaDB reports a TLS session of a client without a
                // certificate.
                "Ssl_default_timeout" => match tls {
                    Some(_) => "7200".into(),
                    None => "0".into(),
                },
                "Ssl_verify_depth" => match tls {
                    Some(_) => u64::MAX.to_string(),
                    None => "0".into(),
                },
                "Ssl_verify_mode" => match tls {
                    Some(_) => "5".into(),
                    None => "0".into(),
                },
                "Ssl_server_not_after" | "Ssl_server_not_before" => on_tls(""),
                _ => return None,
            })
        };
        use sextant_sql::session_info::{SessionShow, CLIENT_VARIABLES};
        let rows: Vec<Vec<Option<String>>> = rows
            .into_iter()
            .map(|mut row| {
                let name = row.first().cloned().flatten().unwrap_or_default();
                let value = match show {
                    SessionShow::Status
                        if CLIENT_STATUS.iter().any(|n| n.eq_ignore_ascii_case(&name)) =>
                    {
                        status(&name)
                    }
                    SessionShow::Variables
                        if CLIENT_VARIABLES
                            .iter()
                            .any(|n| n.eq_ignore_ascii_case(&name)) =>
                    {
                        variable(&name)
                    }
                    _ => None,
                };
                if let (Some(v), Some(cell)) = (value, row.get_mut(1)) {
                    *cell = Some(v);
                }
                row
            })
            .collect();
        self.after_statement();
        let format = ResultsetFormat {
            deprecate_eof: self.deprecate_eof,
            status_flags: self.status,
            extended_metadata: self.flavor.mariadb
                & sextant_protocol::consts::mariadb_cap::EXTENDED_METADATA
                != 0,
            binary,
        };
        write_resultset(
            &mut self.client.out,
            1,
            &[
                ("Variable_name", coltype::VAR_STRING),
                ("Value", coltype::VAR_STRING),
            ],
            &rows,
            format,
        );
        self.client.flush().await
    }

    /// The packet `p` (COM_QUERY or COM_STMT_PREPARE) with the client's own
    /// connection id, timeouts and session-tracking settings in place of
    /// what the server connection would answer; None if it asks nothing
    /// the server would answer differently.
    pub(super) fn answer_session_info(&self, p: &[u8], at: usize) -> Option<Vec<u8>> {
        use sextant_sql::session_info::{rewrite, Subject};
        let id = self.registered.as_ref().map(|r| r.id());
        // `IF(1, value, @@global.x)` has the column type the server gives
        // `@@x` (drivers map types: a BIGINT read as a string, say).
        let typed = |name: &str, v: &str| {
            let lit = match v {
                "ON" => "1".to_string(),
                "OFF" => "0".to_string(),
                _ if !v.is_empty() && v.bytes().all(|c| c.is_ascii_digit()) => {
                    format!("CAST({v} AS UNSIGNED)")
                }
                _ => format!("'{}'", v.replace('\\', "\\\\").replace('\'', "''")),
            };
            format!("IF(1, {lit}, @@global.{name})")
        };
        let sql = rewrite(&p[at..], self.lex_mode(), |s| match s {
            Subject::ConnectionId => id.map(|id| format!("CAST({id} AS UNSIGNED)")),
            Subject::Variable(v) => match v.strip_prefix("session_track_") {
                Some(which) => match &self.client.tracking {
                    Some(t) => t.value(which).map(|value| typed(v, &value)),
                    // Server connections track more than the client asked
                    // for; what it has is the server's default.
                    None => Some(format!("@@global.{v}")),
                },
                None => match self.vars.client_side.get(v) {
                    Some(value) => Some(typed(v, value)),
                    // A pooled connection's own is raised above the pool's
                    // idle timeout; the client's session starts from the
                    // server's default (interactive_timeout for an
                    // interactive client).
                    None if v == "wait_timeout" && self.interactive => {
                        Some("@@global.interactive_timeout".into())
                    }
                    None if v == "wait_timeout" => Some("@@global.wait_timeout".into()),
                    None => None,
                },
            },
        })?;
        let mut out = Vec::with_capacity(sql.len() + 1);
        out.extend_from_slice(&p[..at]);
        out.extend_from_slice(&sql);
        Some(out)
    }

    /// `KILL [QUERY] <id>` (and COM_PROCESS_KILL): `id` is one of sextant's
    /// sessions, never passed to a server as it is.
    pub(super) async fn kill(&mut self, k: crate::kill::KillStatement) -> Result<(), SessionError> {
        match self.carry_out_kill(k).await {
            Ok(()) => {
                crate::frontend::send_ok(&mut self.client, 1);
                self.client.flush().await
            }
            Err(e) => self.reply_error(e).await,
        }
    }

    /// Carries a KILL out among sextant's sessions; Err: what the client
    /// is told instead.
    async fn carry_out_kill(&mut self, k: crate::kill::KillStatement) -> Result<(), SessionError> {
        use crate::kill::{Found, KillStatement};
        let (id, query_only) = match k {
            KillStatement::Query(id) => (id, true),
            KillStatement::Connection(id) => (id, false),
            KillStatement::Own { query } => match &self.registered {
                Some(r) => (r.id() as u64, query),
                None => return Err(SessionError::KillUnsupported),
            },
            KillStatement::Unsupported => return Err(SessionError::KillUnsupported),
        };
        let Ok(id32) = u32::try_from(id) else {
            return Err(SessionError::NoSuchThread(id));
        };
        let handle = match self.shared.sessions.find(id32, &self.user) {
            Found::Unknown => return Err(SessionError::NoSuchThread(id)),
            Found::NotOwner => return Err(SessionError::KillDenied(id)),
            Found::Session(h) => h,
        };
        crate::kill::kill_running(&handle).await;
        if !query_only {
            self.shared.sessions.hang_up(id32);
        }
        Ok(())
    }

    /// Whether dynamic SQL whose text lives on the server connection (a
    /// user variable, an expression of them) is a KILL: its text is read
    /// there first. (MariaDB allows no subquery or stored function in such
    /// an expression: reading it changes nothing.) Unknown: false, and the
    /// statement runs as it would have.
    async fn dynamic_text_is_kill(&mut self, target: sextant_routing::Target, src: &[u8]) -> bool {
        if self.attach(target).await.is_err() {
            return false;
        }
        let Some(a) = self.binding.direct_mut() else {
            return false;
        };
        let q = format!("SELECT {}", String::from_utf8_lossy(src));
        match a.conn_mut().query_internal(&q).await {
            Ok(rows) => rows
                .first()
                .and_then(|r| r.first())
                .and_then(|v| v.as_deref())
                .is_some_and(|t| sextant_sql::is_kill(t.as_bytes())),
            Err(sextant_backend::BackendError::Server { .. }) => false,
            Err(_) => {
                self.detach_discard();
                false
            }
        }
    }

    /// A packet of several statements with KILLs among them: sextant
    /// carries each KILL out, in order, and the server runs the packet with
    /// `DO 0` in each one's place, so that every statement keeps its own
    /// result in the client's stream. A KILL that fails becomes a SIGNAL
    /// of its error: the server stops there, as it would at a failed
    /// statement, and later KILLs are not carried out. (The statements
    /// before a KILL run after it.)
    pub(super) async fn kills_among(&mut self, p: &[u8], at: usize) -> Result<(), SessionError> {
        let sql = &p[at..];
        let mut out = Vec::with_capacity(p.len());
        out.extend_from_slice(&p[..at]);
        let mut from = 0;
        let mut failed = false;
        for r in sextant_sql::kill_spans(sql, self.lex_mode()) {
            out.extend_from_slice(&sql[from..r.start]);
            let stand_in = match failed {
                true => "DO 0".to_string(),
                false => match self
                    .carry_out_kill(crate::kill::parse(&sql[r.clone()]))
                    .await
                {
                    Ok(()) => "DO 0".to_string(),
                    Err(e) => {
                        failed = true;
                        let (code, state, msg) = e.mysql();
                        let msg: String = msg.chars().take(128).collect();
                        format!(
                            "SIGNAL SQLSTATE '{state}' SET MYSQL_ERRNO = {code}, MESSAGE_TEXT = '{}'",
                            msg.replace('\\', "\\\\").replace('\'', "''")
                        )
                    }
                },
            };
            out.extend_from_slice(stand_in.as_bytes());
            from = r.end;
        }
        out.extend_from_slice(&sql[from..]);
        Box::pin(self.query(&out)).await
    }
}
