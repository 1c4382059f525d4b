//! What a connection URL names: one server, or a Redis Cluster given by one or more of its
//! nodes.

use fairq_worker::BackendError;

/// The servers a URL names.
///
/// Three forms:
///
/// * `redis://[user:password@]host[:port][/db]` (or `rediss://` for TLS): one server;
/// * `redis+cluster://[user:password@]host1:port1,host2:port2[/]` (or `rediss+cluster://`):
///   a cluster, reached through any of the nodes listed (the rest of the cluster is
///   discovered from them; listing several only matters while some are down);
/// * `redis://host:port/?cluster=true` (also `1`, `yes`, `on`): a cluster discovered from
///   that one node.
///
/// A cluster has only database 0: a cluster URL naming another one is refused. The query
/// may hold `cluster`, `cacert`, `cert`, `key` and `protocol`; any other parameter is
/// refused by name (a misspelt one would otherwise be dropped silently).
///
/// ```
/// use fairq_redis::Target;
/// let t = Target::parse("redis+cluster://:pw@10.0.0.1:7001,10.0.0.2:7002/").unwrap();
/// assert_eq!(
///     t,
///     Target::Cluster(vec!["redis://:pw@10.0.0.1:7001/".into(), "redis://:pw@10.0.0.2:7002/".into()])
/// );
/// let t = Target::parse("redis://127.0.0.1:7001/?cluster=true").unwrap();
/// assert_eq!(t, Target::Cluster(vec!["redis://127.0.0.1:7001/".into()]));
/// let t = Target::parse("redis://127.0.0.1:6379/2").unwrap();
/// assert_eq!(t, Target::Single("redis://127.0.0.1:6379/2".into()));
/// assert!(Target::parse("redis+cluster://h:1/3").is_err());
/// assert!(Target::parse("redis://h:1/?prefx=app").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One server, by its URL.
    Single(String),
    /// A cluster, by the URLs of the nodes to discover it from.
    Cluster(Vec<String>),
}

impl Target {
    /// Reads a connection URL (see the type's docs). Errors are
    /// [`BackendError::Invalid`] and never quote a password.
    pub fn parse(url: &str) -> Result<Target, BackendError> {
        let bad = |reason: &str| BackendError::Invalid(format!("invalid Redis URL: {reason}"));
        check_parameters(url).map_err(|r| bad(&r))?;
        let (url, cluster_param) = take_cluster_param(url).map_err(|r| bad(&r))?;
        let Some((scheme, rest)) = url.split_once("://") else {
            return Ok(Target::Single(url));
        };
        let node_scheme = match scheme.to_ascii_lowercase().as_str() {
            "redis+cluster" => "redis",
            "rediss+cluster" => "rediss",
            _ if cluster_param => return Ok(Target::Cluster(vec![check_db0(&url)?])),
            _ => return Ok(Target::Single(url)),
        };
        // The query and the fragment (`tail`) begin past the user info, which may hold '?'
        // and '#' (see query::split); the user info runs to the last '@' before them, the
        // hosts from there to the next '/'.
        let (head, tail) = crate::query::split(&url);
        // `head` begins with the scheme and its "://", as `url` does.
        let head = &head[url.len() - rest.len()..];
        let host_start = head.rfind('@').map_or(0, |at| at + 1);
        let slash = head[host_start..]
            .find('/')
            .map_or(head.len(), |slash| host_start + slash);
        let (authority, path) = head.split_at(slash);
        let (userinfo, hosts) = match authority.rfind('@') {
            Some(at) => (&authority[..=at], &authority[at + 1..]),
            None => ("", authority),
        };
        let path = if path.starts_with('/') {
            format!("{path}{tail}")
        } else {
            format!("/{path}{tail}")
        };
        let mut nodes = Vec::new();
        for host in hosts.split(',') {
            let host = host.trim();
            if host.is_empty() {
                return Err(bad("a cluster URL lists an empty node"));
            }
            nodes.push(check_db0(&format!(
                "{node_scheme}://{userinfo}{host}{path}"
            ))?);
        }
        Ok(Target::Cluster(nodes))
    }

    /// True for a cluster.
    ///
    /// ```
    /// assert!(fairq_redis::Target::parse("redis+cluster://h:1/").unwrap().is_cluster());
    /// ```
    pub fn is_cluster(&self) -> bool {
        matches!(self, Target::Cluster(_))
    }
}

/// The query parameters a connection URL may carry: `cluster` (read here), `cacert`, `cert`
/// and `key` (TLS, read by `tls`) and `protocol` (read by the `redis` crate).
const PARAMETERS: [&str; 5] = ["cluster", "cacert", "cert", "key", "protocol"];

/// What the `redis` crate also reads from a Unix socket's URL (`redis+unix:` or `unix:`),
/// whose path names the socket rather than the database and the credentials.
const UNIX_PARAMETERS: [&str; 3] = ["db", "user", "pass"];

/// Refuses a query parameter that nothing reads: a misspelt one (`prefx=`) would otherwise
/// be dropped without a word, and the store would run with its default instead.
fn check_parameters(url: &str) -> Result<(), String> {
    let scheme = url.split_once(':').map_or("", |(scheme, _)| scheme);
    let unix = matches!(scheme.to_ascii_lowercase().as_str(), "redis+unix" | "unix");
    let known =
        |name: &str| PARAMETERS.contains(&name) || (unix && UNIX_PARAMETERS.contains(&name));
    match crate::query::names(url)
        .into_iter()
        .find(|name| !known(name))
    {
        None => Ok(()),
        Some(name) => Err(format!(
            "unknown parameter {name:?} (a Redis URL takes {}{}; the key prefix and \
             keep_succeeded are RedisOptions, or parameters of a fairq::connect URL)",
            PARAMETERS.join(", "),
            if unix { ", db, user, pass" } else { "" }
        )),
    }
}

