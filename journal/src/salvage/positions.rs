//! Where a queue's readers stood: its reader registry and each reader's checkpoint, read
//! without changing anything, so that a salvage can leave out what every reader had
//! finished instead of handing it over again.
//!
//! Opening a queue restarts a reader whose checkpoint is missing or unreadable from the
//! oldest item; these positions follow the same rule, and so never call an item finished
//! that a reader could still have delivered.

use std::path::Path;

use crate::checkpoint::{decode_checkpoint, names_without_registry, registry_names, Checkpoint};
use crate::files::{checkpoint_path, parse_checkpoint_name, registry_path};
use crate::storage::{read_if_present, EntryKind, Storage};
use crate::{ItemId, JournalError};

/// What one reader's checkpoint file says.
///
/// ```
/// use fairq_journal::checkpoint::Checkpoint;
/// use fairq_journal::salvage::SavedPosition;
/// let saved = SavedPosition::Saved(Checkpoint { head: 5, ..Checkpoint::default() });
/// assert_ne!(saved, SavedPosition::Missing);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SavedPosition {
    /// The checkpoint as the reader last wrote it: every id below `head`, and every id in
    /// `done`, was finished (committed, expired or dropped).
    Saved(Checkpoint),
    /// The reader has no checkpoint file: opened, it would start from the oldest item.
    Missing,
    /// The checkpoint file could not be read or decoded (why): opened, the reader would
    /// start from the oldest item.
    Unreadable(String),
}

/// One reader of a queue and its saved position.
///
/// ```
/// use fairq_journal::salvage::{ReaderPosition, SavedPosition};
/// let reader = ReaderPosition { name: "billing".into(), position: SavedPosition::Missing };
/// assert_eq!(reader.name, "billing");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderPosition {
    /// The reader's name (empty for the default reader).
    pub name: String,
    /// What its checkpoint file says.
    pub position: SavedPosition,
}

/// Where a queue's readers stood, as [`reader_positions`] read it from their files.
///
/// ```
/// use fairq_journal::salvage::ReaderPositions;
/// use fairq_journal::ItemId;
/// // Nothing known: no item counts as finished.
/// assert!(!ReaderPositions::default().finished_by_all(ItemId(1)));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReaderPositions {
    /// Every reader the registry lists (the default reader alone when there is no
    /// registry), in its order.
    pub readers: Vec<ReaderPosition>,
    /// Why the registry, the list of the queue's readers, could not be used: damaged, or
    /// missing while named readers left checkpoint files. `readers` then holds the readers
    /// whose checkpoint files were found, and there may have been others.
    pub registry_damage: Option<String>,
}

impl ReaderPositions {
    /// Whether every reader had finished item `id` when it last saved its position, so
    /// that a queue rebuilt from a salvage may leave it out. False whenever that is not
    /// certain: no reader known, a damaged registry, or any reader's checkpoint missing or
    /// unreadable. Items finished after a reader's last checkpoint count as unfinished (a
    /// rebuilt queue delivers them again), as they would after a crash.
    ///
    /// ```
    /// use fairq_journal::checkpoint::Checkpoint;
    /// use fairq_journal::salvage::{ReaderPosition, ReaderPositions, SavedPosition};
    /// use fairq_journal::ItemId;
    /// let saved = |head, done: Vec<u64>| SavedPosition::Saved(Checkpoint { head, done, ..Checkpoint::default() });
    /// let positions = ReaderPositions {
    ///     readers: vec![
    ///         ReaderPosition { name: "a".into(), position: saved(10, vec![]) },
    ///         ReaderPosition { name: "b".into(), position: saved(4, vec![7]) },
    ///     ],
    ///     registry_damage: None,
    /// };
    /// assert!(positions.finished_by_all(ItemId(3)));
    /// assert!(positions.finished_by_all(ItemId(7))); // b committed 7 out of order
    /// assert!(!positions.finished_by_all(ItemId(5))); // b had not
    /// assert!(!positions.finished_by_all(ItemId(10))); // nor a
    /// ```
    pub fn finished_by_all(&self, id: ItemId) -> bool {
        self.registry_damage.is_none()
            && !self.readers.is_empty()
            && self.readers.iter().all(|r| match &r.position {
                SavedPosition::Saved(cp) => id.0 < cp.head || cp.done.binary_search(&id.0).is_ok(),
                SavedPosition::Missing | SavedPosition::Unreadable(_) => false,
            })
    }
}

