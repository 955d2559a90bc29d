//! `spark-localizer fetch`: resolve, plan, localize, then write the classpath,
//! the env snippet, the report and (on failure) the termination message.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use tracing::{error, info, warn};

use crate::cli::{ArgOrigins, FetchArgs, LogFormat};
use crate::cmd::deadline::Phase;
use crate::cmd::exit::ExitCode;
use crate::config::{ConfigError, Problems, Settings, DEFAULT_FILES_DIR, DEFAULT_JARS_DIR};
use crate::engine::{self, Options, Outcome, Status};
use crate::layout;
use crate::output;
use crate::plan::{self, resolved, Plan, PlanError};
use crate::progress::{self, mib, Reporter};
use crate::retry::{Backoff, RetryPolicy};
use crate::source::azure::AzureSource;
use crate::source::gcs::GcsSource;
use crate::source::hdfs::{HdfsSettings, HdfsSource};
use crate::source::http::HttpSource;
use crate::source::mirror::MirrorSource;
use crate::source::s3::S3Source;
use crate::source::staging::{self, StagingSource};
use crate::source::{Scheme, Sources};
use crate::util::signal::Termination;

/// What `fetch` and `check` work from.
pub(crate) struct Prepared {
    pub settings: Settings,
    pub plan: Plan,
    pub sources: Sources,
    /// What `--packages` resolved to (without `--lock`).
    pub resolution: Option<crate::maven::Resolution>,
    /// `oci://` references that could not be resolved (only for `check`,
    /// which goes on without them): the exit code each means, and why.
    pub unresolved: Vec<(ExitCode, String)>,
}

/// Why `prepare` stopped.
pub(crate) enum NotReady {
    /// Configuration problems (exit code 2), all of them.
    Config(Problems),
    /// What is resolved before the plan (`--packages`, `oci://` references)
    /// could not be, or the deadline or a signal came first: the exit code, why,
    /// and the outputs an earlier run may have left.
    Unresolved(ExitCode, String, Outputs),
}

/// Where a run writes its report, classpath outputs and SBOM.
pub(crate) struct Outputs {
    pub report: std::path::PathBuf,
    pub classpath: [std::path::PathBuf; 2],
    pub sbom: Option<std::path::PathBuf>,
}

impl Outputs {
    fn of(settings: &Settings) -> Self {
        Outputs {
            report: settings.report.clone(),
            classpath: [settings.classpath_file.clone(), settings.env_file.clone()],
            sbom: settings.sbom.clone(),
        }
    }

    /// Before the configuration is read: as the flags name them (a directory
    /// the properties file names is not known yet).
    fn of_args(args: &FetchArgs) -> Self {
        let jars_dir = args
            .jars_dir
            .clone()
            .unwrap_or_else(|| DEFAULT_JARS_DIR.into());
        let or_in_jars_dir = |given: &Option<std::path::PathBuf>, name: &str| {
            given.clone().unwrap_or_else(|| jars_dir.join(name))
        };
        Outputs {
            report: or_in_jars_dir(&args.report, layout::REPORT_FILE),
            classpath: [
                or_in_jars_dir(&args.classpath_file, layout::CLASSPATH_FILE),
                or_in_jars_dir(&args.env_file, layout::ENV_FILE),
            ],
            sbom: (!args.no_sbom).then(|| or_in_jars_dir(&args.sbom, layout::SBOM_FILE)),
        }
    }
}

