//! The worker's batched path: claims, settlements (optionally followed by the next claim in
//! the same script call), lease extensions and hand-backs. A batch goes out as one script call
//! per queue, all sent at once; on one queue that is one round trip.

use std::sync::Arc;
use std::time::Duration;

use fairq_core::job::{DeadReason, Outcome};
use fairq_worker::{BackendError, Claim, Each, Finished, Job, JobId, Settled, SettledAndClaimed};
use futures::future::join_all;
use redis::Value;

use crate::backend::RedisBackend;
use crate::call::Call;
use crate::keys::queue_number;
use crate::record::{self, count, lease_ms, ms, reason_name, refusal, text};

/// A batch split by queue: each queue with the positions of its entries, and the positions
/// whose id names no queue.
struct Split {
    groups: Vec<(Arc<str>, Vec<usize>)>,
    unknown: Vec<usize>,
}

/// The claim that follows a settlement.
pub(crate) struct Next<'a> {
    pub(crate) queue: &'a str,
    pub(crate) max: usize,
    pub(crate) lease: Duration,
}

impl RedisBackend {
    /// Splits ids by the queue their number names.
    async fn split(&self, ids: impl Iterator<Item = JobId>) -> Result<Split, BackendError> {
        let mut split = Split {
            groups: Vec::new(),
            unknown: Vec::new(),
        };
        let mut numbers: Vec<(u16, usize)> = Vec::new();
        for (i, id) in ids.enumerate() {
            numbers.push((queue_number(id.0), i));
        }
        let mut seen: Vec<(u16, Option<usize>)> = Vec::new();
        for (number, i) in numbers {
            let group = match seen.iter().find(|(n, _)| *n == number) {
                Some((_, group)) => *group,
                None => {
                    let group = match self.queue_named(number).await? {
                        Some(queue) => {
                            split.groups.push((queue, Vec::new()));
                            Some(split.groups.len() - 1)
                        }
                        None => None,
                    };
                    seen.push((number, group));
                    group
                }
            };
            match group {
                Some(g) => split.groups[g].1.push(i),
                None => split.unknown.push(i),
            }
        }
        Ok(split)
    }

    /// Claims up to `max` jobs of `queue` (a name [`fairq_worker::check_queue_name`] passed).
    pub(crate) async fn claim_jobs(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<Vec<Job>, BackendError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let now = self.now();
        let reply = self
            .run(Call::new(
                &self.inner.scripts.claim,
                self.inner.keys.queue_base(queue),
                vec![
                    ms(now).into_bytes(),
                    count(max).into_bytes(),
                    lease_ms(now, lease).into_bytes(),
                    count(self.inner.options.promote_limit.max(1)).into_bytes(),
                ],
            ))
            .await?;
        Ok(self.claimed(queue, &reply).await)
    }

    /// The jobs of a claim reply. A job whose stored fields do not make a job is settled as
    /// dead at once (with an error naming the problem) instead of failing the whole claim.
    async fn claimed(&self, queue: &str, reply: &Value) -> Vec<Job> {
        let mut jobs = Vec::new();
        let mut broken = Vec::new();
        for row in record::array(reply) {
            match record::claimed(queue, row) {
                Ok(job) => jobs.push(job),
                Err(err) => {
                    tracing::warn!(queue, error = %err, "a claimed job's record is unreadable");
                    if let Some(claim) = record::claim_of(row) {
                        broken.push((claim, err.to_string()));
                    }
                }
            }
        }
        if !broken.is_empty() {
            let args = self.broken_args(&broken);
            let call = Call::new(
                &self.inner.scripts.settle,
                self.inner.keys.queue_base(queue),
                args,
            )
            .retried_at(1);
            if let Err(err) = self.run(call).await {
                tracing::warn!(queue, error = %err, "unreadable jobs not set aside; their leases will expire");
            }
        }
        jobs
    }

