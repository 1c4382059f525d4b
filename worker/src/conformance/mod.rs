//! The conformance suite: one set of behavioural checks that every [`Backend`] must pass.
//!
//! A store crate implements [`Harness`] (how to make a fresh, isolated store that reads time
//! from a [`ManualClock`], and how to remove it afterwards) and expands
//! [`conformance_tests!`](crate::conformance_tests) in one of its test files:
//!
//! ```ignore
//! // tests/conformance.rs of a store crate, with fairq-worker's `conformance` feature on
//! // in its dev-dependencies.
//! fairq_worker::conformance_tests!(my_store::TestHarness::from_env());
//! ```
//!
//! That expands to one `#[test]` per check (each runs on its own multi-threaded tokio
//! runtime, so the crate needs no tokio dev-dependency of its own). Every test creates its own
//! store through the harness with a manual clock at [`START`], runs one check, and hands the
//! store to [`Harness::cleanup`] whether the check passed or panicked.
//!
//! The checks never sleep to synchronise: time in the store moves only when a check advances
//! the manual clock, and checks that run a [`Worker`](crate::Worker) wait for observable
//! events (a handler reporting on a channel, a job reaching a state) under a generous overall
//! timeout ([`PATIENCE`]).
//!
//! The checks are public async functions in [`checks`], so a store can also call one directly
//! from its own tests.
//!
//! The second half of the suite is [`differential`]: random request sequences run on the
//! store and on the reference state machine, every answer compared. A store adds one test
//! that calls [`differential::check`] with its harness (made a [`differential::Differential`],
//! which says whether the store can hand back claims and be reopened).

pub mod cancel;
pub mod checks;
pub mod differential;
mod held;
pub mod keep;
pub mod live;
pub mod pause;
pub mod refusals;
mod support;
pub mod sweep;

pub use held::held_leases;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use fairq_core::job::Millis;

use crate::backend::Backend;
use crate::clock::ManualClock;

/// Makes fresh, isolated stores for the conformance tests.
///
/// ```
/// use fairq_worker::conformance::Harness;
/// use fairq_worker::{ManualClock, MemoryBackend};
///
/// struct Memory;
///
/// impl Harness for Memory {
///     type Backend = MemoryBackend;
///     async fn create(&self, clock: ManualClock) -> MemoryBackend {
///         MemoryBackend::with_clock(clock)
///     }
///     async fn cleanup(&self, _backend: MemoryBackend) {}
/// }
/// ```
pub trait Harness: Send + Sync + 'static {
    /// The store under test.
    type Backend: Backend;

    /// A new, empty store (its own schema, key prefix or folder) whose time comes from `clock`.
    fn create(&self, clock: ManualClock) -> impl Future<Output = Self::Backend> + Send;

    /// Removes everything `create` made.
    fn cleanup(&self, backend: Self::Backend) -> impl Future<Output = ()> + Send;
}

/// The manual clock's reading when a check starts: 2023-11-14T22:13:20Z in milliseconds.
pub const START: Millis = 1_700_000_000_000;

/// The longest a check waits for something observable to happen before it fails.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Runs `check` against a fresh store from `harness` on a new multi-threaded runtime, then
/// cleans the store up, whether the check passed or panicked (the panic is then resumed).
/// The check gets the store in an [`Arc`] (itself a [`Backend`]) so it can hand it to a
/// [`Worker`](crate::Worker).
/// [`conformance_tests!`](crate::conformance_tests) calls this once per check.
///
/// ```
/// use fairq_worker::conformance::{self, checks, Harness};
/// use fairq_worker::{ManualClock, MemoryBackend};
///
/// struct Memory;
/// impl Harness for Memory {
///     type Backend = MemoryBackend;
///     async fn create(&self, clock: ManualClock) -> MemoryBackend { MemoryBackend::with_clock(clock) }
///     async fn cleanup(&self, _backend: MemoryBackend) {}
/// }
///
/// conformance::run(Memory, |store, clock| Box::pin(checks::delayed_jobs_wait(store, clock)));
/// ```
pub fn run<H, F>(harness: H, check: F)
where
    H: Harness,
    F: for<'a> FnOnce(
        &'a Arc<H::Backend>,
        &'a ManualClock,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'a>>,
{
    use futures::FutureExt;
    use std::panic::AssertUnwindSafe;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("cannot start a tokio runtime: {e}"));
    runtime.block_on(async move {
        let clock = ManualClock::new(START);
        let store = Arc::new(harness.create(clock.clone()).await);
        let outcome = AssertUnwindSafe(check(&store, &clock)).catch_unwind().await;
        // Tasks a check started may still be letting go of the store.
        let mut store = store;
        let mut tries = 0;
        loop {
            match Arc::try_unwrap(store) {
                Ok(owned) => {
                    harness.cleanup(owned).await;
                    break;
                }
                Err(shared) if tries < 1_000 => {
                    store = shared;
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err(_) => {
                    eprintln!(
                        "conformance: the store is still shared after the check; not cleaned up"
                    );
                    break;
                }
            }
        }
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    });
}

