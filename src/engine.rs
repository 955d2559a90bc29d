//! The fetch engine: bounded parallelism (largest first), streaming with sha256
//! computed while writing, temp file then rename, retries with backoff that
//! resume with ranges, a stall timeout and an overall deadline.
//!
//! Everything here is source-agnostic: sources only produce byte streams.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncSeekExt, AsyncWriteExt, BufWriter};
use tokio::sync::Semaphore;
use tokio::time::{timeout, timeout_at, Instant};
use tracing::{debug, info, warn};

use crate::dest::{self, Record, TempFile};
use crate::duration::format_duration;
use crate::exit::ExitCode;
use crate::plan::{Artifact, Plan, Target};
use crate::progress::Reporter;
use crate::retry::Backoff;
use crate::source::{FaultKind, OpenRequest, Scheme, Source, SourceError, Sources};

/// Write buffer per transfer.
const WRITE_BUFFER: usize = 1 << 20;

/// How the engine behaves.
#[derive(Debug, Clone)]
pub struct Options {
    pub parallelism: usize,
    /// Retries after the first attempt.
    pub retries: u32,
    pub backoff: Backoff,
    pub stall_timeout: Duration,
    pub deadline: Instant,
    /// The configured deadline, for messages.
    pub deadline_len: Duration,
    pub fsync: bool,
    /// Becomes `true` when the process is asked to stop (SIGTERM/SIGINT).
    pub cancel: tokio::sync::watch::Receiver<bool>,
}

/// What happened to one artifact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Downloaded, verified and published.
    Fetched,
    /// Copied from a `file://` URI.
    Copied,
    /// Found complete and correct from an earlier run; not fetched again.
    Kept,
    /// `local://`: in the image, only listed in the classpath.
    Local,
    Failed,
}

/// Why an artifact failed: the exit code it maps to and a message naming the URI.
#[derive(Debug, Clone)]
pub struct Failure {
    pub code: ExitCode,
    pub message: String,
}

/// The outcome of one artifact, index-aligned with the plan.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub status: Status,
    pub bytes: u64,
    pub sha256: Option<String>,
    pub attempts: u32,
    pub duration: Duration,
    pub failure: Option<Failure>,
}

impl Outcome {
    fn new(status: Status) -> Self {
        Outcome {
            status,
            bytes: 0,
            sha256: None,
            attempts: 0,
            duration: Duration::ZERO,
            failure: None,
        }
    }

    fn failed(code: ExitCode, message: String) -> Self {
        Outcome {
            failure: Some(Failure { code, message }),
            ..Outcome::new(Status::Failed)
        }
    }
}