    /// Settle arguments that record each broken claim as dead.
    fn broken_args(&self, broken: &[(Claim, String)]) -> Vec<Vec<u8>> {
        let now = self.now();
        let mut args = vec![
            ms(now).into_bytes(),
            b"0".to_vec(),
            self.keep_arg(),
            self.request_keep_arg(),
            broken.len().to_string().into_bytes(),
        ];
        for (claim, why) in broken {
            args.push(claim.id.0.to_string().into_bytes());
            args.push(claim.token.0.to_string().into_bytes());
            args.push(b"dead".to_vec());
            args.push(ms(now).into_bytes());
            args.push(reason_name(DeadReason::Discarded).as_bytes().to_vec());
            args.push(format!("unreadable record: {why}").into_bytes());
        }
        args
    }

    /// `settle.lua`'s `keep` argument: whether this process keeps succeeded jobs
    /// ([`RedisOptions::keep_succeeded`](crate::RedisOptions::keep_succeeded)).
    fn keep_arg(&self) -> Vec<u8> {
        if self.inner.options.keep_succeeded {
            b"1".to_vec()
        } else {
            b"0".to_vec()
        }
    }

    /// Settles `batch`, then claims `next` if given.
    pub(crate) async fn settle_batch(
        &self,
        batch: Vec<Finished>,
        next: Option<Next<'_>>,
    ) -> Result<SettledAndClaimed, BackendError> {
        let now = self.now();
        let split = self.split(batch.iter().map(|f| f.claim.id)).await?;
        let mut answers: Vec<Option<Result<Settled, BackendError>>> =
            (0..batch.len()).map(|_| None).collect();
        for &i in &split.unknown {
            answers[i] = Some(Err(BackendError::NotFound(batch[i].claim.id)));
        }
        let mut groups = split.groups;
        // The claim rides in the settlement's script when every entry is of the claim's queue
        // (a worker's batch). Entries of other queues may release dependents into the claim's
        // queue only after their scripts answered, so then the claim follows as a call of its
        // own, after the settlement, as the reference store orders them.
        let mut next_after = None;
        if let Some(next) = &next {
            if groups.iter().any(|(q, _)| **q != *next.queue) {
                next_after = Some((next.queue, next.max, next.lease));
            } else if next.max > 0 && groups.is_empty() {
                groups.push((Arc::from(next.queue), Vec::new()));
            }
        }
        let next = next.filter(|_| next_after.is_none());
        let mut calls = Vec::with_capacity(groups.len());
        for (queue, positions) in &groups {
            let mut args = Vec::with_capacity(8 + positions.len() * 6);
            args.push(ms(now).into_bytes());
            args.push(b"0".to_vec());
            args.push(self.keep_arg());
            args.push(self.request_keep_arg());
            args.push(positions.len().to_string().into_bytes());
            for &i in positions {
                let finished = &batch[i];
                args.push(finished.claim.id.0.to_string().into_bytes());
                args.push(finished.claim.token.0.to_string().into_bytes());
                // Core decides; the script applies.
                let (verdict, run_at, reason) = match finished.verdict(now, self.random()) {
                    None => ("ok", now, ""),
                    Some(Outcome::Retry { run_at }) => ("retry", run_at, ""),
                    Some(Outcome::Dead { reason }) => ("dead", now, reason_name(reason)),
                };
                args.push(verdict.as_bytes().to_vec());
                args.push(ms(run_at).into_bytes());
                args.push(reason.as_bytes().to_vec());
                args.push(
                    finished
                        .failure()
                        .map_or(Vec::new(), |f| f.stored_message().as_bytes().to_vec()),
                );
            }
            if let Some(next) = next.as_ref().filter(|n| *n.queue == **queue) {
                args.push(count(next.max).into_bytes());
                args.push(lease_ms(now, next.lease).into_bytes());
                args.push(count(self.inner.options.promote_limit.max(1)).into_bytes());
            }
            calls.push(
                Call::new(
                    &self.inner.scripts.settle,
                    self.inner.keys.queue_base(queue),
                    args,
                )
                .retried_at(1)
                .acknowledged(),
            );
        }
        let replies = join_all(calls.into_iter().map(|call| self.run(call))).await;
        if !replies.is_empty() && replies.iter().all(Result::is_err) && split.unknown.is_empty() {
            // Nothing is known of any entry.
            if let Some(Err(err)) = replies.into_iter().next() {
                return Err(err);
            }
            return Err(BackendError::Store("no reply".into()));
        }
        let mut claimed = Ok(Vec::new());
        for ((queue, positions), reply) in groups.iter().zip(replies) {
            let is_next = next.as_ref().is_some_and(|n| *n.queue == **queue);
            let reply = match reply {
                Ok(reply) => reply,
                Err(err) => {
                    for &i in positions {
                        answers[i] = Some(Err(crate::error::copy_of(&err)));
                    }
                    if is_next {
                        claimed = Err(err);
                    }
                    continue;
                }
            };
            let parts = record::array(&reply);
            let (settled, jobs) = match parts {
                [settled, jobs] => (record::array(settled), jobs),
                _ => {
                    let err = crate::error::corrupt("settle reply", format!("{reply:?}"));
                    for &i in positions {
                        answers[i] =
                            Some(Err(crate::error::corrupt("settle reply", "not two parts")));
                    }
                    if is_next {
                        claimed = Err(err);
                    }
                    continue;
                }
            };
            for (slot, &i) in positions.iter().enumerate() {
                let claim = batch[i].claim;
                let answer = settled.get(slot).map(|a| self.answer(queue, claim, now, a));
                answers[i] = Some(match answer {
                    Some(Ok((settled, dependents))) => {
                        self.release_dependents(claim.id, &dependents).await;
                        Ok(settled)
                    }
                    Some(Err(err)) => Err(err),
                    None => Err(crate::error::corrupt(
                        "settle reply",
                        "an answer is missing",
                    )),
                });
            }
            if is_next {
                claimed = Ok(self.claimed(queue, jobs).await);
            }
        }
        if let Some((queue, max, lease)) = next_after {
            claimed = self.claim_jobs(queue, max, lease).await;
        }
        self.maybe_flush_timing();
        Ok(SettledAndClaimed {
            settled: answers
                .into_iter()
                .map(|a| a.unwrap_or_else(|| Err(BackendError::Store("no answer".into()))))
                .collect(),
            claimed,
        })
    }