/// Resolves settings, resolves `--packages` (unless `--lock` pins them), builds
/// the plan and the sources: everything that can be wrong with the
/// configuration is found before any network traffic and reported at once;
/// then the packages' POMs are the only traffic before the transfers.
pub(crate) async fn prepare(
    args: &FetchArgs,
    origins: &ArgOrigins,
    cancel: Option<&tokio::sync::watch::Receiver<bool>>,
    keep_going: bool,
) -> Result<Prepared, NotReady> {
    let (mut settings, mut problems) = read_configuration(args, origins, cancel).await?;
    let mut resolution = None;
    // A URI that cannot be planned stops the run before any traffic: nothing
    // is resolved then (the plan below reports every problem).
    // Checked only when something is resolved: the plan is built once otherwise.
    let resolves = (settings.packages.request.is_some() && settings.packages.lock.is_none())
        || [&settings.jars, &settings.files, &settings.archives]
            .iter()
            .any(|list| list.iter().any(|d| crate::oci::is_oci(&d.uri)));
    let plannable = if problems.is_empty() && resolves {
        let (checked, ok) = planning(settings, cancel, |mut settings| {
            let ok = plannable(&mut settings);
            (settings, ok)
        })
        .await?;
        settings = checked;
        ok
    } else {
        problems.is_empty()
    };
    // What could not be resolved: `--packages`, then every oci:// reference
    // (all are tried; the most severe failure wins, all named).
    let mut failed: Vec<(ExitCode, String)> = Vec::new();
    if plannable && settings.packages.lock.is_none() {
        if let Some(request) = settings.packages.request.clone() {
            let work = resolve_packages(&settings, &request);
            match super::deadline::within(&settings, cancel, "--packages", work).await {
                Err((code, message)) => {
                    return Err(NotReady::Unresolved(code, message, Outputs::of(&settings)))
                }
                Ok(Err(e)) => failed.push(packages_verdict(&e)),
                Ok(Ok(resolved)) => {
                    settings.add_resolved(&resolved);
                    resolution = Some(resolved);
                }
            }
        }
    }
    let go_on = keep_going || !failed.is_empty();
    let oci = crate::cmd::oci::expand(&mut settings, &mut problems, plannable, go_on, cancel)
        .await
        .map_err(|(code, message)| NotReady::Unresolved(code, message, Outputs::of(&settings)))?;
    let oci = if failed.is_empty() {
        oci
    } else {
        failed.extend(oci.failures);
        let code = failed
            .iter()
            .map(|(c, _)| *c)
            .reduce(ExitCode::worst)
            .unwrap_or(ExitCode::Fetch);
        let all: Vec<String> = failed.into_iter().map(|(_, m)| m).collect();
        return Err(NotReady::Unresolved(
            code,
            all.join("; "),
            Outputs::of(&settings),
        ));
    };
    // An invalid input hides nothing else: the sources are configured for the
    // valid ones, so their problems are reported in this run too.
    let (settings, (plan, sources, problems)) = planning(settings, cancel, move |settings| {
        let plan = plan::build(&settings).unwrap_or_else(|e: PlanError| {
            for problem in e.problems {
                problems.push_message(problem);
            }
            e.partial
        });
        let sources = build_sources(&settings, &plan, &mut problems);
        (settings, (plan, sources, problems))
    })
    .await?;
    let sources = sources.map(|sources| match oci.source {
        Some(source) => sources.with_oci(source),
        None => sources,
    });
    match sources {
        Some(sources) if problems.is_empty() => {
            warn_about(&plan);
            Ok(Prepared {
                settings,
                plan,
                sources,
                resolution,
                unresolved: oci.failures,
            })
        }
        _ => Err(NotReady::Config(problems)),
    }
}

/// Reads the configuration (the flags, the properties file, the declared
/// lists) off the runtime's threads, within the deadline (`--deadline` or its
/// variable; the default until the properties file could name another) and
/// until a stop signal; the deadline the configuration names is checked after.
pub(crate) async fn read_configuration(
    args: &FetchArgs,
    origins: &ArgOrigins,
    cancel: Option<&tokio::sync::watch::Receiver<bool>>,
) -> Result<(Settings, Problems), NotReady> {
    let length = args.deadline.unwrap_or(crate::config::DEFAULT_DEADLINE);
    let (owned_args, owned_origins) = (args.clone(), origins.clone());
    let what = match &args.properties_file {
        Some(path) => format!("the configuration (--properties-file {})", path.display()),
        None => "the configuration".to_owned(),
    };
    let read = super::deadline::blocking(length, cancel, (&what, Phase::Reading), move || {
        let mut problems = Problems::default();
        let settings = Settings::resolve(&owned_args, &owned_origins, &mut problems);
        (settings, problems)
    });
    let (settings, problems) = read
        .await
        .map_err(|(code, message)| NotReady::Unresolved(code, message, Outputs::of_args(args)))?;
    // The deadline may come from the properties file: passed already?
    super::deadline::within_blocking(&settings, cancel, (&what, Phase::Reading), || ())
        .await
        .map_err(|(code, message)| NotReady::Unresolved(code, message, Outputs::of(&settings)))?;
    Ok((settings, problems))
}

/// Runs `work` (planning over the settings) off the runtime's threads, within
/// the deadline and until a stop signal; it hands the settings back.
async fn planning<T: Send + 'static>(
    settings: Settings,
    cancel: Option<&tokio::sync::watch::Receiver<bool>>,
    work: impl FnOnce(Settings) -> (Settings, T) + Send + 'static,
) -> Result<(Settings, T), NotReady> {
    let count = settings.jars.len() + settings.files.len() + settings.archives.len();
    info!("planning {count} declared URI(s)");
    let outputs = Outputs::of(&settings);
    let what = format!("{count} declared URI(s)");
    let length = settings.deadline.value;
    super::deadline::blocking(length, cancel, (&what, Phase::Planning), move || {
        work(settings)
    })
    .await
    .map_err(|(code, message)| NotReady::Unresolved(code, message, outputs))
}

