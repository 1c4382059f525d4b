//! Producers waiting for room in a bounded queue: the waiting forms of `push`.
//!
//! A producer that finds the queue full may first spin until a batch of slots is free (see
//! [`RoomWaiters::push_blocking`]) and yield its core a few times, trying after each yield
//! (blocking pushes only, adaptively; the yields stop once a producer is registered: see
//! `spin`). Then it *registers* (a list entry with its thread or waker, and a count
//! consumers read without the lock), tries once more, and parks. A consumer that makes room
//! (a pop from the bounded store, a removal) checks the count and, if anyone waits,
//! *notifies* the oldest registered producer: takes its entry off the list and wakes it.
//! Both sides publish first and check second, separated by `SeqCst` fences, so either the
//! producer's second try finds the room or the consumer sees the producer registered. (The
//! fences matter for the lock-free ring; the loom models run on the mutex stand-in of
//! `sync`, which orders the two sides by itself, so they check the wake-up protocol, and
//! fail when a room-making path forgets to notify, but not the fences.)
//!
//! A notified producer always tries again before it may give up, so a notification is never
//! wasted while its room is free: if the try fails, someone else took the room. Two parties
//! can receive a notification they do not need, and both pass it on to the next producer: a
//! producer whose own second try succeeded while the notification was on its way (the
//! room it announces is still free; found by the loom model of two blocked producers at
//! three preemptions), and an asynchronous push dropped right after it was notified.
//! A parked producer looks at its entry before every park, so it never sleeps on a
//! notification that came while it was busy trying.
//!
//! "Oldest first" holds among registered producers: they are notified in the order they
//! registered. A producer that has not registered competes for room with them as a plain
//! `push` does: one whose first try finds room, and one spinning or yielding before it
//! registers. The spin does not look at the list, and no look could keep the room for a
//! registered producer anyway: the pop that makes room takes the oldest entry off the list
//! at once, so between that notification and the producer's next try the list may be empty
//! while the room is meant for it. A notified producer whose try then fails registers again,
//! at the back. Keeping the room for it would take a count of notified producers that have
//! not tried yet, read by every polling producer: not done, since polling before
//! registering is what keeps a small bounded queue fast (see `spin`).
//!
//! A store of capacity 0 never has room: there a waiting push fails at once, as when its
//! deadline has passed, instead of waiting for room that cannot come.
//!
//! Producers only ever wait here when the queue is full, so the list lock is off the fast
//! path; a consumer's fast path is one load (after the ring's `SeqCst` pop, which stands in
//! for the fence: see [`RoomWaiters::someone_waits_seqcst`]) or one fence and one load.

use std::collections::VecDeque;
use std::task::Waker;

use crossbeam_utils::CachePadded;

use crate::deadline::Deadline;
use crate::spin::Spin as Polling;
use crate::sync::{
    catch, current, fence, lock, raise, raise_any, AtomicBool, AtomicUsize, Mutex, Ordering, Panic,
    Thread,
};

/// How a registered producer is woken.
pub(crate) enum Wake {
    Thread(Thread),
    Task(Waker),
}

impl Wake {
    fn wake(self) {
        match self {
            Wake::Thread(thread) => thread.unpark(),
            Wake::Task(waker) => waker.wake(),
        }
    }
}

struct Entry {
    id: u64,
    wake: Wake,
}

struct List {
    next_id: u64,
    entries: VecDeque<Entry>,
}

/// The outcome of one attempt to push.
pub(crate) enum Attempt<I> {
    Pushed,
    Full(I),
    Closed(I),
}

/// Why a waiting push gave its item back.
pub(crate) enum Refusal<I> {
    /// Still full at the deadline.
    Full(I),
    Closed(I),
}

/// The producers waiting for room.
pub(crate) struct RoomWaiters {
    waiting: CachePadded<AtomicUsize>,
    list: Mutex<List>,
    /// Whether a producer about to wait spins and yields first (see `spin`).
    polling: Polling,
    /// The store's capacity is 0: a full store never has room, and a waiting push fails at
    /// once instead of waiting for it.
    never_room: bool,
    /// A pop's wake-up of a producer panicked (see [`RoomWaiters::notify_after_pop`]).
    waker_panicked: AtomicBool,
}

/// Whether a store holding `len` of `capacity` items has a batch of room for a spinning
/// producer (see [`RoomWaiters::push_blocking`]): a sixteenth of its capacity, at least one
/// slot.
pub(crate) fn has_room_for_batch(len: usize, capacity: usize) -> bool {
    len + (capacity / 16).max(1) <= capacity
}

