//! The hand-off engine shared by [`crate::WaitQueue`] and [`crate::FairWaitQueue`]: a store
//! of items, a lock-free queue of waiting consumers, and the serialized drain pass that
//! pairs the oldest live waiter with the next item.
//!
//! # The drain pass
//!
//! Only one thread at a time runs a drain pass, and nobody waits for it: a caller that
//! wants a pass increments `pending`; the caller that moved it from 0 becomes the drainer
//! and repeats passes until it can reset the counter from the value it last covered to 0.
//! Everyone else returns at once, their request absorbed by the running drainer (the
//! "pent-up hand-offs" counter). A producer therefore never blocks or spins on a
//! consumer, and a burst of producers costs the drainer one extra pass, not one per push.
//!
//! A pass (1) delivers: it takes the oldest waiter, *claims* it (so it can no longer time
//! out under our feet), then pops an item for it; with no item it releases the waiter and
//! keeps it aside as the oldest; (2) evicts: on `close` or `evict_waiters` it resolves
//! every waiter empty; (3) prunes, when asked (see below). Because a claimed waiter cannot
//! vanish, an item leaves the store only when it is certain to be delivered. The single
//! exception is a future dropped while claimed: its item stays with the drainer, goes to
//! the next live waiter, or else back to the head of the store.
//!
//! # Pruning
//!
//! A waiter whose owner gives up (its deadline passed, its future was dropped) resolves
//! itself and stays in the waiter queue, holding its thread handle or waker, until a pass
//! pops it; and a pass that finds no item stops at the oldest live waiter. Behind one
//! waiter that waits for long, waiters that give up would thus pile up without bound (a
//! loop of short timeouts), and none of them could be reused. So an owner that gives up
//! counts itself, and once the waiters that gave up since the last prune reach the live
//! ones plus `PRUNE_SLACK`, it asks for a pass that prunes: it pops every waiter
//! queued, drops the resolved ones (keeping them for reuse) and moves the live ones, in
//! order, to a list kept aside behind the oldest waiter (the queue has no "push front"),
//! which passes serve before the queue and from which later prunes drop resolved waiters
//! too. A prune's work is about the live waiters plus the resolved ones, and it follows at
//! least as many give-ups as there are live waiters: constant work per give-up, amortised,
//! and never on the path of a push or of a pop that gets an item.
//!
//! # A panicking waker
//!
//! A pass wakes consumers' wakers and, through the store's pops that make room, waiting
//! producers' wakers: user code, which may panic (a bug of its executor). A panic must not
//! leave the drain taken (`pending` set: no pass would ever run again), a claimed waiter
//! unsettled, or a popped item dropped. So every wake-up comes last in the step that runs
//! it, after the waiter or producer is resolved and accounted for; the pop gives its item
//! back to the store before the producer's panic goes on; a pass cut short by a panic
//! releases the waiter it claimed, keeps the waiters it had not reached where they were,
//! and is followed by another pass, and the drainer raises the first panic once `pending`
//! is reset. A consumer whose registration ran that pass gives its wait up (handing back
//! an item it may have been given) before the panic reaches it, and a producer that was
//! registered leaves the list. Under loom nothing is caught.
//!
//! # Who triggers a pass
//!
//! A consumer that starts waiting always triggers one. A producer triggers one only if
//! waiters are registered; both sides publish first and check second, separated by
//! `SeqCst` fences, so at least one of them sees the other (a consumer's pass then finds
//! the item, or the producer sees the waiter).
//!
//! # Publishing without a fence
//!
//! A `SeqCst` fence right after the push costs more than the rest of it when another core
//! keeps touching the queue: the fence waits until the push's last plain store (the ring
//! slot's stamp) owns its cache line, a round trip to the other core. `WaitQueue`'s pushes
//! therefore skip it ([`Handoff::item_added_seqcst`]): each of them takes effect through a
//! `SeqCst` compare-and-swap (or, for a `DropOldest` overwrite, a `SeqCst` store) of the
//! store's tail index, and a pop finds the store empty only by reading that index after a
//! `SeqCst` fence (`crossbeam-queue` 0.3, `SegQueue` and `ArrayQueue`, which its own
//! channels rely on in the same way). With the producer's tail write `T`, its `SeqCst` load
//! `L` of the live count, the consumer's increment `R` of that count, its fence `F`
//! (registration) and its read `B` of the tail index after `F`, suppose both miss: `B`
//! reads a tail older than `T`, so `F` precedes `T` in the single `SeqCst` order (C++20
//! [atomics.order] p4.3); `L` reads a count older than `R` and `R` happens before `F`, so
//! `L` precedes `F` (p4.2); and `T` precedes `L` (same thread, both `SeqCst`): `F < T < L <
//! F`, a cycle. So the consumer's pass finds the item or the producer sees the waiter, as
//! with the fence. A drainer that runs the pass on the consumer's behalf reads the store
//! after acquiring the consumer's request, so `F` happens before its read too. Items given
//! back (`put_back`) and `FairWaitQueue` (a mutex-protected store) keep the fence.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use std::collections::VecDeque;

