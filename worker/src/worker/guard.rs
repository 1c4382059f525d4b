//! Store calls made by the worker's own tasks, with a panic turned into an error.
//!
//! The claimer, the acker, the heartbeater and the rescuer each run for the worker's whole
//! life; a panic inside a store call (a bug in a custom [`Backend`](crate::Backend), or in
//! code it calls, such as a log subscriber) would end the task that made the call, and the
//! queue would stop claiming or settling without a word. Through [`call`], such a call fails
//! like any other store error instead: it is reported (`on_error`), retried with backoff
//! where the task retries, and the task goes on.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use tokio::time::Instant;

use crate::error::BackendError;

/// Runs the store call `fut`; a panic inside it becomes [`BackendError::Store`] naming
/// `operation` and the panic's message.
pub(crate) async fn call<T>(
    operation: &'static str,
    fut: impl Future<Output = Result<T, BackendError>>,
) -> Result<T, BackendError> {
    match AssertUnwindSafe(fut).catch_unwind().await {
        Ok(result) => result,
        Err(payload) => Err(panicked(operation, payload.as_ref())),
    }
}

/// Runs the store call `fut` like [`call`], until `by` at the latest: a call the store has
/// not answered by then is dropped and fails with [`BackendError::Unavailable`] naming
/// `operation` (whether the store carried it out is unknown).
pub(crate) async fn by<T>(
    by: Instant,
    operation: &'static str,
    fut: impl Future<Output = Result<T, BackendError>>,
) -> Result<T, BackendError> {
    match tokio::time::timeout_at(by, call(operation, fut)).await {
        Ok(result) => result,
        Err(_) => Err(BackendError::Unavailable(
            format!("the store did not answer {operation} in time; the call was dropped").into(),
        )),
    }
}

/// The error for an entry a store left out of its answer to a call about many jobs.
pub(crate) fn missing_answer() -> BackendError {
    BackendError::Store("the store answered fewer entries than it was sent".into())
}

/// Runs `fut`, which returns nothing; a panic inside it ends the call.
pub(crate) async fn quietly(operation: &'static str, fut: impl Future<Output = ()>) {
    if let Err(payload) = AssertUnwindSafe(fut).catch_unwind().await {
        tracing::error!(error = %panicked(operation, payload.as_ref()), "store call panicked");
    }
}

fn panicked(operation: &'static str, payload: &(dyn Any + Send)) -> BackendError {
    let message = panic_message(payload);
    BackendError::Store(format!("the store panicked during {operation}: {message}").into())
}

/// A panic's message: its text, or a placeholder when the payload is not text.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a non-text panic payload")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_becomes_a_store_error_and_a_result_passes_through() {
        let ok = call("claim", async { Ok::<_, BackendError>(7) }).await;
        assert_eq!(ok.unwrap(), 7);
        let failed = call("claim", async {
            if true {
                panic!("bug {}", 42);
            }
            Ok::<u8, BackendError>(0)
        })
        .await;
        let message = failed.unwrap_err().to_string();
        assert!(
            message.contains("panicked during claim: bug 42"),
            "{message}"
        );
        let failed = call("settle", async {
            if true {
                std::panic::panic_any(5u8);
            }
            Ok::<u8, BackendError>(0)
        })
        .await;
        assert!(failed.unwrap_err().to_string().contains("non-text"));
        quietly("wait", async { panic!("ignored") }).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_unanswered_in_time_is_dropped_as_unavailable() {
        let soon = Instant::now() + std::time::Duration::from_secs(1);
        let answered = by(soon, "release", async { Ok::<_, BackendError>(1) }).await;
        assert_eq!(answered.unwrap(), 1);
        let never = std::future::pending::<Result<u8, BackendError>>();
        let err = by(soon, "release", never).await.unwrap_err();
        assert!(matches!(err, BackendError::Unavailable(_)), "{err:?}");
        assert!(err.to_string().contains("release in time"), "{err}");
        assert_eq!(Instant::now(), soon);
    }
}
