//! Hiding credentials in store URLs and in any text that may quote one.
//!
//! Two forms are recognised, in URLs of any scheme and in free text:
//!
//! * the password of a URL's user info, `scheme://user:PASSWORD@host`. The user info runs to
//!   the **last** `@` of the URL, so a password that contains `/`, `@`, `:` or `?` is hidden
//!   whole (if the query also holds an `@`, more than the password is hidden, never less).
//!   A URL ends at a blank, but one cut inside what looks like a password
//!   (`redis://:hunter 2@h/`) is hidden to the last `@` on its line;
//! * the value of a parameter whose name says it is a credential (it contains `pass`, `pwd`,
//!   `secret`, `token`, `auth` or `credential`, in any case): `?password=VALUE`,
//!   `&sslpassword=VALUE`, and key-value connection strings such as `host=db password=VALUE`
//!   or `password='VALUE'`. The value runs to the next `&`, `;`, blank or end (or to the
//!   closing quote); a `:` just before a blank is taken as the punctuation of a message
//!   (`...?password=***: connection refused`). Other parameters' values hide nothing: a
//!   credential after one holding a quote (`?x='&password=VALUE`) is hidden all the same.
//!
//! Hidden parts become `***`; user names, hosts, ports and other parameters stay readable.

use std::ops::Range;

/// What a hidden credential is shown as.
pub const MASK: &str = "***";

/// Name fragments that mark a parameter as a credential.
const CREDENTIAL_NAMES: [&str; 6] = ["pass", "pwd", "secret", "token", "auth", "credential"];

/// `text` with every credential replaced by [`MASK`].
///
/// ```
/// use fairq::redact;
/// assert_eq!(redact("postgres://bob:s3cret@db:5432/app"), "postgres://bob:***@db:5432/app");
/// assert_eq!(redact("redis://h:6379/0?password=hunter2&db=1"), "redis://h:6379/0?password=***&db=1");
/// assert_eq!(redact("mysql://u:pa/ss@h/db"), "mysql://u:***@h/db");
/// assert_eq!(redact("host=db password='a b' user=x"), "host=db password=*** user=x");
/// assert_eq!(redact("file:./fairq-data"), "file:./fairq-data");
/// ```
pub fn redact(text: &str) -> String {
    let ranges = credential_ranges(text);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for range in ranges {
        out.push_str(&text[at..range.start]);
        out.push_str(MASK);
        at = range.end;
    }
    out.push_str(&text[at..]);
    out
}

/// The credentials [`redact`] hides in `text`, in order (for scrubbing them out of messages
/// that quote them some other way).
///
/// ```
/// assert_eq!(fairq::secrets("redis://:pw@h/?token=t1"), ["pw", "t1"]);
/// assert!(fairq::secrets("redis://h/").is_empty());
/// ```
pub fn secrets(text: &str) -> Vec<String> {
    credential_ranges(text)
        .into_iter()
        .map(|r| text[r].to_string())
        .collect()
}

/// `url`, a store URL as given, without credentials: as [`redact`] shows it, and when it
/// has no `://` (a typo such as `postgres:/app:pw@db/x` or `app:pw@db/x`), everything
/// between its first `:` and its last `@` hidden too, as the user info it may be. Hiding
/// more than a password (the user name), never less.
pub(crate) fn redact_url(url: &str) -> String {
    let shown = redact(url);
    match slashless_user_info(&shown) {
        Some(range) => format!("{}{MASK}{}", &shown[..range.start], &shown[range.end..]),
        None => shown,
    }
}

/// For a URL without `://`: what lies between its first `:` and its last `@`, when both
/// are there in that order and something lies between them.
fn slashless_user_info(url: &str) -> Option<Range<usize>> {
    if url.contains("://") {
        return None;
    }
    let start = url.find(':')? + 1;
    let end = url.rfind('@')?;
    (start < end).then_some(start..end)
}

