//! [`Promotion`]: making one queue's due jobs due before jobs take places in its fair order,
//! when its [`DueTimes`](crate::due::DueTimes) entry says they may be.

use fairq_core::job::Millis;
use fairq_worker::BackendError;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use crate::core::Core;
use crate::due::Ticket;
use crate::exec::Exec;
use crate::rows::{from_db, to_db};

/// A promotion of one queue, prepared so it can be pipelined before another statement on the
/// same connection.
pub(crate) struct Promotion<'a> {
    core: &'a Core,
    pub(crate) queue: &'a str,
    ticket: Ticket,
    now: i64,
    lock: String,
}

impl<'a> Promotion<'a> {
    /// The statement's parameters.
    pub(crate) fn params(&self) -> [&(dyn ToSql + Sync); 5] {
        [
            &self.queue,
            &self.now,
            &self.core.options.promote_batch,
            &self.lock,
            &self.core.sql.channel,
        ]
    }

    /// Whether the promotion left due jobs to another session that held the queue's lock.
    pub(crate) fn locked_out(rows: &[Row]) -> bool {
        rows.first()
            .and_then(|row| row.get::<_, Option<bool>>(2))
            .unwrap_or(false)
    }

    /// Records what the promotion found; wakes the queue's waiters when jobs became ready.
    pub(crate) fn finish(self, rows: &[Row]) {
        let Some(row) = rows.first() else {
            return;
        };
        let promoted: i64 = row.get(0);
        let locked_out: Option<bool> = row.get(2);
        let next: Option<i64> = row.get(3);
        if !locked_out.unwrap_or(false) {
            self.core
                .signals
                .due
                .promoted(self.queue, self.ticket, next.map(from_db));
        }
        if promoted > 0 {
            self.core.signals.wake(self.queue);
        }
    }

    /// Runs the promotion alone.
    pub(crate) async fn run(self, conn: &dyn Exec) -> Result<(), BackendError> {
        let rows = conn
            .rows(&self.core.sql.promote, &self.params())
            .await
            .map_err(|e| self.core.err(e))?;
        self.finish(&rows);
        Ok(())
    }
}

impl Core {
    /// The promotion `queue` needs before jobs take places in its fair order at `now`, if any.
    pub(crate) fn promotion<'a>(&'a self, queue: &'a str, now: Millis) -> Option<Promotion<'a>> {
        let ticket = self.signals.due.needs(
            queue,
            now,
            self.signals.listening(),
            self.options.poll_interval,
        )?;
        Some(Promotion {
            core: self,
            queue,
            ticket,
            now: to_db(now),
            lock: self.sql.promote_lock(queue),
        })
    }

    /// A promotion of `queue` whatever the due times say (to run after a write that may make
    /// jobs due, in the same transaction).
    pub(crate) fn forced_promotion<'a>(&'a self, queue: &'a str, now: Millis) -> Promotion<'a> {
        Promotion {
            core: self,
            queue,
            ticket: self.signals.due.ticket(queue),
            now: to_db(now),
            lock: self.sql.promote_lock(queue),
        }
    }

    /// Makes the due jobs of `queue` due: gives them their rounds if any may be waiting.
    pub(crate) async fn make_due(
        &self,
        conn: &dyn Exec,
        queue: &str,
        now: Millis,
    ) -> Result<(), BackendError> {
        match self.promotion(queue, now) {
            Some(promotion) => promotion.run(conn).await,
            None => Ok(()),
        }
    }

    /// Jobs of `queue` now wait until `at`: the next claim or enqueue of the queue promotes
    /// them once it has come.
    pub(crate) fn waiting(&self, queue: &str, at: Millis) {
        self.signals.due.lower(queue, at);
    }
}
