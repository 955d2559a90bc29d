//! `spark-localizer check`: the same plan and credential discovery as `fetch`,
//! printed with where each value came from, then a probe of every URI. Writes
//! nothing; exits non-zero when any probe fails.

use std::fmt::Write as _;
use std::time::Duration;

use futures_util::StreamExt;

use crate::cli::{ArgOrigins, CheckArgs, OutputFormat};
use crate::cmd::doctor;
use crate::cmd::exit::ExitCode;
use crate::cmd::fetch::{
    config_failure, engine_options, prepare, stop_on_signals, stopped, NotReady, Prepared,
};
use crate::config::table::{self, Setting};
use crate::config::Settings;
use crate::env_vars as env;
use crate::origin::Origin;
use crate::plan::{Plan, Target};
use crate::source::Sources;
use crate::util::duration::format_duration;

/// Runs `check` and returns the exit code.
pub(crate) async fn run(check: &CheckArgs, origins: &ArgOrigins) -> ExitCode {
    let args = &check.fetch;
    let json = check.output == OutputFormat::Json;
    let printed = Printed { json };
    // The doctor's image is configuration: checked before any traffic.
    let image = match doctor::image_dir(args, origins, true) {
        Ok(image) => image,
        Err(problem) => {
            let mut problems = crate::config::Problems::default();
            problems.push_message(problem);
            return printed.failed(config_failure(args, &problems, false));
        }
    };
    let Prepared {
        settings,
        plan,
        sources,
        resolution,
        unresolved,
    } = match prepare(args, origins, None, true).await {
        Ok(ready) => ready,
        Err(NotReady::Config(problems)) => {
            return printed.failed(config_failure(args, &problems, false))
        }
        Err(NotReady::Unresolved(code, message, _)) => {
            return printed.failed(stopped(args, code, &message, false))
        }
    };
    // Within the deadline like every probe (a silent KDC is bounded by
    // --connect-timeout inside).
    let _ = tokio::time::timeout(settings.deadline.value, sources.login()).await;
    printed.text(&describe(&settings, &plan, &sources, origins));
    if let Some(r) = &resolution {
        printed.text(&describe_packages(r));
    }
    // A probe gets a connect and a stall timeout, never more than the deadline.
    let timeout =
        (settings.http.connect_timeout + settings.stall_timeout).min(settings.deadline.value);
    // Each server asked directly gets the connect timeout (a silent one is the
    // finding), within the deadline.
    let inspected = sources
        .inspect(settings.http.connect_timeout.min(settings.deadline.value))
        .await;
    if !inspected.is_empty() {
        printed.text(&format!("servers:\n{}\n", inspected.join("\n")));
    }
    if let Some(mirror) = sources.mirror() {
        printed.text(&describe_mirror(mirror, &plan, &sources).await);
    }
    let mut probes = probe_all(&plan, &sources, settings.parallelism, timeout).await;
    // References that could not be resolved stand for their layers.
    probes.extend(unresolved.iter().map(|(_, why)| Probe::failed(why)));
    printed.text(&probes_text(&probes));
    let failed = probes.iter().filter(|p| !p.ok).count();
    let mut code = if failed == 0 {
        printed.text(&format!("\nall {} probes succeeded\n", probes.len()));
        ExitCode::Ok
    } else {
        printed.text(&format!("\n{failed} of {} probes failed\n", probes.len()));
        unresolved
            .iter()
            .map(|(code, _)| *code)
            .fold(ExitCode::Fetch, ExitCode::worst)
    };
    let mut diagnosis = None;
    if let Some(image) = image {
        let run = run_doctor(&image, settings, &plan, &sources, failed).await;
        printed.text(&run.text);
        code = code.worst(run.code);
        diagnosis = Some(run);
    }
    if json {
        out(&check_json(code, &probes, diagnosis.as_ref()));
    }
    code
}

/// What `check` prints: text sections, or (with `--output json`) one JSON
/// document at the end.
struct Printed {
    json: bool,
}

impl Printed {
    fn text(&self, text: &str) {
        if !self.json {
            out(text);
        }
    }

    /// A run that stopped before the probes: with `--output json`, a document
    /// saying so (the reasons are on stderr).
    fn failed(&self, code: ExitCode) -> ExitCode {
        if self.json {
            out(&check_json(code, &[], None));
        }
        code
    }
}

