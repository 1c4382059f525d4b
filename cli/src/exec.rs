//! Running an external command as a job handler: the payload on stdin, the job's identity
//! in the environment, the exit code as the verdict.

use std::process::Stdio;
use std::time::Duration;

use fairq_worker::{Failure, Job};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// How much of a failed command's stderr is kept as the job's error message.
pub(crate) const STDERR_TAIL: usize = 2_048;

/// A command run once per job.
///
/// The job's payload is written to the command's stdin; its stdout goes to this program's
/// stderr (so `--json` output on stdout stays clean); its stderr is captured. The
/// environment carries `FAIRQ_JOB_ID`, `FAIRQ_QUEUE`, `FAIRQ_KIND`, `FAIRQ_KEY` (empty when
/// the job has none) and `FAIRQ_ATTEMPT`. Exit code 0 is success; any other exit, a kill by
/// a signal, or running past the timeout is a failed attempt whose message ends with the
/// tail of stderr.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use fairq_cli::ExecCommand;
/// use fairq_worker::Job;
/// let cmd = ExecCommand::new(["sh", "-c", "read x; test \"$x\" = 42 || { echo \"got $x\" >&2; exit 3; }"])
///     .unwrap();
/// assert!(cmd.run(&Job::example(b"42\n".to_vec()), "example").await.is_ok());
/// let failure = cmd.run(&Job::example(b"7\n".to_vec()), "example").await.unwrap_err();
/// assert_eq!(failure.message, "exit status 3: got 7");
/// # });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecCommand {
    program: String,
    args: Vec<String>,
    timeout: Option<Duration>,
}

impl ExecCommand {
    /// The program and its arguments; `None` when `argv` is empty.
    ///
    /// ```
    /// assert!(fairq_cli::ExecCommand::new(Vec::<String>::new()).is_none());
    /// ```
    pub fn new<I, S>(argv: I) -> Option<Self>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut argv = argv.into_iter().map(Into::into);
        let program = argv.next()?;
        Some(ExecCommand {
            program,
            args: argv.collect(),
            timeout: None,
        })
    }

    /// Kills the command and fails the attempt when it runs longer than `timeout`.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// let cmd = fairq_cli::ExecCommand::new(["sleep", "5"]).unwrap().timeout(Duration::from_millis(50));
    /// let failure = cmd.run(&fairq_worker::Job::example(vec![]), "example").await.unwrap_err();
    /// assert!(failure.message.starts_with("timed out after 50ms"));
    /// # });
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Checks that the program exists (as a path, or on `PATH`) so a typo fails at once
    /// instead of failing every job.
    ///
    /// ```
    /// assert!(fairq_cli::ExecCommand::new(["sh"]).unwrap().check().is_ok());
    /// let err = fairq_cli::ExecCommand::new(["no-such-program-x"]).unwrap().check().unwrap_err();
    /// assert_eq!(err, "--exec: program \"no-such-program-x\" not found on PATH");
    /// ```
    pub fn check(&self) -> Result<(), String> {
        let program = std::path::Path::new(&self.program);
        if program.components().count() > 1 {
            return if program.is_file() {
                Ok(())
            } else {
                Err(format!("--exec: program {:?} not found", self.program))
            };
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        if std::env::split_paths(&path).any(|dir| dir.join(program).is_file()) {
            Ok(())
        } else {
            Err(format!(
                "--exec: program {:?} not found on PATH",
                self.program
            ))
        }
    }

    /// The command line, for messages.
    ///
    /// ```
    /// let cmd = fairq_cli::ExecCommand::new(["sh", "-c", "cat"]).unwrap();
    /// assert_eq!(cmd.display(), "sh -c cat");
    /// ```
    pub fn display(&self) -> String {
        std::iter::once(self.program.as_str())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Runs the command for `job`, whose kind as enqueued is `kind`.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let cmd = fairq_cli::ExecCommand::new(["sh", "-c", "test \"$FAIRQ_KIND\" = resize"]).unwrap();
    /// let job = fairq_worker::Job::example(vec![]);
    /// assert!(cmd.run(&job, "resize").await.is_ok());
    /// assert!(cmd.run(&job, "other").await.is_err());
    /// # });
    /// ```
    pub async fn run(&self, job: &Job, kind: &str) -> Result<(), Failure> {
        let mut child = Command::new(&self.program)
            .args(&self.args)
            .env("FAIRQ_JOB_ID", job.claim.id.to_string())
            .env("FAIRQ_QUEUE", &job.queue)
            .env("FAIRQ_KIND", kind)
            .env("FAIRQ_KEY", job.key.as_deref().unwrap_or(""))
            .env("FAIRQ_ATTEMPT", job.attempt.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::from(std::io::stderr()))
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Failure::retryable(format!("cannot start {:?}: {e}", self.program)))?;
        if let Some(mut stdin) = child.stdin.take() {
            let payload = job.payload.clone();
            // A command that does not read its input closes the pipe early; that is its
            // business, not a failure.
            tokio::spawn(async move {
                let _ = stdin.write_all(&payload).await;
                let _ = stdin.shutdown().await;
            });
        }
        let output = child.wait_with_output();
        let output = match self.timeout {
            Some(limit) => match tokio::time::timeout(limit, output).await {
                Ok(result) => result,
                Err(_) => {
                    return Err(Failure::retryable(format!(
                        "timed out after {} (killed)",
                        humantime::format_duration(limit)
                    )))
                }
            },
            None => output.await,
        }
        .map_err(|e| Failure::retryable(format!("waiting for {:?}: {e}", self.program)))?;
        if output.status.success() {
            return Ok(());
        }
        let status = match output.status.code() {
            Some(code) => format!("exit status {code}"),
            None => describe_signal(&output.status),
        };
        let tail = stderr_tail(&output.stderr);
        Err(Failure::retryable(if tail.is_empty() {
            status
        } else {
            format!("{status}: {tail}")
        }))
    }
}

