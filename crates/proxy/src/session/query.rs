//! A text statement (COM_QUERY), top to bottom: classify, intercept what
//! sextant answers itself (KILL: `kill.rs`; the session's own status and
//! variables: `info.rs`), shard (`shard.rs`), plan, run the plan with its
//! retries (`forward.rs`), then apply what the statement left behind on
//! the session (`effects.rs`).

use super::busy::Busy;
use super::forward::Work;
use super::Session;
use crate::errors::SessionError;
use sextant_protocol::consts::cap;
use sextant_protocol::packets::query_text_offset;
use sextant_routing::{plan, Command, Ran, Statement};
use sextant_sql::shape::{shape, Remembered, Shaped, Shapes};
use sextant_sql::{Catalogue, Classification, Flags, Kind};
use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    /// Classifications by shape, and the buffer a statement's shape is
    /// written to, for this worker thread's sessions.
    static SHAPES: RefCell<(Vec<u8>, Shapes)> = RefCell::new((Vec::with_capacity(256), Shapes::default()));
}

/// What becomes of a statement after a step before its plan.
pub(super) enum Next {
    /// It runs as usual (in the session's current group, on a sharded
    /// layout).
    Run,
    /// It was answered.
    Done,
    /// It runs as this command instead, as if the client had sent it: a
    /// rewritten statement after the packet's own prefix, or an
    /// execution run as its text.
    Instead(Vec<u8>),
}

impl Session {
    /// A COM_QUERY: the steps before the plan, again on what one of them
    /// rewrote the statement into (KILLs among several statements, an
    /// INSERT given its ids), then the plan and its run.
    pub(super) async fn query(&mut self, p: &[u8]) -> Result<(), SessionError> {
        let _busy = Busy::enter();
        let mut instead: Vec<u8>;
        let mut p = p;
        let mut first = true;
        loop {
            let at = match self.text_at(p) {
                Ok(at) => at,
                Err(e) => return self.reply_error(e).await,
            };
            // The digest counted is the client's text (without query
            // attributes, which it would read as text too).
            let digest = std::mem::take(&mut first) && at == 1 && self.digests.is_some();
            let c = self.classify_text(&p[at..], digest).await;
            match self.before_plan(&c, p, at).await? {
                Next::Done => return Ok(()),
                Next::Run => return self.run_text(&c, p, at).await,
                Next::Instead(q) => {
                    instead = q;
                    p = &instead;
                }
            }
        }
    }

    /// What sextant does with a text statement before planning it: KILLs
    /// it carries out, then the sharded layout's routing.
    async fn before_plan(
        &mut self,
        c: &Classification<'_>,
        p: &[u8],
        at: usize,
    ) -> Result<Next, SessionError> {
        if let Some(next) = self.guard(c, &p[at..]).await {
            return next;
        }
        if let Some(next) = self.intercept_kill(c, p, at).await {
            return next;
        }
        // (Tested here: most statements are none of these, and an async
        // call costs its future's set-up.)
        if matches!(c.kind, Kind::Begin | Kind::Commit | Kind::Rollback) {
            if let Some(next) = self.defer_begin(c.kind, c.flags, &p[at..]).await {
                return next;
            }
        }
        if c.kind == Kind::Set {
            if let Some(next) = self.known_set(c, &p[at..]).await {
                return next;
            }
        }
        match self.sharding.clone() {
            Some(sh) => Box::pin(self.shard_query(&sh, c, &p[at..], p)).await,
            None => Ok(Next::Run),
        }
    }

    /// Where a COM_QUERY's text starts: after the command byte, and under
    /// query attributes after the attributes.
    pub(super) fn text_at(&self, packet: &[u8]) -> Result<usize, SessionError> {
        match self.flavor.caps & cap::QUERY_ATTRIBUTES {
            0 => Ok(1),
            _ => query_text_offset(packet, true).map_err(SessionError::Malformed),
        }
    }

