//! Counts heap allocations when `SEXTANT_COUNT_ALLOCATIONS=1`, so tests
//! (through SHOW STATUS) can check that relaying statements allocates
//! nothing. A test instrument: only a build with the `count-allocations`
//! feature has it (the test suite's), not the release binary. Off, the
//! cost is one relaxed load of a flag per allocation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub struct Counting;

pub static ENABLED: AtomicBool = AtomicBool::new(false);
pub static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is passed straight to the system allocator; the
// counter has no effect on the memory handed out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ENABLED.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract for `alloc` is the same as System's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if ENABLED.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: as for alloc.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ENABLED.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: `ptr` came from this allocator, which is System's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, which is System's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Turns counting on if the environment asks for it.
/// The counter SHOW STATUS reports, if counting was asked for.
pub fn counter() -> Option<&'static AtomicU64> {
    let on = std::env::var("SEXTANT_COUNT_ALLOCATIONS").is_ok_and(|v| v == "1");
    ENABLED.store(on, Ordering::Relaxed);
    on.then_some(&ALLOCATIONS)
}
