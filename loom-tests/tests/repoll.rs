//! Models of a pending asynchronous pop polled a second time, with a new waker, while
//! another thread resolves its waiter (hands it an item, closes the queue, evicts the
//! waiters, or settles the waiter's expiry).
//!
//! The second poll replaces the waker in the waiter (`Waiter::register_waker`): it sets the
//! `REGISTERING` bit of the waiter's state word, swaps the waker, and clears the bit. A
//! drainer that resolves the waiter meanwhile (`fulfil`, `release`, `cancel`) sees the bit,
//! leaves the wake-up to the owner and does not touch the waker cell; the owner then finds
//! the waiter resolved and returns `Ready`. If that hand-over were wrong, the wake-up would
//! go to the old waker (or nowhere) while the poll returns `Pending`.
//!
//! Each model polls the future once with a waker that does nothing (`poll_once`), then
//! drives it with `loom::future::block_on`, whose waker is a different one: a wake-up that
//! goes to the old waker, or none at all, leaves `block_on` waiting forever, which loom
//! reports as a deadlock. So a lost wake-up fails these models, and the assertions check
//! that the item is delivered exactly once. Checked by breaking `register_waker`: when it
//! keeps the old waker on a later poll, all four models deadlock; when it notices only a
//! hand-over of an item while it registers (not a resolution empty), the close, evict and
//! expiry models do.
#![cfg(loom)]

mod common;

use std::task::Poll;
use std::time::Duration;

use common::{model, poll_once};
use fairq_blocking::model::ModelTimer;
use fairq_blocking::WaitQueue;
use loom::sync::Arc;
use loom::thread;

/// Under loom a clock timeout never expires: this waits until an item or close/evict.
const FOREVER: Duration = Duration::from_secs(3600);

/// A push races the second poll: the drainer's `fulfil` hands the item over before, during
/// or after the waker is replaced, and the future completes with it.
#[test]
fn repoll_races_a_push() {
    model(|| {
        let q = Arc::new(WaitQueue::unbounded());
        let mut f = q.pop_async(None);
        assert_eq!(poll_once(&mut f), Poll::Pending);
        let pusher = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.push(1).unwrap())
        };
        assert_eq!(
            loom::future::block_on(&mut f),
            Some(1),
            "lost or misdelivered"
        );
        drop(f);
        pusher.join().unwrap();
        assert_eq!(q.try_pop(), None, "duplicate");
        assert_eq!(q.waiter_count(), 0);
    });
}

/// `close` races the second poll: the drainer's `cancel` resolves the waiter, and the
/// future completes with `None`.
#[test]
fn repoll_races_close() {
    model(|| {
        let q = Arc::new(WaitQueue::<i32>::unbounded());
        let mut f = q.pop_async(None);
        assert_eq!(poll_once(&mut f), Poll::Pending);
        let closer = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.close())
        };
        assert_eq!(loom::future::block_on(&mut f), None);
        drop(f);
        closer.join().unwrap();
        assert_eq!(q.waiter_count(), 0);
    });
}

/// `evict_waiters` races the second poll: the future completes with `None`, and the queue
/// stays open (a later push is queued, not handed to the evicted waiter).
#[test]
fn repoll_races_evict() {
    model(|| {
        let q = Arc::new(WaitQueue::unbounded());
        let mut f = q.pop_async(None);
        assert_eq!(poll_once(&mut f), Poll::Pending);
        let evicter = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.evict_waiters())
        };
        assert_eq!(loom::future::block_on(&mut f), None);
        drop(f);
        evicter.join().unwrap();
        assert_eq!(q.waiter_count(), 0);
        q.push(1).unwrap();
        assert_eq!(q.try_pop(), Some(1));
    });
}

/// The future's deadline (a timer thread) fires while it is polled again, and a second
/// consumer's registration runs a pass that claims the future's waiter and, finding no
/// item, releases it. The expiry that arrives while the waiter is claimed only sets a flag
/// (`Expire::Deferred`), and the drainer's `release` settles it, possibly while the owner
/// is replacing its waker; either way the future completes with `None`. The item pushed
/// afterwards reaches the second consumer, once.
#[test]
fn repoll_races_a_release_after_expiry() {
    model(|| {
        let q = Arc::new(WaitQueue::unbounded());
        let timer = Arc::new(ModelTimer::new());
        let mut f = q.pop_until(ModelTimer::signal(&timer));
        assert_eq!(poll_once(&mut f), Poll::Pending);
        let consumer = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.pop_timeout(FOREVER))
        };
        let firing = {
            let timer = Arc::clone(&timer);
            thread::spawn(move || timer.fire())
        };
        assert_eq!(loom::future::block_on(&mut f), None, "nothing was pushed");
        drop(f);
        firing.join().unwrap();
        q.push(1).unwrap();
        assert_eq!(consumer.join().unwrap(), Some(1));
        assert!(q.is_empty(), "duplicate");
        assert_eq!(q.waiter_count(), 0);
    });
}
