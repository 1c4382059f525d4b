//! Running an external command as a job handler: the payload on stdin, the job's identity
//! in the environment, the exit code as the verdict.
//!
//! Each command runs in a process group of its own, so a Ctrl-C typed in the terminal
//! reaches `fairq` (which then asks the commands to stop with SIGTERM and waits) instead of
//! killing them mid-job; and with a parent-death signal, so a `fairq` killed outright
//! (`kill -9`) takes its commands with it instead of leaving them running while their jobs
//! are rescued and run again.

use std::collections::HashSet;
use std::io::{Seek, Write};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fairq_worker::{Failure, Job};
use tokio::process::Command;

/// The commands running now, by process id (each leads a process group of the same id).
#[derive(Debug, Default)]
pub(crate) struct Children {
    running: Mutex<HashSet<i32>>,
    stopping: AtomicBool,
}

impl Children {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<i32>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks every running command (its whole process group) to stop with SIGTERM, and every
    /// command started from now on as soon as it starts. Returns how many were asked.
    pub(crate) fn terminate(&self) -> usize {
        self.stopping.store(true, Ordering::SeqCst);
        let running = self.lock();
        for &pid in running.iter() {
            signal_group(pid, rustix::process::Signal::TERM);
        }
        running.len()
    }

    /// True once [`terminate`](Self::terminate) was called.
    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }
}

/// Sends `signal` to process group `pid`; a group that is gone already is no error.
fn signal_group(pid: i32, signal: rustix::process::Signal) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}

/// A started command, registered in [`Children`] until it is reaped. Dropped before that
/// (a timeout, or a shutdown that stopped waiting), it kills the command's whole process
/// group, so nothing it started outlives the attempt.
struct Running {
    pid: i32,
    children: Arc<Children>,
    reaped: bool,
}

impl Running {
    fn new(pid: i32, children: Arc<Children>) -> Running {
        {
            let mut running = children.lock();
            running.insert(pid);
            metrics::gauge!(crate::prometheus::RUNNING).set(running.len() as f64);
        }
        // Started after shutdown began: ask it to stop at once, like the others.
        if children.stopping() {
            signal_group(pid, rustix::process::Signal::TERM);
        }
        Running {
            pid,
            children,
            reaped: false,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        {
            let mut running = self.children.lock();
            running.remove(&self.pid);
            metrics::gauge!(crate::prometheus::RUNNING).set(running.len() as f64);
        }
        if !self.reaped {
            signal_group(self.pid, rustix::process::Signal::KILL);
        }
    }
}

/// Makes the command a process-group leader with a parent-death signal. `prctl` only exists
/// on Linux; elsewhere the command still gets its own process group.
#[allow(unsafe_code)]
fn isolate(command: &mut Command) {
    command.process_group(0);
    #[cfg(target_os = "linux")]
    {
        let parent = rustix::process::getpid();
        // SAFETY: the closure runs in the child between fork and exec, where only
        // async-signal-safe calls are allowed. It makes two raw system calls through rustix
        // (prctl and getppid), allocates nothing and takes no lock.
        unsafe {
            command.pre_exec(move || {
                rustix::process::set_parent_process_death_signal(Some(
                    rustix::process::Signal::KILL,
                ))?;
                // The parent may have died between fork and prctl: then no signal will come.
                if rustix::process::getppid() != Some(parent) {
                    return Err(std::io::Error::other(
                        "fairq exited before the command started",
                    ));
                }
                Ok(())
            });
        }
    }
}

/// The payload in an unnamed temporary file, positioned at its start: a command reading it
/// as stdin sees every byte or, if the file could not be written, never starts. A pipe would
/// let a command read a truncated payload if `fairq` died mid-write.
fn payload_file(payload: &[u8]) -> std::io::Result<std::fs::File> {
    let mut file = tempfile::tempfile()?;
    file.write_all(payload)?;
    file.flush()?;
    file.rewind()?;
    Ok(file)
}

/// How much of a failed command's stderr is kept as the job's error message.
pub(crate) const STDERR_TAIL: usize = 2_048;

/// A command run once per job.
///
/// The job's payload is the command's stdin: a temporary file holding all of it, written
/// before the command starts (a payload that cannot be written fails the attempt without
/// starting the command). Its stdout goes to this program's stderr (so `--json` output on
/// stdout stays clean); its stderr is captured. The environment carries `FAIRQ_JOB_ID`,
/// `FAIRQ_QUEUE`, `FAIRQ_KIND`, `FAIRQ_KEY` (empty when the job has none), `FAIRQ_ATTEMPT`
/// and `FAIRQ_PAYLOAD_BYTES`. Exit code 0 is success; any other exit, a kill by
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
#[derive(Debug, Clone)]
pub struct ExecCommand {
    program: String,
    args: Vec<String>,
    timeout: Option<Duration>,
    children: Arc<Children>,
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
            children: Arc::new(Children::default()),
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
            return if !program.is_file() {
                Err(format!("--exec: program {:?} not found", self.program))
            } else if !is_executable(program) {
                Err(format!(
                    "--exec: program {:?} is not executable (chmod +x it, or run it through \
                     its interpreter: --exec sh {})",
                    self.program, self.program
                ))
            } else {
                Ok(())
            };
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        // As the shell looks: the first executable file of that name on PATH.
        let candidates: Vec<_> = std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .filter(|candidate| candidate.is_file())
            .collect();
        if candidates.iter().any(|candidate| is_executable(candidate)) {
            Ok(())
        } else if let Some(found) = candidates.first() {
            Err(format!(
                "--exec: program {:?} on PATH ({}) is not executable",
                self.program,
                found.display()
            ))
        } else {
            Err(format!(
                "--exec: program {:?} not found on PATH",
                self.program
            ))
        }
    }

