//! Claims: the next jobs of a queue in fair order, alone or in the transaction that settles the
//! previous batch.
//!
//! Statements that must commit together are pipelined on one connection (`BEGIN`, the
//! statements, `COMMIT` sent back to back): one round trip and one commit. A claim that needs
//! a promotion first runs both that way; [`Core::settle_and_claim`] runs the settlement, the
//! promotion (when the settlement may have made jobs due) and the claim that way, so a batch
//! of results and the next batch of work cost a single commit.

use std::time::Duration;

use fairq_core::job::Millis;
use fairq_worker::{BackendError, Each, Finished, Job, Settled, SettledAndClaimed};
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use crate::core::Core;
use crate::pipeline::Pipelined;
use crate::promotion::Promotion;
use crate::rows::{self, deadline, to_db};
use crate::self_settled::merge;
use crate::settle::Plan;
use crate::sql::{CLAIM_BEGIN, CLAIM_PLAN, SETTLE_BEGIN};

/// The claim's parameters.
pub(crate) struct ClaimArgs<'a> {
    queue: &'a str,
    limit: i64,
    now: i64,
    deadline: i64,
}

impl<'a> ClaimArgs<'a> {
    pub(crate) fn new(queue: &'a str, max: usize, now: Millis, lease: Duration) -> ClaimArgs<'a> {
        ClaimArgs {
            queue,
            limit: i64::try_from(max).unwrap_or(i64::MAX),
            now: to_db(now),
            deadline: deadline(now, lease),
        }
    }

    pub(crate) fn params(&self) -> [&(dyn ToSql + Sync); 4] {
        [&self.queue, &self.limit, &self.now, &self.deadline]
    }
}

impl Core {
    /// Claims up to `max` ready jobs of `queue`, promoting its due jobs first when the due
    /// times say some may be waiting.
    pub(crate) async fn claim(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<Vec<Job>, BackendError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        let now = self.now();
        let args = ClaimArgs::new(queue, max, now, lease);
        let claim = client
            .prepare_cached(&self.sql.claim)
            .await
            .map_err(|e| self.err(e))?;
        let rows = match self.promotion(queue, now) {
            None => self.claim_alone(client, &claim, &args).await?.1,
            Some(promotion) => {
                let promote = client
                    .prepare_cached(&self.sql.promote)
                    .await
                    .map_err(|e| self.err(e))?;
                let (promote_params, claim_params) = (promotion.params(), args.params());
                let tx = Pipelined::new(client);
                let c = tx.client();
                let (begin, promoted, planned, claimed, commit) = tokio::join!(
                    c.batch_execute("BEGIN"),
                    c.query(&promote, &promote_params),
                    c.batch_execute(CLAIM_PLAN),
                    c.query(&claim, &claim_params),
                    c.batch_execute("COMMIT"),
                );
                drop(tx.done());
                // The first error in statement order: the later ones only say the
                // transaction was aborted.
                begin.map_err(|e| self.err(e))?;
                let promoted = promoted.map_err(|e| self.err(e))?;
                planned.map_err(|e| self.err(e))?;
                let claimed = claimed.map_err(|e| self.err(e))?;
                commit.map_err(|e| self.err(e))?;
                promotion.finish(&promoted);
                claimed
            }
        };
        rows.iter().map(|row| rows::job(row, queue)).collect()
    }

    /// The claim in a transaction of its own, under [`CLAIM_PLAN`] (see [`Core::alone`]). The
    /// warm-up runs it too, so that a connection plans its claims the same way from the
    /// first. Gives the connection back with the claimed rows.
    pub(crate) async fn claim_alone(
        &self,
        client: deadpool_postgres::Object,
        claim: &tokio_postgres::Statement,
        args: &ClaimArgs<'_>,
    ) -> Result<(deadpool_postgres::Object, Vec<Row>), BackendError> {
        self.alone(client, CLAIM_BEGIN, claim, &args.params()).await
    }

