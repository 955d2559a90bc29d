//! The fetch engine schedules every artifact: it locks and prepares the
//! destination directories (sweeping partials, forgetting what the plan
//! dropped), keeps files an earlier run left that still verify, orders the rest
//! largest first, and runs them with bounded parallelism under the deadline and
//! the stop signal. Moving one artifact's bytes is [`crate::engine::transfer`]'s job.
//!
//! Everything here is source-agnostic: sources only produce byte streams.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::StreamExt;
use tokio::time::{timeout_at, Instant};
use tracing::{debug, info};

use crate::layout;
use crate::plan::{resolved, Artifact, Plan, Target};
use crate::progress::Reporter;
use crate::source::Sources;
use crate::util::duration::format_duration;

pub(crate) use self::options::Options;
pub(crate) use self::outcome::{Failure, FailureKind, Outcome, Status};

mod options;
mod outcome;
mod ranged;
mod transfer;
pub(crate) mod unpack;

/// The result of [`run`]: one outcome per artifact, in plan order, and the
/// directory locks, held until this is dropped (after the outputs are written).
pub(crate) struct Run {
    pub outcomes: Vec<Outcome>,
    /// Real directories another spark-localizer holds: this run must not write
    /// its shared outputs (classpath, env file, report) there.
    pub busy: Vec<PathBuf>,
    _locks: Vec<std::fs::File>,
}

