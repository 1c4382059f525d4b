//! Pausing a queue on the file store: the pause is journaled (a reopened store, and a
//! read-only look, find the queue paused, and a resume the same way), a read-only handle
//! neither offers nor performs it, and resuming wakes an idle worker at once. (What a pause
//! holds and lets through is the conformance check `pause_holds_claims_until_resumed`, run
//! on the owner and through a client of the folder.)

use std::time::Duration;

use fairq_file::{FileBackend, FileOptions};
use fairq_worker::{Backend, Inspect, NewJob};

const LEASE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_pause_and_a_resume_outlast_a_reopen() {
    let dir = tempfile::tempdir().expect("a folder");
    {
        let store = FileBackend::open(dir.path(), FileOptions::default()).expect("open");
        store
            .enqueue(NewJob::new("mail", "send", vec![]))
            .await
            .expect("enqueue");
        store.set_paused("mail", true).await.expect("pause");
        // A queue that never had a job can be paused too.
        store.set_paused("later", true).await.expect("pause");
        store.close().expect("close");
        drop(store);

        let view = FileBackend::open_read_only(dir.path(), FileOptions::default())
            .expect("a read-only look");
        assert_eq!(view.paused().await.expect("paused"), ["later", "mail"]);
        assert!(!view.capabilities().pause);
        let err = view
            .set_paused("mail", false)
            .await
            .expect_err("a read-only handle refuses");
        assert!(
            err.to_string().contains("read-only"),
            "the refusal says why: {err}"
        );
        drop(view);

        let store = FileBackend::open(dir.path(), FileOptions::default()).expect("reopen");
        assert_eq!(store.paused().await.expect("paused"), ["later", "mail"]);
        assert!(
            store
                .claim("mail", 10, LEASE)
                .await
                .expect("claim")
                .is_empty()
        );
        store.set_paused("mail", false).await.expect("resume");
        store.close().expect("close");
        drop(store);

        let store = FileBackend::open(dir.path(), FileOptions::default()).expect("reopen");
        assert_eq!(store.paused().await.expect("paused"), ["later"]);
        assert_eq!(
            store.claim("mail", 10, LEASE).await.expect("claim").len(),
            1
        );
        // Removing a queue removes its pause.
        store.remove_queue("later").await.expect("remove");
        assert!(store.paused().await.expect("paused").is_empty());
        store.close().expect("close");
    }
}

#[tokio::test]
async fn the_resume_wakes_an_idle_worker() {
    let dir = tempfile::tempdir().expect("a folder");
    {
        let store = FileBackend::open(dir.path(), FileOptions::default()).expect("open");
        store.set_paused("q", true).await.expect("pause");
        let id = store
            .enqueue(NewJob::new("q", "test", vec![]))
            .await
            .expect("enqueue");
        // The worker's side (without the resume's wake-up this check times out).
        fairq_worker::conformance::pause::resume_wakes_an_idle_worker(
            store.clone(),
            &store,
            "q",
            id,
        )
        .await;
        store.close().expect("close");
    }
}

/// A queue only ever paused (no job) is in `stats` before a reopen as after it, and so is
/// one paused and resumed: its persisted totals come back as a queue at every open. It used
/// to appear only after a reopen.
#[tokio::test]
async fn stats_of_a_queue_only_ever_paused_outlast_a_reopen() {
    let dir = tempfile::tempdir().expect("a folder");
    let store = FileBackend::open(dir.path(), FileOptions::default()).expect("open");
    store
        .enqueue(NewJob::new("mail", "send", vec![]))
        .await
        .expect("enqueue");
    store.set_paused("later", true).await.expect("pause");
    store.set_paused("resumed", true).await.expect("pause");
    store.set_paused("resumed", false).await.expect("resume");
    // Resuming a queue never paused makes nothing.
    store.set_paused("never", false).await.expect("resume");
    let before = store.stats().await.expect("stats");
    let names: Vec<&str> = before.iter().map(|s| s.queue.as_str()).collect();
    assert_eq!(names, ["later", "mail", "resumed"]);
    store.close().expect("close");
    drop(store);

    let store = FileBackend::open(dir.path(), FileOptions::default()).expect("reopen");
    assert_eq!(store.stats().await.expect("stats"), before);
    store.close().expect("close");
    drop(store);
    let view = FileBackend::open_read_only(dir.path(), FileOptions::default()).expect("a look");
    assert_eq!(view.stats().await.expect("stats"), before);
}
