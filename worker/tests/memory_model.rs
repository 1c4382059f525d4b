//! MemoryBackend against a plain reference model, over random sequences of enqueues (with
//! delays, retry budgets and dependencies), claims, completions, failures, heartbeats,
//! stale-token calls, rescues and clock moves.

use std::collections::HashMap;
use std::time::Duration;

use fairq_core::job::{DeadReason, Millis, Outcome};
use fairq_core::retry::RetryPolicy;
use fairq_worker::{
    Backend, Claim, Clock, Failure, Job, JobId, JobStatus, ManualClock, MemoryBackend, NewJob,
};
use futures::executor::block_on;
use proptest::prelude::*;

const LEASE: Duration = Duration::from_millis(500);
const LEASE_MS: Millis = 500;

#[derive(Debug, Clone)]
enum Op {
    Enqueue {
        key: u8,
        delay: u64,
        retries: u32,
        retry_delay: u64,
        after: Option<usize>,
    },
    Claim(usize),
    Complete(usize),
    Fail(usize),
    Heartbeat(usize),
    Stale(usize),
    Advance(u64),
    Rescue,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..4, 0u64..3, 0u32..3, 0u64..3, proptest::option::weighted(0.3, 0usize..64))
            .prop_map(|(key, delay, retries, retry_delay, after)| Op::Enqueue {
                key,
                delay: delay * 100,
                retries,
                retry_delay: retry_delay * 100,
                after,
            }),
        3 => (1usize..4).prop_map(Op::Claim),
        2 => any::<usize>().prop_map(Op::Complete),
        2 => any::<usize>().prop_map(Op::Fail),
        1 => any::<usize>().prop_map(Op::Heartbeat),
        1 => any::<usize>().prop_map(Op::Stale),
        2 => (0u64..700).prop_map(Op::Advance),
        1 => Just(Op::Rescue),
    ]
}

#[derive(Debug, Clone, PartialEq)]
enum St {
    /// Blocked on the model's job at this index; due at its own run time once released.
    Blocked(usize, Millis),
    Waiting(Millis),
    Running {
        claim: Claim,
        deadline: Millis,
    },
    Succeeded,
    Dead,
}

#[derive(Debug, Clone)]
struct MJob {
    id: JobId,
    state: St,
    attempts: u32,
    retries: u32,
    retry_delay: u64,
}

impl MJob {
    fn status(&self) -> JobStatus {
        match self.state {
            St::Blocked(..) => JobStatus::Blocked,
            St::Waiting(_) if self.attempts == 0 => JobStatus::Scheduled,
            St::Waiting(_) => JobStatus::Retrying,
            St::Running { .. } => JobStatus::Running,
            St::Succeeded => JobStatus::Succeeded,
            St::Dead => JobStatus::Dead,
        }
    }

    /// Applies a failed attempt at `now`.
    fn failed(&mut self, now: Millis) -> Outcome {
        if self.attempts > self.retries {
            self.state = St::Dead;
            Outcome::Dead {
                reason: DeadReason::RetriesExhausted,
            }
        } else {
            let run_at = now + self.retry_delay;
            self.state = St::Waiting(run_at);
            Outcome::Retry { run_at }
        }
    }
}

fn running(model: &[MJob]) -> Vec<usize> {
    model
        .iter()
        .enumerate()
        .filter(|(_, j)| matches!(j.state, St::Running { .. }))
        .map(|(i, _)| i)
        .collect()
}

