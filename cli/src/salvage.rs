//! `fairq salvage`: rebuilds a file store that refuses to open because of damage into a new
//! folder from what is intact, and says what was lost. The damaged folder is not changed.

use std::path::Path;

use fairq::file::{FileBackend, FileOptions, SalvageReport};
use fairq::StoreUrl;
use fairq_worker::BackendError;
use serde::Serialize;

use crate::args::SalvageArgs;
use crate::error::CliError;
use crate::output::Output;

/// What `--json` prints. Paths are text, lossy where a name is not UTF-8 (JSON holds only
/// text: the salvage is done by then, and its report must not fail on a folder's name).
#[derive(Serialize)]
struct Salvaged<'a> {
    action: &'static str,
    from: String,
    to: String,
    items: u64,
    jobs: u64,
    queues: u64,
    lost_anything: bool,
    damage: Vec<Stretch>,
    unreadable_frames: &'a [(u64, String)],
    lost_jobs: Vec<u64>,
}

#[derive(Serialize)]
struct Stretch {
    path: String,
    offset: u64,
    len: u64,
    reason: String,
    torn_tail: bool,
}

/// Salvages the file store `url` names into `args.to`.
pub(crate) fn salvage(
    url: &StoreUrl,
    args: &SalvageArgs,
    out: &mut Output,
) -> Result<(), CliError> {
    let StoreUrl::File { path, .. } = url else {
        return Err(CliError::Usage(
            "salvage rebuilds a file store (--store file:PATH); PostgreSQL and Redis keep \
             their own data safe"
                .into(),
        ));
    };
    if is_inside(&args.to, path) {
        return Err(CliError::Usage(format!(
            "--to {} is inside the damaged store {}, which salvage does not change: name a \
             folder outside it",
            args.to.display(),
            path.display()
        )));
    }
    let report = FileBackend::salvage(path, &args.to, FileOptions::default())
        .map_err(|e| CliError::Store(BackendError::from(e)))?;
    print(path, &args.to, &report, out)
}

/// True when `to` names `folder` or a path inside it, once both are resolved (symbolic
/// links, `.` and `..`); the part of `to` that does not exist yet is resolved as written.
/// False when `folder` cannot be resolved (opening it then says why).
fn is_inside(to: &Path, folder: &Path) -> bool {
    use std::path::Component;
    let Ok(folder) = folder.canonicalize() else {
        return false;
    };
    let to = if to.is_absolute() {
        to.to_path_buf()
    } else {
        match std::env::current_dir() {
            Ok(dir) => dir.join(to),
            Err(_) => return false,
        }
    };
    // The longest part of `to` that exists, resolved, then the rest as written.
    let parts: Vec<Component> = to.components().collect();
    let Some((mut resolved, rest)) = (1..=parts.len()).rev().find_map(|n| {
        let existing: std::path::PathBuf = parts[..n].iter().collect();
        existing.canonicalize().ok().map(|r| (r, &parts[n..]))
    }) else {
        return false;
    };
    for part in rest {
        match part {
            Component::ParentDir => {
                resolved.pop();
            }
            Component::Normal(name) => resolved.push(name),
            _ => {}
        }
    }
    resolved.starts_with(&folder)
}

fn print(from: &Path, to: &Path, report: &SalvageReport, out: &mut Output) -> Result<(), CliError> {
    if out.is_json() {
        return out.json(&Salvaged {
            action: "salvaged",
            from: from.to_string_lossy().into_owned(),
            to: to.to_string_lossy().into_owned(),
            items: report.items,
            jobs: report.jobs,
            queues: report.queues,
            lost_anything: report.lost_anything(),
            damage: report
                .damage
                .iter()
                .map(|d| Stretch {
                    path: d.path.to_string_lossy().into_owned(),
                    offset: d.offset,
                    len: d.len,
                    reason: d.reason.clone(),
                    torn_tail: d.torn_tail,
                })
                .collect(),
            unreadable_frames: &report.unreadable_frames,
            lost_jobs: report.lost_jobs.iter().map(|id| id.0).collect(),
        });
    }
    out.line(format!(
        "salvaged {} and {} from {} of {} into {}",
        count(report.jobs, "job"),
        count(report.queues, "queue"),
        count(report.items, "intact record"),
        from.display(),
        to.display()
    ))?;
    for d in &report.damage {
        let what = if d.torn_tail {
            "the remains of an interrupted write (a crash leaves them; nothing acknowledged)"
        } else {
            "unreadable"
        };
        if d.len == 0 {
            out.line(format!("lost: {} ({})", d.path.display(), d.reason))?;
        } else {
            out.line(format!(
                "{}: {} bytes at offset {} of {} ({})",
                if d.torn_tail { "cut" } else { "lost" },
                d.len,
                d.offset,
                d.path.display(),
                format_args!("{what}: {}", d.reason)
            ))?;
        }
    }
    for (item, reason) in &report.unreadable_frames {
        out.line(format!(
            "lost: journal item {item} does not decode ({reason})"
        ))?;
    }
    for id in &report.lost_jobs {
        out.line(format!(
            "lost: job {id} (its later progress survived, its record and payload did not)"
        ))?;
    }
    if report.lost_anything() {
        out.line(
            "jobs whose last change was lost come back as they were before it (they may run \
             again); check them before starting workers on the new folder",
        )?;
    } else {
        out.line("nothing was lost")?;
    }
    Ok(())
}

