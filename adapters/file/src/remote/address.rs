//! Where the folder's socket lives, and how to reach it from a folder path of any length.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use crate::error::FileError;
use crate::folder::SOCKET_FILE;

/// A socket address holds at most 107 bytes of path; longer ones go through a descriptor.
const SHORT_ENOUGH: usize = 100;

/// The socket's path inside the store folder.
pub(crate) fn socket_path(dir: &Path) -> PathBuf {
    dir.join(SOCKET_FILE)
}

/// The socket of one store folder, as this process can name it.
pub(crate) struct Address {
    path: PathBuf,
    /// Open while the address is used, when the path goes through it.
    _folder: Option<File>,
}

impl Address {
    /// The address of `dir`'s socket. A deep folder is reached as
    /// `/proc/self/fd/N/fairq.sock` through a descriptor of the folder, which keeps the name
    /// within what a socket address can hold.
    pub(crate) fn of(dir: &Path) -> Result<Address, FileError> {
        let path = socket_path(dir);
        if path.as_os_str().len() <= SHORT_ENOUGH {
            return Ok(Address {
                path,
                _folder: None,
            });
        }
        let folder = File::open(dir).map_err(|e| FileError::io(dir, e))?;
        let path = PathBuf::from(format!(
            "/proc/self/fd/{}/{SOCKET_FILE}",
            folder.as_raw_fd()
        ));
        Ok(Address {
            path,
            _folder: Some(folder),
        })
    }

    pub(crate) fn bind(&self) -> io::Result<UnixListener> {
        UnixListener::bind(&self.path)
    }

    pub(crate) fn connect(&self) -> io::Result<UnixStream> {
        UnixStream::connect(&self.path)
    }
}
