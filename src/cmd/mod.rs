//! The commands: parse the command line, set up logging and the runtime, run one
//! subcommand and turn its outcome into the process's exit code. The only layer
//! that knows exit codes and the process.

use std::io::Write;

use crate::cli::{self, Command, MirrorCommand, StageCommand};
use crate::util::redact;

use self::exit::ExitCode;

pub(crate) mod bundle;
pub(crate) mod check;
mod deadline;
mod doctor;
pub(crate) mod exit;
pub(crate) mod fetch;
pub(crate) mod logging;
pub(crate) mod mirror;
pub(crate) mod oci;
pub(crate) mod resolve;
pub(crate) mod stage;

/// Runs spark-localizer with this process's arguments and environment; returns the
/// process exit code (the exit-code table is `cmd/exit.rs`, documented in
/// docs/contract.md).
pub fn main() -> i32 {
    deadline::start();
    let (cli, origins) = match cli::parse() {
        Ok(parsed) => parsed,
        Err(e) => {
            // Usage errors echo what was typed, which may hold a URI with a password.
            let text = redact::scrub(&e.render().to_string());
            if e.use_stderr() {
                let _ = std::io::stderr().write_all(text.as_bytes());
                return ExitCode::Config.code();
            }
            // --help and --version.
            let _ = std::io::stdout().write_all(text.as_bytes());
            return 0;
        }
    };
    logging::init(cli.verbose, cli.quiet, cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "error: cannot start the async runtime: {e}"
            );
            return ExitCode::Internal.code();
        }
    };
    // One runtime for the whole run: the HTTP clients can share their pools.
    crate::net::share_clients();
    let code = runtime.block_on(async {
        match &cli.command {
            Command::Fetch(args) => fetch::run(args, &origins, cli.log_format).await,
            Command::Check(args) => check::run(args, &origins).await,
            Command::Resolve(args) => resolve::run(args, &origins).await,
            Command::Bundle(args) => bundle::run(args, &origins, cli.log_format).await,
            Command::Stage(stage_args) => match &stage_args.command {
                StageCommand::Serve(args) => stage::serve(args).await,
                StageCommand::Upload(args) => stage::upload(args).await,
            },
            Command::Mirror(mirror_args) => match &mirror_args.command {
                MirrorCommand::Serve(args) => mirror::serve(args, &origins).await,
            },
        }
    });
    // A task stopped by the deadline or a signal may still hold a thread:
    // the process exits without waiting for it.
    runtime.shutdown_background();
    code.code()
}
