//! The classpath doctor in the commands: which image (`--spark-home`,
//! `--spark-jars`, `check`'s SPARK_HOME), which added jars (what a run put in
//! place, an earlier `fetch`'s outputs, or a download into a temporary
//! directory for `check`), and the diagnosis off the async threads.

use std::path::{Path, PathBuf};

use tracing::{error, info, warn};

use crate::cli::{ArgOrigins, FetchArgs};
use crate::config::Settings;
use crate::doctor::{self, AddedPath, Diagnosis, Image, Reach, Severity};
use crate::engine::{self, Outcome};
use crate::env_vars as env;
use crate::plan::{self, Kind, Plan};
use crate::source::Sources;

/// The image's jars directory and how it was named (`--spark-home`, `SPARK_HOME`…).
pub(crate) struct ImageDir {
    pub jars: PathBuf,
    pub named_by: String,
}

/// The image's jars directory: `--spark-jars` (or `--doctor-jars`), else
/// `--spark-home`'s `jars/`, else (for `check` only) `$SPARK_HOME/jars` when it
/// exists. `Err` is a configuration problem naming the flag.
pub(crate) fn image_dir(
    args: &FetchArgs,
    origins: &ArgOrigins,
    check: bool,
) -> Result<Option<ImageDir>, String> {
    let named = |id: &'static str, var: &'static str| origins.origin(id, var).to_string();
    let (jars, named_by) = match (&args.spark_jars, &args.spark_home) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "invalid {} and {}: give the image's SPARK_HOME or its jars directory, not both",
                named("spark_home", env::SPARK_HOME),
                named("spark_jars", env::SPARK_JARS)
            ))
        }
        (Some(dir), None) => (dir.clone(), spark_jars_named(named("spark_jars", env::SPARK_JARS))),
        (None, Some(home)) => (home.join("jars"), named("spark_home", env::SPARK_HOME)),
        (None, None) if check => {
            let Some(home) = std::env::var_os(env::SPARK_HOME_DEFAULT).filter(|h| !h.is_empty())
            else {
                return Ok(None);
            };
            // A default is not fatal: without jars there, the doctor is skipped.
            let jars = PathBuf::from(home).join("jars");
            if count_jars(&jars).unwrap_or(0) == 0 {
                warn!(
                    "SPARK_HOME has no jars ({}): the classpath doctor is skipped; give --spark-home",
                    jars.display()
                );
                return Ok(None);
            }
            (jars, env::SPARK_HOME_DEFAULT.to_owned())
        }
        (None, None) if args.doctor_strict => {
            return Err(format!(
                "invalid {}: the classpath doctor needs the image's jars: add --doctor-jars DIR (or --spark-home DIR)",
                named("doctor_strict", env::DOCTOR_STRICT)
            ))
        }
        (None, None) => return Ok(None),
    };
    match count_jars(&jars) {
        Err(e) => Err(format!(
            "invalid {named_by}: cannot read {}: {e}; point it at the image's Spark (SPARK_HOME holds jars/)",
            jars.display()
        )),
        Ok(0) => Err(format!(
            "invalid {named_by}: {} holds no .jar files; point it at the image's Spark (SPARK_HOME holds jars/)",
            jars.display()
        )),
        Ok(_) => Ok(Some(ImageDir { jars, named_by })),
    }
}

/// How many `*.jar` files `dir` holds (as the doctor will read them).
fn count_jars(dir: &Path) -> std::io::Result<usize> {
    Ok(crate::doctor::image::jar_paths(dir)?.0.len())
}

/// `--spark-jars` as the user spelled it: `--doctor-jars` is its alias.
fn spark_jars_named(named: String) -> String {
    let alias = std::env::args_os().any(|a| {
        let a = a.to_string_lossy();
        a == "--doctor-jars" || a.starts_with("--doctor-jars=")
    });
    if alias && named == "--spark-jars" {
        "--doctor-jars".to_owned()
    } else {
        named
    }
}

/// The doctor's input besides the jars: the properties naming classes, and the
/// properties' `spark.jars` entries this run does not localize.
pub(crate) struct Context {
    properties: Vec<(String, String)>,
    uninspected: Vec<String>,
}

impl Context {
    pub(crate) fn of(settings: &Settings) -> Context {
        let Some(props) = &settings.properties else {
            return Context {
                properties: Vec::new(),
                uninspected: Vec::new(),
            };
        };
        let from_properties = settings
            .jars
            .iter()
            .any(|d| matches!(d.origin, crate::origin::Origin::Properties { .. }));
        let uninspected = if from_properties {
            Vec::new()
        } else {
            props
                .get("spark.jars")
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|u| !u.is_empty() && !settings.jars.iter().any(|d| d.uri == *u))
                .map(crate::util::redact::redact_url)
                .collect()
        };
        Context {
            properties: doctor::class_properties(props),
            uninspected,
        }
    }
}

