//! fairq-blocking against its peers, in one run, with at most two busy threads (the
//! machine has two cores):
//!
//! * throughput in ns/item: spsc (one producer thread, one consumer thread), mpsc (a
//!   producer thread, plus a thread that both produces and consumes; unbounded only),
//!   mpmc (two threads that each push then pop), unbounded and bounded (1,024; a full
//!   queue makes every contender's producer wait: `push_timeout` for `WaitQueue`, `send`
//!   for the peers), and spsc through a queue of 4 with the two threads pinned apart
//!   (`spsc bounded 4`: the producer waits for room at nearly every item, so this row times
//!   how soon a waiting producer sees a freed slot);
//! * ping-pong one-way hand-off latency (two queues, an echo thread);
//! * wake latency of a parked consumer (push to receive, consumer idle before each push);
//! * in both latency cases, and in the small queues' rows, the two threads are pinned to
//!   CPUs 0 and 1 (on Linux, when the process may use both), so every contender gets the
//!   same placement: left to the scheduler, whether the two threads shared a CPU decided
//!   these rows more than the contenders did (see `fairq_benches::Pinned`);
//! * timeout accuracy (actual minus requested wait, 1 ms timeouts, nothing arrives);
//! * async: `pop_async` against tokio mpsc inside a two-worker tokio runtime (producers
//!   push as tokio's send: unbounded with the plain call, bounded awaiting; one more row
//!   has the unbounded producer await `push_async`);
//! * `FairWaitQueue` against `Mutex<FairQueue>` + `Condvar` (spsc and mpmc unbounded, and spsc
//!   through a queue of 4 with the threads pinned apart, the peer waiting on a second
//!   `Condvar` for room).
//!
//! Peers: crossbeam-channel, kanal, flume, `std::sync::mpsc` (no mpmc: its receiver can't be
//! shared), `Mutex<VecDeque>` + `Condvar`, tokio mpsc (async only).
//! Criterion's statistics come first, then the ratio tables (ours / peer, lower is better).
//! Targets (benchmark only, never a test): spsc (1p1c) and mpmc (2p2c) throughput, unbounded
//! and bounded, at most 1.2x crossbeam-channel and 1.5x kanal; ping-pong at most flume's;
//! async <= 1.0x tokio mpsc; <= 0.34x `Mutex<VecDeque>` + `Condvar` under contention (mpmc);
//! `FairWaitQueue` at most `Mutex<FairQueue>` + `Condvar` (keeps its lead).

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, Throughput};
use fairq_benches::{async_cases, load_average, print_ratio_table, two_cpus, Pinned, Ratio};
use fairq_blocking::{FairWaitQueue, FullPolicy, WaitQueue};
use fairq_core::fair::FairQueue;

const BOUND: usize = 1_024;
/// The capacity of the small-queue spsc row.
const SMALL_BOUND: usize = 4;
const LONG: Duration = Duration::from_secs(3_600);

/// A channel-like contender: a sending half, a receiving half, blocking operations.
trait Contender: 'static {
    const NAME: &'static str;
    type Tx: Clone + Send + 'static;
    type Rx: Send + 'static;
    fn channel(bound: Option<usize>) -> (Self::Tx, Self::Rx);
    fn send(tx: &Self::Tx, v: u64);
    fn recv(rx: &Self::Rx) -> u64;
    fn recv_timeout(rx: &Self::Rx, d: Duration) -> Option<u64>;
}

/// A contender whose receiving half can be shared (mpmc).
trait Shared: Contender<Rx: Clone> {}

