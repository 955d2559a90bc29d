//! The first phase: lock every destination directory (one lock per real directory,
//! in a fixed order so two runs never wait for each other crosswise) and prepare it:
//! partial files of earlier runs swept, files the plan no longer names removed.

use std::path::{Path, PathBuf};

use tokio::time::Instant;
use tracing::info;

use super::outcome::FailureKind;
use super::{cancelled, Outcome, RunState, Stop};
use crate::layout;
use crate::plan::{resolved, Artifact, Plan, Target};

impl RunState<'_> {
    /// Locks and prepares the directories: those the plan fetches into (created,
    /// waited for), and the configured ones that exist (cleaned if free), so that
    /// even an empty plan clears what an earlier run left. The artifacts of a
    /// directory that cannot be locked or prepared fail; the stop signal ends the
    /// phase (and the run).
    pub(super) async fn lock_dirs(&mut self) -> Result<(), Stop> {
        let dirs = self.dirs();
        for (dir, used) in &dirs {
            let locked = tokio::select! {
                biased;
                () = cancelled(&self.opts.cancel) => {
                    self.settle_locks(&dirs).await;
                    return Err(Stop::Interrupted);
                }
                locked = layout::lock_dir(dir, self.opts.deadline, *used) => locked,
            };
            let prepared = match locked {
                Ok(Some(lock)) => {
                    self.locks.push(lock);
                    self.held.push(dir.clone());
                    prepare_dir(dir, self.plan).map_err(|e| {
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
                    self.busy.push(dir.clone());
                    continue;
                }
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                    self.busy.push(dir.clone());
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
            if let Err((kind, message)) = prepared {
                self.fail_dir(dir, kind, &message);
            }
        }
        Ok(())
    }

    /// The real directories to lock, each once, sorted; `true` where the plan
    /// fetches into it.
    fn dirs(&self) -> Vec<(PathBuf, bool)> {
        let mut dirs: Vec<(PathBuf, bool)> = Vec::new();
        let fetched = self
            .plan
            .artifacts
            .iter()
            .filter_map(|artifact| match &artifact.target {
                Target::Fetch { real_dir, .. } => Some((real_dir.clone(), true)),
                Target::Local { .. } => None,
            });
        let existing = self
            .plan
            .dirs
            .iter()
            .filter(|dir| dir.is_dir())
            .map(|dir| (resolved(dir), false));
        for (dir, used) in fetched.chain(existing) {
            if !dirs.iter().any(|(seen, _)| *seen == dir) {
                dirs.push((dir, used));
            }
        }
        dirs.sort();
        dirs
    }

    /// Stopping while locking: a directory not settled yet is busy only if another
    /// run really holds it (this run's outputs may still go into the others).
    async fn settle_locks(&mut self, dirs: &[(PathBuf, bool)]) {
        let unsettled: Vec<PathBuf> = dirs
            .iter()
            .map(|(dir, _)| dir.clone())
            .filter(|dir| !self.busy.contains(dir) && !self.held.contains(dir))
            .collect();
        for dir in unsettled {
            match layout::lock_dir(&dir, Instant::now(), false).await {
                Ok(Some(lock)) => self.locks.push(lock),
                _ => self.busy.push(dir),
            }
        }
    }

    /// Fails every artifact fetched into `dir`.
    fn fail_dir(&mut self, dir: &Path, kind: FailureKind, message: &str) {
        tracing::warn!("{message}");
        for (i, artifact) in self.plan.artifacts.iter().enumerate() {
            if matches!(&artifact.target, Target::Fetch { real_dir, .. } if real_dir == dir) {
                self.outcomes[i] = Some(Outcome::failed(
                    kind,
                    format!("{}: {message}", artifact.display_uri),
                ));
            }
        }
    }
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
                    .any(|a| a.is_bundle() && r.uri_sha256 == a.record_key())
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
