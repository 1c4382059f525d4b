//! The Lua scripts: every state change of a queue is one of them, run atomically by Redis.
//!
//! Each per-queue script is the shared prelude (key helpers, collected writes, the fair-round
//! push, failure handling, the claim) followed by its body. Calls go by SHA1 (`EVALSHA`); the
//! store loads the scripts again when the server answers `NOSCRIPT` (after a restart, a
//! failover to a replica that never saw them, or `SCRIPT FLUSH`).

use redis::Script;

const PRELUDE: &str = include_str!("lua/prelude.lua");

/// One named script.
pub(crate) struct Named {
    pub(crate) name: &'static str,
    pub(crate) script: Script,
    pub(crate) source: String,
    /// Whether it works on one queue's keys (its call then declares
    /// [`KeySpace::script_keys`](crate::KeySpace::script_keys)) rather than on one key of its
    /// own.
    pub(crate) per_queue: bool,
}

impl Named {
    /// A script on one queue's keys: the prelude, then `body`.
    fn queue(name: &'static str, body: &str) -> Self {
        Named {
            per_queue: true,
            ..Self::plain(name, &format!("{PRELUDE}\n{body}"))
        }
    }

    /// A script on its own.
    fn plain(name: &'static str, source: &str) -> Self {
        Named {
            name,
            script: Script::new(source),
            source: source.to_string(),
            per_queue: false,
        }
    }

    /// The SHA1 the server knows the script by.
    pub(crate) fn hash(&self) -> &str {
        self.script.get_hash()
    }
}

/// Every script, compiled into the crate.
pub(crate) struct Scripts {
    pub(crate) enqueue: Named,
    pub(crate) claim: Named,
    pub(crate) settle: Named,
    pub(crate) heartbeat: Named,
    pub(crate) handback: Named,
    pub(crate) rescue: Named,
    pub(crate) hold: Named,
    pub(crate) maintain: Named,
    pub(crate) revive: Named,
    pub(crate) purge: Named,
    pub(crate) cancel: Named,
    pub(crate) pause: Named,
    pub(crate) prune: Named,
    pub(crate) remove: Named,
    pub(crate) list: Named,
    pub(crate) depend: Named,
    pub(crate) unblock: Named,
    pub(crate) timing: Named,
    pub(crate) register: Named,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            enqueue: Named::queue("enqueue", include_str!("lua/enqueue.lua")),
            claim: Named::queue("claim", include_str!("lua/claim.lua")),
            settle: Named::queue("settle", include_str!("lua/settle.lua")),
            heartbeat: Named::queue("heartbeat", include_str!("lua/heartbeat.lua")),
            handback: Named::queue("release", include_str!("lua/handback.lua")),
            rescue: Named::queue("rescue", include_str!("lua/rescue.lua")),
            hold: Named::queue("hold", include_str!("lua/hold.lua")),
            maintain: Named::queue("maintain", include_str!("lua/maintain.lua")),
            revive: Named::queue("revive", include_str!("lua/revive.lua")),
            purge: Named::queue("purge", include_str!("lua/purge.lua")),
            cancel: Named::queue("cancel", include_str!("lua/cancel.lua")),
            pause: Named::queue("pause", include_str!("lua/pause.lua")),
            prune: Named::queue("prune", include_str!("lua/prune.lua")),
            remove: Named::queue("remove", include_str!("lua/remove.lua")),
            list: Named::queue("list", include_str!("lua/list.lua")),
            depend: Named::queue("depend", include_str!("lua/depend.lua")),
            unblock: Named::queue("unblock", include_str!("lua/unblock.lua")),
            timing: Named::queue("timing", include_str!("lua/timing.lua")),
            register: Named::plain("register", include_str!("lua/register.lua")),
        }
    }

    pub(crate) fn all(&self) -> [&Named; 19] {
        [
            &self.enqueue,
            &self.claim,
            &self.settle,
            &self.heartbeat,
            &self.handback,
            &self.rescue,
            &self.hold,
            &self.maintain,
            &self.revive,
            &self.purge,
            &self.cancel,
            &self.pause,
            &self.prune,
            &self.remove,
            &self.list,
            &self.depend,
            &self.unblock,
            &self.timing,
            &self.register,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every hash write and integer argument of a per-queue script goes through the
    /// prelude's `hset`, `hincrby` and `int`, which pass integral numbers as digits (Redis
    /// 7.2.0 to 7.2.4 would pass 1700000000000 as "1.7e+12"): a raw call added later fails
    /// here.
    #[test]
    fn per_queue_scripts_write_numbers_as_digits() {
        let scripts = Scripts::new();
        let helpers_end = PRELUDE
            .find("-- Repeated calls")
            .expect("the prelude's helpers come first");
        for named in scripts.all().into_iter().filter(|n| n.per_queue) {
            let body = &named.source[helpers_end..];
            for raw in [
                "redis.call('HSET'",
                "redis.call('HINCRBY'",
                "redis.call('INCRBY'",
            ] {
                assert!(
                    !body.contains(raw),
                    "{} calls {raw}) directly: use the prelude's helper",
                    named.name
                );
            }
            for line in body
                .lines()
                .filter(|l| l.contains("'PX'") || l.contains("PEXPIRE"))
            {
                assert!(
                    line.contains("int("),
                    "{}: an expiry passed as a Lua number: {line}",
                    named.name
                );
            }
        }
    }
}
