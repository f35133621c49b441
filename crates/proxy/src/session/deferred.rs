//! A BEGIN answered by sextant and sent with the transaction's first
//! statement, on a layout of one group. The client's BEGIN costs no round
//! trip of its own: sextant answers it as the server would (an OK with
//! the transaction flag), holds its text, and writes it ahead of the next
//! statement in the same write. A transaction that ends before anything
//! ran in it (a plain COMMIT or ROLLBACK) is ended by sextant, and no
//! server hears of it.
//!
//! Only a read rides in the same write as the BEGIN: if the BEGIN failed
//! (a KILL QUERY landing in the instant), the statement behind it has
//! already run on its own, with autocommit; a read that changes nothing
//! is dropped unseen and the BEGIN's error is the client's answer. Any
//! other statement waits for the BEGIN's answer before it is sent.
//!
//! Sharded layouts hold BEGIN back too (shard.rs), to learn the group the
//! transaction runs in; this is the plain layout's counterpart.

use super::forward::Outcome;
use super::query::Next;
use super::Session;
use crate::errors::SessionError;
use sextant_protocol::codec::{begin_packet, finish_packet, HEADER_LEN};
use sextant_protocol::consts::{cap, com, status};
use sextant_protocol::tracker::Expect;
use sextant_sql::{Flags, Kind, LexMode, Lexer, TokenKind};

/// The status flags an OK for BEGIN, COMMIT or ROLLBACK carries from the
/// session: the ones a statement's run adds (no index used, slow, the last
/// row sent) are the statement's own.
const SESSION_STATUS: u16 = status::AUTOCOMMIT | status::NO_BACKSLASH_ESCAPES;

impl Session {
    /// A plain layout's BEGIN or empty COMMIT / ROLLBACK (`kind` with
    /// `flags`, as text or prepared) answered by sextant; None: the
    /// statement runs as usual.
    pub(super) async fn defer_begin(
        &mut self,
        kind: Kind,
        flags: Flags,
        sql: &[u8],
    ) -> Option<Result<Next, SessionError>> {
        if self.sharding.is_some() || flags.contains(Flags::MULTI) {
            return None;
        }
        match kind {
            Kind::Begin if self.may_defer() && plain_begin(sql, self.lex_mode()) => {
                // A BEGIN inside a transaction that ran nothing ends that
                // one and opens another: the same empty transaction.
                let mut text = self
                    .pending_begin
                    .take()
                    .unwrap_or_else(|| std::mem::take(&mut self.begin_text));
                text.clear();
                text.extend_from_slice(sql);
                self.pending_begin = Some(text);
                self.status = (self.status & SESSION_STATUS) | status::IN_TRANS;
            }
            Kind::Commit | Kind::Rollback
                if self.pending_begin.is_some()
                    && !self.binding.in_transaction()
                    && plain_end(sql, self.lex_mode()) =>
            {
                self.drop_begin();
                self.status &= SESSION_STATUS;
            }
            _ => return None,
        }
        Some(self.local_ok().await.map(|()| Next::Done))
    }

    /// Whether a BEGIN now may be held back: nothing the session holds on
    /// a connection (a transaction, locks, SET TRANSACTION for the next
    /// one, anything the server keeps) that a BEGIN there would act on,
    /// and a client whose session tracking would not be told of it.
    fn may_defer(&self) -> bool {
        !self.pinned()
            && self
                .client
                .tracking
                .as_ref()
                .is_none_or(|t| !t.transaction_info && !t.state_change)
    }

    /// Forgets the held-back BEGIN, keeping its buffer.
    pub(super) fn drop_begin(&mut self) {
        if let Some(t) = self.pending_begin.take() {
            self.begin_text = t;
        }
    }

    /// Sends the held-back BEGIN to the attached connection: with the
    /// statement in `scratch` in the same write when the statement may
    /// ride along (a read), else alone. None: the BEGIN ran, and the
    /// statement's answer (sent or not, as `sent` says) is next. Otherwise
    /// what became of the statement instead.
    pub(super) async fn send_begin(
        &mut self,
        expect: Expect,
    ) -> Result<(Option<Outcome>, bool), SessionError> {
        let Some(begin) = self.pending_begin.take() else {
            return Ok((None, false));
        };
        let rides = self.stmt.begin_rides
            && self.stmt.wait.pending.is_none()
            && matches!(expect, Expect::Query | Expect::Execute);
        let Some(a) = self.binding.direct_mut() else {
            self.pending_begin = Some(begin);
            return Ok((Some(Outcome::Reported), false));
        };
        if a.server.role() != sextant_backend::Role::Primary {
            // A read a hint sent to a replica: outside the transaction,
            // as it would be with the BEGIN run on the primary.
            self.pending_begin = Some(begin);
            return Ok((None, false));
        }
        let mut out = std::mem::take(&mut self.begin_out);
        out.clear();
        // The client's own text, as a COM_QUERY of this connection's
        // form (no query attributes).
        let at = begin_packet(&mut out);
        out.push(com::QUERY);
        if a.conn().negotiated & cap::QUERY_ATTRIBUTES != 0 {
            out.extend_from_slice(&[0, 1]);
        }
        out.extend_from_slice(&begin);
        finish_packet(&mut out, at, 0);
        let begin_len = out.len();
        if rides {
            out.extend_from_slice(&self.scratch);
        }
        let sent_us = match self.trx_log.max {
            0 => 0,
            _ => super::replay::now_us(),
        };
        if let Some(r) = &self.registered {
            r.handle
                .running_on(&self.group, &a.server, a.conn().connection_id);
        }
        let written = a.conn_mut().write_raw(&out).await;
        let answer = match written {
            Ok(()) => crate::checksum::read_answer_or_error(a.conn_mut(), Expect::Query).await,
            Err(e) => Err(e),
        };
        if let Some(r) = &self.registered {
            r.handle.idle();
        }
        let result = match answer {
            // The connection failed: nothing reached the client, and the
            // transaction has not begun anywhere; the statement may run
            // again (with its BEGIN) where its plan allows.
            Err(e) => {
                self.pending_begin = Some(begin);
                // As a BEGIN with no transaction open: it may run again.
                self.stmt.clean_begin = true;
                Ok((Some(self.send_failed(e)), false))
            }
            Ok((_, Some(e))) => {
                // The server refused the BEGIN: the client hears it on
                // this statement, and no transaction is open.
                self.begin_text = begin;
                self.status &= !status::IN_TRANS;
                if rides {
                    let skipped = match self.binding.direct_mut() {
                        Some(a) => a.conn_mut().skip_answer(expect).await.is_ok(),
                        None => false,
                    };
                    if !skipped {
                        self.detach_discard();
                    }
                }
                self.server_refused(e).await?;
                Ok((Some(Outcome::Reported), false))
            }
            Ok((sum, None)) => {
                self.record_begin(&out[HEADER_LEN..begin_len], sum, sent_us);
                self.begin_text = begin;
                Ok((None, rides))
            }
        };
        self.begin_out = out;
        result
    }
}

