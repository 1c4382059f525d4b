//! The key layout: where a deployment's and a queue's data live in Redis.
//!
//! Every key of a deployment starts with its prefix. The keys of one queue share a hash tag,
//! `<prefix>:{<queue>}:`, so Redis Cluster keeps a whole queue in one slot and every script
//! that changes the queue runs on one node, touching only keys of that slot; different queues
//! spread over the masters. Two deployment-wide keys sit outside any queue: the registry that
//! numbers queues (`<prefix>:queues`), written once per queue ever and read when a job id's
//! queue is not yet known to a client (clients cache it: it is on no job's path, so it is
//! not a hot key), and the set of paused queues' names (`<prefix>:paused`), which only lists
//! them for operators (the queue's own `paused` key is what holds its claims).
//!
//! | key (after `<prefix>:{<queue>}:`) | type | holds |
//! |---|---|---|
//! | `job:<id>` | hash | one job: its data, state, attempts and lease |
//! | `ready` | sorted set | claimable jobs, scored by fair round, members `<push seq>:<id>` |
//! | `keys` | hash | per fairness key: its last round (`t…`) |
//! | `meta` | hash | the round being served (`current`), the push and id sequences, the queue's number, the prune's walk cursor over `st:dead` (`dwalk`) |
//! | `delayed` | sorted set | scheduled and retrying jobs not yet due, by run time |
//! | `retry_at` | sorted set | retrying jobs, by run time (holding retries, `next_retry_at`) |
//! | `leased` | sorted set | running jobs, by lease deadline |
//! | `counts` | hash | jobs per status |
//! | `st:blocked`, `st:retrying`, `st:dead` | sorted set | jobs in these (rarer) statuses, by id |
//! | `all` | sorted set | every job of the queue, by id (listing, purging) |
//! | `finished` | sorted set | succeeded jobs, by finish time (pruning); also dead jobs written by versions before `dead_at` |
//! | `dead_at` | sorted set | dead jobs, by death time (pruning) |
//! | `errs` | sorted set | unfinished jobs that failed before, by first failure time (health) |
//! | `uniq` | hash | unique key → id of the unfinished job holding it |
//! | `deps:<id>`, `xdeps:<id>` | set | jobs blocked on `<id>` (same queue, other queues) |
//! | `xrel:<id>` | list | the other-queue dependents `<id>`'s success released, kept for the client's retry window so that a repeat of the settlement answers them |
//! | `xwait` | sorted set | jobs blocked on another queue's job, by next recheck time |
//! | `hist`, `pstat`, `rstat` | hash | run-time buckets, run-time totals, retry counters |
//! | `signal` | list | wake-up tokens for blocked waiters |
//! | `paused` | string | present while the queue is paused: claims take nothing |
//! | `req:<request>` | string | an enqueue's, hand-back's or revival's answer, kept for the client's retry window (at least a minute) so a repeated or late try of the call is recognised |
//! | `absent` | (none) | never written: declared by every script call next to the base (see [`absent`]) |
//!
//! A job id is `seq * 65536 + n`: `seq` counts per queue and `n` is the queue's number in the
//! registry, so ids are unique across the deployment without a shared counter, and a job's
//! queue follows from its id.

use fairq_worker::BackendError;

/// The key names of one deployment (one prefix).
///
/// ```
/// use fairq_redis::KeySpace;
/// let keys = KeySpace::new("app").unwrap();
/// assert_eq!(keys.queue_base("mail"), "app:{mail}:");
/// assert_eq!(keys.queue_base("a{b}"), "app:{a%7Bb%7D}:");
/// assert!(KeySpace::new("bad{prefix}").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpace {
    prefix: String,
}

