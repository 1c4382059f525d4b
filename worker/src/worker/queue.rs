//! One served queue's state, shared by its tasks: the prefetch buffer, the slots and what
//! they run, and the counters that decide when to claim; and [`Done`], a finished attempt on
//! its way from a slot to the queue's acker.
//!
//! Every change happens under one mutex, held for a few instructions at a time: a slot
//! records its finished job and takes the next one in a single lock, so the buffer's order
//! (the order the store handed the jobs out, which is fair by key) is the order jobs start.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use fairq_core::health::ErrorClock;
use fairq_core::job::Millis;
use fairq_core::stats::Histogram;
use tokio::sync::Notify;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::config::QueueConfig;
use super::depth::Depth;
use super::lock::lock;
use super::sweep_state::{SweepState, is_retry};
use crate::job::{Claim, Failure, Job, JobId};

/// A finished attempt on its way to the store.
pub(crate) struct Done {
    pub(crate) job: Job,
    pub(crate) result: Result<(), Failure>,
    pub(crate) elapsed: Duration,
    pub(crate) span: tracing::Span,
    /// The handler returned `result` itself: false when it was stopped at its timeout or
    /// panicked, or there was none (a failure of the job, even during shutdown).
    pub(crate) returned: bool,
}

/// One served queue.
pub(crate) struct QueueRuntime {
    pub(crate) name: String,
    pub(crate) config: QueueConfig,
    state: Mutex<Pipeline>,
    /// Wakes idle slots when jobs are buffered, and every slot at shutdown.
    pub(crate) job_ready: Notify,
    /// Wakes the claimer when there may be room to claim (or shutdown began).
    pub(crate) room: Notify,
    /// Wakes a shutdown waiting for the heartbeater's hand-back in flight.
    pub(crate) release_answered: Notify,
}

/// A job claimed ahead of a free slot.
pub(crate) struct Buffered {
    pub(crate) job: Job,
    /// When it was claimed (for the prefetch time-to-live).
    pub(crate) since: Instant,
}

/// A job a slot is running.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Running {
    pub(crate) claim: Claim,
    /// Its lease was lost (a heartbeat was refused): stop renewing it.
    pub(crate) lost: bool,
}

/// One slot: the job it runs, and its task.
pub(crate) struct Slot {
    pub(crate) running: Option<Running>,
    pub(crate) task: Option<JoinHandle<()>>,
}

