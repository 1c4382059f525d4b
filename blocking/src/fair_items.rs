//! The item store of [`crate::FairWaitQueue`]: a [`FairQueue`] plus the items given back,
//! behind one short critical section.

use std::collections::VecDeque;
use std::hash::Hash;

use fairq_core::fair::{FairQueue, Full};

use crate::fair_error::FairPushError;
use crate::handoff::Store;
use crate::room::RoomWaiters;
use crate::sync::{lock, Mutex, MutexGuard};

pub(crate) struct FairState<K, T> {
    pub(crate) fair: FairQueue<K, T>,
    /// Items given back (`put_head`, dropped futures): served before the fair schedule.
    pub(crate) returned: VecDeque<(K, T)>,
}

pub(crate) struct FairItems<K, T> {
    state: Mutex<FairState<K, T>>,
    /// Producers waiting for room (bounded queues only).
    pub(crate) room: RoomWaiters,
}

impl<K, T> FairItems<K, T> {
    pub(crate) fn new(fair: FairQueue<K, T>) -> Self {
        FairItems {
            state: Mutex::new(FairState {
                fair,
                returned: VecDeque::new(),
            }),
            room: RoomWaiters::new(),
        }
    }

    /// The critical section: held for one queue operation, never while waking anyone.
    pub(crate) fn lock(&self) -> MutexGuard<'_, FairState<K, T>> {
        lock(&self.state)
    }
}

impl<K: Eq + Hash + Clone, T> FairItems<K, T> {
    /// Pushes under the fair queue's bound (given-back items are held apart and don't
    /// count against it, as in `WaitQueue`).
    pub(crate) fn push(&self, key: K, item: T) -> Result<(), FairPushError<K, T>> {
        self.lock()
            .fair
            .push(key, item)
            .map_err(|Full { key, item, len }| FairPushError::Full { key, item, len })
    }
}

impl<K: Eq + Hash + Clone, T> Store for FairItems<K, T> {
    type Item = (K, T);

    fn pop(&self) -> Option<(K, T)> {
        let mut state = self.lock();
        if let Some(entry) = state.returned.pop_front() {
            return Some(entry);
        }
        let entry = state.fair.pop_with_key()?;
        let bounded = state.fair.capacity().is_some();
        drop(state);
        if bounded {
            self.room.room_made(1);
        }
        Some(entry)
    }

    fn put_back(&self, entry: (K, T)) {
        self.lock().returned.push_back(entry);
    }
}
