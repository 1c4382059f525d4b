//! A child process that cannot outlive its test.

use std::process::{Child, Command, ExitStatus};
use std::time::Duration;

use rustix::process::{Pid, Signal};

use crate::{cmd, wait_for, HarnessError};

/// How long a process asked to stop gets before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(15);

/// A spawned process, stopped when dropped: first with its stop signal (SIGTERM unless set
/// otherwise), then, if it is still there after a grace period, with SIGKILL. It also
/// gets a parent-death signal, so it dies with the thread that started it even if the test
/// process is killed outright and no destructor runs.
#[derive(Debug)]
pub struct Guarded {
    name: String,
    child: Child,
    stop_signal: Signal,
    status: Option<ExitStatus>,
}

/// Gives the command a parent-death signal (SIGKILL). The hook runs after any change of
/// user, which would otherwise clear the signal.
#[allow(unsafe_code)]
fn isolate(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed; it makes one raw system call (prctl) through
    // rustix and neither allocates nor locks.
    unsafe {
        command.pre_exec(|| {
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            Ok(())
        });
    }
}

impl Guarded {
    /// Starts `command`, named `name` in messages.
    pub fn spawn(name: impl Into<String>, mut command: Command) -> Result<Guarded, HarnessError> {
        let name = name.into();
        isolate(&mut command);
        let child = command
            .spawn()
            .map_err(|e| HarnessError::io(format!("starting {}", cmd::describe(&command)), e))?;
        Ok(Guarded {
            name,
            child,
            stop_signal: Signal::TERM,
            status: None,
        })
    }

    /// Uses `signal` instead of SIGTERM to ask the process to stop.
    pub fn stop_with(mut self, signal: Signal) -> Guarded {
        self.stop_signal = signal;
        self
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The name given at spawn.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sends `signal` unless the process has been reaped already.
    pub fn signal(&mut self, signal: Signal) {
        if self.exited().is_none() {
            if let Some(pid) = Pid::from_raw(self.child.id() as i32) {
                let _ = rustix::process::kill_process(pid, signal);
            }
        }
    }

    /// The exit status, once the process has exited (it is reaped here).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus, HarnessError> {
        let what = format!("{} to exit", self.name);
        wait_for(&what, timeout, || self.exited())
    }

    /// SIGKILL, and waits until it is reaped.
    pub fn kill9(&mut self) -> Result<ExitStatus, HarnessError> {
        self.signal(Signal::KILL);
        self.wait_exit(STOP_GRACE)
    }

    /// Asks the process to stop with its stop signal, waits up to `grace`, then kills it.
    /// Returns the status it exited with.
    pub fn stop(&mut self, grace: Duration) -> Result<ExitStatus, HarnessError> {
        let signal = self.stop_signal;
        self.signal(signal);
        match self.wait_exit(grace) {
            Ok(status) => Ok(status),
            Err(_) => self.kill9(),
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if self.exited().is_none() {
            let _ = self.stop(STOP_GRACE);
        }
    }
}
