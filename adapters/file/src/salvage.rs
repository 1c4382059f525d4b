//! Salvage: rebuilding a store that refuses to open from what is intact in its files.
//!
//! Opening never skips damage (a record that fails its checksum, a missing segment, a frame
//! that does not decode), because what is lost there may have been acknowledged.
//! [`FileBackend::salvage`](crate::FileBackend::salvage) reads the damaged folder without
//! changing it ([`fairq_journal::salvage`]), applies every frame it can decode in order, as
//! replay does, and writes the result into a new folder as a fresh store: each job's latest
//! intact record, the queues' counters and the id counter. The report says what was lost.

use std::path::{Path, PathBuf};

use fairq_journal::JournaledQueue;
use fairq_journal::salvage::{Damage, salvage};
use fairq_worker::JobId;

use crate::error::FileError;
use crate::folder::{FolderLock, SharedLock, existing_folder, prepare_folder};
use crate::frame::{Batch, frame_header};
use crate::local::{JOURNAL_NAME, journal_config};
use crate::options::FileOptions;
use crate::replay::{Rebuild, decode};

/// A frame of the new store is written once its entries reach this many bytes (as the
/// store's own writer groups them).
const FRAME_TARGET: usize = 8 << 20;

/// What [`FileBackend::salvage`](crate::FileBackend::salvage) read and wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SalvageReport {
    /// Journal items read intact from the damaged folder.
    pub items: u64,
    /// Stretches of the damaged folder's files that could not be read (each with its file,
    /// offset, length and reason; a torn tail of the newest segment is marked as such).
    pub damage: Vec<Damage>,
    /// Intact journal items whose frame did not decode, with the reason.
    pub unreadable_frames: Vec<(u64, String)>,
    /// Jobs whose progress was read but whose full record (with the payload) was lost: they
    /// are not in the new store.
    pub lost_jobs: Vec<JobId>,
    /// Jobs written to the new store.
    pub jobs: u64,
    /// Queues whose counters were written to the new store.
    pub queues: u64,
}

impl SalvageReport {
    /// Whether anything was found lost: damage other than a torn tail (the remains of an
    /// interrupted write, which opening cuts off too), a frame that did not decode, or a job
    /// whose full record is gone.
    ///
    /// ```
    /// assert!(!fairq_file::SalvageReport::default().lost_anything());
    /// ```
    pub fn lost_anything(&self) -> bool {
        self.damage.iter().any(|d| !d.torn_tail)
            || !self.unreadable_frames.is_empty()
            || !self.lost_jobs.is_empty()
    }
}

/// Rebuilds the store of folder `from` into folder `to` (new, or empty). See
/// [`FileBackend::salvage`](crate::FileBackend::salvage).
pub(crate) fn salvage_store(
    from: &Path,
    to: &Path,
    options: &FileOptions,
) -> Result<SalvageReport, FileError> {
    existing_folder(from)?;
    // An owner may be writing: salvage only a folder nobody owns, and keep owners out.
    let _from_lock = match FolderLock::try_shared(from)? {
        SharedLock::Held => {
            return Err(FileError::Locked {
                path: from.to_path_buf(),
                detail: " (a live process owns it: it opened, so it needs no salvage)".into(),
            });
        }
        SharedLock::Taken(lock) => Some(lock),
        SharedLock::NoLockFile => None,
    };
    check_empty(to)?;

    let config = journal_config(options);
    let mut report = SalvageReport::default();
    let mut rebuild = Rebuild::default();
    // A frame of a newer format is not damage: this build cannot salvage that store.
    let mut newer = None;
    let read = salvage(
        from,
        JOURNAL_NAME,
        config.storage.as_ref(),
        &mut |id, data| match decode(from, id.0, data) {
            Ok(frame) => {
                rebuild.apply(id.0, frame);
            }
            Err(e @ FileError::UnsupportedVersion { .. }) => {
                newer.get_or_insert(e);
            }
            Err(e) => report.unreadable_frames.push((id.0, e.to_string())),
        },
    )?;
    if let Some(e) = newer {
        return Err(e);
    }
    if read.segments == 0 {
        // A wrong path would otherwise make an empty store and report nothing lost.
        return Err(FileError::io(
            from,
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "it holds no journal segment (jobs.*.seg), so no store to salvage",
            ),
        ));
    }
    report.items = read.items;
    report.damage = read.damage;
    report.lost_jobs = rebuild.orphans.keys().copied().collect();

    prepare_folder(to, options.dir_mode)?;
    let Some(_to_lock) = FolderLock::try_acquire(to, options.file_mode)? else {
        return Err(FileError::Locked {
            path: to.to_path_buf(),
            detail: " (its lock file is held)".into(),
        });
    };
    // Checked again under the lock: nobody wrote a store there meanwhile.
    check_empty_but_lock(to)?;
    let journal = JournaledQueue::open(to, JOURNAL_NAME, config)?;
    let encode = |e: postcard::Error| FileError::Poisoned {
        reason: format!("cannot encode a record: {e}"),
    };
    let put = |batch: &Batch| -> Result<(), FileError> {
        let mut frame = frame_header(rebuild.next_id);
        frame.extend_from_slice(&batch.bytes);
        journal.put(&frame)?;
        Ok(())
    };
    let mut batch = Batch::default();
    for (id, record) in &rebuild.records {
        batch.job(*id, record).map_err(encode)?;
        report.jobs += 1;
        if batch.bytes.len() >= FRAME_TARGET {
            put(&std::mem::take(&mut batch))?;
        }
    }
    for (name, totals) in &rebuild.totals {
        batch.queue(name, totals).map_err(encode)?;
        report.queues += 1;
    }
    // Always one frame more, even empty: it carries the id counter, so that new jobs get
    // new ids.
    put(&batch)?;
    journal.sync()?;
    journal.close()?;
    Ok(report)
}

/// `to` does not exist, or is an empty folder.
fn check_empty(to: &Path) -> Result<(), FileError> {
    entries(to).and_then(|names| refuse_any(to, names))
}

/// `to` holds nothing but the lock file this salvage just took.
fn check_empty_but_lock(to: &Path) -> Result<(), FileError> {
    entries(to).and_then(|names| {
        refuse_any(
            to,
            names
                .into_iter()
                .filter(|n| n != crate::folder::LOCK_FILE)
                .collect(),
        )
    })
}

fn entries(dir: &Path) -> Result<Vec<String>, FileError> {
    match std::fs::read_dir(dir) {
        Ok(read) => read
            .map(|e| {
                e.map(|e| e.file_name().to_string_lossy().into_owned())
                    .map_err(|e| FileError::io(dir, e))
            })
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Err(FileError::NotAFolder {
            path: dir.to_path_buf(),
        }),
        Err(e) => Err(FileError::io(dir, e)),
    }
}

fn refuse_any(dir: &Path, names: Vec<String>) -> Result<(), FileError> {
    match names.first() {
        None => Ok(()),
        Some(name) => Err(FileError::NotEmpty {
            path: dir.to_path_buf(),
            found: PathBuf::from(name),
        }),
    }
}
