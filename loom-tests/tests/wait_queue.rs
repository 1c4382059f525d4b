//! Models of `WaitQueue` races. Each model uses at most three threads (main included) and
//! asserts that no item is lost or duplicated and that the ordering rules hold.
#![cfg(loom)]

mod common;

use std::task::Poll;
use std::time::Duration;

use common::{model, poll_once};
use fairq_blocking::model::ModelTimer;
use fairq_blocking::{FullPolicy, WaitQueue};
use loom::sync::Arc;
use loom::thread;

/// Under loom a clock timeout never expires: this waits until an item or close/evict.
const FOREVER: Duration = Duration::from_secs(3600);

/// A pop that gives up when `timer` fires.
type TimedPop = fn(&WaitQueue<i32>, &Arc<ModelTimer>) -> Option<i32>;

/// A push races `pop`, whose deadline a timer thread fires: the consumer gets the item or
/// `None`, and in the latter case the item is still queued.
fn push_vs_timed_pop(pop: TimedPop) {
    model(move || {
        let q = Arc::new(WaitQueue::unbounded());
        let timer = Arc::new(ModelTimer::new());
        let consumer = {
            let (q, timer) = (Arc::clone(&q), Arc::clone(&timer));
            thread::spawn(move || pop(&q, &timer))
        };
        let firing = {
            let timer = Arc::clone(&timer);
            thread::spawn(move || timer.fire())
        };
        q.push(1).unwrap();
        let got = consumer.join().unwrap();
        firing.join().unwrap();
        match got {
            Some(item) => {
                assert_eq!(item, 1);
                assert_eq!(q.try_pop(), None, "duplicate");
            }
            None => assert_eq!(q.try_pop(), Some(1), "a timed-out waiter consumed the item"),
        }
        assert_eq!(q.waiter_count(), 0);
    });
}

/// The race for the blocking pop.
#[test]
fn push_vs_blocking_pop_with_timeout() {
    push_vs_timed_pop(|q, timer| q.pop_blocking_until(timer));
}

/// The same race for the asynchronous pop: the timer thread completes the pop's signal.
#[test]
fn push_vs_async_pop_with_timeout() {
    push_vs_timed_pop(|q, timer| loom::future::block_on(q.pop_until(ModelTimer::signal(timer))));
}

/// Two producers race one waiting consumer: it receives every item exactly once and one
/// producer's items in the order they were pushed.
#[test]
fn two_pushers_one_waiter() {
    model(|| {
        let q = Arc::new(WaitQueue::unbounded());
        let first = {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                q.push(1).unwrap();
                q.push(2).unwrap();
            })
        };
        let second = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.push(3).unwrap())
        };
        let got: Vec<i32> = (0..3).map(|_| q.pop_timeout(FOREVER).unwrap()).collect();
        first.join().unwrap();
        second.join().unwrap();
        let pos = |x| got.iter().position(|&y| y == x).unwrap();
        let mut sorted = got.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![1, 2, 3], "lost or duplicated: {got:?}");
        assert!(pos(1) < pos(2), "per-producer order broken: {got:?}");
        assert!(q.is_empty());
        assert_eq!(q.waiter_count(), 0);
    });
}

/// Waiter A is registered first; waiter B registers while a push races it. The item must
/// go to A, the oldest live waiter (possibly after the push returned, when another thread
/// was running the hand-off pass); B is then released by `close`.
#[test]
fn two_waiters_one_push_oldest_wins() {
    model(|| {
        let q = Arc::new(WaitQueue::unbounded());
        let mut a = q.pop_async(None);
        assert_eq!(poll_once(&mut a), Poll::Pending);
        let b = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.pop_timeout(FOREVER))
        };
        let pusher = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.push(1).unwrap())
        };
        pusher.join().unwrap();
        assert_eq!(
            loom::future::block_on(&mut a),
            Some(1),
            "not the oldest waiter"
        );
        drop(a);
        q.close();
        assert_eq!(b.join().unwrap(), None);
        assert!(q.is_empty());
        assert_eq!(q.waiter_count(), 0);
    });
}