/// "1 job", "2 jobs".
fn count(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Command;
    use crate::output::Format;
    use clap::Parser;

    fn parse(argv: &[&str]) -> (StoreUrl, SalvageArgs) {
        let cli = crate::Cli::try_parse_from(argv).unwrap();
        let Command::Salvage(args) = cli.command else {
            unreachable!()
        };
        (cli.store.unwrap().parse().unwrap(), args)
    }

    #[test]
    fn a_damaged_store_is_rebuilt_and_the_loss_printed() {
        let old = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            use fairq_worker::{Backend, NewJob};
            let store = FileBackend::open(old.path(), FileOptions::default()).unwrap();
            for i in 0..20u8 {
                store
                    .enqueue(NewJob::new("mail", "k", vec![i; 100]))
                    .await
                    .unwrap();
            }
            store.close().unwrap();
        });
        // A flipped byte in the middle of the journal: opening refuses.
        let seg = std::fs::read_dir(old.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "seg"))
            .unwrap();
        let mut bytes = std::fs::read(&seg).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 0x08;
        std::fs::write(&seg, bytes).unwrap();
        assert!(FileBackend::open(old.path(), FileOptions::default()).is_err());

        let new = tempfile::tempdir().unwrap();
        let store = format!("file:{}", old.path().display());
        let to = new.path().join("rebuilt");
        let to_arg = to.display().to_string();
        let (url, args) = parse(&["fairq", "--store", &store, "salvage", "--to", &to_arg]);
        let mut out = Output::buffer(Format::Table);
        salvage(&url, &args, &mut out).unwrap();
        let text = out.contents();
        assert!(
            text.starts_with("salvaged 19 jobs and 1 queue from 19 intact records"),
            "{text}"
        );
        assert!(text.contains("lost: "), "{text}");
        assert!(text.contains(&seg.display().to_string()), "{text}");
        assert!(text.contains("may run again"), "{text}");
        // The new folder opens, with the 19 intact jobs.
        let rebuilt = FileBackend::open(&to, FileOptions::default()).unwrap();
        let listed = rt.block_on(async {
            use fairq_worker::{Backend, ListFilter};
            rebuilt.list(ListFilter::default()).await.unwrap().len()
        });
        assert_eq!(listed, 19);
        rebuilt.close().unwrap();

        // Again into the same folder: refused, nothing changed.
        let mut out = Output::buffer(Format::Json);
        let err = salvage(&url, &args, &mut out).unwrap_err();
        assert!(err.to_string().contains("not empty"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_folder_named_in_bytes_that_are_not_utf8_still_gets_its_json_report() {
        use std::os::unix::ffi::OsStrExt;
        let old = tempfile::tempdir().unwrap();
        FileBackend::open(old.path(), FileOptions::default())
            .unwrap()
            .close()
            .unwrap();
        let new = tempfile::tempdir().unwrap();
        let to = new
            .path()
            .join(std::ffi::OsStr::from_bytes(b"rebuilt-\xff"));
        let url: StoreUrl = format!("file:{}", old.path().display()).parse().unwrap();
        let args = SalvageArgs { to: to.clone() };
        let mut out = Output::buffer(Format::Json);
        salvage(&url, &args, &mut out).unwrap();
        let printed: serde_json::Value = serde_json::from_str(&out.contents()).unwrap();
        assert!(
            printed["to"]
                .as_str()
                .unwrap()
                .ends_with("rebuilt-\u{FFFD}"),
            "{printed}"
        );
        assert!(to.is_dir(), "the salvage was done");
    }

    /// The damaged folder is not changed: a new folder inside it (however the path names
    /// it) is refused before anything is created.
    #[test]
    fn a_new_folder_inside_the_damaged_one_is_refused_and_nothing_is_created() {
        let old = tempfile::tempdir().unwrap();
        FileBackend::open(old.path(), FileOptions::default())
            .unwrap()
            .close()
            .unwrap();
        let before: Vec<_> = std::fs::read_dir(old.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        let url: StoreUrl = format!("file:{}", old.path().display()).parse().unwrap();
        for to in [
            old.path().join("rebuilt"),
            old.path().join("a/b/rebuilt"),
            old.path().join("missing/../rebuilt"),
            old.path().join("./rebuilt/."),
        ] {
            let args = SalvageArgs { to: to.clone() };
            let mut out = Output::buffer(Format::Table);
            let err = salvage(&url, &args, &mut out).unwrap_err();
            assert!(
                matches!(err, CliError::Usage(_)),
                "{}: {err:?}",
                to.display()
            );
            assert!(err.to_string().contains("inside"), "{err}");
            let after: Vec<_> = std::fs::read_dir(old.path())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(after, before, "{}", to.display());
        }
    }

    #[test]
    fn only_file_stores_are_salvaged() {
        let (url, args) = parse(&["fairq", "--store", "memory:", "salvage", "--to", "/tmp/x"]);
        let mut out = Output::buffer(Format::Table);
        let err = salvage(&url, &args, &mut out).unwrap_err();
        assert!(matches!(err, CliError::Usage(_)), "{err:?}");
        assert!(out.contents().is_empty());
    }
}