/// Localizes every artifact of `plan`; returns one outcome per artifact, in plan order.
pub async fn run(
    plan: &Plan,
    sources: &Sources,
    opts: &Options,
    reporter: Arc<dyn Reporter>,
) -> Vec<Outcome> {
    let mut outcomes: Vec<Option<Outcome>> = vec![None; plan.artifacts.len()];
    for (i, a) in plan.artifacts.iter().enumerate() {
        if let Target::Local { .. } = a.target {
            outcomes[i] = Some(Outcome::new(Status::Local));
        }
    }

    // Directories: create and lock, sweep partials of killed runs, forget what the plan dropped.
    let mut dirs: Vec<&Path> = Vec::new();
    for a in &plan.artifacts {
        if let Target::Fetch { dir, .. } = &a.target {
            if !dirs.contains(&dir.as_path()) {
                dirs.push(dir);
            }
        }
    }
    let mut _locks = Vec::new();
    for dir in dirs {
        let prepared = match dest::lock_dir(dir, opts.deadline).await {
            Ok(lock) => {
                _locks.push(lock);
                prepare_dir(dir, plan)
            }
            Err(e) => Err(e),
        };
        if let Err(e) = prepared {
            let message = format!(
                "cannot prepare destination directory {}: {e}; check the volume mount and its permissions",
                dir.display()
            );
            for (i, a) in plan.artifacts.iter().enumerate() {
                if matches!(&a.target, Target::Fetch { dir: d, .. } if d == dir) {
                    outcomes[i] = Some(Outcome::failed(ExitCode::LocalIo, message.clone()));
                }
            }
        }
    }

    // A restarted run re-verifies what it finds; correct files are kept.
    let candidates: Vec<usize> = (0..plan.artifacts.len())
        .filter(|&i| outcomes[i].is_none())
        .collect();
    let verified = futures_util::stream::iter(candidates)
        .map(|i| {
            let artifact = plan.artifacts[i].clone();
            async move {
                let kept = tokio::task::spawn_blocking(move || verify_existing(&artifact)).await;
                (i, kept.ok().flatten())
            }
        })
        .buffer_unordered(opts.parallelism)
        .collect::<Vec<_>>()
        .await;
    let mut todo = Vec::new();
    for (i, kept) in verified {
        match kept {
            Some(kept) => {
                let a = &plan.artifacts[i];
                info!(uri = %a.shown, "kept {} from an earlier run (verified)", a.name);
                outcomes[i] = Some(kept);
            }
            None => todo.push(i),
        }
    }
    todo.sort_unstable();

    // Largest first. Sizes only matter when there are more transfers than slots.
    let mut sizes = vec![None; plan.artifacts.len()];
    if todo.len() > opts.parallelism {
        let probes = futures_util::stream::iter(todo.iter().copied())
            .map(|i| {
                let a = &plan.artifacts[i];
                let source = sources.get(a.scheme);
                async move {
                    let source = source?;
                    let probe = timeout(opts.stall_timeout, source.probe(&a.uri)).await;
                    Some((i, probe.ok()?.ok()?.meta.size?))
                }
            })
            .buffer_unordered(opts.parallelism * 2)
            .collect::<Vec<_>>()
            .await;
        for (i, size) in probes.into_iter().flatten() {
            sizes[i] = Some(size);
        }
        todo.sort_by_key(|&i| std::cmp::Reverse(sizes[i].unwrap_or(0)));
    }
    reporter.begin(todo.len(), sizes.iter().flatten().sum());

    let permits = Arc::new(Semaphore::new(opts.parallelism));
    let results = futures_util::stream::iter(todo)
        .map(|i| {
            let a = &plan.artifacts[i];
            let permits = permits.clone();
            let reporter = reporter.clone();
            let size = sizes[i];
            async move {
                let started = Instant::now();
                let trace = Trace::default();
                let work = async {
                    // The permit is held for the whole transfer, not just the request.
                    let _permit = permits.acquire().await.expect("semaphore open");
                    fetch_one(i, a, sources, opts, reporter.as_ref(), size, &trace).await
                };
                let mut cancel = opts.cancel.clone();
                let cancelled = async move {
                    if cancel.wait_for(|stop| *stop).await.is_err() {
                        std::future::pending::<()>().await;
                    }
                };
                let outcome = tokio::select! {
                    done = timeout_at(opts.deadline, work) => done.unwrap_or_else(|_| {
                        trace.failed(
                            ExitCode::Deadline,
                            format!(
                                "{}: deadline of {} passed before it was localized; raise --deadline (or spark.kubernetes.mountdependencies.mountTimeout)",
                                a.shown,
                                format_duration(opts.deadline_len)
                            ),
                        )
                    }),
                    () = cancelled => trace.failed(
                        ExitCode::Interrupted,
                        format!("{}: interrupted by a signal before it was localized", a.shown),
                    ),
                };
                reporter.finish(i);
                (i, Outcome { duration: started.elapsed(), ..outcome })
            }
        })
        .buffer_unordered(plan.artifacts.len().max(1))
        .collect::<Vec<_>>()
        .await;
    for (i, outcome) in results {
        outcomes[i] = Some(outcome);
    }
    outcomes
        .into_iter()
        .map(|o| o.expect("every artifact has an outcome"))
        .collect()
}

/// What an unfinished transfer got to, for the message when it is cut off.
#[derive(Default)]
struct Trace {
    attempts: std::sync::atomic::AtomicU32,
    last_error: std::sync::Mutex<Option<String>>,
}

impl Trace {
    fn failed(&self, code: ExitCode, message: String) -> Outcome {
        let last = self.last_error.lock().expect("lock").take();
        let message = match last {
            Some(last) => format!("{message} (last error: {last})"),
            None => message,
        };
        Outcome {
            attempts: self.attempts.load(std::sync::atomic::Ordering::Relaxed),
            ..Outcome::failed(code, message)
        }
    }
}

/// Removes partial files of earlier runs, and removes files an
/// earlier run published that the plan no longer names.
fn prepare_dir(dir: &Path, plan: &Plan) -> std::io::Result<()> {
    let swept = dest::sweep_partials(dir)?;
    if swept > 0 {
        info!(
            "removed {swept} partial file(s) left in {} by an earlier run",
            dir.display()
        );
    }
    for name in dest::recorded_names(dir) {
        let wanted = plan.artifacts.iter().any(|a| {
            a.name == name && matches!(&a.target, Target::Fetch { dir: d, .. } if d == dir)
        });
        if !wanted {
            info!(
                "removing {name} from {}: an earlier run fetched it, this plan does not name it",
                dir.display()
            );
            dest::remove_record(dir, &name);
            let _ = std::fs::remove_file(dir.join(&name));
        }
    }
    Ok(())
}