/// Two blocking waiters race one push; `close` releases whoever is left. Exactly one of
/// them gets the item.
#[test]
fn two_waiters_one_push_exactly_once() {
    model(|| {
        let q = Arc::new(WaitQueue::unbounded());
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let q = Arc::clone(&q);
                thread::spawn(move || q.pop_timeout(FOREVER))
            })
            .collect();
        q.push(7).unwrap();
        q.close();
        let got: Vec<_> = waiters.into_iter().map(|w| w.join().unwrap()).collect();
        let delivered = got.iter().filter(|g| **g == Some(7)).count() + q.try_pop().iter().count();
        assert_eq!(delivered, 1, "item lost or duplicated: {got:?}");
        assert_eq!(q.waiter_count(), 0);
    });
}

/// A pending future is dropped while a push races it: if the item had been handed to the
/// future it goes back to the queue, so it is never lost.
#[test]
fn future_dropped_after_it_won_an_item() {
    model(|| {
        let q = Arc::new(WaitQueue::unbounded());
        let mut f = q.pop_async(None);
        assert_eq!(poll_once(&mut f), Poll::Pending);
        let pusher = {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                q.push(1).unwrap();
                q.push(2).unwrap();
            })
        };
        drop(f);
        pusher.join().unwrap();
        assert_eq!(
            q.try_pop(),
            Some(1),
            "lost, or the given-back item is not first"
        );
        assert_eq!(q.try_pop(), Some(2));
        assert_eq!(q.try_pop(), None);
        assert_eq!(q.waiter_count(), 0);
    });
}

/// A future is dropped while a push races it and a second consumer waits: whether the
/// item reached the dropped future or not, the second consumer ends up with it.
#[test]
fn item_of_a_dropped_future_reaches_the_next_waiter() {
    model(|| {
        let q = Arc::new(WaitQueue::unbounded());
        let mut f = q.pop_async(None);
        assert_eq!(poll_once(&mut f), Poll::Pending);
        let consumer = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.pop_timeout(FOREVER))
        };
        let pusher = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.push(1).unwrap())
        };
        drop(f);
        pusher.join().unwrap();
        assert_eq!(consumer.join().unwrap(), Some(1));
        assert!(q.is_empty());
        assert_eq!(q.waiter_count(), 0);
    });
}

/// A waiter that gives up (its signal is ready at once) makes a pass prune the waiter queue
/// (under loom every give-up does): the live waiters that the prune moves aside, behind the
/// oldest, keep their turn while pushes and another waiter's registration race it. The
/// item the third waiter or the one that gives up (both younger) may get is delivered once.
#[test]
fn a_prune_racing_pushes_keeps_the_waiters_in_order() {
    model(|| {
        let q = Arc::new(WaitQueue::unbounded());
        let mut a = q.pop_async(None);
        assert_eq!(poll_once(&mut a), Poll::Pending);
        let mut b = q.pop_async(None);
        assert_eq!(poll_once(&mut b), Poll::Pending);
        let pusher = {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                for item in 1..=3 {
                    q.push(item).unwrap();
                }
            })
        };
        let c = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.pop_timeout(FOREVER))
        };
        // Pending only while a pass holds its waiter (claimed), which settles it.
        let quitter_got = loom::future::block_on(q.pop_until(std::future::ready(())));
        pusher.join().unwrap();
        assert_eq!(loom::future::block_on(&mut a), Some(1), "not the oldest");
        assert_eq!(loom::future::block_on(&mut b), Some(2), "out of order");
        drop((a, b));
        q.close();
        let got = [quitter_got, c.join().unwrap(), q.try_pop()];
        assert_eq!(
            got.iter().flatten().collect::<Vec<_>>(),
            vec![&3],
            "lost or duplicated: {got:?}"
        );
        assert_eq!(q.waiter_count(), 0);
    });
}

/// A blocking pop that finds the queue empty and registers, racing `put_head`: the item
/// given back must reach it. A given-back item sits in its own queue, which a pop only
/// looks at when the hint counter `returned_hint` (`blocking/src/items.rs`) is not 0, so
/// this is the race in which the consumer's pass reads a stale 0 while the giver misses the
/// registered waiter. The giver increments the hint, queues the item and fences
/// (`Handoff::item_added`); the consumer registers, fences, then reads the hint. Without the
/// giver's fence, loom finds the interleaving in which the pop parks forever (checked by
/// replacing `item_added` with `item_added_seqcst` in `Handoff::put_back`).
#[test]
fn put_head_reaches_a_pop_that_found_the_hint_at_zero() {
    model(|| {
        let q = Arc::new(WaitQueue::unbounded());
        let consumer = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.pop_timeout(FOREVER))
        };
        q.put_head(1);
        assert_eq!(consumer.join().unwrap(), Some(1));
        assert!(q.is_empty(), "duplicate");
        assert_eq!(q.waiter_count(), 0);
    });
}