/// Reads where the readers of queue `queue` in `dir` stood: its reader registry and each
/// reader's checkpoint, through `storage`, changing nothing. A missing or damaged file is
/// described in the result, not an error; this fails only when the folder cannot be listed
/// where the checkpoint files have to be looked for (the registry missing or damaged).
///
/// Call it before [`salvage`](super::salvage) to leave out the items every reader had
/// finished, whose segments were not deleted yet:
///
/// ```
/// use fairq_journal::salvage::{reader_positions, salvage};
/// use fairq_journal::storage::FsStorage;
/// use fairq_journal::{JournalConfig, JournaledQueue};
/// let dir = tempfile::tempdir().unwrap();
/// let q = JournaledQueue::open(dir.path(), "q", JournalConfig::default()).unwrap();
/// let reader = q.reader("r").unwrap();
/// q.put(b"done").unwrap();
/// q.put(b"waiting").unwrap();
/// let first = reader.get().unwrap().unwrap();
/// reader.commit(first.id).unwrap();
/// q.close().unwrap(); // saves the reader's position
///
/// let positions = reader_positions(dir.path(), "q", &FsStorage).unwrap();
/// let mut kept = Vec::new();
/// salvage(dir.path(), "q", &FsStorage, &mut |id, data| {
///     if !positions.finished_by_all(id) {
///         kept.push(data.to_vec());
///     }
/// })
/// .unwrap();
/// assert_eq!(kept, [b"waiting".to_vec()]);
/// ```
pub fn reader_positions(
    dir: &Path,
    queue: &str,
    storage: &dyn Storage,
) -> Result<ReaderPositions, JournalError> {
    let reg_path = registry_path(dir, queue);
    let (names, registry_damage) = match read_if_present(storage, &reg_path) {
        Ok(Some(file)) => match registry_names(&file) {
            Ok(names) => (names, None),
            Err(why) => (checkpoint_files(dir, queue, storage)?, Some(why)),
        },
        Ok(None) => {
            // No registry: the default reader alone, unless named readers left checkpoint
            // files (then, as opening does, those readers; but another may have had none).
            let found = checkpoint_files(dir, queue, storage)?;
            let found: Vec<&str> = found.iter().map(String::as_str).collect();
            let names = names_without_registry(&found);
            let missing = names.iter().all(|n| !n.is_empty()).then(|| {
                "the reader registry is missing; named readers left checkpoint files".into()
            });
            (names, missing)
        }
        Err(e) => (
            checkpoint_files(dir, queue, storage)?,
            Some(format!("cannot read the reader registry: {e}")),
        ),
    };
    let readers = names
        .into_iter()
        .map(|name| {
            let position = saved_position(storage, &checkpoint_path(dir, queue, &name));
            ReaderPosition { name, position }
        })
        .collect();
    Ok(ReaderPositions {
        readers,
        registry_damage,
    })
}

/// The reader names of the checkpoint files of `queue` in `dir`, sorted.
fn checkpoint_files(
    dir: &Path,
    queue: &str,
    storage: &dyn Storage,
) -> Result<Vec<String>, JournalError> {
    let mut names: Vec<String> = storage
        .list_dir(dir)
        .map_err(|e| JournalError::io(dir, e))?
        .into_iter()
        .filter(|e| e.kind == EntryKind::File)
        .filter_map(|e| parse_checkpoint_name(queue, &e.name).map(str::to_string))
        .collect();
    names.sort_unstable();
    Ok(names)
}

