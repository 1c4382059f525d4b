//! Memory of the heap-backed fair queue, counted by a global allocator: a queued item costs
//! about its key and value (no per-item link), and a drained queue gives its buffers back.
//! Only the allocations of the thread that set `COUNTING` are counted: the test harness's
//! own threads allocate now and then while a test runs.

#![cfg(feature = "alloc")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering};

use fairq_core::fair::FairQueue;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    /// Whether this thread counts its allocation calls (apart from `COUNTING`: the bytes
    /// of this thread must not reach the shared count of another test).
    static COUNTING_CALLS: Cell<bool> = const { Cell::new(false) };
    /// Allocations and reallocations made by this thread while it counts them.
    static CALLS: Cell<u64> = const { Cell::new(0) };
}

/// Counts an allocation or reallocation when the calling thread counts its calls.
fn count_call() {
    if COUNTING_CALLS.try_with(Cell::get).unwrap_or(false) {
        let _ = CALLS.try_with(|c| c.set(c.get() + 1));
    }
}

/// Adds `bytes` to the count when the calling thread counts its allocations.
fn count(bytes: isize) {
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        LIVE.fetch_add(bytes, Ordering::SeqCst);
    }
}

// SAFETY: forwards to the system allocator and only adds a counter update.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        count_call();
        // SAFETY: same layout contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        count_call();
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::SeqCst)
}

#[test]
fn items_cost_little_more_than_themselves_and_a_drain_gives_memory_back() {
    const ITEMS: u32 = 200_000;
    COUNTING.with(|c| c.set(true));
    let item = std::mem::size_of::<(u32, u64)>() as f64;
    for keys in [1u32, 64, 4_096] {
        let before = live();
        let mut q = FairQueue::unbounded();
        for i in 0..ITEMS {
            q.push(i.wrapping_mul(2_654_435_761) % keys, u64::from(i))
                .unwrap();
        }
        let per_item = (live() - before) as f64 / f64::from(ITEMS);
        // A VecDeque of the same items takes up to 2x (capacity doubles); the fair queue's
        // rounds and key table must stay in that range, not add a link or a slot per item.
        assert!(
            per_item <= 2.0 * item,
            "{keys} keys: {per_item:.1} bytes per queued item"
        );
        while q.pop().is_some() {}
        let held = live() - before;
        assert!(
            held < 64 * 1024,
            "{keys} keys: {held} bytes still held by an empty queue"
        );
        // Still a working queue after giving memory back.
        q.push(1, 1).unwrap();
        assert_eq!(q.pop_with_key(), Some((1, 1)));
        drop(q);
        assert_eq!(live(), before, "{keys} keys: leaked");
    }
}

/// Keys that come and go at depth one (each pushed and popped at once, then not seen for a
/// while: the in-memory job store's usual pattern) cost next to no allocation once the queue
/// is warm. The key table keeps room for every key it will hold before its next sweep of
/// stale keys; shrunk below that at each sweep, it grew back (and rehashed every key) several
/// times between two sweeps: 9,373 allocations in these cycles. The table may still grow once
/// after the warm-up, at a sweep the hash seed decides (one run in seven or so), so the test
/// allows two.
#[test]
fn transient_keys_at_depth_one_all_but_stop_allocating_once_warm() {
    COUNTING_CALLS.with(|c| c.set(true));
    let mut q: FairQueue<u32, u64> = FairQueue::unbounded();
    let mut cycle = |i: u32| {
        q.push(i % 10_000, u64::from(i)).unwrap();
        assert_eq!(q.pop(), Some(u64::from(i)));
    };
    for i in 0..20_000 {
        cycle(i);
    }
    let before = CALLS.with(Cell::get);
    for i in 20_000..120_000 {
        cycle(i);
    }
    let calls = CALLS.with(Cell::get) - before;
    COUNTING_CALLS.with(|c| c.set(false));
    assert!(calls <= 2, "{calls} allocations in 100,000 warm cycles");
}