/// Keeps a file found at the destination only if it verifies: against the pin if
/// there is one, else against the record of the run that published it.
fn verify_existing(a: &Artifact) -> Option<Outcome> {
    let Target::Fetch { dir, path } = &a.target else {
        return None;
    };
    if !path.is_file() {
        return None;
    }
    let record = dest::read_record(dir, &a.name);
    let (size, digest) = dest::hash_file(path).ok()?;
    let hex_digest = hex::encode(digest);
    let good = match (&a.pin, &record) {
        (Some(pin), _) => *pin == digest,
        (None, Some(r)) => {
            r.uri_sha256 == dest::uri_digest(a.uri.as_str())
                && r.size == size
                && r.sha256 == hex_digest
        }
        (None, None) => false,
    };
    if !good {
        debug!(uri = %a.shown, "{} exists but does not verify; fetching it again", path.display());
        dest::remove_record(dir, &a.name);
        let _ = std::fs::remove_file(path);
        return None;
    }
    if record.is_none() {
        let _ = dest::write_record(dir, &a.name, &new_record(a, size, &hex_digest));
    }
    Some(Outcome {
        bytes: size,
        sha256: Some(hex_digest),
        ..Outcome::new(Status::Kept)
    })
}

fn new_record(a: &Artifact, size: u64, sha256: &str) -> Record {
    Record {
        uri_sha256: dest::uri_digest(a.uri.as_str()),
        size,
        sha256: sha256.to_owned(),
    }
}

/// The state of one transfer across attempts.
struct Transfer {
    file: BufWriter<tokio::fs::File>,
    hasher: Sha256,
    written: u64,
    validator: Option<String>,
    resumable: bool,
    expected: Option<u64>,
}

impl Transfer {
    /// Drops what was received so far (a retry that cannot resume).
    async fn reset(&mut self, id: usize, reporter: &dyn Reporter) -> std::io::Result<()> {
        if self.written == 0 {
            return Ok(());
        }
        self.file.flush().await?;
        let f = self.file.get_mut();
        f.set_len(0).await?;
        f.rewind().await?;
        reporter.rewind(id, self.written);
        self.hasher = Sha256::new();
        self.written = 0;
        Ok(())
    }
}

/// An attempt failed either at the source or on local disk.
enum AttemptError {
    Source(SourceError),
    Local(std::io::Error),
}

impl From<SourceError> for AttemptError {
    fn from(e: SourceError) -> Self {
        AttemptError::Source(e)
    }
}

impl From<std::io::Error> for AttemptError {
    fn from(e: std::io::Error) -> Self {
        AttemptError::Local(e)
    }
}

