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
    before: libc::cpu_set_t,
}

impl Pinned {
    /// Pins the calling thread to `cpu`. `None` (and the thread left as it was) where that is
    /// not possible: not Linux, or `cpu` is not one the thread may run on.
    #[cfg(target_os = "linux")]
    pub fn to_cpu(cpu: usize) -> Option<Pinned> {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: `cpu_set_t` is plain data, valid when zeroed; the calls get its true size
        // and only read or write within it; pid 0 is the calling thread.
        unsafe {
            let mut before: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, size, &mut before) != 0
                || cpu >= libc::CPU_SETSIZE as usize
                || !libc::CPU_ISSET(cpu, &before)
            {
                return None;
            }
            let mut only: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut only);
            if libc::sched_setaffinity(0, size, &only) != 0 {
                return None;
            }
            Some(Pinned { before })
        }
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
        // SAFETY: as in `to_cpu`: a valid set of the size given, for the calling thread.
        unsafe {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.before);
        }
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
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: as in `Pinned::to_cpu`.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::sched_getaffinity(0, size, &mut set) == 0
                && libc::CPU_ISSET(0, &set)
                && libc::CPU_ISSET(1, &set)
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}
