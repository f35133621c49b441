//! What a client's statement may not reach, wherever it hides (among
//! several statements, inside a stored program or compound statement,
//! as dynamic SQL, as a prepared statement): sextant's own schema, other
//! sessions' XA transactions, and a server's thread ids through KILL.
//! The statement's classification says what it holds
//! (`sextant_sql::Flags`); this decides what is refused.

use super::query::Next;
use super::Session;
use crate::errors::SessionError;
use sextant_sql::xa::{xa_statement, XaVerb, Xid};
use sextant_sql::{Classification, Flags, Kind};

/// The XA transactions a session remembers having started: enough for
/// any client's own (a transaction manager runs a few at a time).
const OWN_XIDS: usize = 64;

impl Session {
    /// A text statement refused for what it reaches; None: it runs on.
    pub(super) async fn guard(
        &mut self,
        c: &Classification<'_>,
        sql: &[u8],
    ) -> Option<Result<Next, SessionError>> {
        let e = self.reach_refusal(c, sql)?;
        Some(self.reply_error(e).await.map(|()| Next::Done))
    }

    /// Why a statement is refused for what it reaches, if it is.
    pub(super) fn reach_refusal(
        &mut self,
        c: &Classification<'_>,
        sql: &[u8],
    ) -> Option<SessionError> {
        if let Some(e) = self.held_refusal(c.flags) {
            return Some(e);
        }
        if c.kind == Kind::Xa && self.sharding.is_none() {
            return self.own_xa(sql);
        }
        None
    }

    /// A prepared statement (COM_STMT_PREPARE): refused for what it
    /// reaches, XA included (its transaction could not be followed).
    pub(super) fn prepared_refusal(&self, c: &Classification<'_>) -> Option<SessionError> {
        if c.kind == Kind::Xa {
            return Some(SessionError::XaHidden);
        }
        self.held_refusal(c.flags)
    }

    /// What the flags of a statement (or of dynamic SQL's text) say it
    /// holds that no client may run through sextant.
    pub(super) fn held_refusal(&self, f: Flags) -> Option<SessionError> {
        if f.contains(Flags::OWN_SCHEMA) {
            return Some(SessionError::OwnSchema(self.user.name.clone()));
        }
        if f.contains(Flags::INNER_KILL) {
            return Some(SessionError::KillInside);
        }
        if f.contains(Flags::XA) {
            return Some(SessionError::XaHidden);
        }
        if f.contains(Flags::INNER_DYNAMIC) && self.sharding.is_some() {
            return Some(SessionError::ShardUnsupported(
                "dynamic SQL of a variable or expression (PREPARE ... FROM @v, EXECUTE IMMEDIATE CONCAT(...)) inside a stored program or compound statement: what it runs is known only when it runs, and it could finish the XA branches sextant coordinates; spell its text out as a string literal".into(),
            ));
        }
        None
    }

    /// A database a client would make its own (at login, COM_INIT_DB):
    /// never sextant's.
    pub(super) fn schema_refusal(&self, db: &[u8]) -> Option<SessionError> {
        db.eq_ignore_ascii_case(b"sextant")
            .then(|| SessionError::OwnSchema(self.user.name.clone()))
    }

    /// XA on a layout where sextant coordinates none: a session finishes
    /// only what it started, and does not list other sessions' prepared
    /// transactions.
    fn own_xa(&mut self, sql: &[u8]) -> Option<SessionError> {
        let Some(x) = xa_statement(sql, self.lex_mode()) else {
            return Some(SessionError::XaNotOwn(
                "(its id is not one sextant can read: write it as 'gtrid'[, 'bqual'[, formatID]])"
                    .into(),
            ));
        };
        match (x.verb, x.xid) {
            (XaVerb::Recover, _) => Some(SessionError::XaRecover),
            (XaVerb::Start, Some(id)) => {
                if !self.own_xids.contains(&id) {
                    if self.own_xids.len() >= OWN_XIDS {
                        self.own_xids.remove(0);
                    }
                    self.own_xids.push(id);
                }
                None
            }
            (XaVerb::Commit | XaVerb::Rollback, Some(id)) => {
                (!self.own_xids.contains(&id)).then(|| SessionError::XaNotOwn(id.to_string()))
            }
            _ => None,
        }
    }
}

/// The XA transactions a session started, for `Session::own_xids`.
pub(super) type OwnXids = Vec<Xid>;
