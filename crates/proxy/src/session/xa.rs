//! A transaction on a sharded layout, carried out as XA so that it may
//! span groups: each group's branch starts (`XA START`) on the group's
//! primary when the transaction first touches the group; at COMMIT one
//! branch commits in one phase, several by two-phase commit: every branch
//! is prepared, then the decision row (`sextant_xa::decision`) is written
//! in the first group started (the decider) with sextant's own account,
//! then every branch commits. ROLLBACK, a failure before the decision, or a client
//! that leaves rolls every branch back.
//!
//! While the transaction runs, the session's binding is the branch of its
//! current group; the other branches wait here ([`Dist::parked`]).

use super::Session;
use crate::errors::SessionError;
use crate::runtime::Sharding;
use sextant_backend::{BackendError, Binding, Lease};
use sextant_protocol::codec::write_packet;
use sextant_protocol::consts::status;
use sextant_routing::Target;
use sextant_sharding::analyze::GroupSet;
use sextant_xa::decision::{self, Verdict};
use sextant_xa::{xid, Flying, Stage, Step};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A session's distributed transaction.
pub(super) struct Dist {
    flying: Flying,
    /// Each group's branch while another is the session's binding.
    parked: Vec<Option<Lease>>,
    /// Groups whose branch was started, in order.
    started: Vec<usize>,
    /// The group whose branch is the session's binding.
    current: Option<usize>,
    /// Why the transaction can only roll back now.
    doomed: Option<String>,
    /// The group to come back to after a statement over several groups.
    home: Option<usize>,
}

/// A branch at the end of the transaction.
struct Branch {
    group: usize,
    lease: Option<Lease>,
    /// Its xid, as XA statements take it.
    xid: String,
}

impl Dist {
    /// The xid of the branch in `group`: the first group started holds
    /// the decision, and every other branch names it, so that whoever
    /// finds one prepared knows where to look.
    fn xid(&self, sh: &Sharding, group: usize) -> xid::Xid {
        let gtrid = &self.flying.gtrid;
        let own = xid::GroupRef {
            name: sh.router.group_name(group),
            index: group,
        };
        match self.started.first() {
            Some(&first) if first != group => xid::branch_deciding(
                gtrid,
                own,
                xid::GroupRef {
                    name: sh.router.group_name(first),
                    index: first,
                },
            ),
            // The decider's own branch is prepared like the others: it
            // names itself as the decider.
            _ => xid::branch_deciding(gtrid, own, own),
        }
    }
}

impl Session {
    /// Whether a held-back BEGIN starts a distributed transaction: a plain
    /// one (a READ ONLY or consistent-snapshot transaction stays in one
    /// group, as the client's own BEGIN) on a layout with a coordinator.
    pub(super) fn xa_begins(&self, begin: &[u8]) -> bool {
        if self.shared.xa.is_none() {
            return false;
        }
        let mode = self.lex_mode();
        !sextant_sql::Lexer::with_mode(begin, mode).any(|t| {
            t.text.eq_ignore_ascii_case(b"ONLY") || t.text.eq_ignore_ascii_case(b"SNAPSHOT")
        })
    }

    pub(super) fn in_dist(&self) -> bool {
        self.dist.is_some()
    }

    /// Whether the distributed transaction has a branch in group `i`.
    pub(super) fn dist_has(&self, i: usize) -> bool {
        self.dist.as_ref().is_some_and(|d| d.started.contains(&i))
    }

    /// How many groups the distributed transaction has branches in.
    pub(super) fn dist_groups(&self) -> usize {
        self.dist.as_ref().map_or(0, |d| d.started.len())
    }

    /// Why the session's transaction (open, or about to open) cannot
    /// become one over several groups.
    pub(super) fn dist_refusal(&self) -> Option<String> {
        if self.shared.xa.is_none() {
            return Some("this sextant has no transaction coordinator".into());
        }
        if self.pinned() {
            return Some(
                "the transaction was opened in one group (READ ONLY or WITH CONSISTENT SNAPSHOT), or the session holds state tied to one connection (user variables, temporary tables, locks)".into(),
            );
        }
        match &self.pending_begin {
            Some(b) if !self.xa_begins(b) => {
                Some("a READ ONLY or WITH CONSISTENT SNAPSHOT transaction runs in one group".into())
            }
            _ => None,
        }
    }