/// `check --output json`: `ok`, `exit_code`, every probe, the doctor's diagnosis
/// (or why it could not run).
fn check_json(code: ExitCode, probes: &[Probe], doctor: Option<&DoctorRun>) -> String {
    #[derive(serde::Serialize)]
    struct Document<'a> {
        version: u32,
        ok: bool,
        exit_code: i32,
        probes: &'a [Probe],
        doctor: Option<&'a crate::doctor::Diagnosis>,
        #[serde(skip_serializing_if = "Option::is_none")]
        doctor_error: Option<&'a str>,
    }
    let doc = Document {
        version: 1,
        ok: code == ExitCode::Ok,
        exit_code: code.code(),
        probes,
        doctor: doctor.and_then(|d| d.diagnosis.as_ref()),
        doctor_error: doctor.and_then(|d| d.error.as_deref()),
    };
    let mut text = serde_json::to_string_pretty(&doc).expect("check output serializes");
    text.push('\n');
    text
}

/// What the doctor did for `check`: the exit code it means, its text, the
/// diagnosis, or why it could not run.
struct DoctorRun {
    code: ExitCode,
    text: String,
    diagnosis: Option<crate::doctor::Diagnosis>,
    error: Option<String>,
}

impl DoctorRun {
    fn not_run(code: ExitCode, why: String) -> DoctorRun {
        DoctorRun {
            code,
            text: format!("\ndoctor: {why}\n"),
            diagnosis: None,
            error: Some(why),
        }
    }
}

/// The doctor for `check`: the jars an earlier `fetch` left (when its report
/// covers this plan), else the plan's jars downloaded into a temporary directory
/// (when every probe succeeded).
async fn run_doctor(
    image: &doctor::ImageDir,
    settings: crate::config::Settings,
    plan: &Plan,
    sources: &Sources,
    failed_probes: usize,
) -> DoctorRun {
    let context = doctor::Context::of(&settings);
    // The temporary directory of a download lives until the diagnosis is done.
    let (added, _downloaded) = match doctor::added_by_earlier_fetch(&settings, plan) {
        Some(added) => (added, None),
        None if failed_probes > 0 => {
            return DoctorRun::not_run(
                ExitCode::Ok,
                format!(
                    "skipped ({failed_probes} probe(s) failed): it needs every jar of the plan"
                ),
            )
        }
        None => {
            let options = engine_options(&settings, stop_on_signals());
            match doctor::download(settings, options, sources).await {
                Ok((added, tmp)) => (added, Some(tmp)),
                Err((code, why)) => {
                    let why = crate::util::redact::scrub(&why);
                    return DoctorRun::not_run(
                        code,
                        format!("the jars could not be downloaded: {why}"),
                    );
                }
            }
        }
    };
    match doctor::diagnose(image, context, added).await {
        Ok(d) => DoctorRun {
            code: if d.has_errors() {
                ExitCode::Doctor
            } else {
                ExitCode::Ok
            },
            text: format!("\n{}", d.text()),
            diagnosis: Some(d),
            error: None,
        },
        Err(why) => DoctorRun::not_run(ExitCode::Config, format!("{why} ({})", image.named_by)),
    }
}

/// The tree `--packages` resolved to, as `mvn dependency:tree` draws it, and
/// where each jar comes from.
fn describe_packages(r: &crate::maven::Resolution) -> String {
    let mut text = format!("packages (repositories: {}):\n", r.repositories.join(", "));
    for line in &r.tree {
        let _ = writeln!(text, "  {line}");
    }
    for jar in &r.jars {
        let _ = writeln!(
            text,
            "  jar {} from {}{}",
            jar.coord.spark_name(),
            jar.repo,
            if jar.sha1.is_some() {
                " (sha1 published)"
            } else {
                " (no sha1 published)"
            }
        );
    }
    text
}