/// Whether every declared URI but the `oci://` references (resolved later)
/// can be planned: checked before any traffic, so a typo elsewhere does not
/// wait for the registries and repositories.
fn plannable(settings: &mut Settings) -> bool {
    let lists = [
        settings.jars.clone(),
        settings.files.clone(),
        settings.archives.clone(),
    ];
    for list in [
        &mut settings.jars,
        &mut settings.files,
        &mut settings.archives,
    ] {
        list.retain(|d| !crate::oci::is_oci(&d.uri));
    }
    // What pins the oci:// layers and the packages' jars is judged once they
    // are known.
    let require_pins = std::mem::take(&mut settings.require_pins);
    // The sources too: a bucket's or cluster's configuration is checked offline.
    let ok = plan::build(settings).is_ok_and(|plan| {
        let mut problems = Problems::default();
        build_sources(settings, &plan, &mut problems).is_some() && problems.is_empty()
    });
    settings.require_pins = require_pins;
    [settings.jars, settings.files, settings.archives] = lists;
    ok
}

/// Resolves `request` over the HTTP client of the settings (trust roots,
/// proxies, the request trail).
pub(crate) fn resolve_packages(
    settings: &Settings,
    request: &crate::maven::Request,
) -> impl std::future::Future<Output = Result<crate::maven::Resolution, crate::maven::MavenError>>
       + Send
       + 'static {
    let http = maven_http(settings);
    let request = request.clone();
    let trust = settings
        .packages
        .trust
        .clone()
        .filter(|t| t.mode != crate::maven::signatures::Mode::Off);
    let parallelism = settings.parallelism;
    async move {
        let http = http?;
        info!(
            "resolving {} package(s) over {}",
            request.packages.len(),
            request
                .repositories
                .iter()
                .map(crate::maven::repo::Repo::shown)
                .collect::<Vec<_>>()
                .join(", ")
        );
        let transport = Arc::new(http);
        let mut resolution = crate::maven::resolve(&request, transport.clone()).await?;
        // Signatures are checked before any transfer, over bytes the fetch then pins.
        if let Some(trust) = &trust {
            let jars = std::mem::take(&mut resolution.jars);
            let locked = crate::maven::lock::lock(
                crate::maven::Resolution {
                    jars,
                    ..resolution.clone()
                },
                &transport,
                parallelism,
                Some(trust),
            )
            .await?;
            resolution.jars = locked
                .into_iter()
                .map(|l| crate::maven::Resolved {
                    checked_sha256: Some(l.sha256),
                    ..l.jar
                })
                .collect();
        }
        info!(
            "resolved {} jar(s) for --packages{}",
            resolution.jars.len(),
            if resolution.evicted.is_empty() {
                String::new()
            } else {
                format!("; {} version(s) evicted", resolution.evicted.len())
            }
        );
        Ok(resolution)
    }
}

/// A run stopped before the transfers (the deadline, a signal): said, and
/// written to the termination log for `fetch`.
pub(crate) fn stopped(
    args: &FetchArgs,
    code: ExitCode,
    message: &str,
    termination: bool,
) -> ExitCode {
    error!("{message}");
    if termination {
        let text = output::termination_text(message, &[]);
        let path = crate::config::termination_log(args.termination_log.as_deref());
        write_termination(path.as_deref(), &text);
    }
    code
}

/// The HTTP transport of the Maven resolver: the settings' client, stall timeout
/// and header file's headers.
pub(crate) fn maven_http(
    settings: &Settings,
) -> Result<crate::maven::repo::Http, crate::maven::MavenError> {
    let client = crate::net::client(&settings.http)
        .map_err(|e| crate::maven::MavenError::Malformed(crate::util::redact::error_chain(&e)))?;
    Ok(crate::maven::repo::Http {
        client,
        stall_timeout: settings.stall_timeout,
        headers: settings.http.headers.clone(),
        per_origin: Default::default(),
    })
}

/// The exit code and message of a `--packages` resolution that failed.
pub(crate) fn packages_verdict(e: &crate::maven::MavenError) -> (ExitCode, String) {
    let message = format!("--packages: {}", crate::util::redact::scrub(&e.to_string()));
    let code = match e {
        crate::maven::MavenError::Integrity(_) => ExitCode::Integrity,
        _ => ExitCode::Fetch,
    };
    (code, message)
}

/// The exit code and message of a `--packages` resolution that failed (written
/// to the termination log for `fetch`).
pub(crate) fn packages_failure(
    args: &FetchArgs,
    e: &crate::maven::MavenError,
    termination: bool,
) -> ExitCode {
    let (code, message) = packages_verdict(e);
    error!("{message}");
    if termination {
        let text = output::termination_text("--packages could not be resolved", &[message]);
        let path = crate::config::termination_log(args.termination_log.as_deref());
        write_termination(path.as_deref(), &text);
    }
    code
}

