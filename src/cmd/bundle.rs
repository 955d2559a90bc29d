//! `spark-localizer bundle`: localize and verify as `fetch` does, into a
//! directory of its own, then push what it laid out as a reproducible OCI
//! image (one layer per jar, file or unpacked archive; a last layer with the
//! classpath outputs written for `--mount-path`) and print its digest
//! reference, for pods that mount it as an image volume.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures_util::TryStreamExt as _;
use tracing::info;

use crate::cli::{ArgOrigins, BundleArgs, FetchArgs, LogFormat};
use crate::cmd::deadline::Phase;
use crate::cmd::exit::ExitCode;
use crate::cmd::fetch::{config_failure, stop_on_signals, stopped};
use crate::cmd::oci::retrying;
use crate::config::{Problems, Settings};
use crate::fault::{FaultKind, SourceError};
use crate::layout;
use crate::oci::auth::AuthFile;
use crate::oci::image::{self, Content, Layer};
use crate::oci::{Reference, Registry};
use crate::output;
use crate::retry::{Backoff, RetryPolicy};

/// The SBOM `fetch` writes, carried into the image as is.
const SBOM_FILE: &str = crate::layout::SBOM_FILE;

/// What a bundle is made from, checked before any traffic.
struct Job {
    target: Reference,
    mount: String,
    /// The working directory (canonical), removed with `_work`, locked by
    /// `_owner` while this bundle runs.
    root: PathBuf,
    _work: tempfile::TempDir,
    _owner: std::fs::File,
    /// `fetch`'s arguments, laying out under `root`.
    fetch: FetchArgs,
    settings: Settings,
    registry: Registry,
}

/// Runs `bundle` and returns the exit code.
pub(crate) async fn run(
    args: &BundleArgs,
    origins: &ArgOrigins,
    log_format: LogFormat,
) -> ExitCode {
    let Job {
        target,
        mount,
        root,
        _work,
        _owner,
        fetch,
        settings,
        registry,
    } = match job(args, origins) {
        Ok(job) => job,
        Err(problems) => return config_failure(&args.fetch, &problems, true),
    };
    let cancel = stop_on_signals();
    let code = super::fetch::run_until(&fetch, origins, log_format, cancel.clone()).await;
    if code != ExitCode::Ok {
        return code;
    }
    // The layers: CPU-bound (gzip), on a blocking thread, within the deadline.
    let stop = Arc::new(AtomicBool::new(false));
    let packing = {
        let (root, mount, stop) = (root.clone(), mount.clone(), stop.clone());
        move || pack(&root, &mount, &stop)
    };
    let packed = crate::cmd::deadline::within_blocking(
        &settings,
        Some(&cancel),
        ("the image's layers", Phase::Writing),
        packing,
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    let layers = match packed {
        Ok(Ok(layers)) => layers,
        Ok(Err((code, message))) => return stopped(&args.fetch, code, &message, true),
        Err((code, message)) => return stopped(&args.fetch, code, &message, true),
    };
    let image = image::image(
        &layers,
        &[
            ("org.opencontainers.image.title", "spark-localizer bundle"),
            ("io.github.spark-localizer.mount-path", &mount),
        ],
    );
    let shown = format!("oci://{}/{}", target.registry, target.repository);
    let pushing = push(&registry, &settings, &target, &layers, &image);
    let pushed = crate::cmd::deadline::stoppable(
        settings.deadline.value,
        Some(&cancel),
        (&shown, Phase::Pushing),
        pushing,
    );
    match pushed.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            let code = if e.kind == FaultKind::Integrity {
                ExitCode::Integrity
            } else {
                ExitCode::Fetch
            };
            let message = format!("cannot push {shown}: {}", e.describe());
            return stopped(&args.fetch, code, &message, true);
        }
        Err((code, message)) => return stopped(&args.fetch, code, &message, true),
    }
    let reference = format!(
        "{}/{}@{}",
        target.registry, target.repository, image.index.digest
    );
    info!(
        "pushed {shown}:{} ({} layer{}): mount {reference} at {mount}",
        target.reference(),
        layers.len(),
        if layers.len() == 1 { "" } else { "s" }
    );
    println!("{reference}");
    ExitCode::Ok
}

