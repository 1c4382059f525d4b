//! What the `fairq-scale-record` job command writes: one line when a job's attempt starts
//! and one when it finishes successfully, each with the wall-clock time in nanoseconds. Every
//! worker process has a log of its own; merged and sorted by time they give the order of
//! events across all processes (they share the host's clock: network namespaces do not
//! change it).

use std::path::Path;

use crate::HarnessError;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// The command started (the job's attempt began running).
    Start,
    /// The command is about to exit successfully.
    Done,
}

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Start or done.
    pub step: Step,
    /// Wall-clock time, nanoseconds since the Unix epoch.
    pub at_ns: u128,
    /// The job id (`FAIRQ_JOB_ID`).
    pub job: u64,
    /// The attempt (`FAIRQ_ATTEMPT`).
    pub attempt: u32,
    /// The fairness key (`FAIRQ_KEY`; empty for none).
    pub key: String,
    /// Which worker process recorded it (the index of its log), filled in by [`read_logs`].
    pub worker: usize,
}

impl Event {
    /// The line written for this event (without the worker, which is the log it is in).
    ///
    /// ```
    /// use fairq_scale_tests::record::{Event, Step};
    /// let e = Event { step: Step::Start, at_ns: 5, job: 9, attempt: 1, key: "t 1".into(), worker: 0 };
    /// assert_eq!(e.line(), "start 5 9 1 t 1\n");
    /// assert_eq!(Event::parse(&e.line(), 0), Some(e));
    /// assert_eq!(Event::parse("start 5 9", 0), None);
    /// ```
    pub fn line(&self) -> String {
        let step = match self.step {
            Step::Start => "start",
            Step::Done => "done",
        };
        format!(
            "{step} {} {} {} {}\n",
            self.at_ns, self.job, self.attempt, self.key
        )
    }

    /// Reads a line written by [`line`](Self::line); `None` for anything else (such as a
    /// torn last line of a process killed mid-write).
    pub fn parse(line: &str, worker: usize) -> Option<Event> {
        let line = line.strip_suffix('\n').unwrap_or(line);
        let mut parts = line.splitn(5, ' ');
        let step = match parts.next()? {
            "start" => Step::Start,
            "done" => Step::Done,
            _ => return None,
        };
        Some(Event {
            step,
            at_ns: parts.next()?.parse().ok()?,
            job: parts.next()?.parse().ok()?,
            attempt: parts.next()?.parse().ok()?,
            key: parts.next()?.to_string(),
            worker,
        })
    }
}

/// Every event of the logs at `paths` (worker `i` wrote `paths[i]`; a missing log is an
/// empty one), in time order (ties by worker, then job).
pub fn read_logs<P: AsRef<Path>>(paths: &[P]) -> Result<Vec<Event>, HarnessError> {
    let mut events = Vec::new();
    for (worker, path) in paths.iter().enumerate() {
        let path = path.as_ref();
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(HarnessError::io(format!("reading {}", path.display()), e)),
        };
        events.extend(text.lines().filter_map(|l| Event::parse(l, worker)));
    }
    events.sort_by_key(|e| (e.at_ns, e.worker, e.job));
    Ok(events)
}

/// The current wall-clock time in nanoseconds since the Unix epoch.
pub fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_merge_in_time_order_and_skip_torn_lines() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::write(&a, "start 10 1 1 x\ndone 30 1 1 x\nstart 4").unwrap();
        std::fs::write(&b, "start 20 2 1 y\n").unwrap();
        let events = read_logs(&[&a, &b, &dir.path().join("missing")]).unwrap();
        let order: Vec<(u128, usize)> = events.iter().map(|e| (e.at_ns, e.worker)).collect();
        assert_eq!(order, [(10, 0), (20, 1), (30, 0)]);
    }
}