impl Session {
    /// The server's error for a statement sextant sent for the client,
    /// as the server gave it (code, SQLSTATE, message).
    async fn server_refused(
        &mut self,
        e: sextant_backend::BackendError,
    ) -> Result<(), SessionError> {
        let sextant_backend::BackendError::Server {
            code,
            sql_state,
            message,
            ..
        } = e
        else {
            return self.reply_error(e.into()).await;
        };
        tracing::debug!(parent: &self.span, "the held-back BEGIN failed: {code} {message}");
        self.last = self.last.refused();
        self.refusal = Some((code, message.clone()));
        sextant_protocol::packets::write_err(&mut self.client.out, 1, code, &sql_state, &message);
        self.client.flush().await
    }
}

/// `BEGIN [WORK]` or `START TRANSACTION [READ WRITE]`: a BEGIN whose
/// moment does not matter (WITH CONSISTENT SNAPSHOT takes its snapshot
/// when it runs) and whose OK carries no flag of its own (READ ONLY sets
/// one).
pub(super) fn plain_begin(sql: &[u8], mode: LexMode) -> bool {
    let mut words = [&b""[..]; 5];
    let mut n = 0;
    for t in Lexer::with_mode(sql, mode) {
        if t.kind != TokenKind::Word || n == words.len() {
            return false;
        }
        words[n] = t.text;
        n += 1;
    }
    let is = |i: usize, w: &[u8]| words[i].eq_ignore_ascii_case(w);
    match n {
        1 => is(0, b"BEGIN"),
        2 => (is(0, b"BEGIN") && is(1, b"WORK")) || (is(0, b"START") && is(1, b"TRANSACTION")),
        4 => is(0, b"START") && is(1, b"TRANSACTION") && is(2, b"READ") && is(3, b"WRITE"),
        _ => false,
    }
}

/// `COMMIT [WORK]` or `ROLLBACK [WORK]`: nothing chained, released or
/// rolled back to.
pub(super) fn plain_end(sql: &[u8], mode: LexMode) -> bool {
    let mut t = Lexer::with_mode(sql, mode);
    let first = t.next();
    let first_ok = first.is_some_and(|w| {
        w.kind == TokenKind::Word && (w.is_word("COMMIT") || w.is_word("ROLLBACK"))
    });
    let rest_ok = match t.next() {
        None => true,
        Some(w) => w.kind == TokenKind::Word && w.is_word("WORK") && t.next().is_none(),
    };
    first_ok && rest_ok
}

#[cfg(test)]
mod tests {
    use super::{plain_begin, plain_end};
    use sextant_sql::LexMode;

    #[test]
    fn begins_held_back_and_ends_answered() {
        let b = |s: &str| plain_begin(s.as_bytes(), LexMode::DEFAULT);
        let e = |s: &str| plain_end(s.as_bytes(), LexMode::DEFAULT);
        for yes in [
            "BEGIN",
            "begin work",
            "START TRANSACTION",
            "start transaction read write",
            "/* app */ BEGIN",
            "BEGIN -- x\n",
        ] {
            assert!(b(yes), "{yes}");
        }
        for no in [
            "START TRANSACTION READ ONLY",
            "START TRANSACTION WITH CONSISTENT SNAPSHOT",
            "START TRANSACTION READ WRITE, WITH CONSISTENT SNAPSHOT",
            "BEGIN NOT ATOMIC SELECT 1; END",
            "BEGIN; SELECT 1",
            "BEGIN WORK WORK",
            "XA BEGIN 'x'",
            "",
        ] {
            assert!(!b(no), "{no}");
        }
        for yes in ["COMMIT", "rollback", "COMMIT WORK", "/* x */ ROLLBACK WORK"] {
            assert!(e(yes), "{yes}");
        }
        for no in [
            "COMMIT AND CHAIN",
            "COMMIT AND NO CHAIN",
            "COMMIT RELEASE",
            "ROLLBACK TO SAVEPOINT a",
            "ROLLBACK TO a",
            "ROLLBACK WORK TO a",
            "COMMIT; SELECT 1",
            "COMMIT WORK WORK",
            "",
        ] {
            assert!(!e(no), "{no}");
        }
    }
}