/// The target, the mount path, the working directory, `fetch`'s settings and
/// the registry client: every problem with them, before any traffic.
fn job(args: &BundleArgs, origins: &ArgOrigins) -> Result<Job, Problems> {
    let mut problems = Problems::default();
    let target = target(&args.target, &mut problems);
    let mount = mount_path(&args.mount_path, &mut problems);
    for (id, flag) in [
        ("jars_dir", "--jars-dir"),
        ("files_dir", "--files-dir"),
        ("classpath_file", "--classpath-file"),
        ("env_file", "--env-file"),
        ("sbom", "--sbom"),
        ("report", "--report"),
    ] {
        if origins.is_explicit(id) {
            problems.push_message(format!(
                "{flag} is not for bundle: it lays out a directory of its own, and the image holds the classpath outputs and the SBOM at its root, naming the files under --mount-path"
            ));
        }
    }
    let work = work_dir().map_err(|e| {
        problems.push_message(format!(
            "cannot make a working directory in {} (TMPDIR): {e}",
            std::env::temp_dir().display()
        ))
    });
    let (Some(target), Some(mount), Ok((root, work, owner)), true) =
        (target, mount, work, problems.is_empty())
    else {
        return Err(problems);
    };
    let mut fetch = args.fetch.clone();
    fetch.jars_dir = Some(root.join("jars"));
    fetch.files_dir = Some(root.join("files"));
    // The image's SBOM (unless --no-sbom), wherever --sbom would put fetch's.
    fetch.sbom = Some(root.join(SBOM_FILE));
    let settings = Settings::resolve(&fetch, origins, &mut problems);
    let declared = [&settings.jars, &settings.files, &settings.archives]
        .iter()
        .any(|list| !list.is_empty())
        || settings.packages.request.is_some();
    let files = settings.files.len() + settings.archives.len();
    if files >= MAX_LAYERS {
        problems.push_message(too_many(files));
    }
    if problems.is_empty() && !declared {
        problems.push_message(
            "nothing to bundle: give --lock, --jars, --files, --archives or --packages (or their SPARK_LOCALIZER_* twins); an image of nothing would start the job without its jars".to_owned(),
        );
    }
    match registry(&settings, &mut problems) {
        Some(registry) if problems.is_empty() => Ok(Job {
            target,
            mount,
            root,
            _work: work,
            _owner: owner,
            fetch,
            settings,
            registry,
        }),
        _ => Err(problems),
    }
}

/// The image's reference: a tag (a digest is what the push makes).
fn target(raw: &str, problems: &mut Problems) -> Option<Reference> {
    let parsed = Reference::parse(raw).map_err(|why| {
        problems.push_message(format!(
            "invalid target: {}; give oci://REGISTRY/REPO:TAG",
            crate::util::redact::scrub(&why)
        ))
    });
    let r = parsed.ok()?;
    // The tag is said, not `latest` by default: pods name the digest, people the tag.
    let tagged = raw
        .rsplit('/')
        .next()
        .is_some_and(|last| last.split('#').next().unwrap_or_default().contains(':'));
    if r.reference().starts_with("sha256:") || r.file.is_some() || !tagged {
        problems.push_message(format!(
            "invalid target {}: give a tag (oci://REGISTRY/REPO:TAG, no #file); bundle prints the digest it pushed",
            crate::util::redact::scrub(raw)
        ));
        return None;
    }
    Some(r)
}

/// `--mount-path` as the classpath outputs will name it: absolute, normal
/// (no `.`, `..` or empty parts), and without `:` (the classpath separator).
fn mount_path(path: &Path, problems: &mut Problems) -> Option<String> {
    let text = path.to_str().unwrap_or_default();
    let normal = text.starts_with('/')
        && text.len() < 4096
        && !text.chars().any(char::is_control)
        && text.len() > 1
        && text[1..]
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..");
    if !normal || text.contains([':', '\n', '\r']) {
        problems.push_message(format!(
            "--mount-path {}: give the absolute path pods mount the image at (no '.', '..', '//', trailing '/', ':' or control characters; under 4096 bytes), e.g. /opt/spark/extra-jars",
            crate::util::text::escape_controls(&path.to_string_lossy())
        ));
        return None;
    }
    Some(text.to_owned())
}

