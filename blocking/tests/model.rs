//! Property tests: random single-threaded sequences of operations, including waiting
//! consumers (async pops polled by hand), checked step by step against a simple
//! reference model of the documented semantics.

mod common;

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use common::{poll_once, CountingWaker};
use fairq_blocking::{FairWaitQueue, FullPolicy, WaitQueue};
use fairq_core::fair::FairQueue;
use proptest::prelude::*;

/// A deadline the test fires by hand.
#[derive(Clone, Default)]
struct Flag(Arc<AtomicBool>);

impl Future for Flag {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if self.0.load(Ordering::SeqCst) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Push(u8, u32),
    PutHead(u8, u32),
    TryPop,
    /// Start an async pop and poll it once.
    Wait,
    /// Poll the i-th started pop (modulo) again.
    Poll(usize),
    /// Fire the i-th pop's deadline, then poll it.
    Expire(usize),
    /// Drop the i-th pop.
    Drop(usize),
    Evict,
    Close,
    SetWeight(u8, u32),
    RemoveKey(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..4u8, any::<u32>()).prop_map(|(k, v)| Op::Push(k, v)),
        1 => (0..4u8, any::<u32>()).prop_map(|(k, v)| Op::PutHead(k, v)),
        3 => Just(Op::TryPop),
        3 => Just(Op::Wait),
        2 => any::<usize>().prop_map(Op::Poll),
        1 => any::<usize>().prop_map(Op::Expire),
        1 => any::<usize>().prop_map(Op::Drop),
        1 => Just(Op::Evict),
        1 => prop::bool::weighted(0.2).prop_map(|c| if c { Op::Close } else { Op::TryPop }),
        1 => (0..4u8, 1..4u32).prop_map(|(k, w)| Op::SetWeight(k, w)),
        1 => (0..4u8).prop_map(Op::RemoveKey),
    ]
}

/// What the model knows about one started pop.
#[derive(Clone, Debug, PartialEq)]
enum Slot<I> {
    Waiting,
    /// Resolved (item or `None`), not yet observed by a poll.
    Resolved(Option<I>),
    /// Observed or dropped: finished.
    Gone,
}

/// Reference semantics shared by both queues: `S` is the item store.
struct Model<I, S> {
    store: S,
    returned: VecDeque<I>,
    slots: Vec<Slot<I>>,
    line: VecDeque<usize>,
    closed: bool,
}

trait ModelStore<I> {
    fn pop(&mut self) -> Option<I>;
    fn len(&self) -> usize;
}

impl<I: Clone, S: ModelStore<I>> Model<I, S> {
    fn new(store: S) -> Self {
        Model {
            store,
            returned: VecDeque::new(),
            slots: Vec::new(),
            line: VecDeque::new(),
            closed: false,
        }
    }
    fn pop(&mut self) -> Option<I> {
        self.returned.pop_front().or_else(|| self.store.pop())
    }
    fn len(&self) -> usize {
        self.returned.len() + self.store.len()
    }
    /// Hands items to the oldest waiters.
    fn deliver(&mut self) {
        while let Some(&w) = self.line.front() {
            match self.pop() {
                Some(item) => {
                    self.line.pop_front();
                    self.slots[w] = Slot::Resolved(Some(item));
                }
                None => break,
            }
        }
    }
    fn put_head(&mut self, item: I) {
        self.returned.push_back(item);
        self.deliver();
    }
    fn wait(&mut self) {
        let id = self.slots.len();
        if self.closed || self.line.is_empty() {
            if let Some(item) = self.pop() {
                self.slots.push(Slot::Resolved(Some(item)));
                return;
            }
            if self.closed {
                self.slots.push(Slot::Resolved(None));
                return;
            }
        }
        self.slots.push(Slot::Waiting);
        self.line.push_back(id);
    }
    fn resolve_all_waiting(&mut self) {
        for w in self.line.drain(..) {
            self.slots[w] = Slot::Resolved(None);
        }
    }
    fn expire(&mut self, w: usize) {
        if matches!(self.slots[w], Slot::Waiting) {
            self.line.retain(|&x| x != w);
            self.slots[w] = Slot::Resolved(None);
        }
    }
    fn drop_slot(&mut self, w: usize) {
        match std::mem::replace(&mut self.slots[w], Slot::Gone) {
            Slot::Waiting => self.line.retain(|&x| x != w),
            Slot::Resolved(Some(item)) => self.put_head(item),
            Slot::Resolved(None) | Slot::Gone => {}
        }
    }
    /// What a poll of slot `w` returns (`None` = still pending or already gone).
    fn poll(&mut self, w: usize) -> Option<Option<I>> {
        match &self.slots[w] {
            Slot::Resolved(out) => {
                let out = out.clone();
                self.slots[w] = Slot::Gone;
                Some(out)
            }
            _ => None,
        }
    }
}

