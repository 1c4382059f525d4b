//! `fairq work` processes in network namespaces, running `fairq-scale-record` per job.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use crate::{wait_for, Guarded, HarnessError, Host};

/// The programs the harness runs (see the [`binaries!`](crate::binaries) macro).
#[derive(Debug, Clone)]
pub struct Binaries {
    /// The `fairq` command line.
    pub fairq: PathBuf,
    /// The `fairq-scale-record` job command.
    pub record: PathBuf,
}

/// How a worker process runs.
///
/// ```
/// let config = fairq_scale_tests::WorkerConfig::new("q");
/// assert_eq!((config.concurrency, config.work_ms), (4, 0));
/// ```
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The queue served.
    pub queue: String,
    /// `--concurrency`.
    pub concurrency: usize,
    /// `--prefetch` (`None`: the worker's adaptive default).
    pub prefetch: Option<usize>,
    /// `--lease`.
    pub lease: Duration,
    /// `--poll`.
    pub poll: Duration,
    /// Milliseconds each job's command works (sleeps) before it finishes.
    pub work_ms: u64,
    /// Jobs whose key starts with `hold` wait until a file named like their key exists in
    /// this folder.
    pub hold_dir: Option<PathBuf>,
}

impl WorkerConfig {
    /// Serves `queue` 4 at a time, 10-second leases, polling every 250 ms, no work.
    pub fn new(queue: impl Into<String>) -> WorkerConfig {
        WorkerConfig {
            queue: queue.into(),
            concurrency: 4,
            prefetch: None,
            lease: Duration::from_secs(10),
            poll: Duration::from_millis(250),
            work_ms: 0,
            hold_dir: None,
        }
    }
}

/// One finished attempt as a worker reported it on stdout (`fairq --json work`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The job.
    pub job: u64,
    /// The attempt.
    pub attempt: u32,
    /// `succeeded`, `retrying`, `dead` or `unrecorded`.
    pub outcome: String,
}

/// A `fairq work` process in a namespace. Its stdout, stderr and job log are files in the
/// folder given at spawn. Dropping it stops the process (SIGTERM, then SIGKILL).
#[derive(Debug)]
pub struct WorkerProcess {
    name: String,
    process: Guarded,
    log: PathBuf,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl WorkerProcess {
    /// Starts `fairq --store STORE --json work ... --exec fairq-scale-record` in `host`'s
    /// namespace, writing its files as `NAME.log`, `NAME.out` and `NAME.err` in `dir`.
    pub fn spawn(
        bins: &Binaries,
        host: &Host,
        store: &str,
        config: &WorkerConfig,
        dir: &Path,
        name: &str,
    ) -> Result<WorkerProcess, HarnessError> {
        let log = dir.join(format!("{name}.log"));
        let stdout = dir.join(format!("{name}.out"));
        let stderr = dir.join(format!("{name}.err"));
        let file = |path: &Path| {
            std::fs::File::create(path)
                .map_err(|e| HarnessError::io(format!("creating {}", path.display()), e))
        };
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &host.netns])
            .arg(&bins.fairq)
            .args([
                "--store",
                store,
                "--json",
                "--quiet",
                "work",
                "-q",
                &config.queue,
            ])
            .args(["--concurrency", &config.concurrency.to_string()])
            .args(
                config
                    .prefetch
                    .map(|depth| ["--prefetch".to_string(), depth.to_string()])
                    .into_iter()
                    .flatten(),
            )
            .args(["--lease", &format!("{}ms", config.lease.as_millis())])
            .args(["--poll", &format!("{}ms", config.poll.as_millis())])
            .args(["--shutdown-timeout", "20s", "--exec"])
            .arg(&bins.record)
            .env_remove("FAIRQ_STORE")
            .env("FAIRQ_SCALE_LOG", &log)
            .env("FAIRQ_SCALE_WORK_MS", config.work_ms.to_string())
            .stdin(Stdio::null())
            .stdout(file(&stdout)?)
            .stderr(file(&stderr)?);
        if let Some(hold) = &config.hold_dir {
            command.env("FAIRQ_SCALE_HOLD_DIR", hold);
        }
        // `ip netns exec` execs the program in place, so the process is fairq itself.
        let process = Guarded::spawn(name, command)?;
        Ok(WorkerProcess {
            name: name.to_string(),
            process,
            log,
            stdout,
            stderr,
        })
    }

    /// Waits until the worker says it is serving (it has connected and started).
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<(), HarnessError> {
        let what = format!("{} to start serving", self.name);
        let stderr = self.stderr.clone();
        let process = &mut self.process;
        wait_for(&what, timeout, || {
            let text = std::fs::read_to_string(&stderr).unwrap_or_default();
            if text.contains("fairq: serving") {
                return Some(Ok(()));
            }
            process.exited().map(|status| {
                Err(HarnessError::Other(format!(
                    "worker exited ({status}) before serving: {text}"
                )))
            })
        })?
    }

    /// The worker's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The process id of `fairq`.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The job log its commands write.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// What it printed on stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// `kill -9`.
    pub fn kill9(&mut self) -> Result<ExitStatus, HarnessError> {
        self.process.kill9()
    }

    /// SIGTERM (graceful: running jobs finish, nothing new starts), waiting up to `grace`.
    pub fn stop(&mut self, grace: Duration) -> Result<ExitStatus, HarnessError> {
        self.process.stop(grace)
    }

    /// The exit status, if it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.process.exited()
    }

    /// Every finished attempt it reported on stdout.
    pub fn outcomes(&self) -> Result<Vec<Outcome>, HarnessError> {
        let text = std::fs::read_to_string(&self.stdout)
            .map_err(|e| HarnessError::io(format!("reading {}", self.stdout.display()), e))?;
        Ok(text.lines().filter_map(parse_outcome).collect())
    }
}

/// One `--json` line of a finished attempt; `None` for other lines (the closing summary, or
/// a torn line of a killed process).
fn parse_outcome(line: &str) -> Option<Outcome> {
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    Some(Outcome {
        job: value.get("id")?.as_u64()?,
        attempt: u32::try_from(value.get("attempt")?.as_u64()?).ok()?,
        outcome: value.get("outcome")?.as_str()?.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_lines_are_read_and_others_skipped() {
        let line = r#"{"id":7,"queue":"q","kind":"k","key":null,"attempt":2,"outcome":"succeeded","retry_at":null,"elapsed_ms":1.5,"error":null}"#;
        assert_eq!(
            parse_outcome(line),
            Some(Outcome {
                job: 7,
                attempt: 2,
                outcome: "succeeded".into()
            })
        );
        assert_eq!(parse_outcome(r#"{"event":"stopped","succeeded":3}"#), None);
        assert_eq!(parse_outcome(r#"{"id":7,"attem"#), None);
    }
}
