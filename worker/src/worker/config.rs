//! Per-queue settings of a [`Worker`](crate::Worker) and the backoff after store errors.

use std::time::Duration;

/// The largest concurrency a queue may have.
const MAX_CONCURRENCY: usize = 1_000_000;

/// How a worker serves one queue.
///
/// The worker runs a queue as a pipeline (see the [crate docs](crate#the-pipeline)): a
/// **prefetch buffer** holds jobs claimed ahead of free slots, **slots** run handlers (a slot
/// is free again as soon as its handler returns), and an **acker** records finished attempts
/// in the store in batches while the slots carry on.
///
/// Durations may be anything up to `Duration::MAX` ("never"): the worker's timers cap a wait
/// at about 30 years rather than overflow.
///
/// ```
/// use std::time::Duration;
/// use fairq_worker::QueueConfig;
///
/// let config = QueueConfig::default()
///     .concurrency(4)
///     .lease(Duration::from_secs(60))
///     .poll_interval(Duration::from_millis(500))
///     .prefetch(8)
///     .settle_batch(64);
/// assert_eq!(config.get_concurrency(), 4);
/// assert_eq!(config.get_heartbeat_interval(), Duration::from_secs(20));
/// assert_eq!(config.get_prefetch(), 8);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    concurrency: usize,
    lease: Duration,
    poll_interval: Duration,
    heartbeat_interval: Option<Duration>,
    rescue_interval: Option<Duration>,
    prefetch: Option<usize>,
    prefetch_ttl: Option<Duration>,
    settle_batch: usize,
    settle_window: Duration,
    settles_in_flight: usize,
    max_unsettled: Option<usize>,
    timeout: Option<Duration>,
    retry_sweep: Option<Duration>,
    sweep_holds_new_jobs: bool,
}

impl Default for QueueConfig {
    /// 10 jobs at a time, 30 s leases, a 1 s poll interval for stores that cannot push
    /// wake-ups, heartbeats every third of the lease, rescue sweeps every half lease; a
    /// prefetch buffer whose depth adapts between the concurrency and 32 times it, whose jobs
    /// are handed back after a lease of waiting; settlement batches of at most 128 attempts,
    /// 4 in flight, a 5 ms window; no handler timeout; no retry sweep.
    ///
    /// ```
    /// let c = fairq_worker::QueueConfig::default();
    /// assert_eq!((c.get_settle_batch(), c.get_settles_in_flight()), (128, 4));
    /// ```
    fn default() -> Self {
        QueueConfig {
            concurrency: 10,
            lease: Duration::from_secs(30),
            poll_interval: Duration::from_secs(1),
            heartbeat_interval: None,
            rescue_interval: None,
            prefetch: None,
            prefetch_ttl: None,
            settle_batch: 128,
            settle_window: Duration::from_millis(5),
            settles_in_flight: 4,
            max_unsettled: None,
            timeout: None,
            retry_sweep: None,
            sweep_holds_new_jobs: false,
        }
    }
}

