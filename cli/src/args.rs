//! The command line, as `clap` parses it.

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use fairq_worker::{JobStatus, Retention};

pub use crate::values::{parse_delay, parse_duration, parse_limit, parse_size, MAX_DELAY};
use crate::values::{parse_meta, parse_time_limit};

/// fairq: fair-by-key job queues on a file, PostgreSQL or Redis store.
///
/// ```
/// use clap::Parser;
/// let cli = fairq_cli::Cli::try_parse_from(["fairq", "--json", "stats"]).unwrap();
/// assert!(cli.json);
/// assert!(matches!(cli.command, fairq_cli::Command::Stats(_)));
/// ```
#[derive(Debug, Parser)]
#[command(name = "fairq", version, about, long_about = None)]
pub struct Cli {
    /// Job store: file:PATH, postgres://..., redis://... (a Redis Cluster:
    /// redis+cluster://host1:port1,host2:port2/, or any node's redis:// URL) or memory:
    /// [default: file:./fairq-data; `demo` uses a fresh temporary folder]
    // The value stays out of `--help`: a store URL may hold a password.
    #[arg(
        long,
        global = true,
        env = "FAIRQ_STORE",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub store: Option<String>,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// Hide progress bars.
    #[arg(long, global = true)]
    pub quiet: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show fair-by-key scheduling against a plain FIFO on the same jobs.
    Demo(DemoArgs),
    /// Burn-down load test: enqueue N jobs, run them, report rates and latencies.
    Bench(BenchArgs),
    /// Add a job.
    Enqueue(EnqueueArgs),
    /// Run jobs of one or more queues with a command (payload on stdin).
    Work(WorkArgs),
    /// Jobs per queue and state, retry counts, processing times.
    Stats(StatsArgs),
    /// List jobs.
    List(ListArgs),
    /// Revive dead jobs: one by id, or all of them (also `fairq retry`).
    #[command(visible_alias = "retry")]
    Revive(ReviveArgs),
    /// Delete jobs that are not running.
    Purge(PurgeArgs),
    /// Delete finished jobs older than an age.
    Prune(PruneArgs),
    /// Manage queues: `fairq queue remove NAME` deletes a queue that has no live jobs.
    Queue(QueueArgs),
    /// Clean a PostgreSQL store's job tables (`VACUUM (ANALYZE)`), for servers that do not
    /// run autovacuum.
    Vacuum,
    /// Rebuild a file store that refuses to open because of damage into a new folder, from
    /// every record that is intact, and print what was lost (the damaged folder is not
    /// changed).
    Salvage(SalvageArgs),
    /// Web dashboard and HTTP API: queues, tenants (fairness per key), jobs, actions.
    Serve(crate::serve::ServeArgs),
    /// Load tests of the journaled queue and the in-memory wait-queues (each test: --help).
    Qtest(crate::qtest::QtestArgs),
}

/// `fairq demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Jobs in the heavy tenant's backlog (20 to 10,000,000).
    #[arg(long, default_value_t = 6_000)]
    pub heavy_jobs: usize,
    /// Light tenants (at most 10,000).
    #[arg(long, default_value_t = 4)]
    pub light_tenants: usize,
    /// Jobs per light tenant, arriving one at a time while the backlog drains.
    #[arg(long, default_value_t = 10)]
    pub light_jobs: usize,
    /// Simulated work per job.
    #[arg(long, default_value = "4ms", value_parser = parse_duration)]
    pub work: Duration,
    /// Worker instances (each a `fairq_worker::Worker` on the same store; at most 1,000).
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Jobs each worker runs at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
}

