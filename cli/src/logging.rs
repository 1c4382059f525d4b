//! Log events of the library (the worker's warnings, the stores' errors, the pipeline's
//! trace events) printed on stderr when `RUST_LOG` asks for them.
//!
//! `RUST_LOG` chooses what is printed, with the `tracing-subscriber` filter syntax
//! (`RUST_LOG=warn`, `RUST_LOG=fairq_worker=trace`). Without it nothing is printed, so each
//! command's output stays what it documents (`work` reports every attempt and store error
//! itself; a failure is one line on stderr).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// The variable that chooses the log filter.
pub const VARIABLE: &str = "RUST_LOG";

/// The filter `RUST_LOG`'s value asks for: none when unset or blank. A value that does not
/// parse is reported once on stderr and treated as unset.
///
/// ```
/// assert!(fairq_cli::logging::filter(None).is_none());
/// assert!(fairq_cli::logging::filter(Some(" ")).is_none());
/// assert_eq!(fairq_cli::logging::filter(Some("debug")).unwrap().to_string(), "debug");
/// ```
pub fn filter(value: Option<&str>) -> Option<EnvFilter> {
    let value = value.filter(|v| !v.trim().is_empty())?;
    match EnvFilter::try_new(value) {
        Ok(filter) => Some(filter),
        Err(e) => {
            // Through the CLI's own stderr path: credentials hidden, and a closed or full
            // stderr ignored rather than a panic.
            crate::output_error_line(&format!("warning: ignoring {VARIABLE}: {e}"));
            None
        }
    }
}

/// Prints log events on stderr as `RUST_LOG` (read from the environment) selects. Does
/// nothing if it is unset or a subscriber is already installed.
pub fn install() {
    let value = std::env::var(VARIABLE).ok();
    if let Some(filter) = filter(value.as_deref()) {
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