impl QueueConfig {
    /// The default settings (see [`QueueConfig::default`]).
    ///
    /// ```
    /// assert_eq!(fairq_worker::QueueConfig::new(), fairq_worker::QueueConfig::default());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs at most `n` jobs of the queue at once (in this worker).
    ///
    /// ```
    /// assert_eq!(fairq_worker::QueueConfig::new().concurrency(2).get_concurrency(), 2);
    /// ```
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// Claims jobs under leases of this length; a job whose worker stops renewing its lease
    /// is rescued once it expires. The [heartbeat interval](Self::heartbeat_interval) must be
    /// shorter.
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = fairq_worker::QueueConfig::new().lease(Duration::from_secs(9));
    /// assert_eq!(c.get_lease(), Duration::from_secs(9));
    /// ```
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Looks for jobs at least this often when the store sends no wake-up.
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = fairq_worker::QueueConfig::new().poll_interval(Duration::from_millis(50));
    /// assert_eq!(c.get_poll_interval(), Duration::from_millis(50));
    /// ```
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval = every;
        self
    }

    /// Renews the leases of the jobs the queue holds this often (default: a third of the
    /// lease).
    ///
    /// It must be shorter than the [lease](Self::lease): [`WorkerBuilder::build`] refuses an
    /// interval at or past it ([`WorkerConfigError::Queue`]), since the lease of a running
    /// job would then expire between two beats and another worker would rescue and run it
    /// again. Keep it to half the lease or less, so that one renewal that fails or comes late
    /// does not lose the lease.
    ///
    /// [`WorkerBuilder::build`]: crate::WorkerBuilder::build
    /// [`WorkerConfigError::Queue`]: crate::WorkerConfigError::Queue
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::{Job, MemoryBackend, QueueConfig, Worker, WorkerConfigError};
    /// let c = QueueConfig::new().heartbeat_interval(Duration::from_secs(1));
    /// assert_eq!(c.get_heartbeat_interval(), Duration::from_secs(1));
    ///
    /// let too_long = QueueConfig::new()
    ///     .lease(Duration::from_secs(30))
    ///     .heartbeat_interval(Duration::from_secs(30));
    /// let err = Worker::builder(MemoryBackend::new())
    ///     .queue("q", too_long)
    ///     .handle("k", |_job: Job| async { Ok::<_, String>(()) })
    ///     .build()
    ///     .unwrap_err();
    /// assert!(matches!(err, WorkerConfigError::Queue { .. }));
    /// ```
    pub fn heartbeat_interval(mut self, every: Duration) -> Self {
        self.heartbeat_interval = Some(every);
        self
    }

    /// Sweeps the queue for expired leases this often (default: half the lease).
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = fairq_worker::QueueConfig::new().rescue_interval(Duration::from_secs(5));
    /// assert_eq!(c.get_rescue_interval(), Duration::from_secs(5));
    /// ```
    pub fn rescue_interval(mut self, every: Duration) -> Self {
        self.rescue_interval = Some(every);
        self
    }

    /// Claims up to `n` jobs ahead of free slots (0 claims only for free slots). Buffered
    /// jobs start in the order they were claimed, so the store's fair order is kept; their
    /// leases are renewed with the running jobs'; a graceful shutdown hands them back to the
    /// store without counting an attempt.
    ///
    /// By default the depth adapts: on a store that can take jobs back (see
    /// [`Backend::release`](crate::Backend::release)) it starts at the concurrency. When the
    /// slots empty the buffer before the next claim comes back while the queue still has
    /// ready jobs (handlers that are quick next to a claim), it doubles: at once up to twice
    /// the concurrency, on trial beyond, up to [`get_max_prefetch`](Self::get_max_prefetch).
    /// A trial's doubling stays only if the time per job between claims, averaged over its
    /// four full claims, is at least a sixth below its average over the four claims before
    /// (otherwise the depth goes back and tries again 4 claims later, then 8, up to 32). On
    /// a store whose claims cost about the same whatever their size
    /// ([`Backend::claims_cost_mostly_fixed`](crate::Backend::claims_cost_mostly_fixed)),
    /// every doubling is kept at once.
    /// Each claim that finds jobs still buffered shrinks it by a sixteenth, back down to the
    /// concurrency. On a store that cannot take jobs back the default is 0. Setting `n` fixes
    /// the depth.
    ///
    /// A deeper buffer means fewer, larger claims; it also means a job of a key that was just
    /// enqueued waits behind up to `n` jobs claimed before it.
    ///
    /// ```
    /// let c = fairq_worker::QueueConfig::new().concurrency(4);
    /// assert_eq!(c.get_prefetch(), 4);
    /// assert_eq!(c.prefetch(0).get_prefetch(), 0);
    /// ```
    pub fn prefetch(mut self, n: usize) -> Self {
        self.prefetch = Some(n);
        self
    }

    /// Hands a buffered job back to the store once it has waited this long for a slot
    /// (default: the lease), so that another worker may run it. Stores that cannot take jobs
    /// back ([`Backend::release`](crate::Backend::release) unsupported) keep it buffered.
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = fairq_worker::QueueConfig::new().prefetch_ttl(Duration::from_secs(5));
    /// assert_eq!(c.get_prefetch_ttl(), Duration::from_secs(5));
    /// ```
    pub fn prefetch_ttl(mut self, ttl: Duration) -> Self {
        self.prefetch_ttl = Some(ttl);
        self
    }

    /// Settles at most `n` finished attempts per store call (default 128).
    ///
    /// The acker sends what has finished at once when no settlement is in flight; otherwise
    /// it gathers attempts while the earlier calls commit, and sends another batch when `n`
    /// have gathered or the oldest has waited the [window](Self::settle_window), up to
    /// [`settles_in_flight`](Self::settles_in_flight) calls at a time.
    ///
    /// ```
    /// assert_eq!(fairq_worker::QueueConfig::new().settle_batch(10).get_settle_batch(), 10);
    /// ```
    pub fn settle_batch(mut self, n: usize) -> Self {
        self.settle_batch = n;
        self
    }

    /// How long a finished attempt may wait for a fuller batch while another settlement is
    /// in flight (default 5 ms). Keep it far below the lease: an attempt that finished but
    /// was not yet settled runs again if the worker dies.
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = fairq_worker::QueueConfig::new().settle_window(Duration::from_millis(1));
    /// assert_eq!(c.get_settle_window(), Duration::from_millis(1));
    /// ```
    pub fn settle_window(mut self, window: Duration) -> Self {
        self.settle_window = window;
        self
    }

    /// How many settlement calls of the queue may be in flight at once (default 4).
    ///
    /// With two, PostgreSQL drains of no-op jobs at concurrency 32 held back claims while
    /// settlements queued: see the worker crate's README.
    ///
    /// ```
    /// assert_eq!(fairq_worker::QueueConfig::new().settles_in_flight(8).get_settles_in_flight(), 8);
    /// ```
    pub fn settles_in_flight(mut self, n: usize) -> Self {
        self.settles_in_flight = n;
        self
    }

    /// Stops claiming while `n` or more finished attempts wait for the store to record them
    /// (default: twice what the queue can hold, `2 × (concurrency + max prefetch)`, and at
    /// least a full set of batches in flight), so a store that settles slowly or not at all
    /// is not handed ever more work.
    ///
    /// ```
    /// let c = fairq_worker::QueueConfig::new().concurrency(4).prefetch(4).settle_batch(4);
    /// assert_eq!(c.get_max_unsettled(), 16);
    /// assert_eq!(c.max_unsettled(3).get_max_unsettled(), 3);
    /// ```
    pub fn max_unsettled(mut self, n: usize) -> Self {
        self.max_unsettled = Some(n);
        self
    }

    /// Stops a handler that runs longer than `timeout`: its future is dropped and the
    /// attempt fails (retryably) with a message naming the timeout (also when dropping the
    /// future panics: that panic is logged). Default: no timeout. A
    /// per-kind timeout ([`WorkerBuilder::kind_timeout`](crate::WorkerBuilder::kind_timeout))
    /// takes precedence.
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = fairq_worker::QueueConfig::new().timeout(Duration::from_secs(60));
    /// assert_eq!(c.get_timeout(), Some(Duration::from_secs(60)));
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Retries the queue's failed jobs in *sweeps*, one every `every` (yoltq's retry poller;
    /// see [`fairq_core::sweep`]): while retried jobs succeed, due retries run as they come;
    /// when a retried job fails again, the queue's other due retries wait for the next sweep,
    /// `every` later, so a downstream service that is down gets one request per sweep rather
    /// than one per waiting job. New jobs keep running unless
    /// [`sweep_holds_new_jobs`](Self::sweep_holds_new_jobs) is set; other queues are not
    /// affected. Default: off (each retry runs when its own backoff ends).
    ///
    /// The worker asks the store to hold the retries ([`Backend::hold_retries`]); on a store
    /// that cannot, it says so once in the log and carries on without holding them.
    /// [`WorkerHandle::health_report`] and the `on_unhealthy` / `on_recovered` hooks show the
    /// sweep's state.
    ///
    /// [`Backend::hold_retries`]: crate::Backend::hold_retries
    /// [`WorkerHandle::health_report`]: crate::WorkerHandle::health_report
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = fairq_worker::QueueConfig::new().retry_sweep(Duration::from_secs(10));
    /// assert_eq!(c.get_retry_sweep(), Some(Duration::from_secs(10)));
    /// assert!(!c.get_sweep_holds_new_jobs());
    /// ```
    pub fn retry_sweep(mut self, every: Duration) -> Self {
        self.retry_sweep = Some(every);
        self
    }

    /// Turns the [retry sweep](Self::retry_sweep) off (the default).
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = fairq_worker::QueueConfig::new().retry_sweep(Duration::from_secs(1)).no_retry_sweep();
    /// assert_eq!(c.get_retry_sweep(), None);
    /// ```
    pub fn no_retry_sweep(mut self) -> Self {
        self.retry_sweep = None;
        self
    }

    /// While a stopped [retry sweep](Self::retry_sweep) waits for the next one, this worker
    /// claims no job of the queue at all, new jobs included (default `false`: new jobs run,
    /// since their first attempt says nothing yet about the downstream service). Has no
    /// effect without a retry sweep.
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = fairq_worker::QueueConfig::new()
    ///     .retry_sweep(Duration::from_secs(10))
    ///     .sweep_holds_new_jobs(true);
    /// assert!(c.get_sweep_holds_new_jobs());
    /// ```
    pub fn sweep_holds_new_jobs(mut self, hold: bool) -> Self {
        self.sweep_holds_new_jobs = hold;
        self
    }

    /// The retry sweep interval, if the sweep is on.
    ///
    /// ```
    /// assert_eq!(fairq_worker::QueueConfig::new().get_retry_sweep(), None);
    /// ```
    pub fn get_retry_sweep(&self) -> Option<Duration> {
        self.retry_sweep
    }

    /// Whether a stopped retry sweep holds new jobs back too.
    ///
    /// ```
    /// assert!(!fairq_worker::QueueConfig::new().get_sweep_holds_new_jobs());
    /// ```
    pub fn get_sweep_holds_new_jobs(&self) -> bool {
        self.sweep_holds_new_jobs
    }

    /// The concurrency.
    ///
    /// ```
    /// assert_eq!(fairq_worker::QueueConfig::new().get_concurrency(), 10);
    /// ```
    pub fn get_concurrency(&self) -> usize {
        self.concurrency
    }

    /// The lease length.
    ///
    /// ```
    /// assert_eq!(fairq_worker::QueueConfig::new().get_lease().as_secs(), 30);
    /// ```
    pub fn get_lease(&self) -> Duration {
        self.lease
    }

    /// The poll interval.
    ///
    /// ```
    /// assert_eq!(fairq_worker::QueueConfig::new().get_poll_interval().as_secs(), 1);
    /// ```
    pub fn get_poll_interval(&self) -> Duration {
        self.poll_interval
    }

    /// The heartbeat interval in force.
    ///
    /// ```
    /// assert_eq!(fairq_worker::QueueConfig::new().get_heartbeat_interval().as_secs(), 10);
    /// ```
    pub fn get_heartbeat_interval(&self) -> Duration {
        self.heartbeat_interval.unwrap_or(self.lease / 3)
    }

    /// The rescue interval in force.
    ///
    /// ```
    /// assert_eq!(fairq_worker::QueueConfig::new().get_rescue_interval().as_secs(), 15);
    /// ```
    pub fn get_rescue_interval(&self) -> Duration {
        self.rescue_interval.unwrap_or(self.lease / 2)
    }

    /// The prefetch depth in force.
    ///
    /// ```
    /// assert_eq!(fairq_worker::QueueConfig::new().get_prefetch(), 10);
    /// ```
    pub fn get_prefetch(&self) -> usize {
        self.prefetch.unwrap_or(self.concurrency)
    }

    /// The deepest the prefetch buffer may grow: the configured depth, or by default 32
    /// times the concurrency, at most 1,024 (and never less than the concurrency).
    ///
    /// ```
    /// use fairq_worker::QueueConfig;
    /// assert_eq!(QueueConfig::new().concurrency(8).get_max_prefetch(), 256);
    /// assert_eq!(QueueConfig::new().concurrency(200).get_max_prefetch(), 1_024);
    /// assert_eq!(QueueConfig::new().concurrency(8).prefetch(3).get_max_prefetch(), 3);
    /// ```
    pub fn get_max_prefetch(&self) -> usize {
        self.prefetch.unwrap_or_else(|| {
            self.concurrency
                .saturating_mul(32)
                .min(1_024)
                .max(self.concurrency)
        })
    }

    /// The longest a job waits in the prefetch buffer.
    ///
    /// ```
    /// assert_eq!(fairq_worker::QueueConfig::new().get_prefetch_ttl().as_secs(), 30);
    /// ```
    pub fn get_prefetch_ttl(&self) -> Duration {
        self.prefetch_ttl.unwrap_or(self.lease)
    }

    /// The largest settlement batch.
    ///
    /// ```
    /// assert_eq!(fairq_worker::QueueConfig::new().get_settle_batch(), 128);
    /// ```
    pub fn get_settle_batch(&self) -> usize {
        self.settle_batch
    }

    /// The settlement window.
    ///
    /// ```
    /// assert_eq!(fairq_worker::QueueConfig::new().get_settle_window().as_millis(), 5);
    /// ```
    pub fn get_settle_window(&self) -> Duration {
        self.settle_window
    }

    /// The settlement calls allowed in flight.
    ///
    /// ```
    /// assert_eq!(fairq_worker::QueueConfig::new().get_settles_in_flight(), 4);
    /// ```
    pub fn get_settles_in_flight(&self) -> usize {
        self.settles_in_flight
    }

    /// The unsettled backlog at which claiming pauses.
    ///
    /// ```
    /// assert_eq!(fairq_worker::QueueConfig::new().get_max_unsettled(), 660);
    /// ```
    pub fn get_max_unsettled(&self) -> usize {
        self.max_unsettled.unwrap_or_else(|| {
            let held = self.concurrency.saturating_add(self.get_max_prefetch());
            held.saturating_mul(2)
                .max(self.settle_batch.saturating_mul(self.settles_in_flight))
        })
    }

    /// The handler timeout of the queue, if any.
    ///
    /// ```
    /// assert_eq!(fairq_worker::QueueConfig::new().get_timeout(), None);
    /// ```
    pub fn get_timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// True when a prefetch depth was set (rather than the default).
    pub(crate) fn prefetch_is_set(&self) -> bool {
        self.prefetch.is_some()
    }

    /// Why the settings cannot work, if they cannot.
    pub(crate) fn problem(&self) -> Option<&'static str> {
        if self.concurrency == 0 {
            Some("concurrency must be at least 1")
        } else if self.concurrency > MAX_CONCURRENCY {
            Some("concurrency must be at most 1,000,000")
        } else if self.lease < Duration::from_millis(1) {
            Some("the lease must be at least 1 ms")
        } else if self.poll_interval.is_zero() {
            Some("the poll interval must not be zero")
        } else if self.get_heartbeat_interval().is_zero() {
            Some("the heartbeat interval must not be zero")
        } else if self.get_heartbeat_interval() >= self.lease {
            Some(
                "the heartbeat interval must be shorter than the lease (or the lease expires \
                 between beats)",
            )
        } else if self.get_rescue_interval().is_zero() {
            Some("the rescue interval must not be zero")
        } else if self.get_prefetch() > MAX_CONCURRENCY {
            Some("prefetch must be at most 1,000,000")
        } else if self.get_prefetch_ttl().is_zero() {
            Some("the prefetch time-to-live must not be zero")
        } else if self.settle_batch == 0 {
            Some("the settlement batch must hold at least 1 attempt")
        } else if self.settles_in_flight == 0 {
            Some("at least 1 settlement must be allowed in flight")
        } else if self.get_max_unsettled() == 0 {
            Some("the unsettled backlog must allow at least 1 attempt")
        } else if self.timeout.is_some_and(|t| t.is_zero()) {
            Some("the handler timeout must not be zero")
        } else if self.retry_sweep.is_some_and(|every| every.is_zero()) {
            Some("the retry sweep interval must not be zero")
        } else {
            None
        }
    }
}

