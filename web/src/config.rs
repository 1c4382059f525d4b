//! How the dashboard server is set up.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use fairq_worker::{Clock, SystemClock};

/// The shortest [refresh](Config::refresh) interval: 100 ms.
///
/// ```
/// assert_eq!(fairq_web::MIN_REFRESH.as_millis(), 100);
/// ```
pub const MIN_REFRESH: Duration = Duration::from_millis(100);

/// The longest [refresh](Config::refresh) interval: a day. The sampler's timer and the
/// history it keeps (the longest chart window plus one interval) stay within range.
///
/// ```
/// assert_eq!(fairq_web::MAX_REFRESH.as_secs(), 86_400);
/// ```
pub const MAX_REFRESH: Duration = Duration::from_secs(86_400);

/// The port `fairq serve` listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 7171;

/// Settings of a dashboard [`Server`](crate::Server).
///
/// ```
/// use std::time::Duration;
/// use fairq_web::Config;
/// let config = Config::new("postgres://app:secret@db/jobs")
///     .listen("127.0.0.1:0".parse().unwrap())
///     .token("a-long-random-token")
///     .refresh(Duration::from_secs(5));
/// assert_eq!(config.store_label(), "postgres://db/jobs");
/// assert!(config.listen_addr().ip().is_loopback());
/// ```
#[derive(Clone)]
pub struct Config {
    pub(crate) store_url: String,
    pub(crate) listen: SocketAddr,
    pub(crate) token: Option<String>,
    pub(crate) refresh: Duration,
    pub(crate) scan_budget: usize,
    pub(crate) background: bool,
    pub(crate) clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("store", &self.store_label())
            .field("listen", &self.listen)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("refresh", &self.refresh)
            .field("scan_budget", &self.scan_budget)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// Defaults for the store at `store_url` (only ever shown without its credentials):
    /// `127.0.0.1:7171`, no token (one is generated for actions), a sample every 2 s, and
    /// per-key queries that read at most 50,000 jobs.
    ///
    /// ```
    /// let config = fairq_web::Config::new("file:./fairq-data");
    /// assert_eq!(config.listen_addr().port(), fairq_web::DEFAULT_PORT);
    /// ```
    pub fn new(store_url: impl Into<String>) -> Self {
        Config {
            store_url: store_url.into(),
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, DEFAULT_PORT)),
            token: None,
            refresh: Duration::from_secs(2),
            scan_budget: 50_000,
            background: true,
            clock: Arc::new(SystemClock),
        }
    }

    /// The address to listen on. Anything but loopback requires a [token](Config::token).
    ///
    /// ```
    /// let config = fairq_web::Config::new("memory:").listen("[::1]:9000".parse().unwrap());
    /// assert_eq!(config.listen_addr().port(), 9000);
    /// ```
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// The bearer token. With one set, every request needs it (as `Authorization: Bearer`
    /// or through a signed-in browser session); without one, a loopback server lets anyone
    /// on this machine read and generates a token for actions.
    ///
    /// ```
    /// let config = fairq_web::Config::new("memory:").token("s3cret-token-value");
    /// assert!(format!("{config:?}").contains("***"));
    /// ```
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// How often the store is sampled for counts and throughput, and how long per-key
    /// answers are reused: at least [`MIN_REFRESH`], at most [`MAX_REFRESH`] (longer
    /// intervals, up to `Duration::MAX`, are taken as the longest).
    ///
    /// ```
    /// let config = fairq_web::Config::new("memory:").refresh(std::time::Duration::from_secs(1));
    /// # let _ = config;
    /// ```
    pub fn refresh(mut self, every: std::time::Duration) -> Self {
        self.refresh = every.clamp(MIN_REFRESH, MAX_REFRESH);
        self
    }

    /// At most this many jobs are read per per-key query on stores that answer through
    /// `list` (answers say when they stopped early).
    ///
    /// ```
    /// let config = fairq_web::Config::new("memory:").scan_budget(1_000);
    /// # let _ = config;
    /// ```
    pub fn scan_budget(mut self, jobs: usize) -> Self {
        self.scan_budget = jobs.max(1);
        self
    }

    /// The clock the dashboard reads (a [`ManualClock`](fairq_worker::ManualClock) in tests;
    /// use the store's own).
    ///
    /// ```
    /// let config = fairq_web::Config::new("memory:").clock(fairq_worker::ManualClock::new(0));
    /// # let _ = config;
    /// ```
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Whether the server samples the store on its own every [refresh](Config::refresh)
    /// (default true). Tests turn it off and call [`Handle::sample`](crate::Handle::sample).
    ///
    /// ```
    /// let config = fairq_web::Config::new("memory:").background_sampling(false);
    /// # let _ = config;
    /// ```
    pub fn background_sampling(mut self, on: bool) -> Self {
        self.background = on;
        self
    }

    /// The address to listen on.
    ///
    /// ```
    /// assert!(fairq_web::Config::new("memory:").listen_addr().ip().is_loopback());
    /// ```
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen
    }

    /// The store URL without credentials, as pages show it.
    ///
    /// ```
    /// assert_eq!(fairq_web::Config::new("redis://:pw@h:6379/").store_label(), "redis://h:6379/");
    /// ```
    pub fn store_label(&self) -> String {
        crate::store_label(&self.store_url)
    }
}
