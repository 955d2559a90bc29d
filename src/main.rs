use std::io::Write;

use spark_localizer::cli::{self, Command, StageCommand};
use spark_localizer::exit::ExitCode;
use spark_localizer::{check, fetch, logging, redact, stage};

fn main() {
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