async fn fetch_one(
    id: usize,
    a: &Artifact,
    sources: &Sources,
    opts: &Options,
    reporter: &dyn Reporter,
    size: Option<u64>,
    trace: &Trace,
) -> Outcome {
    let Target::Fetch { dir, path } = &a.target else {
        return Outcome::new(Status::Local);
    };
    let source = sources
        .get(a.scheme)
        .expect("fetched schemes have a source");
    let local_error = |e: std::io::Error, what: &str| {
        Outcome::failed(
            ExitCode::LocalIo,
            format!(
                "{}: cannot {what} {}: {e}; check free space and permissions of the volume",
                a.shown,
                path.display()
            ),
        )
    };
    let (tmp, file) = match TempFile::create(path).await {
        Ok(pair) => pair,
        Err(e) => return local_error(e, "create a temp file beside"),
    };
    let mut t = Transfer {
        file: BufWriter::with_capacity(WRITE_BUFFER, file),
        hasher: Sha256::new(),
        written: 0,
        validator: None,
        resumable: false,
        expected: None,
    };
    reporter.start(id, &a.name, size);

    let mut attempts = 0;
    loop {
        attempts += 1;
        trace
            .attempts
            .store(attempts, std::sync::atomic::Ordering::Relaxed);
        match attempt(id, a, source.as_ref(), opts, reporter, &mut t).await {
            Ok(()) => break,
            Err(AttemptError::Local(e)) => {
                let mut o = local_error(e, "write");
                o.attempts = attempts;
                return o;
            }
            Err(AttemptError::Source(e)) => {
                if !e.is_transient() || attempts > opts.retries {
                    let code = match e.kind {
                        FaultKind::Integrity => ExitCode::Integrity,
                        _ => ExitCode::Fetch,
                    };
                    let tried = if attempts > 1 {
                        format!(" (after {attempts} attempts)")
                    } else {
                        String::new()
                    };
                    let mut o = Outcome::failed(code, format!("{e}{tried}"));
                    o.attempts = attempts;
                    return o;
                }
                *trace.last_error.lock().expect("lock") = Some(e.to_string());
                let delay = opts.backoff.delay(attempts);
                warn!(
                    uri = %a.shown,
                    "attempt {attempts}/{} failed: {e}; retrying in {}{}",
                    opts.retries + 1,
                    format_duration(delay),
                    if t.resumable && t.written > 0 {
                        format!(", resuming at byte {}", t.written)
                    } else {
                        String::new()
                    }
                );
                tokio::time::sleep(delay).await;
            }
        }
    }

    let publish = async {
        t.file.flush().await?;
        if opts.fsync {
            t.file.get_ref().sync_all().await?;
        }
        std::io::Result::Ok(())
    };
    if let Err(e) = publish.await {
        return local_error(e, "write");
    }
    let digest: [u8; 32] = t.hasher.finalize().into();
    let hex_digest = hex::encode(digest);
    if let Some(pin) = &a.pin {
        if *pin != digest {
            let mut o = Outcome::failed(
                ExitCode::Integrity,
                format!(
                    "{}: sha256 mismatch: expected {}, got {hex_digest}; the file was not published (check the pin in --checksums or the artifact)",
                    a.shown,
                    hex::encode(pin)
                ),
            );
            o.attempts = attempts;
            return o;
        }
    }
    drop(t.file);
    dest::remove_record(dir, &a.name);
    if let Err(e) = tmp.publish(path).await {
        return local_error(e, "rename into");
    }
    if let Err(e) = dest::write_record(dir, &a.name, &new_record(a, t.written, &hex_digest)) {
        // The file is correct; only a restart will fetch it again.
        warn!(uri = %a.shown, "cannot write the state record for {}: {e}", path.display());
    }
    debug!(uri = %a.shown, bytes = t.written, sha256 = %hex_digest, "published {}", path.display());
    Outcome {
        status: if a.scheme == Scheme::File {
            Status::Copied
        } else {
            Status::Fetched
        },
        bytes: t.written,
        sha256: Some(hex_digest),
        attempts,
        duration: Duration::ZERO,
        failure: None,
    }
}

/// One attempt: open (resuming when possible) and stream into the temp file.
async fn attempt(
    id: usize,
    a: &Artifact,
    source: &dyn Source,
    opts: &Options,
    reporter: &dyn Reporter,
    t: &mut Transfer,
) -> Result<(), AttemptError> {
    if !t.resumable {
        t.reset(id, reporter).await?;
    }
    let request = OpenRequest {
        offset: t.written,
        validator: t.validator.clone(),
    };
    let stalled = || {
        SourceError::new(
            FaultKind::Transient,
            format!(
                "{}: no data for {} (stall timeout)",
                a.shown,
                format_duration(opts.stall_timeout)
            ),
        )
    };
    let mut body = timeout(opts.stall_timeout, source.open(&a.uri, &request))
        .await
        .map_err(|_| stalled())??;
    if body.offset == 0 {
        // Asked to resume, answered from the start (no ranges, or If-Range said
        // the object changed): what we hold is discarded.
        t.reset(id, reporter).await?;
    } else if body.offset != t.written
        || body.meta.validator != t.validator
        || (t.expected.is_some() && body.meta.size != t.expected)
    {
        // A range of something else (another offset, version or size): never
        // splice it onto what we hold; start over on the next attempt.
        t.resumable = false;
        t.validator = None;
        t.expected = None;
        return Err(SourceError::new(
            FaultKind::Transient,
            format!(
                "{}: the resumed range does not continue what was received (the object changed?); starting over",
                a.shown
            ),
        )
        .into());
    }
    if body.offset == 0 {
        t.expected = body.meta.size;
    }
    t.validator = body.meta.validator.clone();
    t.resumable = body.meta.ranges && (t.validator.is_some() || a.scheme == Scheme::File);

    while let Some(chunk) = timeout(opts.stall_timeout, body.stream.next())
        .await
        .map_err(|_| stalled())?
    {
        let chunk = chunk?;
        t.file.write_all(&chunk).await?;
        t.hasher.update(&chunk);
        t.written += chunk.len() as u64;
        reporter.advance(id, chunk.len() as u64);
    }
    match t.expected {
        Some(expected) if t.written < expected => Err(SourceError::new(
            FaultKind::Transient,
            format!(
                "{}: body ended after {} of {expected} bytes",
                a.shown, t.written
            ),
        )
        .into()),
        Some(expected) if t.written > expected => {
            t.resumable = false;
            Err(SourceError::new(
                FaultKind::Integrity,
                format!(
                    "{}: received {} bytes, more than the announced {expected}",
                    a.shown, t.written
                ),
            )
            .into())
        }
        _ => Ok(()),
    }
}
