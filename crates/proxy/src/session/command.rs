//! The command loop: read a command, dispatch it, and the commands that
//! start the session over (COM_RESET_CONNECTION, COM_CHANGE_USER).

use super::Session;
use crate::errors::SessionError;
use crate::frontend;
use sextant_backend::SessionVars;
use sextant_protocol::codec::Reader;
use sextant_protocol::consts::{cap, com, mariadb_cap, status};
use sextant_protocol::packets::write_simple_ok;
use sextant_protocol::tracker::Expect;
use sextant_routing::Pins;
use sextant_routing::Target;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Buffer capacity a session keeps between statements.
const KEEP_BUFFER: usize = 64 << 10;

pub(super) enum Flow {
    Continue,
    Quit,
}

impl Session {
    /// The wait_timeout the client set on its session, which sextant
    /// enforces (server connections keep their own).
    fn client_wait_timeout(&self) -> Option<Duration> {
        if self.vars.client_side.is_empty() {
            return None;
        }
        let v = self.vars.client_side.get("wait_timeout")?;
        v.parse::<u64>().ok().map(Duration::from_secs)
    }

    /// Whether the session may end now for a shutdown: no transaction
    /// open (nor one the client started that no server has seen yet).
    fn may_end(&self) -> bool {
        !self.in_transaction() && self.pending_begin.is_none() && self.dist.is_none()
    }

    /// Ends the session for a shutdown with error 1053: as the answer to
    /// the client's next command if it comes within a moment (a busy
    /// client, e.g. one that just committed, sends it at once, and gets a
    /// well-formed answer it can retry elsewhere), else unasked (sequence
    /// 0, as MySQL's own disconnect errors).
    async fn end_for_shutdown(&mut self) {
        const GRACE: Duration = Duration::from_millis(200);
        let e = SessionError::ServerShutdown;
        tracing::debug!(parent: &self.span, "ending the session: shutting down");
        if self.client.rbuf.is_empty()
            && !matches!(
                tokio::time::timeout(GRACE, self.client.fill()).await,
                Ok(Ok(()))
            )
        {
            let _ = self.client.send_error(0, &e).await;
            return;
        }
        let mut payload = std::mem::take(&mut self.payload);
        if self.client.read_packet(&mut payload).await.is_ok()
            && payload.first() != Some(&sextant_protocol::consts::com::QUIT)
        {
            let _ = self.client.send_error(1, &e).await;
        }
    }