fn saved_position(storage: &dyn Storage, path: &Path) -> SavedPosition {
    match read_if_present(storage, path) {
        Ok(Some(bytes)) => match decode_checkpoint(&bytes) {
            Ok(cp) => SavedPosition::Saved(cp),
            Err(e) => SavedPosition::Unreadable(format!("checkpoint: {e}")),
        },
        Ok(None) => SavedPosition::Missing,
        Err(e) => SavedPosition::Unreadable(format!("cannot read the checkpoint: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::{encode_checkpoint, encode_registry};
    use crate::sim::SimDisk;

    fn disk() -> SimDisk {
        let disk = SimDisk::new(7);
        disk.create_dir_all(Path::new("/q"), 0o700).unwrap();
        disk
    }

    fn write(disk: &SimDisk, name: &str, bytes: &[u8]) {
        let f = disk.create(&Path::new("/q").join(name), 0o600).unwrap();
        f.write(bytes).unwrap();
    }

    fn checkpoint(head: u64, done: Vec<u64>) -> Vec<u8> {
        encode_checkpoint(&Checkpoint {
            head,
            done,
            ..Checkpoint::default()
        })
    }

    fn positions(disk: &SimDisk) -> ReaderPositions {
        reader_positions(Path::new("/q"), "q", disk).unwrap()
    }

    #[test]
    fn without_a_registry_the_default_reader_is_the_only_one() {
        let disk = disk();
        assert_eq!(
            positions(&disk).readers,
            [ReaderPosition {
                name: String::new(),
                position: SavedPosition::Missing
            }]
        );
        assert!(!positions(&disk).finished_by_all(ItemId(0)));
        write(&disk, "q.cp", &checkpoint(3, vec![5]));
        let found = positions(&disk);
        assert_eq!(found.registry_damage, None);
        let finished: Vec<u64> = (0..7)
            .filter(|&i| found.finished_by_all(ItemId(i)))
            .collect();
        assert_eq!(finished, [0, 1, 2, 5]);
    }

    #[test]
    fn every_listed_reader_must_have_finished_an_item() {
        let disk = disk();
        write(
            &disk,
            "q.readers",
            &encode_registry(&["a".into(), "b".into()]),
        );
        write(&disk, "q.cp.a", &checkpoint(10, vec![]));
        // b never saved a position: nothing is finished by all.
        let found = positions(&disk);
        assert_eq!(found.readers[1].position, SavedPosition::Missing);
        assert!(!found.finished_by_all(ItemId(1)));
        write(&disk, "q.cp.b", &checkpoint(2, vec![4]));
        let found = positions(&disk);
        let finished: Vec<u64> = (0..12)
            .filter(|&i| found.finished_by_all(ItemId(i)))
            .collect();
        assert_eq!(finished, [0, 1, 4]);
        // A checkpoint file of a reader the registry does not list does not count.
        write(&disk, "q.cp.gone", &checkpoint(0, vec![]));
        assert_eq!(positions(&disk).readers.len(), 2);
        assert!(positions(&disk).finished_by_all(ItemId(1)));
    }

    #[test]
    fn a_damaged_checkpoint_finishes_nothing() {
        let disk = disk();
        write(&disk, "q.readers", &encode_registry(&["a".into()]));
        let mut bytes = checkpoint(10, vec![]);
        bytes[14] ^= 0x01;
        write(&disk, "q.cp.a", &bytes);
        let found = positions(&disk);
        match &found.readers[0].position {
            SavedPosition::Unreadable(why) => assert!(why.starts_with("checkpoint: "), "{why}"),
            other => panic!("expected an unreadable checkpoint, got {other:?}"),
        }
        assert!(!found.finished_by_all(ItemId(0)));
    }

    #[test]
    fn a_damaged_registry_lists_the_checkpoint_files_and_finishes_nothing() {
        let disk = disk();
        let mut registry = encode_registry(&["a".into(), "b".into()]);
        registry[17] ^= 0x20;
        write(&disk, "q.readers", &registry);
        write(&disk, "q.cp.b", &checkpoint(10, vec![]));
        write(&disk, "q.cp.a", &checkpoint(10, vec![]));
        // Another queue's checkpoint in the same folder is not this queue's reader.
        write(&disk, "other.cp.c", &checkpoint(10, vec![]));
        let found = positions(&disk);
        let why = found.registry_damage.clone().unwrap();
        assert!(why.starts_with("reader registry: "), "{why}");
        let names: Vec<&str> = found.readers.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        // Both found readers finished item 1, but a reader may be missing from the list.
        assert!(!found.finished_by_all(ItemId(1)));
    }

    #[test]
    fn a_missing_registry_with_named_checkpoints_lists_them_and_finishes_nothing() {
        // As opening the queue does: the named readers whose checkpoints are there, the
        // default reader's checkpoint left aside; but a reader may have had none.
        let disk = disk();
        write(&disk, "q.cp", &checkpoint(10, vec![]));
        write(&disk, "q.cp.b", &checkpoint(10, vec![]));
        write(&disk, "q.cp.a", &checkpoint(10, vec![]));
        let found = positions(&disk);
        let names: Vec<&str> = found.readers.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        let why = found.registry_damage.clone().unwrap();
        assert!(why.contains("registry is missing"), "{why}");
        assert!(!found.finished_by_all(ItemId(1)));
    }

    #[test]
    fn a_registry_naming_an_invalid_reader_is_damage() {
        let disk = disk();
        write(&disk, "q.readers", &encode_registry(&["../x".into()]));
        let found = positions(&disk);
        assert_eq!(
            found.registry_damage.as_deref(),
            Some("reader registry lists an invalid reader name")
        );
        assert!(found.readers.is_empty());
    }
}