fn registry(settings: &Settings, problems: &mut Problems) -> Option<Registry> {
    let auth = match &settings.oci.auth_file {
        Some((path, origin)) => Some(
            AuthFile::load(path, origin.clone())
                .map_err(|why| problems.push_message(why))
                .ok()?,
        ),
        None => None,
    };
    let client = crate::net::client(&settings.http)
        .map_err(|e| problems.push_message(format!("cannot make the HTTP client: {e}")))
        .ok()?;
    Some(Registry::new(
        client,
        auth,
        settings.oci.insecure.clone(),
        settings.stall_timeout,
    ))
}

/// The layers of what `fetch` laid out under `root`: each jar in classpath
/// order, each file and unpacked archive in name order, then the classpath
/// outputs for `mount` and the SBOM. Written under `root/blobs`.
fn pack(root: &Path, mount: &str, stop: &AtomicBool) -> Result<Vec<Layer>, (ExitCode, String)> {
    let local = |message: String| (ExitCode::LocalIo, message);
    let written = |e: image::PackError| match e {
        image::PackError::Unsupported(_) => (ExitCode::Config, e.to_string()),
        _ => (ExitCode::LocalIo, e.to_string()),
    };
    let blobs = root.join("blobs");
    std::fs::create_dir(&blobs).map_err(|e| local(format!("{}: {e}", blobs.display())))?;
    let mut layers = Vec::new();
    // The jars in classpath order: `fetch` of the image lays them out (and
    // writes its classpath) in the order of its layers.
    let jars = root.join("jars");
    let classpath = std::fs::read_to_string(jars.join(layout::CLASSPATH_FILE)).map_err(|e| {
        local(format!(
            "{}: {e}",
            jars.join(layout::CLASSPATH_FILE).display()
        ))
    })?;
    let positions: std::collections::HashMap<&str, usize> = classpath
        .trim_end()
        .split(':')
        .enumerate()
        .map(|(i, entry)| (entry, i))
        .collect();
    let position = |name: &String| {
        let path = jars.join(name);
        positions.get(&*path.to_string_lossy()).copied()
    };
    let mut names = laid_out(&jars)?;
    names.sort_by_cached_key(|name| (position(name).unwrap_or(usize::MAX), name.clone()));
    let files = laid_out(&root.join("files"))?;
    // What globs and references expanded to is known only now.
    let Some(groups) = jar_groups(names.len(), files.len()) else {
        return Err((ExitCode::Config, too_many(files.len())));
    };
    let mut at = 0;
    for size in groups {
        let group = &names[at..at + size];
        at += size;
        let blob = blobs.join(format!("{}.tar.gz", layers.len()));
        let content = match group {
            [one] => Content::Tree {
                from: &jars.join(one),
                at: &format!("jars/{one}"),
            },
            many => Content::Group {
                dir: &jars,
                names: many,
                at: "jars",
            },
        };
        layers.push(image::write_layer(&content, &blob, stop).map_err(written)?);
    }
    for name in files {
        let blob = blobs.join(format!("{}.tar.gz", layers.len()));
        let from = root.join("files").join(&name);
        let at = format!("files/{name}");
        let content = Content::Tree {
            from: &from,
            at: &at,
        };
        layers.push(image::write_layer(&content, &blob, stop).map_err(written)?);
    }
    let last = outputs(root, mount).map_err(local)?;
    let blob = blobs.join("outputs.tar.gz");
    layers.push(image::write_layer(&Content::Outputs(&last), &blob, stop).map_err(written)?);
    Ok(layers)
}

/// The most layers of files an image gets (its classpath layer is one more):
/// container runtimes stack at most 128 (Docker's overlay2) to 500 (the
/// kernel's overlayfs) layers, and fewer long paths fit a mount's options.
pub(crate) const MAX_LAYERS: usize = 100;