impl RoomWaiters {
    /// The producers of a store bounded at `capacity` (`None`: unbounded).
    pub(crate) fn new(capacity: Option<usize>) -> Self {
        RoomWaiters {
            waiting: CachePadded::new(AtomicUsize::new(0)),
            list: Mutex::new(List {
                next_id: 0,
                entries: VecDeque::new(),
            }),
            polling: Polling::new(),
            never_room: capacity == Some(0),
            waker_panicked: AtomicBool::new(false),
        }
    }

    /// Producers registered and not yet notified.
    pub(crate) fn count(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// Registers a producer; from the return on, a consumer that makes room notifies someone.
    pub(crate) fn register(&self, wake: Wake) -> u64 {
        let id = {
            let mut list = lock(&self.list);
            let id = list.next_id;
            list.next_id += 1;
            list.entries.push_back(Entry { id, wake });
            self.waiting.fetch_add(1, Ordering::AcqRel);
            id
        };
        fence(Ordering::SeqCst);
        id
    }

    /// Leaves the list. `true` if the producer was still registered; `false` if it had been
    /// notified (its entry was taken by a consumer).
    pub(crate) fn deregister(&self, id: u64) -> bool {
        let mut list = lock(&self.list);
        match list.entries.iter().position(|e| e.id == id) {
            Some(at) => {
                list.entries.remove(at);
                self.waiting.fetch_sub(1, Ordering::AcqRel);
                true
            }
            None => false,
        }
    }

    /// Leaves the list after pushing while registered. If a notification arrived meanwhile
    /// it announced room made after the room this producer used (which it found on its
    /// own), so it is passed on: otherwise the next producer could sleep beside free room.
    pub(crate) fn leave_after_push(&self, id: u64) {
        if !self.deregister(id) {
            self.room_made(1);
        }
    }

    /// Whether the producer is still registered (not yet notified); a task's waker is
    /// replaced by `waker` if so.
    pub(crate) fn still_waiting(&self, id: u64, waker: Option<&Waker>) -> bool {
        let mut list = lock(&self.list);
        match list.entries.iter_mut().find(|e| e.id == id) {
            Some(entry) => {
                if let (Some(waker), Wake::Task(old)) = (waker, &mut entry.wake) {
                    if !old.will_wake(waker) {
                        *old = waker.clone();
                    }
                }
                true
            }
            None => false,
        }
    }

    /// Call after room was made for `n` more items: wakes up to `n` waiting producers.
    #[inline]
    pub(crate) fn room_made(&self, n: usize) {
        raise_any(self.room_made_catching(n));
    }

    /// [`room_made`](Self::room_made), returning the first panic of a producer's waker (once
    /// all `n` are woken) instead of raising it.
    #[inline]
    pub(crate) fn room_made_catching(&self, n: usize) -> Result<(), Panic> {
        if self.someone_waits() {
            return self.notify(n);
        }
        Ok(())
    }

    /// Whether a producer waits for room, read after room was made (a fence, then the
    /// count: the producer registers, fences, then tries).
    #[inline]
    pub(crate) fn someone_waits(&self) -> bool {
        fence(Ordering::SeqCst);
        self.someone_waits_seqcst()
    }

    /// Like [`someone_waits`](Self::someone_waits), without the fence, after room made by a
    /// `SeqCst` read-modify-write that a producer's full check reads after a `SeqCst` fence:
    /// the pop of `Items`' ring (`ArrayQueue::pop` moves the head index with a `SeqCst`
    /// compare-and-swap; `push` reads it after a `SeqCst` fence before it reports "full").
    /// The producer registers (`R`), fences (`F`), then its push reads the head (`B`); the
    /// consumer moves the head (`H`), then loads the count (`L`). If both miss, `F` precedes
    /// `H` in the `SeqCst` order (`B` read an older head), `L` precedes `F` (`L` read a count
    /// older than `R`, which happens before `F`), and `H` precedes `L`: a cycle (the same
    /// argument as for items in `handoff`'s module docs). Skipping the fence matters: it
    /// would wait for the pop's last plain store (the slot's stamp) to reach its cache line,
    /// a round trip to the other core when both touch the ring.
    #[inline]
    pub(crate) fn someone_waits_seqcst(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0
    }

    /// Like [`someone_waits`](Self::someone_waits), without the fence, after room made in a
    /// critical section of a mutex that every try to push also locks (the unbounded
    /// `FairWaitQueue`'s store). The producer registers, then its try locks the mutex; the
    /// consumer makes room with the mutex held, then loads the count after unlocking. If
    /// the producer's critical section comes first, its registration happens before the
    /// consumer's lock, so the load sees it; otherwise the producer's try finds the room.
    #[inline]
    pub(crate) fn someone_waits_after_unlock(&self) -> bool {
        self.waiting.load(Ordering::Acquire) > 0
    }

    /// Wakes the oldest waiting producer after a pop that made room took `item` (call it
    /// when [`someone_waits`](Self::someone_waits) or a variant said so), and returns the
    /// item. If the producer's waker panics, the item goes back to the store with
    /// `give_back` (served first), not dropped, and the panic is raised (`None` if this
    /// thread is already unwinding), noted for [`waker_panicked`](Self::waker_panicked).
    #[cold]
    #[inline(never)]
    pub(crate) fn notify_after_pop<I>(&self, item: I, give_back: impl FnOnce(I)) -> Option<I> {
        match self.notify(1) {
            Ok(()) => Some(item),
            Err(panic) => {
                give_back(item);
                self.waker_panicked.store(true, Ordering::Relaxed);
                raise(panic);
                None
            }
        }
    }

    /// Whether a panic raised by [`notify_after_pop`](Self::notify_after_pop) since the last
    /// call came from a producer's waker (see `Store::waker_panicked`).
    pub(crate) fn waker_panicked(&self) -> bool {
        self.waker_panicked.swap(false, Ordering::Relaxed)
    }

    /// Wakes every waiting producer (the queue closed: they will find it so).
    pub(crate) fn notify_all(&self) {
        fence(Ordering::SeqCst);
        if self.waiting.load(Ordering::Acquire) > 0 {
            raise_any(self.notify(usize::MAX));
        }
    }

    /// Takes up to `n` entries off the list, one at a time, waking each outside the lock. A
    /// waker that panics (a bug of its executor) does not keep the others from being woken:
    /// the first panic is returned once all `n` are.
    #[cold]
    fn notify(&self, n: usize) -> Result<(), Panic> {
        let mut panicked = None;
        for _ in 0..n {
            let entry = {
                let mut list = lock(&self.list);
                let entry = list.entries.pop_front();
                if entry.is_some() {
                    self.waiting.fetch_sub(1, Ordering::AcqRel);
                }
                entry
            };
            match entry {
                Some(entry) => {
                    if let Err(panic) = catch(|| entry.wake.wake()) {
                        panicked.get_or_insert(panic);
                    }
                }
                None => break,
            }
        }
        panicked.map_or(Ok(()), Err)
    }

    /// Pushes with `attempt`, waiting for room until `deadline` (computed only if the push
    /// has to wait). The first attempt is inlined into the caller and the waiting is a
    /// separate function, so a push that finds room does not pay for the waiting path's
    /// stack frame and saved registers.
    ///
    /// Before it yields, a waiting producer spins, trying to push only once
    /// `room_for_batch()` says that a batch of slots is free. A producer that took each
    /// slot the moment a consumer freed it would trade the store's cache lines with the
    /// consumer for every item (the spsc bench's ring of 1,024 went from about 10 to about
    /// 32 ns an item when producers spun for any room). Waiting for a batch keeps the two
    /// apart, and still catches within a microsecond the room a consumer makes, which a
    /// small queue (a capacity of 1 to 16) needs: there a producer that only yielded spent
    /// a system call per item.
    #[inline]
    pub(crate) fn push_blocking<I, D: Deadline>(
        &self,
        item: I,
        deadline: impl FnOnce() -> D,
        room_for_batch: impl Fn() -> bool,
        mut attempt: impl FnMut(I) -> Attempt<I>,
    ) -> Result<(), Refusal<I>> {
        match attempt(item) {
            Attempt::Pushed => Ok(()),
            Attempt::Closed(item) => Err(Refusal::Closed(item)),
            Attempt::Full(item) => self.push_blocking_slow(item, deadline, room_for_batch, attempt),
        }
    }

    #[inline(never)]
    fn push_blocking_slow<I, D: Deadline>(
        &self,
        mut item: I,
        deadline: impl FnOnce() -> D,
        room_for_batch: impl Fn() -> bool,
        mut attempt: impl FnMut(I) -> Attempt<I>,
    ) -> Result<(), Refusal<I>> {
        if self.never_room {
            return Err(Refusal::Full(item));
        }
        let deadline = deadline();
        // Before registering, spin for a batch of room and yield the core a few times, as
        // far as each has paid lately (see `spin`): the consumer this producer waits for may
        // be waiting for this very core. The yields stop once a producer is registered; the
        // spin may still take room ahead of registered producers (see the module docs).
        let tried = self.polling.poll_with(
            item,
            room_for_batch,
            || self.count() != 0 || deadline.expired(),
            |item| match attempt(item) {
                Attempt::Full(item) => Err(item),
                done => Ok(done),
            },
        );
        item = match tried {
            Ok(Attempt::Pushed) => return Ok(()),
            Ok(Attempt::Closed(item)) => return Err(Refusal::Closed(item)),
            Ok(Attempt::Full(item)) | Err(item) => item,
        };
        loop {
            if deadline.expired() {
                return Err(Refusal::Full(item));
            }
            let id = self.register(Wake::Thread(current()));
            // The try may raise a consumer's panicking waker (a pass run by the push): the
            // producer then leaves the list as it unwinds.
            let registered = Registered { room: self, id };
            let tried = attempt(item);
            core::mem::forget(registered);
            item = match tried {
                Attempt::Pushed => {
                    self.leave_after_push(id);
                    return Ok(());
                }
                Attempt::Closed(item) => {
                    self.deregister(id);
                    return Err(Refusal::Closed(item));
                }
                Attempt::Full(item) => item,
            };
            // Checked before each park, not only after: a notification that arrived during
            // the try above must not depend on the thread's park token surviving until the
            // park (under loom it does not survive blocking on a lock, which is how the
            // model of two blocked producers found this at three preemptions).
            while self.still_waiting(id, None) {
                if deadline.expired() {
                    if self.deregister(id) {
                        return Err(Refusal::Full(item));
                    }
                    break; // notified meanwhile: one more try, even at the deadline
                }
                deadline.park();
            }
            item = match attempt(item) {
                Attempt::Pushed => return Ok(()),
                Attempt::Closed(item) => return Err(Refusal::Closed(item)),
                Attempt::Full(item) => item,
            };
        }
    }
}

/// A blocking producer's registration while it tries: if the try unwinds, the producer
/// leaves the list, passing on a notification that arrived meanwhile (as after a push).
struct Registered<'a> {
    room: &'a RoomWaiters,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.room.leave_after_push(self.id);
    }
}