    /// Starts a distributed transaction whose first branch is in group
    /// `i`.
    pub(super) async fn xa_open(
        &mut self,
        sh: &Arc<Sharding>,
        i: usize,
    ) -> Result<(), SessionError> {
        let Some(coord) = self.shared.xa.clone() else {
            return Ok(());
        };
        let id = self.registered.as_ref().map_or(0, |r| r.id());
        self.dist = Some(Box::new(Dist {
            flying: coord.begin(id),
            parked: (0..sh.groups.len()).map(|_| None).collect(),
            started: Vec::new(),
            current: None,
            doomed: None,
            home: None,
        }));
        let r = self.xa_enter(sh, i).await;
        if r.is_err() {
            // Nothing ran: the transaction is not open.
            self.dist = None;
            self.status &= !status::IN_TRANS;
        }
        r
    }

    /// Makes group `i`'s branch the session's binding: the parked one, or
    /// a new branch started on the group's primary.
    pub(super) async fn xa_enter(
        &mut self,
        sh: &Arc<Sharding>,
        i: usize,
    ) -> Result<(), SessionError> {
        let Some(mut d) = self.dist.take() else {
            return Ok(());
        };
        let r = self.xa_enter_with(sh, &mut d, i).await;
        if let Err(e) = &r {
            if d.doomed.is_none() && !d.started.is_empty() {
                d.doomed = Some(e.to_string());
            }
        }
        self.dist = Some(d);
        r
    }

    async fn xa_enter_with(
        &mut self,
        sh: &Arc<Sharding>,
        d: &mut Dist,
        i: usize,
    ) -> Result<(), SessionError> {
        let name = sh.router.group_name(i).to_string();
        if let Some(why) = &d.doomed {
            return Err(SessionError::XaRolledBack(format!(
                "this transaction can only roll back ({why}); send ROLLBACK"
            )));
        }
        if d.current == Some(i) {
            if self.binding.is_bound() {
                return Ok(());
            }
            return Err(SessionError::XaRolledBack(format!(
                "the connection to group {name}'s primary, which held this transaction's branch there, was lost; send ROLLBACK"
            )));
        }
        if let Some(c) = d.current.take() {
            match std::mem::take(&mut self.binding) {
                Binding::Direct(l) => d.parked[c] = Some(l),
                other => {
                    self.binding = other;
                    return Err(SessionError::XaRolledBack(format!(
                        "the connection holding this transaction's branch in group {} was lost; send ROLLBACK",
                        sh.router.group_name(c)
                    )));
                }
            }
        }
        let Some(group) = sh.groups.get(i).cloned() else {
            return Err(SessionError::ShardUnsupported(format!(
                "group {i} is not configured"
            )));
        };
        self.enter_group(sh, group.clone(), Some(i));
        if let Some(l) = d.parked[i].take() {
            self.binding = Binding::Direct(l);
            d.current = Some(i);
            // Another branch may have changed the session's state (USE,
            // SET) since this one last ran.
            return self.sync_attached().await;
        }
        if d.started.contains(&i) {
            return Err(SessionError::XaRolledBack(format!(
                "the connection to group {name}'s primary, which held this transaction's branch there, was lost; send ROLLBACK"
            )));
        }
        // Branches run on primaries only, whatever the routing says.
        self.attach(Target::Primary).await?;
        let x = d.xid(sh, i);
        let Some(lease) = self.binding.direct_mut() else {
            return Err(SessionError::XaRolledBack(format!(
                "no connection to group {name}'s primary"
            )));
        };
        if let Err(e) = lease
            .conn_mut()
            .exec_internal(&format!("XA START {}", x.sql()))
            .await
        {
            if !matches!(e, BackendError::Server { .. }) {
                self.detach_discard();
            }
            return Err(e.into());
        }
        d.started.push(i);
        d.flying.add_group(i);
        d.current = Some(i);
        Ok(())
    }

