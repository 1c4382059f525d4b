//! Models of `FairWaitQueue` races (at most three threads each, main included).
#![cfg(loom)]

mod common;

use std::time::Duration;

use common::model;
use fairq_blocking::FairWaitQueue;
use loom::sync::Arc;
use loom::thread;

/// Under loom a clock timeout never expires: this waits until an item or close/evict.
const FOREVER: Duration = Duration::from_secs(3600);

/// One producer pushes three items on two keys while two consumers pop: every item is
/// delivered exactly once, and a consumer sees one key's items in push order.
#[test]
fn push_vs_pop_vs_pop() {
    model(|| {
        let q = Arc::new(FairWaitQueue::unbounded());
        let two = {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                let first = q.pop_timeout_with_key(FOREVER).unwrap();
                let second = q.pop_timeout_with_key(FOREVER).unwrap();
                vec![first, second]
            })
        };
        let one = {
            let q = Arc::clone(&q);
            thread::spawn(move || vec![q.pop_timeout_with_key(FOREVER).unwrap()])
        };
        q.push('a', 1).unwrap();
        q.push('a', 2).unwrap();
        q.push('b', 3).unwrap();
        let two = two.join().unwrap();
        let one = one.join().unwrap();

        let mut all: Vec<_> = two.iter().chain(&one).map(|&(_, v)| v).collect();
        all.sort_unstable();
        assert_eq!(all, vec![1, 2, 3], "lost or duplicated: {two:?} {one:?}");
        if two == [('a', 2), ('a', 1)] {
            panic!("key order broken: {two:?}");
        }
        assert!(q.is_empty());
        assert_eq!(q.waiter_count(), 0);
    });
}

/// A waiter whose pop is dropped while a push races it: the item is never lost, and it
/// keeps its key.
#[test]
fn dropped_fair_pop_gives_back_the_item_with_its_key() {
    model(|| {
        let q = Arc::new(FairWaitQueue::unbounded());
        let mut f = q.pop_async_with_key(None);
        assert!(common::poll_once(&mut f).is_pending());
        let pusher = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.push('k', 1).unwrap())
        };
        drop(f);
        pusher.join().unwrap();
        assert_eq!(q.try_pop_with_key(), Some(('k', 1)));
        assert_eq!(q.waiter_count(), 0);
    });
}

/// A blocking pop that finds the queue empty and registers, racing one push: the push's
/// item must reach it. The pop's checks read the store's published item count (`held`,
/// see `blocking/src/fair_items.rs`) without the lock, so this is the race in which a
/// consumer could read a stale 0 while the producer misses the waiter; the `SeqCst`
/// fences on both sides exclude it. Without the producer's fence, loom finds the
/// interleaving in which the pop parks forever (checked by removing it).
#[test]
fn push_reaches_a_pop_that_found_the_count_at_zero() {
    model(|| {
        let q = Arc::new(FairWaitQueue::unbounded());
        let consumer = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.pop_timeout_with_key(FOREVER))
        };
        q.push('k', 1).unwrap();
        assert_eq!(consumer.join().unwrap(), Some(('k', 1)));
        assert!(q.is_empty());
        assert_eq!(q.waiter_count(), 0);
    });
}

/// The same race for an item given back (`put_head`), which the count includes: it must
/// reach the registering pop too.
#[test]
fn put_head_reaches_a_pop_that_found_the_count_at_zero() {
    model(|| {
        let q = Arc::new(FairWaitQueue::unbounded());
        let consumer = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.pop_timeout_with_key(FOREVER))
        };
        q.put_head('k', 1);
        assert_eq!(consumer.join().unwrap(), Some(('k', 1)));
        assert_eq!(q.waiter_count(), 0);
    });
}
