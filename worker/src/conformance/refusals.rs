//! Checks of what every store refuses, and alike: malformed jobs, queue names no job can
//! have, calls too large for one request, batches of one queue with a job that cannot go in
//! (refused whole), and failure messages no store could keep as they are. Re-exported from [`checks`](super::checks), where the suite names them.

use crate::backend::{Backend, ListFilter, Purge, ReviveTarget};
use crate::clock::ManualClock;
use crate::error::BackendError;
use crate::job::{
    Failure, JobId, JobStatus, MAX_CALL_BYTES, MAX_KEY_LEN, MAX_NAME_LEN, NewJob, OnConflict,
};
use crate::retention::Retention;
use crate::settle::{Finished, Settled};
use fairq_core::job::MAX_MILLIS;
use std::time::Duration;

use super::support::{LEASE, claim_one, new_job, status};

/// Malformed jobs get a typed error, not a panic, and nothing is stored.
pub async fn invalid_jobs_are_refused<B: Backend>(store: &B, _clock: &ManualClock) {
    let err = store
        .enqueue(NewJob::new("", "k", vec![]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, BackendError::Invalid(_)),
        "empty queue name: {err}"
    );
    let err = store
        .enqueue(NewJob::new("q", "", vec![]))
        .await
        .unwrap_err();
    assert!(matches!(err, BackendError::Invalid(_)), "empty kind: {err}");
    // Names and keys one byte past their limits.
    let long = |n: usize, seed: u64| varied_text(n + 1, seed);
    for (what, job) in [
        (
            "queue name",
            NewJob::new(long(MAX_NAME_LEN, 1), "k", vec![]),
        ),
        ("job kind", NewJob::new("q", long(MAX_NAME_LEN, 2), vec![])),
        ("fairness key", new_job("q").key(long(MAX_KEY_LEN, 3))),
        (
            "unique key",
            new_job("q").unique(long(MAX_KEY_LEN, 4), OnConflict::Error),
        ),
    ] {
        let err = store.enqueue(job).await.unwrap_err();
        assert!(
            matches!(&err, BackendError::Invalid(m) if m.contains(what)),
            "{what} too long: {err}"
        );
    }
    let listed = store.list(ListFilter::default()).await.expect("list");
    assert!(listed.is_empty(), "refused jobs must not be stored");
    // At their limits they are kept whole, in varied bytes a store cannot compress away
    // (PostgreSQL indexes the queue name with the key, and with the unique key).
    let queue = varied_text(MAX_NAME_LEN, 5);
    let job = NewJob::new(queue.clone(), varied_text(MAX_NAME_LEN, 6), vec![])
        .key(varied_text(MAX_KEY_LEN, 7))
        .unique(varied_text(MAX_KEY_LEN, 8), OnConflict::Error);
    let id = store
        .enqueue(job.clone())
        .await
        .expect("names at their limits");
    let claimed = claim_one(store, &queue).await;
    assert_eq!(
        (&claimed.kind, &claimed.key, claimed.claim.id),
        (&job.kind, &job.key, id)
    );
    let info = store.get(id).await.expect("get").expect("stored");
    assert_eq!(info.unique_key, job.unique_key);
}

/// A run time past [`MAX_MILLIS`] and a NUL character in the kind, the fairness key, the
/// unique key or the metadata are refused with [`BackendError::Invalid`] on every store
/// ([`NewJob::check`]), alone and in a batch, and nothing is stored; a run time of exactly
/// `MAX_MILLIS` goes in.
pub async fn out_of_range_times_and_nul_characters_are_refused<B: Backend>(
    store: &B,
    _clock: &ManualClock,
) {
    let cases = [
        (
            "run time past MAX_MILLIS",
            new_job("nul").run_at_millis(MAX_MILLIS + 1),
        ),
        ("NUL in the kind", NewJob::new("nul", "a\0b", vec![])),
        ("NUL in the fairness key", new_job("nul").key("a\0b")),
        (
            "NUL in the unique key",
            new_job("nul").unique("a\0b", OnConflict::Error),
        ),
        ("NUL in a metadata key", new_job("nul").meta("a\0", "b")),
        ("NUL in a metadata value", new_job("nul").meta("a", "b\0")),
    ];
    for (what, job) in cases {
        let err = store.enqueue(job.clone()).await.unwrap_err();
        assert!(matches!(err, BackendError::Invalid(_)), "{what}: {err}");
        let err = store
            .enqueue_many(vec![new_job("nul"), job])
            .await
            .unwrap_err();
        assert!(
            matches!(err, BackendError::Invalid(_)),
            "{what}, in a batch: {err}"
        );
    }
    let listed = store.list(ListFilter::default()).await.expect("list");
    assert!(
        listed.is_empty(),
        "refused jobs must not be stored: {listed:?}"
    );
    let id = store
        .enqueue(new_job("nul").run_at_millis(MAX_MILLIS))
        .await
        .expect("a run time of MAX_MILLIS goes in");
    assert_eq!(status(store, id).await, JobStatus::Scheduled);
}

