//! `stage serve` and `stage upload`: run the staging server or its upload client,
//! and turn their errors into exit codes. The server is stopped by SIGTERM/SIGINT,
//! which only this layer listens for.

use tracing::{error, warn};

use super::exit::ExitCode;
use crate::cli::{ServeArgs, UploadArgs};
use crate::stage::server::{self, ServeErrorKind};
use crate::util::redact::error_chain;
use crate::util::signal;

/// Runs the staging server until SIGTERM or SIGINT; [`ExitCode::Ok`] after a clean
/// stop, [`ExitCode::Config`] for flags that cannot work, [`ExitCode::LocalIo`] for
/// a store that cannot be used.
pub(crate) async fn serve(args: &ServeArgs) -> ExitCode {
    match server::serve(args, stop_requested()).await {
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

/// Runs `stage upload`; the exit code says how it went.
pub(crate) async fn upload(args: &UploadArgs) -> ExitCode {
    crate::stage::upload::run(args).await
}

/// Completes with the signal's name when the server is asked to stop; never when
/// the handlers cannot be installed.
async fn stop_requested() -> &'static str {
    match signal::terminated().await {
        Ok(name) => name,
        Err(_) => {
            warn!("cannot install signal handlers; stop the server with SIGKILL");
            std::future::pending().await
        }
    }
}