/// Every form in which another program may quote the credentials of `text`: each as
/// written, without its quotes (`password='a b'`) with and without its `\'` escapes,
/// percent-decoded, and each of these escaped as `{:?}` shows it; the longest first, so
/// that replacing them in that order leaves no part of a longer one behind.
pub(crate) fn secret_forms(text: &str) -> Vec<String> {
    let mut forms = Vec::new();
    let mut found = secrets(text);
    // A store URL without `://` may hold a password all the same (see `redact_url`).
    if let Some(range) = slashless_user_info(text) {
        let user_info = &text[range];
        found.push(user_info.to_string());
        // `user:password` or `:password`: the password alone too.
        if let Some((_, password)) = user_info.split_once(':') {
            found.push(password.to_string());
        }
    }
    for secret in found {
        let inside = secret
            .strip_prefix('\'')
            .map(|s| s.strip_suffix('\'').unwrap_or(s).to_string());
        let unescaped = inside.as_ref().map(|s| s.replace("\\'", "'"));
        let decoded = percent_encoding::percent_decode_str(&secret)
            .decode_utf8_lossy()
            .into_owned();
        for form in [Some(secret), inside, unescaped, Some(decoded)]
            .into_iter()
            .flatten()
        {
            let debug = format!("{form:?}");
            forms.push(debug[1..debug.len() - 1].to_string());
            forms.push(form);
        }
    }
    forms.retain(|f| !f.is_empty());
    forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    forms.dedup();
    forms
}

/// Byte ranges of every credential in `text`, sorted and merged.
fn credential_ranges(text: &str) -> Vec<Range<usize>> {
    let mut ranges = userinfo_passwords(text);
    ranges.extend(credential_parameters(text));
    ranges.retain(|r| !r.is_empty());
    ranges.sort_by_key(|r| (r.start, r.end));
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// The password of every `scheme://user:password@` in `text`.
fn userinfo_passwords(text: &str) -> Vec<Range<usize>> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(pos) = text[from..].find("://") {
        let start = from + pos + 3;
        // A URL ends at the first blank.
        let end = text[start..]
            .find(char::is_whitespace)
            .map_or(text.len(), |n| start + n);
        let url = &text[start..end];
        if let Some(at) = url.rfind('@')
            && let Some(colon) = url[..at].find(':')
        {
            found.push(start + colon + 1..start + at);
        } else if let Some((colon, at)) = cut_user_info(text, start, end) {
            // A password holding a blank (`redis://:hunter 2@h/`).
            found.push(colon + 1..at);
            from = at;
            continue;
        }
        from = end.max(start);
    }
    found
}

/// For a URL whose first word (`text[start..end]`, after the `://`) has no `@`: the colon
/// of its user info and the `@` that ends it when a blank seems to cut the URL inside its
/// password, that is when the authority holds a `:` not followed by a port only, or is cut
/// by the blank itself, and an `@` follows on the same line before any other URL. It errs
/// on the side of hiding: a message that goes on with an `@` after a URL cut at its port
/// (`redis://h:6379 refused for app@db`) loses the text in between.
fn cut_user_info(text: &str, start: usize, end: usize) -> Option<(usize, usize)> {
    let word = &text[start..end];
    // As for the query (see `fairq_worker::url::after_user_info`), only a `/` ends the
    // authority: a password may hold `?` and `#` as they are.
    let authority_end = word.find('/').unwrap_or(word.len());
    let authority = &word[..authority_end];
    // An IPv6 address in brackets holds colons of its own.
    let skip = if authority.starts_with('[') {
        authority.find(']').map_or(authority.len(), |n| n + 1)
    } else {
        0
    };
    let colon = start + skip + authority[skip..].find(':')?;
    if authority_end < word.len() && is_hosts_and_ports(authority) {
        return None;
    }
    let line_end = text[end..].find('\n').map_or(text.len(), |n| end + n);
    let next_url = text[end..line_end]
        .find("://")
        .map_or(line_end, |n| end + n);
    let at = end + text[end..next_url].rfind('@')?;
    Some((colon, at))
}

