use std::io::Write;

use spark_localizer::cli::{self, Command, StageCommand};
use spark_localizer::exit::ExitCode;
use spark_localizer::{check, fetch, logging, redact, stage};

/// musl's malloc maps and unmaps every block over 128 KiB (hyper's read
/// buffers, the hasher's buffer): in the static build, mimalloc instead.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Memory freed is given back to the system at once, not 10 ms later: a
/// transfer's chunks come and go faster than that, and an init container's
/// peak RSS is what its memory limit must cover.
#[cfg(target_env = "musl")]
fn tune_allocator() {
    // `mi_option_purge_delay` in mimalloc.h's `mi_option_e` (v2 and v3); the
    // Rust bindings do not name it.
    const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    // SAFETY: sets a global option; mimalloc reads options with atomics.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, 0) };
}

#[cfg(not(target_env = "musl"))]
fn tune_allocator() {}

fn main() {
    tune_allocator();
    let (cli, origins) = match cli::parse() {
        Ok(parsed) => parsed,
        Err(e) => {
            // Usage errors echo what was typed, which may hold a URI with a password.
            let text = redact::scrub(&e.render().to_string());
            if e.use_stderr() {
                let _ = std::io::stderr().write_all(text.as_bytes());
                std::process::exit(ExitCode::Config.code());
            }
            // --help and --version.
            let _ = std::io::stdout().write_all(text.as_bytes());
            std::process::exit(0);
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
            std::process::exit(ExitCode::Internal.code());
        }
    };
    let code = runtime.block_on(async {
        match &cli.command {
            Command::Fetch(args) => fetch::run(args, &origins, cli.log_format).await,
            Command::Check(args) => check::run(args, &origins).await,
            Command::Stage(stage_args) => match &stage_args.command {
                StageCommand::Serve(args) => stage::serve(args).await,
                StageCommand::Upload(args) => stage::upload::run(args).await,
            },
        }
    });
    std::process::exit(code.code());
}