struct Fairq;
impl Contender for Fairq {
    const NAME: &'static str = "fairq";
    type Tx = Arc<WaitQueue<u64>>;
    type Rx = Arc<WaitQueue<u64>>;
    fn channel(bound: Option<usize>) -> (Self::Tx, Self::Rx) {
        let q = Arc::new(match bound {
            Some(n) => WaitQueue::bounded(n, FullPolicy::Refuse),
            None => WaitQueue::unbounded(),
        });
        (Arc::clone(&q), q)
    }
    fn send(tx: &Self::Tx, mut v: u64) {
        // A full bounded queue: wait for room, as the peers' `send` does.
        while let Err(err) = tx.push_timeout(v, LONG) {
            v = err.into_inner();
        }
    }
    fn recv(rx: &Self::Rx) -> u64 {
        loop {
            if let Some(v) = rx.pop_timeout(LONG) {
                return v;
            }
        }
    }
    fn recv_timeout(rx: &Self::Rx, d: Duration) -> Option<u64> {
        rx.pop_timeout(d)
    }
}
impl Shared for Fairq {}

struct Crossbeam;
impl Contender for Crossbeam {
    const NAME: &'static str = "crossbeam";
    type Tx = crossbeam_channel::Sender<u64>;
    type Rx = crossbeam_channel::Receiver<u64>;
    fn channel(bound: Option<usize>) -> (Self::Tx, Self::Rx) {
        match bound {
            Some(n) => crossbeam_channel::bounded(n),
            None => crossbeam_channel::unbounded(),
        }
    }
    fn send(tx: &Self::Tx, v: u64) {
        tx.send(v).expect("receiver alive");
    }
    fn recv(rx: &Self::Rx) -> u64 {
        rx.recv().expect("sender alive")
    }
    fn recv_timeout(rx: &Self::Rx, d: Duration) -> Option<u64> {
        rx.recv_timeout(d).ok()
    }
}
impl Shared for Crossbeam {}

struct Kanal;
impl Contender for Kanal {
    const NAME: &'static str = "kanal";
    type Tx = kanal::Sender<u64>;
    type Rx = kanal::Receiver<u64>;
    fn channel(bound: Option<usize>) -> (Self::Tx, Self::Rx) {
        match bound {
            Some(n) => kanal::bounded(n),
            None => kanal::unbounded(),
        }
    }
    fn send(tx: &Self::Tx, v: u64) {
        tx.send(v).expect("receiver alive");
    }
    fn recv(rx: &Self::Rx) -> u64 {
        rx.recv().expect("sender alive")
    }
    fn recv_timeout(rx: &Self::Rx, d: Duration) -> Option<u64> {
        rx.recv_timeout(d).ok()
    }
}
impl Shared for Kanal {}

struct Flume;
impl Contender for Flume {
    const NAME: &'static str = "flume";
    type Tx = flume::Sender<u64>;
    type Rx = flume::Receiver<u64>;
    fn channel(bound: Option<usize>) -> (Self::Tx, Self::Rx) {
        match bound {
            Some(n) => flume::bounded(n),
            None => flume::unbounded(),
        }
    }
    fn send(tx: &Self::Tx, v: u64) {
        tx.send(v).expect("receiver alive");
    }
    fn recv(rx: &Self::Rx) -> u64 {
        rx.recv().expect("sender alive")
    }
    fn recv_timeout(rx: &Self::Rx, d: Duration) -> Option<u64> {
        rx.recv_timeout(d).ok()
    }
}
impl Shared for Flume {}

struct StdMpsc;
#[derive(Clone)]
enum StdTx {
    Unbounded(mpsc::Sender<u64>),
    Bounded(mpsc::SyncSender<u64>),
}
impl Contender for StdMpsc {
    const NAME: &'static str = "std mpsc";
    type Tx = StdTx;
    type Rx = mpsc::Receiver<u64>;
    fn channel(bound: Option<usize>) -> (Self::Tx, Self::Rx) {
        match bound {
            Some(n) => {
                let (tx, rx) = mpsc::sync_channel(n);
                (StdTx::Bounded(tx), rx)
            }
            None => {
                let (tx, rx) = mpsc::channel();
                (StdTx::Unbounded(tx), rx)
            }
        }
    }
    fn send(tx: &Self::Tx, v: u64) {
        match tx {
            StdTx::Unbounded(tx) => tx.send(v).expect("receiver alive"),
            StdTx::Bounded(tx) => tx.send(v).expect("receiver alive"),
        }
    }
    fn recv(rx: &Self::Rx) -> u64 {
        rx.recv().expect("sender alive")
    }
    fn recv_timeout(rx: &Self::Rx, d: Duration) -> Option<u64> {
        rx.recv_timeout(d).ok()
    }
}