/// A run stopped before any transfer (`--packages` or an `oci://` reference
/// not resolved, the deadline, a signal): said, the report written with
/// `error`, an earlier run's classpath outputs removed (they would name files
/// this run does not vouch for), the termination message written.
fn unresolved(
    args: &FetchArgs,
    code: ExitCode,
    message: &str,
    outputs: &Outputs,
    elapsed: std::time::Duration,
) -> ExitCode {
    error!("{message}");
    let report = output::Report::unresolved(code.code(), elapsed.as_millis() as u64, message);
    let json = serde_json::to_vec_pretty(&report).expect("report serializes");
    if let Some(dir) = outputs.report.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let mut code = code;
    if let Err(e) = layout::write_atomic(&outputs.report, &json, false) {
        // As for any run: an output that cannot be written is exit 6.
        error!(
            "cannot write the report {}: {e}; check the volume mount",
            outputs.report.display()
        );
        code = code.worst(ExitCode::LocalIo);
    }
    for (stale, env) in outputs.classpath.iter().zip([false, true]) {
        if output::written_by_us(stale, env) && std::fs::remove_file(stale).is_ok() {
            info!("removed {} written by an earlier run", stale.display());
        }
    }
    if let Some(stale) = &outputs.sbom {
        remove_sbom(stale);
    }
    let text = output::termination_text(message, &[]);
    let path = crate::config::termination_log(args.termination_log.as_deref());
    write_termination(path.as_deref(), &text);
    code
}

/// One source per scheme, configured for the plan's URIs (S3 buckets, HDFS
/// clusters, staging bundles); `None` when one cannot be (its problems recorded).
fn build_sources(settings: &Settings, plan: &Plan, problems: &mut Problems) -> Option<Sources> {
    let mut report = |list: Vec<String>| {
        for problem in list {
            problems.push_message(problem);
        }
    };
    let http = HttpSource::new(&settings.http).map_err(|e| report(vec![config_message(&e.into())]));
    // The plan's URIs of one scheme.
    let uris = |scheme| {
        plan.artifacts
            .iter()
            .filter(move |a| a.scheme == scheme)
            .map(|a| &a.uri)
    };
    let s3 = http.as_ref().ok().and_then(|http| {
        let buckets = uris(Scheme::S3).filter_map(|u| u.host_str());
        S3Source::new(&settings.s3, http.client(), buckets)
            .map_err(&mut report)
            .ok()
    });
    let gcs = http.as_ref().ok().and_then(|http| {
        let buckets = uris(Scheme::Gcs).filter_map(|u| u.host_str());
        GcsSource::new(&settings.gcs, http.client(), buckets)
            .map_err(&mut report)
            .ok()
    });
    let azure = http.as_ref().ok().and_then(|http| {
        AzureSource::new(&settings.azure, http.client(), uris(Scheme::Azure))
            .map_err(&mut report)
            .ok()
    });
    let hdfs_uris: Vec<&url::Url> = uris(Scheme::Hdfs).collect();
    // The Hadoop configuration and token file matter only when HDFS is used.
    let hdfs = if hdfs_uris.is_empty() {
        Some(HdfsSource::default())
    } else {
        HdfsSettings::load(
            settings.hadoop_conf_dir.clone(),
            settings.properties.as_ref(),
            settings.kerberos.clone(),
        )
        .and_then(|hs| HdfsSource::new(&hs, hdfs_uris, settings.http.connect_timeout))
        .map_err(&mut report)
        .ok()
    };
    let staging = http
        .as_ref()
        .ok()
        .and_then(|_| staging_source(settings, plan).map_err(&mut report).ok());
    match (http, s3, gcs, azure, hdfs, staging) {
        (Ok(http), Some(s3), Some(gcs), Some(azure), Some(hdfs), Some(staging)) => {
            let sources = Sources::new(http, s3, hdfs, staging).with_object_stores(gcs, azure);
            match &settings.mirror {
                None => Some(sources),
                Some((url, timeout)) => {
                    match MirrorSource::new(
                        url.clone(),
                        &settings.http,
                        *timeout,
                        settings.stall_timeout,
                    ) {
                        Ok(mirror) => Some(sources.with_mirror(mirror)),
                        Err(e) => {
                            report(vec![config_message(&e.into())]);
                            None
                        }
                    }
                }
            }
        }
        _ => None,
    }
}