struct Bounded {
    main: VecDeque<u32>,
    capacity: Option<usize>,
    policy: FullPolicy,
    dropped: u64,
}

impl ModelStore<u32> for Bounded {
    fn pop(&mut self) -> Option<u32> {
        self.main.pop_front()
    }
    fn len(&self) -> usize {
        self.main.len()
    }
}

impl ModelStore<(u8, u32)> for FairQueue<u8, u32> {
    fn pop(&mut self) -> Option<(u8, u32)> {
        self.pop_with_key()
    }
    fn len(&self) -> usize {
        FairQueue::len(self)
    }
}

/// The pops started by a test run, with their hand-fired deadlines.
struct Pops<F> {
    futures: Vec<Option<F>>,
    flags: Vec<Flag>,
    waker: Arc<CountingWaker>,
}

impl<F: Future + Unpin> Pops<F> {
    fn new() -> Self {
        Pops {
            futures: Vec::new(),
            flags: Vec::new(),
            waker: CountingWaker::new(),
        }
    }
    /// Keeps waiting pop `fut`, which `flag` cancels, and returns its number.
    fn start(&mut self, fut: F, flag: Flag) -> usize {
        self.futures.push(Some(fut));
        self.flags.push(flag);
        self.futures.len() - 1
    }

    /// Polls pop `w`: `Some(output)` if it completed now.
    fn poll(&mut self, w: usize) -> Option<F::Output> {
        let fut = self.futures[w].as_mut()?;
        match poll_once(fut, &self.waker) {
            Poll::Ready(out) => {
                self.futures[w] = None;
                Some(out)
            }
            Poll::Pending => None,
        }
    }
}

fn run_wait_queue(bound: Option<(usize, FullPolicy)>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let q = match bound {
        Some((n, policy)) => WaitQueue::bounded(n, policy),
        None => WaitQueue::unbounded(),
    };
    let mut m = Model::new(Bounded {
        main: VecDeque::new(),
        capacity: bound.map(|b| b.0),
        policy: bound.map_or(FullPolicy::Refuse, |b| b.1),
        dropped: 0,
    });
    let mut pops = Pops::new();
    for op in ops {
        match op {
            Op::Push(_, v) => {
                let expected = if m.closed {
                    Err(v)
                } else {
                    let held = m.store.main.len();
                    match (m.store.capacity, m.store.policy) {
                        (Some(cap), FullPolicy::Refuse) if held >= cap => Err(v),
                        (cap, _) => {
                            m.store.main.push_back(v);
                            if cap.is_some_and(|cap| held >= cap) {
                                m.store.main.pop_front();
                                m.store.dropped += 1;
                            }
                            m.deliver();
                            Ok(())
                        }
                    }
                };
                prop_assert_eq!(q.push(v), expected);
            }
            Op::PutHead(_, v) => {
                q.put_head(v);
                m.put_head(v);
            }
            Op::TryPop => prop_assert_eq!(q.try_pop(), m.pop()),
            Op::Wait => {
                let flag = Flag::default();
                let w = pops.start(q.pop_until(flag.clone()), flag);
                let got = pops.poll(w);
                m.wait();
                prop_assert_eq!(got, m.poll(w));
            }
            Op::Poll(i) | Op::Expire(i) | Op::Drop(i) if pops.futures.is_empty() => {
                let _ = i;
            }
            Op::Poll(i) => {
                let w = i % pops.futures.len();
                prop_assert_eq!(pops.poll(w), m.poll(w));
            }
            Op::Expire(i) => {
                let w = i % pops.futures.len();
                pops.flags[w].0.store(true, Ordering::SeqCst);
                m.expire(w);
                prop_assert_eq!(pops.poll(w), m.poll(w));
            }
            Op::Drop(i) => {
                let w = i % pops.futures.len();
                pops.futures[w] = None;
                m.drop_slot(w);
            }
            Op::Evict => {
                q.evict_waiters();
                m.resolve_all_waiting();
            }
            Op::Close => {
                q.close();
                m.closed = true;
                m.resolve_all_waiting();
            }
            Op::SetWeight(..) | Op::RemoveKey(_) => {}
        }
        prop_assert_eq!(q.len(), m.len());
        prop_assert_eq!(q.waiter_count(), m.line.len());
        prop_assert_eq!(q.dropped(), m.store.dropped);
        if bound.is_some_and(|(_, p)| p == FullPolicy::Refuse) && m.returned.is_empty() {
            prop_assert!(q.len() <= bound.unwrap().0);
        }
    }
    Ok(())
}

