//! LISTEN/NOTIFY wake-ups: one dedicated connection per store listens on the schema's two
//! channels. A notification on the ready channel names a queue with new ready jobs: its
//! waiting tasks wake. One on the due channel (`<millis> <queue>`) says a job of the queue
//! waits until that time: the store's [`DueTimes`] learn it, and the waiting tasks wake to
//! look again.
//!
//! The connection uses the store's TLS settings. It is re-established with backoff when it drops; every (re)start wakes all
//! waiters and forgets the due times, since notifications sent meanwhile are lost. Waiters
//! also sleep no longer than the polling interval while the listener is down, so nothing waits
//! forever.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::Notify;
use tokio_postgres::AsyncMessage;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::due::DueTimes;

/// Per-queue wake-up signals shared by the store and its listener.
#[derive(Debug, Default)]
pub(crate) struct Signals {
    queues: Mutex<HashMap<String, Arc<Notify>>>,
    listening: AtomicBool,
    /// The earliest due time of each queue's waiting jobs, as far as the store knows.
    pub(crate) due: DueTimes,
}

impl Signals {
    /// The signal of `queue`.
    pub(crate) fn of(&self, queue: &str) -> Arc<Notify> {
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        queues
            .entry(queue.to_string())
            .or_insert_with(|| Arc::new(Notify::new()))
            .clone()
    }

    /// Wakes the tasks waiting for `queue`.
    pub(crate) fn wake(&self, queue: &str) {
        let queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(notify) = queues.get(queue) {
            notify.notify_waiters();
        }
    }

    /// Wakes every waiting task.
    pub(crate) fn wake_all(&self) {
        let queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        for notify in queues.values() {
            notify.notify_waiters();
        }
    }

    /// Whether notifications are being received right now.
    pub(crate) fn listening(&self) -> bool {
        self.listening.load(Ordering::Acquire)
    }

    fn set_listening(&self, on: bool) {
        self.listening.store(on, Ordering::Release);
    }

    /// Handles one notification.
    fn notified(&self, due_channel: bool, payload: &str) {
        if !due_channel {
            self.wake(payload);
            return;
        }
        if let Some((at, queue)) = payload.split_once(' ') {
            if let Ok(at) = at.parse::<u64>() {
                self.due.lower(queue, at);
            }
            self.wake(queue);
        }
    }
}

/// Where the listener listens: the ready channel and the due channel.
#[derive(Debug, Clone)]
pub(crate) struct Channels {
    pub(crate) ready: String,
    pub(crate) due: String,
}

fn quoted(channel: &str) -> String {
    format!("\"{}\"", channel.replace('"', "\"\""))
}

/// Listens on `channels` until `signals` is dropped, reconnecting with backoff.
pub(crate) async fn run(
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    channels: Channels,
    signals: Weak<Signals>,
) {
    let mut backoff = Duration::from_millis(50);
    loop {
        if signals.strong_count() == 0 {
            return;
        }
        if let Ok((client, mut connection)) = config.connect(tls.clone()).await {
            let due_channel = channels.due.clone();
            let driving = signals.clone();
            // Notifications are handled on the connection's own task, so a waiter is woken
            // by the task that read the message, with no hand-over to another task between.
            let mut driver = tokio::spawn(async move {
                let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
                while let Some(message) = messages.next().await {
                    match message {
                        Ok(AsyncMessage::Notification(n)) => match driving.upgrade() {
                            Some(s) => s.notified(n.channel() == due_channel, n.payload()),
                            None => break,
                        },
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
            });
            let listen = format!(
                "LISTEN {}; LISTEN {}",
                quoted(&channels.ready),
                quoted(&channels.due)
            );
            if client.batch_execute(&listen).await.is_ok() {
                backoff = Duration::from_millis(50);
                if let Some(s) = signals.upgrade() {
                    s.due.forget();
                    s.set_listening(true);
                    s.wake_all();
                }
                // Until the connection drops (or the store is dropped).
                let _ = (&mut driver).await;
            }
            if let Some(s) = signals.upgrade() {
                s.set_listening(false);
                s.due.forget();
                // Whatever was sent while the connection was dying is lost: look again.
                s.wake_all();
            }
            driver.abort();
            drop(client);
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}
