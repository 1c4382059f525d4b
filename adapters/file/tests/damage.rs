//! The corruption matrix: every kind of damage (truncate, flip a byte, delete, replace with
//! a symbolic link, zero-fill) to every kind of file of a store folder (first, middle and last
//! journal segment, the journal's checkpoint, its reader registry, its lock file and the
//! folder's lock file). Each outcome must be one of:
//!
//! * the store opens with every acknowledged job, payload intact;
//! * opening fails with an error that names the damaged file;
//! * the store opens without some jobs, and its recovery report names the damaged file, the
//!   offset and the bytes dropped (only a cut-off tail of the last segment can do this: its
//!   damage looks exactly like a write torn by a crash).
//!
//! Never a silent loss, and never a write outside the folder through a planted link.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{START, copy_folder, runtime, segments, small_segments};
use fairq_file::{FileBackend, FileError, FileOptions};
use fairq_worker::{Backend, JobId, ListFilter, ManualClock, NewJob};

const JOBS: u8 = 90;

/// A closed store whose journal spans at least three segments; returns every job's payload.
fn build(dir: &Path) -> BTreeMap<JobId, Vec<u8>> {
    let clock = ManualClock::new(START);
    let mut jobs = BTreeMap::new();
    runtime().block_on(async {
        let store = FileBackend::open(dir, small_segments(&clock)).unwrap();
        for i in 0..JOBS {
            let payload = vec![i; 2_000];
            let id = store
                .enqueue(NewJob::new("q", format!("k{}", i % 7), payload.clone()))
                .await
                .unwrap();
            jobs.insert(id, payload);
        }
        store.close().unwrap();
    });
    assert!(segments(dir).len() >= 3, "{:?}", segments(dir));
    jobs
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    Truncate,
    Flip,
    Delete,
    Symlink,
    ZeroFill,
}

/// Applies `damage` to `file`; a symbolic link points at a copy outside the folder, in
/// `outside`, whose path is returned.
fn apply(damage: Damage, file: &Path, outside: &Path) -> Option<PathBuf> {
    let bytes = std::fs::read(file).unwrap();
    match damage {
        Damage::Truncate => {
            let f = std::fs::OpenOptions::new().write(true).open(file).unwrap();
            f.set_len(bytes.len() as u64 / 2).unwrap();
        }
        Damage::Flip => {
            let mut bytes = bytes;
            if !bytes.is_empty() {
                let at = bytes.len() * 2 / 3;
                bytes[at] ^= 0x10;
            }
            std::fs::write(file, bytes).unwrap();
        }
        Damage::Delete => std::fs::remove_file(file).unwrap(),
        Damage::Symlink => {
            let target = outside.join(file.file_name().unwrap());
            std::fs::write(&target, &bytes).unwrap();
            std::fs::remove_file(file).unwrap();
            std::os::unix::fs::symlink(&target, file).unwrap();
            return Some(target);
        }
        Damage::ZeroFill => std::fs::write(file, vec![0u8; bytes.len()]).unwrap(),
    }
    None
}

/// What opening the damaged folder did.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    AllThere,
    ErrorNamingTheFile,
    LossReported,
}

fn open_and_judge(
    dir: &Path,
    damaged: &Path,
    jobs: &BTreeMap<JobId, Vec<u8>>,
    read_only: bool,
) -> Result<Outcome, String> {
    let clock = ManualClock::new(START);
    let name = damaged.file_name().unwrap().to_string_lossy().into_owned();
    let opened = if read_only {
        FileBackend::open_read_only(dir, small_segments(&clock))
    } else {
        FileBackend::open(dir, small_segments(&clock))
    };
    let store = match opened {
        Ok(store) => store,
        Err(e) if e.to_string().contains(&name) => return Ok(Outcome::ErrorNamingTheFile),
        Err(e) => return Err(format!("an error that does not name {name}: {e}")),
    };
    let found: BTreeMap<JobId, Vec<u8>> = runtime().block_on(async {
        store
            .list(ListFilter::default().limit(usize::MAX))
            .await
            .unwrap()
            .into_iter()
            .map(|j| (j.id, j.payload))
            .collect()
    });
    let warnings = store.recovery_warnings();
    let report = store.recovery_report().cloned().unwrap_or_default();
    store.close().unwrap();
    if &found == jobs {
        return Ok(Outcome::AllThere);
    }
    for (id, payload) in &found {
        if jobs.get(id) != Some(payload) {
            return Err(format!("job {id} came back different (or from nowhere)"));
        }
    }
    let named = report.tails.iter().any(|t| t.path.ends_with(&name))
        || report.removed_segments.iter().any(|p| p.ends_with(&name));
    if named && warnings.iter().any(|w| w.contains(&name)) {
        Ok(Outcome::LossReported)
    } else {
        Err(format!(
            "{} of {} jobs lost silently (report: {report:?})",
            jobs.len() - found.len(),
            jobs.len()
        ))
    }
}

