//! Opening a queue: scanning segments, truncating a torn tail, restoring readers.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use crate::checkpoint::{decode_checkpoint, decode_registry, Checkpoint};
use crate::config::{JournalConfig, SyncPolicy};
use crate::files::{
    checkpoint_path, is_temp_of, lock_path, parse_checkpoint_name, parse_segment_name,
    registry_path, segment_name,
};
use crate::format::{decode_record, decode_segment_header, SEGMENT_HEADER_LEN};
use crate::name::validate_name;
use crate::queue::{
    create_segment, spawn_flusher, Inner, Pos, Sealed, SegIndex, SyncState, Writer,
};
use crate::reader::{new_shared, ReaderState};
use crate::storage::WriteFile;
use crate::JournalError;

/// What recovery learns about one reader.
struct Restored {
    name: String,
    checkpoint: Option<Checkpoint>,
    head: u64,
    done: BTreeSet<u64>,
    cursor: Option<Pos>,
    items: u64,
    bytes: u64,
}

/// Whether a valid record with an id above `prev` starts anywhere at or after `from`.
fn valid_record_after(data: &[u8], from: usize, prev: Option<u64>) -> bool {
    (from..data.len())
        .any(|p| matches!(decode_record(&data[p..]), Ok((r, _)) if prev.is_none_or(|q| r.id > q)))
}

fn corrupt(path: &Path, offset: usize, reason: impl Into<String>) -> JournalError {
    JournalError::Corrupt {
        path: path.to_path_buf(),
        offset: offset as u64,
        reason: reason.into(),
    }
}

