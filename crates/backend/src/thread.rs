//! Which worker thread is running: pipelined connections belong to the
//! thread that opened them (`Pipe::home`), and a connection's readiness
//! events wake that thread.

use std::sync::atomic::{AtomicUsize, Ordering};

/// A small number naming the calling thread.
pub fn thread_slot() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(1);
    thread_local! {
        static SLOT: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    SLOT.with(|s| *s)
}