impl KeySpace {
    /// The layout under `prefix`, which must be non-empty and free of `{`, `}`, `*`, `?`, `[`,
    /// `]` and whitespace (it appears in hash tags and scan patterns).
    ///
    /// ```
    /// assert!(fairq_redis::KeySpace::new("").is_err());
    /// ```
    pub fn new(prefix: impl Into<String>) -> Result<Self, BackendError> {
        let prefix = prefix.into();
        let bad = |c: char| "{}*?[]\\".contains(c) || c.is_whitespace();
        if prefix.is_empty() || prefix.chars().any(bad) {
            return Err(BackendError::Invalid(format!(
                "key prefix {prefix:?} must be non-empty and free of braces, glob characters \
                 and whitespace"
            )));
        }
        Ok(KeySpace { prefix })
    }

    /// The prefix.
    ///
    /// ```
    /// assert_eq!(fairq_redis::KeySpace::new("p").unwrap().prefix(), "p");
    /// ```
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The common start of every key of `queue`, hash tag included. Braces and `%` in the
    /// queue name are percent-encoded so the tag always covers the whole name.
    ///
    /// ```
    /// let keys = fairq_redis::KeySpace::new("p").unwrap();
    /// assert_eq!(keys.queue_base("100%"), "p:{100%25}:");
    /// ```
    pub fn queue_base(&self, queue: &str) -> String {
        let mut base = String::with_capacity(self.prefix.len() + queue.len() + 4);
        base.push_str(&self.prefix);
        base.push_str(":{");
        for c in queue.chars() {
            match c {
                '%' => base.push_str("%25"),
                '{' => base.push_str("%7B"),
                '}' => base.push_str("%7D"),
                c => base.push(c),
            }
        }
        base.push_str("}:");
        base
    }

    /// The key of one job's hash.
    ///
    /// ```
    /// let keys = fairq_redis::KeySpace::new("p").unwrap();
    /// assert_eq!(keys.job("q", 7), "p:{q}:job:7");
    /// ```
    pub fn job(&self, queue: &str, id: u64) -> String {
        format!("{}job:{id}", self.queue_base(queue))
    }

    /// The keys every script call on `queue` declares (`KEYS`): the queue's key base, from
    /// which the scripts derive every key they touch, and a key in the same slot that is
    /// never written. Neither exists, and two are declared so that while the queue's slot
    /// moves between Redis Cluster masters the call runs on neither (the source redirects
    /// it, the importing node answers `TRYAGAIN`) instead of where only part of the queue's
    /// keys are.
    ///
    /// ```
    /// let keys = fairq_redis::KeySpace::new("p").unwrap();
    /// assert_eq!(keys.script_keys("q"), ["p:{q}:".to_string(), "p:{q}:absent".to_string()]);
    /// ```
    pub fn script_keys(&self, queue: &str) -> [String; 2] {
        let base = self.queue_base(queue);
        let absent = absent(&base);
        [base, absent]
    }

    /// The registry that numbers the deployment's queues.
    ///
    /// ```
    /// assert_eq!(fairq_redis::KeySpace::new("p").unwrap().registry(), "p:queues");
    /// ```
    pub fn registry(&self) -> String {
        format!("{}:queues", self.prefix)
    }

    /// The set listing the deployment's paused queues (for operators; each queue's own
    /// `paused` key is what holds its claims).
    ///
    /// ```
    /// assert_eq!(fairq_redis::KeySpace::new("p").unwrap().paused(), "p:paused");
    /// ```
    pub fn paused(&self) -> String {
        format!("{}:paused", self.prefix)
    }

    /// A `SCAN` pattern matching every key of the deployment's queues, and no key of
    /// another deployment: `<prefix>:{*`. A prefix holds no `{`, so no other prefix's keys
    /// start with this one's followed by `:{`, while `<prefix>:*` would also match those of a
    /// deployment whose prefix is this one's plus `:` and more (`app` and `app:staging`). The
    /// deployment-wide keys are named by [`deployment_keys`](Self::deployment_keys).
    ///
    /// ```
    /// assert_eq!(fairq_redis::KeySpace::new("p").unwrap().pattern(), "p:{*");
    /// ```
    pub fn pattern(&self) -> String {
        format!("{}:{{*", self.prefix)
    }

