//! [`Settler`]: the handle of the task that writes settlements arriving together with one
//! statement (`settle.rs` runs it).

use std::sync::Mutex;

use fairq_worker::{BackendError, Each, Finished, Settled};
use tokio::sync::{mpsc, oneshot};

/// Writes settlements that arrive together (from any number of tasks) with one statement;
/// while one is being written, the next starts on another connection (up to `settle::FLIGHTS`).
#[derive(Default)]
pub(crate) struct Settler {
    pub(crate) sender: Mutex<Option<mpsc::UnboundedSender<Request>>>,
}

/// A settlement waiting for the settler.
pub(crate) struct Request {
    pub(crate) batch: Vec<Finished>,
    pub(crate) reply: oneshot::Sender<Result<Each<Settled>, BackendError>>,
}