/// Writes to stdout, control characters (from untrusted names and values) escaped
/// but line breaks kept; a closed pipe (`check | head`) is not an error.
fn out(text: &str) {
    use std::io::Write;
    let text = crate::util::text::terminal_safe(text);
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// The resolved plan and settings, with origins; credentials by name only.
fn describe(s: &Settings, plan: &Plan, sources: &Sources, origins: &ArgOrigins) -> String {
    let mut out = String::new();
    describe_settings(&mut out, s, origins);
    describe_credentials(&mut out, s, plan, sources);
    describe_plan(&mut out, plan);
    out
}

/// One line per setting: its value and where it came from (the settings table's
/// labels, flags and environment twins).
fn describe_settings(out: &mut String, s: &Settings, origins: &ArgOrigins) {
    let _ = writeln!(out, "settings:");
    if let Some(p) = &s.properties_file {
        let _ = writeln!(out, "  properties file  {}", p.display());
    }
    let from = |setting: &Setting| origins.origin(setting.id, setting.env);
    let rows: [(&Setting, String, Origin); 16] = [
        (
            &table::JARS_DIR,
            s.jars_dir.value.display().to_string(),
            s.jars_dir.origin.clone(),
        ),
        (
            &table::FILES_DIR,
            s.files_dir.value.display().to_string(),
            s.files_dir.origin.clone(),
        ),
        (
            &table::DEADLINE,
            format_duration(s.deadline.value),
            s.deadline.origin.clone(),
        ),
        (
            &table::PARALLELISM,
            if s.parallelism_max > s.parallelism {
                format!(
                    "one per artifact to start, {} to {}",
                    s.parallelism, s.parallelism_max
                )
            } else {
                s.parallelism.to_string()
            },
            from(&table::PARALLELISM),
        ),
        (
            &table::RETRIES,
            s.retries.to_string(),
            from(&table::RETRIES),
        ),
        (
            &table::RETRY_DELAY,
            format_duration(s.retry_delay),
            from(&table::RETRY_DELAY),
        ),
        (
            &table::STALL_TIMEOUT,
            format_duration(s.stall_timeout),
            from(&table::STALL_TIMEOUT),
        ),
        (
            &table::CONNECT_TIMEOUT,
            format_duration(s.http.connect_timeout),
            from(&table::CONNECT_TIMEOUT),
        ),
        (&table::FSYNC, s.fsync.to_string(), from(&table::FSYNC)),
        (
            &table::NO_PROGRESS,
            s.no_progress.to_string(),
            from(&table::NO_PROGRESS),
        ),
        (
            &table::PROGRESS_INTERVAL,
            format_duration(s.progress_interval),
            from(&table::PROGRESS_INTERVAL),
        ),
        (
            &table::CLASSPATH_FILE,
            s.classpath_file.display().to_string(),
            from(&table::CLASSPATH_FILE),
        ),
        (
            &table::ENV_FILE,
            s.env_file.display().to_string(),
            from(&table::ENV_FILE),
        ),
        (
            &table::REPORT,
            s.report.display().to_string(),
            from(&table::REPORT),
        ),
        match &s.sbom {
            Some(path) => (&table::SBOM, path.display().to_string(), from(&table::SBOM)),
            None => (&table::SBOM, "none".to_owned(), from(&table::NO_SBOM)),
        },
        (
            &table::TERMINATION_LOG,
            s.termination_log
                .as_ref()
                .map_or("none".to_owned(), |p| p.display().to_string()),
            from(&table::TERMINATION_LOG),
        ),
    ];
    for (setting, value, origin) in rows {
        // A value from a properties file may hold a line break: one line each.
        let value = crate::util::text::escape_controls(&value);
        let _ = writeln!(out, "  {:<16} {value}  ({origin})", setting.label);
    }
    match &s.checksums {
        Some(c) => {
            let _ = writeln!(
                out,
                "  {:<16} {} pin(s)  ({})",
                table::CHECKSUMS.label,
                c.value.len(),
                c.origin
            );
        }
        None => {
            let _ = writeln!(out, "  {:<16} none", table::CHECKSUMS.label);
        }
    }
    describe_package_settings(out, s, origins);
}

/// `--packages` and its companions, when packages or a lock are given.
fn describe_package_settings(out: &mut String, s: &Settings, origins: &ArgOrigins) {
    let from = |setting: &Setting| origins.origin(setting.id, setting.env);
    if let Some(lock) = &s.packages.lock {
        let _ = writeln!(
            out,
            "  {:<16} {}  ({})",
            table::LOCK.label,
            lock.value.display(),
            lock.origin
        );
        describe_lock_signers(out, s);
    }
    describe_trust(out, s, origins);
    let Some(request) = &s.packages.request else {
        return;
    };
    let packages: Vec<String> = request.packages.iter().map(ToString::to_string).collect();
    let _ = writeln!(
        out,
        "  {:<16} {}  ({})",
        table::PACKAGES.label,
        packages.join(","),
        s.packages.origin
    );
    let repositories: Vec<String> = request.repositories.iter().map(|r| r.shown()).collect();
    let _ = writeln!(
        out,
        "  {:<16} {}  ({}, {})",
        table::REPOSITORIES.label,
        repositories.join(" "),
        from(&table::REPOSITORIES),
        if from(&table::ONLY_REPOSITORIES) == Origin::Default {
            "after Maven Central and spark-packages"
        } else {
            "--only-repositories"
        }
    );
    if !request.excludes.is_empty() {
        let excludes: Vec<String> = request.excludes.iter().map(ToString::to_string).collect();
        let _ = writeln!(
            out,
            "  {:<16} {}  ({})",
            table::EXCLUDE_PACKAGES.label,
            excludes.join(","),
            from(&table::EXCLUDE_PACKAGES)
        );
    }
    let _ = writeln!(
        out,
        "  {:<16} {}  ({})",
        table::RESOLUTION.label,
        match request.mode {
            crate::maven::Mode::Spark => "spark (the latest revision wins, as Spark's --packages)",
            crate::maven::Mode::Maven => "maven (the nearest wins)",
        },
        from(&table::RESOLUTION)
    );
}

/// Who signed each jar of the lock (`resolve --verify-signatures` wrote it).
fn describe_lock_signers(out: &mut String, s: &Settings) {
    use crate::maven::signatures::Check;
    let Some(locked) = &s.packages.locked else {
        return;
    };
    if locked.jars.iter().all(|j| j.signature.is_none()) {
        return;
    }
    let _ = writeln!(out, "  {:<16} (from the lock)", "signers");
    for jar in &locked.jars {
        let said = match &jar.signature {
            Some(Check::Signed(signer)) => format!("signed by {signer}"),
            Some(Check::Unverified(why)) => format!("UNVERIFIED: {why}"),
            None => "not checked".to_owned(),
        };
        let _ = writeln!(out, "    {}  {said}", jar.coord);
    }
}

/// `--verify-signatures` and every key `--trusted-keys` gave, by fingerprint.
fn describe_trust(out: &mut String, s: &Settings, origins: &ArgOrigins) {
    use crate::maven::signatures::Mode;
    let Some(trust) = &s.packages.trust else {
        return;
    };
    let from = |setting: &Setting| origins.origin(setting.id, setting.env);
    let _ = writeln!(
        out,
        "  {:<16} {}  ({})",
        table::VERIFY_SIGNATURES.label,
        match trust.mode {
            Mode::Off => "off",
            Mode::Warn => "warn (an unverified POM or jar is said and counted)",
            Mode::Require => "require (an unverified POM or jar fails the run, exit 4)",
        },
        from(&table::VERIFY_SIGNATURES)
    );
    for file in &trust.files {
        let _ = writeln!(
            out,
            "  {:<16} {} ({}; {})",
            table::TRUSTED_KEYS.label,
            file.path.display(),
            file.group
                .as_deref()
                .map_or("for every group".to_owned(), |g| format!(
                    "for {g} and its subgroups"
                )),
            from(&table::TRUSTED_KEYS)
        );
        for key in &file.keys {
            let _ = writeln!(
                out,
                "    {}  {}",
                key.fingerprint,
                key.user_ids.first().map_or("(no user id)", String::as_str)
            );
        }
    }
}

/// The credentials and trust each source picked, by name only.
fn describe_credentials(out: &mut String, s: &Settings, plan: &Plan, sources: &Sources) {
    let _ = writeln!(out, "credentials (values never shown):");
    let mut any = false;
    if let Some(path) = &s.header_file {
        let names: Vec<_> = s
            .http
            .headers
            .iter()
            .map(|(n, _)| n.as_str().to_owned())
            .collect();
        let _ = writeln!(
            out,
            "  http headers     {} from {}",
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            },
            path.display()
        );
        any = true;
    }
    for a in &plan.artifacts {
        let http = matches!(
            a.scheme,
            crate::source::Scheme::Http | crate::source::Scheme::Https
        );
        if http && (!a.uri.username().is_empty() || a.uri.password().is_some()) {
            let _ = writeln!(
                out,
                "  basic auth       from the userinfo of {}",
                a.display_uri
            );
            any = true;
        }
    }
    for ca in &s.http.ca_files {
        let _ = writeln!(
            out,
            "  trusted CA       {}  ({})",
            ca.path.display(),
            ca.origin
        );
        any = true;
    }
    for var in env::PROXY_VARS {
        if std::env::var_os(var).is_some_and(|v| !v.is_empty()) {
            let _ = writeln!(out, "  proxy            {var} is set");
            any = true;
        }
    }
    for line in sources.describe() {
        let _ = writeln!(out, "{line}");
        any = true;
    }
    if !any {
        let _ = writeln!(out, "  none found");
    }
}

