//! Giving memory back to the system after large work. Freed buffers of a
//! large statement stay in the allocator's heap (glibc raises its mmap
//! threshold after such a free, so the next large buffer comes from the
//! heap too), and an idle session's RSS would keep them. After a large
//! free, glibc is asked to return its free pages, at most every 100 ms per
//! worker thread: it takes the allocator's arena locks, which the hot path
//! must not do per statement.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
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

/// Bytes of large statements that all sessions are reading now.
static HELD: AtomicUsize = AtomicUsize::new(0);

/// Packets up to this size are not counted: they cannot add up to much,
/// and counting them would touch a shared counter per statement.
pub const COUNTED_FROM: usize = 1 << 20;

/// What a statement of `total` bytes, read through frames of up to
/// `frame` bytes, holds once admitted: the statement itself, the copy
/// framed for the server, and the client's read buffer at its largest
/// frame (kept until the command is done).
pub fn held_for(total: usize, frame: usize) -> usize {
    total.saturating_mul(2).saturating_add(frame)
}

/// A session's share of `[proxy] statement_memory_mb`, given back when
/// the statement is done (or the session ends).
#[derive(Debug, Default)]
pub struct Held(usize);

impl Held {
    /// Takes the share up to `bytes`, unless all sessions would then hold
    /// more than `max`: then nothing is taken, and the bytes held by all
    /// is returned.
    pub fn grow_to(&mut self, bytes: usize, max: usize) -> Result<(), usize> {
        if bytes <= self.0 {
            return Ok(());
        }
        let more = bytes - self.0;
        let before = HELD.fetch_add(more, Ordering::Relaxed);
        if before + more > max {
            HELD.fetch_sub(more, Ordering::Relaxed);
            return Err(before);
        }
        self.0 = bytes;
        Ok(())
    }

    pub fn release(&mut self) {
        if self.0 > 0 {
            HELD.fetch_sub(self.0, Ordering::Relaxed);
            self.0 = 0;
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.release();
    }
}

/// Bytes of large statements all sessions are reading now.
#[cfg(test)]
fn statements_held() -> usize {
    HELD.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_and_are_given_back() {
        // Other tests of this binary do not read statements.
        let base = statements_held();
        let max = base + 10;
        let (mut a, mut b) = (Held::default(), Held::default());
        a.grow_to(6, max).unwrap();
        a.grow_to(4, max).unwrap();
        assert_eq!(b.grow_to(5, max), Err(base + 6));
        b.grow_to(4, max).unwrap();
        assert_eq!(statements_held(), base + 10);
        drop(a);
        b.release();
        assert_eq!(statements_held(), base);
    }
}
