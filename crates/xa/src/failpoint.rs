//! Test failpoints: `SEXTANT_XA_FAILPOINT` makes sextant stop as kill -9
//! would at one step of a distributed commit, so that tests can check
//! recovery after a crash at exactly that step. Forms:
//! `before_prepare`, `after_prepare:N` (after N branches prepared),
//! `after_decision` (the decision is durable, no other branch committed;
//! `after_log` is its older name),
//! `after_commit:N` (N branches committed); each may end in `@K`: stop the
//! K-th time the step is reached (default the first).

use std::sync::atomic::{AtomicU64, Ordering};

pub const ENV: &str = "SEXTANT_XA_FAILPOINT";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    BeforePrepare,
    AfterPrepare(u32),
    AfterLog,
    AfterCommit(u32),
}

#[derive(Debug, Default)]
pub struct Failpoint {
    armed: Option<(Step, u64)>,
    reached: AtomicU64,
}

impl Failpoint {
    /// From the environment; an unreadable value is an error (a test that
    /// asked for a crash must not run without one).
    pub fn from_env() -> Result<Failpoint, String> {
        match std::env::var(ENV) {
            Ok(v) if !v.is_empty() => Failpoint::parse(&v),
            _ => Ok(Failpoint::default()),
        }
    }

    pub fn parse(s: &str) -> Result<Failpoint, String> {
        let (step, k) = match s.split_once('@') {
            Some((st, k)) => (st, k.parse::<u64>().ok().filter(|k| *k > 0)),
            None => (s, Some(1)),
        };
        let bad = || {
            format!("{ENV}={s}: expected before_prepare, after_prepare:N, after_decision or after_commit:N, optionally @K")
        };
        let k = k.ok_or_else(bad)?;
        let n = |v: &str| v.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(bad);
        let step = match step.split_once(':') {
            None if step == "before_prepare" => Step::BeforePrepare,
            None if step == "after_log" || step == "after_decision" => Step::AfterLog,
            Some(("after_prepare", v)) => Step::AfterPrepare(n(v)?),
            Some(("after_commit", v)) => Step::AfterCommit(n(v)?),
            _ => return Err(bad()),
        };
        Ok(Failpoint {
            armed: Some((step, k)),
            reached: AtomicU64::new(0),
        })
    }

    pub fn armed(&self) -> Option<Step> {
        self.armed.map(|(s, _)| s)
    }

    /// Whether reaching `step` now is the armed crash.
    pub fn fires(&self, step: Step) -> bool {
        match self.armed {
            Some((s, k)) if s == step => self.reached.fetch_add(1, Ordering::AcqRel) + 1 == k,
            _ => false,
        }
    }

    /// Stops the process at `step` if armed for it.
    pub fn hit(&self, step: Step) {
        if self.fires(step) {
            tracing::error!(?step, "XA failpoint reached: stopping as kill -9 would");
            // SAFETY: getpid and kill have no preconditions.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(
            Failpoint::parse("after_log").unwrap().armed(),
            Some(Step::AfterLog)
        );
        assert_eq!(
            Failpoint::parse("after_prepare:2@5").unwrap().armed(),
            Some(Step::AfterPrepare(2))
        );
        for bad in [
            "after_prepare",
            "after_commit:0",
            "x",
            "after_log@0",
            "after_log@x",
        ] {
            assert!(Failpoint::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn fires_the_kth_time_only() {
        let f = Failpoint::parse("after_commit:1@3").unwrap();
        assert!(!f.fires(Step::AfterCommit(2)));
        assert!(!f.fires(Step::AfterCommit(1)));
        assert!(!f.fires(Step::AfterCommit(1)));
        assert!(f.fires(Step::AfterCommit(1)));
        assert!(!f.fires(Step::AfterCommit(1)));
        assert!(!Failpoint::default().fires(Step::AfterLog));
    }
}
