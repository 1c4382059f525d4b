//! Where results go: tables for people, JSON for scripts, always on stdout.

use std::io::{self, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, CellAlignment, ContentArrangement, Table};
use fairq_core::job::Millis;
use serde::Serialize;

use crate::error::CliError;

/// How results are printed.
///
/// ```
/// assert_eq!(fairq_cli::Format::default(), fairq_cli::Format::Table);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Tables and sentences.
    #[default]
    Table,
    /// JSON documents (one per line for streams).
    Json,
}

/// The sink of a command's results: standard output, or a buffer to read back.
///
/// ```
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// use clap::Parser;
/// use fairq_cli::{execute, Cli, Format, Output};
/// let cli = Cli::try_parse_from(["fairq", "--store", "memory:", "--json", "list"]).unwrap();
/// let mut out = Output::buffer(Format::Json);
/// execute(cli, &mut out).await.unwrap();
/// assert_eq!(out.contents(), "[]\n");
/// # });
/// ```
pub struct Output {
    format: Format,
    sink: Sink,
}

enum Sink {
    Stdout,
    Buffer(Vec<u8>),
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Output")
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

impl Output {
    /// Prints to standard output.
    ///
    /// ```
    /// let out = fairq_cli::Output::stdout(fairq_cli::Format::Table);
    /// assert_eq!(out.contents(), "");
    /// ```
    pub fn stdout(format: Format) -> Self {
        Output {
            format,
            sink: Sink::Stdout,
        }
    }

    /// Collects output in memory (for tests); read it with [`contents`](Self::contents).
    ///
    /// ```
    /// let out = fairq_cli::Output::buffer(fairq_cli::Format::Table);
    /// assert_eq!(out.contents(), "");
    /// ```
    pub fn buffer(format: Format) -> Self {
        Output {
            format,
            sink: Sink::Buffer(Vec::new()),
        }
    }

    /// True for [`Format::Json`].
    pub(crate) fn is_json(&self) -> bool {
        self.format == Format::Json
    }

    /// What a buffer collected (empty for stdout).
    ///
    /// ```
    /// assert_eq!(fairq_cli::Output::stdout(fairq_cli::Format::Table).contents(), "");
    /// ```
    pub fn contents(&self) -> String {
        match &self.sink {
            Sink::Stdout => String::new(),
            Sink::Buffer(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        }
    }

    /// Prints one line. A reader that went away (a closed pipe) is not an error.
    pub(crate) fn line(&mut self, text: impl AsRef<str>) -> Result<(), CliError> {
        let text = text.as_ref();
        let result = match &mut self.sink {
            Sink::Stdout => {
                let mut stdout = io::stdout().lock();
                writeln!(stdout, "{text}").and_then(|()| stdout.flush())
            }
            Sink::Buffer(bytes) => writeln!(bytes, "{text}"),
        };
        match result {
            Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
                Err(CliError::io("writing to standard output", e))
            }
            _ => Ok(()),
        }
    }

    /// Prints `value` as one line of JSON.
    pub(crate) fn json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), CliError> {
        let text = serde_json::to_string(value).map_err(|e| {
            CliError::io(
                "encoding JSON output",
                io::Error::new(io::ErrorKind::InvalidData, e),
            )
        })?;
        self.line(text)
    }

    /// Prints a table.
    pub(crate) fn table(&mut self, table: &Table) -> Result<(), CliError> {
        self.line(table.to_string())
    }
}

/// A table with the house style and these column headers.
pub(crate) fn table<I, S>(headers: I) -> Table
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(headers.into_iter().map(|h| Cell::new(h.into())));
    table
}

/// Right-aligns the given columns (numbers read better that way).
pub(crate) fn right_align(table: &mut Table, columns: &[usize]) {
    for &index in columns {
        if let Some(column) = table.column_mut(index) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// A duration as a short human reading: `420 µs`, `4.20 ms`, `12.3 ms`, `4.56 s`.
pub(crate) fn short_duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 1.0 {
        format!("{} µs", d.as_micros())
    } else if ms < 10.0 {
        format!("{ms:.2} ms")
    } else if ms < 1_000.0 {
        format!("{ms:.1} ms")
    } else if ms < 100_000.0 {
        format!("{:.2} s", ms / 1e3)
    } else {
        format!("{:.0} s", ms / 1e3)
    }
}

/// Microseconds (the unit of the CLI's histograms) as [`short_duration`].
pub(crate) fn micros(us: u64) -> String {
    short_duration(Duration::from_micros(us))
}

/// A store timestamp (ms since the Unix epoch) as RFC 3339 UTC with milliseconds.
pub(crate) fn timestamp(at: Millis) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(at)).to_string()
}

/// How long ago `at` was, relative to `now` (both ms since the Unix epoch), rounded to a
/// readable unit.
pub(crate) fn age(at: Millis, now: Millis) -> String {
    let round = |ms: u64| {
        let secs = ms / 1_000;
        let rounded = if secs >= 86_400 {
            secs - secs % 3_600
        } else if secs >= 3_600 {
            secs - secs % 60
        } else {
            secs
        };
        humantime::format_duration(Duration::from_secs(rounded)).to_string()
    };
    if at <= now {
        let ms = now - at;
        if ms < 1_000 {
            "just now".to_string()
        } else {
            format!("{} ago", round(ms))
        }
    } else {
        let ms = at - now;
        if ms < 1_000 {
            "now".to_string()
        } else {
            format!("in {}", round(ms))
        }
    }
}

/// The current time in ms since the Unix epoch.
pub(crate) fn now_millis() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(fairq_core::job::millis)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_keep_three_significant_digits() {
        assert_eq!(short_duration(Duration::from_micros(420)), "420 µs");
        assert_eq!(short_duration(Duration::ZERO), "0 µs");
        assert_eq!(short_duration(Duration::from_micros(12_345)), "12.3 ms");
        assert_eq!(short_duration(Duration::from_millis(4_560)), "4.56 s");
        assert_eq!(short_duration(Duration::from_secs(200)), "200 s");
        assert_eq!(micros(1_500), "1.50 ms");
        assert_eq!(timestamp(0), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn ages_round_to_readable_units() {
        assert_eq!(age(1_000, 91_000), "1m 30s ago");
        assert_eq!(age(5_000, 1_000), "in 4s");
        assert_eq!(age(0, 500), "just now");
        assert_eq!(age(0, 3 * 86_400_000 + 3_661_000), "3days 1h ago");
        assert_eq!(age(0, 7_265_000), "2h 1m ago");
        assert_eq!(age(10, 10), "just now");
        assert_eq!(age(600, 0), "now");
    }

    #[test]
    fn json_and_lines_share_the_buffer() {
        let mut out = Output::buffer(Format::Json);
        out.line("x").unwrap();
        out.json(&serde_json::json!({"a": [1]})).unwrap();
        assert_eq!(out.contents(), "x\n{\"a\":[1]}\n");
    }
}
