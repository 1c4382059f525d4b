//! Power loss on a simulated disk at a random moment: after the restart, the store holds the
//! state after some prefix of the requests that includes every request acknowledged as
//! durable. Only claims, which return before their record is synced, may be missing from the
//! end, and only in order (the journal is a prefix of the changes); the one request whose
//! write was cut may be there or not. Never less, never a mix.

mod common;

use std::time::Duration;

use common::START;
use fairq_core::retry::RetryPolicy;
use fairq_file::{FileBackend, FileOptions};
use fairq_journal::sim::SimDisk;
use fairq_worker::memory::store::{Record, Store};
use fairq_worker::{
    Backend, BackendError, Failure, Job, JobId, JobInfo, ListFilter, ManualClock, NewJob, Purge,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Enqueue(u8),
    EnqueueMany(u8),
    Claim(usize),
    Complete(prop::sample::Index),
    Fail(prop::sample::Index),
    Purge,
    Advance,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..3).prop_map(Op::Enqueue),
        1 => (1u8..5).prop_map(Op::EnqueueMany),
        3 => (1usize..4).prop_map(Op::Claim),
        3 => any::<prop::sample::Index>().prop_map(Op::Complete),
        1 => any::<prop::sample::Index>().prop_map(Op::Fail),
        1 => Just(Op::Purge),
        1 => Just(Op::Advance),
    ]
}

fn new_job(key: u8) -> NewJob {
    NewJob::new("p", "kind", vec![key; 40])
        .key(format!("k{key}"))
        .retry(RetryPolicy::new(1))
}

/// The reference's records and id counter at one moment.
type Saved = (Vec<(JobId, Record)>, u64);

fn save(model: &Store) -> Saved {
    let all = model.list(&ListFilter::default().limit(usize::MAX));
    let records = all
        .iter()
        .map(|j| (j.id, model.record(j.id).cloned().unwrap()))
        .collect();
    (records, model.next_id())
}

/// The saved reference state as a store reopened at `now` would show it.
fn reopened((records, next_id): &Saved, now: u64) -> Vec<JobInfo> {
    let records = records.iter().map(|(id, record)| {
        let mut record = record.clone();
        record.expire_lease(now);
        (*id, record)
    });
    let mut store = Store::restore(records, *next_id, now);
    store.rescue("p", now, &mut || 0);
    store.list(&ListFilter::default().limit(usize::MAX))
}

/// Applies `op` to the reference and to the store; the store's answer or error.
async fn apply(
    op: &Op,
    model: &mut Store,
    file: &FileBackend,
    clock: &ManualClock,
    claims: &mut Vec<Job>,
) -> Result<(), BackendError> {
    let now = common_now(clock);
    match op {
        Op::Enqueue(key) => {
            model.enqueue_many(vec![new_job(*key)], now).unwrap();
            file.enqueue(new_job(*key)).await.map(drop)
        }
        Op::EnqueueMany(n) => {
            let jobs: Vec<NewJob> = (0..*n).map(new_job).collect();
            model.enqueue_many(jobs.clone(), now).unwrap();
            file.enqueue_many(jobs).await.map(drop)
        }
        Op::Claim(max) => {
            let lease = Duration::from_secs(30);
            let jobs = model.claim("p", *max, lease, now);
            claims.extend(jobs.iter().cloned());
            file.claim("p", *max, lease).await.map(drop)
        }
        Op::Complete(i) if !claims.is_empty() => {
            let job = claims[i.index(claims.len())].clone();
            let claim = job.claim;
            let _ = model.complete(claim, now);
            file.complete(claim).await.or_else(refusal)
        }
        Op::Fail(i) if !claims.is_empty() => {
            let job = claims[i.index(claims.len())].clone();
            let claim = job.claim;
            let _ = model.fail(claim, Failure::retryable("x"), now, 0);
            file.fail(&job, Failure::retryable("x"))
                .await
                .map(drop)
                .or_else(refusal)
        }
        Op::Purge => {
            let purge = Purge::default();
            model.purge(&purge);
            file.purge(purge).await.map(drop)
        }
        Op::Advance => {
            clock.advance(Duration::from_millis(700));
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A refusal by the state machine (stale lease, ...) is an answer, not a store failure.
fn refusal(e: BackendError) -> Result<(), BackendError> {
    match e {
        BackendError::Store(_) | BackendError::Unavailable(_) => Err(e),
        _ => Ok(()),
    }
}

fn common_now(clock: &ManualClock) -> u64 {
    use fairq_worker::Clock;
    clock.now()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn power_loss_keeps_every_acknowledged_change(
        ops in prop::collection::vec(op(), 1..30),
        crash_after in 0u64..400,
        seed in any::<u64>(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let disk = SimDisk::new(seed);
            let clock = ManualClock::new(START);
            let options = FileOptions::default().clock(clock.clone()).storage(disk.clone());
            let file = FileBackend::open(dir.path(), options.clone()).unwrap();
            disk.schedule_crash(crash_after);
            let mut model = Store::default();
            let mut claims = Vec::new();
            // The reference after each request (the first: before any).
            let mut states = vec![save(&model)];
            // The last state the disk must hold at least: after the last request that was
            // acknowledged as durable (a claim is acknowledged before it is synced).
            let mut durable = 0;
            let mut failed = false;
            for op in &ops {
                let durable_request = match op {
                    Op::Enqueue(_) | Op::EnqueueMany(_) | Op::Purge => true,
                    Op::Complete(_) | Op::Fail(_) => !claims.is_empty(),
                    Op::Claim(_) | Op::Advance => false,
                };
                let answer = apply(op, &mut model, &file, &clock, &mut claims).await;
                states.push(save(&model));
                if answer.is_err() {
                    failed = true;
                    break;
                }
                if durable_request {
                    durable = states.len() - 1;
                }
            }
            if !disk.is_dead() {
                disk.crash();
            }
            drop(file);
            disk.restart();
            let file = FileBackend::open(dir.path(), options).unwrap();
            let now = common_now(&clock);
            let got = file.list(ListFilter::default().limit(usize::MAX)).await.unwrap();
            // Without a failure the last state is the one after the last request; with one,
            // the failed request's write may or may not have made it.
            let allowed: Vec<Vec<JobInfo>> =
                states[durable..].iter().map(|s| reopened(s, now)).collect();
            prop_assert!(
                allowed.contains(&got),
                "after the crash the store is not a state between the last durable request and the end (failed: {failed}):\n{got:?}\nallowed: {allowed:?}"
            );
            Ok(())
        })?;
    }
}