    /// One entry's answer: what the attempt led to and its dependents in other queues.
    fn answer(
        &self,
        queue: &Arc<str>,
        claim: Claim,
        now: u64,
        answer: &Value,
    ) -> Result<(Settled, Vec<String>), BackendError> {
        let fields: Vec<String> = record::array(answer)
            .iter()
            .map(|v| text(v).unwrap_or_default())
            .collect();
        let field = |i: usize| fields.get(i).map(String::as_str).unwrap_or("");
        let settled = match field(0) {
            "ok" => Settled::Succeeded,
            "retry" => Settled::Retry {
                run_at: field(2)
                    .parse()
                    .map_err(|_| crate::error::corrupt("settle reply", format!("{fields:?}")))?,
            },
            "dead" => Settled::Dead {
                reason: record::dead_reason(field(2)),
            },
            _ => return Err(refusal(claim.id, claim.token, &fields)),
        };
        // Empty when a repeated success found its job deleted by the first try (not kept):
        // that attempt's run time is unknown and not recorded.
        if let Ok(claimed_at) = field(1).parse::<u64>() {
            self.inner
                .timing
                .record(queue, now.saturating_sub(claimed_at));
        }
        let dependents = if settled == Settled::Succeeded {
            fields[2..].to_vec()
        } else {
            Vec::new()
        };
        Ok((settled, dependents))
    }