    /// The branches of `set` for a statement over several groups (started
    /// where missing), taken out of the session; [`Session::xa_put_back`]
    /// returns them.
    pub(super) async fn xa_take(
        &mut self,
        sh: &Arc<Sharding>,
        set: GroupSet,
    ) -> Result<Vec<Lease>, SessionError> {
        let mut leases = Vec::with_capacity(set.len() as usize);
        if let Some(d) = self.dist.as_mut() {
            d.home = d.current;
        }
        for i in set.iter() {
            if let Err(e) = self.xa_enter(sh, i).await {
                self.xa_put_back(sh, set, leases, None).await;
                return Err(e);
            }
            if let (Some(d), Binding::Direct(l)) =
                (self.dist.as_mut(), std::mem::take(&mut self.binding))
            {
                d.current = None;
                leases.push(l);
            }
        }
        Ok(leases)
    }

    /// Parks the branches [`Session::xa_take`] gave out. `finished`: which
    /// have read their answer to the end (None: their state is unknown,
    /// and the transaction can only roll back). Those with rows still
    /// coming are read to the end.
    pub(super) async fn xa_put_back(
        &mut self,
        sh: &Arc<Sharding>,
        set: GroupSet,
        leases: Vec<Lease>,
        finished: Option<Vec<bool>>,
    ) {
        let Some(mut d) = self.dist.take() else {
            return;
        };
        let groups: Vec<usize> = set.iter().collect();
        for (k, mut l) in leases.into_iter().enumerate() {
            let Some(&g) = groups.get(k) else {
                l.discard();
                continue;
            };
            let done = match &finished {
                None => false,
                Some(f) if f.get(k).copied().unwrap_or(true) => true,
                Some(_) => drain(&mut l).await,
            };
            if done {
                d.parked[g] = Some(l);
            } else {
                l.discard();
                d.doomed.get_or_insert_with(|| {
                    format!(
                        "a statement over several groups failed in group {} part way",
                        sh.router.group_name(g)
                    )
                });
            }
        }
        // The session's binding is again the branch it was on.
        let home = d.home.take().or(d.started.first().copied());
        self.dist = Some(d);
        if let Some(h) = home {
            let _ = self.xa_enter(sh, h).await;
        }
    }

    /// COMMIT or ROLLBACK of the distributed transaction, answered to the
    /// client.
    pub(super) async fn xa_finish(
        &mut self,
        sh: &Arc<Sharding>,
        commit: bool,
        chain: bool,
    ) -> Result<(), SessionError> {
        let r = self.xa_end(sh, commit).await;
        match r {
            Ok(()) => {
                if chain {
                    // AND CHAIN: a new transaction, held back as a BEGIN is.
                    self.chain_transaction();
                }
                self.local_ok().await
            }
            Err(e) => self.reply_error(e).await,
        }
    }

    /// Opens the next transaction of a COMMIT or ROLLBACK AND CHAIN.
    pub(super) fn chain_transaction(&mut self) {
        self.savepoints.clear();
        self.pending_begin = Some(b"BEGIN".to_vec());
        self.status |= status::IN_TRANS;
    }

