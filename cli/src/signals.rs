//! SIGTERM and Ctrl-C (SIGINT), listened for from the moment a command starts, so a signal
//! that arrives early is still a clean stop rather than the default abrupt exit.

use crate::error::CliError;

/// Registered signal listeners.
pub(crate) struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Signals {
    /// Starts listening now (inside a tokio runtime).
    pub(crate) fn listen() -> Result<Signals, CliError> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Signals {
                term: signal(SignalKind::terminate())
                    .map_err(|e| CliError::io("listening for SIGTERM", e))?,
                int: signal(SignalKind::interrupt())
                    .map_err(|e| CliError::io("listening for SIGINT", e))?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Signals {})
        }
    }

    /// Resolves at the next signal, naming it.
    pub(crate) async fn recv(&mut self) -> Result<&'static str, CliError> {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.term.recv() => Ok("SIGTERM"),
                _ = self.int.recv() => Ok("SIGINT"),
            }
        }
        #[cfg(not(unix))]
        {
            tokio::signal::ctrl_c()
                .await
                .map_err(|e| CliError::io("listening for Ctrl-C", e))?;
            Ok("Ctrl-C")
        }
    }
}