/// `fairq bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Jobs to enqueue and run (at most 100,000,000).
    #[arg(long, short = 'n', default_value_t = 10_000)]
    pub jobs: usize,
    /// Jobs run at once.
    #[arg(long, short = 'c', default_value_t = 16)]
    pub concurrency: usize,
    /// Jobs claimed ahead of free slots (default: adapts between the concurrency and 32
    /// times it, at most 1,024; see `QueueConfig::prefetch`).
    #[arg(long)]
    pub prefetch: Option<usize>,
    /// Payload bytes per job.
    #[arg(long, default_value_t = 128)]
    pub payload_size: usize,
    /// Fairness keys the jobs are spread over (round robin).
    #[arg(long, default_value_t = 16)]
    pub keys: usize,
    /// Simulated work per job.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub work: Duration,
    /// Jobs per enqueue batch (at most 1,000,000; fewer when their payloads would pass
    /// 16 MiB).
    #[arg(long, default_value_t = 500)]
    pub batch: usize,
    /// Queue name [default: a fresh `bench-...` name, purged afterwards].
    #[arg(long)]
    pub queue: Option<String>,
    /// Keep the finished jobs instead of purging the queue.
    #[arg(long)]
    pub keep: bool,
}

/// `fairq enqueue`.
#[derive(Debug, Clone, Args)]
pub struct EnqueueArgs {
    /// Queue (the workers that take it).
    #[arg(long, short, default_value = "default")]
    pub queue: String,
    /// Job kind (the handler that runs it).
    #[arg(long, short)]
    pub kind: String,
    /// Fairness key (tenant); jobs without one share a single key.
    #[arg(long)]
    pub key: Option<String>,
    /// JSON payload; `-` reads it from stdin, `@PATH` from a file.
    // Not a `String`: a file's name may be any bytes (the JSON itself must be UTF-8).
    #[arg(long, short, default_value = "null", allow_hyphen_values = true, value_parser = clap::value_parser!(std::ffi::OsString))]
    pub payload: std::ffi::OsString,
    /// The largest payload accepted, in bytes (suffixes KiB, MiB, GiB, KB, MB, GB); reading
    /// stops there, so a larger one is refused without being read whole.
    #[arg(long, default_value = "16MiB", env = "FAIRQ_MAX_PAYLOAD", value_parser = parse_size)]
    pub max_payload: u64,
    /// Run no earlier than this long from now (for example 30s, 5m, 1h30m; at most 100
    /// years).
    #[arg(long, value_parser = parse_delay)]
    pub delay: Option<Duration>,
    /// Retries after the first failure before the job is dead [default: the store's policy,
    /// 24 retries with growing delays].
    #[arg(long)]
    pub retries: Option<u32>,
    /// Delays between retries, the last one repeating (for example 1s,10s,1m; each at most
    /// 100 years).
    #[arg(long, value_delimiter = ',', value_parser = parse_delay)]
    pub backoff: Vec<Duration>,
    /// A key unique among the queue's unfinished jobs.
    #[arg(long)]
    pub unique: Option<String>,
    /// With --unique, return the existing job instead of failing.
    #[arg(long, requires = "unique")]
    pub if_absent: bool,
    /// Run only after this job has succeeded.
    #[arg(long, value_name = "ID")]
    pub after: Option<u64>,
    /// Metadata handed to the handler, NAME=VALUE (repeatable).
    #[arg(long = "meta", value_name = "NAME=VALUE", value_parser = parse_meta)]
    pub meta: Vec<(String, String)>,
}

