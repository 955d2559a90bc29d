//! The second phase: a restarted run re-verifies what it finds at the destinations;
//! files that verify are kept, not fetched again.

use futures_util::StreamExt;
use tokio::time::timeout_at;
use tracing::{debug, info};

use super::{cancelled, transfer, Outcome, RunState, Status, Stop};
use crate::layout;
use crate::plan::{Artifact, Target};

impl RunState<'_> {
    /// Keeps every unsettled artifact whose file exists and verifies; returns the
    /// others, to fetch, in plan order. Only paths that exist are worth a blocking
    /// task (on a fresh volume, none).
    pub(super) async fn keep_verified(&mut self) -> Result<Vec<usize>, Stop> {
        let (candidates, mut todo): (Vec<usize>, Vec<usize>) = self.unsettled().partition(|&i| {
            std::fs::symlink_metadata(self.plan.artifacts[i].target.path()).is_ok()
        });
        let fsync = self.opts.fsync;
        let verify = futures_util::stream::iter(candidates)
            .map(|i| {
                let artifact = self.plan.artifacts[i].clone();
                async move {
                    let kept =
                        tokio::task::spawn_blocking(move || verify_existing(&artifact, fsync))
                            .await;
                    (i, kept.ok().flatten())
                }
            })
            .buffer_unordered(self.opts.parallelism)
            .collect::<Vec<_>>();
        let verified = tokio::select! {
            biased;
            () = cancelled(&self.opts.cancel) => return Err(Stop::Interrupted),
            verified = timeout_at(self.opts.deadline, verify) => verified.map_err(|_| Stop::Deadline)?,
        };
        for (i, kept) in verified {
            match kept {
                Some(kept) => {
                    let artifact = &self.plan.artifacts[i];
                    info!(uri = %artifact.display_uri, "kept {} from an earlier run (verified)", artifact.name);
                    self.outcomes[i] = Some(kept);
                }
                None => todo.push(i),
            }
        }
        todo.sort_unstable();
        Ok(todo)
    }
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
            r.uri_sha256 == a.record_key() && r.size == size && r.sha256 == hex_digest
        }
        (None, None) => false,
    };
    if !good {
        debug!(uri = %a.display_uri, "{} exists but does not verify; fetching it again", path.display());
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
