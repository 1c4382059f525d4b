//! Validation of queue and reader names.

use crate::JournalError;

/// Longest accepted queue or reader name, in bytes.
pub const MAX_NAME_LEN: usize = 200;

/// Checks that `name` is usable as a queue or reader name: 1 to 200 ASCII letters, digits,
/// `_`, `-` or `:`.
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
}
