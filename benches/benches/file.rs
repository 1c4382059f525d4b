//! fairq-file's enqueue-to-start latency with an idle consumer, in one run:
//!
//! * the store opened by this process (the owner), with the default group-commit sync;
//! * a second handle on the same folder, which finds it held and goes through the owner's
//!   socket (the setup of a web process enqueueing into a worker's store): both the enqueue
//!   and the claim are requests to the owner.
//!
//! Each line prints p50, p90, p99 and max. The folder is in the system's temporary directory,
//! so the numbers include that disk's `fdatasync`. Run with
//! `cargo bench -p fairq-benches --bench file`.

use std::time::Duration;

use fairq_benches::{idle_latency, latency_line, load_average};
use fairq_file::{FileBackend, FileOptions, Role};

const SAMPLES: usize = 300;
const PAUSE: Duration = Duration::from_millis(2);

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        println!("== fairq-file: enqueue-to-start latency, idle consumer ({SAMPLES} samples) ==");
        println!("load average before: {}", load_average());
        let dir = tempfile::tempdir().expect("temporary folder");
        let owner = FileBackend::open(dir.path(), FileOptions::default()).expect("open the store");
        let h = idle_latency(&owner, "latency", SAMPLES, PAUSE).await;
        println!(
            "owner (this process holds the folder): {}",
            latency_line(&h)
        );

        let client = FileBackend::open(dir.path(), FileOptions::default()).expect("open a client");
        assert_eq!(client.role(), Role::Client, "the second handle is a client");
        let h = idle_latency(&client, "latency-client", SAMPLES, PAUSE).await;
        println!("client (through the owner's socket): {}", latency_line(&h));
        client.close().expect("close the client");
        owner.close().expect("close the store");
        println!("load average after: {}", load_average());
    });
}