#[test]
fn every_damage_to_every_file_is_either_harmless_or_reported() {
    let template = tempfile::tempdir().unwrap();
    let jobs = build(template.path());
    let mut failures = Vec::new();
    let mut table = Vec::new();
    for damage in [
        Damage::Truncate,
        Damage::Flip,
        Damage::Delete,
        Damage::Symlink,
        Damage::ZeroFill,
    ] {
        for which in [
            "first segment",
            "middle segment",
            "last segment",
            "jobs.cp.state",
            "jobs.readers",
            "jobs.lock",
            "fairq.lock",
        ] {
            for read_only in [true, false] {
                let dir = tempfile::tempdir().unwrap();
                let outside = tempfile::tempdir().unwrap();
                copy_folder(template.path(), dir.path());
                let segs = segments(dir.path());
                let file = dir.path().join(match which {
                    "first segment" => segs[0].as_str(),
                    "middle segment" => segs[segs.len() / 2].as_str(),
                    "last segment" => segs[segs.len() - 1].as_str(),
                    name => name,
                });
                assert!(file.exists(), "{}", file.display());
                let target = apply(damage, &file, outside.path());
                let target_bytes = target.as_ref().map(|t| std::fs::read(t).unwrap());
                let outcome = open_and_judge(dir.path(), &file, &jobs, read_only);
                // A planted link is never written through.
                if let (Some(target), Some(bytes)) = (&target, &target_bytes) {
                    assert_eq!(
                        &std::fs::read(target).unwrap(),
                        bytes,
                        "{damage:?} {which}: the link's target outside the folder changed"
                    );
                }
                let label = format!(
                    "{damage:?} of the {which}{}",
                    if read_only { " (read-only open)" } else { "" }
                );
                match outcome {
                    Ok(outcome) => {
                        if outcome == Outcome::LossReported && which != "last segment" {
                            failures.push(format!(
                                "{label}: jobs lost with only a warning, outside the last segment's tail"
                            ));
                        }
                        if matches!(damage, Damage::Symlink)
                            && outcome != Outcome::ErrorNamingTheFile
                        {
                            failures.push(format!("{label}: a symbolic link was accepted"));
                        }
                        table.push(format!("{label}: {outcome:?}"));
                    }
                    Err(e) => failures.push(format!("{label}: {e}")),
                }
            }
        }
    }
    eprintln!("{}", table.join("\n"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_symlinked_lock_file_is_refused_and_its_target_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("precious");
    std::fs::write(&target, b"keep me").unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join("fairq.lock")).unwrap();
    for result in [
        FileBackend::open(dir.path(), FileOptions::default()),
        FileBackend::open_read_only(dir.path(), FileOptions::default()),
    ] {
        let err = result.unwrap_err();
        assert!(matches!(err, FileError::UnsafeFile { .. }), "{err:?}");
        assert!(err.to_string().contains("fairq.lock"), "{err}");
    }
    assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
    // A lock file that is a folder is refused as well.
    std::fs::remove_file(dir.path().join("fairq.lock")).unwrap();
    std::fs::create_dir(dir.path().join("fairq.lock")).unwrap();
    let err = FileBackend::open(dir.path(), FileOptions::default()).unwrap_err();
    assert!(matches!(err, FileError::UnsafeFile { .. }), "{err:?}");
}

#[test]
fn a_segment_missing_in_the_middle_or_front_names_the_file() {
    for position in ["first", "middle"] {
        let dir = tempfile::tempdir().unwrap();
        build(dir.path());
        let segs = segments(dir.path());
        let gone = match position {
            "first" => segs[0].clone(),
            _ => segs[1].clone(),
        };
        std::fs::remove_file(dir.path().join(&gone)).unwrap();
        let clock = ManualClock::new(START);
        let err = FileBackend::open(dir.path(), small_segments(&clock)).unwrap_err();
        assert!(err.is_corrupt(), "{position}: {err:?}");
        assert!(
            err.to_string().contains(&gone) && err.to_string().contains("missing"),
            "{position}: {err}"
        );
    }
}
