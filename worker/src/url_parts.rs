//! Where a store URL's user info ends, so that every crate finds its query the same way.
//!
//! The stores take some of their settings from a connection URL's query (`?schema=`,
//! `?prefix=`, `?sslmode=`, `?cacert=`), and the dashboard and the error messages leave its
//! credentials out. All of them must agree on where the credentials stop and the query
//! begins, or a password is read as parameters (and quoted in an error) or a parameter is
//! read as part of a password (and silently ignored).

/// The byte offset in `url` just past its user info: past the last `@` before the first `/`
/// that follows the scheme's `://`, or the start of the authority when there is no `@`
/// there, or 0 when `url` has no `://`.
///
/// A password may hold `?` or `#` as they are (a URL parser would want them
/// percent-encoded, but people write them as they are), so a query or fragment is looked for
/// only from this offset on. A password must not hold `/` unencoded: nothing tells it from
/// the path then.
///
/// ```
/// use fairq_worker::url_parts::after_user_info;
/// let url = "redis://:a?b#c@h:1/0?prefix=p";
/// assert_eq!(&url[after_user_info(url)..], "h:1/0?prefix=p");
/// let plain = "postgres://db/jobs";
/// assert_eq!(&plain[after_user_info(plain)..], "db/jobs");
/// assert_eq!(after_user_info("file:./data"), 0);
/// ```
pub fn after_user_info(url: &str) -> usize {
    url.find("://").map_or(0, |scheme| {
        let authority = scheme + 3;
        let rest = &url[authority..];
        let slash = rest.find('/').unwrap_or(rest.len());
        authority + rest[..slash].rfind('@').map_or(0, |at| at + 1)
    })
}

/// `url` cut where its query begins: what comes before, and the query without its `?`
/// (`None` when there is none). Only a `?` past the user info starts the query (see
/// [`after_user_info`]); a fragment stays part of the query.
///
/// ```
/// use fairq_worker::url_parts::split_query;
/// assert_eq!(
///     split_query("postgres://u:p?w@db/app?sslmode=require"),
///     ("postgres://u:p?w@db/app", Some("sslmode=require"))
/// );
/// assert_eq!(split_query("postgres://db/app"), ("postgres://db/app", None));
/// ```
pub fn split_query(url: &str) -> (&str, Option<&str>) {
    let start = after_user_info(url);
    match url[start..].find('?') {
        Some(at) => (&url[..start + at], Some(&url[start + at + 1..])),
        None => (url, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_info_runs_to_the_last_at_sign_before_the_path() {
        let url = "redis://u:p@ss@h/0?x=a@b";
        assert_eq!(&url[after_user_info(url)..], "h/0?x=a@b");
    }

    #[test]
    fn a_query_inside_a_password_is_no_query() {
        assert_eq!(
            split_query("redis://:ab?S3cret@h:6379/0?prefix=p"),
            ("redis://:ab?S3cret@h:6379/0", Some("prefix=p"))
        );
        assert_eq!(
            split_query("redis://:ab?S3cret@h:6379"),
            ("redis://:ab?S3cret@h:6379", None)
        );
    }

    #[test]
    fn odd_inputs_never_panic() {
        for url in ["", "://", "://@", "a://@/", "x://é@ü/?", "?", "@://?"] {
            let at = after_user_info(url);
            assert!(url.is_char_boundary(at), "{url}");
            let _ = split_query(url);
        }
    }
}