/// Localizes every artifact of `plan`; returns one outcome per artifact, in plan order.
pub(crate) async fn run(
    plan: &Plan,
    sources: &Sources,
    opts: &Options,
    reporter: Arc<dyn Reporter>,
) -> Run {
    let mut outcomes: Vec<Option<Outcome>> = vec![None; plan.artifacts.len()];
    for (i, a) in plan.artifacts.iter().enumerate() {
        if let Target::Local { .. } = a.target {
            outcomes[i] = Some(Outcome::new(Status::Local));
        }
    }
    let mut locks = Vec::new();
    let mut held: Vec<PathBuf> = Vec::new();
    let mut busy: Vec<PathBuf> = Vec::new();
    let finished = |outcomes: Vec<Option<Outcome>>, stop: Option<Stop>| -> Vec<Outcome> {
        plan.artifacts
            .iter()
            .zip(outcomes)
            .map(|(a, o)| {
                o.unwrap_or_else(|| {
                    stop.expect("every artifact has an outcome")
                        .outcome(a, opts)
                })
            })
            .collect()
    };

    // Directories: those the plan fetches into (created, waited for), and the
    // configured ones that exist (cleaned if free), so that even an empty plan
    // clears what an earlier run left. One lock per real directory, taken in a
    // fixed order so two runs never wait for each other crosswise.
    let mut dirs: Vec<(PathBuf, bool)> = Vec::new();
    let fetched = plan.artifacts.iter().filter_map(|a| match &a.target {
        Target::Fetch { real_dir, .. } => Some((real_dir.clone(), true)),
        Target::Local { .. } => None,
    });
    let existing = plan
        .dirs
        .iter()
        .filter(|d| d.is_dir())
        .map(|d| (resolved(d), false));
    for (dir, used) in fetched.chain(existing) {
        if !dirs.iter().any(|(d, _)| *d == dir) {
            dirs.push((dir, used));
        }
    }
    dirs.sort();
    for (dir, used) in &dirs {
        let locked = tokio::select! {
            biased;
            () = cancelled(&opts.cancel) => {
                // Stopping: a directory is busy only if another run really holds it.
                let unsettled: Vec<PathBuf> = dirs
                    .iter()
                    .map(|(d, _)| d.clone())
                    .filter(|d| !busy.contains(d) && !held.contains(d))
                    .collect();
                for d in unsettled {
                    match layout::lock_dir(&d, Instant::now(), false).await {
                        Ok(Some(lock)) => locks.push(lock),
                        _ => busy.push(d),
                    }
                }
                return Run { outcomes: finished(outcomes, Some(Stop::Interrupted)), busy, _locks: locks };
            }
            locked = layout::lock_dir(dir, opts.deadline, *used) => locked,
        };
        let prepared = match locked {
            Ok(Some(lock)) => {
                locks.push(lock);
                held.push(dir.clone());
                prepare_dir(dir, plan).map_err(|e| {
                    (
                        FailureKind::LocalIo,
                        format!(
                            "cannot prepare destination directory {}: {e}; check the volume mount and its permissions",
                            dir.display()
                        ),
                    )
                })
            }
            // Busy and not needed by this plan: leave it to the run that holds it.
            Ok(None) => {
                busy.push(dir.clone());
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                busy.push(dir.clone());
                Err((
                    FailureKind::Deadline,
                    format!(
                        "the deadline passed while another spark-localizer was working in {}",
                        dir.display()
                    ),
                ))
            }
            Err(e) => Err((
                FailureKind::LocalIo,
                format!(
                    "cannot lock destination directory {}: {e}; check the volume mount and its permissions",
                    dir.display()
                ),
            )),
        };
        if let Err((code, message)) = prepared {
            tracing::warn!("{message}");
            for (i, a) in plan.artifacts.iter().enumerate() {
                if matches!(&a.target, Target::Fetch { real_dir, .. } if real_dir == dir) {
                    outcomes[i] = Some(Outcome::failed(code, format!("{}: {message}", a.shown)));
                }
            }
        }
    }

    // A restarted run re-verifies what it finds; correct files are kept.
    // (Only paths that exist are worth a blocking task: on a fresh volume, none.)
    let mut todo = Vec::new();
    let mut candidates = Vec::new();
    for (i, a) in plan.artifacts.iter().enumerate() {
        if outcomes[i].is_none() {
            if std::fs::symlink_metadata(a.target.path()).is_ok() {
                candidates.push(i);
            } else {
                todo.push(i);
            }
        }
    }
    let fsync = opts.fsync;
    let verify = futures_util::stream::iter(candidates)
        .map(|i| {
            let artifact = plan.artifacts[i].clone();
            async move {
                let kept =
                    tokio::task::spawn_blocking(move || verify_existing(&artifact, fsync)).await;
                (i, kept.ok().flatten())
            }
        })
        .buffer_unordered(opts.parallelism)
        .collect::<Vec<_>>();
    let verified = tokio::select! {
        biased;
        () = cancelled(&opts.cancel) => {
            return Run { outcomes: finished(outcomes, Some(Stop::Interrupted)), busy, _locks: locks };
        }
        verified = timeout_at(opts.deadline, verify) => match verified {
            Ok(verified) => verified,
            Err(_) => return Run { outcomes: finished(outcomes, Some(Stop::Deadline)), busy, _locks: locks },
        },
    };
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

    // Largest first. Sizes only matter when there are more transfers than slots;
    // probing gets one connect timeout in all, then declared order stands.
    let mut sizes = vec![None; plan.artifacts.len()];
    if todo.len() > opts.parallelism {
        let probe_all = futures_util::stream::iter(todo.iter().copied())
            .map(|i| {
                let a = &plan.artifacts[i];
                let source = sources.get(a.scheme);
                async move {
                    let probe = source?.probe(&a.uri).await;
                    Some((i, probe.ok()?.meta.size?))
                }
            })
            .buffer_unordered(opts.parallelism * 2)
            .collect::<Vec<_>>();
        // At most a quarter of the time left: ordering must not eat the transfers' time.
        let now = Instant::now();
        let budget = (now + opts.connect_timeout)
            .min(now + opts.deadline.saturating_duration_since(now) / 4);
        let probes = tokio::select! {
            biased;
            () = cancelled(&opts.cancel) => {
                return Run { outcomes: finished(outcomes, Some(Stop::Interrupted)), busy, _locks: locks };
            }
            probes = timeout_at(budget, probe_all) => probes.unwrap_or_else(|_| {
                debug!("size probes took longer than {}; keeping declared order", format_duration(opts.connect_timeout));
                Vec::new()
            }),
        };
        for (i, size) in probes.into_iter().flatten() {
            sizes[i] = Some(size);
        }
        todo.sort_by_key(|&i| std::cmp::Reverse(sizes[i].unwrap_or(0)));
    }
    reporter.begin(todo.len());

    // At most `parallelism` transfers run; each holds its slot for the whole
    // transfer, body included, and meets the deadline and the stop signal. Each
    // is a task of its own, so transfers (receiving, writing, hashing) run on
    // every worker thread, not all on the one polling this stream.
    let shared_opts = Arc::new(opts.clone());
    let results = futures_util::stream::iter(todo)
        .map(|i| {
            let a = plan.artifacts[i].clone();
            let reporter = reporter.clone();
            let sources = sources.clone();
            let opts = shared_opts.clone();
            let size = sizes[i];
            let task = tokio::spawn(async move {
                let started = Instant::now();
                let trace = transfer::Trace::default();
                let work = transfer::fetch_one(i, &a, &sources, &opts, &reporter, size, &trace);
                let outcome = tokio::select! {
                    biased;
                    () = cancelled(&opts.cancel) => trace.failed(Stop::Interrupted.outcome(&a, &opts)),
                    done = timeout_at(opts.deadline, work) => {
                        done.unwrap_or_else(|_| trace.failed(Stop::Deadline.outcome(&a, &opts)))
                    }
                };
                reporter.finish(i);
                Outcome { duration: started.elapsed(), ..outcome }
            });
            let shown = plan.artifacts[i].shown.clone();
            async move {
                let outcome = task.await.unwrap_or_else(|e| {
                    Outcome::failed(FailureKind::Internal, format!("{shown}: the transfer failed: {e}"))
                });
                (i, outcome)
            }
        })
        .buffer_unordered(opts.parallelism)
        .collect::<Vec<_>>()
        .await;
    for (i, outcome) in results {
        outcomes[i] = Some(outcome);
    }

    // Archives: unpack what was fetched or kept, under the same deadline and signal.
    let unpacks = futures_util::stream::iter(plan.artifacts.iter().enumerate())
        .filter_map(|(i, a)| {
            let sha = outcomes[i]
                .as_ref()
                .filter(|o| o.failure.is_none())
                .and_then(|o| o.sha256.clone());
            let job = a.unpack.as_ref().filter(|u| !u.flat).and(sha).map(|sha| {
                let artifact = a.clone();
                let limits = opts.archive_limits;
                async move {
                    let published = tokio::task::spawn_blocking(move || {
                        unpack::publish(&artifact, &sha, &limits, fsync)
                    })
                    .await;
                    (i, published)
                }
            });
            std::future::ready(job)
        })
        .buffer_unordered(opts.parallelism)
        .collect::<Vec<_>>();
    // Staging bundles after the archives, one at a time: their files land among
    // the other artifacts' names, which they may not take (nor each other's).
    let bundles: Vec<(usize, String)> = plan
        .artifacts
        .iter()
        .enumerate()
        .filter(|(_, a)| a.is_bundle())
        .filter_map(|(i, _)| {
            let o = outcomes[i].as_ref().filter(|o| o.failure.is_none())?;
            Some((i, o.sha256.clone()?))
        })
        .collect();
    let publish_bundles = async {
        let mut claims = claims(plan);
        let mut results = Vec::new();
        for (i, sha) in bundles {
            let artifact = plan.artifacts[i].clone();
            let limits = opts.archive_limits;
            let done = tokio::task::spawn_blocking(move || {
                let published =
                    unpack::publish_bundle(&artifact, &sha, &limits, &mut claims, fsync);
                (published, claims)
            })
            .await;
            match done {
                Ok((published, back)) => {
                    claims = back;
                    results.push((i, Ok(published)));
                }
                Err(e) => {
                    results.push((i, Err(e)));
                    break;
                }
            }
        }
        results
    };
    let all = async {
        let mut results = unpacks.await;
        results.extend(publish_bundles.await);
        results
    };
    let unpacked = tokio::select! {
        biased;
        () = cancelled(&opts.cancel) => Err(Stop::Interrupted),
        done = timeout_at(opts.deadline, all) => done.map_err(|_| Stop::Deadline),
    };
    match unpacked {
        Ok(results) => {
            for (i, published) in results {
                let a = &plan.artifacts[i];
                let into = a.visible().display();
                match published {
                    Ok(Ok(unpack::Published::Unpacked { entries, bytes })) => {
                        info!(uri = %a.shown, "unpacked {entries} entries ({bytes} bytes) into {into}");
                    }
                    Ok(Ok(unpack::Published::Kept)) => {
                        debug!(uri = %a.shown, "{into} is already unpacked from this archive");
                    }
                    Ok(Err((code, message))) => fail(&mut outcomes[i], code, message),
                    Err(e) => fail(
                        &mut outcomes[i],
                        FailureKind::Internal,
                        format!("{}: unpacking failed: {e}", a.shown),
                    ),
                }
            }
        }
        Err(stop) => {
            for (i, a) in plan.artifacts.iter().enumerate() {
                let published = match (&a.unpack, &outcomes[i]) {
                    (Some(u), Some(o)) if u.flat => o
                        .sha256
                        .as_deref()
                        .is_some_and(|sha| unpack::bundle_entries(a, sha).is_some()),
                    _ => a.visible().is_dir(),
                };
                if a.unpack.is_some() && !published {
                    let cut = stop.outcome(a, opts);
                    fail(
                        &mut outcomes[i],
                        cut.failure.as_ref().expect("failed").kind,
                        cut.failure.expect("failed").message,
                    );
                }
            }
        }
    }

    Run {
        outcomes: finished(outcomes, None),
        busy,
        _locks: locks,
    }
}