    /// Ends the distributed transaction: commits (one phase for one
    /// branch, two-phase for several) or rolls back.
    pub(super) async fn xa_end(
        &mut self,
        sh: &Arc<Sharding>,
        commit: bool,
    ) -> Result<(), SessionError> {
        let Some(mut d) = self.dist.take() else {
            return Ok(());
        };
        let mut branches: Vec<Branch> = Vec::with_capacity(d.started.len());
        let current = d.current.take();
        let bound = std::mem::take(&mut self.binding);
        let mut bound = match bound {
            Binding::Direct(l) => Some(l),
            _ => None,
        };
        for &g in &d.started {
            let lease = match current == Some(g) {
                true => bound.take(),
                false => d.parked[g].take(),
            };
            let xid = d.xid(sh, g).sql();
            branches.push(Branch {
                group: g,
                lease,
                xid,
            });
        }
        drop(bound);
        self.pending_begin = None;
        self.status &= !status::IN_TRANS;
        self.hold_until = None;
        let lost: Vec<&str> = branches
            .iter()
            .filter(|b| b.lease.is_none())
            .map(|b| sh.router.group_name(b.group))
            .collect();
        let doomed = match (&d.doomed, lost.is_empty()) {
            (Some(why), _) => Some(why.clone()),
            (None, false) => Some(format!(
                "the connection holding its branch in group {} was lost",
                lost.join(", ")
            )),
            (None, true) => None,
        };
        let counters = &self.shared.counters;
        if !commit || doomed.is_some() {
            counters.xa_rolled_back.fetch_add(1, Ordering::Relaxed);
            d.flying.set_stage(Stage::RollingBack);
            rollback(&mut branches, true).await;
            return match (commit, doomed) {
                (true, Some(why)) => Err(SessionError::XaRolledBack(why)),
                _ => Ok(()),
            };
        }
        let (r, counter) = match branches.len() {
            0 => return Ok(()),
            1 => (
                self.one_phase(sh, &mut branches[0]).await,
                &self.shared.counters.xa_one_phase,
            ),
            _ => (
                self.two_phase(sh, &d, &mut branches).await,
                &self.shared.counters.xa_two_phase,
            ),
        };
        match &r {
            Ok(()) => counter.fetch_add(1, Ordering::Relaxed),
            Err(_) => self
                .shared
                .counters
                .xa_rolled_back
                .fetch_add(1, Ordering::Relaxed),
        };
        r
    }

    async fn one_phase(&mut self, sh: &Arc<Sharding>, b: &mut Branch) -> Result<(), SessionError> {
        let name = sh.router.group_name(b.group).to_string();
        let x = b.xid.clone();
        let Some(l) = b.lease.as_mut() else {
            return Ok(());
        };
        let conn = l.conn_mut();
        let end = format!("XA END {x}");
        let commit = format!("XA COMMIT {x} ONE PHASE");
        let sent = async {
            conn.send_internal(&end).await?;
            conn.send_internal(&commit).await
        }
        .await;
        let answers = match sent {
            Ok(()) => (
                conn.read_internal(&end).await,
                conn.read_internal(&commit).await,
            ),
            Err(e) => {
                if let Some(l) = b.lease.take() {
                    l.discard();
                }
                return Err(SessionError::XaRolledBack(format!(
                    "group {name}'s primary could not be reached to commit: {e}"
                )));
            }
        };
        match answers {
            (_, Ok(())) => {
                self.note_branch_write(sh, b);
                Ok(())
            }
            (end, Err(e)) => {
                let server = matches!(e, BackendError::Server { .. });
                if let Some(l) = b.lease.take() {
                    l.discard();
                }
                if !server {
                    return Err(SessionError::XaUnknown(format!(
                        "the connection to group {name}'s primary was lost during its one-phase commit: {e}"
                    )));
                }
                let why = end.err().unwrap_or(e);
                Err(SessionError::XaRolledBack(format!("group {name}: {why}")))
            }
        }
    }

