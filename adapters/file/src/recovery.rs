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
    if !report.registry_rebuilt.is_empty() {
        lines.push(format!(
            "the journal's reader registry was missing; readers {:?} were taken from their checkpoint files",
            report.registry_rebuilt
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use fairq_journal::{RecoveryReport, TailCause, TailRepair};

    use super::warnings;

    fn tail(cause: TailCause, truncated: bool) -> TailRepair {
        TailRepair {
            path: "/q/jobs.00000000000000000007.seg".into(),
            offset: 4096,
            dropped_bytes: 37,
            cause,
            truncated,
        }
    }

    #[test]
    fn a_torn_tail_and_a_damaged_record_are_told_apart_with_file_offset_and_bytes() {
        let report = RecoveryReport {
            tails: vec![
                tail(TailCause::Incomplete, true),
                tail(
                    TailCause::Damaged {
                        reason: "checksum mismatch".into(),
                    },
                    false,
                ),
            ],
            removed_segments: vec!["/q/jobs.00000000000000000008.seg".into()],
            restarted_readers: vec!["state".into()],
            registry_rebuilt: vec!["state".into()],
        };
        let lines = warnings(&report);
        assert_eq!(lines.len(), 5, "{lines:?}");
        for line in &lines[..2] {
            assert!(
                line.starts_with("/q/jobs.00000000000000000007.seg: 37 bytes at offset 4096 "),
                "{line}"
            );
        }
        assert!(lines[0].contains("cut off: a torn tail"), "{}", lines[0]);
        assert!(!lines[0].contains("acknowledged changes"), "{}", lines[0]);
        assert!(
            lines[1].contains(
                "ignored (read-only): a complete record fails its check (checksum mismatch)"
            ) && lines[1].contains("may have held acknowledged changes"),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].contains("jobs.00000000000000000008.seg"),
            "{}",
            lines[2]
        );
        assert!(lines[3].contains("\"state\""), "{}", lines[3]);
        assert!(
            lines[4].contains("reader registry was missing") && lines[4].contains("\"state\""),
            "{}",
            lines[4]
        );
        assert!(warnings(&RecoveryReport::default()).is_empty());
    }
}
