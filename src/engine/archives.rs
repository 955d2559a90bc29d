//! The last phase: unpack the archives fetched or kept (in parallel), then publish
//! the staging bundles (one at a time: their files land among the other artifacts'
//! names, which they may not take, nor each other's), under the deadline and the
//! stop signal.

use futures_util::StreamExt;
use tokio::task::JoinError;
use tokio::time::timeout_at;
use tracing::{debug, info};

use super::bundle::{self, Claims};
use super::outcome::{Failure, FailureKind};
use super::{cancelled, fail, unpack, Outcome, RunState, Stop};
use crate::plan::{resolved, Artifact, Kind, Plan, Target};

/// What unpacking one artifact came to (the outer error: its task failed).
type Unpacked = Result<Result<unpack::Published, Failure>, JoinError>;

impl RunState<'_> {
    /// Unpacks every archive and staging bundle whose bytes are here; an artifact
    /// whose unpacking fails, or is cut by the deadline or the signal before its
    /// contents are in place, fails (its bytes and digest stay in its outcome).
    pub(super) async fn unpack(&mut self) {
        let all = async {
            let mut results = self.unpack_archives().await;
            results.extend(self.publish_bundles().await);
            results
        };
        let unpacked = tokio::select! {
            biased;
            () = cancelled(&self.opts.cancel) => Err(Stop::Interrupted),
            done = timeout_at(self.opts.deadline, all) => done.map_err(|_| Stop::Deadline),
        };
        match unpacked {
            Ok(results) => {
                for (i, published) in results {
                    self.record_unpacked(i, published);
                }
            }
            Err(stop) => self.cut_unpacking(stop),
        }
    }

    /// The digest of artifact `i` when it was fetched or kept.
    fn fetched_sha256(&self, i: usize) -> Option<String> {
        self.outcomes[i]
            .as_ref()
            .filter(|outcome| outcome.failure.is_none())
            .and_then(|outcome| outcome.sha256.clone())
    }

    async fn unpack_archives(&self) -> Vec<(usize, Unpacked)> {
        let fsync = self.opts.fsync;
        let limits = self.opts.archive_limits;
        let jobs: Vec<_> = self
            .plan
            .artifacts
            .iter()
            .enumerate()
            .filter(|(_, artifact)| artifact.unpack.as_ref().is_some_and(|u| !u.flat))
            .filter_map(|(i, artifact)| Some((i, artifact.clone(), self.fetched_sha256(i)?)))
            .collect();
        futures_util::stream::iter(jobs)
            .map(|(i, artifact, sha256)| async move {
                let published = tokio::task::spawn_blocking(move || {
                    unpack::publish(&artifact, &sha256, &limits, fsync)
                })
                .await;
                (i, published)
            })
            .buffer_unordered(self.opts.parallelism)
            .collect()
            .await
    }

    async fn publish_bundles(&self) -> Vec<(usize, Unpacked)> {
        let fsync = self.opts.fsync;
        let limits = self.opts.archive_limits;
        let bundles: Vec<(usize, String)> = self
            .plan
            .artifacts
            .iter()
            .enumerate()
            .filter(|(_, artifact)| artifact.is_bundle())
            .filter_map(|(i, _)| Some((i, self.fetched_sha256(i)?)))
            .collect();
        let mut claims = claims(self.plan);
        let mut results = Vec::new();
        for (i, sha256) in bundles {
            let artifact = self.plan.artifacts[i].clone();
            let done = tokio::task::spawn_blocking(move || {
                let published =
                    bundle::publish_bundle(&artifact, &sha256, &limits, &mut claims, fsync);
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
    }

    fn record_unpacked(&mut self, i: usize, published: Unpacked) {
        let artifact = &self.plan.artifacts[i];
        let into = artifact.visible().display();
        match published {
            Ok(Ok(unpack::Published::Unpacked { entries, bytes })) => {
                info!(uri = %artifact.display_uri, "unpacked {entries} entries ({bytes} bytes) into {into}");
            }
            Ok(Ok(unpack::Published::Kept)) => {
                debug!(uri = %artifact.display_uri, "{into} is already unpacked from this archive");
            }
            Ok(Err(failure)) => fail(&mut self.outcomes[i], failure.kind, failure.message),
            Err(e) => fail(
                &mut self.outcomes[i],
                FailureKind::Internal,
                format!("{}: unpacking failed: {e}", artifact.display_uri),
            ),
        }
    }

    /// The deadline or the signal cut unpacking: what is not in place fails.
    fn cut_unpacking(&mut self, stop: Stop) {
        for (i, artifact) in self.plan.artifacts.iter().enumerate() {
            let published = match (&artifact.unpack, &self.outcomes[i]) {
                (Some(u), Some(outcome)) if u.flat => outcome
                    .sha256
                    .as_deref()
                    .is_some_and(|sha256| bundle::bundle_entries(artifact, sha256).is_some()),
                (Some(u), _) if u.strip.is_some() => {
                    std::fs::symlink_metadata(artifact.visible()).is_ok()
                }
                _ => artifact.visible().is_dir(),
            };
            if artifact.unpack.is_some() && !published {
                let cut = stop.outcome(artifact, self.opts);
                let failure = cut.failure.expect("a stop's outcome is a failure");
                fail(&mut self.outcomes[i], failure.kind, failure.message);
            }
        }
    }
}

/// What the plan's artifacts (other than staging bundles, whose files are known
/// only once unpacked) and spark-localizer's own outputs take, by real path.
fn claims(plan: &Plan) -> Claims {
    let mut claims: Claims = plan
        .reserved
        .iter()
        .map(|(path, flag)| (path.clone(), format!("the file named by {flag}")))
        .collect();
    for a in &plan.artifacts {
        if !a.is_bundle() && matches!(a.target, Target::Fetch { .. }) {
            claims.insert(resolved(a.claimed()), a.display_uri.clone());
        }
    }
    claims
}

/// Lists what `artifact`'s contents hold once the run is over: a staging bundle's
/// files (as published from the bundle of the outcome's digest) and the jars they
/// put on the classpath; with `archive_classpath`, an unpacked archive's top-level
/// jars.
pub(super) fn list_contents(artifact: &Artifact, outcome: &mut Outcome, archive_classpath: bool) {
    let Some(unpack) = &artifact.unpack else {
        return;
    };
    if unpack.flat {
        outcome.bundle_files = outcome
            .sha256
            .as_deref()
            .and_then(|sha256| bundle::bundle_entries(artifact, sha256));
        if artifact.kind == Kind::Jar {
            outcome.content_jars = outcome
                .bundle_files
                .iter()
                .flatten()
                .map(|entry| unpack.into.join(&entry.name))
                .filter(|path| unpack::classpath_jar(path))
                .collect();
        }
    } else if archive_classpath && artifact.kind == Kind::Archive {
        outcome.content_jars = unpack::top_level_jars(&unpack.into);
    }
}
