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