#[cfg(unix)]
fn describe_signal(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(signal) => format!("killed by signal {signal}"),
        None => status.to_string(),
    }
}

#[cfg(not(unix))]
fn describe_signal(status: &std::process::ExitStatus) -> String {
    status.to_string()
}

/// The last [`STDERR_TAIL`] bytes of `stderr`, trimmed, cut at a character boundary.
pub(crate) fn stderr_tail(stderr: &[u8]) -> String {
    let start = stderr.len().saturating_sub(STDERR_TAIL);
    let text = String::from_utf8_lossy(&stderr[start..]);
    // A cut through a multi-byte character shows as a replacement mark at the start.
    text.trim_start_matches('\u{FFFD}').trim().to_string()
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn job(payload: &[u8]) -> Job {
        let mut job = Job::example(payload.to_vec());
        job.queue = "mail".into();
        job.key = Some("tenant-7".into());
        job.attempt = 3;
        job
    }

    #[tokio::test]
    async fn the_payload_arrives_on_stdin_and_the_job_in_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("seen");
        let script = format!(
            "{{ cat; echo; echo \"$FAIRQ_JOB_ID $FAIRQ_QUEUE $FAIRQ_KIND $FAIRQ_KEY $FAIRQ_ATTEMPT\"; }} > {}",
            out.display()
        );
        let cmd = ExecCommand::new(["sh", "-c", script.as_str()]).unwrap();
        cmd.run(&job(br#"{"a":1}"#), "welcome").await.unwrap();
        let seen = std::fs::read_to_string(&out).unwrap();
        assert_eq!(seen, "{\"a\":1}\n1 mail welcome tenant-7 3\n");
    }

    #[tokio::test]
    async fn failures_carry_the_exit_code_and_the_end_of_stderr() {
        let cmd = ExecCommand::new([
            "sh",
            "-c",
            "i=0; while [ $i -lt 500 ]; do echo line-$i >&2; i=$((i+1)); done; exit 9",
        ])
        .unwrap();
        let failure = cmd.run(&job(b""), "k").await.unwrap_err();
        assert!(failure.message.starts_with("exit status 9: "));
        assert!(failure.message.ends_with("line-499"), "{}", failure.message);
        assert!(!failure.message.contains("line-0\n"));
        assert!(!failure.permanent);
    }

    #[tokio::test]
    async fn a_silent_failure_names_its_status_and_a_missing_program_fails() {
        let cmd = ExecCommand::new(["false"]).unwrap();
        assert_eq!(
            cmd.run(&job(b""), "k").await.unwrap_err().message,
            "exit status 1"
        );
        let cmd = ExecCommand::new(["/nonexistent/program"]).unwrap();
        assert_eq!(
            cmd.check(),
            Err("--exec: program \"/nonexistent/program\" not found".to_string())
        );
        let failure = cmd.run(&job(b""), "k").await.unwrap_err();
        assert!(
            failure.message.starts_with("cannot start"),
            "{}",
            failure.message
        );
    }

    #[tokio::test]
    async fn a_command_that_ignores_stdin_still_succeeds() {
        let cmd = ExecCommand::new(["true"]).unwrap();
        let big = vec![b'x'; 1 << 20];
        assert!(cmd.run(&job(&big), "k").await.is_ok());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

        /// The tail is the end of the text: at most STDERR_TAIL bytes, and exactly the last
        /// ones when the text is plain ASCII without surrounding blanks.
        #[test]
        fn the_tail_is_the_end_of_stderr(text in "[a-z]([a-z \n]{0,3000}[a-z])?") {
            let tail = stderr_tail(text.as_bytes());
            proptest::prop_assert!(tail.len() <= STDERR_TAIL);
            let start = text.len().saturating_sub(STDERR_TAIL);
            proptest::prop_assert_eq!(tail.as_str(), text[start..].trim_start());
        }

        #[test]
        fn any_bytes_give_a_short_valid_tail(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..5000)) {
            let tail = stderr_tail(&bytes);
            proptest::prop_assert!(tail.chars().count() <= STDERR_TAIL);
            proptest::prop_assert_eq!(tail.trim(), tail.as_str());
        }
    }

    #[tokio::test]
    async fn signals_are_reported() {
        let cmd = ExecCommand::new(["sh", "-c", "kill -9 $$"]).unwrap();
        assert_eq!(
            cmd.run(&job(b""), "k").await.unwrap_err().message,
            "killed by signal 9"
        );
    }
}
