//! A session's KILL statements: carried out by sextant with its own
//! connection ids (the registry and the parser are `crate::kill`), and
//! refused inside dynamic SQL.

use super::query::Next;
use super::Session;
use crate::errors::SessionError;
use sextant_routing::Target;
use sextant_sql::{Classification, Flags, Kind};

impl Session {
    /// A text statement that is a KILL, or hides one where sextant cannot
    /// carry it out (dynamic SQL, among several statements): carried out
    /// or refused. None: it is not one, and runs as usual.
    pub(super) async fn intercept_kill(
        &mut self,
        c: &Classification<'_>,
        p: &[u8],
        at: usize,
    ) -> Option<Result<Next, SessionError>> {
        let done = |r: Result<(), SessionError>| Some(r.map(|()| Next::Done));
        if c.flags.contains(Flags::DYNAMIC_KILL) {
            return done(self.reply_error(SessionError::KillNotAlone).await);
        }
        if c.flags.contains(Flags::SQL_PREPARE) && c.flags.contains(Flags::MULTI) {
            let mode = self.lex_mode();
            let sql = &p[at..];
            let hidden = sextant_sql::statement_spans(sql, mode)
                .into_iter()
                .any(|r| sextant_sql::dynamic_source(&sql[r], mode).is_some());
            if hidden {
                return done(self.reply_error(SessionError::DynamicSqlNotAlone).await);
            }
        }
        if c.flags.contains(Flags::KILL) {
            return Some(Ok(Next::Instead(self.kills_among(p, at).await)));
        }
        if c.kind == Kind::Kill {
            return done(Box::pin(self.kill(crate::kill::parse(&p[at..]))).await);
        }
        None
    }

    /// `PREPARE s FROM @v` or `EXECUTE IMMEDIATE @v` whose text, read from
    /// the server, is a KILL (refused, as a KILL must be alone to be
    /// carried out with sextant's ids), or reaches what no client may
    /// (`guard.rs`).
    pub(super) async fn dynamic_text_refused(
        &mut self,
        c: &Classification<'_>,
        target: Target,
        sql: &[u8],
    ) -> Option<Result<(), SessionError>> {
        if !matches!(c.kind, Kind::Prepare | Kind::Execute) {
            return None;
        }
        let src = sextant_sql::dynamic_source(sql, self.lex_mode())?;
        let reach = Box::pin(self.dynamic_text_reach(target, src)).await;
        let refusal = match reach.contains(Flags::DYNAMIC_KILL) {
            true => Some(SessionError::KillNotAlone),
            false => self.held_refusal(reach),
        }?;
        Some(self.reply_error(refusal).await)
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
    pub(super) async fn carry_out_kill(
        &mut self,
        k: crate::kill::KillStatement,
    ) -> Result<(), SessionError> {
        use crate::kill::{Found, KillStatement};
        let (id, query_only) = match k {
            KillStatement::Query(id) => (id, true),
            KillStatement::Connection(id) => (id, false),
            // The KILL itself is the statement running: it interrupts
            // itself, as on the server.
            KillStatement::Own { query: true } => return Err(SessionError::SelfInterrupted),
            KillStatement::Own { query: false } => match &self.registered {
                Some(r) => (r.id() as u64, false),
                None => return Err(SessionError::KillUnsupported),
            },
            KillStatement::Unsupported => return Err(SessionError::KillUnsupported),
            KillStatement::Expression => return Err(SessionError::KillExpression),
        };
        let Ok(id32) = u32::try_from(id) else {
            return Err(SessionError::NoSuchThread(id));
        };
        // Another instance of the fleet holds it (the id's high byte).
        if let Some(r) =
            crate::fleet::remote_kill(&self.shared, id32, query_only, Some(&self.user.name)).await
        {
            return r;
        }
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

    /// What dynamic SQL whose text lives on the server connection (a
    /// user variable, an expression of them) reaches
    /// (`sextant_sql::reach_of`): its text is read there first.
    /// (MariaDB allows no subquery or stored function in such an
    /// expression: reading it changes nothing.) Unknown: nothing, and the
    /// statement runs as it would have (a server that cannot read the
    /// text cannot run it either).
    pub(super) async fn dynamic_text_reach(
        &mut self,
        target: sextant_routing::Target,
        src: &[u8],
    ) -> Flags {
        if self.attach(target).await.is_err() {
            return Flags::empty();
        }
        let Some(a) = self.binding.direct_mut() else {
            return Flags::empty();
        };
        let q = format!("SELECT {}", String::from_utf8_lossy(src));
        match a.conn_mut().query_internal(&q).await {
            Ok(rows) => rows
                .first()
                .and_then(|r| r.first())
                .and_then(|v| v.as_deref())
                .map_or(Flags::empty(), |t| sextant_sql::reach_of(t.as_bytes())),
            Err(sextant_backend::BackendError::Server { .. }) => Flags::empty(),
            Err(_) => {
                self.detach_discard();
                Flags::empty()
            }
        }
    }

    /// A packet of several statements with KILLs among them: sextant
    /// carries each KILL out, in order, and the server runs the packet with
    /// `DO 0` in each one's place, so that every statement keeps its own
    /// result in the client's stream. A KILL that fails becomes a SIGNAL
    /// of its error: the server stops there, as it would at a failed
    /// statement, and later KILLs are not carried out. (The statements
    /// before a KILL run after it.) Returns that packet.
    pub(super) async fn kills_among(&mut self, p: &[u8], at: usize) -> Vec<u8> {
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
        out
    }
}
