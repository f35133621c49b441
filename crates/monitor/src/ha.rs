//! The failover task of a group with `failover = "auto"`: each interval it
//! looks at the group as the server monitors left it, asks the replicas
//! what they received from the primary when the primary fails, takes the
//! decision [`crate::failover::decide`] gives, and carries a promotion out
//! (see `promote.rs`). It also fences old primaries: one that answers
//! again is made read-only before anything else, and rejoined as a
//! replica of the new primary only if it holds nothing the new primary
//! lacks.

use crate::dialect::{Dialect, Position};
use crate::failover::{decide, Decision, Replica, View};
use crate::failover_mysql::PrimarySeen;
use crate::gtid_set::GtidSet;
use crate::FailoverError;
use sextant_backend::{BackendConn, BackendError, ConnectParams, Flavor, Group, Server};
use std::sync::Arc;
use std::time::Duration;

/// What a group's failover needs besides the group.
#[derive(Clone)]
pub struct FailoverSettings {
    pub interval: Duration,
    /// Sextant's own account (it needs REPLICATION SLAVE ADMIN, READ_ONLY
    /// ADMIN and, with semi-sync, REPLICATION MASTER ADMIN: docs/failover.md).
    pub user: String,
    pub password: String,
    pub after_ms: u64,
    pub semi_sync: bool,
    /// The replication account, for rejoining an old primary.
    pub replication: Option<(String, String)>,
    /// By member index (the configured primary first): may be promoted.
    pub promotable: Vec<bool>,
    /// In a fleet: who decides, and the fleet's record of terms. None:
    /// this instance alone decides.
    pub coordinator: Option<Arc<dyn Coordinator>>,
}

/// A boxed future of the coordinator's (the monitor has no async trait).
pub type Pending<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// How instances of a fleet agree on one decider per group and on its
/// terms (etcd, in the proxy).
pub trait Coordinator: Send + Sync {
    /// Whether this instance performs `group`'s failovers now. Err (why):
    /// the fleet's store cannot say, and this instance must not.
    fn may_decide<'a>(&'a self, group: &'a str) -> Pending<'a, Result<bool, String>>;
    /// The instance that does, if known (for SHOW GROUPS).
    fn decider<'a>(&'a self, group: &'a str) -> Pending<'a, Option<String>>;
    /// The newest term the fleet recorded for `group` and the revision it
    /// was written at (None: none, or the store cannot say).
    fn newest_term<'a>(&'a self, group: &'a str) -> Pending<'a, Option<(u64, i64)>>;
    /// Records `term` (primary `primary`) if the record is still at
    /// `base` and this instance still decides; whether it was written.
    fn record_term<'a>(
        &'a self,
        group: &'a str,
        term: u64,
        primary: &'a str,
        base: i64,
    ) -> Pending<'a, Result<bool, String>>;
}

/// The table that keeps each group's term on its primary (and, by
/// replication, on its replicas).
pub const TERMS_TABLE: &str = "CREATE TABLE IF NOT EXISTS sextant.failover \
     (grp VARCHAR(64) NOT NULL PRIMARY KEY, term BIGINT UNSIGNED NOT NULL, \
      primary_addr VARCHAR(255) NOT NULL, promoted_at VARCHAR(4096) NOT NULL, \
      at_us BIGINT NOT NULL) ENGINE=InnoDB";

/// In a fleet, how often (in rounds) the fleet's record of the term is
/// read while nothing is failing.
const TERM_CHECK_ROUNDS: u64 = 20;

/// What the task keeps from round to round.
pub(crate) struct Task {
    pub(crate) group: Arc<Group>,
    pub(crate) s: FailoverSettings,
    pub(crate) conns: Vec<Option<BackendConn>>,
    /// The member that is the primary of the current term.
    pub(crate) leader: Option<usize>,
    /// The leader's replacement count when it became the leader: a
    /// change of leader it does not account for (another instance's
    /// failover, or a tool's) marks the old one replaced here.
    leader_replacements: u32,
    /// Old primaries kept out of writes and reads until they rejoin.
    pub(crate) fenced: Vec<bool>,
    /// Acknowledging semi-sync commits when the primary last answered.
    /// When (clock ms) each replica was last seen connected and
    /// acknowledging (0: seen connected and not acknowledging, or never).
    acked_at: Vec<u64>,
    /// Per replica, while the primary fails: what its IO thread had
    /// received (heartbeats, position) and since when (clock ms).
    pub(crate) heard: Vec<Option<(u64, String, u64)>>,
    /// Where the current term's primary began (its GTID position when it
    /// was promoted): an old MariaDB primary holding more has diverged.
    pub(crate) promoted_at: Position,
    /// MySQL: the primary's `@@gtid_executed` and server UUID when it
    /// last answered.
    primary_seen: Option<PrimarySeen>,
    /// The terms table was read (once, at start).
    terms_read: bool,
    /// The primary of the term stopped answering (since it last answered).
    pub(crate) leader_down: bool,
    /// Rounds run so far.
    rounds: u64,
    /// Why the last promotion attempt failed (logged once, not each round).
    pub(crate) last_failure: Option<String>,
}