    async fn two_phase(
        &mut self,
        sh: &Arc<Sharding>,
        d: &Dist,
        branches: &mut [Branch],
    ) -> Result<(), SessionError> {
        let coord = d.flying.coordinator().clone();
        let gtrid = d.flying.gtrid.clone();
        d.flying.set_stage(Stage::Preparing);
        coord.failpoint.hit(Step::BeforePrepare);
        // The first branch started holds the decision (Dist::xid).
        let Some(decider) = d.started.first().copied() else {
            return Ok(());
        };
        let decider_name = sh.router.group_name(decider).to_string();
        let server = branches
            .iter()
            .find(|b| b.group == decider)
            .and_then(|b| b.lease.as_ref())
            .map(|l| l.server.clone());
        let rt = self.shared.runtime.load_full();
        if let Some(server) = &server {
            if !coord.has_table(server.addr.as_ref()) {
                if let Err(e) = crate::xa_recovery::ensure_decision_table(&rt, server, &coord).await
                {
                    tracing::warn!(parent: &self.span, group = %decider_name, "cannot create the decision table: {e}");
                }
            }
        }
        // Every branch's END and PREPARE go out before any answer is
        // read: one round trip for all.
        let mut failure: Option<String> = None;
        let mut sent = vec![false; branches.len()];
        for (k, b) in branches.iter_mut().enumerate() {
            let Some(l) = b.lease.as_mut() else { continue };
            let conn = l.conn_mut();
            let r = async {
                conn.send_internal(&format!("XA END {}", b.xid)).await?;
                conn.send_internal(&format!("XA PREPARE {}", b.xid)).await
            }
            .await;
            match r {
                Ok(()) => sent[k] = true,
                Err(e) => {
                    failure.get_or_insert_with(|| {
                        format!("group {}: {e}", sh.router.group_name(b.group))
                    });
                    if let Some(l) = b.lease.take() {
                        l.discard();
                    }
                }
            }
        }
        let mut prepared = 0u32;
        for (k, b) in branches.iter_mut().enumerate() {
            if !sent[k] {
                continue;
            }
            let Some(l) = b.lease.as_mut() else { continue };
            let conn = l.conn_mut();
            let end = conn.read_internal("XA END").await;
            let lost = matches!(&end, Err(e) if !matches!(e, BackendError::Server { .. }));
            let prep = match lost {
                true => Ok(()),
                false => conn.read_internal("XA PREPARE").await,
            };
            match end.and(prep) {
                Ok(()) => {
                    prepared += 1;
                    coord.failpoint.hit(Step::AfterPrepare(prepared));
                }
                Err(why) => {
                    failure.get_or_insert_with(|| {
                        format!(
                            "group {} could not prepare: {why}",
                            sh.router.group_name(b.group)
                        )
                    });
                    if !matches!(why, BackendError::Server { .. }) {
                        if let Some(l) = b.lease.take() {
                            l.discard();
                        }
                    }
                }
            }
        }
        if failure.is_none() {
            failure = self.may_not_decide(&coord);
        }
        let server = match (failure, server) {
            (None, Some(s)) => s,
            (why, _) => {
                let why = why.unwrap_or_else(|| {
                    format!("the connection holding its branch in group {decider_name} was lost")
                });
                d.flying.set_stage(Stage::RollingBack);
                rollback(branches, false).await;
                return Err(SessionError::XaRolledBack(why));
            }
        };
        // The decision: a row written by sextant's own account (no
        // application account needs any privilege on the sextant schema),
        // committed on its own. Once it is, the transaction is committed.
        let insert = decision::insert_sql(gtrid.as_bytes(), Verdict::Commit, &coord.instance);
        match record_decision(&rt, &server, &insert, &decider_name).await {
            Ok(()) => {}
            Err(Decided::No(why)) => {
                d.flying.set_stage(Stage::RollingBack);
                rollback(branches, false).await;
                return Err(SessionError::XaRolledBack(why));
            }
            Err(Decided::Unknown(why)) => {
                // Recovery reads the decider's row (or its absence) and
                // settles the prepared branches accordingly.
                for b in branches.iter_mut() {
                    if let Some(l) = b.lease.take() {
                        l.discard();
                    }
                }
                coord.wake.notify_one();
                return Err(SessionError::XaUnknown(format!(
                    "the connection to group {decider_name}'s primary was lost while it recorded the decision: {why}"
                )));
            }
        }
        coord.failpoint.hit(Step::AfterLog);
        d.flying.set_stage(Stage::Committing);
        let mut unfinished = false;
        for b in branches.iter_mut() {
            let Some(l) = b.lease.as_mut() else {
                unfinished = true;
                continue;
            };
            if l.conn_mut()
                .send_internal(&format!("XA COMMIT {}", b.xid))
                .await
                .is_err()
            {
                unfinished = true;
                if let Some(l) = b.lease.take() {
                    l.discard();
                }
            }
        }
        let mut committed = 0u32;
        for b in branches.iter_mut() {
            let Some(l) = b.lease.as_mut() else { continue };
            match l.conn_mut().read_internal("XA COMMIT").await {
                Ok(()) => {
                    committed += 1;
                    coord.failpoint.hit(Step::AfterCommit(committed));
                    self.note_branch_write(sh, b);
                }
                Err(e) => {
                    tracing::warn!(parent: &self.span, gtrid = %gtrid, group = %sh.router.group_name(b.group), "XA COMMIT of a branch failed; recovery finishes it: {e}");
                    unfinished = true;
                    if let Some(l) = b.lease.take() {
                        l.discard();
                    }
                }
            }
        }
        if unfinished {
            // Committed by decision: recovery commits what is left.
            coord.wake.notify_one();
        } else {
            coord.settled(decider, &gtrid);
        }
        Ok(())
    }

