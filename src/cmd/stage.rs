//! `stage serve` and `stage upload`: run the staging server or its upload client,
//! and turn their errors into exit codes. The server is stopped by SIGTERM/SIGINT,
//! which only this layer listens for.

use std::io::Write;

use tracing::{error, warn};

use super::exit::ExitCode;
use crate::cli::{ServeArgs, UploadArgs};
use crate::stage::server::{self, ServeErrorKind};
use crate::stage::upload::{self, UploadErrorKind};
use crate::util::redact::error_chain;
use crate::util::signal::Termination;

/// Runs the staging server until SIGTERM or SIGINT; [`ExitCode::Ok`] after a clean
/// stop, [`ExitCode::Config`] for flags that cannot work, [`ExitCode::LocalIo`] for
/// a store that cannot be used.
pub(crate) async fn serve(args: &ServeArgs) -> ExitCode {
    match server::serve(args, stop_requested(Termination::install())).await {
        Ok(()) => ExitCode::Ok,
        Err(e) => {
            error!("{}", error_chain(&e));
            match e.kind() {
                ServeErrorKind::Config => ExitCode::Config,
                ServeErrorKind::StoreUnusable => ExitCode::LocalIo,
            }
        }
    }
}

/// Runs `stage upload` and prints the resource ids and secrets; the exit code says
/// how it went ([`ExitCode::LocalIo`] when they cannot be printed: the bundles then
/// expire unused).
pub(crate) async fn upload(args: &UploadArgs) -> ExitCode {
    match upload::run(args).await {
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                Ok(()) => ExitCode::Ok,
                Err(_) => ExitCode::LocalIo,
            }
        }
        Err(e) => {
            match e.hint() {
                Some(hint) => error!("{} (hint: {hint})", error_chain(&e)),
                None => error!("{}", error_chain(&e)),
            }
            match e.kind() {
                UploadErrorKind::Usage => ExitCode::Config,
                UploadErrorKind::Server => ExitCode::Fetch,
                UploadErrorKind::Integrity => ExitCode::Integrity,
                UploadErrorKind::LocalIo => ExitCode::LocalIo,
                UploadErrorKind::Internal => ExitCode::Internal,
            }
        }
    }
}

/// Completes with the signal's name when the server is asked to stop; never when
/// the handlers could not be installed.
pub(super) async fn stop_requested(handlers: std::io::Result<Termination>) -> &'static str {
    match handlers {
        Ok(mut handlers) => handlers.recv().await,
        Err(_) => {
            warn!("cannot install signal handlers; stop the server with SIGKILL");
            std::future::pending().await
        }
    }
}
