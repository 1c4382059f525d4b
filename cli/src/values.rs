//! Parsers of the command line's values: durations, delays, sizes, page sizes and
//! `NAME=VALUE` pairs. Each returns the message clap shows when a value is refused.

use std::time::Duration;

/// Parses a duration such as `250ms`, `30s`, `5m`, `1h30m` or `7d`.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(fairq_cli::parse_duration("1m30s"), Ok(Duration::from_secs(90)));
/// assert!(fairq_cli::parse_duration("soon").is_err());
/// assert!(fairq_cli::parse_duration("30").is_err());
/// ```
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|e| format!("{e} (write a number and a unit, for example 500ms, 30s, 5m, 2h, 7d)"))
}

/// Parses a time limit: a duration longer than zero (a limit of nothing would end every
/// attempt as it starts).
///
/// ```
/// use std::time::Duration;
/// assert_eq!(fairq_cli::values::parse_time_limit("2m"), Ok(Duration::from_secs(120)));
/// assert!(fairq_cli::values::parse_time_limit("1ns").is_ok());
/// assert!(fairq_cli::values::parse_time_limit("0s").unwrap_err().contains("longer than zero"));
/// ```
pub fn parse_time_limit(s: &str) -> Result<Duration, String> {
    let limit = parse_duration(s)?;
    if limit.is_zero() {
        Err(format!(
            "{} is no time: the limit must be longer than zero (leave the option out for none)",
            s.trim()
        ))
    } else {
        Ok(limit)
    }
}

/// The longest `--delay` or `--backoff` accepted: 100 years (of 365.25 days). Any job time
/// a store records then stays far inside what every store, JSON number and RFC 3339 date
/// can represent.
///
/// ```
/// assert_eq!(fairq_cli::values::MAX_DELAY.as_secs(), 3_155_760_000);
/// ```
pub const MAX_DELAY: Duration = Duration::from_secs(100 * 31_557_600);

/// Parses a delay: a duration of at most [`MAX_DELAY`].
///
/// ```
/// use std::time::Duration;
/// assert_eq!(fairq_cli::values::parse_delay("90s"), Ok(Duration::from_secs(90)));
/// assert!(fairq_cli::values::parse_delay("8000y").unwrap_err().contains("at most 100 years"));
/// ```
pub fn parse_delay(s: &str) -> Result<Duration, String> {
    let delay = parse_duration(s)?;
    if delay > MAX_DELAY {
        Err(format!(
            "{} is too long: delays are at most 100 years",
            s.trim()
        ))
    } else {
        Ok(delay)
    }
}

/// Parses a size in bytes: a whole number with an optional unit (`KiB`, `MiB`, `GiB` are
/// powers of 1024; `KB`, `MB`, `GB` powers of 1000; `B` or none is bytes).
///
/// ```
/// assert_eq!(fairq_cli::values::parse_size("16MiB"), Ok(16 << 20));
/// assert_eq!(fairq_cli::values::parse_size("2 KB"), Ok(2_000));
/// assert_eq!(fairq_cli::values::parse_size("512"), Ok(512));
/// assert!(fairq_cli::values::parse_size("lots").is_err());
/// ```
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(digits);
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" | "k" => 1 << 10,
        "mib" | "m" => 1 << 20,
        "gib" | "g" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        other => {
            return Err(format!(
                "unknown size unit {other:?} (use KiB, MiB, GiB, KB, MB or GB)"
            ))
        }
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| {
            format!("{s:?} is not a size (write a number and a unit, for example 16MiB)")
        })
}

/// Parses a page size: a whole number of at least 1.
///
/// ```
/// assert_eq!(fairq_cli::values::parse_limit("20"), Ok(20));
/// assert!(fairq_cli::values::parse_limit("0").is_err());
/// ```
pub fn parse_limit(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("the limit must be at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{e} (write a whole number, for example 50)")),
    }
}

/// Parses `NAME=VALUE`.
pub(crate) fn parse_meta(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_string(), value.to_string())),
        _ => Err("expected NAME=VALUE".to_string()),
    }
}
