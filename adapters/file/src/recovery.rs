//! What opening a store repaired, in words for an operator.

use fairq_journal::{RecoveryReport, TailCause};

/// One line per repair in `report`: which file, where, how many bytes, and whether an
/// acknowledged change may have been among them.
pub(crate) fn warnings(report: &RecoveryReport) -> Vec<String> {
    let mut lines = Vec::new();
    for tail in &report.tails {
        let action = if tail.truncated {
            "cut off"
        } else {
            "ignored (read-only)"
        };
        let line = match &tail.cause {
            TailCause::Incomplete => format!(
                "{}: {} bytes at offset {} {action}: a torn tail (a write interrupted by a crash, never acknowledged)",
                tail.path.display(),
                tail.dropped_bytes,
                tail.offset,
            ),
            TailCause::Damaged { reason } => format!(
                "{}: {} bytes at offset {} {action}: a complete record fails its check ({reason}); it may have held acknowledged changes, which are lost",
                tail.path.display(),
                tail.dropped_bytes,
                tail.offset,
            ),
            _ => format!(
                "{}: {} bytes at offset {} {action}",
                tail.path.display(),
                tail.dropped_bytes,
                tail.offset,
            ),
        };
        lines.push(line);
    }
    for path in &report.removed_segments {
        lines.push(format!(
            "{}: removed a segment whose header was torn (created just before a crash; it held nothing)",
            path.display()
        ));
    }
    for reader in &report.restarted_readers {
        lines.push(format!(
            "the journal checkpoint of reader {reader:?} was missing or unreadable; the store was read again from the oldest journal segment"
        ));
    }
    lines
}