fn release(model: &mut [MJob], done: usize, now: Millis) {
    for job in model.iter_mut() {
        if let St::Blocked(dep, run_at) = job.state {
            if dep == done {
                // Due at the later of its own time and its release.
                job.state = St::Waiting(run_at.max(now));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn memory_backend_matches_the_model(ops in proptest::collection::vec(op(), 1..80)) {
        let clock = ManualClock::new(1_000_000);
        let store = MemoryBackend::with_clock(clock.clone());
        let mut model: Vec<MJob> = Vec::new();
        let mut old_claims: Vec<Claim> = Vec::new();
        // Every job a claim handed out, by its claim, for calls that take the job.
        let mut handed: HashMap<Claim, Job> = HashMap::new();

        for op in ops {
            let now = clock.now();
            match op {
                Op::Enqueue { key, delay, retries, retry_delay, after } => {
                    let policy = RetryPolicy::new(retries)
                        .with_delays([Duration::from_millis(retry_delay)]);
                    let mut job = NewJob::new("q", "k", vec![key])
                        .key(format!("k{key}"))
                        .delay(Duration::from_millis(delay))
                        .retry(policy);
                    let dep = after.filter(|i| *i < model.len());
                    if let Some(i) = dep {
                        job = job.after(model[i].id);
                    }
                    let id = block_on(store.enqueue(job)).unwrap();
                    let state = match dep {
                        Some(i) if model[i].state != St::Succeeded => St::Blocked(i, now + delay),
                        _ => St::Waiting(now + delay),
                    };
                    model.push(MJob { id, state, attempts: 0, retries, retry_delay });
                }
                Op::Claim(max) => {
                    let due = model
                        .iter()
                        .filter(|j| matches!(j.state, St::Waiting(at) if at <= now))
                        .count();
                    let jobs = block_on(store.claim("q", max, LEASE)).unwrap();
                    prop_assert_eq!(jobs.len(), max.min(due), "claims take what is due");
                    for job in jobs {
                        let m = model.iter_mut().find(|m| m.id == job.claim.id).unwrap();
                        prop_assert!(matches!(m.state, St::Waiting(at) if at <= now),
                            "claimed job {} was not due: {:?}", m.id, m.state);
                        m.attempts += 1;
                        prop_assert_eq!(job.attempt, m.attempts);
                        prop_assert_eq!(job.lease_deadline, now + LEASE_MS);
                        m.state = St::Running { claim: job.claim, deadline: now + LEASE_MS };
                        handed.insert(job.claim, job);
                    }
                }
                Op::Complete(pick) | Op::Fail(pick) | Op::Heartbeat(pick) => {
                    let held = running(&model);
                    if held.is_empty() {
                        continue;
                    }
                    let i = held[pick % held.len()];
                    let St::Running { claim, deadline } = model[i].state.clone() else {
                        unreachable!()
                    };
                    match op {
                        Op::Complete(_) => {
                            block_on(store.complete(claim)).unwrap();
                            model[i].state = St::Succeeded;
                            old_claims.push(claim);
                            release(&mut model, i, now);
                        }
                        Op::Fail(_) => {
                            let got = block_on(store.fail(&handed[&claim], Failure::retryable("x"))).unwrap();
                            let want = model[i].failed(now);
                            prop_assert_eq!(got, want);
                            old_claims.push(claim);
                        }
                        _ => {
                            let got = block_on(store.heartbeat(claim, LEASE)).unwrap();
                            let want = (now + LEASE_MS).max(deadline);
                            prop_assert_eq!(got, want);
                            model[i].state = St::Running { claim, deadline: want };
                        }
                    }
                }
                Op::Stale(pick) => {
                    if old_claims.is_empty() {
                        continue;
                    }
                    let claim = old_claims[pick % old_claims.len()];
                    prop_assert!(block_on(store.complete(claim)).is_err());
                    prop_assert!(block_on(store.fail(&handed[&claim], Failure::retryable("late"))).is_err());
                    prop_assert!(block_on(store.heartbeat(claim, LEASE)).is_err());
                }
                Op::Advance(ms) => clock.advance(Duration::from_millis(ms)),
                Op::Rescue => {
                    let mut expected = 0;
                    for job in model.iter_mut() {
                        if let St::Running { claim, deadline } = job.state.clone() {
                            if deadline <= now {
                                job.failed(now);
                                old_claims.push(claim);
                                expected += 1;
                            }
                        }
                    }
                    prop_assert_eq!(block_on(store.rescue("q")).unwrap(), expected);
                }
            }

            // Every job agrees with the model.
            for m in &model {
                let info = block_on(store.get(m.id)).unwrap().unwrap();
                prop_assert_eq!(info.status(), m.status(), "job {}: {:?}", m.id, info.state);
                prop_assert_eq!(info.attempts, m.attempts);
                if let St::Waiting(at) = m.state {
                    prop_assert_eq!(info.state.name(), m.status().as_str());
                    let run_at = match info.state {
                        fairq_core::job::State::Scheduled { run_at }
                        | fairq_core::job::State::Retrying { run_at } => run_at,
                        _ => unreachable!(),
                    };
                    prop_assert_eq!(run_at, at, "job {} is due at its time", m.id);
                }
            }
            let counts = store.counts("q");
            prop_assert_eq!(counts.total() as usize, model.len());
        }
    }
}
