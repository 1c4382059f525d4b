//! The queue registry: each queue's number (the low 16 bits of its jobs' ids), kept in one
//! deployment-wide hash that is written once per queue ever, and cached in every client.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use fairq_worker::{BackendError, JobId};
use redis::Value;

use crate::backend::RedisBackend;
use crate::call::Call;
use crate::error::corrupt;
use crate::keys::queue_number;
use crate::record::{number, text};

/// The client's copy of the registry (numbers never change once given).
#[derive(Default)]
pub(crate) struct Registry {
    names: Mutex<HashMap<u16, Arc<str>>>,
    numbers: Mutex<HashMap<String, u16>>,
}

impl Registry {
    fn remember(&self, number: u16, name: &str) -> Arc<str> {
        let name: Arc<str> = Arc::from(name);
        if let Ok(mut names) = self.names.lock() {
            names.insert(number, Arc::clone(&name));
        }
        if let Ok(mut numbers) = self.numbers.lock() {
            numbers.insert(name.to_string(), number);
        }
        name
    }

    fn name(&self, number: u16) -> Option<Arc<str>> {
        self.names.lock().ok()?.get(&number).cloned()
    }

    fn number(&self, name: &str) -> Option<u16> {
        self.numbers.lock().ok()?.get(name).copied()
    }

    pub(crate) fn clear(&self) {
        if let Ok(mut names) = self.names.lock() {
            names.clear();
        }
        if let Ok(mut numbers) = self.numbers.lock() {
            numbers.clear();
        }
    }
}

impl RedisBackend {
    /// The number of `queue`, giving it one when it has none yet.
    pub(crate) async fn queue_number(&self, queue: &str) -> Result<u16, BackendError> {
        if let Some(number) = self.inner.registry.number(queue) {
            return Ok(number);
        }
        // Safe to repeat: a second call finds the number the first one gave.
        let call = Call::new(
            &self.inner.scripts.register,
            self.inner.keys.registry(),
            vec![queue.as_bytes().to_vec()],
        )
        .acknowledged();
        let reply = self.run(call).await?;
        if let Value::Array(items) = &reply {
            if items.first().and_then(text).as_deref() == Some("full") {
                return Err(BackendError::Full(
                    "every one of the 65,535 queue numbers of this key prefix is taken".into(),
                ));
            }
        }
        let number = number(&reply)
            .and_then(|n| u16::try_from(n).ok())
            .filter(|n| *n > 0)
            .ok_or_else(|| corrupt("queue registry", format!("number {reply:?}")))?;
        self.inner.registry.remember(number, queue);
        Ok(number)
    }

    /// The queue numbered `number`, if any.
    pub(crate) async fn queue_named(&self, number: u16) -> Result<Option<Arc<str>>, BackendError> {
        if number == 0 {
            return Ok(None);
        }
        if let Some(name) = self.inner.registry.name(number) {
            return Ok(Some(name));
        }
        let name: Option<String> = self
            .cmd_query(
                "looking up a queue",
                redis::cmd("HGET")
                    .arg(self.inner.keys.registry())
                    .arg(format!("q:{number}")),
            )
            .await?;
        Ok(name.map(|name| self.inner.registry.remember(number, &name)))
    }

    /// The queue of job `id`, if the id names one.
    pub(crate) async fn queue_of(&self, id: JobId) -> Result<Option<Arc<str>>, BackendError> {
        self.queue_named(queue_number(id.0)).await
    }

    /// Every queue that ever held a job, sorted.
    pub(crate) async fn queue_names(&self) -> Result<Vec<String>, BackendError> {
        let all: HashMap<String, String> = self
            .cmd_query(
                "listing queues",
                redis::cmd("HGETALL").arg(self.inner.keys.registry()),
            )
            .await?;
        let mut names = Vec::new();
        for (field, value) in all {
            if let Some(name) = field.strip_prefix("n:") {
                if let Ok(number) = value.parse::<u16>() {
                    self.inner.registry.remember(number, name);
                }
                names.push(name.to_string());
            }
        }
        names.sort();
        Ok(names)
    }

    /// `queue` alone, or every queue when none is given.
    pub(crate) async fn queues_for(
        &self,
        queue: &Option<String>,
    ) -> Result<Vec<String>, BackendError> {
        match queue {
            Some(queue) => Ok(vec![queue.clone()]),
            None => self.queue_names().await,
        }
    }
}