/// `close` races a blocking waiter and an async waiter: both resolve to `None`, and a
/// push after close is refused.
#[test]
fn close_while_waiting() {
    model(|| {
        let q = Arc::new(WaitQueue::<i32>::unbounded());
        let blocking = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.pop_timeout(FOREVER))
        };
        let asynchronous = {
            let q = Arc::clone(&q);
            thread::spawn(move || loom::future::block_on(q.pop_async(None)))
        };
        q.close();
        assert_eq!(q.push(1), Err(1));
        assert_eq!(blocking.join().unwrap(), None);
        assert_eq!(asynchronous.join().unwrap(), None);
        assert_eq!(q.waiter_count(), 0);
    });
}

/// `evict_waiters` races a registering waiter; a push that follows reaches the waiter if
/// it was not evicted, or stays queued.
#[test]
fn evict_while_registering() {
    model(|| {
        let q = Arc::new(WaitQueue::unbounded());
        let waiter = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.pop_timeout(FOREVER))
        };
        q.evict_waiters();
        q.push(1).unwrap();
        match waiter.join().unwrap() {
            Some(item) => {
                assert_eq!(item, 1);
                assert!(q.is_empty());
            }
            None => assert_eq!(q.try_pop(), Some(1)),
        }
        assert_eq!(q.waiter_count(), 0);
    });
}

/// Capacity 1 under `Refuse`, two pushers and a waiting consumer: never more than one
/// item is held, every accepted item is delivered once, and the consumer gets the first.
#[test]
fn bounded_refuse_at_capacity_one() {
    model(|| {
        let q = Arc::new(WaitQueue::bounded(1, FullPolicy::Refuse));
        let pushers: Vec<_> = [1, 2]
            .into_iter()
            .map(|item| {
                let q = Arc::clone(&q);
                thread::spawn(move || {
                    let accepted = q.push(item).is_ok();
                    assert!(q.len() <= 1, "bound exceeded");
                    accepted
                })
            })
            .collect();
        let got = q.pop_timeout(FOREVER).unwrap();
        let accepted: Vec<bool> = pushers.into_iter().map(|p| p.join().unwrap()).collect();
        let left: Vec<i32> = std::iter::from_fn(|| q.try_pop()).collect();
        let accepted_count = accepted.iter().filter(|a| **a).count();
        assert!(left.len() <= 1);
        assert_eq!(accepted_count, 1 + left.len(), "lost or duplicated");
        assert!(!left.contains(&got), "duplicate");
        assert!(accepted[(got - 1) as usize]);
    });
}

/// Two threads step back from one queue at once (`turns`): never both inside their pause,
/// at least one of them steps back, and the flag is free again afterwards.
#[test]
fn steps_back_one_thread_at_a_time() {
    use fairq_blocking::model::ModelTurns;
    use loom::sync::atomic::{AtomicUsize, Ordering};

    model(|| {
        let turns = Arc::new(ModelTurns::new());
        let inside = Arc::new(AtomicUsize::new(0));
        let step = |turns: &ModelTurns, inside: &AtomicUsize| {
            turns.step_back(|| {
                assert_eq!(
                    inside.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two threads stepped back"
                );
                thread::yield_now();
                inside.fetch_sub(1, Ordering::SeqCst);
            })
        };
        let other = {
            let (turns, inside) = (Arc::clone(&turns), Arc::clone(&inside));
            thread::spawn(move || step(&turns, &inside))
        };
        let mine = step(&turns, &inside);
        let theirs = other.join().unwrap();
        assert!(mine || theirs, "neither thread stepped back");
        let last = step(&turns, &inside);
        assert!(last, "a step back was never released ({mine} {theirs})");
    });
}
