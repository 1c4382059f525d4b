//! The client's copy of the queue registry: each queue's number (the low 16 bits of its
//! jobs' ids), kept in one deployment-wide hash that is written once per queue ever
//! (`queues.rs` reads and writes that hash).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The client's copy of the registry (numbers never change once given).
#[derive(Default)]
pub(crate) struct Registry {
    names: Mutex<HashMap<u16, Arc<str>>>,
    numbers: Mutex<HashMap<String, u16>>,
}

impl Registry {
    /// Caches that queue `name` has `number`; returns the name, shared.
    pub(crate) fn remember(&self, number: u16, name: &str) -> Arc<str> {
        let name: Arc<str> = Arc::from(name);
        if let Ok(mut names) = self.names.lock() {
            names.insert(number, Arc::clone(&name));
        }
        if let Ok(mut numbers) = self.numbers.lock() {
            numbers.insert(name.to_string(), number);
        }
        name
    }

    /// The cached name of queue `number`.
    pub(crate) fn name(&self, number: u16) -> Option<Arc<str>> {
        self.names.lock().ok()?.get(&number).cloned()
    }

    /// The cached number of queue `name`.
    pub(crate) fn number(&self, name: &str) -> Option<u16> {
        self.numbers.lock().ok()?.get(name).copied()
    }

    /// Forgets every queue (the registry hash was deleted).
    pub(crate) fn clear(&self) {
        if let Ok(mut names) = self.names.lock() {
            names.clear();
        }
        if let Ok(mut numbers) = self.numbers.lock() {
            numbers.clear();
        }
    }
}