/// `fairq work`.
#[derive(Debug, Clone, Args)]
pub struct WorkArgs {
    /// Queue to serve (repeatable).
    #[arg(long, short, required = true)]
    pub queue: Vec<String>,
    /// Jobs run at once per queue.
    #[arg(long, short, default_value_t = 4)]
    pub concurrency: usize,
    /// Jobs claimed ahead of free slots, per queue (default: adapts between the concurrency
    /// and 32 times it, at most 1,024; see `QueueConfig::prefetch`).
    #[arg(long)]
    pub prefetch: Option<usize>,
    /// Lease per claim; renewed while the command runs.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub lease: Duration,
    /// Look for due jobs at least this often when the store sends no wake-up.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub poll: Duration,
    /// Kill a command that runs longer than this (a failed attempt); more than zero.
    #[arg(long, value_parser = parse_time_limit)]
    pub job_timeout: Option<Duration>,
    /// After SIGTERM or Ctrl-C, how long running jobs may take to finish.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,
    /// Exit once nothing of the served queues is running or due (jobs scheduled for later
    /// and jobs waiting for a dependency stay for another run).
    #[arg(long)]
    pub until_idle: bool,
    /// Delete finished jobs (succeeded or dead, in every queue of the store) once they
    /// finished longer ago than this, checking every quarter of the shorter age (at most
    /// every minute); by default they stay until `fairq prune`.
    #[arg(long, value_name = "AGE", value_parser = parse_duration)]
    pub prune_after: Option<Duration>,
    /// Keep dead jobs for this long instead (alone: prune only dead jobs).
    #[arg(long, value_name = "AGE", value_parser = parse_duration, conflicts_with = "keep_dead")]
    pub prune_dead_after: Option<Duration>,
    /// With --prune-after: never delete dead jobs.
    #[arg(long, requires = "prune_after")]
    pub keep_dead: bool,
    /// Also serve the web dashboard on this address (see `fairq serve`).
    #[arg(long, value_name = "ADDR")]
    pub serve: Option<std::net::SocketAddr>,
    /// Dashboard settings, with --serve.
    #[command(flatten)]
    pub dashboard: crate::serve::DashboardArgs,
    /// Serve metrics for Prometheus on this address (for example 127.0.0.1:9464; scrape
    /// http://ADDR/metrics).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// The command run per job, with its arguments; must come last. The payload is on its
    /// stdin, and FAIRQ_JOB_ID, FAIRQ_QUEUE, FAIRQ_KIND, FAIRQ_KEY, FAIRQ_ATTEMPT and
    /// FAIRQ_PAYLOAD_BYTES are set.
    /// Exit code 0 is success; anything else is a failed attempt.
    #[arg(
        long,
        required = true,
        num_args = 1..,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub exec: Vec<String>,
}

/// `fairq salvage`.
#[derive(Debug, Clone, Args)]
pub struct SalvageArgs {
    /// The new folder to rebuild the store in (must not exist, or be empty).
    #[arg(long, value_name = "PATH")]
    pub to: std::path::PathBuf,
}

/// `fairq stats`.
#[derive(Debug, Clone, Args)]
pub struct StatsArgs {
    /// Only this queue.
    #[arg(long, short)]
    pub queue: Option<String>,
}

/// `fairq list`.
#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    /// Only jobs in this state.
    #[arg(long, short, value_enum)]
    pub state: Option<State>,
    /// Only this queue.
    #[arg(long, short)]
    pub queue: Option<String>,
    /// At most this many jobs (1 or more).
    #[arg(long, short, default_value_t = 50, value_parser = parse_limit)]
    pub limit: usize,
    /// Only ids greater than this (the next page).
    #[arg(long, value_name = "ID")]
    pub after: Option<u64>,
}

/// `fairq revive` (alias `retry`): the id of a dead job, or `--all`.
#[derive(Debug, Clone, Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["id", "all"])))]
pub struct ReviveArgs {
    /// The dead job to revive.
    #[arg(conflicts_with = "all")]
    pub id: Option<u64>,
    /// Revive every dead job (of --queue, if given).
    #[arg(long)]
    pub all: bool,
    /// With --all, only this queue.
    #[arg(long, short, requires = "all")]
    pub queue: Option<String>,
}

/// `fairq purge`.
#[derive(Debug, Clone, Args)]
pub struct PurgeArgs {
    /// Only this queue.
    #[arg(long, short)]
    pub queue: Option<String>,
    /// Only jobs in this state (running jobs are never purged).
    #[arg(long, short, value_enum)]
    pub state: Option<State>,
    /// Purge every job that is not running, of every queue.
    #[arg(long, conflicts_with_all = ["queue", "state"])]
    pub all: bool,
}

/// `fairq prune`.
#[derive(Debug, Clone, Args)]
#[command(group(clap::ArgGroup::new("age").required(true).multiple(true).args(["older_than", "dead_older_than"])))]
pub struct PruneArgs {
    /// Delete succeeded and dead jobs that finished longer ago than this (for example 7d).
    #[arg(long, value_name = "AGE", value_parser = parse_duration)]
    pub older_than: Option<Duration>,
    /// Delete dead jobs that died longer ago than this instead (alone: only dead jobs).
    #[arg(long, value_name = "AGE", value_parser = parse_duration, conflicts_with = "keep_dead")]
    pub dead_older_than: Option<Duration>,
    /// With --older-than: never delete dead jobs.
    #[arg(long, requires = "older_than")]
    pub keep_dead: bool,
}

