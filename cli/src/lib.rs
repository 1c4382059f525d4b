//! # fairq-cli
//!
//! The `fairq` command line over every fairq job store: a demo that shows fair-by-key
//! scheduling against a plain FIFO, a burn-down load test, and operator commands (enqueue,
//! work, stats, list, revive, purge, prune). The binary is a thin `main` over [`main_with`];
//! everything it does is in this library so it can be tested.
//!
//! ```
//! use fairq_cli::main_with;
//! // Parsing problems exit with status 2, after one line on stderr.
//! assert_eq!(main_with(["fairq", "list", "--state", "zombie"]), std::process::ExitCode::from(2));
//! ```
#![deny(missing_docs)]
// One function (`exec::isolate`) registers a pre-exec hook, which Rust marks unsafe; it is
// allowed there alone, with its safety argument.
#![deny(unsafe_code)]

mod admin;
pub mod args;
pub mod bench;
mod cleanup;
pub mod demo;
mod error;
mod exec;
pub mod logging;
mod output;
mod printable;
mod progress;
mod prometheus;
pub mod qtest;
mod salvage;
mod scrub;
pub mod serve;
mod signals;
mod stop;
mod store;
mod tally;
pub mod values;
mod work;

use std::process::ExitCode;
use std::sync::Arc;

use clap::error::ErrorKind;
use clap::Parser;

pub use args::{parse_duration, Cli, Command, State};
pub use error::CliError;
pub use exec::ExecCommand;
pub use output::{Format, Output};
pub use store::{ConnectOptions, Store, StoreUrl, DEFAULT_STORE};

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// Runs the command line `args` (program name first) to the end and returns the exit
/// status: 0 on success, 1 when the command failed, 2 when the arguments do not parse.
/// Errors are one line on stderr.
///
/// ```
/// assert_eq!(fairq_cli::main_with(["fairq", "--store", "memory:", "stats"]), std::process::ExitCode::SUCCESS);
/// assert_eq!(fairq_cli::main_with(["fairq", "--store", "nope:", "stats"]), std::process::ExitCode::FAILURE);
/// ```
pub fn main_with<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => return usage_error(err),
    };
    if let Some(store) = &cli.store {
        scrub::remember(store);
    }
    logging::install();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return failure(&CliError::io("starting the async runtime", e)),
    };
    let format = if cli.json {
        Format::Json
    } else {
        Format::Table
    };
    let mut out = Output::stdout(format);
    let result = runtime.block_on(execute(cli, &mut out));
    // Background tasks (a store's listener, a worker being torn down) must not hold the
    // exit.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => failure(&err),
    }
}

/// Prints help and version as clap does; any other parse problem as one line.
fn usage_error(err: clap::Error) -> ExitCode {
    match err.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let printed = err.print();
            if err.use_stderr() {
                ExitCode::from(2)
            } else if let Err(e) = printed
                && e.kind() != std::io::ErrorKind::BrokenPipe
            {
                // Help or a version asked for and not written (a full disk) is a failure, as
                // any other output that cannot be written; a reader that went away is not.
                output_error_line(&format!("error: writing to standard output: {e}"));
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        _ => {
            // The first paragraph (the message and, say, the missing arguments or the
            // possible values) and clap's tips ("a similar subcommand exists: 'stats'"),
            // without the usage and the pointer to --help.
            let rendered = err.render().to_string();
            let mut lines = rendered.lines().map(str::trim);
            let first: Vec<&str> = lines
                .by_ref()
                .skip_while(|l| l.is_empty())
                .take_while(|l| !l.is_empty())
                .collect();
            let tips: Vec<&str> = lines.filter(|l| l.starts_with("tip:")).collect();
            let mut line = if first.is_empty() {
                "error: invalid arguments".to_string()
            } else {
                first.join(" ")
            };
            if !tips.is_empty() {
                line = format!("{line} ({})", tips.join("; "));
            }
            output_error_line(&line);
            ExitCode::from(2)
        }
    }
}