/// Runs the failover of `group` forever.
pub async fn run(group: Arc<Group>, s: FailoverSettings) {
    let n = group.members.len();
    let mut t = Task {
        group,
        s,
        conns: (0..n).map(|_| None).collect(),
        leader: None,
        leader_replacements: 0,
        fenced: vec![false; n],
        acked_at: vec![0; n],
        heard: vec![None; n],
        promoted_at: Position::default(),
        primary_seen: None,
        terms_read: false,
        last_failure: None,
        leader_down: false,
        rounds: 0,
    };
    // The server monitors' first checks say who is the primary.
    tokio::time::sleep(t.s.interval * 2).await;
    let mut tick = tokio::time::interval(t.s.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        t.round().await;
    }
}

/// How the task logs in to `server`.
fn params<'a>(server: &'a Server, user: &'a str, password: &'a str) -> ConnectParams<'a> {
    ConnectParams {
        addr: &server.addr,
        user,
        password,
        flavor: Flavor::new(0, 45),
        timeout: server.settings.connect_timeout,
        tls: server.settings.tls.as_ref(),
        min_wait_timeout: None,
        server_key: server.settings.server_key.as_deref(),
    }
}

impl Task {
    /// Runs `sql` on each of `members` at the same time (best effort: a
    /// member that fails is left for the steps after to report). One
    /// after another, each would add its own wait: MariaDB's `STOP SLAVE`
    /// on a replica whose primary froze with the connection open waits
    /// about 2 s for the IO thread.
    pub(crate) async fn on_each_at_once(&mut self, members: &[usize], sql: &str) {
        type Run = std::pin::Pin<
            Box<dyn std::future::Future<Output = (usize, Option<BackendConn>)> + Send>,
        >;
        let mut runs: Vec<Option<Run>> = Vec::new();
        for &i in members {
            let conn = self.conns[i].take();
            let server = self.group.members[i].clone();
            let (user, password) = (self.s.user.clone(), self.s.password.clone());
            let (budget, sql) = (self.budget(i), sql.to_string());
            runs.push(Some(Box::pin(async move {
                let run = async {
                    let mut c = match conn {
                        Some(c) => c,
                        None => BackendConn::connect(&params(&server, &user, &password)).await?,
                    };
                    c.query_internal(&sql).await.map(|_| c)
                };
                match tokio::time::timeout(budget, run).await {
                    Ok(Ok(c)) => (i, Some(c)),
                    Ok(Err(e)) => {
                        tracing::debug!(server = %server.addr, "{sql}: {e}");
                        (i, None)
                    }
                    Err(_) => (i, None),
                }
            })));
        }
        let mut done = Vec::new();
        std::future::poll_fn(|cx| {
            for slot in runs.iter_mut() {
                if let Some(run) = slot {
                    if let std::task::Poll::Ready(v) = run.as_mut().poll(cx) {
                        done.push(v);
                        *slot = None;
                    }
                }
            }
            match runs.iter().all(Option::is_none) {
                true => std::task::Poll::Ready(()),
                false => std::task::Poll::Pending,
            }
        })
        .await;
        for (i, c) in done {
            self.conns[i] = c;
        }
    }
}

/// The first column of the first row of an answer.
pub(crate) fn first_cell(rows: &[Vec<Option<String>>]) -> Option<String> {
    rows.first().and_then(|r| r.first()).cloned().flatten()
}

impl Task {
    pub(crate) fn member(&self, i: usize) -> &Arc<Server> {
        &self.group.members[i]
    }

