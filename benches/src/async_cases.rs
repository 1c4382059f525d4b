//! The blocking bench's async cases, shared with the `blocking_mpmc` example: one producer
//! task and one consumer task on a caller's tokio runtime, timed from the first push.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fairq_blocking::{FullPolicy, WaitQueue};

/// `WaitQueue` with a consumer awaiting `pop_async`. The producer pushes as tokio's does:
/// unbounded with the plain call (tokio's unbounded sender has no async send, and a push to
/// an unbounded queue never waits), bounded with `push_async`; `awaited` makes an unbounded
/// producer await `push_async` too.
///
/// ```
/// let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
/// assert!(fairq_benches::async_cases::wait_queue(&rt, Some(4), false, 100) > std::time::Duration::ZERO);
/// ```
pub fn wait_queue(
    rt: &tokio::runtime::Runtime,
    bound: Option<usize>,
    awaited: bool,
    n: u64,
) -> Duration {
    let q = Arc::new(match bound {
        Some(b) => WaitQueue::bounded(b, FullPolicy::Refuse),
        None => WaitQueue::unbounded(),
    });
    let awaited = awaited || bound.is_some();
    rt.block_on(async move {
        let start = Instant::now();
        let tx = Arc::clone(&q);
        let producer = tokio::spawn(async move {
            for i in 0..n {
                if awaited {
                    tx.push_async(i, None).await.expect("open");
                } else {
                    tx.push(i).expect("open");
                }
            }
        });
        let consumer = tokio::spawn(async move {
            for _ in 0..n {
                black_box(q.pop_async(None).await);
            }
        });
        producer.await.expect("producer");
        consumer.await.expect("consumer");
        start.elapsed()
    })
}

/// tokio's mpsc channel, bounded (an awaited `send`) or unbounded.
///
/// ```
/// let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
/// assert!(fairq_benches::async_cases::tokio_mpsc(&rt, None, 100) > std::time::Duration::ZERO);
/// ```
pub fn tokio_mpsc(rt: &tokio::runtime::Runtime, bound: Option<usize>, n: u64) -> Duration {
    rt.block_on(async move {
        let start = Instant::now();
        let (producer, consumer) = match bound {
            Some(b) => {
                let (tx, mut rx) = tokio::sync::mpsc::channel(b);
                (
                    tokio::spawn(async move {
                        for i in 0..n {
                            tx.send(i).await.expect("receiver alive");
                        }
                    }),
                    tokio::spawn(async move {
                        for _ in 0..n {
                            black_box(rx.recv().await);
                        }
                    }),
                )
            }
            None => {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
                (
                    tokio::spawn(async move {
                        for i in 0..n {
                            tx.send(i).expect("receiver alive");
                        }
                    }),
                    tokio::spawn(async move {
                        for _ in 0..n {
                            black_box(rx.recv().await);
                        }
                    }),
                )
            }
        };
        producer.await.expect("producer");
        consumer.await.expect("consumer");
        start.elapsed()
    })
}