/// Warnings about a plan that is valid but may not do what was meant.
fn warn_about(plan: &Plan) {
    for a in &plan.artifacts {
        if a.kind == plan::Kind::Archive && a.unpack.is_none() && a.scheme != Scheme::Local {
            warn!(
                uri = %a.display_uri,
                "not a .zip, .jar, .tar, .tar.gz or .tgz archive: copied as is to {}, as Spark does",
                a.visible().display()
            );
        }
    }
    for key in &plan.unused_pins {
        warn!("--checksums pins {key}, which no artifact matches");
    }
}

/// The staging source: a client trusting the staging CA files too, and for every
/// bundle of the plan the secret of its kind, read now (an unreadable secret is a
/// configuration error, before any traffic).
fn staging_source(settings: &Settings, plan: &Plan) -> Result<StagingSource, Vec<String>> {
    let bundles: Vec<&plan::Artifact> = plan.artifacts.iter().filter(|a| a.is_bundle()).collect();
    let Some(base) = settings
        .staging
        .uri
        .as_ref()
        .filter(|_| !bundles.is_empty())
    else {
        return Ok(StagingSource::default());
    };
    let mut config = settings.http.clone();
    config
        .ca_files
        .extend(settings.staging.ca_files.iter().cloned());
    config.headers = Vec::new();
    let http = HttpSource::new(&config).map_err(|e| vec![config_message(&e.into())])?;
    let mut source = StagingSource::new(
        base.value.clone(),
        base.origin.to_string(),
        settings
            .staging
            .ca_files
            .iter()
            .map(|c| c.path.clone())
            .collect(),
    );
    let mut problems = Vec::new();
    for a in bundles {
        let (secret, key) = if a.kind == plan::Kind::Jar {
            (
                &settings.staging.jars_secret,
                crate::stage::api::JARS_SECRET_KEY,
            )
        } else {
            (
                &settings.staging.files_secret,
                crate::stage::api::FILES_SECRET_KEY,
            )
        };
        match staging::read_secret(&secret.value) {
            Ok(value) => {
                let bundle = staging::Bundle {
                    display_uri: a.display_uri.clone(),
                    secret_file: secret.value.clone(),
                    secret_origin: secret.origin.to_string(),
                };
                if !source.add(&http, a.uri.clone(), value, bundle) {
                    problems.push(format!(
                        "invalid {}: {} is given both as a jars bundle and as a files bundle; a bundle is one or the other",
                        a.origin, a.display_uri
                    ));
                }
            }
            Err(why) => {
                let flag = if a.kind == plan::Kind::Jar {
                    "--staging-jars-secret-file"
                } else {
                    "--staging-files-secret-file"
                };
                let from = match secret.origin {
                    crate::origin::Origin::Default => format!("{flag} (default)"),
                    ref given => given.to_string(),
                };
                problems.push(format!(
                    "invalid {from}: {why}; it holds the secret of {} ({}): mount the Secret key {key} at {}, or name the file with {flag}",
                    a.display_uri,
                    a.origin,
                    secret.value.display()
                ))
            }
        }
    }
    if problems.is_empty() {
        Ok(source)
    } else {
        Err(problems)
    }
}

fn config_message(e: &ConfigError) -> String {
    crate::util::redact::error_chain(e)
}

/// Reports configuration errors (exit code 2) on stderr, and for `fetch` in the
/// termination log too (`check` writes nothing).
pub(crate) fn config_failure(args: &FetchArgs, problems: &Problems, termination: bool) -> ExitCode {
    let lines: Vec<String> = problems.to_string().lines().map(str::to_owned).collect();
    for line in &lines {
        error!("{line}");
    }
    // Never write the message into a destination directory: the misconfiguration
    // may be that the termination log points at an artifact.
    let into_destination = args.termination_log.as_deref().is_some_and(|path| {
        let dirs = [
            args.jars_dir
                .clone()
                .unwrap_or_else(|| DEFAULT_JARS_DIR.into()),
            args.files_dir
                .clone()
                .unwrap_or_else(|| DEFAULT_FILES_DIR.into()),
        ];
        path.parent()
            .is_some_and(|parent| dirs.iter().any(|d| d == parent))
    });
    if termination && !into_destination {
        let text = output::termination_text("invalid configuration", &lines);
        let path = crate::config::termination_log(args.termination_log.as_deref());
        write_termination(path.as_deref(), &text);
    }
    ExitCode::Config
}

/// Writes the termination message to `path` (already resolved), if there is one.
fn write_termination(path: Option<&std::path::Path>, text: &str) {
    let Some(path) = path else {
        return;
    };
    if let Err(e) = output::write_termination_log(path, text) {
        warn!(
            "cannot write the termination message to {}: {e}",
            path.display()
        );
    }
}

/// Runs `fetch` and returns the exit code.
pub(crate) async fn run(args: &FetchArgs, origins: &ArgOrigins, log_format: LogFormat) -> ExitCode {
    run_until(args, origins, log_format, stop_on_signals()).await
}