/// The textbook blocking queue.
struct CondvarQueue {
    items: Mutex<VecDeque<u64>>,
    not_empty: Condvar,
    not_full: Condvar,
    bound: Option<usize>,
}
struct MutexCondvar;
impl Contender for MutexCondvar {
    const NAME: &'static str = "Mutex+Condvar";
    type Tx = Arc<CondvarQueue>;
    type Rx = Arc<CondvarQueue>;
    fn channel(bound: Option<usize>) -> (Self::Tx, Self::Rx) {
        let q = Arc::new(CondvarQueue {
            items: Mutex::new(VecDeque::new()),
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
            bound,
        });
        (Arc::clone(&q), q)
    }
    fn send(tx: &Self::Tx, v: u64) {
        let mut items = tx.items.lock().expect("not poisoned");
        while tx.bound.is_some_and(|b| items.len() >= b) {
            items = tx.not_full.wait(items).expect("not poisoned");
        }
        items.push_back(v);
        drop(items);
        tx.not_empty.notify_one();
    }
    fn recv(rx: &Self::Rx) -> u64 {
        let mut items = rx.items.lock().expect("not poisoned");
        loop {
            if let Some(v) = items.pop_front() {
                drop(items);
                if rx.bound.is_some() {
                    rx.not_full.notify_one();
                }
                return v;
            }
            items = rx.not_empty.wait(items).expect("not poisoned");
        }
    }
    fn recv_timeout(rx: &Self::Rx, d: Duration) -> Option<u64> {
        let deadline = Instant::now() + d;
        let mut items = rx.items.lock().expect("not poisoned");
        loop {
            if let Some(v) = items.pop_front() {
                return Some(v);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            items = rx
                .not_empty
                .wait_timeout(items, deadline - now)
                .expect("ok")
                .0;
        }
    }
}
impl Shared for MutexCondvar {}

// ----- scenarios (each returns the total time for `n` items) ------------------------------

fn spsc<C: Contender>(bound: Option<usize>, n: u64) -> Duration {
    let (tx, rx) = C::channel(bound);
    let start = Instant::now();
    let producer = thread::spawn(move || {
        for i in 0..n {
            C::send(&tx, i);
        }
    });
    for _ in 0..n {
        black_box(C::recv(&rx));
    }
    let took = start.elapsed();
    producer.join().expect("producer");
    took
}

/// Like [`spsc`], with the producer pinned to CPU 1 and the consumer to CPU 0 (see [`pin`]):
/// where the scheduler put the two threads decided the small queue's row, since threads
/// sharing a CPU trade it at every handful of items.
fn spsc_pinned<C: Contender>(bound: Option<usize>, n: u64) -> Duration {
    let (tx, rx) = C::channel(bound);
    let start = Instant::now();
    // Spawned before this thread pins itself: a new thread inherits the CPUs it may use.
    let producer = thread::spawn(move || {
        let _pinned = pin(1);
        for i in 0..n {
            C::send(&tx, i);
        }
    });
    let _pinned = pin(0);
    for _ in 0..n {
        black_box(C::recv(&rx));
    }
    let took = start.elapsed();
    producer.join().expect("producer");
    took
}

/// Two producers, one consumer, two threads: the consumer thread also produces. Only
/// unbounded: with a bound, the consuming producer could block on a full queue that only
/// it drains.
fn mpsc_two_threads<C: Contender>(bound: Option<usize>, n: u64) -> Duration {
    let (tx, rx) = C::channel(bound);
    let half = n / 2;
    let start = Instant::now();
    let producer = {
        let tx = tx.clone();
        thread::spawn(move || {
            for i in 0..half {
                C::send(&tx, i);
            }
        })
    };
    for i in 0..half {
        C::send(&tx, i);
        black_box(C::recv(&rx));
        black_box(C::recv(&rx));
    }
    let took = start.elapsed();
    producer.join().expect("producer");
    took
}

/// Two threads that each push and pop (two producers, two consumers).
fn mpmc_two_threads<C: Shared>(bound: Option<usize>, n: u64) -> Duration
where
    C::Rx: Clone,
{
    let (tx, rx) = C::channel(bound);
    let half = n / 2;
    let start = Instant::now();
    let other = {
        let (tx, rx) = (tx.clone(), rx.clone());
        thread::spawn(move || {
            for i in 0..half {
                C::send(&tx, i);
                black_box(C::recv(&rx));
            }
        })
    };
    for i in 0..half {
        C::send(&tx, i);
        black_box(C::recv(&rx));
    }
    other.join().expect("other");
    start.elapsed()
}

/// Pins the calling thread to `cpu` when the process may use CPUs 0 and 1, so that the two
/// threads of a latency case are either both pinned, apart, or both left to the scheduler.
fn pin(cpu: usize) -> Option<Pinned> {
    if two_cpus() {
        Pinned::to_cpu(cpu)
    } else {
        None
    }
}

/// `n` round trips; returns the time of 2n one-way hand-offs.
fn ping_pong<C: Contender>(n: u64) -> Duration {
    let (ping_tx, ping_rx) = C::channel(None);
    let (pong_tx, pong_rx) = C::channel(None);
    let echo = thread::spawn(move || {
        let _pinned = pin(1);
        for _ in 0..n {
            let v = C::recv(&ping_rx);
            C::send(&pong_tx, v);
        }
    });
    let _pinned = pin(0);
    let start = Instant::now();
    for i in 0..n {
        C::send(&ping_tx, i);
        black_box(C::recv(&pong_rx));
    }
    let took = start.elapsed();
    echo.join().expect("echo");
    took
}

/// Push-to-receive latency of a consumer that was idle (parked) before each push.
fn wake_latency<C: Contender>(n: u64) -> Duration {
    let (tx, rx) = C::channel(None);
    let (ack_tx, ack_rx) = C::channel(None);
    let base = Instant::now();
    let consumer = thread::spawn(move || {
        let _pinned = pin(1);
        let mut total = Duration::ZERO;
        for _ in 0..n {
            let sent_at = C::recv(&rx);
            total += base.elapsed() - Duration::from_nanos(sent_at);
            C::send(&ack_tx, 0);
        }
        total
    });
    let _pinned = pin(0);
    for _ in 0..n {
        thread::sleep(Duration::from_micros(200)); // the consumer parks meanwhile
        C::send(&tx, base.elapsed().as_nanos() as u64);
        C::recv(&ack_rx);
    }
    consumer.join().expect("consumer")
}

/// Mean overshoot of a 1 ms timeout on an empty queue.
fn timeout_overshoot<C: Contender>(n: u64) -> Duration {
    let (_tx, rx) = C::channel(None);
    let requested = Duration::from_millis(1);
    let mut total = Duration::ZERO;
    for _ in 0..n {
        let start = Instant::now();
        assert!(C::recv_timeout(&rx, requested).is_none());
        total += start.elapsed().saturating_sub(requested);
    }
    total / n as u32
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("tokio runtime")
}

fn async_timeout_fairq(n: u64) -> Duration {
    let q = WaitQueue::<u64>::unbounded();
    let requested = Duration::from_millis(1);
    let mut total = Duration::ZERO;
    for _ in 0..n {
        let start = Instant::now();
        assert!(futures::executor::block_on(q.pop_async(Some(requested))).is_none());
        total += start.elapsed().saturating_sub(requested);
    }
    total / n as u32
}

fn async_timeout_tokio(rt: &tokio::runtime::Runtime, n: u64) -> Duration {
    let (_tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let requested = Duration::from_millis(1);
    rt.block_on(async move {
        let mut total = Duration::ZERO;
        for _ in 0..n {
            let start = Instant::now();
            assert!(tokio::time::timeout(requested, rx.recv()).await.is_err());
            total += start.elapsed().saturating_sub(requested);
        }
        total / n as u32
    })
}

/// Keyed items (16 keys) through a fair queue: producer thread, consumer thread. With a
/// `bound`, the two threads are pinned apart, as in the small-queue row of [`spsc_pinned`].
fn fair_spsc<F: FairContender>(bound: Option<usize>, n: u64) -> Duration {
    let q = Arc::new(F::new(bound));
    let start = Instant::now();
    let producer = {
        let q = Arc::clone(&q);
        thread::spawn(move || {
            let _pinned = bound.and_then(|_| pin(1));
            for i in 0..n {
                F::push(&q, (i % 16) as u32, i);
            }
        })
    };
    let _pinned = bound.and_then(|_| pin(0));
    for _ in 0..n {
        black_box(F::pop(&q));
    }
    let took = start.elapsed();
    producer.join().expect("producer");
    took
}

/// Keyed items through a fair queue: two threads that each push and pop.
fn fair_mpmc<F: FairContender>(n: u64) -> Duration {
    let q = Arc::new(F::new(None));
    let half = n / 2;
    let start = Instant::now();
    let other = {
        let q = Arc::clone(&q);
        thread::spawn(move || {
            for i in 0..half {
                F::push(&q, (i % 16) as u32, i);
                black_box(F::pop(&q));
            }
        })
    };
    for i in 0..half {
        F::push(&q, (i % 16) as u32 + 16, i);
        black_box(F::pop(&q));
    }
    other.join().expect("other");
    start.elapsed()
}

trait FairContender: Send + Sync + 'static {
    /// A queue bounded to `bound` items, or unbounded; a push to a full one waits.
    fn new(bound: Option<usize>) -> Self;
    fn push(&self, key: u32, v: u64);
    fn pop(&self) -> u64;
}

impl FairContender for FairWaitQueue<u32, u64> {
    fn new(bound: Option<usize>) -> Self {
        bound.map_or_else(FairWaitQueue::unbounded, FairWaitQueue::with_capacity)
    }
    fn push(&self, key: u32, v: u64) {
        while self.push_timeout(key, v, LONG).is_err() {}
    }
    fn pop(&self) -> u64 {
        loop {
            if let Some(v) = self.pop_timeout(LONG) {
                return v;
            }
        }
    }
}

struct CondvarFair {
    q: Mutex<FairQueue<u32, u64>>,
    bound: usize,
    not_empty: Condvar,
    not_full: Condvar,
}

impl FairContender for CondvarFair {
    fn new(bound: Option<usize>) -> Self {
        CondvarFair {
            q: Mutex::new(FairQueue::unbounded()),
            bound: bound.unwrap_or(usize::MAX),
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
        }
    }
    fn push(&self, key: u32, v: u64) {
        let mut q = self.q.lock().expect("not poisoned");
        while q.len() >= self.bound {
            q = self.not_full.wait(q).expect("not poisoned");
        }
        q.push(key, v).expect("unbounded");
        drop(q);
        self.not_empty.notify_one();
    }
    fn pop(&self) -> u64 {
        let mut q = self.q.lock().expect("not poisoned");
        loop {
            if let Some(v) = q.pop() {
                drop(q);
                self.not_full.notify_one();
                return v;
            }
            q = self.not_empty.wait(q).expect("not poisoned");
        }
    }
}

// ----- criterion ------------------------------------------------------------------------

fn throughput_group<C: Contender>(
    c: &mut Criterion,
    shared: Option<fn(Option<usize>, u64) -> Duration>,
) {
    let mut group = c.benchmark_group(format!("blocking/{}", C::NAME));
    group.throughput(Throughput::Elements(1));
    for (label, bound) in [("unbounded", None), ("bounded", Some(BOUND))] {
        group.bench_function(format!("spsc {label}"), |b| {
            b.iter_custom(|iters| spsc::<C>(bound, iters.max(2)))
        });
        if bound.is_none() {
            group.bench_function(format!("mpsc {label}"), |b| {
                b.iter_custom(|iters| mpsc_two_threads::<C>(bound, iters.max(2)))
            });
        }
        if let Some(mpmc) = shared {
            group.bench_function(format!("mpmc {label}"), |b| {
                b.iter_custom(|iters| mpmc(bound, iters.max(2)))
            });
        }
    }
    group.bench_function("ping-pong one-way", |b| {
        b.iter_custom(|iters| ping_pong::<C>(iters.div_ceil(2).max(1)))
    });
    group.finish();
}

fn criterion_benches(c: &mut Criterion) {
    throughput_group::<Fairq>(c, Some(mpmc_two_threads::<Fairq>));
    throughput_group::<Crossbeam>(c, Some(mpmc_two_threads::<Crossbeam>));
    throughput_group::<Kanal>(c, Some(mpmc_two_threads::<Kanal>));
    throughput_group::<Flume>(c, Some(mpmc_two_threads::<Flume>));
    throughput_group::<StdMpsc>(c, None);
    throughput_group::<MutexCondvar>(c, Some(mpmc_two_threads::<MutexCondvar>));

    let rt = runtime();
    let mut group = c.benchmark_group("blocking/async spsc");
    group.throughput(Throughput::Elements(1));
    for (label, bound) in [("unbounded", None), ("bounded", Some(BOUND))] {
        group.bench_function(format!("fairq pop_async {label}"), |b| {
            b.iter_custom(|iters| async_cases::wait_queue(&rt, bound, false, iters.max(2)))
        });
        group.bench_function(format!("tokio mpsc {label}"), |b| {
            b.iter_custom(|iters| async_cases::tokio_mpsc(&rt, bound, iters.max(2)))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("blocking/fair");
    group.throughput(Throughput::Elements(1));
    group.bench_function("FairWaitQueue spsc", |b| {
        b.iter_custom(|iters| fair_spsc::<FairWaitQueue<u32, u64>>(None, iters.max(2)))
    });
    group.bench_function("Mutex<FairQueue>+Condvar spsc", |b| {
        b.iter_custom(|iters| fair_spsc::<CondvarFair>(None, iters.max(2)))
    });
    group.bench_function("FairWaitQueue mpmc", |b| {
        b.iter_custom(|iters| fair_mpmc::<FairWaitQueue<u32, u64>>(iters.max(2)))
    });
    group.bench_function("Mutex<FairQueue>+Condvar mpmc", |b| {
        b.iter_custom(|iters| fair_mpmc::<CondvarFair>(iters.max(2)))
    });
    group.finish();
}

// ----- ratio tables ---------------------------------------------------------------------

/// One scenario of one contender: its label, how many samples to take, and a closure that
/// runs it once and returns ns per item (or per event).
struct Sampler {
    label: String,
    runs: usize,
    run: Box<dyn FnMut() -> f64>,
}

impl Sampler {
    fn new(label: impl Into<String>, runs: usize, run: impl FnMut() -> f64 + 'static) -> Self {
        Sampler {
            label: label.into(),
            runs,
            run: Box::new(run),
        }
    }
}

fn per_item(took: Duration, n: u64) -> f64 {
    took.as_nanos() as f64 / n as f64
}

fn samplers<C: Contender>(
    n: u64,
    mpmc: Option<fn(Option<usize>, u64) -> Duration>,
) -> Vec<Sampler> {
    const RUNS: usize = 5;
    let mut out = Vec::new();
    for (label, bound) in [("unbounded", None), ("bounded", Some(BOUND))] {
        out.push(Sampler::new(format!("spsc {label}"), RUNS, move || {
            per_item(spsc::<C>(bound, n), n)
        }));
        if bound.is_none() {
            out.push(Sampler::new(format!("mpsc {label}"), RUNS, move || {
                per_item(mpsc_two_threads::<C>(bound, n), n)
            }));
        }
        if let Some(mpmc) = mpmc {
            out.push(Sampler::new(format!("mpmc {label}"), RUNS, move || {
                per_item(mpmc(bound, n), n)
            }));
        }
    }
    // A hand-off per item or so: slower per item, so fewer items (flume's takes about
    // 10 µs an item where producers sleep).
    let small = (n / 4).max(1);
    out.push(Sampler::new(
        format!("spsc bounded {SMALL_BOUND}"),
        RUNS,
        move || per_item(spsc_pinned::<C>(Some(SMALL_BOUND), small), small),
    ));
    out.push(Sampler::new("ping-pong one-way", RUNS, || {
        per_item(ping_pong::<C>(20_000), 20_000) / 2.0
    }));
    out.push(Sampler::new("wake latency (parked consumer)", 3, || {
        per_item(wake_latency::<C>(500), 500)
    }));
    out.push(Sampler::new("timeout overshoot (1 ms)", 3, || {
        timeout_overshoot::<C>(100).as_nanos() as f64
    }));
    out
}

/// Takes every scenario's samples in turns, one sample of each contender before the next
/// round, so that load changes on the shared machine hit every contender alike; returns,
/// per contender, each scenario's median.
fn in_turns(contenders: &mut [Vec<Sampler>]) -> Vec<Vec<(String, f64)>> {
    let labels: Vec<(String, usize)> = contenders[0]
        .iter()
        .map(|s| (s.label.clone(), s.runs))
        .collect();
    let mut medians: Vec<Vec<(String, f64)>> = vec![Vec::new(); contenders.len()];
    for (label, runs) in labels {
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
        for _ in 0..runs {
            for (c, samplers) in contenders.iter_mut().enumerate() {
                if let Some(s) = samplers.iter_mut().find(|s| s.label == label) {
                    samples[c].push((s.run)());
                }
            }
        }
        for (c, mut times) in samples.into_iter().enumerate() {
            if times.is_empty() {
                continue;
            }
            times.sort_by(f64::total_cmp);
            medians[c].push((label.clone(), times[times.len() / 2]));
        }
    }
    medians
}

/// Two contenders' medians over `runs` samples taken in turns.
fn pair_in_turns(
    runs: usize,
    mut a: impl FnMut() -> f64,
    mut b: impl FnMut() -> f64,
) -> (f64, f64) {
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        ta.push(a());
        tb.push(b());
    }
    for t in [&mut ta, &mut tb] {
        t.sort_by(f64::total_cmp);
    }
    (ta[runs / 2], tb[runs / 2])
}

struct Row {
    label: String,
    ours: f64,
    peers: Vec<(&'static str, f64)>,
}

fn ratio_tables() {
    let n = 200_000;
    let load_before = load_average();
    let names = [
        Crossbeam::NAME,
        Kanal::NAME,
        Flume::NAME,
        StdMpsc::NAME,
        MutexCondvar::NAME,
    ];
    let mut contenders = vec![
        samplers::<Fairq>(n, Some(mpmc_two_threads::<Fairq>)),
        samplers::<Crossbeam>(n, Some(mpmc_two_threads::<Crossbeam>)),
        samplers::<Kanal>(n, Some(mpmc_two_threads::<Kanal>)),
        samplers::<Flume>(n, Some(mpmc_two_threads::<Flume>)),
        samplers::<StdMpsc>(n, None),
        samplers::<MutexCondvar>(n, Some(mpmc_two_threads::<MutexCondvar>)),
    ];
    let mut medians = in_turns(&mut contenders).into_iter();
    let ours = medians.next().unwrap_or_default();
    let peers: Vec<(&'static str, Vec<(String, f64)>)> = names.into_iter().zip(medians).collect();
    let mut rows: Vec<Row> = ours
        .iter()
        .map(|(label, ns)| Row {
            label: label.clone(),
            ours: *ns,
            peers: Vec::new(),
        })
        .collect();
    for (name, results) in &peers {
        for (label, ns) in results {
            if let Some(row) = rows.iter_mut().find(|r| &r.label == label) {
                row.peers.push((name, *ns));
            }
        }
    }

    println!();
    println!(
        "ratio tables: wall-clock medians, contenders sampled in turns; load average \
         {load_before} before the tables"
    );
    for (name, _) in &peers {
        let table: Vec<Ratio> = rows
            .iter()
            .filter_map(|row| {
                let baseline = row.peers.iter().find(|(p, _)| p == name)?.1;
                let throughput = row.label.starts_with("spsc") || row.label.starts_with("mpmc");
                let target = match (*name, row.label.as_str()) {
                    ("crossbeam", _) if throughput => Some(1.2),
                    ("kanal", _) if throughput => Some(1.5),
                    ("flume", "ping-pong one-way") => Some(1.0),
                    ("Mutex+Condvar", l) if l.starts_with("mpmc") => Some(0.34),
                    _ => None,
                };
                Some(Ratio {
                    label: row.label.clone(),
                    ours: row.ours,
                    baseline,
                    target,
                })
            })
            .collect();
        print_ratio_table(
            &format!("WaitQueue vs {name} (ns/item; latency/overshoot in ns)"),
            name,
            &table,
        );
    }

    let rt = runtime();
    let mut table = Vec::new();
    for (label, bound) in [("unbounded", None), ("bounded", Some(BOUND))] {
        let (ours, baseline) = pair_in_turns(
            5,
            || per_item(async_cases::wait_queue(&rt, bound, false, n), n),
            || per_item(async_cases::tokio_mpsc(&rt, bound, n), n),
        );
        table.push(Ratio {
            label: format!("async spsc {label}"),
            ours,
            baseline,
            target: Some(1.0),
        });
    }
    // What awaiting `push_async` on an unbounded queue costs (its ready path, about 12 ns
    // more than `push` per item on the development machine), for the record.
    let (ours, baseline) = pair_in_turns(
        5,
        || per_item(async_cases::wait_queue(&rt, None, true, n), n),
        || per_item(async_cases::tokio_mpsc(&rt, None, n), n),
    );
    table.push(Ratio {
        label: "async spsc unbounded, awaiting push_async".to_string(),
        ours,
        baseline,
        target: None,
    });
    let (ours, baseline) = pair_in_turns(
        3,
        || async_timeout_fairq(100).as_nanos() as f64,
        || async_timeout_tokio(&rt, 100).as_nanos() as f64,
    );
    table.push(Ratio {
        label: "async timeout overshoot (1 ms)".to_string(),
        ours,
        baseline,
        target: None,
    });
    print_ratio_table("pop_async vs tokio mpsc", "tokio mpsc", &table);

    let (spsc_ours, spsc_base) = pair_in_turns(
        5,
        || per_item(fair_spsc::<FairWaitQueue<u32, u64>>(None, n), n),
        || per_item(fair_spsc::<CondvarFair>(None, n), n),
    );
    let small = n / 4;
    let (small_ours, small_base) = pair_in_turns(
        5,
        || {
            per_item(
                fair_spsc::<FairWaitQueue<u32, u64>>(Some(SMALL_BOUND), small),
                small,
            )
        },
        || per_item(fair_spsc::<CondvarFair>(Some(SMALL_BOUND), small), small),
    );
    let (mpmc_ours, mpmc_base) = pair_in_turns(
        5,
        || per_item(fair_mpmc::<FairWaitQueue<u32, u64>>(n), n),
        || per_item(fair_mpmc::<CondvarFair>(n), n),
    );
    let fair = vec![
        Ratio {
            label: "fair spsc, 16 keys".to_string(),
            ours: spsc_ours,
            baseline: spsc_base,
            target: Some(1.0),
        },
        Ratio {
            label: "fair mpmc, 32 keys".to_string(),
            ours: mpmc_ours,
            baseline: mpmc_base,
            target: Some(1.0),
        },
        Ratio {
            label: format!("fair spsc bounded {SMALL_BOUND}, 16 keys"),
            ours: small_ours,
            baseline: small_base,
            target: Some(1.0),
        },
    ];
    print_ratio_table(
        "FairWaitQueue vs Mutex<FairQueue>+Condvar",
        "Mutex+Condvar",
        &fair,
    );
    println!("load average {} after the tables", load_average());
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_millis(800));
    targets = criterion_benches
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    ratio_tables();
}
