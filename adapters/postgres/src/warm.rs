//! Warming up: the pool's connections opened and the worker's statements readied before the
//! first claims.
//!
//! A new server connection costs a process on the server, and its first run of each
//! statement costs parsing, planning and loading the catalog entries of every table and index
//! the statement touches: the claim's and the settlement's first runs took 3 to 30 ms each
//! on a fresh connection, against about 1 ms warm. A worker that starts on a cold pool
//! otherwise pays that on its first claims and settlements, one connection at a time as its
//! calls overlap.

use std::time::Duration;

use fairq_worker::BackendError;
use futures::future::try_join_all;

use crate::claim::ClaimArgs;
use crate::core::Core;
use crate::settle::Plan;
use crate::sql::SETTLE_BEGIN;

impl Core {
    /// Opens up to `calls` connections of the pool at once (at least one, at most the pool's
    /// size) and runs on each a claim of no job and a settlement of nothing, which prepare,
    /// plan and run the two statements without changing a row; the heartbeat is prepared
    /// too. The connections go back to the pool, open.
    pub(crate) async fn warm_up(&self, calls: usize) -> Result<(), BackendError> {
        let n = calls.clamp(1, self.options.pool_size.max(1));
        // Every connection is held until all are warm, so that the pool opens `n` of them
        // rather than handing the first one out again; then all go back at once.
        try_join_all((0..n).map(|_| self.warm_one()))
            .await
            .map(drop)
    }

    async fn warm_one(&self) -> Result<deadpool_postgres::Object, BackendError> {
        let client = self.client().await?;
        let now = self.now();
        // A claim of at most no job reads no row, locks nothing and advances no round, so the
        // queue it names does not matter (statements take the queue as a parameter); it runs
        // as every claim does, in its own transaction under the claim's plan settings.
        let args = ClaimArgs::new("", 0, now, Duration::ZERO);
        let claim = client
            .prepare_cached(&self.sql.claim)
            .await
            .map_err(|e| self.err(e))?;
        let (client, none) = self.claim_alone(client, &claim, &args).await?;
        debug_assert!(none.is_empty());
        // A settlement of no entry deletes, archives and notifies nothing; it runs as every
        // settlement does, under the settlement's plan setting, so the plan it makes is the
        // one later settlements use.
        let plan = Plan::new(Vec::new(), now, &*self.random);
        let args = plan.args();
        let settle = client
            .prepare_cached(&self.sql.settle)
            .await
            .map_err(|e| self.err(e))?;
        let (client, _) = self
            .alone(
                client,
                SETTLE_BEGIN,
                &settle,
                &args.params(&self.sql.due_channel),
            )
            .await?;
        client
            .prepare_cached(&self.sql.heartbeat)
            .await
            .map_err(|e| self.err(e))?;
        Ok(client)
    }
}