/// The mutable state of a queue.
pub(crate) struct Pipeline {
    /// Claimed jobs waiting for a slot, in claim order.
    pub(crate) buffer: VecDeque<Buffered>,
    /// Slot tasks started so far (started on demand, at most the concurrency).
    pub(crate) slots: Vec<Slot>,
    /// Slots running a job.
    pub(crate) running: usize,
    /// Slots waiting for a job (including ones started but not yet polled).
    pub(crate) idle: usize,
    /// A claim is in flight (the claimer's or the acker's): one at a time, so jobs are
    /// buffered in the order the store claimed them.
    pub(crate) claiming: bool,
    /// Finished attempts the store has not answered for yet.
    pub(crate) unsettled: usize,
    /// The claims of those attempts whose leases are still renewed: a job stays claimed
    /// until its outcome is recorded, so its lease must outlive a slow settlement, or
    /// another worker would rescue and run it again.
    pub(crate) settling: HashSet<Claim>,
    /// Every finished attempt handed to the acker whose batch the store has not answered,
    /// renewed or not (a lost lease, a refused renewal, a settlement failing for longer than
    /// a lease): what a shutdown that had to stop the acker reports as unsettled.
    pub(crate) unanswered: HashSet<Claim>,
    /// Shutdown began: claim nothing, start nothing.
    pub(crate) stopping: bool,
    /// The prefetch depth: the configured one, 0 by default on a store that cannot take
    /// jobs back, otherwise adapted to the handlers' pace.
    pub(crate) depth: Depth,
    /// How many jobs the claim in flight asked for, and when it was reserved.
    pub(crate) wanted: usize,
    pub(crate) claim_started: Option<Instant>,
    /// When the last claim came back.
    pub(crate) claim_returned: Option<Instant>,
    /// Buffered jobs were handed back for waiting too long: claim only for free slots until
    /// a slot frees.
    pub(crate) prefetch_paused: bool,
    /// The store answered that it cannot take jobs back.
    pub(crate) release_unsupported: bool,
    /// Jobs stopped by shutdown (their handlers gave up when asked to stop, or were
    /// dropped at the deadline), to hand back to the store.
    pub(crate) stopped: Vec<Claim>,
    /// Buffered retries the retry sweep handed back whose answer the shutdown deadline cut
    /// off, with their attempts: whether the store took them is unknown, so the shutdown
    /// hands them back again, and reads the job when the store refuses.
    pub(crate) release_unknown: Vec<(Claim, u32)>,
    /// Buffered jobs whose hand-back failed as a whole (whether the store took them is
    /// unknown), by the heartbeater (they waited too long) or by the retry sweep: never
    /// started here; the heartbeater sends them again at its next beat, and a shutdown hands
    /// back what is still here. A refusal of either because the job is no longer held is
    /// checked against the job's record (the first call may have landed).
    pub(crate) unreleased: Vec<Buffered>,
    /// Buffered jobs that waited too long and whose hand-back by the heartbeater is in
    /// flight. The heartbeater starts none once shutdown began; a shutdown waits for the
    /// answer to those in flight (see [`QueueRuntime::hand_back_answered`]).
    pub(crate) releasing: Vec<Claim>,
    /// Of those, the ones whose hand-back was answered after shutdown began: taken back by
    /// the store (`true`) or refused (`false`), for the shutdown's report.
    pub(crate) released_in_shutdown: Vec<(JobId, bool)>,
    /// The acker's inbox, cloned into each new slot; `None` once shutdown began.
    pub(crate) acker: Option<UnboundedSender<Done>>,
    /// Handler failures since the last success, for health.
    pub(crate) errors: ErrorClock,
    /// Handler run time in microseconds.
    pub(crate) timings: Histogram,
    /// The retry sweep.
    pub(crate) sweep: SweepState,
    /// The last health verdict was unhealthy (for the hooks, called on a change).
    pub(crate) unhealthy: bool,
    /// When one of the queue's worker tasks panicked (see `supervise`): the queue is
    /// unhealthy from then on.
    pub(crate) task_failed: Option<Millis>,
}

impl QueueRuntime {
    pub(crate) fn new(name: String, config: QueueConfig, acker: UnboundedSender<Done>) -> Self {
        QueueRuntime {
            name,
            state: Mutex::new(Pipeline {
                depth: if config.prefetch_is_set() {
                    Depth::fixed(config.get_prefetch())
                } else {
                    Depth::adaptive(config.get_prefetch(), config.get_max_prefetch())
                },
                wanted: 0,
                claim_started: None,
                claim_returned: None,
                buffer: VecDeque::new(),
                slots: Vec::new(),
                running: 0,
                idle: 0,
                claiming: false,
                unsettled: 0,
                settling: HashSet::new(),
                unanswered: HashSet::new(),
                stopping: false,
                prefetch_paused: false,
                release_unsupported: false,
                stopped: Vec::new(),
                release_unknown: Vec::new(),
                unreleased: Vec::new(),
                releasing: Vec::new(),
                released_in_shutdown: Vec::new(),
                acker: Some(acker),
                errors: ErrorClock::default(),
                timings: Histogram::new(),
                sweep: SweepState::new(config.get_retry_sweep()),
                unhealthy: false,
                task_failed: None,
            }),
            job_ready: Notify::new(),
            room: Notify::new(),
            release_answered: Notify::new(),
            config,
        }
    }