    /// A bound on one statement of the task: a server that takes longer
    /// counts as not answering.
    pub(crate) fn budget(&self, i: usize) -> Duration {
        self.member(i).settings.connect_timeout + self.s.interval.max(Duration::from_secs(1))
    }

    /// Runs `sql` on member `i` (connecting first if needed); its rows.
    pub(crate) async fn query(
        &mut self,
        i: usize,
        sql: &str,
    ) -> Result<Vec<Vec<Option<String>>>, FailoverError> {
        self.query_within(i, sql, self.budget(i)).await
    }

    /// [`Task::query`] with a budget of its own (a write that waits for a
    /// semi-sync acknowledgement).
    pub(crate) async fn query_within(
        &mut self,
        i: usize,
        sql: &str,
        budget: Duration,
    ) -> Result<Vec<Vec<Option<String>>>, FailoverError> {
        let r = match tokio::time::timeout(budget, self.query_unbounded(i, sql)).await {
            Ok(r) => r.map_err(FailoverError::from),
            Err(_) => Err(self.timeout(i, budget)),
        };
        if matches!(r, Err(ref e) if !is_server_error(e)) {
            self.conns[i] = None;
        }
        r
    }

    pub(crate) fn timeout(&self, i: usize, budget: Duration) -> FailoverError {
        FailoverError::Timeout {
            addr: self.member(i).addr.to_string(),
            ms: budget.as_millis() as u64,
        }
    }

    pub(crate) async fn query_unbounded(
        &mut self,
        i: usize,
        sql: &str,
    ) -> Result<Vec<Vec<Option<String>>>, BackendError> {
        if self.conns[i].is_none() {
            let server = self.group.members[i].clone();
            let p = params(&server, &self.s.user, &self.s.password);
            self.conns[i] = Some(BackendConn::connect(&p).await?);
        }
        let Some(c) = self.conns[i].as_mut() else {
            return Ok(Vec::new());
        };
        c.query_internal(sql).await
    }

    /// Runs statements on member `i`, stopping at the first error.
    pub(crate) async fn exec(&mut self, i: usize, sqls: &[&str]) -> Result<(), FailoverError> {
        for sql in sqls {
            self.query(i, sql).await?;
        }
        Ok(())
    }

    /// Makes member `now` the leader. When it replaces another that no
    /// promotion here marked replaced (another instance promoted, or a
    /// tool did), that one is marked now: this instance's sessions must
    /// not go on with transactions begun there either.
    pub(crate) fn set_leader(&mut self, now: Option<usize>) {
        if let (Some(old), Some(new)) = (self.leader, now) {
            let h = &self.member(old).health;
            if old != new && h.replacements() == self.leader_replacements {
                tracing::warn!(group = %self.group.name, old = %self.member(old).addr, new = %self.member(new).addr, "the primary changed: sessions' connections to the old one are closed at their next use");
                h.mark_replaced(self.group.ha.term());
            }
        }
        if now != self.leader {
            self.leader_replacements = now.map_or(0, |i| self.member(i).health.replacements());
        }
        self.leader = now;
    }

    /// MySQL when a member reported a MySQL (not MariaDB) version.
    pub(crate) fn dialect(&self) -> Dialect {
        let mysql = self
            .group
            .members
            .iter()
            .any(|m| m.health.server_version().is_some_and(|v| !v.mariadb));
        match mysql {
            true => Dialect::MySql,
            false => Dialect::MariaDb,
        }
    }