/// True when `authority` is hosts with ports only (`h:6379`, `[::1]:5432`, `a:1,b:2`).
fn is_hosts_and_ports(authority: &str) -> bool {
    authority.split(',').all(|host_port| {
        let host_end = if host_port.starts_with('[') {
            host_port.find(']').map_or(host_port.len(), |n| n + 1)
        } else {
            host_port.find(':').unwrap_or(host_port.len())
        };
        let (host, port) = host_port.split_at(host_end);
        !host.is_empty()
            && (port.is_empty()
                || port
                    .strip_prefix(':')
                    .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())))
    })
}

/// The value of every `name=value` whose name marks a credential.
fn credential_parameters(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let is_name = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.';
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts_name = is_name(bytes[i])
            && (i == 0 || matches!(bytes[i - 1], b'?' | b'&' | b';' | b',' | b'/') || {
                bytes[i - 1].is_ascii_whitespace()
            });
        if !starts_name {
            i += 1;
            continue;
        }
        let name_end = (i..bytes.len())
            .find(|&j| !is_name(bytes[j]))
            .unwrap_or(bytes.len());
        // `name=value`, or `name = value` in key-value connection strings.
        let mut j = name_end;
        while j < bytes.len() && bytes[j] == b' ' {
            j += 1;
        }
        if j >= bytes.len() || bytes[j] != b'=' {
            i = name_end.max(i + 1);
            continue;
        }
        j += 1;
        while j < bytes.len() && bytes[j] == b' ' {
            j += 1;
        }
        let name = text[i..name_end].to_ascii_lowercase();
        let value_start = j;
        let value_end = if bytes.get(j) == Some(&b'\'') {
            // A quoted value (`password='a b'`), with `\'` escapes, runs to its closing quote.
            let mut k = j + 1;
            while k < bytes.len() && bytes[k] != b'\'' {
                k += if bytes[k] == b'\\' { 2 } else { 1 };
            }
            (k + 1).min(bytes.len())
        } else {
            let end = (j..bytes.len())
                .find(|&k| matches!(bytes[k], b'&' | b';') || bytes[k].is_ascii_whitespace())
                .unwrap_or(bytes.len());
            // In a message a URL is often followed by `: ` and the cause; that colon is
            // punctuation, not part of the value.
            if end > j + 1
                && end < bytes.len()
                && bytes[end].is_ascii_whitespace()
                && bytes[end - 1] == b':'
            {
                end - 1
            } else {
                end
            }
        };
        if CREDENTIAL_NAMES.iter().any(|c| name.contains(c)) {
            found.push(value_start..value_end);
            i = value_end.max(i + 1);
        } else {
            // Another parameter's value hides nothing: a quote in it may never close
            // (`x='&password=...`) or close only past a credential, so the scan goes on
            // inside it.
            i = value_start.max(i + 1);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn every_form_the_issue_names_is_hidden() {
        for (given, shown) in [
            (
                "postgres://postgres@127.0.0.1:1/test?password=hunter2",
                "postgres://postgres@127.0.0.1:1/test?password=***",
            ),
            (
                "redis://127.0.0.1:1/?password=hunter2",
                "redis://127.0.0.1:1/?password=***",
            ),
            ("mysql://u:hunter2@h/db", "mysql://u:***@h/db"),
            ("postgres://u:hun/ter2@h/db", "postgres://u:***@h/db"),
            ("redis://:p@ss:w/rd?@h:6379/0", "redis://:***@h:6379/0"),
            (
                "rediss://u:x@h/0?PassWord=y&db=2",
                "rediss://u:***@h/0?PassWord=***&db=2",
            ),
            (
                "x://h/?sslpassword=a;token=b",
                "x://h/?sslpassword=***;token=***",
            ),
            (
                "error: cannot open store redis://:pw@h/: refused",
                "error: cannot open store redis://:***@h/: refused",
            ),
            (
                "cannot open store redis://h/?password=pw: refused",
                "cannot open store redis://h/?password=***: refused",
            ),
            (
                "host=h password = 'it\\'s x' dbname=d",
                "host=h password = *** dbname=d",
            ),
        ] {
            assert_eq!(redact(given), shown, "{given}");
        }
    }

    #[test]
    fn a_password_holding_blanks_is_hidden_whole() {
        for (given, shown) in [
            ("redis://:hunter 2@h/", "redis://:***@h/"),
            (
                "postgres://bob:a b c@db:5432/app",
                "postgres://bob:***@db:5432/app",
            ),
            ("redis://: lead@h/", "redis://:***@h/"),
            ("redis://:a/b c@h/", "redis://:***@h/"),
            (
                "error: cannot open store redis://:hunter 2@h/: refused",
                "error: cannot open store redis://:***@h/: refused",
            ),
            // All digits, as a port would be: still hidden, the blank cuts the authority.
            ("redis://u:1234 5@h/", "redis://u:***@h/"),
            // Lines and other URLs bound it.
            (
                "redis://:a b@h/ and postgres://u:p@db/x",
                "redis://:***@h/ and postgres://u:***@db/x",
            ),
        ] {
            assert_eq!(redact(given), shown, "{given}");
        }
        // Hosts with ports, and URLs with no `@` after them, are left alone.
        for text in [
            "redis://h:6379/ refused for app@db",
            "redis+cluster://a:1,b:2/ refused for app@db",
            "redis://[::1]:6379/0 refused for app@db",
            "redis://h:6379 down\nmail ops@corp",
            "postgres://db:5432 is down",
            "redis://h:6379 and postgres://db:1/x",
        ] {
            assert_eq!(redact(text), text);
        }
    }

    #[test]
    fn a_quote_in_another_value_hides_no_credential_after_it() {
        for (given, shown) in [
            (
                "postgres://h/db?x='&password=hunter2",
                "postgres://h/db?x='&password=***",
            ),
            (
                "postgres://h/db?x='a&password=hunter2&y='b",
                "postgres://h/db?x='a&password=***&y='b",
            ),
            (
                "host=h options='-c x' password=hunter2",
                "host=h options='-c x' password=***",
            ),
            (
                "host=h application_name='it password=hunter2",
                "host=h application_name='it password=***",
            ),
            ("x=a,token=hunter2", "x=a,token=***"),
        ] {
            assert_eq!(redact(given), shown, "{given}");
        }
    }

    #[test]
    fn text_without_credentials_is_unchanged() {
        for text in [
            "file:./fairq-data",
            "postgres://bob@db/app?schema=jobs",
            "redis://h:6379/0?prefix=billing",
            "memory:",
            "job 4 failed: exit status 1",
            "page=open",
            "a=b c=d",
        ] {
            assert_eq!(redact(text), text);
            assert!(secrets(text).is_empty(), "{text}");
        }
    }

    fn scheme() -> impl Strategy<Value = String> {
        "[a-z][a-z0-9+.-]{0,8}"
    }

    /// Passwords over every printable character but blanks and `*` (the mask).
    fn password() -> impl Strategy<Value = String> {
        "[!-)+-~]{1,24}"
    }

    fn host() -> impl Strategy<Value = String> {
        "[a-z0-9.-]{1,12}(:[0-9]{1,5})?"
    }

    fn tail() -> impl Strategy<Value = String> {
        "(/[a-z0-9_]{0,8})?(\\?[a-z]{1,6}=[a-z0-9]{0,6}(&[a-z]{1,6}=[a-z0-9]{0,6}){0,2})?"
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Against a literal model: the URL with its password, and only it, masked.
        #[test]
        fn userinfo_passwords_are_hidden_whole(
            scheme in scheme(), user in "[a-z]{0,6}", pw in password(), host in host(), tail in tail()
        ) {
            prop_assume!(!tail.contains("pass") && !tail.contains("pwd") && !tail.contains("auth")
                && !tail.contains("token") && !tail.contains("secret"));
            let url = format!("{scheme}://{user}:{pw}@{host}{tail}");
            prop_assert_eq!(redact(&url), format!("{scheme}://{user}:***@{host}{tail}"));
            prop_assert_eq!(secrets(&url), vec![pw]);
        }

        /// Against the same model, passwords holding blanks (but no `@`, which would end the
        /// user info of the first word, nor `/`, which a password must not hold unencoded).
        #[test]
        fn userinfo_passwords_holding_blanks_are_hidden_whole(
            scheme in scheme(), user in "[a-z]{0,6}", pw in "[!-)+-.0-?A-~]{0,8}( [!-)+-.0-?A-~]{0,8}){1,3}",
            host in host(), tail in tail()
        ) {
            prop_assume!(!tail.contains("pass") && !tail.contains("pwd") && !tail.contains("auth")
                && !tail.contains("token") && !tail.contains("secret"));
            let url = format!("{scheme}://{user}:{pw}@{host}{tail}");
            prop_assert_eq!(redact(&url), format!("{scheme}://{user}:***@{host}{tail}"));
            prop_assert_eq!(secrets(&url), vec![pw]);
        }

        /// Query parameters named like credentials, in any case, anywhere in the query.
        #[test]
        fn credential_parameters_are_hidden(
            scheme in scheme(),
            host in host(),
            name in "(?i-u)(password|pass|pwd|sslpassword|auth_token|secret)",
            pw in "[!-%'-:<-~]{1,24}",
            before in proptest::option::of("[a-z]{1,4}=[a-z0-9]{1,4}"),
            after in proptest::option::of("[a-z]{1,4}=[a-z0-9]{1,4}"),
        ) {
            prop_assume!(!pw.contains('*') && !pw.starts_with('\''));
            let lead = before.map(|b| format!("{b}&")).unwrap_or_default();
            let trail = after.map(|a| format!("&{a}")).unwrap_or_default();
            prop_assume!(![&lead, &trail].iter().any(|p| CREDENTIAL_NAMES.iter().any(|c| p.contains(c))));
            // A value that holds `@` would read as user info in a URL; key-value text has none.
            let text = format!("{scheme}://{host}/db?{lead}{name}={pw}{trail}");
            let expected = format!("{scheme}://{host}/db?{lead}{name}=***{trail}");
            // The password must be the only place its text appears for the check to mean much.
            prop_assume!(!expected.contains(&pw) && !"dbname=x host=".contains(&pw));
            if !pw.contains('@') {
                prop_assert_eq!(redact(&text), expected);
            }
            prop_assert!(!redact(&text).contains(&pw));
            prop_assume!(!pw.ends_with(':'));
            let kv = format!("host={host} {name}={pw} dbname=x");
            prop_assert_eq!(redact(&kv), format!("host={host} {name}=*** dbname=x"));
        }

        /// Whatever another parameter's value holds, a credential after it is hidden.
        #[test]
        fn no_other_value_hides_a_credential_after_it(
            junk in "[ -~]{0,12}",
            name in "(?i-u)(password|sslpassword|token)",
            pw in "[A-Z]{8,12}",
            kv in proptest::bool::ANY,
        ) {
            prop_assume!(!junk.contains(&pw));
            let text = if kv {
                format!("host=h x={junk} {name}={pw}")
            } else {
                format!("postgres://h/db?x={junk}&{name}={pw}")
            };
            prop_assert!(!redact(&text).contains(&pw), "{}", redact(&text));
        }

        /// Whatever the text, redaction never panics, and redacting twice changes nothing more.
        #[test]
        fn redaction_is_total_and_idempotent(text in "\\PC{0,80}") {
            let once = redact(&text);
            prop_assert_eq!(redact(&once), once.clone());
        }
    }
}
