//! Queue numbers and names: looked up in the deployment-wide registry hash, a number given
//! to a queue the first time it is used, and both cached in the client's `Registry`.

use std::collections::HashMap;
use std::sync::Arc;

use fairq_worker::{BackendError, JobId};
use redis::Value;

use crate::backend::RedisBackend;
use crate::call::Call;
use crate::error::corrupt;
use crate::keys::queue_number;
use crate::record::{number, text};

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