    /// The SQL of a COM_QUERY or COM_STMT_EXECUTE, and its digest's key
    /// when already known.
    fn statement_sql<'p>(&'p self, payload: &'p [u8]) -> Option<(&'p [u8], Option<u64>)> {
        match payload.first() {
            Some(&com::QUERY) => Some((&payload[1..], self.digest_key)),
            Some(&com::STMT_EXECUTE) => payload
                .get(1..5)
                .and_then(|b| {
                    self.stmts
                        .get(&u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                })
                .map(|st| (st.sql(), st.digest_key())),
            _ => None,
        }
    }

    fn count_digest(&self, payload: &[u8], max: usize, took: Duration, failed: bool) {
        let Some((sql, key)) = self.statement_sql(payload) else {
            return;
        };
        let (rows, error, ran) = self.ran;
        crate::digests::record(
            sql,
            self.lex_mode(),
            key,
            max,
            took.as_micros() as u64,
            rows,
            error || failed,
            ran,
        );
    }

    /// The slow-statement log: a statement's digest (no values), who ran
    /// it and how long it took.
    fn log_slow(&self, payload: &[u8], took: Duration) {
        let Some((sql, _)) = self.statement_sql(payload) else {
            return;
        };
        let mut digest = String::new();
        sextant_sql::digest::digest(sql, self.lex_mode(), &mut digest);
        tracing::warn!(
            target: "sextant::slow",
            parent: &self.span,
            ms = took.as_secs_f64() * 1000.0,
            db = self.vars.schema.as_deref().unwrap_or(""),
            prepared = payload.first() == Some(&com::STMT_EXECUTE),
            "slow statement: {digest}"
        );
    }

    pub(super) async fn serve(&mut self) {
        loop {
            if crate::shutdown::requested() && self.may_end() {
                self.end_for_shutdown().await;
                return;
            }
            if let Some(limit) = self.idle_trx.filter(|_| self.in_transaction()) {
                if self.client.rbuf.is_empty() {
                    // fill() is cancel-safe: what arrives stays buffered.
                    match tokio::time::timeout(limit, self.client.fill()).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => return self.close_with(e).await,
                        Err(_) => {
                            let e = SessionError::IdleInTransaction(limit.as_millis() as u64);
                            tracing::info!(parent: &self.span, "{e}");
                            // Closing the server connection rolls the
                            // transaction back. The error goes out with
                            // sequence 0, as MySQL's own 4031 does.
                            self.detach_discard();
                            // Closing each branch's connection rolls it
                            // back too.
                            self.dist = None;
                            let _ = self.client.send_error(0, &e).await;
                            return;
                        }
                    }
                }
            }
            if let Some(deadline) = self.hold_until {
                if self.client.rbuf.is_empty() {
                    // fill() is cancel-safe (read_buf), for TLS too: bytes
                    // are either in rbuf or still in the stream.
                    tokio::select! {
                        r = self.client.fill() => {
                            if let Err(e) = r {
                                return self.close_with(e).await;
                            }
                        }
                        _ = tokio::time::sleep_until(deadline) => {
                            self.release();
                            continue;
                        }
                    }
                }
            }
            if self.client.rbuf.is_empty() {
                // Waiting for the next command: a shutdown ends the wait
                // (outside a transaction), and so does the wait_timeout
                // the client set, as the server's would.
                let limit = self.client_wait_timeout();
                let may_end = self.may_end();
                if may_end || limit.is_some() {
                    // select! builds every branch's future, disabled ones
                    // too: a Sleep built and dropped before every command
                    // read the clock each time (~120 instructions a
                    // statement). An async block reads it only if polled.
                    let idle = async move {
                        match limit {
                            Some(limit) => tokio::time::sleep(limit).await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        r = self.client.fill() => {
                            if let Err(e) = r {
                                return self.close_with(e).await;
                            }
                        }
                        _ = crate::shutdown::wait(), if may_end => continue,
                        _ = idle, if limit.is_some() => {
                            // The connection closes; the client learns it on
                            // its next read.
                            tracing::info!(parent: &self.span, "idle past the wait_timeout the client set ({} s): closing", limit.map_or(0, |l| l.as_secs()));
                            return;
                        }
                    }
                }
            }
            let mut payload = std::mem::take(&mut self.payload);
            self.client.servers_packet = self.shared.servers_packet.load(Ordering::Relaxed);
            let r = self.client.read_packet(&mut payload).await;
            if matches!(r, Ok(0)) {
                self.direct_statement_id(&mut payload);
            }
            let flow = match r {
                Ok(0) if self.slow.is_none() && self.digests.is_none() => {
                    self.command(&payload).await
                }
                Ok(0) => {
                    let started = std::time::Instant::now();
                    self.ran = (0, false, crate::digests::Ran::Other);
                    self.digest_key = None;
                    let flow = self.command(&payload).await;
                    let took = started.elapsed();
                    if self.slow.is_some_and(|limit| took > limit) {
                        self.log_slow(&payload, took);
                    }
                    if let Some(max) = self.digests {
                        self.count_digest(&payload, max, took, flow.is_err());
                    }
                    flow
                }
                Ok(seq) => Err(SessionError::OutOfOrder {
                    expected: 0,
                    got: seq,
                }),
                // Read past (not under compression, where frames cannot
                // be skipped unread): the session goes on, and the client
                // may retry when the other large statements are done.
                Err(e @ SessionError::StatementMemory { .. })
                    if self.client.compression().is_none() =>
                {
                    let seq = self.client.last_seq.wrapping_add(1);
                    tracing::info!(parent: &self.span, "statement refused: {e}");
                    self.client
                        .send_error(seq, &e)
                        .await
                        .map(|_| Flow::Continue)
                }
                Err(e) => Err(e),
            };
            self.payload = payload;
            // A large statement grew the buffers; an idle session must not
            // keep them (there may be thousands of sessions).
            let mut freed = 0;
            if self.payload.capacity() > KEEP_BUFFER {
                freed += self.payload.capacity();
                self.payload = Vec::with_capacity(256);
            }
            if self.scratch.capacity() > KEEP_BUFFER {
                freed += self.scratch.capacity();
                self.scratch = Vec::new();
            }
            freed += self.client.shrink_idle(KEEP_BUFFER);
            if freed > 0 {
                crate::memory::freed(freed);
            }
            match flow {
                Ok(Flow::Continue) => {}
                Ok(Flow::Quit) => return,
                Err(e) => return self.close_with(e).await,
            }
        }
    }

    /// Ends the session for `e`: the client is told why, unless it is gone.
    async fn close_with(&mut self, e: SessionError) {
        match &e {
            SessionError::ClientClosed | SessionError::ClientIo(_) => {
                tracing::debug!(parent: &self.span, "client gone: {e}");
                return;
            }
            _ => {
                tracing::info!(parent: &self.span, "closing session: {e}");
                self.shared
                    .counters
                    .client_errors
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        // A refused statement of several frames is answered after its
        // last (read past by the client), as a server would.
        let seq = match e {
            SessionError::PacketTooLarge { .. } => self.client.last_seq.wrapping_add(1),
            _ => 1,
        };
        let _ = self.client.send_error(seq, &e).await;
        if matches!(
            e,
            SessionError::PacketTooLarge { .. }
                | SessionError::StatementMemory { .. }
                | SessionError::Uncompress(_)
                | SessionError::OutOfOrder { .. }
                | SessionError::Malformed(_)
        ) {
            // Read what the client is still sending, so that closing does
            // not reset the connection before it reads the error.
            self.client.drain_for(Duration::from_millis(500)).await;
        }
    }

    /// MariaDB's direct execution: a statement command naming id
    /// 0xFFFFFFFF means the statement this connection prepared last
    /// (Connector/J sends PREPARE and EXECUTE in one write that way). It
    /// is given the client id of the session's last successful prepare; after
    /// a failed one it stays unknown, as on the server.
    fn direct_statement_id(&self, p: &mut [u8]) {
        const LAST: [u8; 4] = [0xFF; 4];
        let stmt_command = matches!(
            p.first(),
            Some(
                &com::STMT_EXECUTE
                    | &com::STMT_BULK_EXECUTE
                    | &com::STMT_SEND_LONG_DATA
                    | &com::STMT_CLOSE
                    | &com::STMT_RESET
                    | &com::STMT_FETCH
            )
        );
        if !stmt_command || p.get(1..5) != Some(&LAST[..]) {
            return;
        }
        if let Some(id) = self.last_prepared {
            p[1..5].copy_from_slice(&id.to_le_bytes());
        }
    }

    /// Handles one command. Errors returned here end the session; errors
    /// the client can live with are sent as error packets and the session
    /// goes on.
    async fn command(&mut self, p: &[u8]) -> Result<Flow, SessionError> {
        let Some(&cmd) = p.first() else {
            return Err(SessionError::Malformed(
                sextant_protocol::ProtoError::Truncated("command"),
            ));
        };
        self.shared.counters.queries.fetch_add(1, Ordering::Relaxed);
        self.user.statements.fetch_add(1, Ordering::Relaxed);
        match cmd {
            com::QUIT => return Ok(Flow::Quit),
            com::PING => {
                write_simple_ok(&mut self.client.out, 1, self.status);
                self.client.flush().await?;
            }
            com::QUERY => self.query(p).await?,
            com::PROCESS_KILL => {
                let id = match p.get(1..5) {
                    Some(b) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64,
                    None => u64::MAX,
                };
                Box::pin(self.kill(crate::kill::KillStatement::Connection(id))).await?
            }
            com::INIT_DB | com::FIELD_LIST | com::STATISTICS => {
                if cmd == com::INIT_DB {
                    if let Some(e) = self.schema_refusal(&p[1..]) {
                        return self.reply_error(e).await.map(|_| Flow::Continue);
                    }
                }
                let expect = match cmd {
                    com::FIELD_LIST => Expect::FieldList,
                    _ => Expect::Single,
                };
                let sent = self.forward(Target::Primary, p, expect, None).await?;
                self.settle(sent).await?;
                self.after_statement();
            }
            com::SET_OPTION => {
                let mut r = Reader::new(p);
                r.u8("command").map_err(SessionError::Malformed)?;
                match r.u16("option").map_err(SessionError::Malformed)? {
                    0 => self.vars.multi_statements = true,
                    1 => self.vars.multi_statements = false,
                    _ => {
                        return self
                            .reply_error(SessionError::UnknownCommand(cmd))
                            .await
                            .map(|_| Flow::Continue)
                    }
                }
                // A connection the session holds runs its next statement
                // without being brought up to date (Connector/J's batches:
                // option on, a multi-statement, option off, back to back).
                if let Some(a) = self.binding.direct_mut() {
                    if a.conn().vars.multi_statements != self.vars.multi_statements {
                        if let Err(e) = Box::pin(a.conn_mut().sync_to(&self.vars)).await {
                            self.detach_discard();
                            return self.reply_error(e.into()).await.map(|_| Flow::Continue);
                        }
                    }
                }
                self.local_eof().await?;
            }
            com::RESET_CONNECTION => {
                Box::pin(self.reset_session()).await;
                write_simple_ok(&mut self.client.out, 1, self.status);
                self.client.flush().await?;
            }
            com::CHANGE_USER => Box::pin(self.change_user(p)).await?,
            com::STMT_PREPARE => self.prepare(p).await?,
            com::STMT_EXECUTE => self.execute(p).await?,
            com::STMT_BULK_EXECUTE
                if self.flavor.mariadb & mariadb_cap::STMT_BULK_OPERATIONS != 0 =>
            {
                self.bulk_execute(p).await?
            }
            com::STMT_SEND_LONG_DATA => self.long_data(p).await?,
            com::STMT_CLOSE => self.stmt_close(p)?,
            com::STMT_RESET => self.stmt_reset(p).await?,
            com::STMT_FETCH => self.fetch(p).await?,
            other => {
                self.reply_error(SessionError::UnknownCommand(other))
                    .await?
            }
        }
        let other = match cmd {
            // (A statement or an execution records itself.)
            com::QUERY | com::STMT_EXECUTE | com::PING | com::STMT_CLOSE | com::STMT_PREPARE => {
                None
            }
            com::INIT_DB => Some(("session_change", "a change of database")),
            com::STMT_BULK_EXECUTE | com::STMT_FETCH => Some((
                "prepared_statement",
                "a prepared statement's bulk execution or fetch",
            )),
            _ => Some(("other", "a command sextant does not replay")),
        };
        if let Some((kind, what)) = other {
            self.record_other(kind, what);
        }
        Ok(Flow::Continue)
    }

    /// COM_RESET_CONNECTION: the session starts over, keeping its user and
    /// database. A connection carrying state that cannot be undone by
    /// replaying variables is reset on the server too.
    async fn reset_session(&mut self) {
        if self.pinned() {
            if let Some(a) = self.binding.direct_mut() {
                if a.conn_mut().reset().await.is_err() {
                    self.detach_discard();
                }
            }
        }
        self.release();
        // A distributed transaction's branches are closed, which rolls
        // them back, as a reset does a transaction.
        self.dist = None;
        self.pending_begin = None;
        self.pins = Pins::empty();
        self.stmts.clear();
        self.client.tracking = None;
        self.client.write_timeout = None;
        self.client.read_timeout = None;
        self.last_insert_id = 0;
        self.last_insert_conn = None;
        let schema = self.vars.schema.take();
        self.vars = SessionVars {
            schema,
            multi_statements: self.flavor.caps & cap::MULTI_STATEMENTS != 0,
            ..Default::default()
        };
        self.status = status::AUTOCOMMIT;
    }

    /// COM_CHANGE_USER, as MariaDB does it: the session starts over, then
    /// the new user is checked like a login (its plugin, its connection
    /// limit, its database). A change that fails leaves the session open
    /// as the old user, with its database and character set.
    async fn change_user(&mut self, p: &[u8]) -> Result<(), SessionError> {
        let cu = frontend::parse_change_user(
            p,
            self.flavor.caps | cap::SECURE_CONNECTION | cap::PLUGIN_AUTH,
        )?;
        Box::pin(self.reset_session()).await;
        let rt = self.shared.runtime();
        let auth = self.shared.auth.load_full();
        let mut seq = 1;
        let checked = frontend::authenticate(
            &mut self.client,
            &**rt,
            &auth,
            frontend::Credentials {
                user: &cu.user,
                plugin: cu.plugin.as_deref(),
                response: &cu.auth_response,
                nonce: &self.nonce,
            },
            &mut seq,
        )
        .await?;
        let addr = self.client.peer.ip();
        let Some(user) = rt.users.get(&cu.user).cloned().filter(|_| checked.ok) else {
            let e = SessionError::AccessDenied {
                user: cu.user.clone(),
                host: frontend::client_host(&self.client),
                using_password: checked.using_password,
            };
            tracing::info!(parent: &self.span, "change of user refused: {e}");
            let locked = auth.guard.failed(addr);
            self.client.send_error(seq, &e).await?;
            // Guessing passwords this way meets the same lockout as
            // logging in.
            return if locked {
                Err(SessionError::ClientClosed)
            } else {
                Ok(())
            };
        };
        auth.guard.succeeded(addr);
        drop(rt);
        if user.require_tls && !self.client.stream.is_tls() {
            let e = SessionError::InsecureTransport(user.name.to_string());
            return self.client.send_error(seq, &e).await;
        }
        let seat = match super::Seat::take(&user, self.shared.user_limit(user.max_connections)) {
            Ok(s) => s,
            Err(limit) => {
                let e = SessionError::UserConnections {
                    user: user.name.clone(),
                    max: limit,
                };
                tracing::info!(parent: &self.span, "{e}");
                return self.client.send_error(seq, &e).await;
            }
        };
        // The old user's, kept until the new one's database is checked.
        let old = (
            std::mem::replace(&mut self.user, user),
            self.seat.replace(seat),
            self.group.clone(),
            self.vars.schema.take(),
            self.flavor.charset,
        );
        self.group = self.user.group.clone();
        if let Some(cs) = cu.charset {
            self.flavor.charset = cs;
        }
        self.vars.schema = cu.database.map(|d| d.into());
        if self.vars.schema.is_some() {
            if let Err(e) = self.attach(Target::Primary).await {
                self.detach_discard();
                (
                    self.user,
                    self.seat,
                    self.group,
                    self.vars.schema,
                    self.flavor.charset,
                ) = old;
                return self.client.send_error(seq, &e).await;
            }
            self.after_statement();
        }
        self.span.record("user", self.user.name.as_str());
        // KILL rights and KILL QUERY's server account follow the new user.
        if let Some(prev) = self.registered.take() {
            let (id, peer, fd) = (prev.id(), prev.handle.peer, prev.handle.fd());
            drop(prev);
            self.registered = Some(crate::kill::Sessions::register(
                &self.shared,
                id,
                self.user.clone(),
                peer,
                fd,
            ));
        }
        write_simple_ok(&mut self.client.out, seq, self.status);
        self.client.flush().await
    }
}
