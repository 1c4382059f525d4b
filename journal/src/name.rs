//! Validation of queue and reader names.

use crate::JournalError;

/// Longest accepted queue or reader name, in bytes.
pub const MAX_NAME_LEN: usize = 200;

/// The longest file name (one path component) the file systems the journal runs on accept:
/// `NAME_MAX` of ext4, xfs, btrfs and tmpfs.
pub(crate) const FILE_NAME_MAX: usize = 255;

/// How much longer than the queue's name its longest file name is: an archived segment
/// whose name was taken, `<queue>.<20 digits>.seg.<n>` with `n` up to 20 digits. Segments
/// (`.<20 digits>.seg`), `.tmp` files, the registry, tail marker and lock are shorter.
const QUEUE_FILE_EXTRA: usize = ".".len() + 20 + ".seg".len() + ".".len() + 20;

/// How much longer than the queue's and the reader's names together a named reader's
/// longest file name is: its checkpoint being written, `<queue>.cp.<reader>.tmp`.
const READER_FILE_EXTRA: usize = ".cp.".len() + ".tmp".len();

// Every queue name `validate_name` accepts makes file names that fit.
const _: () = assert!(MAX_NAME_LEN + QUEUE_FILE_EXTRA <= FILE_NAME_MAX);

/// Checks that every file of queue `queue` fits in [`FILE_NAME_MAX`] bytes, and, with a
/// named `reader`, that reader's checkpoint files too: a name whose files the file system
/// would refuse is refused before anything is written.
pub(crate) fn check_file_names(queue: &str, reader: Option<&str>) -> Result<(), JournalError> {
    if queue.len() + QUEUE_FILE_EXTRA > FILE_NAME_MAX {
        return Err(JournalError::InvalidName {
            name: queue.to_string(),
            reason: "the queue's file names would be longer than 255 bytes",
        });
    }
    match reader {
        Some(r) if !r.is_empty() && queue.len() + r.len() + READER_FILE_EXTRA > FILE_NAME_MAX => {
            Err(JournalError::InvalidName {
                name: r.to_string(),
                reason: "with the queue's name, the reader's checkpoint file name \
                         (<queue>.cp.<reader>.tmp) would be longer than 255 bytes",
            })
        }
        _ => Ok(()),
    }
}

/// Checks that `name` is usable as a queue or reader name: 1 to 200 ASCII letters, digits,
/// `_`, `-` or `:`.
///
/// A new reader is also refused when its name and the queue's are longer than 247 bytes
/// together: its checkpoint's file name, `<queue>.cp.<reader>.tmp`, would be longer than
/// 255 bytes.
///
/// ```
/// use fairq_journal::validate_name;
/// assert!(validate_name("emails:high-priority_2").is_ok());
/// assert!(validate_name("../etc").is_err());
/// assert!(validate_name("").is_err());
/// ```
pub fn validate_name(name: &str) -> Result<(), JournalError> {
    let reason = if name.is_empty() {
        Some("the name is empty")
    } else if name.len() > MAX_NAME_LEN {
        Some("the name is longer than 200 bytes")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b':'))
    {
        Some("only ASCII letters, digits, '_', '-' and ':' are allowed")
    } else {
        None
    };
    match reason {
        None => Ok(()),
        Some(reason) => Err(JournalError::InvalidName {
            name: name.to_string(),
            reason,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_separators_dots_spaces_and_non_ascii() {
        for bad in ["a/b", "a.b", "a b", "é", "a\0", "..", &"x".repeat(201)] {
            assert!(
                matches!(validate_name(bad), Err(JournalError::InvalidName { .. })),
                "{bad:?}"
            );
        }
        for good in ["a", "A-Z_0:9", &"x".repeat(200)] {
            assert!(validate_name(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn file_names_of_long_queue_and_reader_names_are_checked() {
        let queue = "q".repeat(MAX_NAME_LEN);
        assert!(check_file_names(&queue, None).is_ok());
        // `<queue>.cp.<reader>.tmp` is exactly 255 bytes: accepted; one more is not.
        let fits = "r".repeat(FILE_NAME_MAX - MAX_NAME_LEN - READER_FILE_EXTRA);
        assert!(check_file_names(&queue, Some(&fits)).is_ok());
        let longer = format!("{fits}r");
        assert!(matches!(
            check_file_names(&queue, Some(&longer)),
            Err(JournalError::InvalidName { name, .. }) if name == longer
        ));
        // A short queue name leaves room for the longest reader name.
        assert!(check_file_names("q", Some(&"r".repeat(MAX_NAME_LEN))).is_ok());
        // A queue name too long for its own files (longer than `validate_name` accepts).
        assert!(check_file_names(&"q".repeat(FILE_NAME_MAX), None).is_err());
    }
}