impl PruneArgs {
    /// What the prune keeps.
    pub fn retention(&self) -> Retention {
        retention(self.older_than, self.dead_older_than, self.keep_dead)
    }
}

/// The retention of an age for every finished job (`all`), an age for dead jobs (`dead`,
/// which wins) and whether dead jobs are kept for good; an outcome no age names is kept.
///
/// ```
/// use std::time::Duration;
/// use fairq_cli::args::retention;
/// use fairq_worker::Retention;
/// let day = Duration::from_secs(86_400);
/// assert_eq!(retention(Some(day), None, false), Retention::finished(day));
/// assert_eq!(retention(Some(day), Some(7 * day), false), Retention::finished(day).dead_for(7 * day));
/// assert_eq!(retention(Some(day), None, true), Retention::finished(day).keep_dead());
/// assert_eq!(retention(None, Some(day), false), Retention::forever().dead_for(day));
/// ```
pub fn retention(all: Option<Duration>, dead: Option<Duration>, keep_dead: bool) -> Retention {
    let mut keep = Retention {
        succeeded: all,
        dead: all,
    };
    if keep_dead {
        keep = keep.keep_dead();
    }
    if let Some(age) = dead {
        keep = keep.dead_for(age);
    }
    keep
}

/// `fairq queue`.
#[derive(Debug, Clone, Args)]
pub struct QueueArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: QueueAction,
}

/// The `fairq queue` subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum QueueAction {
    /// Remove a queue that has no live jobs (blocked, scheduled, running or retrying): its
    /// finished jobs, counters and statistics go with it.
    Remove {
        /// The queue.
        name: String,
    },
    /// Pause a queue: no worker of any process is handed its jobs until it is resumed
    /// (running jobs finish and are recorded as usual; the pause is kept in the store).
    Pause {
        /// The queue.
        name: String,
    },
    /// Resume a paused queue: its idle workers are woken and claim at once.
    Resume {
        /// The queue.
        name: String,
    },
    /// List the paused queues.
    Paused,
}

/// A job state on the command line.
///
/// ```
/// use fairq_cli::State;
/// assert_eq!(fairq_worker::JobStatus::from(State::Dead), fairq_worker::JobStatus::Dead);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum State {
    /// Waiting for a dependency.
    Blocked,
    /// Waiting for a first run.
    Scheduled,
    /// Held by a worker.
    Running,
    /// Waiting to run again.
    Retrying,
    /// Finished successfully.
    Succeeded,
    /// Given up on.
    Dead,
}