fn run_fair(capacity: Option<usize>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let q = match capacity {
        Some(n) => FairWaitQueue::with_capacity(n),
        None => FairWaitQueue::unbounded(),
    };
    let mut m = Model::new(match capacity {
        Some(n) => FairQueue::with_capacity(n),
        None => FairQueue::unbounded(),
    });
    let mut pops = Pops::new();
    for op in ops {
        match op {
            Op::Push(k, v) => {
                let expected = if m.closed {
                    Err(("closed", k, v))
                } else {
                    match m.store.push(k, v) {
                        Ok(()) => {
                            m.deliver();
                            Ok(())
                        }
                        Err(full) => Err(("full", full.key, full.item)),
                    }
                };
                let got = q.push(k, v).map_err(|e| {
                    let kind = match e {
                        fairq_blocking::FairPushError::Full { .. } => "full",
                        fairq_blocking::FairPushError::Closed { .. } => "closed",
                    };
                    let (k, v) = e.into_inner();
                    (kind, k, v)
                });
                prop_assert_eq!(got, expected);
            }
            Op::PutHead(k, v) => {
                q.put_head(k, v);
                m.put_head((k, v));
            }
            Op::TryPop => prop_assert_eq!(q.try_pop_with_key(), m.pop()),
            Op::Wait => {
                let flag = Flag::default();
                let w = pops.start(q.pop_until(flag.clone()), flag);
                let got = pops.poll(w);
                m.wait();
                prop_assert_eq!(got, m.poll(w).map(|o| o.map(|(_, v)| v)));
            }
            Op::Poll(i) | Op::Expire(i) | Op::Drop(i) if pops.futures.is_empty() => {
                let _ = i;
            }
            Op::Poll(i) => {
                let w = i % pops.futures.len();
                prop_assert_eq!(pops.poll(w), m.poll(w).map(|o| o.map(|(_, v)| v)));
            }
            Op::Expire(i) => {
                let w = i % pops.futures.len();
                pops.flags[w].0.store(true, Ordering::SeqCst);
                m.expire(w);
                prop_assert_eq!(pops.poll(w), m.poll(w).map(|o| o.map(|(_, v)| v)));
            }
            Op::Drop(i) => {
                let w = i % pops.futures.len();
                pops.futures[w] = None;
                m.drop_slot(w);
            }
            Op::Evict => {
                q.evict_waiters();
                m.resolve_all_waiting();
            }
            Op::Close => {
                q.close();
                m.closed = true;
                m.resolve_all_waiting();
            }
            Op::SetWeight(k, w) => {
                q.set_weight(&k, w);
                m.store.set_weight(&k, w);
            }
            Op::RemoveKey(k) => {
                let mut expected: Vec<u32> = Vec::new();
                m.returned.retain(|(key, v)| {
                    if *key == k {
                        expected.push(*v);
                        false
                    } else {
                        true
                    }
                });
                expected.extend(m.store.remove_key(&k));
                prop_assert_eq!(q.remove_key(&k), expected);
            }
        }
        prop_assert_eq!(q.len(), m.len());
        prop_assert_eq!(q.waiter_count(), m.line.len());
    }
    Ok(())
}

fn bound() -> impl Strategy<Value = Option<(usize, FullPolicy)>> {
    prop_oneof![
        Just(None),
        (0..5usize).prop_map(|n| Some((n, FullPolicy::Refuse))),
        (0..5usize).prop_map(|n| Some((n, FullPolicy::DropOldest))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn wait_queue_matches_the_model(bound in bound(), ops in prop::collection::vec(op(), 0..80)) {
        run_wait_queue(bound, ops)?;
    }

    #[test]
    fn fair_wait_queue_matches_the_model(
        capacity in prop_oneof![Just(None), (0..6usize).prop_map(Some)],
        ops in prop::collection::vec(op(), 0..80),
    ) {
        run_fair(capacity, ops)?;
    }
}
