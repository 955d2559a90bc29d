//! The fetch engine localizes a plan in phases over one [`RunState`]: lock and
//! prepare the destination directories, sweeping partials and forgetting what the
//! plan dropped ([`dirs`]); keep files an earlier run left that still verify
//! ([`reuse`]); run the rest in declared order with a parallelism that finds its
//! level ([`adapt`]) under the deadline and the stop signal ([`schedule`]); unpack archives and
//! publish staging bundles ([`archives`]). Moving one artifact's bytes is
//! [`transfer`]'s job (large objects in parallel ranges: [`ranged`]). Outcomes carry
//! a failure kind, never an exit code.
//!
//! Everything here is source-agnostic: sources only produce byte streams.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::time::timeout_at;

use crate::plan::{Artifact, Plan, Target};
use crate::progress::Reporter;
use crate::source::Sources;
use crate::util::duration::format_duration;

pub(crate) use self::options::Options;
pub(crate) use self::outcome::{BundleEntry, Failure, FailureKind, Mirrored, Outcome, Status};
pub(crate) use self::unpack::top_level_jars;

mod adapt;
mod archives;
mod budget;
mod bundle;
mod digest;
mod dirs;
mod options;
mod outcome;
mod ranged;
mod reuse;
mod schedule;
mod transfer;
mod unpack;

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
///
/// The phases run in turn over one [`RunState`]: lock and prepare the destination
/// directories, keep what an earlier run left that still verifies, transfer the
/// rest in declared order, then unpack archives and staging bundles. The
/// deadline or the stop signal ends the run between phases (and each transfer
/// within its own task).
pub(crate) async fn run(
    plan: &Plan,
    sources: &Sources,
    opts: &Options,
    reporter: Arc<dyn Reporter>,
) -> Run {
    let mut state = RunState::new(plan, opts);
    let stopped = async {
        state.check_local().await?;
        state.lock_dirs().await?;
        let todo = state.keep_verified().await?;
        reporter.begin(todo.len());
        state.transfer(todo, sources, reporter).await;
        state.unpack().await;
        Ok::<(), Stop>(())
    }
    .await
    .err();
    state.finish(stopped)
}

/// What one run knows as it goes: an outcome slot per artifact (filled by the phase
/// that settles it), the directory locks it holds and the directories another run
/// holds.
struct RunState<'a> {
    plan: &'a Plan,
    opts: &'a Options,
    outcomes: Vec<Option<Outcome>>,
    locks: Vec<std::fs::File>,
    /// Real directories this run has locked.
    held: Vec<PathBuf>,
    /// Real directories another spark-localizer holds.
    busy: Vec<PathBuf>,
}

/// A `local://` artifact is in the image: listed in place, and checked
/// against its pin when it has one (a pattern's files are pinned by name).
fn local_outcome(artifact: &crate::plan::Artifact, path: &std::path::Path) -> Outcome {
    let Some(pin) = artifact.pin else {
        return Outcome::new(Status::Local);
    };
    let read = || -> std::io::Result<(u64, [u8; 32])> {
        let mut file = std::fs::File::open(path)?;
        let mut hasher = digest::Hashes::new(false);
        let mut buf = vec![0u8; 256 << 10];
        let mut total = 0u64;
        loop {
            let n = std::io::Read::read(&mut file, &mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            total += n as u64;
        }
        Ok((total, hasher.finalize().0))
    };
    match read() {
        Ok((bytes, got)) if got == pin => Outcome {
            bytes,
            sha256: Some(hex::encode(got)),
            ..Outcome::new(Status::Local)
        },
        Ok((_, got)) => Outcome::failed(
            FailureKind::Integrity,
            format!(
                "{}: sha256 mismatch: {} in the image is {}, --checksums pins {}",
                artifact.display_uri,
                path.display(),
                hex::encode(got),
                hex::encode(pin)
            ),
        ),
        Err(e) => Outcome::failed(
            FailureKind::LocalIo,
            format!(
                "{}: cannot read {} to check its pin: {e}",
                artifact.display_uri,
                path.display()
            ),
        ),
    }
}

impl<'a> RunState<'a> {
    fn new(plan: &'a Plan, opts: &'a Options) -> Self {
        let outcomes = plan
            .artifacts
            .iter()
            .map(|artifact| match (&artifact.target, artifact.pin) {
                (Target::Local { .. }, None) => Some(Outcome::new(Status::Local)),
                // A pinned local:// file is read by `check_local`.
                _ => None,
            })
            .collect();
        RunState {
            plan,
            opts,
            outcomes,
            locks: Vec::new(),
            held: Vec::new(),
            busy: Vec::new(),
        }
    }

    /// The run's result: every artifact not settled when the run `stopped` fails
    /// with the stop's outcome; each outcome says what the artifact's contents hold.
    fn finish(self, stopped: Option<Stop>) -> Run {
        let opts = self.opts;
        let mut outcomes: Vec<Outcome> = self
            .plan
            .artifacts
            .iter()
            .zip(self.outcomes)
            .map(|(artifact, outcome)| {
                outcome.unwrap_or_else(|| {
                    stopped
                        .expect("every artifact has an outcome")
                        .outcome(artifact, opts)
                })
            })
            .collect();
        for (artifact, outcome) in self.plan.artifacts.iter().zip(&mut outcomes) {
            archives::list_contents(artifact, outcome, opts.archive_classpath);
        }
        Run {
            outcomes,
            busy: self.busy,
            _locks: self.locks,
        }
    }

    /// Checks the pinned `local://` files against their pins, off the runtime's
    /// threads, under the deadline and the stop signal.
    async fn check_local(&mut self) -> Result<(), Stop> {
        let pinned: Vec<usize> = self
            .unsettled()
            .filter(|&i| matches!(self.plan.artifacts[i].target, Target::Local { .. }))
            .collect();
        if pinned.is_empty() {
            return Ok(());
        }
        let artifacts: Vec<Artifact> = pinned
            .iter()
            .map(|&i| self.plan.artifacts[i].clone())
            .collect();
        let check = tokio::task::spawn_blocking(move || {
            artifacts
                .iter()
                .map(|a| local_outcome(a, a.target.path()))
                .collect::<Vec<_>>()
        });
        let checked = tokio::select! {
            biased;
            () = cancelled(&self.opts.cancel) => return Err(Stop::Interrupted),
            checked = timeout_at(self.opts.deadline, check) => checked.map_err(|_| Stop::Deadline)?,
        };
        let checked =
            checked.unwrap_or_else(|failed| std::panic::resume_unwind(failed.into_panic()));
        for (i, outcome) in pinned.into_iter().zip(checked) {
            self.outcomes[i] = Some(outcome);
        }
        Ok(())
    }

    /// The plan's artifacts not settled yet, by index.
    fn unsettled(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.plan.artifacts.len()).filter(|&i| self.outcomes[i].is_none())
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
                    a.display_uri,
                    format_duration(opts.deadline_len)
                ),
            ),
            Stop::Interrupted => Outcome::failed(
                FailureKind::Interrupted,
                format!("{}: interrupted by a signal before it was localized", a.display_uri),
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