impl From<State> for JobStatus {
    fn from(state: State) -> JobStatus {
        match state {
            State::Blocked => JobStatus::Blocked,
            State::Scheduled => JobStatus::Scheduled,
            State::Running => JobStatus::Running,
            State::Retrying => JobStatus::Retrying,
            State::Succeeded => JobStatus::Succeeded,
            State::Dead => JobStatus::Dead,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn exec_takes_the_rest_of_the_line() {
        let cli = Cli::try_parse_from([
            "fairq",
            "work",
            "-q",
            "a",
            "--exec",
            "sh",
            "-c",
            "cat >> out",
        ])
        .unwrap();
        let Command::Work(work) = cli.command else {
            panic!("not work")
        };
        assert_eq!(work.exec, ["sh", "-c", "cat >> out"]);
        assert_eq!(work.queue, ["a"]);
    }

    #[test]
    fn revive_needs_an_id_or_all_and_is_also_called_retry() {
        let err = Cli::try_parse_from(["fairq", "revive"]).unwrap_err();
        assert!(err.to_string().contains("<ID|--all>"), "{err}");
        assert!(matches!(
            Cli::try_parse_from(["fairq", "retry", "7"])
                .unwrap()
                .command,
            Command::Revive(ReviveArgs { id: Some(7), .. })
        ));
        assert!(Cli::try_parse_from(["fairq", "retry"]).is_err());
        assert!(Cli::try_parse_from(["fairq", "retry", "3", "--all"]).is_err());
        assert!(Cli::try_parse_from(["fairq", "retry", "--all", "-q", "mail"]).is_ok());
        assert!(Cli::try_parse_from(["fairq", "retry", "7"]).is_ok());
    }

    #[test]
    fn bad_states_durations_and_limits_are_refused() {
        assert!(Cli::try_parse_from(["fairq", "list", "-l", "0"]).is_err());
        assert!(Cli::try_parse_from(["fairq", "list", "-l", "1"]).is_ok());
        assert!(Cli::try_parse_from(["fairq", "list", "--state", "zombie"]).is_err());
        assert!(Cli::try_parse_from(["fairq", "prune", "--older-than", "7x"]).is_err());
        let cli = Cli::try_parse_from(["fairq", "prune", "--older-than", "7d"]).unwrap();
        let Command::Prune(prune) = cli.command else {
            panic!("not prune")
        };
        assert_eq!(prune.older_than, Some(Duration::from_secs(7 * 86_400)));
        assert_eq!(
            prune.retention(),
            Retention::finished(Duration::from_secs(7 * 86_400))
        );
    }

    #[test]
    fn prune_ages_per_outcome_combine_or_are_refused() {
        let retention = |args: &[&str]| {
            let cli =
                Cli::try_parse_from([&["fairq", "prune"], args].concat()).map_err(|e| e.kind())?;
            let Command::Prune(prune) = cli.command else {
                panic!("not prune")
            };
            Ok::<_, clap::error::ErrorKind>(prune.retention())
        };
        let (hour, day) = (Duration::from_secs(3_600), Duration::from_secs(86_400));
        assert_eq!(
            retention(&["--older-than", "1h", "--dead-older-than", "1d"]),
            Ok(Retention::finished(hour).dead_for(day))
        );
        assert_eq!(
            retention(&["--older-than", "1h", "--keep-dead"]),
            Ok(Retention::finished(hour).keep_dead())
        );
        assert_eq!(
            retention(&["--dead-older-than", "1d"]),
            Ok(Retention::forever().dead_for(day))
        );
        // Nothing to prune by, a keep without an age, or two words for dead jobs.
        assert!(retention(&[]).is_err());
        assert!(retention(&["--keep-dead"]).is_err());
        assert!(retention(&[
            "--older-than",
            "1h",
            "--keep-dead",
            "--dead-older-than",
            "1d"
        ])
        .is_err());
        let work = |args: &[&str]| {
            Cli::try_parse_from([&["fairq", "work", "-q", "q"], args, &["--exec", "true"]].concat())
        };
        assert!(work(&["--keep-dead"]).is_err());
        assert!(work(&["--prune-after", "1h", "--keep-dead"]).is_ok());
        assert!(work(&["--prune-dead-after", "1d"]).is_ok());
        assert!(work(&[
            "--prune-after",
            "1h",
            "--keep-dead",
            "--prune-dead-after",
            "1d"
        ])
        .is_err());
    }

    #[test]
    fn a_job_timeout_of_zero_is_refused() {
        let work = |timeout: &str| {
            Cli::try_parse_from([
                "fairq",
                "work",
                "-q",
                "q",
                "--job-timeout",
                timeout,
                "--exec",
                "true",
            ])
        };
        for zero in ["0s", "0ms", " 0 s "] {
            let err = work(zero).unwrap_err();
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::ValueValidation,
                "{zero}"
            );
            assert!(err.to_string().contains("longer than zero"), "{err}");
        }
        let Command::Work(args) = work("1ms").unwrap().command else {
            panic!("not work")
        };
        assert_eq!(args.job_timeout, Some(Duration::from_millis(1)));
    }

    #[test]
    fn backoff_lists_split_on_commas() {
        let cli =
            Cli::try_parse_from(["fairq", "enqueue", "-k", "x", "--backoff", "1s,1m"]).unwrap();
        let Command::Enqueue(e) = cli.command else {
            panic!("not enqueue")
        };
        assert_eq!(e.backoff, [Duration::from_secs(1), Duration::from_secs(60)]);
    }
}
