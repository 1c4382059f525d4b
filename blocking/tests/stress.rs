//! Stress tests outside loom: many producers and consumers with random timeouts and
//! dropped futures. Every item must be delivered exactly once and each producer's items
//! must reach every consumer in push order, except for items given back by dropped
//! futures (at most one per drop), which are served again ahead of the rest.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::thread;
use std::time::Duration;

use common::{poll_once, CountingWaker};
use fairq_blocking::{FairWaitQueue, FullPolicy, WaitQueue};

const PRODUCERS: usize = 4;
const CONSUMERS: usize = 4;

/// What one consumer saw.
#[derive(Default)]
struct Seen {
    items: Vec<(usize, usize)>,
    drops: usize,
}

/// One consumer step with a randomly chosen way of popping. `pop` abstracts the queue.
trait Consume: Sync {
    fn try_pop(&self) -> Option<(usize, usize)>;
    fn pop_timeout(&self, d: Duration) -> Option<(usize, usize)>;
    fn pop_async_block_on(&self, d: Duration) -> Option<(usize, usize)>;
    /// Polls a fresh async pop once, then drops it if it is still pending.
    fn poll_once_then_drop(&self, waker: &Arc<CountingWaker>) -> Poll<Option<(usize, usize)>>;
}

impl Consume for WaitQueue<(usize, usize)> {
    fn try_pop(&self) -> Option<(usize, usize)> {
        WaitQueue::try_pop(self)
    }
    fn pop_timeout(&self, d: Duration) -> Option<(usize, usize)> {
        WaitQueue::pop_timeout(self, d)
    }
    fn pop_async_block_on(&self, d: Duration) -> Option<(usize, usize)> {
        futures::executor::block_on(self.pop_async(Some(d)))
    }
    fn poll_once_then_drop(&self, waker: &Arc<CountingWaker>) -> Poll<Option<(usize, usize)>> {
        let mut fut = self.pop_async(None);
        poll_once(&mut fut, waker)
    }
}

impl Consume for FairWaitQueue<usize, usize> {
    fn try_pop(&self) -> Option<(usize, usize)> {
        self.try_pop_with_key()
    }
    fn pop_timeout(&self, d: Duration) -> Option<(usize, usize)> {
        self.pop_timeout_with_key(d)
    }
    fn pop_async_block_on(&self, d: Duration) -> Option<(usize, usize)> {
        futures::executor::block_on(self.pop_async_with_key(Some(d)))
    }
    fn poll_once_then_drop(&self, waker: &Arc<CountingWaker>) -> Poll<Option<(usize, usize)>> {
        let mut fut = self.pop_async_with_key(None);
        poll_once(&mut fut, waker)
    }
}

fn consume<Q: Consume>(q: &Q, received: &AtomicUsize, total: usize, seed: u64) -> Seen {
    let mut rng = fastrand::Rng::with_seed(seed);
    let waker = CountingWaker::new();
    let mut seen = Seen::default();
    while received.load(Ordering::SeqCst) < total {
        let timeout = Duration::from_micros(rng.u64(0..2_000));
        let got = match rng.u8(0..8) {
            0 => q.try_pop(),
            1..=3 => q.pop_timeout(timeout),
            4..=5 => q.pop_async_block_on(timeout),
            _ => match q.poll_once_then_drop(&waker) {
                Poll::Ready(got) => got,
                Poll::Pending => {
                    seen.drops += 1;
                    None
                }
            },
        };
        if let Some(item) = got {
            seen.items.push(item);
            received.fetch_add(1, Ordering::SeqCst);
        }
    }
    seen
}

fn check(seen: Vec<Seen>, per_producer: usize) {
    let mut delivered = vec![vec![0u8; per_producer]; PRODUCERS];
    let mut inversions = 0;
    let mut drops = 0;
    for consumer in &seen {
        drops += consumer.drops;
        let mut max = [None::<usize>; PRODUCERS];
        for &(p, i) in &consumer.items {
            delivered[p][i] += 1;
            if max[p].is_some_and(|m| i < m) {
                inversions += 1;
            } else {
                max[p] = Some(i);
            }
        }
    }
    eprintln!("inversions {inversions}, dropped futures {drops}");
    for (p, counts) in delivered.iter().enumerate() {
        for (i, &n) in counts.iter().enumerate() {
            assert_eq!(n, 1, "item {i} of producer {p} delivered {n} times");
        }
    }
    assert!(
        inversions <= drops,
        "{inversions} out-of-order deliveries but only {drops} dropped futures"
    );
}

fn run<Q, P>(q: Arc<Q>, per_producer: usize, push: P)
where
    Q: Consume + Send + 'static,
    P: Fn(&Q, usize, usize) + Send + Sync + Copy + 'static,
{
    let total = PRODUCERS * per_producer;
    let received = Arc::new(AtomicUsize::new(0));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                // Bursts separated by short pauses, so consumers keep running dry and
                // waiting (load shaping only; nothing synchronises on these pauses).
                let mut rng = fastrand::Rng::with_seed(p as u64);
                for i in 0..per_producer {
                    push(&q, p, i);
                    if rng.u8(0..64) == 0 {
                        thread::sleep(Duration::from_micros(rng.u64(0..200)));
                    }
                }
            })
        })
        .collect();
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|c| {
            let (q, received) = (Arc::clone(&q), Arc::clone(&received));
            thread::spawn(move || consume(&*q, &received, total, 0x5eed + c as u64))
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let seen: Vec<Seen> = consumers.into_iter().map(|c| c.join().unwrap()).collect();
    check(seen, per_producer);
}