/// `len` bytes of letters and digits from a small generator seeded with `seed`: text that
/// does not compress.
fn varied_text(len: usize, seed: u64) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(ALPHABET[(x % ALPHABET.len() as u64) as usize])
        })
        .collect()
}

/// A queue name no job can have (empty, longer than [`MAX_NAME_LEN`], or holding NUL) is
/// refused with [`BackendError::Invalid`] wherever a call names one queue or filters by
/// one, by every store alike, and the refusal changes nothing: a worker polling a queue it
/// misspelled learns so at once instead of claiming nothing forever, and an operator's
/// filter cannot match differently on two stores.
pub async fn impossible_queue_names_are_refused<B: Backend>(store: &B, _clock: &ManualClock) {
    let first = store.enqueue(new_job("named")).await.expect("enqueue");
    let second = store.enqueue(new_job("named")).await.expect("enqueue");
    let job = claim_one(store, "named").await;
    assert_eq!(job.claim.id, first);
    let too_long = varied_text(MAX_NAME_LEN + 1, 9);
    for name in ["", "a\0b", too_long.as_str()] {
        let refused = |what: &str, answer: Result<(), BackendError>| match answer {
            Err(BackendError::Invalid(_)) => {}
            other => panic!("{what} of the queue {name:?} answered {other:?}"),
        };
        let optional = |what: &str, answer: Result<(), BackendError>| match answer {
            Err(BackendError::Invalid(_) | BackendError::Unsupported(_)) => {}
            other => panic!("{what} of the queue {name:?} answered {other:?}"),
        };
        refused("claim", store.claim(name, 10, LEASE).await.map(drop));
        let both = store
            .settle_and_claim(Vec::new(), name, 10, LEASE)
            .await
            .expect("settle and claim");
        refused("the claim of settle_and_claim", both.claimed.map(drop));
        refused("rescue", store.rescue(name).await.map(drop));
        refused("live_counts", store.live_counts(name).await.map(drop));
        refused(
            "list",
            store
                .list(ListFilter::default().queue(name))
                .await
                .map(drop),
        );
        let purge = Purge {
            queue: Some(name.to_owned()),
            status: None,
        };
        refused("purge", store.purge(purge).await.map(drop));
        let revive = ReviveTarget::AllDead {
            queue: Some(name.to_owned()),
        };
        refused("revive", store.revive(revive).await.map(drop));
        optional(
            "hold_retries",
            store.hold_retries(name, MAX_MILLIS).await.map(drop),
        );
        optional("remove_queue", store.remove_queue(name).await.map(drop));
    }
    // Nothing moved: one job still runs, the other still waits.
    assert_eq!(status(store, first).await, JobStatus::Running);
    assert_eq!(status(store, second).await, JobStatus::Scheduled);
    store.complete(job.claim).await.expect("complete");
    assert_eq!(claim_one(store, "named").await.claim.id, second);
}

/// A call carrying more than [`MAX_CALL_BYTES`] of payload and metadata (one job's, or a
/// batch's together) is refused whole with [`BackendError::Invalid`] and the same message
/// on every store, before anything is sent or stored: not a lost connection that a caller
/// would retry for ever.
pub async fn oversized_calls_are_refused_whole<B: Backend>(store: &B, _clock: &ManualClock) {
    let refused = |what: &str, answer: Result<Vec<JobId>, BackendError>| match answer {
        Err(BackendError::Invalid(m)) if m.contains(&format!("at most {MAX_CALL_BYTES}")) => {}
        other => panic!("{what}: answered {:?}", other.map_err(|e| e.to_string())),
    };
    let payload = |len: usize| NewJob::new("big", "test", vec![7; len]);
    refused(
        "one payload a byte too large",
        store
            .enqueue(payload(MAX_CALL_BYTES + 1))
            .await
            .map(|id| vec![id]),
    );
    refused(
        "a payload whose metadata takes it past the limit",
        store
            .enqueue(payload(MAX_CALL_BYTES - 4).meta("m", "0123"))
            .await
            .map(|id| vec![id]),
    );
    let batch = vec![
        new_job("big"),
        payload(MAX_CALL_BYTES / 2),
        payload(MAX_CALL_BYTES / 2),
    ];
    refused(
        "a batch too large together",
        store.enqueue_many(batch).await,
    );
    let listed = store.list(ListFilter::default()).await.expect("list");
    assert!(listed.is_empty(), "a refused call stores nothing");
    // The store goes on as before.
    let id = store.enqueue(new_job("big")).await.expect("enqueue");
    assert_eq!(claim_one(store, "big").await.claim.id, id);
}