/// Runs the doctor over `added` (blocking work on the blocking pool).
pub(crate) async fn diagnose(
    image: &ImageDir,
    context: Context,
    added: Vec<AddedPath>,
) -> Result<Diagnosis, String> {
    let Context {
        properties,
        uninspected,
    } = context;
    let dir = image.jars.clone();
    let image_root = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
    // A local:// jar of the image's own directory is the image's, not added.
    let added: Vec<AddedPath> = added
        .into_iter()
        .filter(|a| {
            std::fs::canonicalize(&a.path)
                .map_or(true, |p| p.parent() != Some(image_root.as_path()))
        })
        .collect();
    tokio::task::spawn_blocking(move || {
        let image = Image::read(&dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        Ok(doctor::diagnose(doctor::Input {
            image: &image,
            added,
            properties,
            uninspected,
        }))
    })
    .await
    .map_err(|e| format!("the classpath doctor failed: {e}"))?
}

/// The jars a run put in place and how each reaches the JVM: the classpath
/// entries (in order), then jars given as files and an archive's top-level jars
/// (without `--archive-classpath`), which are on no classpath.
pub(crate) fn added_by_run(
    settings: &Settings,
    plan: &Plan,
    outcomes: &[Outcome],
) -> Vec<AddedPath> {
    let mut added: Vec<AddedPath> = classpath_entries(settings, plan, outcomes)
        .into_iter()
        .map(|path| AddedPath {
            path,
            reach: Reach::Classpath,
        })
        .collect();
    for (a, o) in plan.artifacts.iter().zip(outcomes) {
        let off: Vec<PathBuf> = match (&a.kind, &a.unpack) {
            (Kind::File, None) if is_jar(&a.name) => vec![a.target.path().to_owned()],
            (Kind::Archive, Some(u)) if !u.flat && !settings.archive_classpath => {
                engine::top_level_jars(&u.into)
            }
            _ => Vec::new(),
        };
        if o.failure.is_none() {
            added.extend(off.into_iter().map(|path| AddedPath {
                path,
                reach: Reach::NotOnClasspath,
            }));
        }
    }
    added
}

fn is_jar(name: &str) -> bool {
    name.to_ascii_lowercase().ends_with(".jar")
}

/// The classpath fragment's entries: jars in declared order (local:// ones at
/// their path in the image); with --archive-classpath, an archive's top-level
/// jars at the archive's place; a staging jars bundle's jars in the bundle's
/// order, at the bundle's place.
pub(crate) fn classpath_entries(
    settings: &Settings,
    plan: &Plan,
    outcomes: &[Outcome],
) -> Vec<PathBuf> {
    plan.artifacts
        .iter()
        .zip(outcomes)
        .flat_map(|(a, o)| match (&a.kind, &a.unpack) {
            (Kind::Jar, Some(unpack)) if unpack.flat => o.content_jars.clone(),
            (Kind::Jar, Some(unpack)) if unpack.strip.is_some() => vec![unpack.into.clone()],
            (Kind::Jar, _) => vec![a.target.path().to_owned()],
            (Kind::Archive, Some(_)) if settings.archive_classpath => o.content_jars.clone(),
            _ => Vec::new(),
        })
        .collect()
}

/// For `fetch`: the findings logged (errors as errors under `--doctor-strict`,
/// else as warnings).
pub(crate) fn log(d: &Diagnosis, strict: bool) {
    info!(
        "classpath doctor: {} added jar(s) against {} ({})",
        d.added.len(),
        crate::util::text::escape_controls(&d.image.dir.display().to_string()),
        d.image.versions.shown()
    );
    use crate::util::text::escape_controls as shown;
    for f in &d.findings {
        let classes = if f.classes.is_empty() {
            String::new()
        } else {
            format!(" [{}]", shown(&f.classes.join(", ")))
        };
        let (message, advice) = (shown(&f.message), shown(&f.advice));
        match f.severity {
            Severity::Error if strict => {
                error!("doctor {}: {message}{classes}; fix: {advice}", f.id)
            }
            Severity::Error | Severity::Warning => {
                warn!("doctor {}: {message}{classes}; fix: {advice}", f.id)
            }
            Severity::Note => info!("doctor {}: {message}", f.id),
        }
    }
}

/// For `check`: the added jars as an earlier successful `fetch` left them, when
/// its report covers exactly this plan and its classpath file is ours.
pub(crate) fn added_by_earlier_fetch(settings: &Settings, plan: &Plan) -> Option<Vec<AddedPath>> {
    let report = crate::util::fs::read_regular(&settings.report, 64 << 20).ok()?;
    let report: serde_json::Value = serde_json::from_slice(&report).ok()?;
    if report.get("ok")? != &serde_json::Value::Bool(true) {
        return None;
    }
    let artifacts = report.get("artifacts")?.as_array()?;
    let mut reported: Vec<&str> = artifacts
        .iter()
        .filter_map(|a| a.get("uri")?.as_str())
        .collect();
    let mut planned: Vec<&str> = plan
        .artifacts
        .iter()
        .map(|a| a.display_uri.as_str())
        .collect();
    reported.sort_unstable();
    planned.sort_unstable();
    if reported != planned || !crate::output::written_by_us(&settings.classpath_file, false) {
        return None;
    }
    let text = std::fs::read_to_string(&settings.classpath_file).ok()?;
    let mut added: Vec<AddedPath> = text
        .trim_end_matches('\n')
        .split(':')
        .filter(|e| !e.is_empty())
        .map(|e| AddedPath {
            path: PathBuf::from(e),
            reach: Reach::Classpath,
        })
        .collect();
    for a in artifacts {
        let (Some(kind), Some(dest)) = (a.get("kind")?.as_str(), a.get("destination")?.as_str())
        else {
            continue;
        };
        if kind == "file" && is_jar(dest) {
            added.push(AddedPath {
                path: PathBuf::from(dest),
                reach: Reach::NotOnClasspath,
            });
        }
    }
    // Every file must still be there, or the fetch is not "done" any more.
    added.iter().all(|a| a.path.is_file()).then_some(added)
}

/// For `check`: downloads the plan's jars (and jars given as files) into a
/// temporary directory, removed afterwards, with the same sources, pins and
/// limits as `fetch`; nothing is written in the output directories. Returns the
/// added jars and the temporary directory (removed when dropped), or why not.
pub(crate) async fn download(
    mut settings: Settings,
    options: engine::Options,
    sources: &Sources,
) -> Result<(Vec<AddedPath>, tempfile::TempDir), (crate::cmd::exit::ExitCode, String)> {
    use crate::cmd::exit::ExitCode;
    let tmp = tempfile::Builder::new()
        .prefix("spark-localizer-doctor.")
        .tempdir()
        .map_err(|e| (ExitCode::LocalIo, format!("cannot create a temporary directory for the doctor's downloads: {e}; set TMPDIR")))?;
    retarget(&mut settings, tmp.path());
    let mut plan = plan::build(&settings).map_err(|e| (ExitCode::Config, e.problems.join("; ")))?;
    // Jars, jars given as files, and archives (their jars are on the classpath
    // with --archive-classpath, on none without: either way a finding).
    let jars_only = |a: &plan::Artifact| match a.kind {
        Kind::Jar | Kind::Archive => true,
        Kind::File => a.unpack.is_none() && is_jar(&a.name),
    };
    plan.artifacts.retain(jars_only);
    let fetched = plan
        .artifacts
        .iter()
        .filter(|a| matches!(a.target, plan::Target::Fetch { .. }))
        .count();
    if fetched > 0 {
        info!(
            "classpath doctor: downloading {fetched} artifact(s) into {} (removed afterwards)",
            tmp.path().display()
        );
    }
    let run = engine::run(
        &plan,
        sources,
        &options,
        std::sync::Arc::new(crate::progress::Silent),
    )
    .await;
    let mut code = ExitCode::Ok;
    let mut failures = Vec::new();
    for o in &run.outcomes {
        if let Some(f) = &o.failure {
            code = code.worst(ExitCode::from(f.kind));
            failures.push(f.message.clone());
        }
    }
    if !failures.is_empty() {
        return Err((code, failures.join("; ")));
    }
    let added = added_by_run(&settings, &plan, &run.outcomes);
    drop(run);
    Ok((added, tmp))
}

/// Points every directory and output of `settings` into `dir`.
fn retarget(settings: &mut Settings, dir: &Path) {
    settings.jars_dir.value = dir.join("jars");
    settings.files_dir.value = dir.join("files");
    settings.classpath_file = dir.join("jars/classpath");
    settings.env_file = dir.join("jars/spark-classpath.env");
    settings.report = dir.join("jars/report.json");
    settings.termination_log = None;
    settings.no_progress = true;
}
