//! Opening a queue: checking the folder, reading checkpoints, scanning segments, restoring
//! readers and starting the writer.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use crate::checkpoint::{
    decode_checkpoint, encode_registry, names_without_registry, registry_names,
};
use crate::chunks::ChunkCache;
use crate::config::{JournalConfig, SyncPolicy};
use crate::files::{
    belongs_to, checkpoint_path, is_temp_of, lock_path, parse_checkpoint_name, parse_segment_name,
    registry_path, segment_name,
};
use crate::format::SEGMENT_HEADER_LEN;
use crate::name::{check_file_names, validate_name};
use crate::periodic::spawn_flusher;
use crate::pos::Pos;
use crate::reader_state::{new_shared, ReaderShared, ReaderState};
use crate::report::RecoveryReport;
use crate::scan::{check_contiguous, scan, Restored, Scan};
use crate::state::{DueSync, Inner, Sealed, SegIndex, SyncState, Visible, Writer};
use crate::storage::{
    create_dir_durably, read_if_present, replace_atomically, DirEntry, EntryKind, LockGuard,
    ReadOnlyFile, Storage, WriteFile,
};
use crate::sync::proto;
use crate::tail::{check_tail, read_tail, record_tail};
use crate::wake::Doorbell;
use crate::write::create_segment;
use crate::JournalError;

/// Whether opening may change files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    ReadWrite,
    ReadOnly,
}

fn io_err(p: &Path) -> impl FnOnce(io::Error) -> JournalError + '_ {
    move |e| JournalError::io(p, e)
}

/// Refuses any entry of the queue's that is not a regular file: the journal never reads or
/// writes through a symbolic link, and a directory or FIFO under one of its names is damage.
fn check_entries(dir: &Path, queue: &str, entries: &[DirEntry]) -> Result<(), JournalError> {
    for e in entries {
        if e.kind == EntryKind::File || !belongs_to(queue, &e.name) {
            continue;
        }
        let what = match e.kind {
            EntryKind::Symlink => {
                "it is a symbolic link; the journal only uses regular files it created itself"
            }
            EntryKind::Dir => "it is a directory where the journal expects one of its files",
            _ => "it is not a regular file (a FIFO, socket or device)",
        };
        return Err(JournalError::UnsafeFile {
            path: dir.join(&e.name),
            reason: what.to_string(),
        });
    }
    Ok(())
}

fn list(storage: &dyn Storage, dir: &Path, queue: &str) -> Result<Vec<String>, JournalError> {
    let entries = storage.list_dir(dir).map_err(io_err(dir))?;
    check_entries(dir, queue, &entries)?;
    Ok(entries
        .into_iter()
        .filter(|e| e.kind == EntryKind::File)
        .map(|e| e.name)
        .collect())
}

fn take_lock(
    storage: &dyn Storage,
    dir: &Path,
    queue: &str,
    config: &JournalConfig,
    access: Access,
) -> Result<Option<Box<dyn LockGuard>>, JournalError> {
    let path = lock_path(dir, queue);
    let taken = match access {
        Access::ReadWrite => storage.lock(&path, config.file_mode).map(Some),
        Access::ReadOnly => storage.lock_shared(&path),
    };
    taken.map_err(|e| {
        if e.kind() == io::ErrorKind::WouldBlock {
            JournalError::Locked { path }
        } else {
            JournalError::io(path, e)
        }
    })
}

/// The reader names of the registry, and whether they were taken from the checkpoint files
/// among `files` because the registry was missing (`checkpoint::names_without_registry`).
fn read_registry(
    storage: &dyn Storage,
    dir: &Path,
    queue: &str,
    files: &[String],
) -> Result<(Vec<String>, bool), JournalError> {
    let reg_path = registry_path(dir, queue);
    match read_if_present(storage, &reg_path).map_err(io_err(&reg_path))? {
        Some(file) => registry_names(&file)
            .map(|names| (names, false))
            .map_err(|reason| JournalError::corrupt(&reg_path, 0, reason)),
        None => {
            let checkpoints: Vec<&str> = files
                .iter()
                .filter_map(|f| parse_checkpoint_name(queue, f))
                .collect();
            let names = names_without_registry(&checkpoints);
            let rebuilt = names.iter().all(|n| !n.is_empty());
            Ok((names, rebuilt))
        }
    }
}

