//! Whether a test run must have its servers: the `FAIRQ_REQUIRE_SERVICES` switch, read the
//! same way by every crate's tests.

/// The environment variable that turns a missing server from a skipped test into a failure.
pub const REQUIRE_SERVICES: &str = "FAIRQ_REQUIRE_SERVICES";

/// Reads a value of [`REQUIRE_SERVICES`]: unset, empty or a false word (`0`, `false`, `no`,
/// `off`, `n`) means "skip when a server is missing", a true word (`1`, `true`, `yes`, `on`,
/// `y`) means "fail"; any other value is refused, so a typo never skips tests silently.
/// Case and surrounding blanks are ignored.
///
/// ```
/// use fairq_worker::services::parse_required;
/// assert_eq!(parse_required(None), Ok(false));
/// assert_eq!(parse_required(Some(" TRUE ")), Ok(true));
/// assert_eq!(parse_required(Some("off")), Ok(false));
/// assert!(parse_required(Some("always")).is_err());
/// ```
pub fn parse_required(value: Option<&str>) -> Result<bool, String> {
    let Some(value) = value else {
        return Ok(false);
    };
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" | "y" => Ok(true),
        "" | "0" | "false" | "no" | "off" | "n" => Ok(false),
        _ => Err(format!(
            "{REQUIRE_SERVICES}={value:?} is neither true (1, true, yes, on) nor false \
             (0, false, no, off)"
        )),
    }
}

/// True when this run must fail instead of skipping tests whose server is missing, by
/// [`parse_required`] on the environment.
///
/// # Panics
///
/// When the variable holds a value that is neither true nor false: a test run with a
/// mistyped switch must stop, not skip.
///
/// ```
/// // In a test: skip only when servers are optional.
/// if !fairq_worker::services::required() {
///     // ... check the server and return early when it is missing ...
/// }
/// ```
pub fn required() -> bool {
    let value = std::env::var(REQUIRE_SERVICES).ok();
    match parse_required(value.as_deref()) {
        Ok(required) => required,
        Err(message) => panic!("{message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_required;

    #[test]
    fn the_switch_takes_any_truthy_or_falsy_word_and_refuses_others() {
        for yes in ["1", "true", "TRUE", "yes", "on", " Y "] {
            assert_eq!(parse_required(Some(yes)), Ok(true), "{yes}");
        }
        for no in ["0", "false", "No", "off", "", "n"] {
            assert_eq!(parse_required(Some(no)), Ok(false), "{no}");
        }
        assert_eq!(parse_required(None), Ok(false));
        let refused = parse_required(Some("sometimes")).unwrap_err();
        assert!(refused.contains("\"sometimes\""), "{refused}");
    }
}