    /// The store cannot take jobs back: buffered jobs never expire, and unless a prefetch
    /// depth was configured, the queue claims only for free slots (so that a shutdown leaves
    /// no buffered job waiting for its lease to expire).
    pub(crate) fn without_release(&self) {
        let mut st = self.lock();
        st.release_unsupported = true;
        if !self.config.prefetch_is_set() {
            st.depth = Depth::fixed(0);
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Pipeline> {
        lock(&self.state)
    }

    /// Reserves the claim the queue has room for, if it has room and no claim is in flight.
    pub(crate) fn reserve_claim(&self) -> Option<usize> {
        let mut st = self.lock();
        let n = st.claimable(&self.config)?;
        st.claiming = true;
        st.wanted = n;
        st.claim_started = Some(Instant::now());
        Some(n)
    }

    /// Wakes the claimer if the queue has room for a claim; true if it did.
    pub(crate) fn wake_claimer_if_room(&self, st: &Pipeline) -> bool {
        let room = st.claimable(&self.config).is_some();
        if room {
            self.room.notify_one();
        }
        room
    }

    /// With `sweep_holds_new_jobs`: how long claims stay paused at `now`, if they are (a
    /// pause whose time has come ends).
    pub(crate) fn paused_for(&self, now: fairq_core::job::Millis) -> Option<std::time::Duration> {
        let mut st = self.lock();
        let until = st.sweep.paused_until?;
        if now >= until {
            st.sweep.paused_until = None;
            return None;
        }
        Some(std::time::Duration::from_millis(until - now))
    }

    /// The sweep judged `n` failed retries: claims may go on.
    pub(crate) fn judged(&self, n: usize) {
        if n == 0 {
            return;
        }
        let mut st = self.lock();
        st.sweep.judging = st.sweep.judging.saturating_sub(n);
        if st.sweep.judging == 0 && !st.buffer.is_empty() {
            // Buffered retries that waited for the verdict may start.
            self.job_ready.notify_waiters();
        }
        self.wake_claimer_if_room(&st);
    }

    /// The store answered the batch of these finished attempts (its outcomes are known, its
    /// hooks not yet called): they are no longer unsettled for a shutdown's report.
    pub(crate) fn answered(&self, claims: &[Claim]) {
        let mut st = self.lock();
        for claim in claims {
            st.unanswered.remove(claim);
        }
    }

    /// The store answered for these finished attempts: their leases are no longer renewed.
    pub(crate) fn settled(&self, claims: impl ExactSizeIterator<Item = Claim>) {
        let mut st = self.lock();
        st.unsettled = st.unsettled.saturating_sub(claims.len());
        for claim in claims {
            st.settling.remove(&claim);
        }
        self.wake_claimer_if_room(&st);
    }

    /// Stops renewing the lease of the finished attempt `claim` (the store refused a
    /// renewal: its settlement landed meanwhile, or will be refused); true if it was
    /// awaiting settlement.
    pub(crate) fn lose_settling(&self, claim: Claim) -> bool {
        self.lock().settling.remove(&claim)
    }

    /// Shutdown began: nothing more is claimed or started. Returns the acker's inbox so the
    /// caller can drop it (the acker finishes once every slot has dropped its copy too).
    pub(crate) fn stop(&self) -> Option<UnboundedSender<Done>> {
        let acker = {
            let mut st = self.lock();
            st.stopping = true;
            st.acker.take()
        };
        self.job_ready.notify_waiters();
        self.room.notify_one();
        acker
    }

    /// Takes out every job to hand back at shutdown: buffered ones (in claim order), then
    /// those whose hand-back failed as a whole, then ones stopped by shutdown, then retries
    /// whose hand-back by the sweep was cut off. The jobs of an earlier hand-back that may
    /// have landed are also returned apart, with their attempts.
    pub(crate) fn take_hand_backs(&self) -> (Vec<Claim>, HashMap<Claim, u32>) {
        let mut st = self.lock();
        let mut claims: Vec<Claim> = st.buffer.drain(..).map(|b| b.job.claim).collect();
        let mut unknown: HashMap<Claim, u32> = HashMap::new();
        for b in std::mem::take(&mut st.unreleased) {
            claims.push(b.job.claim);
            unknown.insert(b.job.claim, b.job.attempt);
        }
        claims.append(&mut st.stopped);
        for (claim, attempt) in std::mem::take(&mut st.release_unknown) {
            claims.push(claim);
            unknown.insert(claim, attempt);
        }
        (claims, unknown)
    }

    /// Resolves once no hand-back by the heartbeater is in flight.
    pub(crate) async fn hand_back_answered(&self) {
        loop {
            let answered = self.release_answered.notified();
            tokio::pin!(answered);
            answered.as_mut().enable();
            if self.lock().releasing.is_empty() {
                return;
            }
            answered.await;
        }
    }

    /// For the shutdown's report: the jobs whose hand-back by the heartbeater was answered
    /// after shutdown began (`true`: the store took them back), and those whose hand-back is
    /// still in flight, which the shutdown takes over (their answer will not be reported).
    pub(crate) fn take_hand_backs_in_flight(&self) -> (Vec<(JobId, bool)>, Vec<JobId>) {
        let mut st = self.lock();
        let answered = std::mem::take(&mut st.released_in_shutdown);
        let unanswered = st.releasing.drain(..).map(|c| c.id).collect();
        (answered, unanswered)
    }

    /// After the slots were stopped at the deadline: the jobs they were running, which are
    /// also queued to be handed back.
    pub(crate) fn interrupted(&self) -> Vec<Claim> {
        let mut st = self.lock();
        let running: Vec<Claim> = st
            .slots
            .iter_mut()
            .filter_map(|s| s.running.take().map(|r| r.claim))
            .collect();
        st.running = 0;
        crate::metrics::running(&self.name, 0);
        st.stopped.extend(&running);
        running
    }

    /// The jobs of finished attempts handed to the acker whose batch the store has not
    /// answered, in id order (for a shutdown that could not wait for the acker): whether or
    /// not their leases are still renewed, and without those whose answer came (their hooks
    /// may still be running).
    pub(crate) fn unsettled_ids(&self) -> Vec<JobId> {
        let mut ids: Vec<JobId> = self.lock().unanswered.iter().map(|c| c.id).collect();
        ids.sort_unstable();
        ids
    }

    /// Takes the slot tasks out (to wait for or stop them).
    pub(crate) fn take_slot_tasks(&self) -> Vec<JoinHandle<()>> {
        self.lock()
            .slots
            .iter_mut()
            .filter_map(|s| s.task.take())
            .collect()
    }

    /// Marks the lease of the running job `claim` lost; true if a slot runs it.
    pub(crate) fn lose_running(&self, claim: Claim) -> bool {
        let mut st = self.lock();
        for slot in &mut st.slots {
            if let Some(running) = &mut slot.running {
                if running.claim == claim {
                    running.lost = true;
                    return true;
                }
            }
        }
        false
    }

    /// Removes the buffered job of `claim`; true if it was buffered.
    pub(crate) fn unbuffer(&self, claim: Claim) -> bool {
        let mut st = self.lock();
        let before = st.buffer.len();
        st.buffer.retain(|b| b.job.claim != claim);
        let removed = st.buffer.len() != before;
        if removed {
            self.wake_claimer_if_room(&st);
        }
        removed
    }
}

impl Pipeline {
    /// How many jobs a claim may take now, if one may start: none while a claim is in
    /// flight, after shutdown began, while the store owes answers for too many finished
    /// attempts, while the retry sweep is being judged or holds every job back, or while the
    /// buffer is above its low-water mark.
    pub(crate) fn claimable(&self, config: &QueueConfig) -> Option<usize> {
        if self.claiming || self.stopping || self.unsettled >= config.get_max_unsettled() {
            return None;
        }
        // A failed retry may stop the sweep: wait for its verdict; and a stopped sweep that
        // holds new jobs too claims nothing.
        if self.sweep.judging > 0 || self.sweep.paused_until.is_some() {
            return None;
        }
        // The low-water mark: half the prefetch depth.
        let depth = self.depth.get();
        if self.buffer.len() > depth / 2 {
            return None;
        }
        let prefetch = if self.prefetch_paused { 0 } else { depth };
        let capacity = config.get_concurrency().saturating_add(prefetch);
        let held = self.running + self.buffer.len();
        (held < capacity).then(|| capacity - held)
    }

    /// The next buffered job to start: the oldest, except that while a failed retry is being
    /// judged by the retry sweep, buffered retries wait (the sweep may hand them back).
    pub(crate) fn take_next(&mut self) -> Option<Buffered> {
        if self.sweep.judging == 0 {
            return self.buffer.pop_front();
        }
        let i = self.buffer.iter().position(|b| !is_retry(&b.job))?;
        self.buffer.remove(i)
    }

    /// Every lease the worker holds and renews: running jobs (unless lost), then buffered
    /// jobs, then finished jobs whose outcomes the store has not recorded yet, then jobs
    /// stopped by shutdown that wait to be handed back (the shutdown may wait for other
    /// handlers past their leases, and an expired one would be rescued, its attempt
    /// counted).
    pub(crate) fn held_claims(&self) -> Vec<Claim> {
        let running = self
            .slots
            .iter()
            .filter_map(|s| s.running)
            .filter(|r| !r.lost)
            .map(|r| r.claim);
        let buffered = self.buffer.iter().map(|b| b.job.claim);
        let settling = self.settling.iter().copied();
        let stopped = self.stopped.iter().copied();
        running
            .chain(buffered)
            .chain(settling)
            .chain(stopped)
            .collect()
    }
}
