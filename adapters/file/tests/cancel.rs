//! Cancelling one job on the file store: the deletion is journaled (a reopened store does not
//! bring the job back, and the next job keeps its place), and a read-only handle neither
//! offers nor performs it.

use fairq_file::{FileBackend, FileOptions};
use fairq_worker::{Backend, BackendError, Inspect, NewJob};
use std::time::Duration;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

#[test]
fn a_cancelled_job_stays_gone_after_a_reopen() {
    let dir = tempfile::tempdir().expect("a folder");
    runtime().block_on(async {
        let store = FileBackend::open(dir.path(), FileOptions::default()).expect("open");
        let cancelled = store
            .enqueue(NewJob::new("mail", "send", b"1".to_vec()).key("a"))
            .await
            .expect("enqueue");
        let kept = store
            .enqueue(NewJob::new("mail", "send", b"2".to_vec()).key("a"))
            .await
            .expect("enqueue");
        store.cancel(cancelled).await.expect("cancel");
        store.close().expect("close");
        drop(store);

        let store = FileBackend::open(dir.path(), FileOptions::default()).expect("reopen");
        assert!(
            store.get(cancelled).await.expect("get").is_none(),
            "the journal replays the cancel"
        );
        let jobs = store
            .claim("mail", 10, Duration::from_secs(30))
            .await
            .expect("claim");
        let ids: Vec<_> = jobs.iter().map(|j| j.claim.id).collect();
        assert_eq!(ids, [kept], "only the job left is handed out");
        store.close().expect("close");
    });
}

#[test]
fn a_read_only_handle_cannot_cancel() {
    let dir = tempfile::tempdir().expect("a folder");
    runtime().block_on(async {
        let store = FileBackend::open(dir.path(), FileOptions::default()).expect("open");
        let id = store
            .enqueue(NewJob::new("mail", "send", vec![]))
            .await
            .expect("enqueue");
        store.close().expect("close");
        drop(store);

        let view = FileBackend::open_read_only(dir.path(), FileOptions::default())
            .expect("open read-only");
        assert!(
            !view.capabilities().cancel,
            "a read-only handle does not offer cancel"
        );
        let err = view
            .cancel(id)
            .await
            .expect_err("a read-only handle refuses");
        assert!(
            err.to_string().contains("read-only"),
            "the refusal says why: {err}"
        );
        assert!(!matches!(err, BackendError::NotFound(_)));
        assert!(
            view.get(id).await.expect("get").is_some(),
            "nothing changed"
        );
    });
}
