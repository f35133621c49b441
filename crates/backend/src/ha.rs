//! A group's high availability as sextant runs it (`failover = "auto"`):
//! the term of its primary, what the failover task is doing, and the last
//! failover's account. Read by SHOW GROUPS, the status page and metrics;
//! never on a statement's path.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[derive(Default)]
pub struct Ha {
    /// Sextant fails this group over itself.
    auto: AtomicBool,
    /// The primary's term: one higher at every failover or switchover
    /// sextant performs (0: none yet); kept with the primary in
    /// `sextant.failover`, so that a restarted instance knows it.
    term: AtomicU64,
    /// Failovers and switchovers this instance performed.
    failovers: AtomicU64,
    /// Failovers refused (no candidate that loses nothing).
    refusals: AtomicU64,
    report: Mutex<Report>,
    /// A planned switchover asked for on the admin port, for the failover
    /// task to carry out at its next round.
    switch: Mutex<Option<SwitchRequest>>,
}

/// `SWITCHOVER GROUP g [TO 'addr']`: the target (None: the replica that
/// has the most), and where the outcome goes (a sentence either way).
pub struct SwitchRequest {
    pub to: Option<String>,
    pub reply: tokio::sync::oneshot::Sender<Result<String, String>>,
}

/// What SHOW GROUPS says of the group's HA.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// "healthy", "primary failing", "promoting", "refused", "no primary
    /// known", "off".
    pub state: String,
    /// Why, in a sentence (empty when healthy).
    pub detail: String,
    /// The last failover: when, from and to which server, and how long
    /// each stage took.
    pub last: String,
}

impl Ha {
    pub fn set_auto(&self, on: bool) {
        self.auto.store(on, Ordering::Relaxed);
    }

    pub fn auto(&self) -> bool {
        self.auto.load(Ordering::Relaxed)
    }

    pub fn term(&self) -> u64 {
        self.term.load(Ordering::Acquire)
    }

    /// Raises the term to `t` (never lowers it); whether it rose.
    pub fn see_term(&self, t: u64) -> bool {
        self.term.fetch_max(t, Ordering::AcqRel) < t
    }

    pub fn failovers(&self) -> u64 {
        self.failovers.load(Ordering::Relaxed)
    }

    pub fn refusals(&self) -> u64 {
        self.refusals.load(Ordering::Relaxed)
    }

    pub fn note_failover(&self, last: String) {
        self.failovers.fetch_add(1, Ordering::Relaxed);
        self.report.lock().last = last;
    }

    pub fn note_refusal(&self) {
        self.refusals.fetch_add(1, Ordering::Relaxed);
    }

    /// Sets the state; whether it changed (for logging once).
    pub fn set_state(&self, state: &str, detail: &str) -> bool {
        let mut r = self.report.lock();
        if r.state == state && r.detail == detail {
            return false;
        }
        r.state = state.to_string();
        r.detail = detail.to_string();
        true
    }

    /// Asks the failover task for a switchover; Err: one is pending.
    pub fn request_switchover(&self, r: SwitchRequest) -> Result<(), SwitchRequest> {
        let mut slot = self.switch.lock();
        if slot.as_ref().is_some_and(|p| !p.reply.is_closed()) {
            return Err(r);
        }
        *slot = Some(r);
        Ok(())
    }

    /// The switchover asked for, if any (taken).
    pub fn take_switchover(&self) -> Option<SwitchRequest> {
        self.switch.lock().take()
    }

    pub fn report(&self) -> Report {
        let mut r = self.report.lock().clone();
        if !self.auto() {
            r.state = "off".into();
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_only_rise() {
        let h = Ha::default();
        assert!(h.see_term(3));
        assert!(!h.see_term(2));
        assert!(!h.see_term(3));
        assert_eq!(h.term(), 3);
        assert!(h.set_state("healthy", ""));
        assert!(!h.set_state("healthy", ""));
        assert_eq!(
            h.report().state,
            "off",
            "not auto: off whatever the task said"
        );
        h.set_auto(true);
        assert_eq!(h.report().state, "healthy");
    }
}
