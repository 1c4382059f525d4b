//! A driver for the cost of the blocking bench's mpmc case (two threads that each push then
//! pop) beyond wall time, which a shared machine disturbs: it prints the wall time, the
//! process's CPU time and its context switches per item, so a run under load still shows
//! how often a contender parks (voluntary switches) and how much CPU an item costs.
//!
//! ```sh
//! cargo build --release -p fairq-benches --example blocking_mpmc
//! target/release/examples/blocking_mpmc fairq bounded 2000000
//! strace -f -c -e trace=futex target/release/examples/blocking_mpmc fairq bounded 2000000
//! valgrind --tool=callgrind target/release/examples/blocking_mpmc fairq bounded 200000
//! ```
//!
//! Arguments: contender (`fairq`: `WaitQueue` with `push_timeout`/`pop_timeout`, as in the
//! bench; `fair`: `FairWaitQueue` the same way, 16 keys per thread, as in the bench's fair
//! cases; `crossbeam`, `kanal`, `flume`: their blocking `send`/`recv`; `store`: the bare
//! crossbeam-queue store of `WaitQueue`, `SegQueue` or `ArrayQueue`, polled), `unbounded` or
//! `bounded` (capacity 1,024, or `BLOCKING_MPMC_BOUND`; with `BLOCKING_MPMC_PIN` set the
//! spsc case pins its consumer to CPU 0 and its producer to CPU 1; with
//! `BLOCKING_MPMC_NO_TURNS` set `fairq`'s threads do not take turns), items (split between the two threads), and optionally `spsc`
//! for the bench's spsc case instead (one thread pushes, the other pops), or `mpsc` for its
//! mpsc case (one thread pushes, the other pushes once and pops twice per round). `async-fairq` and
//! `async-tokio` run the bench's async case instead: a producer task and a consumer task
//! inside a two-worker tokio runtime (`pop_async` against tokio mpsc; the producer pushes
//! with the plain call when unbounded, awaiting when bounded).

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use fairq_blocking::{FairWaitQueue, FullPolicy, WaitQueue};

const BOUND: usize = 1_024;
const LONG: Duration = Duration::from_secs(3_600);

/// CPU time (user + system) and context switches (voluntary, involuntary) of the process.
fn usage() -> (Duration, i64, i64) {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let d = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (d(u.ru_utime) + d(u.ru_stime), u.ru_nvcsw, u.ru_nivcsw)
}

/// Set by a fourth argument `spsc`: one thread pushes, the other pops.
static SPSC: AtomicBool = AtomicBool::new(false);
/// Set by a fourth argument `mpsc`: one thread pushes, the other pushes once and pops twice.
static MPSC: AtomicBool = AtomicBool::new(false);

thread_local! {
    static MAIN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the caller is the thread that runs `main` (the fair contender's keys differ).
fn on_main_thread() -> bool {
    MAIN.with(std::cell::Cell::get)
}

/// Two threads, each pushing then popping `half` times (or, with [`SPSC`], one pushing
/// `2 * half` items and the other popping them).
fn two_threads<Q: Send + Sync + 'static>(
    q: Arc<Q>,
    half: u64,
    send: fn(&Q, u64),
    recv: fn(&Q) -> u64,
) {
    if SPSC.load(Ordering::Relaxed) {
        let pin = std::env::var_os("BLOCKING_MPMC_PIN").is_some();
        // Spawned before this thread pins itself: a new thread inherits the CPUs it may use.
        let producer = {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                let _pinned = pin.then(|| fairq_benches::Pinned::to_cpu(1)).flatten();
                (0..2 * half).for_each(|i| send(&q, i))
            })
        };
        let _pinned = pin.then(|| fairq_benches::Pinned::to_cpu(0)).flatten();
        for _ in 0..2 * half {
            black_box(recv(&q));
        }
        producer.join().expect("producer thread");
        return;
    }
    if MPSC.load(Ordering::Relaxed) {
        let producer = {
            let q = Arc::clone(&q);
            thread::spawn(move || (0..half).for_each(|i| send(&q, i)))
        };
        for i in 0..half {
            send(&q, i);
            black_box(recv(&q));
            black_box(recv(&q));
        }
        producer.join().expect("producer thread");
        return;
    }
    let other = {
        let q = Arc::clone(&q);
        thread::spawn(move || {
            for i in 0..half {
                send(&q, i);
                black_box(recv(&q));
            }
        })
    };
    for i in 0..half {
        send(&q, i);
        black_box(recv(&q));
    }
    other.join().expect("other thread");
}

/// A two-worker tokio runtime, as in the bench's async cases.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("tokio runtime")
}

