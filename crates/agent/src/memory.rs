//! The agent's own heap, counted: every allocation of the agent's Rust code goes through
//! [`Counted`], so `status` (and the memory tests) can tell the agent's bytes from the
//! JVM's, which share the process and its `malloc`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes the agent has allocated and not freed.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, with the live bytes counted (one relaxed atomic add or subtract
/// per call: the agent's hot paths do not allocate).
struct Counted;

// SAFETY: every call is passed unchanged to the system allocator, which upholds
// `GlobalAlloc`'s contract; the counting touches only an atomic.
unsafe impl GlobalAlloc for Counted {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout, passed on.
        let block = unsafe { System.alloc(layout) };
        if !block.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        block
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout, passed on.
        let block = unsafe { System.alloc_zeroed(layout) };
        if !block.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        block
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        // SAFETY: a block this allocator returned, with its layout, as the caller promises.
        unsafe { System.dealloc(block, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: a block this allocator returned, with its layout, as the caller promises.
        let moved = unsafe { System.realloc(block, layout, new_size) };
        if !moved.is_null() {
            LIVE.fetch_add(new_size, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counted = Counted;

/// Bytes of the agent's heap in use now.
pub fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}