    /// Settles `batch`, then claims up to `max` jobs of `queue`, in one transaction: the
    /// settlement, a promotion of the queue when needed (due times, or a settlement that may
    /// make jobs due at once), and the claim. The claim sees what the settlement did, as if
    /// the two calls had run one after the other.
    pub(crate) async fn settle_and_claim(
        &self,
        batch: Vec<Finished>,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<SettledAndClaimed, BackendError> {
        let (done, batch) = self.self_settled.split(batch);
        let mut out = self.settle_then_claim(batch, queue, max, lease).await?;
        out.settled = merge(done, out.settled);
        Ok(out)
    }

    async fn settle_then_claim(
        &self,
        batch: Vec<Finished>,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<SettledAndClaimed, BackendError> {
        let now = self.now();
        let plan = Plan::new(batch, now, &*self.random);
        if max == 0 || plan.entries.is_empty() {
            let settled = self.settle(&plan).await?;
            let claimed = self.claim(queue, max, lease).await;
            return Ok(SettledAndClaimed { settled, claimed });
        }
        let client = self.client().await?;
        let promotion = self.promotion(queue, now).or_else(|| {
            plan.may_make_due()
                .then(|| self.forced_promotion(queue, now))
        });
        let settle = client
            .prepare_cached(&self.sql.settle)
            .await
            .map_err(|e| self.err(e))?;
        let claim = client
            .prepare_cached(&self.sql.claim)
            .await
            .map_err(|e| self.err(e))?;
        let promote = match &promotion {
            Some(_) => Some(
                client
                    .prepare_cached(&self.sql.promote)
                    .await
                    .map_err(|e| self.err(e))?,
            ),
            None => None,
        };
        let settle_args = plan.args();
        let claim_args = ClaimArgs::new(queue, max, now, lease);
        let promote_params = promotion.as_ref().map(Promotion::params);

        let settle_params = settle_args.params(&self.sql.due_channel);
        let claim_params = claim_args.params();
        let tx = Pipelined::new(client);
        let c = tx.client();
        let promoting = async {
            match (&promote, &promote_params) {
                (Some(statement), Some(params)) => Some(c.query(statement, params).await),
                _ => None,
            }
        };
        let (begin, settled, promoted, planned, claimed, commit) = tokio::join!(
            c.batch_execute(SETTLE_BEGIN),
            c.query(&settle, &settle_params),
            promoting,
            c.batch_execute(CLAIM_PLAN),
            c.query(&claim, &claim_params),
            c.batch_execute("COMMIT"),
        );
        let client = tx.done();
        // The first error in statement order: the later ones only say the transaction was
        // aborted (and the `COMMIT` rolled it back).
        let outcome = (|| {
            begin.map_err(|e| self.err(e))?;
            let settled = settled.map_err(|e| self.err(e))?;
            let promoted = promoted.transpose().map_err(|e| self.err(e))?;
            planned.map_err(|e| self.err(e))?;
            let claimed = claimed.map_err(|e| self.err(e))?;
            commit.map_err(|e| self.err(e))?;
            Ok::<_, BackendError>((settled, promoted, claimed))
        })();
        let (settled_rows, promoted_rows, claimed): (Vec<Row>, Option<Vec<Row>>, Vec<Row>) =
            match outcome {
                Ok(rows) => rows,
                Err(e) if e.is_transient() => {
                    drop(client);
                    // The commit may or may not have happened: settle again on a fresh
                    // connection, recognising what the first try did. Jobs a lost claim took
                    // come back when their leases expire.
                    let settled = self.settle_after_lost_reply(&plan).await?;
                    return Ok(SettledAndClaimed {
                        settled,
                        claimed: Err(e),
                    });
                }
                Err(e) => return Err(e),
            };
        // The claim committed: from here on its jobs are the caller's whatever else fails
        // (an error would leave them to wait for their leases to expire).
        let claimed = claimed.iter().map(|row| rows::job(row, queue)).collect();
        // A promotion that ran after the settlement already saw the jobs it made wait.
        let covered = match &promoted_rows {
            Some(rows) if !Promotion::locked_out(rows) => Some(queue),
            _ => None,
        };
        let applied = match self.absorb(&settled_rows, now, covered) {
            Ok(applied) => applied,
            Err(e) => {
                let settled = plan.unread(None, &e);
                return Ok(SettledAndClaimed { settled, claimed });
            }
        };
        if let (Some(promotion), Some(rows)) = (promotion, &promoted_rows) {
            promotion.finish(rows);
        }
        self.promote_after(&*client, &applied.due_now, now).await;
        // Explaining refused entries may take more statements (one that was refused
        // because its job changed under the statement is sent again).
        let settled: Each<Settled> = match self.answer(&*client, &plan, &applied, false).await {
            Ok(settled) => settled,
            Err(e) => plan.unread(Some(&applied), &e),
        };
        Ok(SettledAndClaimed { settled, claimed })
    }
}
