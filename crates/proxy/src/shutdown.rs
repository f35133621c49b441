//! Graceful shutdown (SIGTERM, SIGINT). The listener closes; a session
//! ends at its next idle moment outside a transaction, telling the client
//! with error 1053 (as a MySQL server that is shutting down); statements
//! running and transactions open go on to their end, up to
//! `shutdown_timeout_ms`. Then the process exits 0.
//!
//! The signal is per thread: each worker thread's sessions wait on their
//! own thread's signal (sessions never leave their thread), so the wait
//! for a client's next command takes no lock shared across threads.

use std::cell::Cell;
use tokio::sync::Notify;

struct Signal {
    requested: Cell<bool>,
    notify: Notify,
}

thread_local! {
    // Leaked once per thread: a session's wait borrows it across awaits.
    static SIGNAL: &'static Signal = Box::leak(Box::new(Signal {
        requested: Cell::new(false),
        notify: Notify::new(),
    }));
}

/// Tells this thread's sessions to end when they can.
pub fn request_here() {
    SIGNAL.with(|s| {
        s.requested.set(true);
        s.notify.notify_waiters();
    });
}

/// Whether this thread's sessions are to end.
#[inline]
pub fn requested() -> bool {
    SIGNAL.with(|s| s.requested.get())
}

/// Resolves when this thread's sessions are told to end (at once if they
/// already were).
pub async fn wait() {
    let s: &'static Signal = SIGNAL.with(|s| *s);
    let notified = s.notify.notified();
    if s.requested.get() {
        return;
    }
    notified.await;
}

/// Tells systemd (Type=notify units: NOTIFY_SOCKET set) how sextant is
/// doing; nothing without it.
pub(crate) fn notify_systemd(states: &[sd_notify::NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!("cannot notify systemd: {e}");
    }
}
