//! Where results go: tables for people, JSON for scripts, always on stdout.

use std::borrow::Cow;
use std::io::{self, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, CellAlignment, ColumnConstraint, ContentArrangement, Table, Width};
use fairq_core::job::Millis;
use serde::Serialize;

use crate::error::CliError;
use crate::printable::printable;

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
    width: Option<u16>,
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
            width: terminal_width(),
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
            width: None,
        }
    }

    /// Lays tables out within `columns` (standard output uses the terminal's width, or
    /// `COLUMNS`; a buffer has no limit unless given one).
    ///
    /// ```
    /// let out = fairq_cli::Output::buffer(fairq_cli::Format::Table).width(80);
    /// assert_eq!(out.contents(), "");
    /// ```
    pub fn width(mut self, columns: u16) -> Self {
        self.width = Some(columns);
        self
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

    /// Prints a table within the output's width.
    pub(crate) fn table(&mut self, grid: &Grid) -> Result<(), CliError> {
        self.line(grid.render(self.width))
    }

    /// True when `grid` fits the output's width without cutting a word.
    pub(crate) fn fits(&self, grid: &Grid) -> bool {
        grid.fits(self.width)
    }
}

/// A table to print: headers, rows, which columns are numbers (right-aligned, never wrapped)
/// and which hold prose (wrapped at blanks when the terminal is narrow). No word is ever cut:
/// a layout that cannot fit the width without cutting one is reported by
/// [`Grid::fits`], so the caller can choose a narrower table.
#[derive(Debug, Clone, Default)]
pub(crate) struct Grid {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
    right: Vec<usize>,
    prose: Vec<usize>,
}

impl Grid {
    /// A grid with these column headers (headers wrap at blanks).
    pub(crate) fn new<I, S>(headers: I) -> Grid
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Grid {
            headers: headers.into_iter().map(Into::into).collect(),
            ..Grid::default()
        }
    }

    /// Adds a row; control characters in its cells (of a queue name, a kind, a key, an
    /// error) are shown escaped.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        let cells = cells
            .into_iter()
            .map(|cell| match printable(&cell) {
                Cow::Borrowed(_) => cell,
                Cow::Owned(escaped) => escaped,
            })
            .collect();
        self.rows.push(cells);
    }

    /// Right-aligns these columns.
    pub(crate) fn right(mut self, columns: &[usize]) -> Grid {
        self.right.extend_from_slice(columns);
        self
    }

    /// Lets these columns wrap at blanks.
    pub(crate) fn prose(mut self, columns: &[usize]) -> Grid {
        self.prose.extend_from_slice(columns);
        self
    }

    /// The narrowest each column can be without cutting a word.
    fn min_widths(&self) -> Vec<usize> {
        let longest_word = |text: &str| {
            text.split_whitespace()
                .map(|w| w.chars().count())
                .max()
                .unwrap_or(0)
        };
        let longest_line = |text: &str| text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        (0..self.headers.len())
            .map(|i| {
                let cells = self.rows.iter().filter_map(|r| r.get(i)).map(|c| {
                    if self.prose.contains(&i) {
                        longest_word(c)
                    } else {
                        longest_line(c)
                    }
                });
                cells.fold(longest_word(&self.headers[i]), usize::max)
            })
            .collect()
    }

    /// The narrowest the whole table can be, borders and padding included.
    pub(crate) fn min_width(&self) -> usize {
        self.min_widths().iter().sum::<usize>() + 3 * self.headers.len() + 1
    }

    /// True when the table fits `width` columns (any table fits no limit).
    pub(crate) fn fits(&self, width: Option<u16>) -> bool {
        width.is_none_or(|w| self.min_width() <= usize::from(w))
    }

    /// The table laid out within `width` columns (as narrow as it can be when it does not
    /// fit).
    pub(crate) fn render(&self, width: Option<u16>) -> String {
        let mut table = Table::new();
        table
            .load_preset(UTF8_FULL_CONDENSED)
            .set_header(self.headers.iter().map(Cell::new));
        for row in &self.rows {
            table.add_row(row.iter().map(Cell::new));
        }
        match width {
            Some(w) => {
                table
                    .set_content_arrangement(ContentArrangement::Dynamic)
                    .set_width(w);
            }
            None => {
                table.set_content_arrangement(ContentArrangement::Disabled);
            }
        }
        for (i, min) in self.min_widths().into_iter().enumerate() {
            if let Some(column) = table.column_mut(i) {
                // comfy-table counts the cell's padding (one blank each side) in the bound.
                let min = u16::try_from(min + 2).unwrap_or(u16::MAX);
                column.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(min)));
                if self.right.contains(&i) {
                    column.set_cell_alignment(CellAlignment::Right);
                }
            }
        }
        table.to_string()
    }
}

