//! `fairq serve` and `fairq work --serve`: the web dashboard and HTTP API of `fairq-web` over
//! the store of `--store`.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use fairq_web::{Config, Server, WebError};
use fairq_worker::Inspect;

use crate::error::CliError;
use crate::output::Output;
use crate::signals::Signals;
use crate::store::Store;
use crate::values::parse_duration;

/// Settings shared by `fairq serve` and `fairq work --serve`.
#[derive(Debug, Clone, Args)]
pub struct DashboardArgs {
    /// Bearer token for the dashboard: required for every request once set, and always for
    /// actions (at least 16 characters). Without one, a loopback dashboard lets local
    /// readers in and prints a generated token for actions.
    #[arg(
        long,
        env = "FAIRQ_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// How often the dashboard samples the store for counts and throughput.
    #[arg(long, default_value = "2s", value_parser = parse_duration, value_name = "DURATION")]
    pub refresh: Duration,
}

/// `fairq serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on; anything but loopback needs --token.
    #[arg(long, default_value = "127.0.0.1:7171", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Dashboard settings.
    #[command(flatten)]
    pub dashboard: DashboardArgs,
}

/// A dashboard running next to another command; stops when dropped or with
/// [`Dashboard::stop`].
pub(crate) struct Dashboard {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), WebError>>,
}

impl Dashboard {
    /// Stops serving and waits (briefly) for requests in flight.
    pub(crate) async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut self.task).await;
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn web_error(err: WebError) -> CliError {
    match err {
        WebError::Bind { addr, source } => CliError::io(format!("listening on {addr}"), source),
        WebError::Serve(source) => CliError::io("serving the dashboard", source),
        other => CliError::Usage(other.to_string()),
    }
}

/// Binds the dashboard for `store` (named `url` on the command line), tells the operator
/// where it is on stderr, and starts serving in the background.
pub(crate) async fn start<B: Inspect>(
    store: B,
    url: &str,
    listen: SocketAddr,
    args: &DashboardArgs,
) -> Result<Dashboard, CliError> {
    let mut config = Config::new(url).listen(listen).refresh(args.refresh);
    if let Some(token) = &args.token {
        config = config.token(token.clone());
    }
    let server = Server::bind(store, config).await.map_err(web_error)?;
    let mut note = crate::printable::printable(&crate::scrub::clean(&format!(
        "fairq dashboard on {} for {}",
        server.url(),
        fairq_web::store_label(url)
    )))
    .into_owned();
    // The token is fresh and random, with nothing to hide from the operator it is for: it
    // is kept out of the scrubbing, which could spoil it (a short store password that
    // happens to be part of it).
    if let Some(token) = server.generated_token() {
        note.push_str(&format!(
            "\n  reading is open to this machine; actions need this token (sign in on the page): {token}"
        ));
    }
    // One write, so the token line follows at once; a closed or full stderr is no reason
    // to stop.
    crate::write_error_text(&note);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    Ok(Dashboard {
        stop: Some(stop),
        task,
    })
}

/// `fairq serve`: serves until SIGTERM or Ctrl-C.
pub(crate) async fn serve(
    store: Store,
    url: &str,
    args: &ServeArgs,
    signals: &mut Signals,
    out: &mut Output,
) -> Result<(), CliError> {
    let mut dashboard = start(store, url, args.listen, &args.dashboard).await?;
    tokio::select! {
        signal = signals.recv() => {
            let signal = signal?;
            dashboard.stop().await;
            out.line(format!("stopped by {signal}"))
        }
        served = &mut dashboard.task => {
            dashboard.stop = None;
            match served {
                Ok(result) => result.map_err(web_error),
                Err(e) => Err(CliError::io("serving the dashboard", std::io::Error::other(e))),
            }
        }
    }
}