/// Doubling delays between retries of a failing store call, reset by a success.
#[derive(Debug, Clone)]
pub(crate) struct ErrorBackoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl ErrorBackoff {
    pub(crate) fn new(min: Duration, max: Duration) -> Self {
        ErrorBackoff {
            min,
            max: max.max(min),
            next: min,
        }
    }

    /// The delay to wait now; the following one doubles, up to the maximum (saturating: a
    /// maximum of `Duration::MAX` is allowed).
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        delay
    }

    /// Back to the shortest delay after a success.
    pub(crate) fn reset(&mut self) {
        self.next = self.min;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_and_resets() {
        let mut b = ErrorBackoff::new(Duration::from_millis(100), Duration::from_millis(500));
        let seen: Vec<u128> = (0..5).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(seen, [100, 200, 400, 500, 500]);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_millis(100));
    }

    #[test]
    fn backoff_without_a_cap_saturates_instead_of_overflowing() {
        let mut b = ErrorBackoff::new(Duration::from_secs(u64::MAX / 2 + 1), Duration::MAX);
        assert_eq!(b.next_delay(), Duration::from_secs(u64::MAX / 2 + 1));
        assert_eq!(b.next_delay(), Duration::MAX);
        assert_eq!(b.next_delay(), Duration::MAX);
        let mut b = ErrorBackoff::new(Duration::MAX, Duration::MAX);
        assert_eq!(b.next_delay(), Duration::MAX);
        assert_eq!(b.next_delay(), Duration::MAX);
    }

    #[test]
    fn bad_settings_are_named() {
        assert!(QueueConfig::new().problem().is_none());
        assert!(QueueConfig::new().concurrency(0).problem().is_some());
        assert!(QueueConfig::new().lease(Duration::ZERO).problem().is_some());
        assert!(
            QueueConfig::new()
                .poll_interval(Duration::ZERO)
                .problem()
                .is_some()
        );
        assert!(
            QueueConfig::new()
                .heartbeat_interval(Duration::ZERO)
                .problem()
                .is_some()
        );
        for bad in [
            QueueConfig::new().heartbeat_interval(QueueConfig::new().get_lease()),
            QueueConfig::new()
                .lease(Duration::from_secs(5))
                .heartbeat_interval(Duration::from_secs(60)),
            QueueConfig::new().prefetch(MAX_CONCURRENCY + 1),
            QueueConfig::new().prefetch_ttl(Duration::ZERO),
            QueueConfig::new().settle_batch(0),
            QueueConfig::new().settles_in_flight(0),
            QueueConfig::new().max_unsettled(0),
            QueueConfig::new().timeout(Duration::ZERO),
            QueueConfig::new().retry_sweep(Duration::ZERO),
        ] {
            assert!(bad.problem().is_some(), "{bad:?}");
        }
        assert!(QueueConfig::new().prefetch(0).problem().is_none());
        assert!(
            QueueConfig::new()
                .settle_window(Duration::ZERO)
                .problem()
                .is_none()
        );
    }

    #[test]
    fn prefetch_defaults_to_the_concurrency() {
        let c = QueueConfig::new().concurrency(8);
        assert_eq!((c.get_prefetch(), c.prefetch_is_set()), (8, false));
        let c = c.prefetch(3);
        assert_eq!((c.get_prefetch(), c.prefetch_is_set()), (3, true));
    }
}
