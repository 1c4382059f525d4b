//! The embedded file store: everything of [`fairq_file`], and [`open`] in the same shape
//! as the other stores' constructors (async, [`ConnectError`]).
//!
//! [`FileBackend::open`] itself is a blocking call (it replays the folder's journal);
//! [`open`] runs it on tokio's blocking threads so it can be awaited like a connect.

use std::path::{Path, PathBuf};

pub use fairq_file::*;

use crate::error::ConnectError;

/// Opens the file store in folder `path` (created if missing) without blocking the async
/// runtime. One process owns a folder at a time; opening a folder another process owns
/// makes a client of that process ([`Role::Client`]).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use fairq::file::{self, FileOptions, Role};
/// let dir = tempfile::tempdir().unwrap();
/// let store = file::open(dir.path(), FileOptions::default()).await.unwrap();
/// let again = file::open(dir.path(), FileOptions::default()).await.unwrap();
/// assert_eq!((store.role(), again.role()), (Role::Owner, Role::Client));
/// # });
/// ```
pub async fn open(
    path: impl AsRef<Path>,
    options: FileOptions,
) -> Result<FileBackend, ConnectError> {
    let path = path.as_ref().to_path_buf();
    let url = format!("file:{}", path.display());
    let opened = tokio::task::spawn_blocking(move || FileBackend::open(path, options)).await;
    let source = match opened {
        Ok(Ok(store)) => return Ok(store),
        Ok(Err(e)) => e.into(),
        Err(join) => fairq_worker::BackendError::Store(Box::new(join)),
    };
    Err(ConnectError::Open { url, source })
}

/// Opens the file store in folder `path` for looking only, without blocking the async
/// runtime (see [`FileBackend::open_read_only`]): nothing in the folder is created or
/// changed, and every change is refused.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use fairq::file::{self, FileOptions, Role};
/// let dir = tempfile::tempdir().unwrap();
/// file::open(dir.path(), FileOptions::default()).await.unwrap().close().unwrap();
/// let view = file::open_read_only(dir.path(), FileOptions::default()).await.unwrap();
/// assert_eq!(view.role(), Role::Snapshot);
/// # });
/// ```
pub async fn open_read_only(
    path: impl AsRef<Path>,
    options: FileOptions,
) -> Result<FileBackend, ConnectError> {
    let path = path.as_ref().to_path_buf();
    let url = format!("file:{}", path.display());
    let opened =
        tokio::task::spawn_blocking(move || FileBackend::open_read_only(path, options)).await;
    let source = match opened {
        Ok(Ok(store)) => return Ok(store),
        Ok(Err(e)) => e.into(),
        Err(join) => fairq_worker::BackendError::Store(Box::new(join)),
    };
    Err(ConnectError::Open { url, source })
}

/// Fails with [`ConnectError::NoStore`] unless `path` is a folder that holds a file store
/// (one of the files [`is_store_file`] names), so that opening it cannot create a new store.
pub(crate) fn check_store(path: &Path) -> Result<(), ConnectError> {
    let no_store = |reason| ConnectError::NoStore {
        path: PathBuf::from(path),
        reason,
    };
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(no_store("the folder does not exist"));
        }
        Err(_) if path.is_file() => return Err(no_store("it is a file, not a folder")),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return Err(no_store("a part of the path is not a folder"));
        }
        // Let opening report the exact I/O problem.
        Err(_) => return Ok(()),
    };
    if entries
        .flatten()
        .any(|e| is_store_file(&e.file_name().to_string_lossy()))
    {
        Ok(())
    } else {
        Err(no_store("the folder holds no fairq store"))
    }
}

/// True for the name of a file only a file store makes: its lock `fairq.lock`, or a file of
/// its journal, the queue `jobs` (see `fairq-journal`'s `files.rs`): a segment
/// `jobs.<20 digits>.seg`, a checkpoint `jobs.cp` or `jobs.cp.<reader>`, the reader
/// registry `jobs.readers`, the tail marker `jobs.tail` or the journal's lock `jobs.lock`.
/// Temporary files (`*.tmp`) and anything else (`jobs.csv`) are no sign of a store.
fn is_store_file(name: &str) -> bool {
    if name == "fairq.lock" {
        return true;
    }
    let Some(rest) = name.strip_prefix("jobs.") else {
        return false;
    };
    if let Some(digits) = rest.strip_suffix(".seg") {
        return digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit());
    }
    if let Some(reader) = rest.strip_prefix("cp.") {
        return !reader.is_empty()
            && reader
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b':'));
    }
    matches!(rest, "cp" | "readers" | "tail" | "lock")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[tokio::test]
    async fn files_that_only_look_like_store_files_are_no_store_and_nothing_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let others = [
            "jobs.csv",
            "jobs.txt",
            "jobs.1.seg",
            "jobs.00000000000000000001.seg.tmp",
            "jobs.cp.state.tmp",
            "jobs.cp.a.b",
            "jobs.",
            "fairq.sock",
            "fairq.lock.bak",
        ];
        for name in others {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        let before = names(dir.path());
        let url = format!("file:{}", dir.path().display());
        for options in [
            crate::ConnectOptions::default().create(false),
            crate::ConnectOptions::default().read_only(true),
        ] {
            let err = crate::connect_with(&url, &options).await.unwrap_err();
            assert!(
                matches!(err, ConnectError::NoStore { reason, .. } if reason.contains("no fairq store")),
                "{err}"
            );
            assert_eq!(names(dir.path()), before);
        }
        for name in others {
            assert!(!is_store_file(name), "{name}");
        }
        for name in [
            "fairq.lock",
            "jobs.00000000000000000042.seg",
            "jobs.cp",
            "jobs.cp.state",
            "jobs.readers",
            "jobs.tail",
            "jobs.lock",
        ] {
            assert!(is_store_file(name), "{name}");
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join(name), b"").unwrap();
            assert!(check_store(dir.path()).is_ok(), "{name}");
        }
    }

    #[test]
    fn only_folders_with_store_files_are_stores() {
        let dir = tempfile::tempdir().unwrap();
        let err = check_store(&dir.path().join("missing")).unwrap_err();
        assert!(
            err.to_string().ends_with("the folder does not exist"),
            "{err}"
        );
        let err = check_store(dir.path()).unwrap_err();
        assert!(err.to_string().ends_with("holds no fairq store"), "{err}");
        std::fs::write(dir.path().join("a-file"), b"x").unwrap();
        let err = check_store(&dir.path().join("a-file")).unwrap_err();
        assert!(
            err.to_string().ends_with("it is a file, not a folder"),
            "{err}"
        );
        let err = check_store(&dir.path().join("a-file/sub")).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("a part of the path is not a folder"),
            "{err}"
        );
        drop(FileBackend::open(dir.path(), FileOptions::default()).unwrap());
        assert!(check_store(dir.path()).is_ok());
    }
}