    /// Why this instance may not decide a commit now: in a fleet, once its
    /// lease may have expired, another instance may be settling its
    /// transactions (rolling back those without a decision row).
    fn may_not_decide(&self, coord: &sextant_xa::Coordinator) -> Option<String> {
        if !coord.id_claimed() {
            return Some("this sextant instance has not yet claimed its id on a majority of the groups' primaries (another process may hold it), so it may not decide a commit".to_string());
        }
        let fleet = self.shared.fleet.get()?;
        (!fleet.holds_lease()).then(|| {
            "this sextant instance could not renew its fleet lease in time, so it may not decide a commit (another instance may be settling its transactions)".to_string()
        })
    }

    /// A committed branch's write, for read-your-writes in its group.
    fn note_branch_write(&mut self, sh: &Arc<Sharding>, b: &mut Branch) {
        let Some(g) = b
            .lease
            .as_mut()
            .and_then(|l| l.conn_mut().track.last_gtid.take())
        else {
            return;
        };
        let here = sh.groups.iter().position(|x| Arc::ptr_eq(x, &self.group));
        if here == Some(b.group) {
            self.note_write(g);
        } else {
            if let Some(slot) = self.shard_writes.get_mut(b.group) {
                *slot = Some(g);
            }
            // For the user's other sessions (consistency_scope = "user").
            if let Some(n) = self.user.shard_writes.get(b.group) {
                n.publish(&g);
            }
        }
    }

    /// A statement in a distributed transaction that cannot run there.
    pub(super) fn xa_refusal(&self, c: &sextant_sql::Classification<'_>) -> Option<String> {
        let d = self.dist.as_ref()?;
        match c.kind {
            sextant_sql::Kind::Savepoint if d.started.len() > 1 => Some(
                "SAVEPOINT and ROLLBACK TO SAVEPOINT in a transaction over several groups: a savepoint would cover only one group's branch".into(),
            ),
            sextant_sql::Kind::Xa => Some(
                "XA statements in a transaction sextant coordinates: commit or roll it back first".into(),
            ),
            _ => None,
        }
    }
}

/// How the decider's one-phase commit ended, when it did not commit.
enum Decided {
    /// The server refused it: nothing committed.
    No(String),
    /// The connection was lost: committed or not, recovery tells.
    Unknown(String),
}

/// Records the commit decision of a transaction whose branches are all
/// prepared, on `server` (the decider group's primary) with sextant's own
/// account, in a transaction of its own. The primary key makes it race a
/// rollback row another instance's recovery may write: one of the two
/// wins.
async fn record_decision(
    rt: &crate::runtime::Runtime,
    server: &Arc<sextant_backend::Server>,
    insert: &str,
    decider: &str,
) -> Result<(), Decided> {
    let mut lease = crate::xa_recovery::recovery_lease(rt, server)
        .await
        .map_err(|e| {
            Decided::No(format!(
                "group {decider}'s primary did not take sextant's own login ([xa] user) to record the decision: {e}"
            ))
        })?;
    match lease.conn_mut().exec_internal(insert).await {
        Ok(()) => Ok(()),
        Err(BackendError::Server { code: 1062, .. }) => Err(Decided::No(
            "another sextant instance found its branches prepared and, taking this instance for gone, rolled it back".into(),
        )),
        Err(BackendError::Server { code: 1146, .. }) => Err(Decided::No(format!(
            "group {decider} has no {} table to record the decision in: sextant creates it with its own account ([xa] user) at start; create it or grant that account CREATE on the sextant schema (see docs/transactions.md)",
            decision::TABLE
        ))),
        Err(e @ BackendError::Server { .. }) => Err(Decided::No(format!(
            "the decision could not be recorded in group {decider}: {e}"
        ))),
        Err(e) => {
            lease.discard();
            Err(Decided::Unknown(e.to_string()))
        }
    }
}