/// `--mirror`: whether it answers, and which artifacts `fetch` would ask of it.
async fn describe_mirror(
    mirror: &crate::source::mirror::MirrorSource,
    plan: &Plan,
    sources: &Sources,
) -> String {
    let mut out = format!("mirror {}: ", mirror.shown());
    match mirror.health().await {
        Ok(took) => {
            let _ = writeln!(out, "healthy (/healthz in {})", format_duration(took));
        }
        Err(why) => {
            let _ = writeln!(
                out,
                "UNREACHABLE ({why}); fetch would warn once and take every artifact from its origin"
            );
        }
    }
    for a in plan
        .artifacts
        .iter()
        .filter(|a| matches!(a.target, Target::Fetch { .. }))
    {
        let route = if sources
            .via_mirror(a.scheme, &a.uri, a.pin.as_ref())
            .is_some()
        {
            if a.pin.is_some() {
                "asked of the mirror first (pinned: served by digest when held)"
            } else {
                "asked of the mirror first (revalidated with the origin when held)"
            }
        } else {
            "from its origin (fetched with credentials, or a scheme the mirror does not serve)"
        };
        let _ = writeln!(out, "  {}: {route}", a.display_uri);
    }
    out
}

/// Every artifact of the plan: what it is, where it goes, where it was declared.
fn describe_plan(out: &mut String, plan: &Plan) {
    let n = plan.artifacts.len();
    let _ = writeln!(out, "plan ({n} artifact{}):", if n == 1 { "" } else { "s" });
    for (i, a) in plan.artifacts.iter().enumerate() {
        let dest = match &a.target {
            Target::Fetch { .. } if a.is_bundle() => {
                format!("{}/ (the bundle's files)", a.visible().display())
            }
            Target::Fetch { .. } if a.unpack.is_some() => {
                format!("{} (unpacked)", a.visible().display())
            }
            Target::Fetch { path, .. } => path.display().to_string(),
            Target::Local { path } => format!("{} (in the image, not fetched)", path.display()),
        };
        let pin = if a.pin.is_some() { ", pinned" } else { "" };
        let _ = writeln!(
            out,
            "  {:>3}. {} {}\n       -> {dest}  ({}{pin})",
            i + 1,
            a.kind,
            a.display_uri,
            a.origin
        );
        if let Some(oci) = &a.oci {
            let _ = writeln!(out, "       layer {} of {}", oci.layer, oci.digest);
        }
    }
}