/// [`run`] until `cancel` says stop (the signals are the caller's to watch).
pub(crate) async fn run_until(
    args: &FetchArgs,
    origins: &ArgOrigins,
    log_format: LogFormat,
    cancel: tokio::sync::watch::Receiver<bool>,
) -> ExitCode {
    let started = Instant::now();
    // The doctor's image is configuration: checked before any traffic.
    let image = match super::doctor::image_dir(args, origins, false) {
        Ok(image) => image,
        Err(problem) => {
            let mut problems = Problems::default();
            problems.push_message(problem);
            return config_failure(args, &problems, true);
        }
    };
    let Prepared {
        settings,
        plan,
        sources,
        resolution,
        ..
    } = match prepare(args, origins, Some(&cancel), false).await {
        Ok(ready) => ready,
        Err(NotReady::Config(problems)) => return config_failure(args, &problems, true),
        Err(NotReady::Unresolved(code, message, outputs)) => {
            return unresolved(args, code, &message, &outputs, started.elapsed())
        }
    };
    for line in resolution.iter().flat_map(|r| &r.evicted) {
        info!("--packages: evicted {line}");
    }
    if plan.artifacts.is_empty() {
        info!("nothing to fetch: no jars or files were given (--jars, --files, --properties-file)");
    }
    let options = engine_options(&settings, cancel.clone());
    // Holds the directory locks until the outputs are written.
    let mut run = engine::run(&plan, &sources, &options, reporter(&settings, log_format)).await;
    let outcomes = &run.outcomes;
    let mut verdict = Verdict::of(&plan, outcomes);
    // An output in a directory another spark-localizer holds is that run's to write.
    let ours = |path: &Path| {
        let dir = path.parent().map(resolved).unwrap_or_default();
        let free = !run.busy.contains(&dir);
        if !free {
            warn!(
                "another spark-localizer holds {}: leaving {} to it",
                dir.display(),
                path.display()
            );
        }
        free
    };
    let diagnosis = match &image {
        Some(image) if verdict.code == ExitCode::Ok => {
            let strict = args.doctor_strict;
            doctor(image, &settings, &plan, outcomes, strict, &mut verdict).await
        }
        _ => None,
    };
    let classpath_ours = [&settings.classpath_file, &settings.env_file]
        .iter()
        .all(|p| ours(p));
    let sbom_ours = settings.sbom.as_deref().is_some_and(ours);
    let report_ours = ours(&settings.report);
    let outputs = Outputs::of(&settings);
    let length = settings.deadline.value;
    let write = write_outputs(
        settings,
        plan,
        std::mem::take(&mut run.outcomes),
        (resolution, diagnosis),
        verdict,
        (classpath_ours, sbom_ours, report_ours, started),
    );
    // After a stop (the deadline passed, a signal came) the report of it is
    // still written, within a second.
    let stopped = *cancel.borrow() || tokio::time::Instant::now() >= super::deadline::at(length);
    let (length, stop) = if stopped {
        (super::deadline::grace(), None)
    } else {
        (length, Some(&cancel))
    };
    let written = super::deadline::blocking(
        length,
        stop,
        ("the classpath outputs and the report", Phase::Writing),
        write,
    )
    .await;
    let (settings, outcomes, verdict) = match written {
        Ok(written) => written,
        Err((code, message)) => {
            return unresolved(args, code, &message, &outputs, started.elapsed())
        }
    };
    summarize(&outcomes, started.elapsed());
    if verdict.code != ExitCode::Ok {
        failed(&settings, &verdict, ours);
    }
    verdict.code
}

/// After a failed run: an earlier successful run's classpath outputs and SBOM
/// would name files this run removed, so those that are ours go; the
/// termination message is written.
fn failed(settings: &Settings, verdict: &Verdict, ours: impl Fn(&Path) -> bool) {
    let classpath_outputs = [&settings.classpath_file, &settings.env_file];
    for (stale, env) in classpath_outputs.into_iter().zip([false, true]) {
        if ours(stale) && output::written_by_us(stale, env) && std::fs::remove_file(stale).is_ok() {
            info!("removed {} written by an earlier run", stale.display());
        }
    }
    if let Some(stale) = settings.sbom.as_deref().filter(|p| ours(p)) {
        remove_sbom(stale);
    }
    write_termination(
        settings.termination_log.as_deref(),
        &output::termination_text(&verdict.headline, &verdict.failures),
    );
}

