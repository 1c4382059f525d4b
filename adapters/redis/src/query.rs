//! Query parameters of a connection URL that this crate reads itself (`cluster`, `cacert`,
//! `cert`, `key`) and takes out before the `redis` crate sees the URL.

/// Removes the query parameters named in `names` from `url`; returns the rest of the URL
/// and the parameters taken, in the order given, values percent-decoded. The other
/// parameters keep their order; the fragment (`#insecure`) stays.
///
/// ```text
/// let (rest, taken) = take("rediss://h/?a=1&cacert=%2Fca.pem#insecure", &["cacert"]);
/// assert_eq!(rest, "rediss://h/?a=1#insecure");
/// assert_eq!(taken, vec![("cacert", "/ca.pem".to_string())]);
/// ```
pub(crate) fn take(url: &str, names: &[&'static str]) -> (String, Vec<(&'static str, String)>) {
    let (base, query, fragment) = parts(url);
    let Some(query) = query else {
        return (url.to_string(), Vec::new());
    };
    let mut taken = Vec::new();
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match names.iter().find(|name| **name == key) {
            Some(name) => taken.push((*name, percent_decode(value))),
            None => kept.push(pair),
        }
    }
    let mut rest = base.to_string();
    if !kept.is_empty() {
        rest.push('?');
        rest.push_str(&kept.join("&"));
    }
    if let Some(fragment) = fragment {
        rest.push('#');
        rest.push_str(fragment);
    }
    (rest, taken)
}

/// The names of `url`'s query parameters, in order, percent-decoded (the fragment is not
/// part of the query).
pub(crate) fn names(url: &str) -> Vec<String> {
    let Some(query) = parts(url).1 else {
        return Vec::new();
    };
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| percent_decode(pair.split_once('=').map_or(pair, |(key, _)| key)))
        .collect()
}

/// `url` cut where its query or fragment begins: what comes before, and the rest from its
/// `?` or `#` on (empty when it has neither). Neither begins inside the user info (see
/// [`fairq_worker::url_parts::after_user_info`]): a password may hold `?` or `#`, and what follows
/// a `?` is read as parameters, whose names are quoted in errors.
///
/// ```text
/// assert_eq!(split("redis://:a?b#c@h:1/0?key=k#insecure"), ("redis://:a?b#c@h:1/0", "?key=k#insecure"));
/// ```
pub(crate) fn split(url: &str) -> (&str, &str) {
    let start = fairq_worker::url_parts::after_user_info(url);
    let cut = url[start..]
        .find(['?', '#'])
        .map_or(url.len(), |at| start + at);
    url.split_at(cut)
}

/// `url` in three: what comes before its query (see [`split`]), the query and the fragment
/// (each without its `?` or `#`). A `?` inside the fragment starts no query.
fn parts(url: &str) -> (&str, Option<&str>, Option<&str>) {
    let (base, tail) = split(url);
    match tail.strip_prefix('?') {
        Some(query) => match query.split_once('#') {
            Some((query, fragment)) => (base, Some(query), Some(fragment)),
            None => (base, Some(query), None),
        },
        None => (base, None, tail.strip_prefix('#')),
    }
}

/// Decodes the `%XX` escapes of a URL part; anything else is kept as is.
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_parameters_are_taken_out_and_the_rest_and_fragment_kept() {
        let (url, taken) = take(
            "rediss://h:1/0?cacert=/etc/ca%20x.pem&protocol=resp3&key=k.pem#insecure",
            &["cacert", "cert", "key"],
        );
        assert_eq!(url, "rediss://h:1/0?protocol=resp3#insecure");
        assert_eq!(
            taken,
            vec![
                ("cacert", "/etc/ca x.pem".to_string()),
                ("key", "k.pem".to_string())
            ]
        );
        let (url, taken) = take("rediss://h/?cacert=a.pem", &["cacert"]);
        assert_eq!((url.as_str(), taken.len()), ("rediss://h/", 1));
        assert_eq!(
            take("redis://h/", &["cacert"]),
            ("redis://h/".to_string(), vec![])
        );
        assert_eq!(
            take("redis://h/?cluster", &["cluster"]).1,
            vec![("cluster", String::new())]
        );
    }

    #[test]
    fn names_are_listed_in_order_without_values() {
        assert_eq!(
            names("rediss://:pw@h/0?protocol=resp3&pre%66ix=x&cluster#insecure?no=1"),
            ["protocol", "prefix", "cluster"]
        );
        assert!(names("redis://h/#a?b=c").is_empty());
        assert!(names("redis://h/?").is_empty());
    }

    #[test]
    fn a_question_mark_or_hash_in_the_password_starts_no_query() {
        for url in [
            "redis://:ab?S3cret@h:6379/",
            "redis://:ab#S3cret@h:6379/",
            "redis://user:a?b#S3cret&x=y@h:6379/0",
            "rediss://:ab?S3cret@h",
        ] {
            assert!(names(url).is_empty(), "{url}");
            assert_eq!(take(url, &["cacert", "S3cret"]), (url.to_string(), vec![]));
            assert_eq!(split(url), (url, ""));
        }
        let url = "rediss://:ab?S3cret=1@h:6379/0?cacert=%2Fca.pem&protocol=resp3#insecure";
        assert_eq!(names(url), ["cacert", "protocol"]);
        assert_eq!(
            take(url, &["cacert"]),
            (
                "rediss://:ab?S3cret=1@h:6379/0?protocol=resp3#insecure".to_string(),
                vec![("cacert", "/ca.pem".to_string())]
            )
        );
        // '@' in a parameter's value, after the path's '/', is not user info.
        let url = "redis://h:1/?cacert=/etc/me@host/ca.pem";
        assert_eq!(split(url), ("redis://h:1/", "?cacert=/etc/me@host/ca.pem"));
        assert_eq!(
            split("redis+unix:///run/r.sock?db=2&pass=p@ss").1,
            "?db=2&pass=p@ss"
        );
        assert_eq!(split("redis://h:1#a?b").1, "#a?b");
        assert!(names("redis://h:1#a?b").is_empty());
    }

    #[test]
    fn broken_escapes_are_kept() {
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("%zz%41"), "%zzA");
    }
}
