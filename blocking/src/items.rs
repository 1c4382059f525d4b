//! The item store of [`crate::WaitQueue`]: two lock-free FIFOs (items given back first,
//! then normal items) and the optional bound.
//!
//! # How the bound stays exact under `Refuse`
//!
//! A bounded queue keeps a counter of *held slots*. A push first reserves a slot with a
//! compare-and-swap that only succeeds while the counter is below the capacity, and only
//! then enqueues its item; a pop dequeues first and frees the slot afterwards. Every slot
//! change is a read-modify-write on that one counter, so they are totally ordered and
//! two pushes can never both take the last slot. Hence, at every instant,
//! `items in the queue <= held slots <= capacity`, and a push is refused only when all
//! `capacity` slots are held (by queued items, or by pushes/pops caught in the middle).
//! Items given back with `put_head` are never refused (refusing would lose them): they
//! take a slot unconditionally and may hold the counter above the capacity, in which case
//! pushes are refused until it falls back below.

use crossbeam_utils::CachePadded;

use crate::handoff::Store;
use crate::sync::{AtomicU64, AtomicUsize, Ordering, SegQueue};

/// What a bounded [`WaitQueue`](crate::WaitQueue) does with a push when it is full.
///
/// ```
/// use fairq_blocking::{FullPolicy, WaitQueue};
///
/// let q = WaitQueue::bounded(1, FullPolicy::DropOldest);
/// q.push("old").unwrap();
/// q.push("new").unwrap();
/// assert_eq!(q.dropped(), 1);
/// assert_eq!(q.try_pop(), Some("new"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FullPolicy {
    /// The push fails and hands the item back.
    Refuse,
    /// The oldest normal item (not one given back with `put_head`) is dropped and counted
    /// in [`WaitQueue::dropped`](crate::WaitQueue::dropped).
    DropOldest,
}

struct Bound {
    capacity: usize,
    policy: FullPolicy,
    held: CachePadded<AtomicUsize>,
    dropped: AtomicU64,
}

pub(crate) struct Items<T> {
    returned: SegQueue<T>,
    /// Upper bound on `returned.len()`: lets `pop` skip the returned queue cheaply.
    returned_hint: CachePadded<AtomicUsize>,
    main: SegQueue<T>,
    bound: Option<Bound>,
}

impl<T> Items<T> {
    pub(crate) fn new(bound: Option<(usize, FullPolicy)>) -> Self {
        Items {
            returned: SegQueue::new(),
            returned_hint: CachePadded::new(AtomicUsize::new(0)),
            main: SegQueue::new(),
            bound: bound.map(|(capacity, policy)| Bound {
                capacity,
                policy,
                held: CachePadded::new(AtomicUsize::new(0)),
                dropped: AtomicU64::new(0),
            }),
        }
    }

    pub(crate) fn capacity(&self) -> Option<usize> {
        self.bound.as_ref().map(|b| b.capacity)
    }

    pub(crate) fn policy(&self) -> Option<FullPolicy> {
        self.bound.as_ref().map(|b| b.policy)
    }

    pub(crate) fn dropped(&self) -> u64 {
        self.bound
            .as_ref()
            .map_or(0, |b| b.dropped.load(Ordering::Relaxed))
    }

    pub(crate) fn len(&self) -> usize {
        match &self.bound {
            Some(b) => b.held.load(Ordering::Acquire),
            None => self.returned.len() + self.main.len(),
        }
    }

    /// Enqueues a normal item, applying the bound. `Err` gives it back (full, `Refuse`).
    pub(crate) fn push(&self, item: T) -> Result<(), T> {
        let Some(bound) = &self.bound else {
            self.main.push(item);
            return Ok(());
        };
        match bound.policy {
            FullPolicy::Refuse => {
                let reserved =
                    bound
                        .held
                        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                            (held < bound.capacity).then_some(held + 1)
                        });
                if reserved.is_err() {
                    return Err(item);
                }
                self.main.push(item);
            }
            FullPolicy::DropOldest => {
                let before = bound.held.fetch_add(1, Ordering::AcqRel);
                self.main.push(item);
                if before >= bound.capacity {
                    // Over the bound: the oldest normal item makes room. If consumers
                    // emptied the queue meanwhile, their pops already freed the slots.
                    if let Some(oldest) = self.main.pop() {
                        bound.held.fetch_sub(1, Ordering::AcqRel);
                        bound.dropped.fetch_add(1, Ordering::Relaxed);
                        drop(oldest);
                    }
                }
            }
        }
        Ok(())
    }
}

impl<T> Store for Items<T> {
    type Item = T;

    fn pop(&self) -> Option<T> {
        let mut item = None;
        if self.returned_hint.load(Ordering::Acquire) != 0 {
            item = self.returned.pop();
            if item.is_some() {
                self.returned_hint.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let item = item.or_else(|| self.main.pop())?;
        if let Some(bound) = &self.bound {
            bound.held.fetch_sub(1, Ordering::AcqRel);
        }
        Some(item)
    }

    fn put_back(&self, item: T) {
        if let Some(bound) = &self.bound {
            bound.held.fetch_add(1, Ordering::AcqRel);
        }
        // Counted before it is visible, so the hint never underflows.
        self.returned_hint.fetch_add(1, Ordering::AcqRel);
        self.returned.push(item);
    }
}
