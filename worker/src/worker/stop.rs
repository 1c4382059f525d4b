//! The stop signal a running handler can watch: raised when the worker shuts down.
//!
//! The worker runs each handler with its job's signal in a task-local, so a handler reaches
//! it through its [`Job`] without any change to the handler's signature.

use std::future::Future;

use tokio::sync::watch;

use crate::job::{Claim, Job};

tokio::task_local! {
    static CURRENT: (Claim, StopSignal);
}

/// Tells a running handler that its worker is shutting down and wants it to stop.
///
/// A handler gets its signal with [`Job::stop_signal`], inside the handler's task (move it
/// into tasks the handler spawns). Handlers that finish quickly can ignore it: a shutdown
/// waits for them until its deadline. A long handler should stop early, either by returning
/// an error (a retryable error returned after the signal was raised hands the job back to
/// the store without counting the attempt; a permanent one is recorded as usual, and so is a
/// panic, which is a failed attempt whenever it happens) or by
/// finishing what it can and returning `Ok`. A handler still running at the shutdown deadline
/// is dropped, and its job handed back the same way.
///
/// ```
/// use fairq_worker::{Job, StopSignal};
///
/// async fn export(job: Job) -> Result<(), String> {
///     let stop = job.stop_signal();
///     for chunk in 0..100 {
///         if stop.is_raised() {
///             return Err(format!("stopped by shutdown before chunk {chunk}"));
///         }
///         // ... write one chunk ...
///     }
///     Ok(())
/// }
///
/// // Outside a worker the signal is never raised.
/// assert!(!Job::example(vec![]).stop_signal().is_raised());
/// ```
#[derive(Debug, Clone)]
pub struct StopSignal {
    stop: Option<watch::Receiver<bool>>,
}

impl StopSignal {
    /// A signal that is never raised.
    ///
    /// ```
    /// assert!(!fairq_worker::StopSignal::never().is_raised());
    /// ```
    pub fn never() -> StopSignal {
        StopSignal { stop: None }
    }

    pub(crate) fn from_worker(stop: watch::Receiver<bool>) -> StopSignal {
        StopSignal { stop: Some(stop) }
    }

    /// True once the worker has asked the handler to stop.
    ///
    /// ```
    /// assert!(!fairq_worker::StopSignal::never().is_raised());
    /// ```
    pub fn is_raised(&self) -> bool {
        self.stop.as_ref().is_some_and(|stop| *stop.borrow())
    }

    /// Resolves once the worker asks the handler to stop (never, for
    /// [`StopSignal::never`]). Race it against the work with `tokio::select!`.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// let stop = fairq_worker::StopSignal::never();
    /// let work = tokio::time::sleep(Duration::from_millis(1));
    /// tokio::select! {
    ///     () = work => {}
    ///     () = stop.raised() => unreachable!(),
    /// }
    /// # });
    /// ```
    pub async fn raised(&self) {
        match &self.stop {
            Some(stop) => {
                let mut stop = stop.clone();
                if stop.wait_for(|raised| *raised).await.is_err() {
                    // The worker is gone without raising it.
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending().await,
        }
    }
}

impl Job {
    /// The stop signal of the worker running this job (see [`StopSignal`]). Call it in the
    /// handler's own task; anywhere else, and for a job the current task does not run, the
    /// signal is never raised.
    ///
    /// ```
    /// let job = fairq_worker::Job::example(vec![]);
    /// assert!(!job.stop_signal().is_raised());
    /// ```
    pub fn stop_signal(&self) -> StopSignal {
        CURRENT
            .try_with(|(claim, signal)| (*claim == self.claim).then(|| signal.clone()))
            .ok()
            .flatten()
            .unwrap_or_else(StopSignal::never)
    }
}

/// Runs `handler` with `signal` as the stop signal of the job `claim` names.
pub(crate) fn with_signal<F: Future>(
    claim: Claim,
    signal: StopSignal,
    handler: F,
) -> impl Future<Output = F::Output> {
    CURRENT.scope((claim, signal), handler)
}