/// Runs [`two_threads`] on a channel crate's `bounded(n)` / `unbounded()` pair with its
/// blocking `send` and `recv`.
macro_rules! channel {
    ($krate:ident, $bound:expr, $half:expr) => {{
        let (tx, rx) = match $bound {
            Some(n) => $krate::bounded(n),
            None => $krate::unbounded(),
        };
        two_threads(
            Arc::new((tx, rx)),
            $half,
            |(tx, _), v| tx.send(v).expect("open"),
            |(_, rx)| rx.recv().expect("open"),
        )
    }};
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage_line =
        "usage: blocking_mpmc fairq|fair|async-fairq|async-tokio|crossbeam|kanal|flume|store \
         unbounded|bounded ITEMS [spsc|mpsc]";
    let bound = match args.get(1).map(String::as_str) {
        Some("unbounded") => None,
        Some("bounded") => Some(
            std::env::var("BLOCKING_MPMC_BOUND")
                .ok()
                .and_then(|b| b.parse().ok())
                .unwrap_or(BOUND),
        ),
        _ => panic!("{usage_line}"),
    };
    let items: u64 = args
        .get(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("{usage_line}"));
    let half = items / 2;
    SPSC.store(
        args.get(3).map(String::as_str) == Some("spsc"),
        Ordering::Relaxed,
    );
    MPSC.store(
        args.get(3).map(String::as_str) == Some("mpsc"),
        Ordering::Relaxed,
    );
    MAIN.with(|main| main.set(true));
    let (cpu0, vol0, invol0) = usage();
    let start = Instant::now();
    match args.first().map(String::as_str) {
        Some("fairq") => {
            let q = Arc::new(
                match bound {
                    Some(n) => WaitQueue::bounded(n, FullPolicy::Refuse),
                    None => WaitQueue::unbounded(),
                }
                .taking_turns(std::env::var_os("BLOCKING_MPMC_NO_TURNS").is_none()),
            );
            two_threads(
                q,
                half,
                |q, mut v| {
                    while let Err(err) = q.push_timeout(v, LONG) {
                        v = err.into_inner();
                    }
                },
                |q| loop {
                    if let Some(v) = q.pop_timeout(LONG) {
                        return v;
                    }
                },
            );
        }
        Some("fair") => {
            // The bench's FairWaitQueue cases: 16 keys per thread (32 in all for mpmc).
            let q = Arc::new(match bound {
                Some(n) => FairWaitQueue::with_capacity(n),
                None => FairWaitQueue::unbounded(),
            });
            two_threads(
                q,
                half,
                |q, v| {
                    let key = (v % 16) as u32 + 16 * u32::from(on_main_thread());
                    while let Err(err) = q.push_timeout(key, v, LONG) {
                        assert!(!q.is_closed(), "{err}");
                    }
                },
                |q| loop {
                    if let Some(v) = q.pop_timeout(LONG) {
                        return v;
                    }
                },
            );
        }
        Some("async-fairq") => {
            fairq_benches::async_cases::wait_queue(&runtime(), bound, false, 2 * half);
        }
        Some("async-tokio") => {
            fairq_benches::async_cases::tokio_mpsc(&runtime(), bound, 2 * half);
        }
        Some("crossbeam") => channel!(crossbeam_channel, bound, half),
        Some("kanal") => channel!(kanal, bound, half),
        Some("flume") => channel!(flume, bound, half),
        Some("store") => match bound {
            Some(n) => two_threads(
                Arc::new(crossbeam_queue::ArrayQueue::new(n)),
                half,
                |q, mut v| {
                    while let Err(back) = q.push(v) {
                        v = back;
                    }
                },
                |q| loop {
                    if let Some(v) = q.pop() {
                        return v;
                    }
                },
            ),
            None => two_threads(
                Arc::new(crossbeam_queue::SegQueue::new()),
                half,
                |q, v| q.push(v),
                |q| loop {
                    if let Some(v) = q.pop() {
                        return v;
                    }
                },
            ),
        },
        _ => panic!("{usage_line}"),
    }
    let wall = start.elapsed();
    let (cpu1, vol1, invol1) = usage();
    let n = (half * 2).max(1) as f64;
    println!(
        "{} {}{}: {:.1} ns/item wall, {:.1} ns/item CPU, {:.4} voluntary and {:.4} involuntary \
         switches/item",
        args[0],
        args[1],
        if SPSC.load(Ordering::Relaxed) {
            " spsc"
        } else if MPSC.load(Ordering::Relaxed) {
            " mpsc"
        } else {
            ""
        },
        wall.as_nanos() as f64 / n,
        (cpu1 - cpu0).as_nanos() as f64 / n,
        (vol1 - vol0) as f64 / n,
        (invol1 - invol0) as f64 / n,
    );
}
