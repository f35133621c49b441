//! The distributed-transaction coordinator's state and decisions.
//!
//! A transaction that writes to several groups commits with XA two-phase
//! commit: every branch but one is prepared, then the decision is
//! committed in that one's branch, as a row of its group
//! ([`decision`]), then every other branch commits. No decision row means
//! roll back (presumed abort), so a crash at any step leaves each
//! transaction wholly committed or wholly rolled back once recovery
//! ([`recover::plan`]) has run, on this instance or, if it is gone for
//! good, on any other of its fleet. The [`log::DecisionLog`] on local disk
//! holds the decisions of branches from before decisions were kept with
//! the data, and of nothing new.
//!
//! This crate does no server I/O: the proxy's sessions run the XA
//! statements (`proxy/src/session/xa.rs`) and its recovery task asks each
//! group's primary for prepared branches (`proxy/src/xa_recovery.rs`).

pub mod decision;
pub mod error;
pub mod failpoint;
pub mod instance;
pub mod log;
pub mod recover;
pub mod xid;

pub use error::XaError;
pub use failpoint::{Failpoint, Step};
pub use log::{Decision, DecisionLog, FileLog};
pub use xid::Xid;

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Where a session's distributed transaction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Statements are running; branches are started as groups are touched.
    Active,
    /// Branches are being prepared.
    Preparing,
    /// The commit is logged; branches are being committed.
    Committing,
    /// Branches are being rolled back.
    RollingBack,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Active => "active",
            Stage::Preparing => "preparing",
            Stage::Committing => "committing",
            Stage::RollingBack => "rolling back",
        }
    }
}

/// A transaction a session of this process is carrying out.
#[derive(Debug, Clone)]
pub struct Flight {
    pub started_ms: u64,
    pub stage: Stage,
    /// Branches started so far (group indexes).
    pub groups: Vec<usize>,
    pub session: u32,
}

/// A prepared branch recovery found and has not resolved (yet).
#[derive(Debug, Clone)]
pub struct InDoubt {
    pub gtrid: String,
    pub bqual: String,
    pub group: usize,
    pub server: String,
    /// What recovery will do (or did and failed at): "commit", "rollback",
    /// "other instance".
    pub action: &'static str,
    pub error: Option<String>,
    /// When recovery first saw it (Unix ms).
    pub seen_ms: u64,
}

/// One sextant instance's coordinator.
pub struct Coordinator {
    pub instance: String,
    owner: String,
    ids: xid::Ids,
    pub log: Arc<dyn DecisionLog>,
    pub failpoint: Failpoint,
    pub recover_interval: Duration,
    flying: Mutex<HashMap<String, Flight>>,
    /// While recovery passes run: every transaction that was in flight
    /// at some moment since the oldest of them began. A branch XA RECOVER
    /// listed may have been a live session's even if that session has
    /// finished by the time the pass decides; it is not the pass's.
    touched: Mutex<(usize, std::collections::HashSet<String>)>,
    in_doubt: Mutex<Vec<InDoubt>>,
    /// Wakes recovery early (a branch's commit failed; a primary changed).
    pub wake: tokio::sync::Notify,
    /// Decision rows whose transactions finished, to be removed (decider
    /// group, gtrid): recovery removes them in batches.
    settled: Mutex<Vec<(usize, Vec<u8>)>>,
    /// When recovery first saw each prepared transaction (by gtrid).
    first_seen: Mutex<HashMap<Vec<u8>, std::time::Instant>>,
    /// The servers (by address) known to have the decision table.
    tables: Mutex<std::collections::HashSet<String>>,
    /// This instance's id is claimed among the sextants sharing the
    /// servers: until it is, it decides no commit and recovers nothing.
    claimed: std::sync::atomic::AtomicBool,
}