    /// One round: follow the primary, fence and rejoin old primaries,
    /// and fail over when the decision says so.
    async fn round(&mut self) {
        let g = self.group.clone();
        if let Some(p) = g.primary() {
            let now = g.members.iter().position(|m| Arc::ptr_eq(m, p));
            self.set_leader(now);
        }
        if let Some(req) = g.ha.take_switchover() {
            let outcome = self.switchover(req.to).await;
            if let Err(why) = &outcome {
                tracing::warn!(group = %g.name, "switchover not done: {why}");
            }
            let _ = req.reply.send(outcome);
            return;
        }
        // The fleet's store is asked only when something is to be done
        // (a primary failing or returning, an old primary fenced), and
        // otherwise every TERM_CHECK_ROUNDS rounds: with many groups and
        // instances, a question per group per round would load etcd.
        self.rounds += 1;
        let failing_now = self
            .leader
            .is_some_and(|li| self.member(li).health.unreachable_for_ms() > 0);
        let busy = failing_now || self.leader_down || self.fenced.iter().any(|f| *f);
        if let Some(c) = self.s.coordinator.clone() {
            if busy || self.rounds.is_multiple_of(TERM_CHECK_ROUNDS) {
                // Another instance's failover: its term is fenced here too.
                if let Some((t, _)) = c.newest_term(&g.name).await {
                    if t > g.ha.term() {
                        tracing::warn!(group = %g.name, term = t, "the fleet recorded a newer term: reading it from the servers");
                        self.terms_read = false;
                    }
                }
            }
        }
        if !self.terms_read {
            self.read_terms().await;
        }
        let decides = match busy {
            true => self.decides().await,
            false => Ok(false),
        };
        match decides {
            Ok(true) => self.tend_fenced().await,
            _ => self.follow_fenced().await,
        }
        let Some(li) = self.leader else {
            g.ha.set_state(
                "no primary known",
                "no server of the group has been seen writable",
            );
            return;
        };
        let failing = self.member(li).health.unreachable_for_ms();
        if failing == 0 && decides == Ok(true) && std::mem::take(&mut self.leader_down) {
            self.restore_leader(li).await;
        }
        if failing > 0 {
            self.leader_down = true;
        }
        let d = self.dialect();
        if failing == 0 {
            self.heard.iter_mut().for_each(|h| *h = None);
            if d == Dialect::MySql {
                // What the replicas may have received from it: beyond
                // that, and beyond what they received, a replica's
                // transactions are its own (errant).
                let sql = "SELECT @@GLOBAL.gtid_executed, @@server_uuid";
                if let Ok(rows) = self.query(li, sql).await {
                    let f = |k: usize| rows.first().and_then(|r| r.get(k)).cloned().flatten();
                    if let (Some(executed), Some(uuid)) =
                        (f(0).as_deref().and_then(GtidSet::parse), f(1))
                    {
                        self.primary_seen = Some(PrimarySeen { executed, uuid });
                    }
                }
            }
            if self.s.semi_sync {
                // A replica whose IO thread is not connected says nothing
                // about before: the primary may have died a moment ago,
                // before its checks fail, and the replica that was
                // acknowledging must still count as such.
                for i in self.replicas(li) {
                    match self.probe(i).await {
                        Ok(p) if p.io_connected => {
                            self.acked_at[i] = match p.semi_sync_on {
                                true => sextant_backend::clock_ms().max(1),
                                false => 0,
                            }
                        }
                        _ => {}
                    }
                }
            }
            g.ha.set_state("healthy", "");
            return;
        }
        let mut replicas = Vec::new();
        for i in self.replicas(li) {
            let probe = self.probe(i).await;
            let p = probe.as_ref().ok().cloned().unwrap_or_default();
            let silent_ms = self.silence(i, &p);
            let follows_other = self.follows_other(&p, li);
            let (mut received, mut applied) = (Vec::new(), Vec::new());
            let (mut received_set, mut executed_set) = (GtidSet::default(), GtidSet::default());
            match (p.received, p.applied) {
                (Position::MariaDb(r), Position::MariaDb(a)) => (received, applied) = (r, a),
                (Position::MySql(r), Position::MySql(a)) => (received_set, executed_set) = (r, a),
                _ => {}
            }
            replicas.push(Replica {
                addr: self.member(i).addr.to_string(),
                answers: probe.is_ok(),
                promotable: self.s.promotable.get(i).copied().unwrap_or(false),
                io_connected: p.io_connected && !follows_other,
                received,
                applied,
                received_set,
                executed_set,
                acked: self.acked_before(i, failing),
                silent_ms,
                heartbeat_ms: p.heartbeat_ms,
            });
        }
        let view = View {
            primary_failing_ms: failing,
            replicas,
            semi_sync: self.s.semi_sync,
            mysql: d == Dialect::MySql,
            primary_seen: self.primary_seen.clone(),
        };
        let decision = decide(&view, self.s.after_ms);
        let name = g.name.to_string();
        match decision {
            Decision::Keep => {}
            Decision::Wait(why) => {
                if g.ha.set_state("primary failing", &why) {
                    tracing::warn!(group = %name, "primary failing, no failover yet: {why}");
                }
            }
            Decision::Refuse(why) => {
                if g.ha.set_state("refused", &why) {
                    g.ha.note_refusal();
                    tracing::error!(group = %name, "failover refused: {why}");
                }
            }
            Decision::Promote { .. } if decides != Ok(true) => {
                let why = match decides {
                    Err(e) => format!("the fleet's store cannot say which instance fails this group over ({e}): this one does not"),
                    Ok(_) => match self.s.coordinator.as_ref() {
                        Some(c) => format!(
                            "instance {} performs this group's failovers",
                            c.decider(&g.name).await.unwrap_or_else(|| "(unknown)".into())
                        ),
                        None => String::new(),
                    },
                };
                g.ha.set_state("primary failing", &why);
            }
            Decision::Promote {
                candidate,
                apply_to,
                repoint,
                errant,
            } => {
                for e in &errant {
                    tracing::error!(group = %name, "left out of the failover: {e}");
                }
                let index = |a: &str| g.members.iter().position(|m| &*m.addr == a);
                let Some(c) = index(&candidate) else {
                    return;
                };
                let repoint: Vec<usize> = repoint.iter().filter_map(|a| index(a)).collect();
                self.promote(li, c, &apply_to, &repoint, failing).await;
            }
        }
    }

