//! Where a reader sends the items it takes out of the way: expired items, and items aborted
//! more often than its `max_errors` (the dead letters).

use std::fmt;
use std::sync::Arc;

use crate::item::Item;
use crate::JournalError;

/// The error a [`Sink::callback`] returns when it could not take an item.
pub type SinkError = Box<dyn std::error::Error + Send + Sync + 'static>;

type Callback = dyn Fn(&Item) -> Result<(), SinkError> + Send + Sync;

/// A destination for items a reader takes out of its stream instead of delivering them.
///
/// An item is finished in the reader only after the sink took it: if the sink fails, the
/// item stays where it was (and the call that moved it returns
/// [`JournalError::Sink`]); after a crash in between, the sink may get it again (at least
/// once, never lost).
///
/// ```
/// use fairq_journal::{JournalConfig, JournaledQueue, Sink};
/// let dir = tempfile::tempdir().unwrap();
/// let jobs = JournaledQueue::open(dir.path(), "jobs", JournalConfig::default()).unwrap();
/// let dead = JournaledQueue::open(dir.path(), "jobs-dead", JournalConfig::default()).unwrap();
/// let workers = jobs.reader("workers").unwrap();
/// workers.set_error_sink(Some(Sink::queue(&dead)));
/// let log = Sink::callback(|item| {
///     println!("item {} expired", item.id);
///     Ok(())
/// });
/// workers.set_expired_sink(Some(log));
/// ```
#[derive(Clone)]
pub struct Sink(pub(crate) Target);

/// A queue that a sink puts items into: a journaled queue (see [`Sink::queue`], which
/// implements it). A trait rather than the queue's type, so that this module, which the
/// readers' state holds, does not depend on the queue's state, which holds the readers.
pub(crate) trait Destination: Send + Sync {
    /// Appends `data` as a new item, with no expiry time (an expired item is not expired
    /// again on arrival).
    fn put_bytes(&self, data: &[u8]) -> Result<(), JournalError>;
    /// The queue's name, for `Debug`.
    fn name(&self) -> &str;
}

#[derive(Clone)]
pub(crate) enum Target {
    /// Put the item's bytes into another queue (see [`Sink::queue`]).
    Queue(Arc<dyn Destination>),
    /// Hand the item to a function; an `Err` leaves the item where it was.
    Callback(Arc<Callback>),
}

impl Sink {
    /// A sink that calls `f` with every item; an `Err` leaves the item where it was.
    ///
    /// ```
    /// let sink = fairq_journal::Sink::callback(|_item| Ok(()));
    /// assert!(format!("{sink:?}").contains("callback"));
    /// ```
    pub fn callback(f: impl Fn(&Item) -> Result<(), SinkError> + Send + Sync + 'static) -> Self {
        Sink(Target::Callback(Arc::new(f)))
    }

    pub(crate) fn deliver(&self, reader: &str, item: &Item) -> Result<(), JournalError> {
        let failed = |source: SinkError| JournalError::Sink {
            reader: reader.to_string(),
            item: item.id,
            source,
        };
        match &self.0 {
            Target::Queue(q) => q.put_bytes(&item.data).map_err(|e| failed(Box::new(e))),
            Target::Callback(f) => f(item).map_err(failed),
        }
    }
}

impl fmt::Debug for Sink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Target::Queue(q) => write!(f, "Sink(queue {:?})", q.name()),
            Target::Callback(_) => f.write_str("Sink(callback)"),
        }
    }
}

/// A reader's sinks (none by default: expired items and dead letters are dropped).
#[derive(Debug, Clone, Default)]
pub(crate) struct Sinks {
    pub(crate) expired: Option<Sink>,
    pub(crate) errors: Option<Sink>,
}