pub(crate) fn open(
    dir: &Path,
    name: &str,
    config: JournalConfig,
) -> Result<Arc<Inner>, JournalError> {
    validate_name(name)?;
    let storage = config.storage.clone();
    let io_err = |p: &Path| {
        let p = p.to_path_buf();
        move |e: io::Error| JournalError::io(p, e)
    };
    storage.create_dir_all(dir).map_err(io_err(dir))?;
    let lock_file = lock_path(dir, name);
    let dir_lock = storage.lock(&lock_file).map_err(|e| {
        if e.kind() == io::ErrorKind::WouldBlock {
            JournalError::Locked {
                path: lock_file.clone(),
            }
        } else {
            JournalError::io(&lock_file, e)
        }
    })?;
    let files = storage.list_dir(dir).map_err(io_err(dir))?;

    // Readers: the registry lists them; without one there is just the default reader.
    let reg_path = registry_path(dir, name);
    let names = match storage.read_all(&reg_path) {
        Ok(bytes) => decode_registry(&bytes)
            .map_err(|e| corrupt(&reg_path, 0, format!("reader registry: {e}")))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => vec![String::new()],
        Err(e) => return Err(JournalError::io(&reg_path, e)),
    };
    if names.is_empty()
        || names
            .iter()
            .any(|n| (!n.is_empty() || names.len() > 1) && validate_name(n).is_err())
    {
        return Err(corrupt(
            &reg_path,
            0,
            "reader registry lists an invalid reader name",
        ));
    }
    let mut restored = Vec::with_capacity(names.len());
    for reader in &names {
        let path = checkpoint_path(dir, name, reader);
        let checkpoint = match storage.read_all(&path) {
            Ok(bytes) => match decode_checkpoint(&bytes) {
                Ok(cp) => Some(cp),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "unreadable checkpoint; the reader restarts from the oldest item");
                    None
                }
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                tracing::warn!(path = %path.display(), "missing checkpoint; the reader restarts from the oldest item");
                None
            }
            Err(e) => return Err(JournalError::io(&path, e)),
        };
        let (head, done) = match &checkpoint {
            Some(cp) => (cp.head, cp.done.iter().copied().collect()),
            None => (0, BTreeSet::new()),
        };
        restored.push(Restored {
            name: reader.clone(),
            checkpoint,
            head,
            done,
            cursor: None,
            items: 0,
            bytes: 0,
        });
    }

    // Leftovers of interrupted checkpoint writes and of readers that were replaced.
    for file in &files {
        let stale_cp =
            parse_checkpoint_name(name, file).is_some_and(|r| !names.iter().any(|n| n == r));
        if is_temp_of(name, file) || stale_cp {
            let p = dir.join(file);
            storage.remove_file(&p).map_err(io_err(&p))?;
        }
    }

    let mut seg_ids: Vec<u64> = files
        .iter()
        .filter_map(|f| parse_segment_name(name, f))
        .collect();
    seg_ids.sort_unstable();

    let mut sealed: BTreeMap<u64, Sealed> = BTreeMap::new();
    let mut prev_id: Option<u64> = None;
    // The last segment, if it survives: (id, length after recovery, holds records).
    let mut last: Option<(u64, u64, bool)> = None;
    let mut removed_last = None;
    for (i, &seg) in seg_ids.iter().enumerate() {
        let is_last = i + 1 == seg_ids.len();
        let path = dir.join(segment_name(name, seg));
        let data = storage.read_all(&path).map_err(io_err(&path))?;
        match decode_segment_header(&data) {
            Ok(h) if h.segment_id == seg => {}
            Ok(h) => {
                return Err(corrupt(
                    &path,
                    0,
                    format!(
                        "header names segment {} but the file is segment {seg}",
                        h.segment_id
                    ),
                ))
            }
            Err(e) => {
                if is_last && !valid_record_after(&data, 0, prev_id) {
                    // Created just before a crash: nothing in it was ever acknowledged.
                    tracing::warn!(path = %path.display(), error = %e, "removing a segment with a torn header");
                    storage.remove_file(&path).map_err(io_err(&path))?;
                    storage.sync_dir(dir).map_err(io_err(dir))?;
                    removed_last = Some(seg);
                    break;
                }
                return Err(corrupt(&path, 0, format!("segment header: {e}")));
            }
        }
        let mut off = SEGMENT_HEADER_LEN;
        let mut has_records = false;
        let mut truncate_at = None;
        while off < data.len() {
            match decode_record(&data[off..]) {
                Ok((rec, n)) if prev_id.is_none_or(|p| rec.id > p) => {
                    let pos = Pos {
                        seg,
                        off: off as u64,
                    };
                    let len = rec.payload.len() as u64;
                    for r in restored.iter_mut() {
                        if rec.id >= r.head {
                            if r.cursor.is_none() {
                                r.cursor = Some(pos);
                            }
                            if !r.done.contains(&rec.id) {
                                r.items += 1;
                                r.bytes += len;
                            }
                        }
                    }
                    prev_id = Some(rec.id);
                    has_records = true;
                    off += n;
                }
                Ok((rec, _)) => {
                    return Err(corrupt(
                        &path,
                        off,
                        format!(
                            "item id {} does not follow item id {}",
                            rec.id,
                            prev_id.unwrap_or(0)
                        ),
                    ))
                }
                Err(e) => {
                    // The last segment's end may be torn by a crash; so may the end of a
                    // segment that was sealed without a sync (the next header says so).
                    let may_be_torn = is_last
                        || seg_ids.get(i + 1).is_some_and(|&next| {
                            let p = dir.join(segment_name(name, next));
                            storage
                                .read_all(&p)
                                .ok()
                                .and_then(|d| decode_segment_header(&d).ok())
                                .is_some_and(|h| h.prev_unsynced)
                        });
                    if may_be_torn && !valid_record_after(&data, off + 1, prev_id) {
                        tracing::warn!(path = %path.display(), offset = off, error = %e, "truncating a torn tail");
                        truncate_at = Some(off);
                        break;
                    }
                    return Err(corrupt(&path, off, e.to_string()));
                }
            }
        }
        if let Some(at) = truncate_at {
            let f = storage.open_append(&path).map_err(io_err(&path))?;
            f.set_len(at as u64).map_err(io_err(&path))?;
            f.sync_data().map_err(io_err(&path))?;
        }
        if is_last {
            last = Some((seg, off as u64, has_records));
        } else {
            sealed.insert(
                seg,
                Sealed {
                    len: off as u64,
                    end_id: prev_id.map_or(0, |p| p + 1),
                },
            );
        }
    }

    // Ids continue after every id the journal or a checkpoint has seen, so an id that a
    // checkpoint remembers is never given to a new item.
    let mut next_id = prev_id.map_or(1, |p| p + 1);
    for r in &restored {
        if let Some(cp) = &r.checkpoint {
            next_id = next_id.max(cp.head);
            if let Some(&m) = cp.done.last() {
                next_id = next_id.max(m + 1);
            }
        }
    }

    // The writer's segment: reuse an empty last segment, else start a new one.
    let (seg_id, file, offset): (u64, Arc<dyn WriteFile>, u64) = match last {
        Some((seg, len, false)) => {
            let path = dir.join(segment_name(name, seg));
            let f: Arc<dyn WriteFile> =
                Arc::from(storage.open_append(&path).map_err(io_err(&path))?);
            f.sync_data().map_err(io_err(&path))?;
            (seg, f, len)
        }
        other => {
            if let Some((seg, len, true)) = other {
                let path = dir.join(segment_name(name, seg));
                let f = storage.open_append(&path).map_err(io_err(&path))?;
                f.sync_data().map_err(io_err(&path))?;
                sealed.insert(
                    seg,
                    Sealed {
                        len,
                        end_id: prev_id.map_or(0, |p| p + 1),
                    },
                );
            }
            let new = seg_ids
                .last()
                .copied()
                .max(removed_last)
                .map_or(1, |s| s + 1);
            let path = dir.join(segment_name(name, new));
            let f = create_segment(storage.as_ref(), dir, &path, new, false)?;
            (new, f, SEGMENT_HEADER_LEN as u64)
        }
    };
    let end = Pos {
        seg: seg_id,
        off: offset,
    };

    let mut segs: BTreeMap<u64, Option<Sealed>> =
        sealed.into_iter().map(|(k, v)| (k, Some(v))).collect();
    segs.insert(seg_id, None);

    let readers = restored
        .into_iter()
        .map(|r| {
            let path: PathBuf = checkpoint_path(dir, name, &r.name);
            let mut st = ReaderState::new(r.cursor.unwrap_or(end), r.head, r.done, config.reader);
            st.items = r.items;
            st.bytes = r.bytes;
            let durable = r.checkpoint.as_ref().map_or(0, |c| c.head);
            new_shared(r.name, path, st, durable)
        })
        .collect();

    let sync = config.sync;
    let inner = Arc::new(Inner {
        name: name.to_string(),
        dir: dir.to_path_buf(),
        config,
        writer: Mutex::new(Writer {
            seg_id,
            file,
            offset,
            next_id,
            buf: Vec::new(),
            unsynced_sealed: Vec::new(),
        }),
        sync: Mutex::new(SyncState {
            synced: end,
            syncing: false,
            waiting: 0,
            poisoned: None,
        }),
        sync_cv: Condvar::new(),
        index: Mutex::new(SegIndex { segs, visible: end }),
        readers: RwLock::new(readers),
        registry: Mutex::new(()),
        signal: Mutex::new(0),
        signal_cv: Condvar::new(),
        waiters: AtomicUsize::new(0),
        poisoned: AtomicBool::new(false),
        closed: AtomicBool::new(false),
        stop: Arc::new((Mutex::new(false), Condvar::new())),
        flusher: Mutex::new(None),
        dir_lock: Mutex::new(Some(dir_lock)),
    });
    if let SyncPolicy::Periodic(every) = sync {
        spawn_flusher(&inner, every)?;
    }
    Ok(inner)
}
