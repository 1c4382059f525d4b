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
    let (body, fragment) = match url.split_once('#') {
        Some((body, fragment)) => (body, Some(fragment)),
        None => (url, None),
    };
    let Some((base, query)) = body.split_once('?') else {
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
    let body = url.split_once('#').map_or(url, |(body, _)| body);
    let Some((_, query)) = body.split_once('?') else {
        return Vec::new();
    };
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| percent_decode(pair.split_once('=').map_or(pair, |(key, _)| key)))
        .collect()
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
    fn broken_escapes_are_kept() {
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("%zz%41"), "%zzA");
    }
}