    /// The primary of the term answers again after it did not: a server
    /// restarted with read_only in its config (as old primaries should
    /// be, so that none comes back writable) is made writable again when
    /// no other server is; with semi-sync, its master side goes on.
    async fn restore_leader(&mut self, li: usize) {
        let g = self.group.clone();
        let others = g
            .members
            .iter()
            .enumerate()
            .any(|(i, m)| i != li && m.health.writable() && m.health.reachable());
        if self.fenced[li] || others || self.member(li).health.writable() {
            return;
        }
        // A primary that dropped transactions in crash recovery (started
        // as a replica, init-rpl-role = SLAVE) may be behind a replica that
        // received them: made writable, it would write over them.
        let d = self.dialect();
        let own = match self.query(li, d.position()).await {
            Ok(rows) => Position::parse(d, first_cell(&rows).as_deref()),
            Err(_) => {
                self.leader_down = true;
                return;
            }
        };
        for i in self.replicas(li) {
            let Ok(p) = self.probe(i).await else { continue };
            let ahead = p.holds().beyond(&own);
            if !ahead.is_empty() {
                let why = format!(
                    "the primary {} came back without transactions replica {} received ({ahead}): it is left read-only; promote a replica with SWITCHOVER GROUP",
                    self.member(li).addr,
                    self.member(i).addr,
                );
                if g.ha.set_state("refused", &why) {
                    g.ha.note_refusal();
                    tracing::error!(group = %g.name, "{why}");
                }
                self.leader_down = true;
                return;
            }
        }
        let mut steps = vec![d.writable()];
        if self.s.semi_sync {
            steps.insert(0, d.semi_sync_primary_on());
        }
        match self.exec(li, &steps).await {
            Ok(()) => {
                tracing::warn!(group = %g.name, server = %self.member(li).addr, term = g.ha.term(), "the primary came back read-only (restarted): writable again, as the primary of its term");
                self.member(li).health.set_writable(true);
                g.follow();
            }
            Err(e) => {
                self.leader_down = true;
                tracing::warn!(group = %g.name, "the primary came back read-only and could not be made writable: {e}");
            }
        }
    }

    /// Whether replica `i` was acknowledging the primary's commits just
    /// before it began failing `failing_ms` ago: seen so within the time
    /// a death takes to show in sextant's checks.
    fn acked_before(&self, i: usize, failing_ms: u64) -> bool {
        let at = self.acked_at[i];
        let began = sextant_backend::clock_ms().saturating_sub(failing_ms);
        let grace = (self.budget(i) + self.s.interval * 2).as_millis() as u64;
        at > 0 && at + grace >= began
    }

    /// The members other than the primary `li` that are not fenced.
    pub(crate) fn replicas(&self, li: usize) -> Vec<usize> {
        (0..self.group.members.len())
            .filter(|&i| i != li && !self.fenced[i])
            .collect()
    }

