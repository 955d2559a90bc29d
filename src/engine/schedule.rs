//! The third phase: transfer what is left in declared order with a parallelism
//! that finds its level, each transfer holding its slot for its whole body and
//! meeting the deadline and the stop signal.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{timeout_at, Instant};
use tracing::debug;

use super::adapt::{Counting, HillClimb, WINDOW};
use super::outcome::FailureKind;
use super::{cancelled, transfer, Outcome, RunState, Stop};
use crate::progress::Reporter;
use crate::source::Sources;

impl RunState<'_> {
    /// Transfers `todo` in declared order, each a task of its own (so transfers
    /// — receiving, writing, hashing — run on every worker thread). At most
    /// `parallelism` at once to start with; more are let in while the throughput
    /// grows with them, up to `parallelism_max` ([`HillClimb`]). No request is
    /// made before the transfers: each artifact costs one GET.
    pub(super) async fn transfer(
        &mut self,
        todo: Vec<usize>,
        sources: &Sources,
        reporter: Arc<dyn Reporter>,
    ) {
        let shared_opts = Arc::new(self.opts.clone());
        let counting = Counting::new(reporter);
        let reporter: Arc<dyn Reporter> = counting.clone();
        let start =
            starting_parallelism(self.opts.parallelism, self.opts.parallelism_max, todo.len());
        debug!("{start} transfers at once to start with");
        let slots = Arc::new(Semaphore::new(start));
        let mut climb = HillClimb::new(start, self.opts.parallelism_max, Instant::now());
        let mut ticks = tokio::time::interval(WINDOW);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut queue = todo.into_iter().peekable();
        let mut running = Vec::new();
        while queue.peek().is_some() {
            tokio::select! {
                permit = slots.clone().acquire_owned() => {
                    let (Ok(permit), Some(i)) = (permit, queue.next()) else { break };
                    let artifact = self.plan.artifacts[i].clone();
                    let task = tokio::spawn(transfer_task(
                        i,
                        artifact,
                        sources.clone(),
                        shared_opts.clone(),
                        reporter.clone(),
                        permit,
                    ));
                    running.push((i, task));
                }
                _ = ticks.tick() => {
                    let saturated = slots.available_permits() == 0;
                    let before = climb.limit();
                    if let Some(limit) = climb.sample(Instant::now(), counting.bytes(), saturated) {
                        debug!("throughput grew with {before} transfers at once: allowing {limit}");
                        slots.add_permits(limit - before);
                    }
                }
            }
        }
        for (i, task) in running {
            let shown = &self.plan.artifacts[i].display_uri;
            let outcome = task.await.unwrap_or_else(|e| {
                Outcome::failed(
                    FailureKind::Internal,
                    format!("{shown}: the transfer failed: {e}"),
                )
            });
            self.outcomes[i] = Some(outcome);
        }
    }
}

/// Transfers at once to start with: a given `--parallelism` (`max` equal to
/// it) as given; by default one per artifact up to `max`, at least `configured`.
/// Each artifact costs a round trip at least, so a plan of many small ones
/// gains nothing from starting low; an origin that closes connections is
/// kept to a few requests at once by the HTTP source
/// ([`crate::net::origins`]), whatever starts here.
fn starting_parallelism(configured: usize, max: usize, artifacts: usize) -> usize {
    artifacts.clamp(configured, max.max(configured)).max(1)
}

/// One transfer under the deadline and the stop signal; what it did before either
/// (attempts, the last error) stays in its outcome.
async fn transfer_task(
    index: usize,
    artifact: crate::plan::Artifact,
    sources: Sources,
    opts: Arc<super::Options>,
    reporter: Arc<dyn Reporter>,
    _slot: OwnedSemaphorePermit,
) -> Outcome {
    let started = Instant::now();
    let so_far = transfer::SoFar::new(opts.retry);
    let work = transfer::fetch_one(index, &artifact, &sources, &opts, &reporter, &so_far);
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

#[cfg(test)]
mod tests {
    use super::starting_parallelism;

    #[test]
    fn a_plan_of_many_artifacts_starts_wide_and_a_given_parallelism_is_kept() {
        // The default: 8, growing to 32.
        assert_eq!(starting_parallelism(8, 32, 1), 8);
        assert_eq!(starting_parallelism(8, 32, 20), 20);
        assert_eq!(starting_parallelism(8, 32, 200), 32);
        // --parallelism 4 and 64: fixed.
        assert_eq!(starting_parallelism(4, 4, 200), 4);
        assert_eq!(starting_parallelism(64, 64, 3), 64);
    }
}