/// Takes the `cluster` query parameter out of `url`: its value as a boolean (false when
/// absent; the last one given wins).
fn take_cluster_param(url: &str) -> Result<(String, bool), String> {
    let (rest, taken) = crate::query::take(url, &["cluster"]);
    let mut cluster = false;
    for (_, value) in taken {
        cluster = match value.to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => true,
            "0" | "false" | "no" | "off" => false,
            other => return Err(format!("cluster={other:?} is neither true nor false")),
        };
    }
    Ok((rest, cluster))
}

/// Refuses a node URL naming a database other than 0 (a cluster has no others).
fn check_db0(url: &str) -> Result<String, BackendError> {
    let info = redis::IntoConnectionInfo::into_connection_info(url)
        .map_err(|e| BackendError::Invalid(format!("invalid Redis URL: {e}")))?;
    if info.redis.db != 0 {
        return Err(BackendError::Invalid(format!(
            "invalid Redis URL: a cluster has only database 0, not {}",
            info.redis.db
        )));
    }
    Ok(url.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_urls_name_every_node_with_the_same_credentials() {
        let t = Target::parse("redis+cluster://u:pw@a:1,b:2,c:3/?protocol=resp3").unwrap();
        assert_eq!(
            t,
            Target::Cluster(vec![
                "redis://u:pw@a:1/?protocol=resp3".into(),
                "redis://u:pw@b:2/?protocol=resp3".into(),
                "redis://u:pw@c:3/?protocol=resp3".into(),
            ])
        );
        let t = Target::parse("redis+cluster://a:1").unwrap();
        assert_eq!(t, Target::Cluster(vec!["redis://a:1/".into()]));
    }

    #[test]
    fn the_cluster_parameter_is_taken_out_and_read_as_a_boolean() {
        assert_eq!(
            Target::parse("redis://a:1/?protocol=resp3&cluster=yes").unwrap(),
            Target::Cluster(vec!["redis://a:1/?protocol=resp3".into()])
        );
        assert_eq!(
            Target::parse("redis://a:1/?cluster=off").unwrap(),
            Target::Single("redis://a:1/".into())
        );
        let err = Target::parse("redis://:hunter2@a:1/?cluster=maybe").unwrap_err();
        assert!(err.to_string().contains("cluster=\"maybe\""), "{err}");
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    #[test]
    fn a_parameter_nothing_reads_is_refused_by_name() {
        for (url, name) in [
            ("redis://:hunter2@a:1/?prefx=app", "\"prefx\""),
            (
                "rediss://a:1/0?cacert=ca.pem&protocol=3&timeout=5",
                "\"timeout\"",
            ),
            ("redis+cluster://a:1,b:2/?prefix=app", "\"prefix\""),
            ("redis://a:1/?password=hunter2", "\"password\""),
        ] {
            let err = Target::parse(url).unwrap_err().to_string();
            assert!(
                err.starts_with("invalid request: invalid Redis URL: unknown parameter"),
                "{err}"
            );
            assert!(err.contains(name), "{err}");
            assert!(!err.contains("hunter2"), "{err}");
        }
        assert!(
            Target::parse("redis://a:1/?db=2").is_err(),
            "db is the path here"
        );
        for url in [
            "redis+unix:///run/redis.sock?db=2&user=u&pass=p",
            "rediss://a:1/0?cacert=ca.pem&cert=c.pem&key=k.pem&protocol=resp3#insecure",
            "redis://a:1/?cluster=false",
            "redis://a:1/",
        ] {
            assert!(Target::parse(url).is_ok(), "{url}");
        }
    }

    /// A `?` or `#` in a password is not where the query or fragment begins, so the password
    /// is never read as parameters and quoted: `"S3cret@h:6379/"` was refused as an unknown
    /// parameter.
    #[test]
    fn a_password_with_a_question_mark_is_never_quoted() {
        for url in [
            "redis://:ab?S3cret@h:6379/",
            "redis://:ab?S3cret@h:6379/?prefx=app",
            "redis://u:ab?S3cret&x=1@h:6379/5?cluster=true",
            "redis://:ab#S3cret@h:6379/?cluster=maybe",
            "redis+cluster://:ab?S3cret@a:1,,b:2/",
            "redis+cluster://:ab?S3cret@a:1/?prefix=x",
        ] {
            if let Err(err) = Target::parse(url) {
                assert!(!err.to_string().contains("S3cret"), "{url}: {err}");
            }
        }
        let err = Target::parse("redis://:ab?S3cret@h:6379/?prefx=app").unwrap_err();
        assert!(err.to_string().contains("\"prefx\""), "{err}");
    }

    #[test]
    fn empty_nodes_and_other_databases_are_refused_without_the_password() {
        for url in [
            "redis+cluster://:hunter2@a:1,,b:2/",
            "redis+cluster://:hunter2@a:1/5",
            "redis://:hunter2@a:1/5?cluster=1",
        ] {
            let err = Target::parse(url).unwrap_err().to_string();
            assert!(
                err.starts_with("invalid request: invalid Redis URL"),
                "{err}"
            );
            assert!(!err.contains("hunter2"), "{err}");
        }
    }
}
