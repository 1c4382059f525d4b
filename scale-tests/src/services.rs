//! What the tests need from the machine, and where its programs are.

use std::path::PathBuf;
use std::process::Command;

use crate::cmd::run;
use crate::HarnessError;

/// Something a scale test needs besides root and `ip`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// PostgreSQL's server programs (`initdb`, `postgres`) and a `postgres` user to run them.
    Postgres,
    /// `redis-server` and `redis-cli`.
    Redis,
}

/// Finds `name` on `PATH`, then in PostgreSQL's versioned folders
/// (`/usr/lib/postgresql/VERSION/bin`, newest first), where Debian installs the server
/// programs without putting them on `PATH`.
pub(crate) fn find_program(name: &str) -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut versioned: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter_map(|e| {
                    let version = e.file_name().to_str()?.parse::<u32>().ok()?;
                    Some((version, e.path().join("bin")))
                })
                .collect()
        })
        .unwrap_or_default();
    versioned.sort_by_key(|v| std::cmp::Reverse(v.0));
    on_path
        .into_iter()
        .chain(versioned.into_iter().map(|(_, dir)| dir))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The user and group ids of `postgres` (the server refuses to run as root).
pub(crate) fn postgres_user() -> Result<(u32, u32), HarnessError> {
    let id = |flag: &str| -> Result<u32, HarnessError> {
        run(Command::new("id").args([flag, "postgres"]))?
            .trim()
            .parse()
            .map_err(|_| HarnessError::Other("`id` printed no number".into()))
    };
    Ok((id("-u")?, id("-g")?))
}

/// Why the machine cannot run a test that needs `needs`, if it cannot.
fn missing(needs: &[Needs]) -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("the scale tests make network namespaces and need root".into());
    }
    if find_program("ip").is_none() {
        return Some("`ip` (iproute2) is not installed".into());
    }
    for need in needs {
        let programs: &[&str] = match need {
            Needs::Postgres => &["initdb", "postgres"],
            Needs::Redis => &["redis-server", "redis-cli"],
        };
        for program in programs {
            if find_program(program).is_none() {
                return Some(format!("`{program}` is not installed"));
            }
        }
        if *need == Needs::Postgres && postgres_user().is_err() {
            return Some("there is no `postgres` user to run PostgreSQL as".into());
        }
    }
    None
}

/// True when a test that needs `needs` can run here. When it cannot, the test is skipped
/// with a note on stderr, unless `FAIRQ_REQUIRE_SERVICES=1` (as in CI), which makes it a
/// failure instead.
///
/// ```no_run
/// use fairq_scale_tests::{skip_or_fail, Needs};
/// if !skip_or_fail(&[Needs::Postgres]) {
///     return;
/// }
/// ```
pub fn skip_or_fail(needs: &[Needs]) -> bool {
    let Some(why) = missing(needs) else {
        return true;
    };
    if fairq::services::required() {
        panic!("FAIRQ_REQUIRE_SERVICES=1 but {why}");
    }
    eprintln!("skipped: {why}");
    false
}

/// A whole number from the environment variable `name`, or `default` when it is unset.
/// The tests' sizes are knobs like this, so a larger run needs no code change.
///
/// ```
/// assert_eq!(fairq_scale_tests::knob("FAIRQ_SCALE_NO_SUCH_KNOB", 7), 7);
/// ```
///
/// # Panics
///
/// When the variable is set but not a whole number (a typo should not run the default).
pub fn knob(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(value) => value
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?} is not a whole number")),
        Err(_) => default,
    }
}