/// Rolls every branch back; a connection that does not answer OK is
/// closed (the server then rolls back a branch that was not prepared;
/// recovery one that was). `active`: the branches are not ended yet.
async fn rollback(branches: &mut [Branch], active: bool) {
    for b in branches.iter_mut() {
        let x = &b.xid;
        let Some(l) = b.lease.as_mut() else { continue };
        let conn = l.conn_mut();
        let end = format!("XA END {x}");
        let rb = format!("XA ROLLBACK {x}");
        let ok = async {
            if active {
                conn.send_internal(&end).await?;
            }
            conn.send_internal(&rb).await?;
            let e = match active {
                true => conn.read_internal(&end).await,
                false => Ok(()),
            };
            let r = conn.read_internal(&rb).await;
            e.and(r)
        }
        .await;
        if ok.is_err() {
            if let Some(l) = b.lease.take() {
                l.discard();
            }
        }
    }
}

/// Reads the rest of a result set whose rows are no longer wanted.
/// Whether it ended cleanly.
async fn drain(l: &mut Lease) -> bool {
    loop {
        match l.conn_mut().read_packet().await {
            Ok((_, p)) => match p.first() {
                Some(0xfe) if p.len() < 0xff_ff_ff => return true,
                Some(0xff) => return true,
                _ => {}
            },
            Err(_) => return false,
        }
    }
}

