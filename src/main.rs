use spark_localizer::cli::{self, Command};
use spark_localizer::exit::ExitCode;
use spark_localizer::{check, fetch, logging, redact};

fn main() {
    // An empty SPARK_LOCALIZER_* variable means "not set" (as an unset flag).
    for (name, value) in std::env::vars_os() {
        if value.is_empty() && name.to_string_lossy().starts_with("SPARK_LOCALIZER_") {
            std::env::remove_var(name);
        }
    }
    // Learn the secrets in URIs before anything can echo them (usage errors do).
    let env_values = std::env::vars_os()
        .filter(|(name, _)| name.to_string_lossy().starts_with("SPARK_LOCALIZER_"))
        .map(|(_, value)| value);
    for value in std::env::args_os().skip(1).chain(env_values) {
        let value = value.to_string_lossy();
        // `--jars=URI,URI` carries its value after the first '='.
        let value = match value.strip_prefix("--").and_then(|v| v.split_once('=')) {
            Some((_, v)) => v,
            None => &*value,
        };
        for item in value.split(',').chain([value]) {
            redact::register_url_secrets(item.trim());
        }
    }
    let (cli, origins) = match cli::parse_from(std::env::args_os()) {
        Ok(parsed) => parsed,
        Err(e) => {
            // Usage errors echo what was typed, which may hold a URI with a password.
            let text = redact::scrub(&e.render().to_string());
            if e.use_stderr() {
                eprint!("{text}");
                std::process::exit(ExitCode::Config.code());
            }
            // --help and --version.
            print!("{text}");
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
