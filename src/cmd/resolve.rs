//! `spark-localizer resolve`: resolve `--packages` once, download every jar to
//! verify it and pin its sha256, and write the lockfile `fetch --lock` fetches
//! (to `--lock FILE`, atomically, else stdout), and its CycloneDX SBOM (to
//! `--sbom PATH`, else `<lock>.cdx.json` beside the lockfile).

use std::io::Write;

use tracing::{error, info};

use crate::cli::{ArgOrigins, FetchArgs};
use crate::cmd::exit::ExitCode;
use crate::cmd::fetch::{config_failure, maven_http, packages_failure, resolve_packages, stopped};

/// Runs `resolve` and returns the exit code.
pub(crate) async fn run(args: &FetchArgs, origins: &ArgOrigins) -> ExitCode {
    // `--lock` is this command's output, not a lockfile to read.
    let mut args = args.clone();
    let output = args.lock.take();
    let args = &args;
    // Read off the runtime, within the deadline and until a signal (a large key file
    // takes time to check).
    let cancel = crate::cmd::fetch::stop_on_signals();
    let (settings, mut problems) =
        match crate::cmd::fetch::read_configuration(args, origins, Some(&cancel)).await {
            Ok(read) => read,
            Err(crate::cmd::fetch::NotReady::Config(problems)) => {
                return config_failure(args, &problems, false)
            }
            Err(crate::cmd::fetch::NotReady::Unresolved(code, message, _)) => {
                return stopped(args, code, &message, false)
            }
        };
    if settings.require_pins {
        problems.push_message(
            "--require-pins is for fetch and check: resolve writes the pins (its lockfile), then `fetch --lock FILE --require-pins` requires them"
                .to_owned(),
        );
    }
    let Some(request) = settings
        .packages
        .request
        .clone()
        .filter(|_| problems.is_empty())
    else {
        if problems.is_empty() {
            problems.push_message(
                "nothing to resolve: give --packages (or SPARK_LOCALIZER_PACKAGES, spark.jars.packages in --properties-file)"
                    .to_owned(),
            );
        }
        return config_failure(args, &problems, false);
    };
    // Resolution and the jars' downloads, within the deadline and until a signal.
    let resolving = resolve_packages(&settings, &request);
    let http = maven_http(&settings);
    let parallelism = settings.parallelism;
    let trust = settings.packages.trust.clone();
    let work = async move {
        let resolution = resolving.await?;
        for line in &resolution.tree {
            info!("{line}");
        }
        let repositories = resolution.repositories.clone();
        let http = http?;
        let locked =
            crate::maven::lock::lock(resolution, &http, parallelism, trust.as_ref()).await?;
        Ok::<_, crate::maven::MavenError>((repositories, locked))
    };
    let (repositories, locked) =
        match crate::cmd::deadline::within(&settings, Some(&cancel), "--packages", work).await {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => return packages_failure(args, &e, false),
            Err((code, message)) => return stopped(args, code, &message, false),
        };
    let text = crate::maven::lock::render(&request, &repositories, &locked);
    let total: u64 = locked.iter().map(|l| l.size).sum();
    match &output {
        Some(path) => {
            if let Err(e) = write_atomically(path, text.as_bytes()) {
                error!("cannot write the lockfile {}: {e}", path.display());
                return ExitCode::LocalIo;
            }
            info!(
                "wrote {} ({} jars, {:.1} MiB)",
                path.display(),
                locked.len(),
                total as f64 / (1 << 20) as f64
            );
        }
        None => {
            let mut out = std::io::stdout().lock();
            if out
                .write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .is_err()
            {
                return ExitCode::LocalIo;
            }
        }
    }
    match sbom_path(args, output.as_deref()) {
        Some(path) => write_sbom(&path, &locked),
        None => ExitCode::Ok,
    }
}

/// Where `resolve` writes the SBOM: `--sbom`, else beside the lockfile as
/// `<lock>.cdx.json`; none with `--no-sbom`, or when the lockfile goes to stdout
/// and no `--sbom` is given.
fn sbom_path(args: &FetchArgs, lock: Option<&std::path::Path>) -> Option<std::path::PathBuf> {
    if args.no_sbom {
        return None;
    }
    args.sbom.clone().or_else(|| {
        lock.map(|lock| {
            let mut name = lock.as_os_str().to_owned();
            name.push(crate::layout::LOCK_SBOM_SUFFIX);
            name.into()
        })
    })
}

fn write_sbom(path: &std::path::Path, locked: &[crate::maven::lock::Locked]) -> ExitCode {
    let bom = crate::output::sbom::of_lock(locked);
    if let Err(e) = write_atomically(path, &bom.to_json()) {
        error!("cannot write the SBOM {}: {e}", path.display());
        return ExitCode::LocalIo;
    }
    info!("wrote {}", path.display());
    ExitCode::Ok
}

/// Writes `bytes` to `path` through a temp file beside it and a rename.
fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
