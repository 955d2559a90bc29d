//! POMs fetched ahead of the walk. The walk goes level by level, and each
//! level waits for its slowest POM (and that POM's parents): across a real
//! network the levels add up to many round trips. Alongside it, this follows
//! the dependencies as declared (soft versions, compile and runtime scopes,
//! not optional, the first path's exclusions) as soon as each POM arrives, so
//! the walk mostly finds its models built. It only warms the models' cache: a
//! POM it fetches that the walk never asks for changes nothing, and a failure
//! is the walk's to report when (if) it asks.

use std::collections::{HashMap, HashSet, VecDeque};

use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};

use super::coord::{Coord, Exclusion};
use super::lineage::{jar_of, soft, Gav, Lineages};
use super::model::{Model, Models};
use super::pom::RawPom;

/// Models being built at once (each origin bounds its own requests too).
const PARALLEL: usize = 32;
/// Models fetched ahead at most: a bound on the traffic spent on guesses.
const MAX_MODELS: usize = 4096;
/// Classified jars of one module whose checksums are read ahead at most.
const MAX_CLASSIFIERS: usize = 4;

/// Builds the models the walk is likely to ask for; returns when none is left.
pub(super) async fn prefetch(models: &Models<'_>, roots: &[Coord], excludes: &[Exclusion]) {
    let mut seen: HashSet<Gav> = HashSet::new();
    let mut queue: VecDeque<(Gav, Vec<Exclusion>)> = VecDeque::new();
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
    let mut raw_seen: HashSet<Gav> = HashSet::new();
    let mut lineages = Lineages::default();
    // The classifiers asked of a module, by the POMs read so far.
    let mut classifiers: HashMap<Gav, Vec<String>> = HashMap::new();
    let mut running = FuturesUnordered::new();
    // Models being built (the raw POMs and checksums read beside them are
    // bounded by their origins only).
    let mut building = 0;
    loop {
        while building < PARALLEL {
            let Some(((g, a, v), exclusions)) = queue.pop_front() else {
                break;
            };
            if raw_seen.insert((g.clone(), a.clone(), v.clone())) {
                running.push(raw_job(
                    models,
                    g.clone(),
                    a.clone(),
                    v.clone(),
                    exclusions.clone(),
                ));
            }
            building += 1;
            running.push(
                async move {
                    let model = models.get(&g, &a, &v, Vec::new()).await.ok();
                    Done::Model(model.map(|m| (m, exclusions)))
                }
                .boxed(),
            );
        }
        let Some(done) = running.next().await else {
            return;
        };
        let done = match done {
            Done::Side => continue,
            Done::Model(model) => {
                building -= 1;
                model
            }
            Done::Raw(gav, raw, repo, exclusions) => {
                // Its jar's checksum as soon as its packaging is known.
                if let Some(path) = jar_of(&gav, &raw) {
                    running.push(warm_job(models, repo, path));
                }
                // Before its parents arrive: its parent, imports and the
                // dependencies whose coordinates it writes out in full; and,
                // as its ancestors arrive, those whose version they manage.
                let mut guessed = lineages.arrived(gav, *raw, exclusions, excludes);
                while let Some((gav, exclusions)) = guessed.pop() {
                    if raw_seen.contains(&gav) {
                        guessed.extend(lineages.reached(&gav, &exclusions, excludes));
                    } else if raw_seen.len() < MAX_MODELS {
                        raw_seen.insert(gav.clone());
                        let (g, a, v) = gav;
                        running.push(raw_job(models, g, a, v, exclusions));
                    }
                }
                continue;
            }
        };
        let Some((model, exclusions)) = done else {
            continue;
        };
        // Its jar's .sha1, which the resolution asks for once the graph is
        // known (a snapshot's file name needs its metadata: left to it).
        // So is a classified jar's that a POM read so far asks for.
        if !model.coord.version.ends_with("-SNAPSHOT") {
            let gav = (
                model.coord.group.clone(),
                model.coord.artifact.clone(),
                model.coord.version.clone(),
            );
            let plain = (model.packaging != "pom").then_some(None);
            let classified = classifiers.get(&gav).into_iter().flatten().cloned();
            for classifier in plain.into_iter().chain(classified.map(Some)) {
                let mut jar = model.coord.clone();
                jar.classifier = classifier;
                jar.ext = "jar".to_owned();
                running.push(warm_job(models, model.repo, jar.path()));
            }
        }
        follow(
            &model,
            &exclusions,
            excludes,
            &mut classifiers,
            &mut seen,
            &mut queue,
        );
    }
}

/// What the prefetch follows from a model built: the dependencies the walk
/// would follow (queued, with the exclusions of the path), and the classifiers
/// they ask of each module.
fn follow(
    model: &Model,
    exclusions: &[Exclusion],
    excludes: &[Exclusion],
    classifiers: &mut HashMap<Gav, Vec<String>>,
    seen: &mut HashSet<Gav>,
    queue: &mut VecDeque<(Gav, Vec<Exclusion>)>,
) {
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
        if let Some(classifier) = dep.classifier.clone().filter(|_| dep.kind == "jar") {
            let known = classifiers.entry(gav.clone()).or_default();
            if known.len() < MAX_CLASSIFIERS && !known.contains(&classifier) {
                known.push(classifier);
            }
        }
        if seen.len() < MAX_MODELS && seen.insert(gav.clone()) {
            let mut below = exclusions.to_vec();
            below.extend(dep.exclusions.iter().cloned());
            queue.push_back((gav, below));
        }
    }
}

/// Reads `path.sha1` in repository `repo` ahead (the resolution asks for it
/// once the graph is known).
fn warm_job<'a>(models: &'a Models<'_>, repo: usize, path: String) -> BoxFuture<'a, Done> {
    async move {
        models.repos.warm_sha1(repo, &path).await;
        Done::Side
    }
    .boxed()
}

/// What a job of the prefetch gives.
enum Done {
    /// A model built (none when it could not be).
    Model(Option<(std::sync::Arc<super::model::Model>, Vec<Exclusion>)>),
    /// A raw POM read (its coordinates, the repository that had it), and the
    /// exclusions of the path that led to it.
    Raw(Gav, Box<RawPom>, usize, Vec<Exclusion>),
    /// A raw POM that could not be read, or a warmed `.sha1`.
    Side,
}

/// Reads the raw POM of `g:a:v` (it is then in the repositories' cache for the
/// model that needs it).
fn raw_job<'a>(
    models: &'a Models<'_>,
    g: String,
    a: String,
    v: String,
    exclusions: Vec<Exclusion>,
) -> BoxFuture<'a, Done> {
    async move {
        // A snapshot's POM is named by its metadata: left to the walk.
        if v.ends_with("-SNAPSHOT") {
            return Done::Side;
        }
        let path = Coord::new(&g, &a, &v).pom().path();
        match models.repos.first(&path, super::pom::MAX_POM).await {
            Ok(Ok(found)) => match super::pom::parse(&found.bytes) {
                Ok(raw) => Done::Raw((g, a, v), Box::new(raw), found.repo, exclusions),
                Err(_) => Done::Side,
            },
            _ => Done::Side,
        }
    }
    .boxed()
}
