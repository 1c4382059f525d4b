//! Progress bars on stderr (drawn only when stderr is a terminal).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// A bar counting `total` jobs, labelled `prefix`; hidden when `quiet`.
pub(crate) fn bar(total: u64, prefix: &str, quiet: bool) -> ProgressBar {
    let target = if quiet {
        ProgressDrawTarget::hidden()
    } else {
        ProgressDrawTarget::stderr()
    };
    let bar = ProgressBar::with_draw_target(Some(total), target);
    let style = ProgressStyle::with_template(
        "{prefix:>14} [{bar:36}] {pos:>6}/{len:<6} {rate:>12} {elapsed:>4}",
    )
    .map(|s| {
        s.progress_chars("=> ").with_key(
            "rate",
            |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.0} jobs/s", state.per_sec());
            },
        )
    })
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix(prefix.to_string());
    bar
}