/// How many jars each jars layer holds, in classpath order: one each while
/// every jar and file fits in [`MAX_LAYERS`], else the jars in as many even
/// groups as the layers the files leave (`None` when the files alone take
/// them all).
fn jar_groups(jars: usize, files: usize) -> Option<Vec<usize>> {
    if jars + files <= MAX_LAYERS {
        return Some(vec![1; jars]);
    }
    let layers = MAX_LAYERS.checked_sub(files).filter(|n| *n > 0)?;
    let per = jars.div_ceil(layers);
    let mut groups = vec![per; jars / per];
    if !jars.is_multiple_of(per) {
        groups.push(jars % per);
    }
    Some(groups)
}

fn too_many(files: usize) -> String {
    format!(
        "{files} files and unpacked archives: an image holds at most {} (one layer each, and the jars need one); bundle fewer with --files and --archives, or put them in one archive",
        MAX_LAYERS - 1
    )
}

/// The names `fetch` published in `dir`, sorted: not its outputs or state.
fn laid_out(dir: &Path) -> Result<Vec<String>, (ExitCode, String)> {
    let local = |e: std::io::Error| (ExitCode::LocalIo, format!("{}: {e}", dir.display()));
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(local(e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let name = entry.map_err(local)?.file_name();
        let name = name.into_string().map_err(|n| {
            (
                ExitCode::Config,
                format!("{}: a name that is not UTF-8: {n:?}", dir.display()),
            )
        })?;
        if layout::OUTPUT_NAMES.contains(&name.as_str())
            || name.starts_with(layout::RESERVED_PREFIX)
        {
            continue;
        }
        if name.starts_with(image::WHITEOUT) {
            return Err((ExitCode::Config, format!(
                "{}: a name starting with {} is an OCI whiteout (a runtime would hide another file with it); rename it with #alias",
                dir.join(&name).display(),
                image::WHITEOUT
            )));
        }
        names.push(name);
    }
    names.sort();
    Ok(names)
}

/// The working directories' prefix under TMPDIR.
const WORK_PREFIX: &str = "spark-localizer-bundle.";
/// The file in a working directory whose lock says its bundle still runs.
const OWNER: &str = ".owner";

/// A working directory under TMPDIR (canonical), locked for as long as this
/// bundle runs, made after removing the ones bundles that were killed
/// (SIGKILL, the OOM killer) left: their lock is free. The lock is taken
/// before the file has its name, so a sweep never takes a directory being made.
fn work_dir() -> std::io::Result<(PathBuf, tempfile::TempDir, std::fs::File)> {
    sweep(&std::env::temp_dir());
    let work = tempfile::Builder::new().prefix(WORK_PREFIX).tempdir()?;
    let making = work.path().join(".owner-new");
    let owner = std::fs::File::create(&making)?;
    owner.try_lock()?;
    std::fs::rename(&making, work.path().join(OWNER))?;
    Ok((work.path().canonicalize()?, work, owner))
}

/// Removes the working directories in `tmp` whose bundle is gone. One without
/// the lock file is left alone (being made, or not ours).
fn sweep(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(WORK_PREFIX) {
            continue;
        }
        let dir = entry.path();
        let Ok(owner) = std::fs::File::open(dir.join(OWNER)) else {
            continue;
        };
        if owner.try_lock().is_ok() {
            tracing::info!(
                "removing {}: a bundle that was killed left it",
                dir.display()
            );
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                tracing::warn!("cannot remove {}: {e}", dir.display());
            }
        }
    }
}

/// The classpath file and `spark-classpath.env` naming the jars under
/// `mount`, and the SBOM when there is one: the last layer's files.
fn outputs(root: &Path, mount: &str) -> Result<Vec<(String, Vec<u8>)>, String> {
    let jars = root.join("jars");
    let written = jars.join(layout::CLASSPATH_FILE);
    let text =
        std::fs::read_to_string(&written).map_err(|e| format!("{}: {e}", written.display()))?;
    let root_text = root.to_string_lossy();
    let entries: Vec<PathBuf> = text
        .trim_end_matches('\n')
        .split(':')
        .filter(|e| !e.is_empty())
        .map(|entry| match entry.strip_prefix(&*root_text) {
            // Under the working directory: under the mount path in the image.
            Some(rest) if rest.starts_with('/') => PathBuf::from(format!("{mount}{rest}")),
            // A local:// jar the image of the pod already has.
            _ => PathBuf::from(entry),
        })
        .collect();
    let mut files = vec![
        (
            layout::CLASSPATH_FILE.to_owned(),
            output::classpath_text(&entries).into_bytes(),
        ),
        (
            layout::ENV_FILE.to_owned(),
            output::env_text(&entries).into_bytes(),
        ),
    ];
    match std::fs::read(root.join(SBOM_FILE)) {
        Ok(sbom) => files.push((SBOM_FILE.to_owned(), sbom)),
        // --no-sbom.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{}: {e}", root.join(SBOM_FILE).display())),
    }
    files.sort();
    Ok(files)
}