fn failure(err: &CliError) -> ExitCode {
    output_error_line(&format!("error: {}", err.one_line()));
    if let Some(hint) = err.hint() {
        output_error_line(&format!("hint: {hint}"));
    }
    ExitCode::FAILURE
}

/// Writes one line to stderr, credentials hidden and control characters escaped (it may
/// quote queue names or a store's message), ignoring a closed stream.
pub(crate) fn output_error_line(line: &str) {
    write_error_text(&printable::printable(&scrub::clean(line)));
}

/// Writes `text` and a line break to stderr as given, ignoring a closed or full stream: for
/// text already scrubbed, or with nothing in it to hide that scrubbing could spoil (a
/// generated token).
pub(crate) fn write_error_text(text: &str) {
    use std::io::Write;
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{text}");
}

/// Runs a parsed command line, printing results to `out`.
///
/// ```
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// use clap::Parser;
/// use fairq_cli::{execute, Cli, Format, Output};
/// let cli = Cli::try_parse_from(["fairq", "--store", "memory:", "stats"]).unwrap();
/// let mut out = Output::buffer(Format::Table);
/// execute(cli, &mut out).await.unwrap();
/// assert_eq!(out.contents(), "no jobs\n");
/// # });
/// ```
pub async fn execute(cli: Cli, out: &mut Output) -> Result<(), CliError> {
    use store::Access::{Create, Existing, ReadOnly};
    // The commands that run until stopped (demo, bench, work, serve, qtest) take signals
    // as a clean stop, listening from their start; the others keep the default, so Ctrl-C
    // or SIGTERM ends them at once wherever they are (in a read of stdin, say).
    if let Some(store) = &cli.store {
        scrub::remember(store);
    }
    let options = ConnectOptions::default();
    let url = |default: &str| -> Result<StoreUrl, CliError> {
        Ok(cli
            .store
            .as_deref()
            .unwrap_or(default)
            .parse::<StoreUrl>()?)
    };
    match &cli.command {
        Command::Demo(args) => {
            let mut signals = signals::Signals::listen()?;
            let config = demo::DemoConfig::from(args);
            if let Some(problem) = config.problem() {
                return Err(CliError::Usage(problem));
            }
            let (url, _scratch) = match &cli.store {
                Some(given) => (given.parse::<StoreUrl>()?, None),
                None => {
                    let scratch = tempfile::Builder::new()
                        .prefix("fairq-demo-")
                        .tempdir()
                        .map_err(|e| CliError::io("creating a temporary folder", e))?;
                    (
                        StoreUrl::File {
                            path: scratch.path().to_path_buf(),
                            keep_succeeded: None,
                        },
                        Some(scratch),
                    )
                }
            };
            let store = store::open(&url, &options, Create).await?;
            // A shared store keeps nothing of the demo; a scratch one disappears anyway.
            let cleanup = cli.store.is_some() && !store.is_ephemeral();
            // On a signal the demo stops its workers and cleans up before it returns; the
            // scratch folder is removed on the way out.
            let name = url.to_string();
            let (stopper, stop) = stop::channel();
            let run =
                demo::run_demo_until(Arc::new(store), &name, &config, cli.quiet, cleanup, stop);
            let report = stop::on_signal(run, stopper, &mut signals).await?;
            demo::print(&report, out)?;
            if report.verdict.fair_wins {
                Ok(())
            } else {
                Err(CliError::Verdict(
                    "fair scheduling did not beat FIFO for the light tenants".into(),
                ))
            }
        }
        Command::Bench(args) => {
            let mut signals = signals::Signals::listen()?;
            let config = bench::BenchConfig::from(args);
            if let Some(problem) = config.problem() {
                return Err(CliError::Usage(problem.to_string()));
            }
            let url = url(DEFAULT_STORE)?;
            let pool = config.concurrency.saturating_add(4).max(options.pool_size);
            let store = store::open(&url, &options.clone().pool_size(pool), Create).await?;
            let cleanup = !args.keep && !store.is_ephemeral();
            // On a signal the bench stops its worker and cleans up before it returns.
            let name = url.to_string();
            let (stopper, stop) = stop::channel();
            let run =
                bench::run_bench_until(Arc::new(store), &name, &config, cli.quiet, cleanup, stop);
            let report = stop::on_signal(run, stopper, &mut signals).await?;
            bench::print(&report, out)
        }
        // Both check their input before they open the store, which they may create: a typo
        // in the input never leaves a new, empty store behind.
        Command::Enqueue(args) => {
            let job = admin::build_job(args, std::io::stdin().lock())?;
            let store = store::open(&url(DEFAULT_STORE)?, &options, Create).await?;
            admin::enqueue(&store, args, job, out).await
        }
        Command::Work(args) => {
            let mut signals = signals::Signals::listen()?;
            let command = work::command(args)?;
            let store = Arc::new(store::open(&url(DEFAULT_STORE)?, &options, Create).await?);
            let dashboard = match args.serve {
                Some(addr) => {
                    let given = cli.store.as_deref().unwrap_or(DEFAULT_STORE);
                    Some(serve::start(Arc::clone(&store), given, addr, &args.dashboard).await?)
                }
                None => None,
            };
            let worked = work::work(store, args, command, &mut signals, out).await;
            if let Some(dashboard) = dashboard {
                dashboard.stop().await;
            }
            worked
        }
        Command::Stats(args) => {
            let store = store::open(&url(DEFAULT_STORE)?, &options, ReadOnly).await?;
            store::warn_about_server(&store).await;
            admin::stats(&store, args, output::now_millis(), out).await
        }
        Command::List(args) => {
            let store = store::open(&url(DEFAULT_STORE)?, &options, ReadOnly).await?;
            admin::list(&store, args, output::now_millis(), out).await
        }
        Command::Revive(args) => {
            let store = store::open(&url(DEFAULT_STORE)?, &options, Existing).await?;
            admin::revive(&store, args, out).await
        }
        Command::Purge(args) => {
            let store = store::open(&url(DEFAULT_STORE)?, &options, Existing).await?;
            admin::purge(&store, args, out).await
        }
        Command::Prune(args) => {
            let store = store::open(&url(DEFAULT_STORE)?, &options, Existing).await?;
            admin::prune(&store, args, out).await
        }
        Command::Queue(args) => {
            let store = store::open(&url(DEFAULT_STORE)?, &options, Existing).await?;
            admin::queue(&store, args, out).await
        }
        Command::Vacuum => {
            let store = store::open(&url(DEFAULT_STORE)?, &options, Existing).await?;
            admin::vacuum(&store, out).await
        }
        Command::Salvage(args) => salvage::salvage(&url(DEFAULT_STORE)?, args, out),
        Command::Serve(args) => {
            let mut signals = signals::Signals::listen()?;
            let given = cli.store.as_deref().unwrap_or(DEFAULT_STORE);
            let store = store::open(&url(DEFAULT_STORE)?, &options, Existing).await?;
            serve::serve(store, given, args, &mut signals, out).await
        }
        Command::Qtest(args) => {
            let mut signals = signals::Signals::listen()?;
            // The load runs on threads of its own, which the runtime does not wait for: on a
            // signal they are asked to stop, and awaited so that the run removes its scratch
            // folder. A second signal stops waiting.
            let (test, quiet) = (args.test.clone(), cli.quiet);
            let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let asked = Arc::clone(&stop);
            let mut run =
                tokio::task::spawn_blocking(move || qtest::run_until(&test, quiet, &asked));
            let joined = |joined: Result<_, tokio::task::JoinError>| {
                joined.map_err(|e| CliError::io("running the load test", std::io::Error::other(e)))
            };
            let report = tokio::select! {
                report = &mut run => joined(report)??,
                signal = signals.recv() => {
                    let signal = signal?;
                    stop.store(true, std::sync::atomic::Ordering::Relaxed);
                    tokio::select! {
                        ended = &mut run => { let _ = joined(ended)?; }
                        second = signals.recv() => { second?; }
                    }
                    return Err(CliError::Stopped(signal));
                }
            };
            qtest::print(&report, out)
        }
    }
}