fn read_checkpoint(
    storage: &dyn Storage,
    dir: &Path,
    queue: &str,
    reader: &str,
) -> Result<Restored, JournalError> {
    let path = checkpoint_path(dir, queue, reader);
    // A name the file system refuses as too long names no file: a reader an earlier version
    // registered without ever writing its checkpoint. It restarts from the oldest item, as
    // one without a checkpoint does. Any other error reading it (EIO, EMFILE, a folder in
    // its place) fails the open: it may pass, and restarting the reader would deliver
    // every item it finished again.
    let read = match read_if_present(storage, &path) {
        Ok(read) => read,
        Err(e) if e.kind() == std::io::ErrorKind::InvalidFilename => {
            tracing::error!(path = %path.display(), error = %e, "the checkpoint's name is too long for the file system; the reader restarts from the oldest item");
            None
        }
        Err(e) => return Err(JournalError::io(&path, e)),
    };
    let checkpoint = match read {
        Some(bytes) => match decode_checkpoint(&bytes) {
            Ok(cp) => Some(cp),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "unreadable checkpoint; the reader restarts from the oldest item");
                None
            }
        },
        None => None,
    };
    // An id no item can have (the journal never gives out the last one) makes the
    // checkpoint as unusable as a bad checksum would.
    let checkpoint = checkpoint.filter(|cp| {
        let usable = cp.head < u64::MAX
            && cp.done.iter().all(|&id| id < u64::MAX)
            && cp.errors.iter().all(|&(id, _)| id < u64::MAX);
        if !usable {
            tracing::warn!(path = %path.display(), "checkpoint names an item id out of range; the reader restarts from the oldest item");
        }
        usable
    });
    let has_checkpoint = checkpoint.is_some();
    let cp = checkpoint.unwrap_or_default();
    Ok(Restored {
        name: reader.to_string(),
        head: cp.head,
        head_segment: cp.head_segment,
        tail_segment: cp.tail_segment,
        has_checkpoint,
        done: cp.done.into_iter().collect(),
        errors: cp.errors.into_iter().collect(),
        cursor: None,
        items: 0,
        bytes: 0,
    })
}

/// Segments are retired oldest first and only once every reader's checkpoint has passed
/// them, so a reader's checkpoint names the oldest segment that must still exist. One
/// missing at the front (or every one missing) is damage, never skipped. A checkpoint also
/// names the newest segment of its time: one missing at the end is damage too.
fn check_front(
    dir: &Path,
    queue: &str,
    present: &[u64],
    scan: &Scan,
    readers: &[Restored],
) -> Result<(), JournalError> {
    let missing = |seg: u64, why: String| {
        JournalError::corrupt(
            &dir.join(segment_name(queue, seg)),
            0,
            format!("the segment file is missing: {why}; the items it held would be lost"),
        )
    };
    let (first, last) = (present.first().copied(), present.last().copied());
    for r in readers.iter().filter(|r| r.has_checkpoint) {
        let who = if r.name.is_empty() {
            "the default reader".to_string()
        } else {
            format!("reader {:?}", r.name)
        };
        if let (Some(l), true) = (last, r.tail_segment > 0) {
            // Version 3 checkpoint: it names the newest segment of its time, which was never
            // retired (the writer's segment never is) and so must still exist.
            if l < r.tail_segment {
                return Err(missing(
                    l + 1,
                    format!(
                        "{who}'s checkpoint was written when segment {} existed (the newest left is {l})",
                        r.tail_segment
                    ),
                ));
            }
        }
        if r.head_segment > 0 {
            // Version 2 checkpoint: it names the segment.
            match (first, last) {
                (Some(f), _) if f > r.head_segment => {
                    return Err(missing(
                        r.head_segment,
                        format!(
                            "{who} still needs segment {} (the oldest left is {f})",
                            r.head_segment
                        ),
                    ))
                }
                (Some(_), Some(l)) if l < r.head_segment => {
                    return Err(missing(
                        l + 1,
                        format!(
                            "{who}'s checkpoint lies in segment {} (the newest left is {l})",
                            r.head_segment
                        ),
                    ))
                }
                (None, _) => {
                    return Err(missing(
                        r.head_segment,
                        format!(
                            "{who} still needs segment {} and no segment is left",
                            r.head_segment
                        ),
                    ))
                }
                _ => {}
            }
        } else {
            // Version 1 checkpoint: only ids tell. Retired segments held only ids below every
            // reader's head.
            match first {
                None => {
                    return Err(JournalError::corrupt(
                        &checkpoint_path(dir, queue, &r.name), 0,
                        format!("every segment file of queue {queue:?} is missing, but {who} has a checkpoint"),
                    ))
                }
                Some(f) if f > 1 && scan.first_id.is_some_and(|id| r.head < id) => {
                    return Err(missing(
                        f - 1,
                        format!(
                            "{who} needs item {} but the oldest segment left starts at item {}",
                            r.head,
                            scan.first_id.unwrap_or(0)
                        ),
                    ))
                }
                _ => {}
            }
        }
    }
    Ok(())
}