    /// Reads the group's term from every member that answers (once): the
    /// highest names the primary; any other member found writable is an
    /// old primary and is fenced.
    async fn read_terms(&mut self) {
        let name = self.group.name.replace('\'', "''");
        let sql = format!(
            "SELECT term, primary_addr, promoted_at FROM sextant.failover WHERE grp = '{name}'"
        );
        let mut best: Option<(u64, String, String)> = None;
        let mut answered = 0;
        for i in 0..self.group.members.len() {
            match self.query(i, &sql).await {
                Ok(rows) => {
                    answered += 1;
                    let r = rows.first();
                    let f = |k: usize| r.and_then(|r| r.get(k)).cloned().flatten();
                    let term = f(0).and_then(|t| t.parse::<u64>().ok()).unwrap_or(0);
                    if term > best.as_ref().map_or(0, |b| b.0) {
                        best = Some((term, f(1).unwrap_or_default(), f(2).unwrap_or_default()));
                    }
                }
                // No table (or schema) yet: term 0 there.
                Err(FailoverError::Backend(BackendError::Server {
                    code: 1146 | 1049, ..
                })) => answered += 1,
                Err(_) => {}
            }
        }
        if answered == 0 {
            return;
        }
        self.terms_read = true;
        let Some((term, addr, at)) = best else {
            return;
        };
        self.group.ha.see_term(term);
        self.promoted_at = Position::parse(self.dialect(), Some(&at));
        let Some(pi) = self.group.members.iter().position(|m| *m.addr == *addr) else {
            return;
        };
        for i in 0..self.group.members.len() {
            let m = self.member(i).clone();
            if i != pi && m.health.writable() {
                tracing::warn!(group = %self.group.name, server = %m.addr, term, primary = %addr, "writable, but not the primary of the group's newest term: fenced");
                self.fence(i, term);
                if m.health.replaced_term() < term {
                    m.health.mark_replaced(term);
                }
            }
        }
        self.set_leader(Some(pi));
        self.group.follow();
    }

    /// Keeps member `i` out of writes and reads: an old primary.
    pub(crate) fn fence(&mut self, i: usize, term: u64) {
        self.fenced[i] = true;
        self.member(i).health.set_member(
            false,
            Some(format!(
                "fenced: a primary before term {term}, out until it rejoins"
            )),
        );
        self.group.follow();
    }

    /// [`Task::decides`], for the switchover.
    pub(crate) async fn decides_now(&self) -> Result<bool, String> {
        self.decides().await
    }

    /// The instance that decides, as the fleet's store says.
    pub(crate) async fn decider_name(&self) -> String {
        match &self.s.coordinator {
            Some(c) => c
                .decider(&self.group.name)
                .await
                .unwrap_or_else(|| "(unknown)".into()),
            None => "this one".into(),
        }
    }

    /// Whether this instance performs the group's failovers: alone, yes;
    /// in a fleet, when it holds the group's leader key.
    async fn decides(&self) -> Result<bool, String> {
        match &self.s.coordinator {
            None => Ok(true),
            Some(c) => c.may_decide(&self.group.name).await,
        }
    }

    /// Another instance decides: an old primary fenced here returns to
    /// rotation once it is read-only and replicates again (the deciding
    /// instance rejoined it).
    async fn follow_fenced(&mut self) {
        for i in 0..self.fenced.len() {
            if !self.fenced[i] || Some(i) == self.leader {
                continue;
            }
            let Ok(p) = self.probe(i).await else { continue };
            let ro = self
                .query(i, "SELECT @@read_only")
                .await
                .ok()
                .and_then(|r| r.first().and_then(|r| r.first()).cloned().flatten());
            if p.io_connected && matches!(ro.as_deref(), Some("1") | Some("ON")) {
                tracing::info!(group = %self.group.name, server = %self.member(i).addr, "the old primary replicates again (another instance rejoined it): back in rotation");
                self.unfence(i);
            }
        }
    }

    pub(crate) fn unfence(&mut self, i: usize) {
        self.fenced[i] = false;
        self.member(i).health.set_member(true, None);
        self.group.follow();
    }

    /// Old primaries that answer: read-only first, then rejoined as
    /// replicas if they hold nothing the new primary lacks.
    async fn tend_fenced(&mut self) {
        for i in 0..self.fenced.len() {
            if self.fenced[i] && Some(i) != self.leader {
                if let Err(e) = self.rejoin(i).await {
                    tracing::debug!(server = %self.member(i).addr, "old primary not rejoined yet: {e}");
                }
            }
        }
    }
}

/// The server answered with an error: the connection is still good.
pub(crate) fn is_server_error(e: &FailoverError) -> bool {
    matches!(e, FailoverError::Backend(BackendError::Server { .. }))
}
