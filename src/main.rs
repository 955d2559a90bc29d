use spark_localizer::cli::{self, Command};
use spark_localizer::exit::ExitCode;
use spark_localizer::{check, fetch, logging};

fn main() {
    let (cli, origins) = match cli::parse_from(std::env::args_os()) {
        Ok(parsed) => parsed,
        Err(e) => {
            // --help and --version exit 0; usage errors exit 2 (a configuration error).
            let _ = e.print();
            std::process::exit(if e.use_stderr() {
                ExitCode::Config.code()
            } else {
                0
            });
        }
    };
    logging::init(cli.verbose, cli.quiet, cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(ExitCode::Internal.code());
        }
    };
    let code = runtime.block_on(async {
        match &cli.command {
            Command::Fetch(args) => fetch::run(args, &origins, cli.log_format).await,
            Command::Check(args) => check::run(args, &origins).await,
        }
    });
    std::process::exit(code.code());
}