#[test]
fn unbounded_wait_queue_delivers_every_item_exactly_once_in_order() {
    let q = Arc::new(WaitQueue::unbounded());
    run(q, 200_000 / PRODUCERS, |q, p, i| q.push((p, i)).unwrap());
}

#[test]
fn bounded_wait_queue_under_pressure_delivers_every_accepted_item_once() {
    let q = Arc::new(WaitQueue::bounded(16, FullPolicy::Refuse));
    run(q, 25_000, |q, p, i| {
        // Producers block for room (the waiting push), one of them asynchronously.
        if p == 0 {
            futures::executor::block_on(q.push_async((p, i), None)).unwrap();
        } else {
            q.push_timeout((p, i), Duration::from_secs(3_600)).unwrap();
        }
    });
}

#[test]
fn fair_wait_queue_delivers_every_item_exactly_once_in_key_order() {
    let q = Arc::new(FairWaitQueue::with_capacity(64));
    run(q, 25_000, |q, p, i| {
        q.push_timeout(p, i, Duration::from_secs(3_600)).unwrap();
    });
}

/// Two queues and an echo thread, every pop a blocking one that can only end early if a
/// wake-up is lost (its timeout is the hang guard [`common::STUCK`]): nearly every pop
/// parks or registers while the partner pushes, so the race between a push's check for
/// waiters and a consumer's registration runs on every hand-off.
#[test]
fn ping_pong_of_blocking_pops_loses_no_wake_up() {
    const ROUND_TRIPS: usize = 20_000;
    let (ping, pong) = (
        Arc::new(WaitQueue::unbounded()),
        Arc::new(WaitQueue::unbounded()),
    );
    let echo = {
        let (ping, pong) = (Arc::clone(&ping), Arc::clone(&pong));
        thread::spawn(move || {
            for _ in 0..ROUND_TRIPS {
                let v = ping.pop_timeout(common::STUCK).expect("a wake-up was lost");
                pong.push(v).unwrap();
            }
        })
    };
    for i in 0..ROUND_TRIPS {
        ping.push(i).unwrap();
        assert_eq!(
            pong.pop_timeout(common::STUCK),
            Some(i),
            "a wake-up was lost"
        );
    }
    echo.join().unwrap();
}

/// Producers and consumers on a ring of one slot, all waiting without a deadline (only the
/// hang guard): every push after the first waits for the room a pop makes, so the race
/// between a pop's check for waiting producers and a producer's registration runs on every
/// item, as does the one between a push and a waiting consumer.
#[test]
fn a_ring_of_one_slot_loses_no_wake_up_in_either_direction() {
    const PER_THREAD: usize = 10_000;
    const PAIRS: usize = 2;
    let q = Arc::new(WaitQueue::bounded(1, FullPolicy::Refuse));
    let producers: Vec<_> = (0..PAIRS)
        .map(|p| {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                for i in 0..PER_THREAD {
                    q.push_timeout((p, i), common::STUCK)
                        .expect("a wake-up for room was lost");
                }
            })
        })
        .collect();
    let consumers: Vec<_> = (0..PAIRS)
        .map(|_| {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                (0..PER_THREAD)
                    .map(|_| q.pop_timeout(common::STUCK).expect("a wake-up was lost"))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let mut seen: Vec<(usize, usize)> = consumers
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    seen.sort_unstable();
    let expected: Vec<(usize, usize)> = (0..PAIRS)
        .flat_map(|p| (0..PER_THREAD).map(move |i| (p, i)))
        .collect();
    assert_eq!(seen, expected);
}

/// Threads that each push then pop the same queue with the blocking calls, the pattern in
/// which they take turns (`WaitQueue::taking_turns`): whether or not a thread steps back,
/// every item comes out exactly once, and each thread receives every other thread's items
/// in the order they were pushed.
fn push_then_pop(q: &Arc<WaitQueue<(usize, usize)>>, threads: usize, per_thread: usize) {
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let q = Arc::clone(q);
            thread::spawn(move || {
                let mut got = Vec::with_capacity(per_thread);
                for i in 0..per_thread {
                    q.push_timeout((t, i), common::STUCK).unwrap();
                    got.push(q.pop_timeout(common::STUCK).expect("an item within STUCK"));
                }
                got
            })
        })
        .collect();
    let mut seen = vec![Vec::new(); threads];
    for handle in handles {
        let got = handle.join().unwrap();
        let mut last = vec![None; threads];
        for &(p, i) in &got {
            assert!(last[p] < Some(i), "items of thread {p} out of order");
            last[p] = Some(i);
            seen[p].push(i);
        }
    }
    assert!(q.is_empty());
    for (p, mut items) in seen.into_iter().enumerate() {
        items.sort_unstable();
        assert_eq!(
            items,
            (0..per_thread).collect::<Vec<_>>(),
            "thread {p}'s items"
        );
    }
}

#[test]
fn threads_that_push_then_pop_get_every_item_once_taking_turns_or_not() {
    for q in [
        WaitQueue::bounded(1_024, FullPolicy::Refuse),
        WaitQueue::unbounded(),
        WaitQueue::bounded(1_024, FullPolicy::Refuse).taking_turns(false),
    ] {
        push_then_pop(&Arc::new(q), 2, 100_000);
    }
    push_then_pop(
        &Arc::new(WaitQueue::bounded(8, FullPolicy::Refuse)),
        3,
        20_000,
    );
}