/// Marks a fetched artifact failed after all (its bytes and digest are kept).
fn fail(outcome: &mut Option<Outcome>, kind: FailureKind, message: String) {
    if let Some(o) = outcome {
        o.status = Status::Failed;
        o.failure = Some(Failure { kind, message });
    }
}

/// Why a run stopped before an artifact was localized.
#[derive(Debug, Clone, Copy)]
enum Stop {
    Deadline,
    Interrupted,
}

impl Stop {
    fn outcome(self, a: &Artifact, opts: &Options) -> Outcome {
        match self {
            Stop::Deadline => Outcome::failed(
                FailureKind::Deadline,
                format!(
                    "{}: deadline of {} passed before it was localized; raise --deadline (or spark.kubernetes.mountdependencies.mountTimeout)",
                    a.shown,
                    format_duration(opts.deadline_len)
                ),
            ),
            Stop::Interrupted => Outcome::failed(
                FailureKind::Interrupted,
                format!("{}: interrupted by a signal before it was localized", a.shown),
            ),
        }
    }
}

/// Resolves when the stop signal arrives (never, if it cannot arrive).
async fn cancelled(cancel: &tokio::sync::watch::Receiver<bool>) {
    let mut cancel = cancel.clone();
    if cancel.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// What the plan's artifacts (other than staging bundles, whose files are known
/// only once unpacked) and spark-localizer's own outputs take, by real path.
fn claims(plan: &Plan) -> unpack::Claims {
    let mut claims: unpack::Claims = plan
        .reserved
        .iter()
        .map(|(path, flag)| (path.clone(), format!("the file named by {flag}")))
        .collect();
    for a in &plan.artifacts {
        if !a.is_bundle() && matches!(a.target, Target::Fetch { .. }) {
            claims.insert(resolved(a.claimed()), a.shown.clone());
        }
    }
    claims
}

/// Removes partial files of earlier runs, and removes files an
/// earlier run published that the plan no longer names.
fn prepare_dir(dir: &Path, plan: &Plan) -> std::io::Result<()> {
    let swept = layout::sweep_partials(dir)?;
    if swept > 0 {
        info!(
            "removed {swept} partial file(s) left in {} by an earlier run",
            dir.display()
        );
    }
    for name in layout::recorded_names(dir) {
        let in_dir =
            |a: &&Artifact| matches!(&a.target, Target::Fetch { real_dir, .. } if real_dir == dir);
        // A staging bundle's files are recorded as coming from the bundle's URI.
        let from_bundle = || {
            let record = layout::read_record(dir, &name);
            record.is_some_and(|r| {
                plan.artifacts
                    .iter()
                    .filter(in_dir)
                    .any(|a| a.is_bundle() && r.uri_sha256 == a.record_digest())
            })
        };
        let wanted = plan.artifacts.iter().filter(in_dir).any(|a| a.name == name) || from_bundle();
        if !wanted {
            info!(
                "removing {name} from {}: an earlier run fetched it, this plan does not name it",
                dir.display()
            );
            layout::remove_record(dir, &name);
            let _ = layout::remove_any(&dir.join(&name));
            let _ = layout::remove_any(&layout::archive_path(dir, &name));
            let _ = layout::remove_any(&layout::unpacked_marker(dir, &name));
        }
    }
    Ok(())
}

/// Keeps a file found at the destination only if it verifies: against the pin if
/// there is one, else against the record of the run that published it.
fn verify_existing(a: &Artifact, fsync: bool) -> Option<Outcome> {
    let Target::Fetch { dir, path, .. } = &a.target else {
        return None;
    };
    if std::fs::symlink_metadata(path).is_ok_and(|md| md.is_dir()) {
        // An earlier plan unpacked an archive under this name.
        let _ = layout::remove_any(path);
    }
    if !path.is_file() {
        return None;
    }
    let record = layout::read_record(dir, &a.name);
    let (size, digest) = layout::hash_file(path).ok()?;
    let hex_digest = hex::encode(digest);
    let good = match (&a.pin, &record) {
        (Some(pin), _) => *pin == digest,
        (None, Some(r)) => {
            r.uri_sha256 == a.record_digest() && r.size == size && r.sha256 == hex_digest
        }
        (None, None) => false,
    };
    if !good {
        debug!(uri = %a.shown, "{} exists but does not verify; fetching it again", path.display());
        layout::remove_record(dir, &a.name);
        let _ = std::fs::remove_file(path);
        return None;
    }
    if record.is_none() {
        let _ = layout::write_record(
            dir,
            &a.name,
            &transfer::new_record(a, size, &hex_digest),
            fsync,
        );
    }
    Some(Outcome {
        bytes: size,
        sha256: Some(hex_digest),
        ..Outcome::new(Status::Kept)
    })
}
