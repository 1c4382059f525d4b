//! The Lua scripts: every state change of a queue is one of them, run atomically by Redis.
//!
//! Each script is the shared prelude (key helpers, the fair-round push, failure handling)
//! followed by its body. The `redis` crate's [`Script`] calls them by SHA1 (`EVALSHA`) and
//! loads them again when the server answers `NOSCRIPT` (after a restart or `SCRIPT FLUSH`).

use redis::Script;

const PRELUDE: &str = include_str!("lua/prelude.lua");

/// One named script.
pub(crate) struct Named {
    pub(crate) name: &'static str,
    pub(crate) script: Script,
    pub(crate) source: String,
}

impl Named {
    fn new(name: &'static str, body: &str) -> Self {
        let source = format!("{PRELUDE}\n{body}");
        Named {
            name,
            script: Script::new(&source),
            source,
        }
    }
}

/// Every script, compiled into the crate.
pub(crate) struct Scripts {
    pub(crate) enqueue: Named,
    pub(crate) claim: Named,
    pub(crate) complete: Named,
    pub(crate) fail: Named,
    pub(crate) heartbeat: Named,
    pub(crate) rescue: Named,
    pub(crate) revive: Named,
    pub(crate) purge: Named,
    pub(crate) prune: Named,
    pub(crate) depend: Named,
    pub(crate) release: Named,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            enqueue: Named::new("enqueue", include_str!("lua/enqueue.lua")),
            claim: Named::new("claim", include_str!("lua/claim.lua")),
            complete: Named::new("complete", include_str!("lua/complete.lua")),
            fail: Named::new("fail", include_str!("lua/fail.lua")),
            heartbeat: Named::new("heartbeat", include_str!("lua/heartbeat.lua")),
            rescue: Named::new("rescue", include_str!("lua/rescue.lua")),
            revive: Named::new("revive", include_str!("lua/revive.lua")),
            purge: Named::new("purge", include_str!("lua/purge.lua")),
            prune: Named::new("prune", include_str!("lua/prune.lua")),
            depend: Named::new("depend", include_str!("lua/depend.lua")),
            release: Named::new("release", include_str!("lua/release.lua")),
        }
    }

    pub(crate) fn all(&self) -> [&Named; 11] {
        [
            &self.enqueue,
            &self.claim,
            &self.complete,
            &self.fail,
            &self.heartbeat,
            &self.rescue,
            &self.revive,
            &self.purge,
            &self.prune,
            &self.depend,
            &self.release,
        ]
    }
}
