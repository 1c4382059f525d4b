//! Text from the store shown to a terminal: queue names, kinds, keys and a command's stderr
//! are anyone's bytes, and a raw escape character among them would be obeyed by the terminal
//! (clearing the screen, retitling the window, hiding what follows). Tables and sentences
//! show them through [`printable`]; JSON output needs nothing more, as serde escapes them.

use std::borrow::Cow;

/// `text` with every control character (C0, DEL and C1: ESC, BEL, a line break...) written
/// as an escape, as `char::escape_debug` writes it (`\u{1b}`, `\n`, `\t`); the rest,
/// backslashes and quotes included, is kept as it is.
pub(crate) fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            shown.extend(c.escape_debug());
        } else {
            shown.push(c);
        }
    }
    Cow::Owned(shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_nothing_else() {
        assert!(matches!(printable("mail-é \\ \"x\""), Cow::Borrowed(_)));
        assert_eq!(printable("mail-é \\ \"x\""), "mail-é \\ \"x\"");
        assert_eq!(printable("\u{1b}[2J"), "\\u{1b}[2J");
        assert_eq!(
            printable("a\tb\nc\r\u{7}\u{7f}\u{9b}0m\0"),
            "a\\tb\\nc\\r\\u{7}\\u{7f}\\u{9b}0m\\0"
        );
        proptest::proptest!(|(text in ".*")| {
            proptest::prop_assert!(!printable(&text).chars().any(char::is_control));
        });
    }
}
