//! `fairq-scale-record`: the `--exec` command of the scale tests. It appends a `start` line to
//! the log named by `FAIRQ_SCALE_LOG`, works for `FAIRQ_SCALE_WORK_MS` milliseconds, and, for
//! a job whose key starts with `hold`, waits until a file named like the key exists in the
//! folder `FAIRQ_SCALE_HOLD_DIR` (so a test releases held jobs one by one); then it appends
//! a `done` line and exits 0. Each line is one `write` to a file opened for
//! appending, so lines of concurrent commands do not interleave.
#![forbid(unsafe_code)]

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use fairq_scale_tests::record::{now_ns, Event, Step};

/// The longest a held job waits for its release before it fails.
const HOLD_AT_MOST: Duration = Duration::from_secs(300);

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn append(log: &str, event: &Event) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    file.write_all(event.line().as_bytes())
}

fn main() -> ExitCode {
    let at_ns = now_ns();
    let Some(log) = var("FAIRQ_SCALE_LOG") else {
        eprintln!("FAIRQ_SCALE_LOG is not set");
        return ExitCode::from(2);
    };
    let (Some(job), Some(attempt)) = (
        var("FAIRQ_JOB_ID").and_then(|v| v.parse().ok()),
        var("FAIRQ_ATTEMPT").and_then(|v| v.parse().ok()),
    ) else {
        eprintln!("FAIRQ_JOB_ID and FAIRQ_ATTEMPT must be numbers");
        return ExitCode::from(2);
    };
    let key = var("FAIRQ_KEY").unwrap_or_default();
    let mut event = Event {
        step: Step::Start,
        at_ns,
        job,
        attempt,
        key,
        worker: 0,
    };
    if let Err(e) = append(&log, &event) {
        eprintln!("writing {log}: {e}");
        return ExitCode::from(3);
    }
    let work = var("FAIRQ_SCALE_WORK_MS")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    std::thread::sleep(Duration::from_millis(work));
    if event.key.starts_with("hold") {
        let Some(folder) = var("FAIRQ_SCALE_HOLD_DIR") else {
            eprintln!("a held job needs FAIRQ_SCALE_HOLD_DIR");
            return ExitCode::from(2);
        };
        let release = std::path::Path::new(&folder).join(&event.key);
        let since = Instant::now();
        while !release.exists() {
            if since.elapsed() > HOLD_AT_MOST {
                eprintln!("never released");
                return ExitCode::from(4);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    event.step = Step::Done;
    event.at_ns = now_ns();
    if let Err(e) = append(&log, &event) {
        eprintln!("writing {log}: {e}");
        return ExitCode::from(3);
    }
    ExitCode::SUCCESS
}
