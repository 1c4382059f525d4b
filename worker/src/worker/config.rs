//! Per-queue settings of a [`Worker`](crate::Worker) and the backoff after store errors.

use std::time::Duration;

/// The largest concurrency a queue may have.
const MAX_CONCURRENCY: usize = 1_000_000;

/// How a worker serves one queue.
///
/// ```
/// use std::time::Duration;
/// use fairq_worker::QueueConfig;
///
/// let config = QueueConfig::default()
///     .concurrency(4)
///     .lease(Duration::from_secs(60))
///     .poll_interval(Duration::from_millis(500));
/// assert_eq!(config.get_concurrency(), 4);
/// assert_eq!(config.get_heartbeat_interval(), Duration::from_secs(20));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    concurrency: usize,
    lease: Duration,
    poll_interval: Duration,
    heartbeat_interval: Option<Duration>,
    rescue_interval: Option<Duration>,
}

impl Default for QueueConfig {
    /// 10 jobs at a time, 30 s leases, a 1 s poll interval for stores that cannot push
    /// wake-ups, heartbeats every third of the lease, rescue sweeps every half lease.
    fn default() -> Self {
        QueueConfig {
            concurrency: 10,
            lease: Duration::from_secs(30),
            poll_interval: Duration::from_secs(1),
            heartbeat_interval: None,
            rescue_interval: None,
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
    /// is rescued once it expires.
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

    /// Renews a running job's lease this often (default: a third of the lease).
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = fairq_worker::QueueConfig::new().heartbeat_interval(Duration::from_secs(1));
    /// assert_eq!(c.get_heartbeat_interval(), Duration::from_secs(1));
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
        } else if self.get_rescue_interval().is_zero() {
            Some("the rescue interval must not be zero")
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

    /// The delay to wait now; the following one doubles, up to the maximum.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
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
    }
}