use crossbeam_utils::CachePadded;

use crate::deadline::Deadline;
use crate::spin::Spin;
use crate::sync::{
    catch, current, fence, lock_uncontended, park, raise, raise_any, Arc, ArrayQueue, AtomicBool,
    AtomicUsize, Mutex, Ordering, Panic, SegQueue,
};
use crate::waiter::{Abandon, Expire, Release, Waiter};

/// Where the items live. Implementations are linearizable and never block on a consumer.
pub(crate) trait Store {
    /// What a consumer receives.
    type Item;
    /// Takes the next item in delivery order. A pop that makes room in a bounded store
    /// wakes a producer waiting for it; if that producer's waker panics, the item goes back
    /// to the store (served first) and the panic is raised.
    fn pop(&self) -> Option<Self::Item>;
    /// Whether a panic that a [`pop`](Self::pop) raised came from a producer's waker (which
    /// then left the list of waiting producers) rather than from the store itself; asked
    /// once per panic caught (a panic raised elsewhere meanwhile may answer for it).
    fn waker_panicked(&self) -> bool;
    /// Puts an item back so it is served before every item that was never handed out.
    fn put_back(&self, item: Self::Item);
}

/// Why a pass ended early: a panic out of a producer's waker, woken by a pop that made room,
/// or out of the store's pop itself.
enum Cut {
    Waker(Panic),
    Store(Panic),
}

struct DrainState<I> {
    /// The oldest waiter, kept aside because the waiter queue has no "push front".
    front: Option<Arc<Waiter<I>>>,
    /// Live waiters a prune moved off the waiter queue, oldest first: younger than `front`,
    /// older than every waiter still queued.
    behind: VecDeque<Arc<Waiter<I>>>,
    /// The eviction generation already acted on.
    evictions_seen: usize,
}

/// Store + waiting consumers.
pub(crate) struct Handoff<S: Store> {
    pub(crate) store: S,
    waiters: SegQueue<Arc<Waiter<S::Item>>>,
    /// Waiters that are registered and not yet resolved.
    live: CachePadded<AtomicUsize>,
    /// Requested drain passes not yet covered by the running drainer.
    pending: CachePadded<AtomicUsize>,
    /// Only ever locked by the thread that owns the drain (see the module docs).
    drain: Mutex<DrainState<S::Item>>,
    closed: AtomicBool,
    evictions: AtomicUsize,
    /// Owners that gave up on their own since the last prune (see "Pruning").
    gave_up: AtomicUsize,
    /// A prune is due: the next pass runs one.
    prune_due: AtomicBool,
    /// Resolved waiters nobody else references, kept so a wait does not allocate one.
    spare: ArrayQueue<Arc<Waiter<S::Item>>>,
    spin: Spin,
}

/// How many resolved waiters a queue keeps for reuse (about the number of consumers that
/// wait at the same time).
#[cfg(not(loom))]
const SPARE_WAITERS: usize = 16;
#[cfg(loom)]
const SPARE_WAITERS: usize = 2;

/// How many more waiters may give up than are live before a prune is due (see "Pruning"
/// in the module docs). Under loom every give-up prunes, so that the models see pruning.
#[cfg(not(loom))]
const PRUNE_SLACK: usize = 16;

