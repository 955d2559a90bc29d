//! POMs fetched ahead of the walk. The walk goes level by level, and each
//! level waits for its slowest POM (and that POM's parents): across a real
//! network the levels add up to many round trips. Alongside it, this follows
//! the dependencies as declared (soft versions, compile and runtime scopes,
//! not optional, the first path's exclusions) as soon as each POM arrives, so
//! the walk mostly finds its models built. It only warms the models' cache: a
//! POM it fetches that the walk never asks for changes nothing, and a failure
//! is the walk's to report when (if) it asks.

use std::collections::{HashSet, VecDeque};

use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};

use super::coord::{Coord, Exclusion};
use super::model::Models;
use super::version::{Dynamic, Requirement};

/// Models being built at once (each origin bounds its own requests too).
const PARALLEL: usize = 16;
/// Models fetched ahead at most: a bound on the traffic spent on guesses.
const MAX_MODELS: usize = 4096;

/// Builds the models the walk is likely to ask for; returns when none is left.
pub(super) async fn prefetch(models: &Models<'_>, roots: &[Coord], excludes: &[Exclusion]) {
    let mut seen: HashSet<(String, String, String)> = HashSet::new();
    let mut queue: VecDeque<((String, String, String), Vec<Exclusion>)> = VecDeque::new();
    for root in roots {
        let gav = (
            root.group.clone(),
            root.artifact.clone(),
            root.version.clone(),
        );
        if soft(&gav.2) && seen.insert(gav.clone()) {
            queue.push_back((gav, Vec::new()));
        }
    }
    let mut running = FuturesUnordered::new();
    loop {
        while running.len() < PARALLEL {
            let Some(((g, a, v), exclusions)) = queue.pop_front() else {
                break;
            };
            running.push(
                async move {
                    let model = models.get(&g, &a, &v, Vec::new()).await.ok()?;
                    Some((model, exclusions))
                }
                .boxed(),
            );
        }
        let Some(done) = running.next().await else {
            return;
        };
        let Some((model, exclusions)) = done else {
            continue;
        };
        // Its jar's .sha1, which the resolution asks for once the graph is
        // known (a snapshot's file name needs its metadata: left to it).
        if model.packaging != "pom" && !model.coord.version.ends_with("-SNAPSHOT") {
            let path = model.coord.path();
            let repo = model.repo;
            running.push(
                async move {
                    models.repos.warm_sha1(repo, &path).await;
                    None
                }
                .boxed(),
            );
        }
        for dep in &model.dependencies {
            let followed = matches!(dep.scope.as_deref(), None | Some("compile" | "runtime"))
                && !dep.optional
                && !exclusions
                    .iter()
                    .chain(excludes)
                    .chain(&dep.exclusions)
                    .any(|e| e.matches(&dep.group, &dep.artifact));
            let Some(version) = dep.version.clone().filter(|v| followed && soft(v)) else {
                continue;
            };
            let gav = (dep.group.clone(), dep.artifact.clone(), version);
            if seen.len() < MAX_MODELS && seen.insert(gav.clone()) {
                let mut below = exclusions.clone();
                below.extend(dep.exclusions.iter().cloned());
                queue.push_back((gav, below));
            }
        }
    }
}

/// A plain version (not a range, not a dynamic revision): the POM to fetch is known.
fn soft(version: &str) -> bool {
    Dynamic::parse(version).is_none()
        && matches!(Requirement::parse(version), Ok(Requirement::Soft(_)))
        && super::metadata::usable_part(version)
}