pub(crate) fn open(
    dir: &Path,
    name: &str,
    config: JournalConfig,
    access: Access,
) -> Result<Arc<Inner>, JournalError> {
    validate_name(name)?;
    check_file_names(name, None)?;
    if config.segment_size <= SEGMENT_HEADER_LEN as u64 {
        // A new segment would be full with its header alone: the writer would rotate for
        // ever, creating empty segments without writing a record.
        return Err(JournalError::InvalidConfig {
            reason: format!(
                "segment_size {} leaves no room for a record: a segment's header alone takes \
                 {SEGMENT_HEADER_LEN} bytes",
                config.segment_size
            ),
        });
    }
    if config.max_item_size > crate::format::MAX_PAYLOAD_LEN {
        // A record's length is a 32-bit field: a larger item's would wrap, and the record
        // would read back as damage.
        return Err(JournalError::InvalidConfig {
            reason: format!(
                "max_item_size {} is more than a record can hold ({} bytes)",
                config.max_item_size,
                crate::format::MAX_PAYLOAD_LEN
            ),
        });
    }
    if config.mapped_writes && config.sync.is_durable_on_put() {
        return Err(JournalError::InvalidConfig {
            reason: format!(
                "mapped_writes needs SyncPolicy::Never or SyncPolicy::Periodic, not {:?}: under \
                 the others every put waits for a sync, which a map does not speed up",
                config.sync
            ),
        });
    }
    let read_only = access == Access::ReadOnly;
    let storage = config.storage.clone();
    if !read_only {
        create_dir_durably(storage.as_ref(), dir, config.dir_mode).map_err(io_err(dir))?;
    }
    // Check the folder before touching the lock file, then list it again under the lock.
    list(storage.as_ref(), dir, name)?;
    let dir_lock = take_lock(storage.as_ref(), dir, name, &config, access)?;
    let files = list(storage.as_ref(), dir, name)?;
    let mut report = RecoveryReport::default();

    let (names, rebuilt) = read_registry(storage.as_ref(), dir, name, &files)?;
    let mut restored = names
        .iter()
        .map(|r| read_checkpoint(storage.as_ref(), dir, name, r))
        .collect::<Result<Vec<_>, _>>()?;
    if rebuilt {
        tracing::warn!(queue = name, readers = ?names, "the reader registry is missing; the named readers were taken from their checkpoint files");
        report.registry_rebuilt.clone_from(&names);
        if !read_only {
            // Written before the stale checkpoints go: until then, the next open finds the
            // same files and decides the same way.
            let reg_path = registry_path(dir, name);
            replace_atomically(
                storage.as_ref(),
                &reg_path,
                &encode_registry(&names),
                config.file_mode,
            )
            .map_err(io_err(&reg_path))?;
        }
    }

    // Leftovers of interrupted checkpoint writes and of readers that were replaced.
    if !read_only {
        for file in &files {
            let stale_cp =
                parse_checkpoint_name(name, file).is_some_and(|r| !names.iter().any(|n| n == r));
            if is_temp_of(name, file) || stale_cp {
                let p = dir.join(file);
                storage.remove_file(&p).map_err(io_err(&p))?;
            }
        }
    }

    let mut seg_ids: Vec<u64> = files
        .iter()
        .filter_map(|f| parse_segment_name(name, f))
        .collect();
    seg_ids.sort_unstable();
    if let Some(&last) = seg_ids.last().filter(|&&s| s == u64::MAX) {
        // No segment id follows it, so the journal never creates it (see `start_writer`).
        return Err(JournalError::corrupt(
            &dir.join(segment_name(name, last)),
            0,
            format!("segment id {last} is out of range: no segment could follow it"),
        ));
    }
    check_contiguous(dir, name, &seg_ids)?;
    // Before the scan, which may cut a torn end off what it takes for the last segment.
    let tail = read_tail(storage.as_ref(), dir, name)?;
    check_tail(dir, name, tail, &seg_ids)?;
    if !seg_ids.is_empty() {
        // An existing queue: a reader without a checkpoint starts again from the oldest item.
        for r in restored.iter().filter(|r| !r.has_checkpoint) {
            tracing::warn!(queue = name, reader = %r.name, "no usable checkpoint; the reader restarts from the oldest item");
            report.restarted_readers.push(r.name.clone());
        }
    }
    let scan = scan(
        storage.as_ref(),
        dir,
        name,
        &seg_ids,
        &mut restored,
        read_only,
        &mut report,
    )?;
    let present: Vec<u64> = seg_ids
        .iter()
        .copied()
        .filter(|&s| Some(s) != scan.torn_last)
        .collect();
    check_front(dir, name, &present, &scan, &restored)?;

    // Ids continue after every id the journal or a checkpoint has seen, so an id that a
    // checkpoint remembers is never given to a new item.
    let mut next_id = scan.last_id.map_or(1, |p| p + 1);
    for r in restored.iter().filter(|r| r.has_checkpoint) {
        next_id = next_id.max(r.head);
        if let Some(&m) = r.done.last() {
            next_id = next_id.max(m + 1);
        }
        if let Some((&m, _)) = r.errors.last_key_value() {
            next_id = next_id.max(m + 1);
        }
    }

    let Scan {
        mut sealed,
        last,
        unsynced_sealed,
        ..
    } = scan;
    let (seg_id, file, offset) = if read_only {
        // The newest segment stays the "open" one; readers stop at its last valid record.
        let (seg, len) = last.map_or(
            (
                present.last().map_or(1, |s| s + 1),
                SEGMENT_HEADER_LEN as u64,
            ),
            |l| (l.id, l.len),
        );
        let file: Arc<dyn WriteFile> = Arc::new(ReadOnlyFile);
        (seg, file, len)
    } else {
        start_writer(
            storage.as_ref(),
            dir,
            name,
            &config,
            last,
            scan.torn_last,
            tail,
            &mut sealed,
        )?
    };
    let end = Pos {
        seg: seg_id,
        off: offset,
    };

    let mut writer = Writer::new(seg_id, file, offset, next_id);
    // A previous run's puts into segments it sealed without a sync may still be only in
    // the page cache: the next sync (`sync()`, `close()`, a periodic one) makes them durable.
    writer.unsynced_sealed = unsynced_sealed
        .into_iter()
        .filter(|s| !read_only && sealed.contains_key(s))
        .collect();
    let mut segs: BTreeMap<u64, Option<Sealed>> =
        sealed.into_iter().map(|(k, v)| (k, Some(v))).collect();
    segs.insert(seg_id, None);

    let readers: Vec<Arc<ReaderShared>> = restored
        .into_iter()
        .map(|r| {
            let path: PathBuf = checkpoint_path(dir, name, &r.name);
            let cursor = r.cursor.unwrap_or(end);
            let mut st = ReaderState::new(cursor, r.head, r.done, r.errors, config.reader);
            // The put totals start at zero: these waiting items are counted as "put before".
            st.consumed_items = 0u64.wrapping_sub(r.items);
            st.consumed_bytes = 0u64.wrapping_sub(r.bytes);
            // What the checkpoint on disk lets retirement delete: nothing without one.
            let durable_segment = match (r.has_checkpoint, r.head_segment) {
                (false, _) => 0,
                (true, 0) => cursor.seg,
                (true, s) => s,
            };
            new_shared(r.name, path, st, durable_segment, 0)
        })
        .collect();

    let chunks = ChunkCache::new(config.read_cache_bytes);
    for r in &readers {
        chunks.track(r.at.clone());
    }
    let sync = config.sync;
    let take_turns = crate::append::takes_turns(&config);
    let opened_at = config.clock.now();
    let limited = config.reader.has_limits();
    // Periodic syncs come from a timer thread, or from the puts themselves on a storage
    // that takes no calls from helper threads (`periodic.rs`).
    let periodic = match (sync, read_only) {
        (SyncPolicy::Periodic(every), false) => Some(every),
        _ => None,
    };
    let timer_thread = config.storage.helper_threads();
    let due_sync = periodic
        .filter(|_| !timer_thread)
        .map(|every| DueSync::new(every, config.clock.now_ms()));
    let inner = Arc::new(Inner {
        name: name.to_string(),
        dir: dir.to_path_buf(),
        config,
        writer: proto::Mutex::new(writer),
        written_cv: proto::Condvar::new(),
        stepped_down: proto::AtomicU64::new(next_id.wrapping_sub(1)),
        failures_kept: proto::AtomicBool::new(false),
        crowded: proto::AtomicBool::new(crate::append::CROWDED_AT_OPEN),
        take_turns,
        put_items: AtomicU64::new(0),
        put_bytes: AtomicU64::new(0),
        limited: AtomicBool::new(limited),
        sync: Mutex::new(SyncState {
            synced: end,
            syncing: false,
            waiting: 0,
            poisoned: None,
        }),
        sync_cv: Condvar::new(),
        index: Mutex::new(SegIndex { segs }),
        visible: Visible::new(end),
        readers: RwLock::new(readers),
        registry: Mutex::new(()),
        chunks,
        bell: Doorbell::new(),
        poisoned: AtomicBool::new(false),
        closed: AtomicBool::new(false),
        opened_at,
        read_only,
        report,
        stop: Arc::new((Mutex::new(false), Condvar::new())),
        flusher: Mutex::new(None),
        due_sync,
        dir_lock: Mutex::new(dir_lock),
    });
    inner.attach_map(&mut proto::lock(&inner.writer));
    if let Some(every) = periodic.filter(|_| timer_thread) {
        spawn_flusher(&inner, every)?;
    }
    Ok(inner)
}

