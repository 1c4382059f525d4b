//! How many processors the threads of this process can run on at once: whether a waiting
//! thread's partner may be running while it spins (see `spin`).
//!
//! `std::thread::available_parallelism` answers for the calling thread: on Linux it counts
//! the CPUs of that thread's affinity mask, or the cgroup's CPU quota if that is lower. A
//! thread pinned to one CPU therefore reads 1, although its partners may be pinned to the
//! others: that is how thread-per-core programs run, and how the bench's latency rows run.
//! Read once by a pinned thread, it turned spinning off for the whole process, and a
//! producer and a consumer pinned to two CPUs traded each item of a queue of one by
//! `sched_yield` (about 620 ns an item, against 230 for crossbeam-channel). So when the
//! answer is 1 because the calling thread may use only one CPU (its `Cpus_allowed_list`),
//! the CPUs the machine has online count instead. A quota of one CPU (a container's limit)
//! still counts as one: spinning there would spend the quota the partner needs. Spinning
//! where it cannot pay (a whole process confined to one CPU) soon stops by itself, since
//! `spin`'s score drops.

/// The processors the threads of this process may run on at once (see the module docs).
pub(crate) fn processors() -> usize {
    let own = std::thread::available_parallelism().map_or(1, |n| n.get());
    if own >= 2 {
        return own;
    }
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let allowed = read("/proc/thread-self/status").and_then(|status| allowed_in_status(&status));
    let online = read("/sys/devices/system/cpu/online").and_then(|list| cpus_in_list(&list));
    decide(own, allowed, online)
}

/// [`processors`] from what it read: `own` from `available_parallelism`, the CPUs the
/// calling thread may use, and the CPUs online.
fn decide(own: usize, allowed: Option<usize>, online: Option<usize>) -> usize {
    match (allowed, online) {
        (Some(1), Some(online)) if own == 1 => online.max(1),
        _ => own,
    }
}

/// The number of CPUs in the `Cpus_allowed_list` line of a `/proc/.../status` file.
fn allowed_in_status(status: &str) -> Option<usize> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .and_then(cpus_in_list)
}

/// The number of CPUs in a Linux CPU list such as `0-3,6,8-9`; `None` if it is malformed.
fn cpus_in_list(list: &str) -> Option<usize> {
    let mut count = 0usize;
    for part in list.trim().split(',') {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?),
            None => {
                let cpu = part.parse::<usize>().ok()?;
                (cpu, cpu)
            }
        };
        count = count.checked_add(last.checked_sub(first)? + 1)?;
    }
    Some(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_count_their_ranges_and_singles() {
        assert_eq!(cpus_in_list("0\n"), Some(1));
        assert_eq!(cpus_in_list("0-1\n"), Some(2));
        assert_eq!(cpus_in_list("0-3,6,8-9"), Some(7));
    }

    #[test]
    fn only_a_thread_pinned_to_one_cpu_counts_the_cpus_online() {
        assert_eq!(decide(4, Some(4), Some(8)), 4, "the thread's own count");
        assert_eq!(decide(1, Some(1), Some(2)), 2, "pinned: the machine's");
        assert_eq!(
            decide(1, Some(2), Some(2)),
            1,
            "a quota of one CPU stays one"
        );
        assert_eq!(decide(1, None, Some(2)), 1, "unknown mask");
        assert_eq!(decide(1, Some(1), None), 1, "unknown machine");
    }

    #[test]
    fn the_allowed_cpus_come_from_the_status_line() {
        let status = "Name:\tt\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\nMems_allowed:\t1\n";
        assert_eq!(allowed_in_status(status), Some(2));
        assert_eq!(allowed_in_status("Name:\tt\n"), None);
    }

    #[test]
    fn malformed_cpu_lists_are_refused() {
        assert_eq!(cpus_in_list(""), None);
        assert_eq!(cpus_in_list("3-1"), None);
        assert_eq!(cpus_in_list("a-b"), None);
        assert_eq!(cpus_in_list("0,,1"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_pinned_to_one_cpu_still_counts_the_others() {
        use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
        let allowed = sched_getaffinity(None).expect("affinity");
        let Some(first) = (0..CpuSet::MAX_CPU).find(|&cpu| allowed.is_set(cpu)) else {
            return;
        };
        let unpinned = processors();
        std::thread::spawn(move || {
            let mut only = CpuSet::new();
            only.set(first);
            sched_setaffinity(None, &only).expect("pin");
            assert_eq!(
                std::thread::available_parallelism().map(|n| n.get()).ok(),
                Some(1)
            );
            // What the thread may use alone no longer decides; the machine's CPUs do.
            assert!(
                processors() >= unpinned.min(2),
                "{} < {}",
                processors(),
                unpinned.min(2)
            );
        })
        .join()
        .expect("pinned thread");
    }
}