    /// The commands of this handler running now (to stop them at shutdown).
    pub(crate) fn children(&self) -> Arc<Children> {
        Arc::clone(&self.children)
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
        let payload = job.payload.clone();
        let stdin = tokio::task::spawn_blocking(move || payload_file(&payload))
            .await
            .map_err(std::io::Error::other)
            .and_then(|written| written)
            .map_err(|e| {
                Failure::retryable(format!(
                    "cannot hand the payload to the command (not started): {e}"
                ))
            })?;
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .env("FAIRQ_JOB_ID", job.claim.id.to_string())
            .env("FAIRQ_QUEUE", &job.queue)
            .env("FAIRQ_KIND", kind)
            .env("FAIRQ_KEY", job.key.as_deref().unwrap_or(""))
            .env("FAIRQ_ATTEMPT", job.attempt.to_string())
            .env("FAIRQ_PAYLOAD_BYTES", job.payload.len().to_string())
            .stdin(Stdio::from(stdin))
            .stdout(Stdio::from(std::io::stderr()))
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        isolate(&mut command);
        let child = command
            .spawn()
            .map_err(|e| Failure::retryable(format!("cannot start {:?}: {e}", self.program)))?;
        let mut running = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(|pid| Running::new(pid, Arc::clone(&self.children)));
        let output = child.wait_with_output();
        let output = match self.timeout {
            Some(limit) => match tokio::time::timeout(limit, output).await {
                Ok(result) => result,
                Err(_) => {
                    // `running` kills the command's process group as it goes.
                    return Err(Failure::retryable(format!(
                        "timed out after {} (killed)",
                        humantime::format_duration(limit)
                    )));
                }
            },
            None => output.await,
        }
        .map_err(|e| Failure::retryable(format!("waiting for {:?}: {e}", self.program)))?;
        if let Some(running) = running.as_mut() {
            running.reaped = true;
        }
        drop(running);
        if output.status.success() {
            return Ok(());
        }
        let status = match output.status.code() {
            Some(code) => format!("exit status {code}"),
            None => describe_signal(&output.status),
        };
        let status = if self.children.stopping() {
            format!("stopped at shutdown: {status}")
        } else {
            status
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

/// True when `path` may be run: a file with an execute bit (on Unix; elsewhere any file).
fn is_executable(path: &std::path::Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
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

    /// A program that exists but cannot be run (a script without its execute bit) is
    /// refused up front too: every attempt would fail with "permission denied" and each job
    /// spend its retries on it.
    #[cfg(unix)]
    #[test]
    fn a_program_that_is_not_executable_is_refused_up_front() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("handle.sh");
        std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
        let shown = script.display().to_string();
        let err = ExecCommand::new([shown.as_str()])
            .unwrap()
            .check()
            .unwrap_err();
        assert!(err.contains("is not executable"), "{err}");
        // A folder is no program either.
        let folder = dir.path().display().to_string();
        assert!(ExecCommand::new([folder.as_str()])
            .unwrap()
            .check()
            .is_err());
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(ExecCommand::new([shown.as_str()]).unwrap().check(), Ok(()));
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

    /// True while process `pid` exists and is not a zombie.
    #[cfg(target_os = "linux")]
    fn alive(pid: &str) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            !stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X']))
        })
    }

    /// A timed-out command goes with everything it started (its whole process group).
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_timeout_kills_the_whole_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("grandchild");
        let script = format!("sleep 600 & echo $! > {}; wait", marker.display());
        let cmd = ExecCommand::new(["sh", "-c", script.as_str()])
            .unwrap()
            .timeout(Duration::from_millis(300));
        let failure = cmd.run(&job(b""), "k").await.unwrap_err();
        assert!(
            failure.message.starts_with("timed out"),
            "{}",
            failure.message
        );
        let pid = std::fs::read_to_string(&marker).unwrap().trim().to_string();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while alive(&pid) {
            if std::time::Instant::now() > deadline {
                let _ = std::process::Command::new("kill")
                    .args(["-9", &pid])
                    .status();
                panic!("the command's child {pid} outlived the timeout");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(cmd.children().lock().is_empty());
    }

    /// At shutdown every running command is asked to stop with SIGTERM, and the failure
    /// says why.
    #[tokio::test]
    async fn terminate_sends_sigterm_to_running_commands() {
        let dir = tempfile::tempdir().unwrap();
        let started = dir.path().join("started");
        let script = format!("touch {}; while :; do sleep 0.01; done", started.display());
        let cmd = ExecCommand::new(["sh", "-c", script.as_str()]).unwrap();
        let children = cmd.children();
        let run = tokio::spawn(async move { cmd.run(&job(b""), "k").await });
        // Registered and running its loop.
        while !started.exists() || children.lock().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(children.terminate(), 1);
        let failure = run.await.unwrap().unwrap_err();
        assert_eq!(failure.message, "stopped at shutdown: killed by signal 15");
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
