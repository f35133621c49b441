//! Giving memory back to the system after large work. Freed buffers of a
//! large statement stay in the allocator's heap (glibc raises its mmap
//! threshold after such a free, so the next large buffer comes from the
//! heap too), and an idle session's RSS would keep them. After a large
//! free, glibc is asked to return its free pages, at most every 100 ms per
//! worker thread: it takes the allocator's arena locks, which the hot path
//! must not do per statement.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// Frees smaller than this are left to the allocator.
const LARGE: usize = 1 << 20;
const EVERY: Duration = Duration::from_millis(100);

thread_local! {
    static LAST_TRIM: Cell<Option<Instant>> = const { Cell::new(None) };
    /// A trim is already scheduled on this thread.
    static PENDING: Cell<bool> = const { Cell::new(false) };
}

/// Notes that `bytes` of buffers were just freed: trims now, or once the
/// thread's last trim is `EVERY` old.
pub fn freed(bytes: usize) {
    if bytes < LARGE || PENDING.with(Cell::get) {
        return;
    }
    let now = Instant::now();
    match LAST_TRIM.with(Cell::get) {
        Some(last) if now.duration_since(last) < EVERY => {
            PENDING.with(|p| p.set(true));
            let wait = EVERY - now.duration_since(last);
            tokio::spawn(async move {
                tokio::time::sleep(wait).await;
                PENDING.with(|p| p.set(false));
                LAST_TRIM.with(|t| t.set(Some(Instant::now())));
                trim();
            });
        }
        _ => {
            LAST_TRIM.with(|t| t.set(Some(now)));
            trim();
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim only walks the allocator's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