/// What writes the classpath outputs (when every artifact was localized and
/// they are this run's to write) and the report (when it is), to run off the
/// runtime's threads.
fn write_outputs(
    settings: Settings,
    plan: Plan,
    outcomes: Vec<Outcome>,
    (resolution, diagnosis): (
        Option<crate::maven::Resolution>,
        Option<crate::doctor::Diagnosis>,
    ),
    mut verdict: Verdict,
    (classpath_ours, sbom_ours, report_ours, started): (bool, bool, bool, Instant),
) -> impl FnOnce() -> (Settings, Vec<Outcome>, Verdict) + Send + 'static {
    move || {
        if verdict.code == ExitCode::Ok && sbom_ours {
            // The packages resolved in this run, or the lockfile's.
            let packages = resolution.as_ref().or(settings.packages.locked.as_ref());
            write_sbom(&settings, &plan, &outcomes, packages, &mut verdict);
        }
        if verdict.code == ExitCode::Ok && classpath_ours {
            if let Err(e) = write_classpath(&settings, &plan, &outcomes) {
                verdict.output_failed(
                    format!(
                        "cannot write the classpath outputs ({}, {}): {e}; check the volume mount",
                        settings.classpath_file.display(),
                        settings.env_file.display()
                    ),
                    "every artifact was localized, but the classpath could not be written",
                );
            }
        }
        if report_ours {
            write_report(
                &settings,
                &plan,
                &outcomes,
                (resolution.as_ref(), diagnosis),
                started.elapsed(),
                &mut verdict,
            );
        }
        (settings, outcomes, verdict)
    }
}

/// The first SIGTERM or SIGINT stops the transfers (they clean up and the run
/// reports, exit 7); a second one exits at once. Returns the stop signal.
pub(crate) fn stop_on_signals() -> tokio::sync::watch::Receiver<bool> {
    let (stop, cancel) = tokio::sync::watch::channel(false);
    // Installed now, before any work: a signal from here on is never fatal.
    let Ok(mut handlers) = Termination::install() else {
        return cancel;
    };
    tokio::spawn(async move {
        let signal = handlers.recv().await;
        warn!("received {signal}: stopping transfers, removing partial files, writing the report");
        let _ = stop.send(true);
        let again = handlers.recv().await;
        error!("received {again} again: exiting without cleaning up");
        std::process::exit(ExitCode::Interrupted.code());
    });
    cancel
}

pub(crate) fn engine_options(
    settings: &Settings,
    cancel: tokio::sync::watch::Receiver<bool>,
) -> Options {
    Options {
        cancel,
        parallelism: settings.parallelism,
        parallelism_max: settings.parallelism_max.max(settings.parallelism),
        retry: RetryPolicy {
            retries: settings.retries,
            backoff: Backoff::new(settings.retry_delay),
        },
        stall_timeout: settings.stall_timeout,
        archive_limits: settings.archive_limits,
        archive_classpath: settings.archive_classpath,
        deadline: super::deadline::at(settings.deadline.value),
        deadline_len: settings.deadline.value,
        fsync: settings.fsync,
    }
}

/// Bars on a terminal with text logs, periodic lines otherwise, nothing with
/// `--no-progress`.
fn reporter(settings: &Settings, log_format: LogFormat) -> Arc<dyn Reporter> {
    if settings.no_progress {
        Arc::new(progress::Silent)
    } else if std::io::stderr().is_terminal() && log_format == LogFormat::Text {
        Arc::new(progress::Bars::new())
    } else {
        progress::Lines::start(settings.progress_interval)
    }
}

/// How the run went: the exit code, the failure messages and the termination
/// message's headline.
struct Verdict {
    code: ExitCode,
    failures: Vec<String>,
    artifact_failures: usize,
    headline: String,
}

impl Verdict {
    /// Every artifact's failure logged; the code is the most severe one.
    fn of(plan: &Plan, outcomes: &[Outcome]) -> Verdict {
        let mut code = ExitCode::Ok;
        let mut failures = Vec::new();
        for outcome in outcomes {
            if let Some(failure) = &outcome.failure {
                error!("{}", failure.message);
                code = code.worst(ExitCode::from(failure.kind));
                failures.push(failure.message.clone());
            }
        }
        let artifact_failures = failures.len();
        let headline = format!(
            "{artifact_failures} of {} artifact{} failed",
            plan.artifacts.len(),
            if plan.artifacts.len() == 1 { "" } else { "s" }
        );
        Verdict {
            code,
            failures,
            artifact_failures,
            headline,
        }
    }

    /// `--doctor-strict` and the doctor found errors: exit 8, each error a failure.
    fn doctor_failed(&mut self, errors: Vec<String>) {
        self.headline = format!(
            "the classpath doctor found {} error{} (--doctor-strict)",
            errors.len(),
            if errors.len() == 1 { "" } else { "s" }
        );
        self.failures.extend(errors);
        self.code = self.code.worst(ExitCode::Doctor);
    }