    /// The deployment's keys outside any queue, which [`pattern`](Self::pattern) does not
    /// match: the registry, the listing of paused queues, and the two deployment-wide keys
    /// the first versions of this crate wrote (`<prefix>:ids`, `<prefix>:index`).
    ///
    /// ```
    /// let keys = fairq_redis::KeySpace::new("p").unwrap();
    /// assert_eq!(keys.deployment_keys(), ["p:queues", "p:paused", "p:ids", "p:index"]);
    /// ```
    pub fn deployment_keys(&self) -> [String; 4] {
        [
            self.registry(),
            self.paused(),
            format!("{}:ids", self.prefix),
            format!("{}:index", self.prefix),
        ]
    }
}

/// The second key a script call on the queue whose key base is `base` declares: one that is
/// never written.
///
/// A script declares keys so that Redis Cluster can route it and check it may run, but the
/// scripts derive the keys they touch from the base, which is not a key that exists. While
/// the queue's slot migrates (`CLUSTER SETSLOT ... MIGRATING`/`IMPORTING`), the source node
/// redirects a call whose declared keys it lacks (`ASK`), and the importing node runs a
/// call sent there with `ASKING` if it declares one key, whether or not it holds the keys
/// the script then touches: with the slot half-moved, such a script would see part of the
/// queue (a job hash missing, a fresh id sequence) and write keys that the source still
/// holds. For a call declaring several keys of which some are missing, the importing node
/// answers `TRYAGAIN` instead, and this key is always missing. So while a queue's slot
/// moves, its script calls are refused by both nodes, whoever follows the redirection, and
/// are repeated as transient failures until the slot's new owner is set.
pub(crate) fn absent(base: &str) -> String {
    format!("{base}absent")
}

/// Declares the keys of a script call on `base` in `cmd` (their count, then the keys): the
/// base and its [`absent`] key for a script on a queue's keys, the base alone otherwise.
pub(crate) fn declare(cmd: &mut redis::Cmd, base: &str, per_queue: bool) {
    if per_queue {
        cmd.arg(2).arg(base).arg(absent(base));
    } else {
        cmd.arg(1).arg(base);
    }
}

/// Job ids carry their queue's number in the low 16 bits.
pub(crate) const QUEUE_BITS: u32 = 16;

/// The number of the queue a job id belongs to (0 for no queue: no valid id has it).
pub(crate) fn queue_number(id: u64) -> u16 {
    (id & ((1 << QUEUE_BITS) - 1)) as u16
}

/// Encodes a fairness key for storage: `-` for none, `+key` otherwise.
pub(crate) fn encode_fkey(key: Option<&str>) -> String {
    match key {
        None => "-".to_string(),
        Some(key) => format!("+{key}"),
    }
}

/// Decodes [`encode_fkey`]'s form.
pub(crate) fn decode_fkey(raw: &str) -> Option<String> {
    raw.strip_prefix('+').map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names_cannot_escape_their_hash_tag() {
        let keys = KeySpace::new("p").unwrap();
        for queue in ["a}b", "{x}", "}", "%7B", ""] {
            let base = keys.queue_base(queue);
            let open = base.find('{').unwrap();
            let close = base[open..].find('}').unwrap() + open;
            assert_eq!(close, base.len() - 2, "{queue:?} -> {base}");
        }
        assert_ne!(keys.queue_base("%7B"), keys.queue_base("{"));
    }

    #[test]
    fn ids_name_their_queue() {
        assert_eq!(queue_number(65_536 + 1), 1);
        assert_eq!(queue_number((1 << 37) * 65_536 + 65_535), 65_535);
        assert_eq!(queue_number(u64::MAX - 7), 65_528);
    }

    #[test]
    fn fairness_keys_round_trip_and_none_differs_from_empty() {
        assert_eq!(decode_fkey(&encode_fkey(None)), None);
        assert_eq!(decode_fkey(&encode_fkey(Some(""))), Some(String::new()));
        assert_ne!(encode_fkey(None), encode_fkey(Some("")));
        assert_eq!(decode_fkey(&encode_fkey(Some("-"))), Some("-".to_string()));
    }
}
