//! Running a setup command to completion and checking that it worked.

use std::process::Command;

use crate::HarnessError;

/// How `command` reads in a message: its program and arguments.
pub(crate) fn describe(command: &Command) -> String {
    let mut text = command.get_program().to_string_lossy().into_owned();
    for arg in command.get_args() {
        text.push(' ');
        text.push_str(&arg.to_string_lossy());
    }
    text
}

/// Runs `command` to completion; its stdout when it exits 0, an error with its output
/// otherwise.
pub(crate) fn run(command: &mut Command) -> Result<String, HarnessError> {
    let what = describe(command);
    let output = command
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| HarnessError::io(format!("running {what}"), e))?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let mut text = String::from_utf8_lossy(&output.stderr).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stdout));
    let tail: String = text
        .chars()
        .rev()
        .take(2_000)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    Err(HarnessError::Command {
        what,
        status: output.status,
        output: tail.trim().to_string(),
    })
}

/// Runs `ip` with `args`.
pub(crate) fn ip(args: &[&str]) -> Result<String, HarnessError> {
    run(Command::new("ip").args(args))
}