/// The state of one asynchronous waiting push.
pub(crate) struct PushState<I> {
    item: Option<I>,
    registered: Option<u64>,
    /// The deadline signal completed: it must not be polled again (a future may panic when
    /// polled after it returned `Ready`, as `future::ready` does).
    signalled: bool,
}

impl<I> PushState<I> {
    pub(crate) fn new(item: I) -> Self {
        PushState {
            item: Some(item),
            registered: None,
            signalled: false,
        }
    }

    /// Polls the push: `attempt` pushes, `poll_signal` polls the deadline signal (never
    /// again once it said it completed).
    pub(crate) fn poll(
        &mut self,
        room: &RoomWaiters,
        waker: &Waker,
        mut poll_signal: impl FnMut() -> bool,
        mut attempt: impl FnMut(I) -> Attempt<I>,
    ) -> Option<Result<(), Refusal<I>>> {
        let signalled = &mut self.signalled;
        // A notification may arrive between the signal's completion and leaving the list;
        // the push then tries once more and asks again.
        let mut expired = || {
            *signalled = *signalled || poll_signal();
            *signalled
        };
        let mut item = self.item.take()?;
        if let Some(id) = self.registered {
            if room.still_waiting(id, Some(waker)) {
                if !expired() {
                    self.item = Some(item);
                    return None;
                }
                if room.deregister(id) {
                    self.registered = None;
                    return Some(Err(Refusal::Full(item)));
                }
            }
            self.registered = None; // notified: try again
        }
        item = match attempt(item) {
            Attempt::Pushed => return Some(Ok(())),
            Attempt::Closed(item) => return Some(Err(Refusal::Closed(item))),
            Attempt::Full(item) => item,
        };
        if room.never_room || expired() {
            return Some(Err(Refusal::Full(item)));
        }
        let id = room.register(Wake::Task(waker.clone()));
        // Noted before the try, which may raise a consumer's panicking waker (a pass run by
        // the push): the dropped future then leaves the list (`cancel`).
        self.registered = Some(id);
        match attempt(item) {
            Attempt::Pushed => {
                self.registered = None;
                room.leave_after_push(id);
                Some(Ok(()))
            }
            Attempt::Closed(item) => {
                self.registered = None;
                room.deregister(id);
                Some(Err(Refusal::Closed(item)))
            }
            Attempt::Full(item) => {
                self.item = Some(item);
                None
            }
        }
    }

    /// The future is dropped: leave the list, passing on a notification that arrived unused.
    pub(crate) fn cancel(&mut self, room: &RoomWaiters) {
        if let Some(id) = self.registered.take() {
            if !room.deregister(id) {
                room.room_made(1);
            }
        }
    }
}