    /// An output could not be written: a local I/O failure; `headline` replaces
    /// the headline when every artifact was localized.
    fn output_failed(&mut self, message: String, headline: &str) {
        error!("{message}");
        self.failures.push(message);
        self.code = self.code.worst(ExitCode::LocalIo);
        if self.artifact_failures == 0 {
            self.headline = headline.to_owned();
        }
    }
}

/// The classpath doctor after a run that localized everything: its findings
/// logged; under `--doctor-strict`, an error fails the run (exit 8, no
/// classpath written). A doctor that cannot run is a warning, never a failure.
async fn doctor(
    image: &super::doctor::ImageDir,
    settings: &Settings,
    plan: &Plan,
    outcomes: &[Outcome],
    strict: bool,
    verdict: &mut Verdict,
) -> Option<crate::doctor::Diagnosis> {
    let added = super::doctor::added_by_run(settings, plan, outcomes);
    let context = super::doctor::Context::of(settings);
    match super::doctor::diagnose(image, context, added).await {
        Ok(d) => {
            super::doctor::log(&d, strict);
            if strict && d.has_errors() {
                let errors: Vec<String> = d
                    .findings
                    .iter()
                    .filter(|f| f.severity == crate::doctor::Severity::Error)
                    .map(|f| format!("doctor {}: {}", f.id, f.message))
                    .collect();
                verdict.doctor_failed(errors);
            }
            Some(d)
        }
        Err(why) => {
            warn!("classpath doctor skipped: {why} ({})", image.named_by);
            None
        }
    }
}

fn write_report(
    settings: &Settings,
    plan: &Plan,
    outcomes: &[Outcome],
    (resolution, diagnosis): (
        Option<&crate::maven::Resolution>,
        Option<crate::doctor::Diagnosis>,
    ),
    elapsed: std::time::Duration,
    verdict: &mut Verdict,
) {
    let mut report = output::Report::new(
        plan,
        outcomes,
        verdict.code.code(),
        elapsed.as_millis() as u64,
    );
    report.packages = resolution.map(output::PackagesReport::new);
    report.doctor = diagnosis;
    let report_json = serde_json::to_vec_pretty(&report).expect("report serializes");
    if let Err(e) = layout::write_atomic(&settings.report, &report_json, settings.fsync) {
        verdict.output_failed(
            format!(
                "cannot write the report {}: {e}; check the volume mount",
                settings.report.display()
            ),
            "every artifact was localized, but the report could not be written",
        );
    }
}

/// The SBOM, when every artifact was localized (a failure is exit 6, and then
/// the classpath outputs are not written either).
fn write_sbom(
    settings: &Settings,
    plan: &Plan,
    outcomes: &[Outcome],
    packages: Option<&crate::maven::Resolution>,
    verdict: &mut Verdict,
) {
    let Some(path) = &settings.sbom else {
        return;
    };
    let bom = output::sbom::document(plan, outcomes, packages);
    if let Err(e) = layout::write_atomic(path, &bom.to_json(), settings.fsync) {
        verdict.output_failed(
            format!(
                "cannot write the SBOM {}: {e}; check the volume mount or --sbom",
                path.display()
            ),
            "every artifact was localized, but the SBOM could not be written",
        );
    }
}

/// Removes an SBOM an earlier run wrote at `path` (it would describe files
/// this run does not vouch for); a file of someone else's is left alone.
fn remove_sbom(path: &Path) {
    if output::sbom::written_by_us(path) && std::fs::remove_file(path).is_ok() {
        info!("removed {} written by an earlier run", path.display());
    }
}

fn write_classpath(settings: &Settings, plan: &Plan, outcomes: &[Outcome]) -> std::io::Result<()> {
    let entries = super::doctor::classpath_entries(settings, plan, outcomes);
    layout::write_atomic(
        &settings.classpath_file,
        output::classpath_text(&entries).as_bytes(),
        settings.fsync,
    )?;
    layout::write_atomic(
        &settings.env_file,
        output::env_text(&entries).as_bytes(),
        settings.fsync,
    )
}

fn summarize(outcomes: &[Outcome], elapsed: std::time::Duration) {
    let count = |s: Status| outcomes.iter().filter(|o| o.status == s).count();
    let moved: u64 = outcomes
        .iter()
        .filter(|o| matches!(o.status, Status::Fetched | Status::Copied))
        .map(|o| o.bytes)
        .sum();
    let secs = elapsed.as_secs_f64();
    info!(
        "summary: {} fetched, {} copied, {} kept, {} local, {} failed; {:.1} MiB in {:.2}s ({:.1} MiB/s)",
        count(Status::Fetched),
        count(Status::Copied),
        count(Status::Kept),
        count(Status::Local),
        count(Status::Failed),
        mib(moved),
        secs,
        mib(moved) / secs.max(1e-3)
    );
}
