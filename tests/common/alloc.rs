//! A counting allocator for the memory tests (`hq.rs`, `rwlock_memory.rs`): live bytes and
//! allocations process-wide, allocations per thread. A test binary installs it with
//! `#[global_allocator] static ALLOCATOR: common::alloc::Counting = common::alloc::Counting;`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Forwards to `System`, counting what is live.
pub struct Counting;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);
static LIVE_ALLOCS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Allocations made by this thread (const-initialized, no destructor: usable in `alloc`).
    static THREAD_ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn note_alloc(size: usize) {
    LIVE_BYTES.fetch_add(size, Ordering::Relaxed);
    LIVE_ALLOCS.fetch_add(1, Ordering::Relaxed);
    let _ = THREAD_ALLOCS.try_with(|n| n.set(n.get() + 1));
}

fn note_dealloc(size: usize) {
    LIVE_BYTES.fetch_sub(size, Ordering::Relaxed);
    LIVE_ALLOCS.fetch_sub(1, Ordering::Relaxed);
}

// SAFETY: forwards every call to `System` unchanged; the counters have no effect on memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            note_alloc(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            note_alloc(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note_dealloc(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            note_dealloc(layout.size());
            note_alloc(new_size);
        }
        p
    }
}

/// Live (bytes, allocations) now, process-wide.
pub fn live() -> (usize, usize) {
    (
        LIVE_BYTES.load(Ordering::SeqCst),
        LIVE_ALLOCS.load(Ordering::SeqCst),
    )
}

/// Allocations made by the calling thread so far.
pub fn thread_allocs() -> u64 {
    THREAD_ALLOCS.with(Cell::get)
}

/// Asserts that what was live before a batch of locks was made is live again after they were
/// dropped, but for `slack_allocs` allocations and `slack_bytes` bytes made once (not per lock):
/// `allocs` and `bytes` are (before, after).
pub fn assert_freed(
    what: &str,
    allocs: (usize, usize),
    bytes: (usize, usize),
    slack_allocs: usize,
    slack_bytes: usize,
) {
    assert!(
        allocs.1 <= allocs.0 + slack_allocs,
        "{what}: live allocations {} -> {}",
        allocs.0,
        allocs.1
    );
    assert!(
        bytes.1 <= bytes.0 + slack_bytes,
        "{what}: live bytes {} -> {}",
        bytes.0,
        bytes.1
    );
}