/// One probe's result, as `check` prints it.
#[derive(Debug, serde::Serialize)]
struct Probe {
    uri: String,
    ok: bool,
    detail: String,
}

impl Probe {
    fn failed(why: &str) -> Probe {
        Probe {
            uri: String::new(),
            ok: false,
            detail: why.to_owned(),
        }
    }
}

/// The probes as text: `ok` or `FAIL`, the URI, what was found.
fn probes_text(probes: &[Probe]) -> String {
    let mut out = String::from("probes:\n");
    for p in probes {
        let status = if p.ok { "ok  " } else { "FAIL" };
        if p.uri.is_empty() {
            let _ = writeln!(out, "  {status}  {}", p.detail);
        } else {
            let _ = writeln!(out, "  {status}  {}: {}", p.uri, p.detail);
        }
    }
    out
}

/// Probes every artifact in parallel, in plan order.
async fn probe_all(
    plan: &Plan,
    sources: &Sources,
    parallelism: usize,
    limit: Duration,
) -> Vec<Probe> {
    let results: Vec<(usize, Result<String, String>)> =
        futures_util::stream::iter(plan.artifacts.iter().enumerate())
            .map(|(i, a)| async move {
                let Some(source) = sources.get(a.scheme) else {
                    return (i, Ok("skipped: local:// is inside the image".to_owned()));
                };
                let result = match tokio::time::timeout(limit, source.probe(&a.uri)).await {
                    Err(_) => Err(format!("no answer within {}", format_duration(limit))),
                    Ok(Err(e)) => Err(e.describe()),
                    Ok(Ok(p)) => {
                        let mut line = format!(
                            "{}, size {}, ranges {}",
                            p.status,
                            p.meta
                                .size
                                .map_or("unknown".to_owned(), |s| format!("{s} bytes")),
                            if p.meta.ranges { "yes" } else { "no" }
                        );
                        if let Some(to) = p.redirected_to {
                            let _ = write!(line, ", redirected to {to}");
                        }
                        Ok(line)
                    }
                };
                (i, result)
            })
            .buffered(parallelism)
            .collect()
            .await;
    results
        .into_iter()
        .map(|(i, result)| {
            let a = &plan.artifacts[i];
            match result {
                Ok(detail) => Probe {
                    uri: a.display_uri.clone(),
                    ok: true,
                    detail,
                },
                Err(why) => {
                    let why = crate::util::redact::scrub(&why);
                    // Source errors already start with the URI.
                    let detail = why
                        .strip_prefix(&format!("{}: ", a.display_uri))
                        .unwrap_or(&why)
                        .to_owned();
                    Probe {
                        uri: a.display_uri.clone(),
                        ok: false,
                        detail,
                    }
                }
            }
        })
        .collect()
}