impl Coordinator {
    pub fn new(
        instance: &str,
        log: Arc<dyn DecisionLog>,
        failpoint: Failpoint,
        recover_interval: Duration,
    ) -> Coordinator {
        Coordinator {
            instance: instance.to_string(),
            owner: xid::owner_prefix(instance),
            ids: xid::Ids::new(instance, log::now_ms()),
            log,
            failpoint,
            recover_interval,
            flying: Mutex::new(HashMap::new()),
            touched: Mutex::new((0, std::collections::HashSet::new())),
            in_doubt: Mutex::new(Vec::new()),
            wake: tokio::sync::Notify::new(),
            settled: Mutex::new(Vec::new()),
            first_seen: Mutex::new(HashMap::new()),
            tables: Mutex::new(std::collections::HashSet::new()),
            claimed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether this instance's id is claimed (see `claimed`).
    pub fn id_claimed(&self) -> bool {
        self.claimed.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn set_id_claimed(&self, yes: bool) {
        self.claimed
            .store(yes, std::sync::atomic::Ordering::Release);
    }

    /// When a recovery pass first saw each of `gtrids` prepared (`now`
    /// for those it had not seen before); forgets the others.
    pub fn first_seen<'a>(
        &self,
        gtrids: impl IntoIterator<Item = &'a [u8]>,
        now: std::time::Instant,
    ) -> HashMap<Vec<u8>, std::time::Instant> {
        let mut seen = self.first_seen.lock();
        let mut out = HashMap::new();
        for g in gtrids {
            let t = *seen.entry(g.to_vec()).or_insert(now);
            out.insert(g.to_vec(), t);
        }
        seen.retain(|g, _| out.contains_key(g));
        out
    }

    /// Whether the server at `addr` was seen to have the decision table.
    pub fn has_table(&self, addr: &str) -> bool {
        self.tables.lock().contains(addr)
    }

    pub fn table_made(&self, addr: &str) {
        self.tables.lock().insert(addr.to_string());
    }

    /// Every branch of `gtrid` is finished: its decision row in group
    /// `decider` may go.
    pub fn settled(&self, decider: usize, gtrid: &str) {
        let mut s = self.settled.lock();
        // Bounded: if the rows cannot be removed for a long time, the
        // sweep of old rows removes them later.
        if s.len() < 100_000 {
            s.push((decider, gtrid.as_bytes().to_vec()));
        }
    }

    /// The decision rows to remove, taken.
    pub fn take_settled(&self) -> Vec<(usize, Vec<u8>)> {
        std::mem::take(&mut *self.settled.lock())
    }

    /// The gtrid prefix of this instance's transactions.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// A new distributed transaction, registered until the returned
    /// [`Flying`] is dropped: recovery leaves its branches to the session.
    pub fn begin(self: &Arc<Self>, session: u32) -> Flying {
        let gtrid = self.ids.next();
        self.note_touched(&gtrid);
        self.flying.lock().insert(
            gtrid.clone(),
            Flight {
                started_ms: log::now_ms(),
                stage: Stage::Active,
                groups: Vec::new(),
                session,
            },
        );
        Flying {
            coord: self.clone(),
            gtrid,
        }
    }

    pub fn in_flight(&self, gtrid: &str) -> bool {
        self.flying.lock().contains_key(gtrid)
    }

    fn note_touched(&self, gtrid: &str) {
        let mut t = self.touched.lock();
        if t.0 > 0 {
            t.1.insert(gtrid.to_string());
        }
    }

    /// Starts watching for a recovery pass, before it asks any group: until
    /// the returned [`Watch`] is dropped, every transaction in flight now
    /// or later is remembered, finished or not ([`Watch::live`]).
    pub fn watch(self: &Arc<Self>) -> Watch {
        let now: Vec<String> = self.flying.lock().keys().cloned().collect();
        let mut t = self.touched.lock();
        t.0 += 1;
        t.1.extend(now);
        Watch {
            coord: self.clone(),
        }
    }

    /// The transactions sessions are carrying out, oldest first.
    pub fn flights(&self) -> Vec<(String, Flight)> {
        let mut v: Vec<(String, Flight)> = self
            .flying
            .lock()
            .iter()
            .map(|(g, f)| (g.clone(), f.clone()))
            .collect();
        v.sort_by_key(|(_, f)| f.started_ms);
        v
    }

    pub fn set_in_doubt(&self, rows: Vec<InDoubt>) {
        let mut cur = self.in_doubt.lock();
        // Keep when each branch was first seen, for its age.
        let rows = rows
            .into_iter()
            .map(|mut r| {
                if let Some(old) = cur
                    .iter()
                    .find(|o| o.gtrid == r.gtrid && o.bqual == r.bqual && o.group == r.group)
                {
                    r.seen_ms = old.seen_ms;
                }
                r
            })
            .collect();
        *cur = rows;
    }

    pub fn in_doubt(&self) -> Vec<InDoubt> {
        self.in_doubt.lock().clone()
    }
}

/// A session's registration of its transaction; dropping it ends the
/// registration, after which recovery may resolve leftover branches.
pub struct Flying {
    coord: Arc<Coordinator>,
    pub gtrid: String,
}

impl Flying {
    pub fn coordinator(&self) -> &Arc<Coordinator> {
        &self.coord
    }

    pub fn set_stage(&self, stage: Stage) {
        if let Some(f) = self.coord.flying.lock().get_mut(&self.gtrid) {
            f.stage = stage;
        }
    }

    pub fn add_group(&self, group: usize) {
        if let Some(f) = self.coord.flying.lock().get_mut(&self.gtrid) {
            f.groups.push(group);
        }
    }
}

impl Drop for Flying {
    fn drop(&mut self) {
        self.coord.note_touched(&self.gtrid);
        self.coord.flying.lock().remove(&self.gtrid);
    }
}

/// A recovery pass's view of the sessions' transactions.
pub struct Watch {
    coord: Arc<Coordinator>,
}

impl Watch {
    /// A session of this instance carried out `gtrid` at some moment of
    /// the pass: its branches are the session's, whatever XA RECOVER said.
    pub fn live(&self, gtrid: &str) -> bool {
        self.coord.in_flight(gtrid) || self.coord.touched.lock().1.contains(gtrid)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut t = self.coord.touched.lock();
        t.0 -= 1;
        if t.0 == 0 {
            t.1.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_leaves_alone_what_was_in_flight_at_any_moment_of_it() {
        let d = std::env::temp_dir().join(format!("sextant-xa-watch-{}", std::process::id()));
        let log = Arc::new(FileLog::open(&d).unwrap());
        let c = Arc::new(Coordinator::new(
            "w",
            log,
            Failpoint::default(),
            Duration::from_secs(1),
        ));
        let before = c.begin(1);
        let ended_before = c.begin(2);
        let ended_gtrid = ended_before.gtrid.clone();
        drop(ended_before);
        let w = c.watch();
        // In flight when the pass began, finished during it.
        let g1 = before.gtrid.clone();
        drop(before);
        // Begun and finished during the pass.
        let during = c.begin(3);
        let g2 = during.gtrid.clone();
        drop(during);
        assert!(w.live(&g1) && w.live(&g2));
        assert!(
            !w.live(&ended_gtrid),
            "finished before the pass: recovery's"
        );
        drop(w);
        assert!(c.touched.lock().1.is_empty());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn flights_register_until_dropped() {
        let d = std::env::temp_dir().join(format!("sextant-xa-coord-{}", std::process::id()));
        let log = Arc::new(FileLog::open(&d).unwrap());
        let c = Arc::new(Coordinator::new(
            "me",
            log,
            Failpoint::default(),
            Duration::from_secs(5),
        ));
        let a = c.begin(7);
        let b = c.begin(8);
        assert_ne!(a.gtrid, b.gtrid);
        assert!(a.gtrid.starts_with(c.owner()));
        a.add_group(2);
        a.set_stage(Stage::Preparing);
        let f = c.flights();
        assert_eq!(f.len(), 2);
        let fa = &f.iter().find(|(g, _)| *g == a.gtrid).unwrap().1;
        assert_eq!(
            (fa.stage, fa.groups.clone(), fa.session),
            (Stage::Preparing, vec![2], 7)
        );
        let g = a.gtrid.clone();
        drop(a);
        assert!(!c.in_flight(&g));
        assert!(c.in_flight(&b.gtrid));
    }
}