/// The width tables must fit when printing to standard output: `COLUMNS` when set, else the
/// terminal's width, else none (a pipe or a file gets whole lines).
pub(crate) fn terminal_width() -> Option<u16> {
    if let Some(columns) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<u16>().ok())
        .filter(|&c| c > 0)
    {
        return Some(columns);
    }
    let probe = Table::new();
    if probe.is_tty() {
        probe.width()
    } else {
        None
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

/// A duration in words, for sentences: `7 days`, `1 hour 30 minutes`, `250 milliseconds`.
pub(crate) fn long_duration(d: Duration) -> String {
    let words: Vec<String> = humantime::format_duration(d)
        .to_string()
        .split_whitespace()
        .map(|part| {
            let digits = part
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(part.len());
            let (n, unit) = part.split_at(digits);
            let unit = match unit {
                "y" | "year" | "years" => "year",
                "M" | "month" | "months" => "month",
                "d" | "day" | "days" => "day",
                "h" => "hour",
                "m" => "minute",
                "s" => "second",
                "ms" => "millisecond",
                "us" | "µs" => "microsecond",
                "ns" => "nanosecond",
                other => return part.replace(other, &format!(" {other}")),
            };
            let plural = if n == "1" { "" } else { "s" };
            format!("{n} {unit}{plural}")
        })
        .collect();
    words.join(" ")
}

/// Microseconds (the unit of the CLI's histograms) as [`short_duration`].
pub(crate) fn micros(us: u64) -> String {
    short_duration(Duration::from_micros(us))
}

/// The last instant RFC 3339 can write: 9999-12-31T23:59:59.999Z, in ms since the Unix
/// epoch.
const LAST_RFC3339_MS: Millis = 253_402_300_799_999;

/// A store timestamp (ms since the Unix epoch) as RFC 3339 UTC with milliseconds. A time
/// past the year 9999 (only a damaged or foreign record holds one) is written as its number
/// of milliseconds instead of failing.
pub(crate) fn timestamp(at: Millis) -> String {
    if at > LAST_RFC3339_MS {
        return format!("{at} ms after 1970-01-01T00:00:00Z (after the year 9999)");
    }
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
        assert_eq!(timestamp(LAST_RFC3339_MS), "9999-12-31T23:59:59.999Z");
        assert_eq!(
            timestamp(u64::MAX),
            "18446744073709551615 ms after 1970-01-01T00:00:00Z (after the year 9999)"
        );
    }

    proptest::proptest! {
        /// Any stored time formats, as a timestamp and as an age, without panicking.
        #[test]
        fn every_time_formats(at in proptest::num::u64::ANY, now in proptest::num::u64::ANY) {
            proptest::prop_assert!(!timestamp(at).is_empty());
            proptest::prop_assert!(!age(at, now).is_empty());
        }
    }

    #[test]
    fn long_durations_are_words() {
        assert_eq!(long_duration(Duration::from_secs(7 * 86_400)), "7 days");
        assert_eq!(
            long_duration(Duration::from_secs(5_400)),
            "1 hour 30 minutes"
        );
        assert_eq!(
            long_duration(Duration::from_millis(250)),
            "250 milliseconds"
        );
        assert_eq!(long_duration(Duration::from_secs(1)), "1 second");
        assert_eq!(long_duration(Duration::ZERO), "0 seconds");
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
