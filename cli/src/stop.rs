//! Stopping a demo or a bench early and cleanly: the run is handed a future that resolves
//! at the first signal, stops its workers, removes what it enqueued, and only then returns.
//! A second signal ends the wait at once.

use std::future::Future;
use std::pin::{pin, Pin};

use tokio::sync::oneshot;

use crate::error::CliError;
use crate::signals::Signals;

/// A stop request for a run, and the future the run watches: it resolves, to the error the
/// run ends with, once the request is sent (and never if it is dropped unsent).
pub(crate) fn channel() -> (
    oneshot::Sender<CliError>,
    impl Future<Output = CliError> + Send,
) {
    let (tx, rx) = oneshot::channel();
    let stop = async move {
        match rx.await {
            Ok(err) => err,
            Err(_) => std::future::pending().await,
        }
    };
    (tx, stop)
}

/// The error `stop` gave if it has resolved already, without waiting for it. A run calls
/// this between steps it must not cut short (an enqueue that may be committed anyway).
pub(crate) async fn requested<F: Future<Output = CliError>>(stop: Pin<&mut F>) -> Option<CliError> {
    tokio::select! {
        biased;
        err = stop => Some(err),
        () = std::future::ready(()) => None,
    }
}

/// Runs `run` to its end. At the first signal, `stopper` asks it to stop (with
/// [`CliError::Stopped`]) and the run is awaited while it cleans up; a second signal stops
/// waiting.
pub(crate) async fn on_signal<T>(
    run: impl Future<Output = Result<T, CliError>>,
    stopper: oneshot::Sender<CliError>,
    signals: &mut Signals,
) -> Result<T, CliError> {
    let mut run = pin!(run);
    let signal = tokio::select! {
        result = &mut run => return result,
        signal = signals.recv() => signal?,
    };
    // The run has not returned, so it still listens.
    let _ = stopper.send(CliError::Stopped(signal));
    tokio::select! {
        result = &mut run => result,
        // Asked twice: leave at once, whatever the run left behind.
        signal = signals.recv() => Err(CliError::Stopped(signal?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stop_resolves_once_requested_and_never_when_dropped() {
        let (tx, stop) = channel();
        let mut stop = pin!(stop);
        assert!(requested(stop.as_mut()).await.is_none());
        tx.send(CliError::Stopped("SIGINT")).unwrap();
        let err = requested(stop.as_mut()).await.expect("requested");
        assert!(matches!(err, CliError::Stopped("SIGINT")));

        let (tx, stop) = channel();
        drop(tx);
        let mut stop = pin!(stop);
        assert!(requested(stop.as_mut()).await.is_none());
    }
}