/// Pushes the blobs the repository lacks, each platform's manifest by digest,
/// then the index as the tag.
async fn push(
    registry: &Registry,
    settings: &Settings,
    target: &Reference,
    layers: &[Layer],
    image: &image::Image,
) -> Result<(), SourceError> {
    let (host, repo) = (target.registry.as_str(), target.repository.as_str());
    let policy = RetryPolicy {
        retries: settings.retries,
        backoff: Backoff::new(settings.retry_delay),
    };
    let configs = image
        .configs
        .iter()
        .map(|c| Blob::Bytes(&c.digest, &c.bytes));
    let blobs: Vec<Blob<'_>> = layers.iter().map(Blob::Layer).chain(configs).collect();
    let skipped = std::sync::atomic::AtomicUsize::new(0);
    futures_util::stream::iter(blobs.iter().map(Ok))
        .try_for_each_concurrent(settings.parallelism.max(1), |blob| {
            let (policy, skipped) = (&policy, &skipped);
            async move {
                let digest = blob.digest();
                if retrying(policy, digest, || registry.has_blob(host, repo, digest)).await? {
                    skipped.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                let body = blob.body();
                let size = blob.size();
                retrying(policy, digest, || {
                    registry.push_blob(host, repo, (digest, size), &body)
                })
                .await
            }
        })
        .await?;
    info!(
        "oci://{host}/{repo}: {} blobs pushed, {} already there",
        blobs.len() - skipped.load(Ordering::Relaxed),
        skipped.load(Ordering::Relaxed)
    );
    for manifest in &image.manifests {
        retrying(&policy, &manifest.digest, || {
            registry.push_manifest(host, repo, &manifest.digest, manifest)
        })
        .await?;
    }
    retrying(&policy, target.reference(), || {
        registry.push_manifest(host, repo, target.reference(), &image.index)
    })
    .await
}

/// A blob to push: a layer's file or a config's bytes.
enum Blob<'a> {
    Layer(&'a Layer),
    Bytes(&'a str, &'a [u8]),
}

impl Blob<'_> {
    fn digest(&self) -> &str {
        match self {
            Blob::Layer(l) => &l.digest,
            Blob::Bytes(digest, _) => digest,
        }
    }

    fn size(&self) -> u64 {
        match self {
            Blob::Layer(l) => l.size,
            Blob::Bytes(_, bytes) => bytes.len() as u64,
        }
    }

    fn body(&self) -> Box<crate::oci::client::Body<'static>> {
        match self {
            Blob::Layer(l) => Box::new(crate::oci::push::file_body(l.blob.clone())),
            Blob::Bytes(_, bytes) => {
                let bytes = bytes::Bytes::copy_from_slice(bytes);
                Box::new(move || reqwest::Body::from(bytes.clone()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{jar_groups, MAX_LAYERS};

    #[test]
    fn jars_share_layers_only_past_the_limit_and_in_even_groups() {
        assert_eq!(jar_groups(3, 2), Some(vec![1, 1, 1]));
        assert_eq!(jar_groups(MAX_LAYERS, 0).unwrap().len(), MAX_LAYERS);
        let groups = jar_groups(150, 0).unwrap();
        assert_eq!((groups.len(), groups.iter().sum::<usize>()), (75, 150));
        let groups = jar_groups(2000, 10).unwrap();
        assert!(groups.len() <= 90, "{}", groups.len());
        assert_eq!(groups.iter().sum::<usize>(), 2000);
        assert!(groups.iter().all(|g| *g == 23 || *g == 2000 % 23));
        assert_eq!(jar_groups(5, MAX_LAYERS), None);
        assert_eq!(jar_groups(0, MAX_LAYERS), Some(vec![]));
    }
}
