//! Models of the waiting push (producers blocked on a full bounded queue) and of waiter
//! reuse. A producer that is never woken parks forever, which loom reports as a deadlock,
//! so a lost wake-up fails these models. At most three threads each, main included.
#![cfg(loom)]

mod common;

use std::task::Poll;
use std::time::Duration;

use common::{model, poll_once};
use fairq_blocking::model::ModelTimer;
use fairq_blocking::{FairPushError, FairWaitQueue, FullPolicy, PushError, WaitQueue};
use loom::sync::Arc;
use loom::thread;

/// Under loom a clock timeout never expires: this waits until room is made or close.
const FOREVER: Duration = Duration::from_secs(3600);

/// A producer blocks on a full queue while a consumer takes the item: the producer is woken
/// (never lost) and its item is queued exactly once.
#[test]
fn pop_wakes_a_blocked_producer() {
    model(|| {
        let q = Arc::new(WaitQueue::bounded(1, FullPolicy::Refuse));
        q.push(1).unwrap();
        let producer = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.push_timeout(2, FOREVER))
        };
        assert_eq!(q.try_pop(), Some(1));
        producer.join().unwrap().unwrap();
        assert_eq!(q.try_pop(), Some(2));
        assert_eq!(q.try_pop(), None);
        assert_eq!(q.producer_count(), 0);
    });
}

/// The producer's deadline fires (a timer thread) while a consumer makes room: either the
/// push succeeded, or it failed with the item back, and then the room is still free.
#[test]
fn blocked_producer_deadline_races_a_pop() {
    model(|| {
        let q = Arc::new(WaitQueue::bounded(1, FullPolicy::Refuse));
        q.push(1).unwrap();
        let timer = Arc::new(ModelTimer::new());
        let producer = {
            let (q, timer) = (Arc::clone(&q), Arc::clone(&timer));
            thread::spawn(move || q.push_blocking_until(2, &timer))
        };
        let firing = {
            let timer = Arc::clone(&timer);
            thread::spawn(move || timer.fire())
        };
        assert_eq!(q.try_pop(), Some(1));
        let pushed = producer.join().unwrap();
        firing.join().unwrap();
        match pushed {
            Ok(()) => assert_eq!(q.try_pop(), Some(2)),
            Err(err) => {
                assert_eq!(err, PushError::Full(2));
                assert!(q.is_empty());
            }
        }
        assert_eq!(q.producer_count(), 0);
    });
}

/// Two producers block on a full queue of one; the consumer takes three items: each
/// producer is woken in turn and every item is delivered exactly once.
#[test]
fn two_blocked_producers_each_get_room() {
    model(|| {
        let q = Arc::new(WaitQueue::bounded(1, FullPolicy::Refuse));
        q.push(0).unwrap();
        let producers: Vec<_> = [1, 2]
            .into_iter()
            .map(|item| {
                let q = Arc::clone(&q);
                thread::spawn(move || q.push_timeout(item, FOREVER))
            })
            .collect();
        let mut got: Vec<i32> = (0..3).map(|_| q.pop_timeout(FOREVER).unwrap()).collect();
        for p in producers {
            p.join().unwrap().unwrap();
        }
        got.sort_unstable();
        assert_eq!(got, [0, 1, 2]);
        assert!(q.is_empty());
        assert_eq!(q.producer_count(), 0);
    });
}

/// `close` races a blocked producer: it is woken with `Closed` and its item back, or its
/// push landed before the close.
#[test]
fn close_wakes_a_blocked_producer() {
    model(|| {
        let q = Arc::new(WaitQueue::bounded(1, FullPolicy::Refuse));
        q.push(1).unwrap();
        let producer = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.push_timeout(2, FOREVER))
        };
        q.close();
        assert_eq!(producer.join().unwrap(), Err(PushError::Closed(2)));
        assert_eq!(q.try_pop(), Some(1));
        assert_eq!(q.producer_count(), 0);
    });
}

/// An async push is notified of room and dropped without pushing while a blocked producer
/// waits behind it: the notification passes on, so the blocked producer still finishes.
#[test]
fn dropped_async_push_passes_its_turn_on() {
    model(|| {
        let q = Arc::new(WaitQueue::bounded(1, FullPolicy::Refuse));
        q.push(0).unwrap();
        let mut first = q.push_async(1, None);
        assert_eq!(poll_once(&mut first), Poll::Pending);
        let blocked = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.push_timeout(2, FOREVER))
        };
        let consumer = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.pop_timeout(FOREVER))
        };
        drop(first);
        assert_eq!(consumer.join().unwrap(), Some(0));
        blocked.join().unwrap().unwrap();
        assert_eq!(q.try_pop(), Some(2));
        assert_eq!(q.producer_count(), 0);
    });
}