    /// The statement's classification, again once the primary has named
    /// tables the catalogue did not list. `digest`: with the statement's
    /// digest key (`digest_key`), taken in the same pass over its tokens.
    async fn classify_text<'s>(&mut self, sql: &'s [u8], digest: bool) -> Classification<'s> {
        let c = self.classify_by_shape(sql, digest);
        match self.learn_names(&c, sql).await {
            true => self.group.classify_in(sql, || self.lex_mode()),
            false => c,
        }
    }

    /// A plain statement of a shape this worker thread has classified
    /// with the group's current catalogue is classified as that was
    /// (numbers never change a classification, nor strings where they
    /// are unread: `sextant_sql::shape`); any other is read, and
    /// remembered by its shape when it has one.
    fn classify_by_shape<'s>(&mut self, sql: &'s [u8], digest: bool) -> Classification<'s> {
        let catalogue = self.group.catalogue.load();
        let catalogue: &Arc<Catalogue> = &catalogue;
        SHAPES.with(|cell| {
            let mut remembered = cell.borrow_mut();
            let (buf, shapes) = &mut *remembered;
            let shaped = shape(sql, buf);
            if shaped != Shaped::No {
                if let Some(r) = shapes
                    .get(catalogue, buf)
                    .filter(|r| !digest || r.digest.is_some())
                {
                    if digest {
                        self.digest_key = r.digest;
                    }
                    return r.classification();
                }
            }
            let (c, dependent) = self.classify_read(catalogue, sql, digest);
            // (A reading that depends on the session's lexing mode is
            // the session's own.)
            let remember = match shaped {
                Shaped::No => false,
                Shaped::Plain => true,
                Shaped::Strings => c.strings_unread(),
            };
            if remember && !dependent {
                let key = if digest { self.digest_key } else { None };
                shapes.put(catalogue, buf, Remembered::of(&c, key));
            }
            c
        })
    }

    /// The statement read by the lexer, the classifier and the catalogue,
    /// with its digest key when `digest` (set in `digest_key`); also
    /// whether the reading depends on the session's lexing mode.
    fn classify_read<'s>(
        &mut self,
        catalogue: &Catalogue,
        sql: &'s [u8],
        digest: bool,
    ) -> (Classification<'s>, bool) {
        let fused = digest
            .then(|| {
                crate::digests::with_scratch(|buf| {
                    buf.clear();
                    let mut d = sextant_sql::digest::Digester::new(sql);
                    let (c, dependent) = catalogue.classify_observing(
                        sql,
                        || self.lex_mode(),
                        |t| {
                            d.token(t, buf);
                        },
                    );
                    d.finish(buf);
                    // Tokens that depend on the lexing mode were read in
                    // the default mode here: the digest is read again in
                    // the session's.
                    let key = (!dependent).then(|| sextant_sql::digest::digest_key(buf));
                    (c, key, dependent)
                })
            })
            .flatten();
        match fused {
            Some((c, key, dependent)) => {
                self.digest_key = key;
                (c, dependent)
            }
            None => catalogue.classify_observing(sql, || self.lex_mode(), |_| {}),
        }
    }

    /// A text statement in the session's current group: plan, run with
    /// its retries, apply what it changed.
    async fn run_text(
        &mut self,
        c: &Classification<'_>,
        p: &[u8],
        at: usize,
    ) -> Result<(), SessionError> {
        // Functions of the session sextant answers itself, put in place.
        let answered = match c.flags.contains(Flags::SESSION_INFO) {
            true => match self.answer_session_info(p, at, false) {
                Ok(a) => a,
                Err(e) => return self.reply_error(e).await,
            },
            false => None,
        };
        let p = answered.as_deref().unwrap_or(p);
        let mut conditions = false;
        if c.kind == Kind::Show {
            if let Some(d) = sextant_sql::session_info::diagnostics_show(&p[at..], self.lex_mode())
            {
                if let Some(done) = self.diagnostics(d).await {
                    return done;
                }
                conditions = true;
            }
        }
        // Left in the text: the held connection's to answer.
        conditions |= answered.is_none()
            && c.flags.contains(Flags::SESSION_INFO)
            && super::last::has_word(&p[at..], b"warning_count");
        let mut plan = plan(
            c,
            self.facts(),
            &self.user.policy(),
            self.group.plan_facts(),
            Command::Query,
            &mut self.cursor,
        );
        // Session set-up runs where the primary does not answer (see
        // setup_target).
        if matches!(c.kind, Kind::Use | Kind::Set)
            && plan.target == sextant_routing::Target::Primary
            && !self.pinned()
            && !self.facts().in_transaction
            && (c.kind == Kind::Use
                || sextant_sql::session_info::only_session_settings(&p[at..], self.lex_mode()))
        {
            plan.target = self.setup_connection().await;
        }
        sextant_admin::traffic::statement(c.kind, plan.rule);
        if let Some(r) = plan.refuse {
            return self.reply_error(SessionError::WriteOnReplica(r)).await;
        }
        self.require(&plan);
        if (self.stmt.need.is_some() || self.stmt.fleet)
            && c.kind == Kind::Select
            && !super::last::has_word(&p[at..], b"from")
        {
            // A SELECT without FROM reads no table (`SELECT @@x`, what
            // drivers ask at connect): no write it could miss, and no
            // need of the group's primary to learn of any.
            self.stmt.need = None;
            self.stmt.fleet = false;
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
        // A BEGIN with no transaction open commits nothing: lost with its
        // connection, it runs again on another.
        self.stmt.clean_begin =
            c.kind == Kind::Begin && !c.flags.contains(Flags::MULTI) && !self.in_transaction();
        self.stmt.cannot_commit = cannot_commit(c.kind, c.flags);
        self.stmt.begin_rides =
            self.pending_begin.is_some() && c.kind == Kind::Select && c.plain_read();
        self.stmt.ends_trx =
            matches!(c.kind, Kind::Commit | Kind::Rollback) && !c.flags.contains(Flags::MULTI);
        let retrack = match c.flags.contains(Flags::TRACKING) && c.kind == Kind::Set {
            true => self.tracking_set(&p[at..]),
            false => None,
        };
        if let Some(done) = self.dynamic_text_refused(c, plan.target, &p[at..]).await {
            return done;
        }
        // Run, then apply what it changed.
        self.stay = conditions
            && self.last.warnings == super::last::Val::Connection
            && self.binding.is_bound();
        let sent_us = self.sent_at(c.kind == Kind::Select && c.plain_read());
        // A client's SET of its session tracking leaves the connection
        // flagged as holding state sextant cannot see (the server reports
        // a change it no longer details); tracking_done puts right what
        // it changed, so a SET of settings alone does not pin the session.
        let clean_before = retrack.is_some()
            && !self.binding.opaque()
            && sextant_sql::session_info::only_session_settings(&p[at..], self.lex_mode());
        let mut res = self.run_plan(&plan, Work::Query(p)).await;
        self.stay = false;
        self.read_done();
        if let Some((assigned, before)) = retrack {
            let ran = matches!(&res, Ok(Some(r)) if !r.error);
            let restored = Box::pin(self.tracking_done(assigned, before, ran)).await;
            if let (true, true, Ok(Some(r))) = (restored, clean_before, &mut res) {
                r.tracked.opaque = false;
                if let Some(a) = self.binding.direct_mut() {
                    a.conn_mut().track.opaque = false;
                }
            }
        }
        let res = res?;
        self.after(
            &Statement::of(c),
            Ran::Query,
            plan.target,
            res.as_ref(),
            Some(&p[at..]),
        );
        match res.as_ref() {
            Some(r) => self.record(c, p, r, sent_us),
            None => self.record_other("other", "a statement that did not run"),
        }
        Ok(())
    }
}

/// Whether a statement cannot end a transaction (a plain read or write,
/// ROLLBACK, SAVEPOINT: not COMMIT, DDL, SET, CALL or several
/// statements): if its server connection dies inside a transaction, the
/// transaction is certainly rolled back, not of unknown outcome.
/// (Stored functions and triggers cannot commit.)
pub(super) fn cannot_commit(kind: Kind, flags: Flags) -> bool {
    !flags.contains(Flags::MULTI)
        && matches!(
            kind,
            Kind::Select
                | Kind::Insert
                | Kind::Update
                | Kind::Delete
                | Kind::Replace
                | Kind::Rollback
                | Kind::Savepoint
                | Kind::Do
                | Kind::Show
                | Kind::Explain
        )
}