impl<S: Store> Handoff<S> {
    pub(crate) fn new(store: S) -> Self {
        Handoff {
            store,
            waiters: SegQueue::new(),
            live: CachePadded::new(AtomicUsize::new(0)),
            pending: CachePadded::new(AtomicUsize::new(0)),
            drain: Mutex::new(DrainState {
                front: None,
                behind: VecDeque::new(),
                evictions_seen: 0,
            }),
            closed: AtomicBool::new(false),
            evictions: AtomicUsize::new(0),
            gave_up: AtomicUsize::new(0),
            prune_due: AtomicBool::new(false),
            spare: ArrayQueue::new(SPARE_WAITERS),
            spin: Spin::new(),
        }
    }

    /// A waiter in its initial state, reused from an earlier wait when one is spare.
    fn new_waiter(&self, make: impl FnOnce() -> Waiter<S::Item>) -> Arc<Waiter<S::Item>> {
        if let Some(mut waiter) = self.spare.pop() {
            // Unique when it was put aside and nobody can have cloned it since; `get_mut`
            // also orders our writes after the last holder's release of its reference.
            if let Some(slot) = Arc::get_mut(&mut waiter) {
                *slot = make();
                return waiter;
            }
        }
        Arc::new(make())
    }

    /// Keeps a resolved waiter for reuse if nobody else (the drainer, the waiter queue)
    /// still references it; otherwise the last holder frees it.
    fn recycle(&self, waiter: Arc<Waiter<S::Item>>) {
        if Arc::strong_count(&waiter) == 1 {
            let _ = self.spare.push(waiter);
        }
    }