/// The fair queue's waiting push: a producer blocked on a full fair queue is woken by a
/// pop; a second producer's refusal at close carries the key.
#[test]
fn fair_pop_wakes_a_blocked_producer() {
    model(|| {
        let q = Arc::new(FairWaitQueue::with_capacity(1));
        q.push('a', 1).unwrap();
        let producer = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.push_timeout('b', 2, FOREVER))
        };
        assert_eq!(q.try_pop_with_key(), Some(('a', 1)));
        producer.join().unwrap().unwrap();
        assert_eq!(q.try_pop_with_key(), Some(('b', 2)));
        q.push('a', 3).unwrap();
        q.close();
        let refused = q.push_timeout('c', 4, FOREVER).unwrap_err();
        assert!(matches!(
            refused,
            FairPushError::Closed { key: 'c', item: 4 }
        ));
    });
}

/// One consumer waits twice in a row (its second wait reuses the first's waiter) while a
/// producer pushes twice: both items arrive, in order, and nothing is left waiting.
#[test]
fn reused_waiter_receives_the_second_item() {
    model(|| {
        let q = Arc::new(WaitQueue::unbounded());
        let producer = {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                q.push(1).unwrap();
                q.push(2).unwrap();
            })
        };
        assert_eq!(q.pop_timeout(FOREVER), Some(1));
        assert_eq!(loom::future::block_on(q.pop_async(None)), Some(2));
        producer.join().unwrap();
        assert_eq!(q.waiter_count(), 0);
        assert!(q.is_empty());
    });
}

/// The asynchronous version of `blocked_producer_deadline_races_a_pop`: a registered
/// `push_until` is polled again (a new waker) while its deadline signal fires and a
/// consumer makes room (one thread: the timer fires, then the consumer pops), and a
/// blocked producer waits behind it. The pop notifies the oldest registered producer, the
/// async push. `PushState::poll` may see the signal and then fail to leave the list,
/// because the notification came in between: it must then try once more rather than give
/// up and waste the notification, or the producer behind it sleeps beside free room (parks
/// forever: a deadlock for loom). Whatever the interleaving, both producers finish, every
/// accepted item is queued once, and a refused push got its item back. (Checked by
/// returning `Full` where the failed `deregister` leads to the extra try: a deadlock.)
#[test]
fn async_push_deadline_races_a_pop() {
    model(|| {
        let q = Arc::new(WaitQueue::bounded(1, FullPolicy::Refuse));
        q.push(1).unwrap();
        let timer = Arc::new(ModelTimer::new());
        let mut push = q.push_until(2, ModelTimer::signal(&timer));
        assert_eq!(poll_once(&mut push), Poll::Pending);
        let blocked = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.push_timeout(3, FOREVER))
        };
        let consumer = {
            let (q, timer) = (Arc::clone(&q), Arc::clone(&timer));
            thread::spawn(move || {
                timer.fire();
                q.try_pop()
            })
        };
        let pushed = loom::future::block_on(&mut push);
        drop(push);
        assert_eq!(consumer.join().unwrap(), Some(1));
        let accepted = pushed.is_ok();
        let mut got = Vec::new();
        match pushed {
            // The async push took the room; the blocked producer needs another.
            Ok(()) => got.push(q.pop_timeout(FOREVER).unwrap()),
            Err(err) => assert_eq!(err, PushError::Full(2)),
        }
        blocked.join().unwrap().unwrap();
        got.extend(std::iter::from_fn(|| q.try_pop()));
        let expected = if accepted { vec![2, 3] } else { vec![3] };
        assert_eq!(got, expected, "lost or duplicated");
        assert_eq!(q.producer_count(), 0);
    });
}

/// `FairWaitQueue::remove_key` makes room for as many items as it removes: two producers
/// blocked on a full fair queue of two are both woken when the key holding both items is
/// removed (`room_made_catching(freed)`), and their items are queued once each. A producer
/// left asleep parks forever (a deadlock for loom; checked by waking one producer instead
/// of `freed`, and none).
#[test]
fn remove_key_wakes_the_blocked_producers() {
    model(|| {
        let q = Arc::new(FairWaitQueue::with_capacity(2));
        q.push('a', 1).unwrap();
        q.push('a', 2).unwrap();
        let producers: Vec<_> = [('b', 3), ('c', 4)]
            .into_iter()
            .map(|(key, item)| {
                let q = Arc::clone(&q);
                thread::spawn(move || q.push_timeout(key, item, FOREVER))
            })
            .collect();
        assert_eq!(q.remove_key(&'a'), vec![1, 2]);
        for p in producers {
            p.join().unwrap().unwrap();
        }
        let mut left: Vec<_> = std::iter::from_fn(|| q.try_pop_with_key()).collect();
        left.sort_unstable();
        assert_eq!(left, [('b', 3), ('c', 4)], "lost or duplicated");
        assert_eq!(q.producer_count(), 0);
    });
}
