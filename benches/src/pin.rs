//! Pinning a thread to one CPU, so that the latency rows of a bench give every contender the
//! same placement.
//!
//! A hand-off between two threads costs very different amounts depending on where the
//! scheduler puts them: on one CPU it is a context switch, on two it is a cache-line
//! transfer for a thread that polls, or waking a CPU that went idle for one that sleeps
//! (tens of microseconds on a virtual machine whose idle CPU halts). Left to the scheduler,
//! that choice is made per run and per sample, and decided the blocking bench's ping-pong
//! and wake-latency rows more than the contenders did.

/// The calling thread pinned to one CPU; dropping it lets the thread run on the CPUs it
/// could run on before.
///
/// ```
/// let pin = fairq_benches::Pinned::to_cpu(0);
/// // ... measure ...
/// drop(pin);
/// ```
pub struct Pinned {
    #[cfg(target_os = "linux")]
    before: rustix::thread::CpuSet,
}

impl Pinned {
    /// Pins the calling thread to `cpu`. `None` (and the thread left as it was) where that is
    /// not possible: not Linux, or `cpu` is not one the thread may run on.
    #[cfg(target_os = "linux")]
    pub fn to_cpu(cpu: usize) -> Option<Pinned> {
        use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
        let before = sched_getaffinity(None).ok()?;
        if cpu >= CpuSet::MAX_CPU || !before.is_set(cpu) {
            return None;
        }
        let mut only = CpuSet::new();
        only.set(cpu);
        sched_setaffinity(None, &only).ok()?;
        Some(Pinned { before })
    }

    /// Pinning is only done on Linux.
    #[cfg(not(target_os = "linux"))]
    pub fn to_cpu(_cpu: usize) -> Option<Pinned> {
        None
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        let _ = rustix::thread::sched_setaffinity(None, &self.before);
    }
}

/// Whether the calling thread may run on at least two CPUs, 0 and 1: the placement the
/// latency rows pin their two threads to.
///
/// ```
/// let _ = fairq_benches::two_cpus();
/// ```
pub fn two_cpus() -> bool {
    #[cfg(target_os = "linux")]
    {
        rustix::thread::sched_getaffinity(None).is_ok_and(|set| set.is_set(0) && set.is_set(1))
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use rustix::thread::sched_getaffinity;

    /// Pinned, the thread may run on that one CPU only; dropped, on the CPUs it had before.
    #[test]
    fn pins_and_restores() {
        std::thread::spawn(|| {
            let before = sched_getaffinity(None).unwrap();
            let cpu = (0..rustix::thread::CpuSet::MAX_CPU)
                .find(|&c| before.is_set(c))
                .unwrap();
            let pin = Pinned::to_cpu(cpu).expect("a CPU the thread may use");
            let during = sched_getaffinity(None).unwrap();
            assert_eq!(during.count(), 1);
            assert!(during.is_set(cpu));
            drop(pin);
            assert!(sched_getaffinity(None).unwrap() == before);
        })
        .join()
        .unwrap();
    }

    /// A CPU the thread may not use is refused and changes nothing.
    #[test]
    fn refuses_a_cpu_out_of_reach() {
        let before = sched_getaffinity(None).unwrap();
        assert!(Pinned::to_cpu(rustix::thread::CpuSet::MAX_CPU).is_none());
        assert!(sched_getaffinity(None).unwrap() == before);
    }
}
