//! Cancelling one job from the dashboard or the API ([`Inspect::cancel`]): the owner deletes
//! it from its store the way `purge` deletes a job (its unique key is free again; jobs
//! blocked on it keep waiting) and journals the deletion before answering; a client asks the
//! owner over the folder's socket; a read-only handle refuses. The [`Inspect`] impl here also
//! dispatches pausing (see `pause.rs`) the same way.

use fairq_worker::{BackendError, Capabilities, Inspect, JobId};

use crate::backend::{FileBackend, Side};
use crate::error::FileError;
use crate::local::{Local, Persist};

impl Local {
    /// Deletes job `id` unless it is running, durably.
    pub(crate) async fn cancel(&self, id: JobId) -> Result<(), BackendError> {
        self.change(Persist::Durable, |st, _, _| st.store.cancel(id))
            .await
    }
}

/// Operator queries per fairness key (the dashboard's tenants view), read through `list`,
/// cancelling one job that is not running, and pausing queues: a paused queue hands out no
/// job, to this process or a client of the folder, until it is resumed; the pause is
/// journaled, so it outlasts a reopen.
///
/// ```
/// use fairq_file::{FileBackend, FileOptions};
/// use fairq_worker::{Backend, BackendError, Inspect, NewJob};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let store = FileBackend::open(dir.path(), FileOptions::default()).unwrap();
/// assert!(store.capabilities().cancel);
/// let id = store.enqueue(NewJob::new("mail", "send", vec![])).await?;
/// store.cancel(id).await?;
/// assert!(store.get(id).await?.is_none());
/// assert!(matches!(store.cancel(id).await, Err(BackendError::NotFound(_))));
/// store.set_paused("mail", true).await?;
/// assert_eq!(store.paused().await?, ["mail"]);
/// store.set_paused("mail", false).await?;
/// # Ok::<(), BackendError>(())
/// # }).unwrap();
/// ```
impl Inspect for FileBackend {
    /// Cancelling and pausing are changes: a read-only handle can do neither.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            pause: !self.is_read_only(),
            cancel: !self.is_read_only(),
        }
    }

    async fn cancel(&self, id: JobId) -> Result<(), BackendError> {
        self.writable("cancel")?;
        match &*self.side {
            Side::Owner(owner) => owner.local.cancel(id).await,
            Side::Client(client) => client.cancel(id).await,
            Side::Snapshot(_) => Err(FileError::ReadOnly {
                path: self.path().to_path_buf(),
                operation: "cancel",
            }
            .into()),
        }
    }

    async fn set_paused(&self, queue: &str, paused: bool) -> Result<(), BackendError> {
        fairq_worker::check_queue_name(queue)?;
        self.writable("pause")?;
        match &*self.side {
            Side::Owner(owner) => owner.local.set_paused(queue, paused).await,
            Side::Client(client) => client.set_paused(queue, paused).await,
            Side::Snapshot(_) => Err(FileError::ReadOnly {
                path: self.path().to_path_buf(),
                operation: "pause",
            }
            .into()),
        }
    }

    async fn paused(&self) -> Result<Vec<String>, BackendError> {
        match &*self.side {
            Side::Owner(owner) => owner.local.paused(),
            Side::Client(client) => client.paused().await,
            Side::Snapshot(snapshot) => Ok(snapshot.paused()),
        }
    }
}
