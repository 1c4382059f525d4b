//! Log events of the library (the worker's warnings, the stores' errors, the pipeline's
//! trace events) printed on stderr.
//!
//! `RUST_LOG` chooses what is printed, with the `tracing-subscriber` filter syntax
//! (`RUST_LOG=warn`, `RUST_LOG=fairq_worker=trace`). Without it, the long-running commands
//! (`work`, `serve`) print warnings and errors, and the others print nothing, so their output
//! stays what they document (one line on stderr for a failure).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// The variable that chooses the log filter.
pub const VARIABLE: &str = "RUST_LOG";

/// The filter to install: `RUST_LOG`'s when set and valid, else `warn` for a long-running
/// command, else none. A `RUST_LOG` that does not parse is reported once on stderr and
/// treated as unset.
///
/// ```
/// assert!(fairq_cli::logging::filter(None, false).is_none());
/// assert_eq!(fairq_cli::logging::filter(None, true).unwrap().to_string(), "warn");
/// assert_eq!(fairq_cli::logging::filter(Some("debug"), false).unwrap().to_string(), "debug");
/// ```
pub fn filter(value: Option<&str>, long_running: bool) -> Option<EnvFilter> {
    if let Some(value) = value.filter(|v| !v.trim().is_empty()) {
        match EnvFilter::try_new(value) {
            Ok(filter) => return Some(filter),
            Err(e) => eprintln!("warning: ignoring {VARIABLE}: {e}"),
        }
    }
    long_running.then(|| EnvFilter::new("warn"))
}

/// Prints log events on stderr as [`filter`] decides (`RUST_LOG` read from the
/// environment). Does nothing if a subscriber is already installed.
pub fn install(long_running: bool) {
    let value = std::env::var(VARIABLE).ok();
    if let Some(filter) = filter(value.as_deref(), long_running) {
        let _already = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            // A failed write (stderr closed) must not be reported on stderr: that report
            // would panic in whatever task logged.
            .log_internal_errors(false)
            .try_init();
    }
}