impl Session {
    /// A write to several groups (`w`): each group's part runs on its
    /// branch of the session's distributed transaction; outside a
    /// transaction the write is one of its own, committed (or rolled back)
    /// before the answer. `packet`: the client's command (its text is
    /// replaced by each group's own when the rows are split).
    pub(super) async fn spread_write(
        &mut self,
        sh: &Arc<Sharding>,
        w: &sextant_sharding::route::WritePlan,
        packet: &[u8],
    ) -> Result<(), SessionError> {
        let names = || {
            w.groups
                .iter()
                .map(|i| sh.router.group_name(i))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let in_trx = self.in_dist()
            || self.pinned()
            || self.pending_begin.is_some()
            || self.status & status::AUTOCOMMIT == 0;
        if in_trx && !self.in_dist() {
            if let Some(why) = self.dist_refusal() {
                return Err(SessionError::ShardUnsupported(format!(
                    "inside a transaction, a write to several groups ({}): {why}",
                    names()
                )));
            }
            self.pending_begin = None;
            self.status |= status::IN_TRANS;
        }
        let implicit = !in_trx;
        if !self.in_dist() {
            self.release();
            self.xa_open(sh, w.groups.first().unwrap_or_default())
                .await?;
        }
        let at = self.text_at(packet)?;
        let mut leases = self.xa_take(sh, w.groups).await?;
        let mut sent = Ok(());
        for (k, l) in leases.iter_mut().enumerate() {
            // Inside the client's transaction a statement that fails is
            // undone alone, as on one server: each branch can go back to
            // where it was before it.
            if !implicit {
                if let Err(e) = l.conn_mut().exec_internal(STATEMENT_SAVEPOINT).await {
                    sent = Err(e);
                    break;
                }
            }
            let r = match w.split.get(k) {
                None => l.conn_mut().send(0, packet).await,
                Some((_, text)) => {
                    let mut q = Vec::with_capacity(at + text.len());
                    q.extend_from_slice(&packet[..at]);
                    q.extend_from_slice(text);
                    l.conn_mut().send(0, &q).await
                }
            };
            if let Err(e) = r {
                sent = Err(e);
                break;
            }
        }
        if let Err(e) = sent {
            self.xa_put_back(sh, w.groups, leases, None).await;
            if implicit {
                let _ = self.xa_end(sh, false).await;
            }
            return Err(e.into());
        }
        let mut ok = sextant_protocol::packets::OkPacket::default();
        let mut ran: Vec<&str> = Vec::new();
        let mut failed: Option<(String, Vec<u8>)> = None;
        let mut clean = true;
        for (k, (l, g)) in leases.iter_mut().zip(w.groups.iter()).enumerate() {
            let conn = l.conn_mut();
            let pkt = match conn.read_packet().await {
                Ok((_, p)) => p,
                Err(e) => {
                    clean = false;
                    failed.get_or_insert((
                        format!("group {}: {e}", sh.router.group_name(g)),
                        Vec::new(),
                    ));
                    continue;
                }
            };
            match pkt.first() {
                Some(0x00) => match sextant_protocol::packets::parse_ok(&pkt, true) {
                    Ok(o) => {
                        conn.status = o.status;
                        if k == 0 || !w.copies {
                            ok.affected_rows += o.affected_rows;
                        }
                        if ok.last_insert_id == 0 {
                            ok.last_insert_id = o.last_insert_id;
                        }
                        ok.warnings = ok.warnings.saturating_add(o.warnings);
                        ran.push(sh.router.group_name(g));
                    }
                    Err(e) => {
                        clean = false;
                        failed.get_or_insert((
                            format!("group {}: {e}", sh.router.group_name(g)),
                            Vec::new(),
                        ));
                    }
                },
                Some(0xff) => {
                    let msg = pkt
                        .get(9..)
                        .map_or(String::new(), |m| String::from_utf8_lossy(m).into_owned());
                    failed
                        .get_or_insert((format!("group {}: {msg}", sh.router.group_name(g)), pkt));
                }
                _ => {
                    // Rows (RETURNING): not a write's answer sextant reads.
                    clean = false;
                    failed.get_or_insert((
                        format!("group {} answered with rows (RETURNING is not supported on a write to several groups)", sh.router.group_name(g)),
                        Vec::new(),
                    ));
                }
            }
        }
        let mut undone = false;
        if let (Some((_, pkt)), false, true) = (&failed, implicit, clean) {
            // The server's own error in one group: the statement is undone
            // in every group (where it failed the server undid it) and the
            // transaction goes on.
            undone = !pkt.is_empty();
            let back = format!("ROLLBACK TO SAVEPOINT {STATEMENT_SAVEPOINT_NAME}");
            for l in leases.iter_mut() {
                if !undone {
                    break;
                }
                undone = l.conn_mut().exec_internal(&back).await.is_ok();
            }
        }
        let n = leases.len();
        self.xa_put_back(sh, w.groups, leases, clean.then(|| vec![true; n]))
            .await;
        if let (true, Some((_, pkt))) = (undone, &failed) {
            self.last = super::last::Last::spread_failed();
            self.client.out.clear();
            write_packet(&mut self.client.out, 1, pkt);
            return self.client.flush().await;
        }
        if let Some((why, pkt)) = failed {
            let nothing_ran = ran.is_empty() && clean;
            if implicit || nothing_ran {
                if implicit {
                    // Nothing of the statement stays anywhere.
                    let _ = self.xa_end(sh, false).await;
                }
                if !pkt.is_empty() {
                    // The server's own error: the statement failed whole.
                    self.last = super::last::Last::spread_failed();
                    self.client.out.clear();
                    write_packet(&mut self.client.out, 1, &pkt);
                    return self.client.flush().await;
                }
                return Err(SessionError::XaRolledBack(why));
            }
            // Part of the statement ran: the transaction can only roll
            // back.
            if let Some(d) = self.dist.as_mut() {
                d.doomed.get_or_insert_with(|| {
                    format!(
                        "a write ran in groups {} and failed in {why}",
                        ran.join(", ")
                    )
                });
            }
            return Err(SessionError::XaRolledBack(format!(
                "the write ran in groups {} and failed in {why}; the transaction can only roll back: send ROLLBACK",
                ran.join(", ")
            )));
        }
        if implicit {
            self.xa_end(sh, true).await?;
        }
        if ok.last_insert_id != 0 {
            // LAST_INSERT_ID() returns it from now on, wherever it runs.
            self.last_insert_id = ok.last_insert_id;
            self.last_insert_conn = None;
        }
        ok.status = self.status;
        self.last = self.last.spread(None, ok.affected_rows);
        sextant_protocol::packets::write_ok(&mut self.client.out, 1, &ok, false);
        self.client.flush().await
    }
}

/// The savepoint each branch sets before a statement over several groups
/// inside a client's transaction (a client's own savepoints are refused
/// in such a transaction, so the name is sextant's alone there).
const STATEMENT_SAVEPOINT_NAME: &str = "sextant_statement";
const STATEMENT_SAVEPOINT: &str = "SAVEPOINT sextant_statement";