    /// Extends many leases, one script call per queue.
    pub(crate) async fn heartbeat_claims(
        &self,
        claims: Vec<Claim>,
        lease: Duration,
    ) -> Result<Each<u64>, BackendError> {
        let now = self.now();
        let replies = self
            .per_queue(&claims, &self.inner.scripts.heartbeat, false, |args| {
                args.push(ms(now).into_bytes());
                args.push(lease_ms(now, lease).into_bytes());
            })
            .await?;
        Ok(replies
            .into_iter()
            .zip(&claims)
            .map(|(answer, claim)| {
                let fields = answer?;
                match fields.first().map(String::as_str) {
                    Some("ok") => fields.get(1).and_then(|s| s.parse().ok()).ok_or_else(|| {
                        crate::error::corrupt("heartbeat reply", format!("{fields:?}"))
                    }),
                    _ => Err(refusal(claim.id, claim.token, &fields)),
                }
            })
            .collect())
    }

    /// Hands claimed jobs back, one script call per queue. A call repeated after its reply was
    /// lost answers what its first try did (kept under a request id for the client's whole
    /// retry window, see `handback.lua`), and so does a first try that reaches the server
    /// after its repeat: a hand-back leaves the token as it was, so a repeat could not tell
    /// its own hand-back from a stale claim.
    pub(crate) async fn hand_back(&self, claims: Vec<Claim>) -> Result<Each<()>, BackendError> {
        let now = self.now();
        let replies = self
            .per_queue(&claims, &self.inner.scripts.handback, true, |args| {
                args.push(ms(now).into_bytes());
                args.push(self.request_id().into_bytes());
                args.push(self.request_keep_arg());
            })
            .await?;
        Ok(replies
            .into_iter()
            .zip(&claims)
            .map(|(answer, claim)| {
                let fields = answer?;
                match fields.first().map(String::as_str) {
                    Some("ok") => Ok(()),
                    _ => Err(refusal(claim.id, claim.token, &fields)),
                }
            })
            .collect())
    }

    /// Runs `named` once per queue of `claims` with the arguments `head` writes followed by
    /// (id, token) pairs; returns each claim's answer as strings, in order.
    async fn per_queue(
        &self,
        claims: &[Claim],
        named: &crate::scripts::Named,
        acknowledged: bool,
        head: impl Fn(&mut Vec<Vec<u8>>),
    ) -> Result<Vec<Result<Vec<String>, BackendError>>, BackendError> {
        let split = self.split(claims.iter().map(|c| c.id)).await?;
        let mut out: Vec<Option<Result<Vec<String>, BackendError>>> =
            (0..claims.len()).map(|_| None).collect();
        for &i in &split.unknown {
            out[i] = Some(Ok(vec!["notfound".to_string()]));
        }
        let calls = split.groups.iter().map(|(queue, positions)| {
            let mut args = Vec::new();
            head(&mut args);
            for &i in positions {
                args.push(claims[i].id.0.to_string().into_bytes());
                args.push(claims[i].token.0.to_string().into_bytes());
            }
            let mut call = Call::new(named, self.inner.keys.queue_base(queue), args);
            if acknowledged {
                call = call.acknowledged();
            }
            self.run(call)
        });
        let replies = join_all(calls).await;
        if !replies.is_empty() && replies.iter().all(Result::is_err) && split.unknown.is_empty() {
            if let Some(Err(err)) = replies.into_iter().next() {
                return Err(err);
            }
            return Err(BackendError::Store("no reply".into()));
        }
        for ((_, positions), reply) in split.groups.iter().zip(replies) {
            match reply {
                Ok(reply) => {
                    let answers = record::array(&reply);
                    for (slot, &i) in positions.iter().enumerate() {
                        out[i] = Some(match answers.get(slot) {
                            Some(answer) => Ok(record::array(answer)
                                .iter()
                                .map(|v| text(v).unwrap_or_default())
                                .collect()),
                            None => Err(crate::error::corrupt(named.name, "an answer is missing")),
                        });
                    }
                }
                Err(err) => {
                    for &i in positions {
                        out[i] = Some(Err(crate::error::copy_of(&err)));
                    }
                }
            }
        }
        Ok(out
            .into_iter()
            .map(|a| a.unwrap_or_else(|| Err(BackendError::Store("no answer".into()))))
            .collect())
    }
}