/// The writer's segment: an empty last segment is reused, else the last one is sealed and a
/// new one started (with the id of a torn one that was removed, so ids stay contiguous).
/// Either way the tail marker (`tail`, as read) ends up naming it.
#[allow(clippy::too_many_arguments)]
fn start_writer(
    storage: &dyn Storage,
    dir: &Path,
    name: &str,
    config: &JournalConfig,
    last: Option<crate::scan::LastSegment>,
    torn_last: Option<u64>,
    tail: Option<u64>,
    sealed: &mut BTreeMap<u64, Sealed>,
) -> Result<(u64, Arc<dyn WriteFile>, u64), JournalError> {
    if let Some(l) = &last {
        let path = dir.join(segment_name(name, l.id));
        let f: Arc<dyn WriteFile> = Arc::from(storage.open_append(&path).map_err(io_err(&path))?);
        f.sync_data().map_err(io_err(&path))?;
        if !l.has_records {
            // A folder from before tail markers, or a segment created ahead of the writer.
            if tail != Some(l.id) {
                // Its creation may have been cut short before the folder was synced (the
                // marker is only written after that sync): puts are about to be
                // acknowledged in it, so its directory entry is made durable here, not left
                // to the marker's write, whose failure is only logged.
                storage.sync_dir(dir).map_err(io_err(dir))?;
                record_tail(storage, dir, name, l.id, config.file_mode);
            }
            return Ok((l.id, f, l.len));
        }
        sealed.insert(l.id, Sealed { len: l.len });
    }
    if let Some(prev) = torn_last
        .and_then(|t| t.checked_sub(1))
        .filter(|p| sealed.contains_key(p))
    {
        // The last segment was torn while it was being created, so the one before it was
        // the writer's and may have been sealed without a sync: the header that said so was
        // torn with it, and the new segment's header says the opposite. Synced here, as the
        // last segment is above.
        let path = dir.join(segment_name(name, prev));
        let f = storage.open_append(&path).map_err(io_err(&path))?;
        f.sync_data().map_err(io_err(&path))?;
    }
    let new = match (torn_last, &last) {
        (Some(torn), _) => torn,
        (None, None) => 1,
        (None, Some(l)) => next_segment_id(l.id)
            .ok_or_else(|| no_segment_after(&dir.join(segment_name(name, l.id)), l.id))?,
    };
    let f = create_segment(storage, dir, name, new, false, config.file_mode)?;
    Ok((new, f, SEGMENT_HEADER_LEN as u64))
}

/// The id of the segment after `seg`, unless that would be `u64::MAX`: no id would follow
/// that one, so the journal never creates it (and opening refuses it).
pub(crate) fn next_segment_id(seg: u64) -> Option<u64> {
    seg.checked_add(1).filter(|&next| next < u64::MAX)
}

/// The error for a segment at `path` that no segment can follow.
pub(crate) fn no_segment_after(path: &Path, seg: u64) -> JournalError {
    JournalError::corrupt(
        path,
        0,
        format!("no segment can follow segment {seg}: the next segment id is out of range"),
    )
}
