//! Power loss on a simulated disk at a random moment: after the restart, the store holds
//! exactly the state after the last acknowledged request, or (for the one request whose write
//! was cut) after that request: never less, never a mix.

mod common;

use std::time::Duration;

use common::START;
use fairq_core::retry::RetryPolicy;
use fairq_file::{FileBackend, FileOptions};
use fairq_journal::sim::SimDisk;
use fairq_worker::memory::store::Store;
use fairq_worker::{
    Backend, BackendError, Claim, Failure, JobInfo, ListFilter, ManualClock, NewJob, Purge,
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

/// The reference state as a reopened store would show it.
fn reopened(model: &Store, now: u64) -> Vec<JobInfo> {
    let all = model.list(&ListFilter::default().limit(usize::MAX));
    let records = all.iter().map(|j| {
        let mut record = model.record(j.id).cloned().unwrap();
        record.expire_lease(now);
        (j.id, record)
    });
    let mut store = Store::restore(records, model.next_id(), now);
    store.rescue("p", now, &mut || 0);
    store.list(&ListFilter::default().limit(usize::MAX))
}

/// Applies `op` to the reference and to the store; the store's answer or error.
async fn apply(
    op: &Op,
    model: &mut Store,
    file: &FileBackend,
    clock: &ManualClock,
    claims: &mut Vec<Claim>,
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
            claims.extend(jobs.iter().map(|j| j.claim));
            file.claim("p", *max, lease).await.map(drop)
        }
        Op::Complete(i) if !claims.is_empty() => {
            let claim = claims[i.index(claims.len())];
            let _ = model.complete(claim, now);
            file.complete(claim).await.or_else(refusal)
        }
        Op::Fail(i) if !claims.is_empty() => {
            let claim = claims[i.index(claims.len())];
            let _ = model.fail(claim, Failure::retryable("x"), now, 0);
            file.fail(claim, Failure::retryable("x"))
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
            // The reference before the request that failed, if one did.
            let mut before_failure = None;
            for op in &ops {
                let before = reopened(&model, common_now(&clock));
                if apply(op, &mut model, &file, &clock, &mut claims).await.is_err() {
                    before_failure = Some(before);
                    break;
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
            let after = reopened(&model, now);
            match before_failure {
                None => prop_assert_eq!(&got, &after),
                Some(before) => prop_assert!(
                    got == before || got == after,
                    "after the cut write the store is neither before nor after it:\n{got:?}\nbefore: {before:?}\nafter: {after:?}"
                ),
            }
            Ok(())
        })?;
    }
}
