//! The third and fourth phases: order what is left largest first, then transfer it
//! with bounded parallelism, each transfer holding its slot for its whole body and
//! meeting the deadline and the stop signal.

use std::sync::Arc;

use futures_util::StreamExt;
use tokio::time::{timeout_at, Instant};
use tracing::debug;

use super::outcome::FailureKind;
use super::{cancelled, transfer, Outcome, RunState, Stop};
use crate::progress::Reporter;
use crate::source::Sources;
use crate::util::duration::format_duration;

impl RunState<'_> {
    /// Orders `todo` largest first, with the sizes the sources announce. Sizes only
    /// matter when there are more transfers than slots; probing gets one connect
    /// timeout in all (at most a quarter of the time left), then declared order
    /// stands. Returns the order and the sizes learned, by artifact index.
    pub(super) async fn order(
        &self,
        mut todo: Vec<usize>,
        sources: &Sources,
    ) -> Result<(Vec<usize>, Vec<Option<u64>>), Stop> {
        let opts = self.opts;
        let mut sizes = vec![None; self.plan.artifacts.len()];
        if todo.len() <= opts.parallelism {
            return Ok((todo, sizes));
        }
        let probe_all = futures_util::stream::iter(todo.iter().copied())
            .map(|i| {
                let artifact = &self.plan.artifacts[i];
                // Asked of the mirror: no request to the origin for a size.
                let mirrored = sources
                    .via_mirror(artifact.scheme, &artifact.uri, artifact.pin.as_ref())
                    .is_some();
                let source = sources.get(artifact.scheme).filter(|_| !mirrored);
                async move {
                    let probe = source?.probe(&artifact.uri).await;
                    Some((i, probe.ok()?.meta.size?))
                }
            })
            .buffer_unordered(opts.parallelism * 2)
            .collect::<Vec<_>>();
        let now = Instant::now();
        let budget = (now + opts.connect_timeout)
            .min(now + opts.deadline.saturating_duration_since(now) / 4);
        let probes = tokio::select! {
            biased;
            () = cancelled(&opts.cancel) => return Err(Stop::Interrupted),
            probes = timeout_at(budget, probe_all) => probes.unwrap_or_else(|_| {
                debug!("size probes took longer than {}; keeping declared order", format_duration(opts.connect_timeout));
                Vec::new()
            }),
        };
        for (i, size) in probes.into_iter().flatten() {
            sizes[i] = Some(size);
        }
        todo.sort_by_key(|&i| std::cmp::Reverse(sizes[i].unwrap_or(0)));
        Ok((todo, sizes))
    }

    /// Transfers `todo` in order, at most `parallelism` at once. Each is a task of
    /// its own, so transfers (receiving, writing, hashing) run on every worker
    /// thread, not all on the one polling this stream.
    pub(super) async fn transfer(
        &mut self,
        todo: Vec<usize>,
        sizes: Vec<Option<u64>>,
        sources: &Sources,
        reporter: Arc<dyn Reporter>,
    ) {
        let shared_opts = Arc::new(self.opts.clone());
        let results = futures_util::stream::iter(todo)
            .map(|i| {
                let artifact = self.plan.artifacts[i].clone();
                let shown = artifact.display_uri.clone();
                let task = tokio::spawn(transfer_task(
                    i,
                    artifact,
                    sources.clone(),
                    shared_opts.clone(),
                    reporter.clone(),
                    sizes[i],
                ));
                async move {
                    let outcome = task.await.unwrap_or_else(|e| {
                        Outcome::failed(
                            FailureKind::Internal,
                            format!("{shown}: the transfer failed: {e}"),
                        )
                    });
                    (i, outcome)
                }
            })
            .buffer_unordered(self.opts.parallelism)
            .collect::<Vec<_>>()
            .await;
        for (i, outcome) in results {
            self.outcomes[i] = Some(outcome);
        }
    }
}

/// One transfer under the deadline and the stop signal; what it did before either
/// (attempts, the last error) stays in its outcome.
async fn transfer_task(
    index: usize,
    artifact: crate::plan::Artifact,
    sources: Sources,
    opts: Arc<super::Options>,
    reporter: Arc<dyn Reporter>,
    size: Option<u64>,
) -> Outcome {
    let started = Instant::now();
    let so_far = transfer::SoFar::new(opts.retry);
    let work = transfer::fetch_one(index, &artifact, &sources, &opts, &reporter, size, &so_far);
    let outcome = tokio::select! {
        biased;
        () = cancelled(&opts.cancel) => so_far.failed(Stop::Interrupted.outcome(&artifact, &opts)),
        done = timeout_at(opts.deadline, work) => {
            done.unwrap_or_else(|_| so_far.failed(Stop::Deadline.outcome(&artifact, &opts)))
        }
    };
    reporter.finish(index);
    Outcome {
        duration: started.elapsed(),
        ..outcome
    }
}
