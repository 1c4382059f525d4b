//! A record of everything observable about a queue folder, to show that a look at a queue
//! (a read-only open, an operator's `list` or `stats`) left the folder exactly as it was.
//!
//! [`FolderFingerprint::take`] reads, for every entry of a folder (not descending into
//! sub-folders): its name, kind, permission bits, size, modification time and, for a file,
//! its bytes. Two fingerprints compare equal only when none of those changed.
//!
//! ```
//! use fairq_journal::fingerprint::FolderFingerprint;
//! use fairq_journal::{JournalConfig, JournaledQueue};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let q = JournaledQueue::open(dir.path(), "q", JournalConfig::default()).unwrap();
//! q.put(b"kept").unwrap();
//! q.close().unwrap();
//! drop(q);
//!
//! let before = FolderFingerprint::take(dir.path()).unwrap();
//! let _ = std::fs::read_dir(dir.path()).unwrap().count(); // looking changes nothing
//! assert_eq!(FolderFingerprint::take(dir.path()).unwrap(), before);
//!
//! std::fs::write(dir.path().join("stray"), b"x").unwrap();
//! assert_ne!(FolderFingerprint::take(dir.path()).unwrap(), before);
//! ```

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;
use std::time::SystemTime;

use crate::storage::EntryKind;

/// Everything observable about one folder entry (see the [module docs](self)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryFingerprint {
    /// File, folder, symbolic link (never followed) or anything else.
    pub kind: EntryKind,
    /// The permission bits (on other systems than Unix: 1 when read-only, else 0).
    pub mode: u32,
    /// The size in bytes.
    pub len: u64,
    /// The modification time, where the system keeps one.
    pub modified: Option<SystemTime>,
    /// A file's bytes (empty for other entries).
    pub content: Vec<u8>,
}

/// Every entry of a folder, by name (see the [module docs](self)).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FolderFingerprint {
    /// The entries, by file name (names that are not valid Unicode in their lossy form).
    pub entries: BTreeMap<String, EntryFingerprint>,
}

impl FolderFingerprint {
    /// Reads the fingerprint of `dir`. Symbolic links are recorded, not followed.
    ///
    /// # Errors
    ///
    /// Any error listing the folder or reading an entry's metadata or bytes.
    pub fn take(dir: &Path) -> io::Result<Self> {
        let mut entries = BTreeMap::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            let path = entry.path();
            let meta = fs::symlink_metadata(&path)?;
            let kind = EntryKind::of(meta.file_type());
            let content = if meta.is_file() {
                fs::read(&path)?
            } else {
                Vec::new()
            };
            entries.insert(
                entry.file_name().to_string_lossy().into_owned(),
                EntryFingerprint {
                    kind,
                    mode: mode(&meta),
                    len: meta.len(),
                    modified: meta.modified().ok(),
                    content,
                },
            );
        }
        Ok(FolderFingerprint { entries })
    }
}

#[cfg(unix)]
fn mode(meta: &fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode()
}

#[cfg(not(unix))]
fn mode(meta: &fs::Metadata) -> u32 {
    u32::from(meta.permissions().readonly())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each observable change of an entry makes the fingerprints differ; an unchanged
    /// folder compares equal.
    #[test]
    fn every_change_shows() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a");
        fs::write(&file, b"abc").unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        let before = FolderFingerprint::take(dir.path()).unwrap();
        assert_eq!(before.entries.len(), 2);
        assert_eq!(before.entries["a"].kind, EntryKind::File);
        assert_eq!(before.entries["sub"].kind, EntryKind::Dir);
        assert_eq!(FolderFingerprint::take(dir.path()).unwrap(), before);

        // Same size, other bytes, and the old modification time put back.
        let modified = fs::metadata(&file).unwrap().modified().unwrap();
        let set_modified = |to| {
            let f = fs::File::options().write(true).open(&file).unwrap();
            f.set_modified(to).unwrap();
        };
        fs::write(&file, b"abd").unwrap();
        set_modified(modified);
        let changed = FolderFingerprint::take(dir.path()).unwrap();
        assert_eq!(changed.entries["a"].modified, before.entries["a"].modified);
        assert_ne!(changed, before, "content");

        fs::write(&file, b"abc").unwrap();
        let mut touched = FolderFingerprint::take(dir.path()).unwrap();
        touched.entries.get_mut("a").unwrap().modified = before.entries["a"].modified;
        assert_eq!(touched, before, "only the time differs");
        set_modified(modified + std::time::Duration::from_secs(1));
        assert_ne!(FolderFingerprint::take(dir.path()).unwrap(), before, "time");

        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            set_modified(modified);
            assert_eq!(FolderFingerprint::take(dir.path()).unwrap(), before);
            fs::set_permissions(&file, fs::Permissions::from_mode(0o400)).unwrap();
            assert_ne!(FolderFingerprint::take(dir.path()).unwrap(), before, "mode");

            // A link is recorded as a link, its target not read.
            std::os::unix::fs::symlink("a", dir.path().join("link")).unwrap();
            let linked = FolderFingerprint::take(dir.path()).unwrap();
            assert_eq!(linked.entries["link"].kind, EntryKind::Symlink);
            assert!(linked.entries["link"].content.is_empty());
        }
    }

    #[test]
    fn a_missing_folder_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = FolderFingerprint::take(&dir.path().join("nope")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