/// A batch of one queue that is refused (a unique key held under [`OnConflict::Error`], a
/// dependency that is gone) enqueues none of its jobs, however many there are: the jobs
/// before the refused one and those after it are not stored either. 1,201 jobs, more than
/// a store may send in one request (the Redis store's default is 500 per script call), with
/// the refused job in the middle and at the end.
pub async fn a_refused_batch_of_one_queue_enqueues_nothing<B: Backend>(
    store: &B,
    _clock: &ManualClock,
) {
    const JOBS: usize = 1_201;
    let gone = store.enqueue(new_job("whole")).await.expect("enqueue");
    store
        .complete(claim_one(store, "whole").await.claim)
        .await
        .expect("complete");
    let pruned = store
        .prune(Retention::finished(Duration::ZERO))
        .await
        .expect("prune");
    assert_eq!(pruned, 1, "the dependency to name is gone");
    let held = store
        .enqueue(new_job("whole").unique("taken", OnConflict::Error))
        .await
        .expect("enqueue");
    let batch = |at: usize, refused: NewJob| -> Vec<NewJob> {
        (0..JOBS)
            .map(|i| {
                if i == at {
                    refused.clone()
                } else {
                    new_job("whole").key(format!("k{}", i % 7))
                }
            })
            .collect()
    };
    let duplicate = || new_job("whole").unique("taken", OnConflict::Error);
    let orphan = || new_job("whole").after(gone);
    for at in [JOBS / 2, JOBS - 1] {
        match store.enqueue_many(batch(at, duplicate())).await {
            Err(BackendError::Duplicate { existing, .. }) => assert_eq!(existing, held),
            other => panic!("a held unique key at {at}: answered {:?}", ids_or(other)),
        }
        match store.enqueue_many(batch(at, orphan())).await {
            Err(BackendError::UnknownDependency(id)) => assert_eq!(id, gone),
            other => panic!(
                "a dependency that is gone at {at}: answered {:?}",
                ids_or(other)
            ),
        }
        let listed = store
            .list(ListFilter::default().queue("whole"))
            .await
            .expect("list");
        assert!(
            listed.len() == 1 && listed[0].id == held,
            "a refused batch stored nothing, yet {} jobs are listed (at most 100 shown)",
            listed.len()
        );
    }
    // The store goes on as before: the same batch without the refused job goes in whole.
    let ids = store
        .enqueue_many(batch(0, new_job("whole")))
        .await
        .expect("enqueue");
    assert_eq!(ids.len(), JOBS);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids in order");
    let jobs = store.claim("whole", JOBS + 1, LEASE).await.expect("claim");
    assert_eq!(jobs.len(), JOBS + 1);
}

/// The ids of an answer, or its error as text.
fn ids_or(answer: Result<Vec<JobId>, BackendError>) -> Result<usize, String> {
    answer.map(|ids| ids.len()).map_err(|e| e.to_string())
}

/// A failure is recorded whatever its handler wrote: a NUL character in the message is kept
/// as U+FFFD (PostgreSQL refused the whole settlement before, leaving every job of the
/// batch running, to run again and fail the same way), and a message past
/// [`MAX_ERROR_LEN`](crate::MAX_ERROR_LEN) is cut ([`Failure::stored_message`]), on every
/// store alike; the other entries of the batch settle as usual.
pub async fn failure_messages_are_always_recorded<B: Backend>(store: &B, _clock: &ManualClock) {
    use crate::job::MAX_ERROR_LEN;
    let at_limit = "e".repeat(MAX_ERROR_LEN);
    let over = format!("{}{}", "é".repeat(MAX_ERROR_LEN / 2), "tail");
    for (message, kept) in [
        (
            "bad\0byte\0".to_owned(),
            "bad\u{FFFD}byte\u{FFFD}".to_owned(),
        ),
        (at_limit.clone(), at_limit),
        (
            over.clone(),
            Failure::retryable(over).stored_message().into_owned(),
        ),
    ] {
        store
            .enqueue_many(vec![new_job("msg"), new_job("msg")])
            .await
            .expect("enqueue");
        let jobs = store.claim("msg", 2, LEASE).await.expect("claim");
        let batch = vec![
            Finished::new(&jobs[0], Err(Failure::retryable(message))),
            Finished::new(&jobs[1], Ok(())),
        ];
        let answers = store.settle(batch).await.expect("settle");
        assert!(
            matches!(answers[0], Ok(Settled::Retry { .. })),
            "{:?}",
            answers[0]
        );
        assert_eq!(answers[1].as_ref().ok(), Some(&Settled::Succeeded));
        let info = store
            .get(jobs[0].claim.id)
            .await
            .expect("get")
            .expect("job");
        assert_eq!(info.status(), JobStatus::Retrying);
        let stored = info.last_error.expect("the message is kept");
        assert!(stored.len() <= MAX_ERROR_LEN, "{} bytes kept", stored.len());
        assert_eq!(stored, kept);
        store.purge(Purge::default()).await.expect("purge");
    }
}
