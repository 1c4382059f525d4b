//! Credentials never reach the terminal: every error and warning line passes through
//! [`clean`], which hides URL passwords and credential parameters wherever they appear
//! ([`fairq::redact`]) and, as a second net, any credential of the `--store` value quoted in
//! some other form (a driver echoing part of its input, say).

use std::sync::{PoisonError, RwLock};

/// Credentials of the stores this process was given.
static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Secrets shorter than this are hidden only where they appear in a recognised form;
/// replacing every `a` of a message would make it unreadable.
const MIN_SCRUBBED: usize = 3;

/// Remembers the credentials of `store` (a `--store` value) so [`clean`] hides them.
pub(crate) fn remember(store: &str) {
    let found = fairq::secrets(store);
    if found.is_empty() {
        return;
    }
    let mut secrets = SECRETS.write().unwrap_or_else(PoisonError::into_inner);
    for secret in found {
        if secret.len() >= MIN_SCRUBBED && !secrets.contains(&secret) {
            secrets.push(secret);
        }
    }
}

/// `text` without credentials.
pub(crate) fn clean(text: &str) -> String {
    let mut text = fairq::redact(text);
    let secrets = SECRETS.read().unwrap_or_else(PoisonError::into_inner);
    for secret in secrets.iter() {
        if text.contains(secret.as_str()) {
            text = text.replace(secret.as_str(), fairq::MASK);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_secrets_are_hidden_in_any_form() {
        remember("postgres://u:pa55word@h/db");
        assert_eq!(
            clean("server said: password \"pa55word\" is wrong"),
            "server said: password \"***\" is wrong"
        );
        assert_eq!(clean("redis://:x1@h/"), "redis://:***@h/");
    }
}