/// Expands to one `#[test]` per conformance check, each on a fresh store made by the given
/// [`Harness`] expression (evaluated once per test).
///
/// ```ignore
/// fairq_worker::conformance_tests!(MyHarness::new());
/// ```
#[macro_export]
macro_rules! conformance_tests {
    ($harness:expr) => {
        $crate::conformance_tests!(@each $harness;
            enqueue_claim_complete_round_trip,
            enqueue_many_returns_ids_in_order,
            invalid_jobs_are_refused,
            out_of_range_times_and_nul_characters_are_refused,
            claims_respect_max_and_queue,
            each_job_runs_exactly_once,
            retries_follow_the_policy_schedule,
            dead_after_the_policy_gives_up,
            permanent_failure_kills_at_once,
            delayed_jobs_wait,
            an_endless_wait_for_jobs_ends_with_a_job,
            fair_by_key,
            keyless_jobs_share_one_key,
            lease_expiry_rescues_and_fences_the_stale_worker,
            heartbeat_extends_the_lease,
            rescue_counts_an_attempt,
            finishing_twice_is_refused,
            dependencies_wait_for_success,
            dependencies_wait_for_success_whatever_the_queue_names,
            dependents_are_released_in_enqueue_order,
            a_released_dependent_is_due_at_its_own_time_or_its_release,
            dependents_of_a_dead_job_wait_for_its_revival,
            unknown_dependency_is_refused,
            unique_keys,
            list_and_get,
            stats_count_and_time,
            stats_count_each_job_once_while_jobs_finish,
            operator_retry_revives_dead_jobs,
            purge_spares_running_jobs,
            prune_deletes_old_finished_jobs,
            prune_keeps_each_outcome_for_its_own_age,
            prune_keeps_a_dead_job_others_wait_for,
            prune_keeps_a_dead_job_others_wait_for_whatever_the_queue_names,
            remove_queue_only_when_it_has_no_live_jobs,
            wait_for_jobs_returns,
            a_pending_wait_for_jobs_wakes_for_a_delayed_job_or_retry,
            settle_applies_each_entry_on_its_own,
            settle_survives_bad_entries,
            settle_and_claim_hands_out_the_next_jobs,
            heartbeat_many_extends_each_lease,
            an_endless_lease_ends_at_the_latest_time,
            worker_runs_each_job_once,
            worker_retries_and_reports_dead_jobs,
            undecodable_payload_fails_only_that_job,
            graceful_shutdown_loses_nothing,
            release_hands_back_without_an_attempt,
            hold_retries_holds_back_due_retries_only,
            impossible_queue_names_are_refused,
            oversized_calls_are_refused_whole,
            a_refused_batch_of_one_queue_enqueues_nothing,
            failure_messages_are_always_recorded,
        );
        #[test]
        fn live_counts_count_one_queues_live_jobs() {
            $crate::conformance::run($harness, |store, clock| {
                ::std::boxed::Box::pin(
                    $crate::conformance::live::live_counts_count_one_queues_live_jobs(store, clock),
                )
            });
        }
        #[test]
        fn retry_sweep_stops_at_a_failed_retry() {
            $crate::conformance::run($harness, |store, clock| {
                ::std::boxed::Box::pin(
                    $crate::conformance::sweep::retry_sweep_stops_at_a_failed_retry(store, clock),
                )
            });
        }
        // Named apart from the check: stores also run it under its own name on a store not
        // keeping successes, where a dependent recorded by mistake shows.
        #[test]
        fn an_ignored_duplicate_leaves_its_dependency_alone_on_any_store() {
            $crate::conformance::run($harness, |store, clock| {
                ::std::boxed::Box::pin(
                    $crate::conformance::keep::an_ignored_duplicate_leaves_its_dependency_alone(
                        store, clock,
                    ),
                )
            });
        }
        #[test]
        fn held_retries_come_back_in_id_order() {
            $crate::conformance::run($harness, |store, clock| {
                ::std::boxed::Box::pin(
                    $crate::conformance::sweep::held_retries_come_back_in_id_order(store, clock),
                )
            });
        }
    };
    (@each $harness:expr; $($check:ident),* $(,)?) => {
        $(
            #[test]
            fn $check() {
                $crate::conformance::run($harness, |store, clock| {
                    ::std::boxed::Box::pin($crate::conformance::checks::$check(store, clock))
                });
            }
        )*
    };
}