    pub(crate) fn waiter_count(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Call after an item entered the store: hands it over if anyone waits.
    pub(crate) fn item_added(&self) {
        fence(Ordering::SeqCst);
        self.item_added_seqcst();
    }

    /// Like [`item_added`](Self::item_added), without the fence, for a store whose push
    /// took effect through a `SeqCst` write that a consumer's emptiness check reads after a
    /// `SeqCst` fence (the crossbeam queues of `Items`; see "Publishing without a fence" in
    /// the module docs). Inlined into every push; the pass it rarely needs is not.
    #[inline]
    pub(crate) fn item_added_seqcst(&self) {
        if self.live.load(Ordering::SeqCst) > 0 {
            self.drain();
        }
    }

    /// Puts an item back at the head and hands it over if anyone waits.
    pub(crate) fn put_back(&self, item: S::Item) {
        self.store.put_back(item);
        self.item_added();
    }

    /// Closes the queue and resolves its waiters. `Err`: a waker panicked; every waiter was
    /// resolved all the same, and the caller raises the panic once it has woken the
    /// waiting producers too.
    pub(crate) fn close(&self) -> Result<(), Panic> {
        self.closed.store(true, Ordering::Release);
        self.drain_catching()
    }

    pub(crate) fn evict_waiters(&self) {
        self.evictions.fetch_add(1, Ordering::AcqRel);
        self.drain();
    }

    /// The item a newly arriving consumer may take without queueing: only when nobody is
    /// waiting (waiters are served first) or when the queue is closed.
    fn take_without_waiting(&self) -> Option<S::Item> {
        if self.is_closed() || self.live.load(Ordering::Acquire) == 0 {
            self.store.pop()
        } else {
            None
        }
    }

    /// Registers a waiter and runs (or requests) a pass for it. `Err`: a waker woken in the
    /// pass panicked; the caller abandons its waiter ([`abandon`](Self::abandon)), then
    /// raises the panic.
    fn register(&self, waiter: &Arc<Waiter<S::Item>>) -> Result<(), Panic> {
        self.live.fetch_add(1, Ordering::AcqRel);
        self.waiters.push(Arc::clone(waiter));
        fence(Ordering::SeqCst);
        self.drain_catching()
    }

    fn leave(&self) {
        self.live.fetch_sub(1, Ordering::AcqRel);
    }

    /// The owner resolved its waiter empty on its own (deadline, drop) while the waiter was
    /// queued or kept aside: it leaves, and asks for a prune when one is due (see "Pruning"
    /// in the module docs).
    fn give_up(&self) {
        self.leave();
        let gave_up = self.gave_up.fetch_add(1, Ordering::Relaxed) + 1;
        #[cfg(not(loom))]
        let due = gave_up >= self.live.load(Ordering::Relaxed) + PRUNE_SLACK;
        #[cfg(loom)]
        let due = gave_up > 0;
        if due {
            // Seen by the pass that covers this request (`drain` orders the two).
            self.prune_due.store(true, Ordering::Release);
            self.drain();
        }
    }

    /// Requests a drain pass; runs it (and any requested meanwhile) if no one else is. A
    /// panic of a waker it wakes is raised once the drain is done.
    #[inline(never)]
    fn drain(&self) {
        raise_any(self.drain_catching());
    }

    /// [`drain`](Self::drain), returning the first panic of a waker instead of raising it,
    /// for callers that must first tidy up.
    #[inline]
    fn drain_catching(&self) -> Result<(), Panic> {
        if self.pending.fetch_add(1, Ordering::AcqRel) != 0 {
            return Ok(());
        }
        let mut covered = 1;
        let mut panicked = None;
        loop {
            let passed = {
                let mut state = lock_uncontended(&self.drain);
                catch(|| self.pass(&mut state))
            };
            // A pass cut short by a waker left everything in order, and the waiter or
            // producer that waker served resolved: another pass does what it left. One cut
            // short by the store itself is not run again (it could fail the same way).
            match passed {
                Ok(Ok(())) => {}
                Err(panic) | Ok(Err(Cut::Waker(panic))) => {
                    panicked.get_or_insert(panic);
                    continue;
                }
                Ok(Err(Cut::Store(panic))) => {
                    panicked.get_or_insert(panic);
                }
            }
            match self
                .pending
                .compare_exchange(covered, 0, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return panicked.map_or(Ok(()), Err),
                Err(now) => covered = now,
            }
        }
    }

    fn next_waiter(&self, state: &mut DrainState<S::Item>) -> Option<Arc<Waiter<S::Item>>> {
        if let Some(waiter) = state.front.take() {
            return Some(waiter);
        }
        if !state.behind.is_empty() {
            return state.behind.pop_front();
        }
        self.waiters.pop()
    }

    /// One pass. A waker that panics in it (a bug of its executor) ends it early, with every
    /// waiter and item where it belongs (see "A panicking waker" in the module docs): out
    /// of a consumer's wake-up the panic unwinds, after the waiter was resolved and
    /// accounted for; out of a producer's, which a pop that made room runs, it is returned,
    /// after the claimed waiter was released (the popped item is back in the store). A
    /// store whose pop panics otherwise (a key's `Hash` in a `FairWaitQueue`) ends it the
    /// same way.
    fn pass(&self, state: &mut DrainState<S::Item>) -> Result<(), Cut> {
        let mut carried: Option<S::Item> = None;
        while let Some(waiter) = self.next_waiter(state) {
            if !waiter.claim() {
                // Resolved already (timed out, dropped, evicted).
                self.recycle(waiter);
                continue;
            }
            let item = match carried.take() {
                Some(item) => item,
                None => match catch(|| self.store.pop()) {
                    Ok(Some(item)) => item,
                    Ok(None) => {
                        self.release(state, waiter);
                        break;
                    }
                    Err(panic) => {
                        self.release(state, waiter);
                        return Err(if self.store.waker_panicked() {
                            Cut::Waker(panic)
                        } else {
                            Cut::Store(panic)
                        });
                    }
                },
            };
            self.leave();
            if let Err(item) = waiter.fulfil(item) {
                carried = Some(item); // its future was dropped: next waiter
            }
        }
        if let Some(item) = carried {
            // No live waiter is left for it (new ones trigger their own pass).
            self.store.put_back(item);
        }

        let evictions = self.evictions.load(Ordering::Acquire);
        if self.is_closed() || evictions != state.evictions_seen {
            // One waiter at a time out of the state, so that a wake-up that panics leaves
            // the rest where the next pass finds them.
            if let Some(waiter) = state.front.take() {
                waiter.cancel(|| self.leave());
            }
            while let Some(waiter) = state.behind.pop_front() {
                waiter.cancel(|| self.leave());
            }
            // Bounded by the waiters present now, so a consumer that keeps re-registering
            // cannot hold the drainer here.
            for _ in 0..self.waiters.len() {
                match self.waiters.pop() {
                    Some(waiter) => waiter.cancel(|| self.leave()),
                    None => break,
                }
            }
            // Only now: a pass cut short by a panicking wake-up leaves the eviction to the
            // next one.
            state.evictions_seen = evictions;
        }

        if self.prune_due.load(Ordering::Acquire) {
            self.prune_due.store(false, Ordering::Relaxed);
            self.gave_up.store(0, Ordering::Relaxed);
            self.prune(state);
        }
        Ok(())
    }

    /// Gives back a claimed waiter that no item was found for: it is the oldest waiter
    /// again, or it is resolved (its owner gave up meanwhile) and leaves.
    #[inline]
    fn release(&self, state: &mut DrainState<S::Item>, waiter: Arc<Waiter<S::Item>>) {
        if let Release::Waiting = waiter.release(|| self.leave()) {
            state.front = Some(waiter);
        }
    }

    /// Drops the resolved waiters kept aside or queued, and moves the live queued ones
    /// behind those kept aside, in order (see "Pruning" in the module docs). Bounded by the
    /// waiters present now.
    fn prune(&self, state: &mut DrainState<S::Item>) {
        // In place, one waiter at a time: dropping a waiter drops its waker (user code).
        for _ in 0..state.behind.len() {
            match state.behind.pop_front() {
                Some(waiter) if waiter.is_resolved() => self.recycle(waiter),
                Some(waiter) => state.behind.push_back(waiter),
                None => break,
            }
        }
        for _ in 0..self.waiters.len() {
            match self.waiters.pop() {
                Some(waiter) if waiter.is_resolved() => self.recycle(waiter),
                Some(waiter) => state.behind.push_back(waiter),
                None => break,
            }
        }
        if state.behind.capacity() > 4 * state.behind.len().max(16) {
            state.behind.shrink_to_fit();
        }
    }

    /// Blocks the calling thread until an item is handed over, the deadline passes, or the
    /// queue is closed / its waiters evicted.
    ///
    /// The deadline is only computed (`deadline()`) if the pop has to wait, so the fast
    /// path does not read the clock. The fast path (an item is there) is inlined into the
    /// caller and the rest is a separate function, so taking an item does not pay for the
    /// stack frame and saved registers of the waiting path.
    #[inline]
    pub(crate) fn pop_blocking<D: Deadline>(
        &self,
        deadline: impl FnOnce() -> D,
    ) -> Option<S::Item> {
        match self.take_without_waiting() {
            Some(item) => Some(item),
            None => self.pop_blocking_slow(deadline),
        }
    }

    #[inline(never)]
    fn pop_blocking_slow<D: Deadline>(&self, deadline: impl FnOnce() -> D) -> Option<S::Item> {
        let deadline = deadline();
        if self.is_closed() || deadline.expired() {
            return None;
        }
        // Before registering, spin for about a microsecond and then yield the core a few
        // times, as far as each has paid on this queue lately (see `spin`): an item that
        // arrives meanwhile is taken like `try_pop` takes it (only while nobody waits, so
        // waiters keep their turn), without a hand-off pass for the producer to run and
        // without a wake-up. Yielding stops at the deadline, or once others wait (they
        // would be served first anyway).
        let polled = self.spin.poll(
            || self.live.load(Ordering::Relaxed) != 0 || deadline.expired(),
            || match self.take_without_waiting() {
                Some(item) => Some(Some(item)),
                None if self.is_closed() => Some(None),
                None => None,
            },
        );
        if let Some(outcome) = polled {
            return outcome;
        }
        let waiter = self.new_waiter(|| Waiter::for_thread(current()));
        if let Err(panic) = self.register(&waiter) {
            self.abandon(waiter);
            raise(panic);
            return None;
        }
        let outcome = self.wait_blocking(&waiter, &deadline);
        #[cfg(not(loom))]
        if let Some(wake) = waiter.since_woken() {
            self.spin.note_wake(wake);
        }
        self.recycle(waiter);
        outcome
    }

    fn wait_blocking<D: Deadline>(
        &self,
        waiter: &Waiter<S::Item>,
        deadline: &D,
    ) -> Option<S::Item> {
        let mut expiring = false;
        loop {
            if let Some(outcome) = waiter.outcome() {
                return outcome;
            }
            if expiring {
                // The drainer holds the waiter; it settles it within its pass and unparks us.
                park();
            } else if deadline.expired() {
                match waiter.expire() {
                    Expire::Expired => {
                        self.give_up();
                        return None;
                    }
                    Expire::Deferred => expiring = true,
                    Expire::Done => {}
                }
            } else {
                deadline.park();
            }
        }
    }

    /// Polls an asynchronous pop whose deadline is `signal`.
    ///
    /// As in [`pop_blocking`](Self::pop_blocking), the first poll's fast path (an item is
    /// there) is inlined into the caller and the rest is a separate function.
    #[inline]
    pub(crate) fn poll_pop<G>(
        &self,
        pop: &mut PopState<S::Item>,
        signal: &mut G,
        cx: &mut Context<'_>,
    ) -> Poll<Option<S::Item>>
    where
        G: Future<Output = ()> + Unpin,
    {
        if pop.waiter.is_none() && !pop.finished {
            if let Some(item) = self.take_without_waiting() {
                pop.finished = true;
                return Poll::Ready(Some(item));
            }
        }
        self.poll_pop_slow(pop, signal, cx)
    }

    #[inline(never)]
    fn poll_pop_slow<G>(
        &self,
        pop: &mut PopState<S::Item>,
        signal: &mut G,
        cx: &mut Context<'_>,
    ) -> Poll<Option<S::Item>>
    where
        G: Future<Output = ()> + Unpin,
    {
        let waiter = match pop.waiter.take() {
            Some(waiter) => waiter,
            None if pop.finished => return Poll::Ready(None),
            None => {
                // The fast path of `poll_pop` found no item on a first poll.
                if self.is_closed() {
                    pop.finished = true;
                    return Poll::Ready(None);
                }
                let waiter = self.new_waiter(|| Waiter::for_task(cx.waker()));
                if let Err(panic) = self.register(&waiter) {
                    pop.finished = true;
                    self.abandon(waiter);
                    raise(panic);
                    return Poll::Ready(None);
                }
                pop.fresh = true;
                waiter
            }
        };
        loop {
            if let Some(outcome) = waiter.outcome() {
                pop.finished = true;
                self.recycle(waiter);
                return Poll::Ready(outcome);
            }
            if !pop.expiring && Pin::new(&mut *signal).poll(cx).is_ready() {
                match waiter.expire() {
                    Expire::Expired => {
                        pop.finished = true;
                        self.give_up();
                        self.recycle(waiter);
                        return Poll::Ready(None);
                    }
                    Expire::Deferred => pop.expiring = true,
                    Expire::Done => continue,
                }
            }
            if core::mem::take(&mut pop.fresh) || register(&waiter, cx.waker()) {
                pop.waiter = Some(waiter);
                return Poll::Pending;
            }
        }
    }

    /// The owner of a pending asynchronous pop went away. Inlined, so that dropping a
    /// finished pop (no waiter) costs a test, not a call.
    #[inline]
    pub(crate) fn drop_pop(&self, pop: &mut PopState<S::Item>) {
        if pop.waiter.is_some() {
            self.drop_pending_pop(pop);
        }
    }

    #[inline(never)]
    fn drop_pending_pop(&self, pop: &mut PopState<S::Item>) {
        if let Some(waiter) = pop.waiter.take() {
            self.abandon(waiter);
        }
    }

    /// The owner stops waiting for good: the waiter resolves empty, or the drainer that holds
    /// it settles it, and an item already handed to it goes back to the head.
    fn abandon(&self, waiter: Arc<Waiter<S::Item>>) {
        match waiter.abandon() {
            Abandon::Expired => self.give_up(),
            Abandon::Item(item) => self.put_back(item),
            Abandon::Deferred | Abandon::Done => {}
        }
        self.recycle(waiter);
    }
}
fn register<I>(waiter: &Waiter<I>, waker: &Waker) -> bool {
    waiter.register_waker(waker)
}

/// The state of one asynchronous pop.
pub(crate) struct PopState<I> {
    waiter: Option<Arc<Waiter<I>>>,
    /// The waker given at registration is current: skip re-registering on that poll.
    fresh: bool,
    /// The deadline passed while the drainer held the waiter; waiting for it to settle.
    expiring: bool,
    finished: bool,
}

impl<I> PopState<I> {
    pub(crate) fn new() -> Self {
        PopState {
            waiter: None,
            fresh: false,
            expiring: false,
            finished: false,
        }
    }
}
