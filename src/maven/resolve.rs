//! The dependency graph of `--packages`, breadth-first (each level's POMs
//! fetched in parallel): compile and runtime scopes transitively (test,
//! provided and system not), optional dependencies skipped, exclusions along
//! the path and the global ones applied, relocations followed, ranges resolved
//! through `maven-metadata.xml`. Conflicts are decided as Spark's Ivy does
//! (`spark`: the latest revision requested anywhere wins, and what only an
//! evicted version needed goes with it) or as Maven does (`maven`: the nearest
//! wins, the first at the same depth).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use futures_util::StreamExt;

use super::coord::{Coord, Exclusion, Key};
use super::model::{Dep, Model, Models};
use super::reach::{Allowed, Reach};
use super::version::{ivy_cmp, Dynamic, Requirement};
use super::{MavenError, Mode};

/// Spark-mode rounds before giving up on conflicting versions settling.
const MAX_ROUNDS: usize = 20;
/// POMs fetched at once.
const PARALLEL_POMS: usize = 16;

/// One dependency waiting to be visited.
#[derive(Debug, Clone)]
struct Pending {
    group: String,
    artifact: String,
    requirement: String,
    kind: String,
    classifier: Option<String>,
    scope: String,
    /// The exclusions of the edge that asks for it (the dependency's own).
    exclusions: Vec<Exclusion>,
    /// The visit that asks for it (none for a package asked for).
    caller: Option<usize>,
    /// The package asked for whose dependencies led here (its place in
    /// `--packages`).
    root: usize,
    /// The management of every module on the path, root-most first (Ivy applies
    /// them as overrides: the root-most wins).
    overrides: Vec<Arc<Model>>,
    /// The modules that led here, root first.
    path: Vec<String>,
    /// Index of the visited node that declared it, for the tree.
    parent: Option<usize>,
}

/// A module in the resolved graph.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub coord: Coord,
    pub scope: String,
    /// The jar it contributes (none for `pom` packaging, or another extension).
    pub jar: Option<Coord>,
    pub repo: usize,
    pub path: Vec<String>,
    pub parent: Option<usize>,
}

/// A version that lost a conflict.
#[derive(Debug, Clone)]
pub(crate) struct Evicted {
    pub requested: String,
    pub chosen: String,
    pub by: Vec<String>,
    pub parent: Option<usize>,
}

/// The graph: visited modules in breadth-first order, and the evictions.
#[derive(Debug, Default)]
pub(crate) struct Graph {
    pub nodes: Vec<Node>,
    pub evicted: Vec<Evicted>,
}

/// What one traversal saw.
struct Round {
    graph: Graph,
    /// Every version asked for each module (after ranges and overrides).
    requested: HashMap<Key, Vec<String>>,
}

/// The graph of `roots`: walked until the versions settle (`spark`: the
/// latest asked for anywhere wins, which may change what is asked for) or
/// once (`maven`).
pub(super) async fn graph(
    models: &Models<'_>,
    roots: &[Coord],
    excludes: &[Exclusion],
    mode: Mode,
) -> Result<Graph, MavenError> {
    let mut winners: HashMap<Key, String> = HashMap::new();
    let mut seen: HashMap<Key, Vec<String>> = HashMap::new();
    for _ in 0..MAX_ROUNDS {
        let round = traverse(models, roots, excludes, mode, &winners).await?;
        if mode == Mode::Maven {
            return Ok(round.graph);
        }
        // Ivy: the latest revision asked for anywhere (so far) wins.
        for (key, versions) in round.requested {
            seen.entry(key).or_default().extend(versions);
        }
        let next: HashMap<Key, String> = seen
            .iter()
            .filter_map(|(key, versions)| {
                let best = versions.iter().max_by(|a, b| ivy_cmp(a, b))?;
                Some((key.clone(), best.clone()))
            })
            .collect();
        if next == winners {
            return Ok(round.graph);
        }
        winners = next;
    }
    Err(MavenError::Malformed(format!(
        "the versions of conflicting dependencies did not settle in {MAX_ROUNDS} rounds"
    )))
}

async fn traverse(
    models: &Models<'_>,
    roots: &[Coord],
    excludes: &[Exclusion],
    mode: Mode,
    winners: &HashMap<Key, String>,
) -> Result<Round, MavenError> {
    // Spark puts its excludes (the user's and its own) on the module that asks
    // for the packages: a package they match is not resolved at all.
    let mut level: Vec<Pending> = roots
        .iter()
        .enumerate()
        .filter(|(_, c)| !excludes.iter().any(|e| e.matches(&c.group, &c.artifact)))
        .map(|(root, c)| Pending {
            group: c.group.clone(),
            artifact: c.artifact.clone(),
            requirement: c.version.clone(),
            kind: "jar".into(),
            classifier: c.classifier.clone(),
            scope: "compile".into(),
            exclusions: Vec::new(),
            caller: None,
            root,
            overrides: Vec::new(),
            path: Vec::new(),
            parent: None,
        })
        .collect();
    let mut walk = Walk {
        excludes,
        mode,
        graph: Graph::default(),
        visits: Vec::new(),
        by_key: HashMap::new(),
        reach: Reach::default(),
        pom_asked: HashMap::new(),
    };
    // Each package's declarations: where in `--packages`, and the version asked.
    let mut declared: HashMap<Key, Vec<(usize, String)>> = HashMap::new();
    let mut requested: HashMap<Key, Vec<String>> = HashMap::new();
    while !level.is_empty() {
        // The versions this level asks for, then every POM of them at once.
        let mut asked = Vec::with_capacity(level.len());
        for p in &level {
            let version = choose(models, p, mode).await?;
            requested
                .entry((p.group.clone(), p.artifact.clone()))
                .or_default()
                .push(version.clone());
            asked.push(version);
        }
        let loaded = load_level(models, mode, &level, &asked, winners).await;
        let mut next = Vec::new();
        for (n, (p, version)) in level.into_iter().zip(asked).enumerate() {
            // A large level is walked in slices: the runtime's timers and
            // signals are served in between.
            if n % 256 == 255 {
                tokio::task::yield_now().await;
            }
            let key = (p.group.clone(), p.artifact.clone());
            if p.caller.is_none() {
                declared
                    .entry(key.clone())
                    .or_default()
                    .push((p.root, version.clone()));
            } else {
                let (first, last) = walk
                    .pom_asked
                    .entry(key.clone())
                    .or_insert((p.root, p.root));
                *first = (*first).min(p.root);
                *last = (*last).max(p.root);
            }
            let chosen = winners
                .get(&key)
                .cloned()
                .unwrap_or_else(|| version.clone());
            if let Some(&at) = walk.by_key.get(&key) {
                let used = walk.visits[at].version.clone();
                if used != version {
                    walk.evict(&p, &version, &used);
                } else {
                    walk.credit(at, &p);
                }
                // Another artifact of the module (a classifier): its own jar.
                if used == version || walk.carries_evicted_artifacts(at, &p) {
                    walk.other_artifact(at, &p);
                } else {
                    walk.hold(at, &p);
                }
                walk.revisit(at, &p, &mut next);
                continue;
            }
            if chosen != version {
                walk.evict(&p, &version, &chosen);
            }
            let model = match loaded.get(&(p.group.clone(), p.artifact.clone(), chosen.clone())) {
                Some(Ok(model)) => model.clone(),
                Some(Err(e)) => return Err(e.clone().required_by(&p.path)),
                None => unreachable!("every wanted model is loaded"),
            };
            let asked_winner = chosen == version;
            walk.visit(key, chosen, model, p, asked_winner, &mut next);
        }
        level = next;
    }
    if mode == Mode::Spark {
        walk.release_held();
        walk.drop_lost_declarations(&declared, winners);
    }
    let mut graph = walk.graph;
    let mut seen = HashSet::new();
    graph
        .evicted
        .retain(|e| seen.insert((e.requested.clone(), e.chosen.clone(), e.by.clone())));
    Ok(Round { graph, requested })
}

/// A module visited in a round: the version used, its model, its node, and
/// which of its dependencies are followed.
struct Visit {
    version: String,
    model: Arc<Model>,
    /// Its node in the graph.
    id: usize,
    scope: String,
    overrides: Vec<Arc<Model>>,
    /// The key id of each dependency, and whether it was followed.
    deps: Vec<(usize, bool)>,
    /// The jars of the module already in the graph (a classifier adds one).
    jars: Vec<Coord>,
    /// The path recorded for the node (the first one).
    path: Vec<String>,
    /// Its place in `--packages`, when it was first visited as a package.
    declared: Option<usize>,
    /// The package whose dependencies led to its first visit.
    root: usize,
    /// Artifacts asked of an evicted version, not carried (yet).
    held: Vec<Coord>,
    /// Whether the path recorded for the node asked for the version used (else
    /// the first path that does takes its place: the report's `required_by`).
    asked_winner: bool,
}

/// One round's walk over the graph. Visits are numbered as [`Reach`]'s nodes.
struct Walk<'e> {
    excludes: &'e [Exclusion],
    mode: Mode,
    graph: Graph,
    visits: Vec<Visit>,
    by_key: HashMap<Key, usize>,
    reach: Reach,
    /// Modules a POM asked for, and the first and last package whose
    /// dependencies did.
    pom_asked: HashMap<Key, (usize, usize)>,
}

impl Walk<'_> {
    fn evict(&mut self, p: &Pending, requested: &str, chosen: &str) {
        self.graph.evicted.push(Evicted {
            requested: format!("{}:{}:{requested}", p.group, p.artifact),
            chosen: chosen.to_owned(),
            by: p.path.clone(),
            parent: p.parent,
        });
    }

    /// The first visit of a module: its node, and its dependencies queued.
    fn visit(
        &mut self,
        key: Key,
        version: String,
        model: Arc<Model>,
        p: Pending,
        asked_winner: bool,
        next: &mut Vec<Pending>,
    ) {
        let id = self.graph.nodes.len();
        let mut jar = jar_of(&model, &p);
        // A classifier or type asked of a version that lost: held back, and
        // used only if nothing asks for the version used plainly (Ivy).
        let mut held = Vec::new();
        if self.mode == Mode::Spark && !asked_winner && jar.as_ref().is_some_and(|j| !plain(j)) {
            held.extend(jar.take());
        }
        self.graph.nodes.push(Node {
            coord: model.coord.clone(),
            scope: p.scope.clone(),
            jar,
            repo: model.repo,
            path: p.path.clone(),
            parent: p.parent,
        });
        let at = self.reach.add_node(p.caller.is_none());
        debug_assert_eq!(at, self.visits.len());
        let mut allowed = match p.caller {
            Some(caller) => self.reach.link(caller, at, &p.exclusions),
            None => Vec::new(),
        };
        let mut deps = Vec::with_capacity(model.dependencies.len());
        for dep in &model.dependencies {
            let (k, more) = self.reach.key(&(dep.group.clone(), dep.artifact.clone()));
            allowed.extend(more);
            deps.push((k, false));
        }
        let mut overrides = p.overrides;
        overrides.push(model.clone());
        self.visits.push(Visit {
            version,
            jars: self.graph.nodes[id].jar.iter().cloned().collect(),
            model,
            id,
            scope: p.scope,
            overrides,
            deps,
            path: p.path,
            declared: p.caller.is_none().then_some(p.root),
            root: p.root,
            held,
            asked_winner,
        });
        self.by_key.insert(key, at);
        allowed.push((at, usize::MAX));
        self.follow(allowed, next);
    }

    /// The dependencies of the visits in `allowed` that their keys now allow,
    /// queued: visits in order, each one's dependencies in the POM's order.
    fn follow(&mut self, allowed: Allowed, next: &mut Vec<Pending>) {
        let touched: BTreeSet<usize> = allowed.into_iter().map(|(n, _)| n).collect();
        for at in touched {
            for d in 0..self.visits[at].deps.len() {
                let (k, followed) = self.visits[at].deps[d];
                if followed || !self.reach.allows(at, k) {
                    continue;
                }
                self.visits[at].deps[d].1 = true;
                let visit = &self.visits[at];
                if let Some(child) = self.child(at, visit, &visit.model.dependencies[d]) {
                    next.push(child);
                }
            }
        }
    }

    /// A path that asked for the very version used is the one to name as the
    /// module's requester, when the first path asked for another.
    fn credit(&mut self, at: usize, p: &Pending) {
        let visit = &mut self.visits[at];
        if visit.asked_winner {
            return;
        }
        visit.asked_winner = true;
        let node = &mut self.graph.nodes[visit.id];
        node.path = p.path.clone();
        node.parent = p.parent;
    }

    /// Whether a classifier or type asked of an evicted version of visit `at`
    /// is carried to the version used. Ivy 2.5.1 (Spark 3.5) walks depth
    /// first, package by package, and carries it (with the main jar) only when
    /// the version used is a package asked for, declared before the package
    /// whose dependencies ask for the evicted one, and no POM asked for the
    /// module before that; otherwise the classifier is dropped with the
    /// evicted version. (Ivy 2.5.2 and later, Spark 4, never carry it.)
    fn carries_evicted_artifacts(&self, at: usize, p: &Pending) -> bool {
        let visit = &self.visits[at];
        let key = (
            visit.model.coord.group.clone(),
            visit.model.coord.artifact.clone(),
        );
        self.mode == Mode::Spark
            && visit.declared.is_some_and(|d| d < p.root)
            && self
                .pom_asked
                .get(&key)
                .is_none_or(|&(first, _)| first >= p.root)
    }

    /// A classifier or type asked of an evicted version, not carried now.
    fn hold(&mut self, at: usize, p: &Pending) {
        let visit = &mut self.visits[at];
        if let Some(jar) = jar_of(&visit.model, p).filter(|j| !plain(j)) {
            if !visit.held.contains(&jar) {
                visit.held.push(jar);
            }
        }
    }

    /// A module only ever asked for with classifiers of evicted versions
    /// gets those (without its main jar), as Ivy gives them.
    fn release_held(&mut self) {
        for at in 0..self.visits.len() {
            if !self.visits[at].jars.is_empty() {
                continue;
            }
            let held = std::mem::take(&mut self.visits[at].held);
            let id = self.visits[at].id;
            for (n, jar) in held.into_iter().enumerate() {
                self.visits[at].jars.push(jar.clone());
                if n == 0 {
                    self.graph.nodes[id].jar = Some(jar);
                } else {
                    let node = Node {
                        jar: Some(jar),
                        ..self.graph.nodes[id].clone()
                    };
                    self.graph.nodes.push(node);
                }
            }
        }
    }

    /// Ivy 2.5 (Spark 3.5 and 4) loses the jar of a package declared twice
    /// when its first declaration asks for a version that loses: the winner's
    /// dependencies are retrieved, its own jar is not, unless a POM of a
    /// package declared after the winner's last declaration asks for the
    /// module (found against Spark: `api:1, simple (-> api:2), api:2` gives no
    /// api jar; `api:1, api:2, user (-> api:2)` gives api 2).
    fn drop_lost_declarations(
        &mut self,
        declared: &HashMap<Key, Vec<(usize, String)>>,
        winners: &HashMap<Key, String>,
    ) {
        for (key, declarations) in declared {
            let (Some(&at), Some((_, first))) = (self.by_key.get(key), declarations.first()) else {
                continue;
            };
            let used = winners.get(key).unwrap_or(&self.visits[at].version);
            let last_winner = declarations
                .iter()
                .filter(|(_, v)| v == used)
                .map(|&(root, _)| root)
                .max();
            let kept = self
                .pom_asked
                .get(key)
                .is_some_and(|&(_, last)| last_winner.is_none_or(|w| last > w));
            if used != first && !kept {
                let id = self.visits[at].id;
                tracing::info!(
                    "{}:{}: declared first as {first}, which loses to {used}: its jar is left out, as Spark's Ivy does",
                    key.0,
                    key.1
                );
                self.graph.nodes[id].jar = None;
            }
        }
    }

    /// A visited module asked for with another classifier or type: that jar
    /// joins the graph too (Maven and Ivy both give `lib` and `lib:natives`).
    fn other_artifact(&mut self, at: usize, p: &Pending) {
        let visit = &mut self.visits[at];
        let Some(jar) = jar_of(&visit.model, p) else {
            return;
        };
        if visit.jars.contains(&jar) {
            return;
        }
        visit.jars.push(jar.clone());
        if self.graph.nodes[visit.id].jar.is_none() && !visit.held.is_empty() {
            // The first jar of a module first reached for an evicted version.
            self.graph.nodes[visit.id].jar = Some(jar);
            return;
        }
        self.graph.nodes.push(Node {
            coord: visit.model.coord.clone(),
            scope: p.scope.clone(),
            jar: Some(jar),
            repo: visit.model.repo,
            path: p.path.clone(),
            parent: p.parent,
        });
    }

    /// Another path to a visited module: as Ivy does (`spark`), its edge joins
    /// the graph, so what it does not exclude is followed below the module
    /// ([`Reach`]). Maven keeps the node it reached first (the nearest) and
    /// that node's path: its edges form a tree, whose one path per module
    /// decides what is excluded below it.
    fn revisit(&mut self, at: usize, p: &Pending, next: &mut Vec<Pending>) {
        if self.mode != Mode::Spark {
            return;
        }
        let allowed = match p.caller {
            Some(caller) => self.reach.link(caller, at, &p.exclusions),
            None => self.reach.make_root(at),
        };
        self.follow(allowed, next);
    }

    /// Dependency `dep` of visit `at`, if it is to be followed (its key is
    /// allowed there: checked by the caller).
    fn child(&self, at: usize, visit: &Visit, dep: &Dep) -> Option<Pending> {
        let scope = transitive_scope(&visit.scope, dep)?;
        // Ivy applies a dependency's exclusions to the dependency itself too
        // (`<exclusion>g:*` on a dependency of group g drops it); Maven does not.
        let excludes_itself = self.mode == Mode::Spark
            && dep
                .exclusions
                .iter()
                .any(|e| e.matches(&dep.group, &dep.artifact));
        let excluded = excludes_itself
            || dep.optional
            || self
                .excludes
                .iter()
                .any(|e| e.matches(&dep.group, &dep.artifact));
        if excluded {
            return None;
        }
        let mut path = visit.path.clone();
        path.push(visit.model.coord.to_string());
        Some(Pending {
            group: dep.group.clone(),
            artifact: dep.artifact.clone(),
            requirement: dep.version.clone().unwrap_or_default(),
            kind: dep.kind.clone(),
            classifier: dep.classifier.clone(),
            scope,
            exclusions: dep.exclusions.clone(),
            caller: Some(at),
            root: visit.root,
            overrides: visit.overrides.clone(),
            path,
            parent: Some(visit.id),
        })
    }
}

/// The model of every module a level asks for (the winning version where one
/// is known), fetched at once.
async fn load_level(
    models: &Models<'_>,
    mode: Mode,
    level: &[Pending],
    asked: &[String],
    winners: &HashMap<Key, String>,
) -> HashMap<(String, String, String), Result<Arc<Model>, MavenError>> {
    let wanted: Vec<(String, String, String)> = level
        .iter()
        .zip(asked)
        .map(|(p, v)| {
            let key = (p.group.clone(), p.artifact.clone());
            let v = winners.get(&key).cloned().unwrap_or_else(|| v.clone());
            (p.group.clone(), p.artifact.clone(), v)
        })
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    futures_util::stream::iter(wanted)
        .map(|(g, a, v)| async move {
            let model = load_relocated(models, mode, &g, &a, &v).await;
            ((g, a, v), model)
        })
        .buffer_unordered(PARALLEL_POMS)
        .collect()
        .await
}

/// The version `p` asks for: Ivy applies the management of the modules on its
/// path as overrides (the root-most wins); a range becomes the highest
/// available version in it.
async fn choose(models: &Models<'_>, p: &Pending, mode: Mode) -> Result<String, MavenError> {
    let mut requirement = p.requirement.clone();
    if mode == Mode::Spark {
        // Ivy turns each POM's management and its own direct dependencies into
        // overrides of the versions below it; the root-most wins. Not the
        // declaring module's: that one already gave the requirement.
        let ancestors = p.overrides.len().saturating_sub(1);
        let same = |d: &&Dep| {
            d.group == p.group
                && d.artifact == p.artifact
                && d.kind == p.kind
                && d.classifier == p.classifier
        };
        let overridden = p.overrides[..ancestors].iter().find_map(|m| {
            m.management
                .iter()
                .find(same)
                .or_else(|| {
                    // Only dependencies Spark follows: not optional, not test or
                    // provided ones.
                    m.dependencies.iter().filter(|d| !d.optional).find(|d| {
                        same(d) && matches!(d.scope.as_deref(), None | Some("compile" | "runtime"))
                    })
                })
                .and_then(|d| d.version.clone())
        });
        if let Some(v) = overridden {
            requirement = v;
        }
    }
    if mode == Mode::Spark {
        // Ivy reads `[x]` (no comma) as the version x, without listing any.
        if let Some(exact) = requirement
            .trim()
            .strip_prefix('[')
            .and_then(|r| r.strip_suffix(']'))
            .filter(|r| !r.contains(','))
        {
            requirement = exact.trim().to_owned();
        }
    }
    if let Some(dynamic) = Dynamic::parse(&requirement) {
        if mode == Mode::Maven {
            return Err(MavenError::Malformed(format!(
                "{}:{} (required by {}): '{requirement}' is one of Ivy's dynamic revisions, which Maven does not have: give a version or a range ([1.0,2.0)), or resolve as Spark does (--resolution spark)",
                p.group,
                p.artifact,
                shown_path(&p.path)
            )));
        }
        let (available, misses) = available_versions(models, &p.group, &p.artifact).await?;
        return dynamic
            .pick(&available)
            .cloned()
            .ok_or_else(|| no_version(p, &requirement, &available, misses));
    }
    let parsed = Requirement::parse(&requirement).map_err(|why| {
        MavenError::Malformed(format!(
            "{}:{} (required by {}): {why}",
            p.group,
            p.artifact,
            shown_path(&p.path)
        ))
    })?;
    if let Requirement::Soft(v) = parsed {
        // It becomes a directory and a file name (and the jar's name here).
        if !super::metadata::usable_part(&v) {
            return Err(MavenError::Malformed(format!(
                "{}:{} (required by {}): version '{}' cannot be one (a path separator, '..', whitespace or a URL delimiter)",
                p.group,
                p.artifact,
                shown_path(&p.path),
                v.escape_debug()
            )));
        }
        return Ok(v);
    }
    let (available, misses) = available_versions(models, &p.group, &p.artifact).await?;
    parsed
        .pick(&available)
        .cloned()
        .ok_or_else(|| no_version(p, &requirement, &available, misses))
}

/// No version of `p` satisfies `requirement`: what is available, or that no
/// repository lists the versions (each one's answer).
fn no_version(
    p: &Pending,
    requirement: &str,
    available: &[String],
    misses: super::repo::Misses,
) -> MavenError {
    let what = if available.is_empty() {
        format!(
            "the versions of {}:{} to pick '{requirement}' from: no repository lists them (maven-metadata.xml)",
            p.group, p.artifact
        )
    } else {
        format!(
            "a version of {}:{} in {requirement} (available: {})",
            p.group,
            p.artifact,
            available.join(", ")
        )
    };
    MavenError::NotFound {
        what,
        path: p.path.clone(),
        misses,
    }
}

/// Every version `maven-metadata.xml` lists for `group:artifact`, in the first
/// repository that has it; none, and what each repository answered, when none has.
async fn available_versions(
    models: &Models<'_>,
    group: &str,
    artifact: &str,
) -> Result<(Vec<String>, super::repo::Misses), MavenError> {
    let path = format!("{}/{artifact}/maven-metadata.xml", group.replace('.', "/"));
    let found = match models
        .repos
        .first(&path, super::metadata::MAX_METADATA)
        .await?
    {
        Ok(found) => found,
        Err(misses) => {
            // As Ivy does: the directory's listing, where a repository serves one.
            let dir = format!("{}/{artifact}", group.replace('.', "/"));
            let listed = match models.repos.listing(&dir).await {
                Some(html) => super::metadata::listed_versions(&html),
                None => Vec::new(),
            };
            return Ok((listed, misses));
        }
    };
    let versions = super::metadata::versions(&found.bytes)
        .map_err(|why| MavenError::Malformed(format!("{path}: {why}")))?;
    Ok((versions, Default::default()))
}

/// The model of `g:a:v`, following relocations (a few hops). Ivy (`spark`)
/// reads a relocation to another module as a dependency on it, and one to
/// another version of the same module as Spark sees it: only the relocated
/// version's dependencies count, not its jar.
async fn load_relocated(
    models: &Models<'_>,
    mode: Mode,
    g: &str,
    a: &str,
    v: &str,
) -> Result<Arc<Model>, MavenError> {
    let (mut g, mut a, mut v) = (g.to_owned(), a.to_owned(), v.to_owned());
    let asked = Coord::new(&g, &a, &v);
    for _ in 0..5 {
        let model = models.get(&g, &a, &v, Vec::new()).await?;
        let Some(r) = &model.relocation else {
            return Ok(model);
        };
        let target = (
            r.group.clone().unwrap_or_else(|| g.clone()),
            r.artifact.clone().unwrap_or_else(|| a.clone()),
            r.version.clone().unwrap_or_else(|| v.clone()),
        );
        if target == (g.clone(), a.clone(), v.clone()) {
            return Ok(model);
        }
        tracing::info!(
            "{g}:{a}:{v} is relocated to {}:{}:{}",
            target.0,
            target.1,
            target.2
        );
        if mode == Mode::Spark && (target.0 != g || target.1 != a) {
            // Ivy reads a relocated POM as a module without an artifact that
            // depends on its new coordinates: the target meets conflicts and
            // exclusions (`--exclude-packages` too) as any dependency does.
            return Ok(Arc::new(Model {
                coord: Coord::new(&g, &a, &v),
                packaging: "pom".into(),
                repo: model.repo,
                dependencies: vec![super::model::Dep {
                    group: target.0,
                    artifact: target.1,
                    version: Some(target.2),
                    kind: "jar".into(),
                    classifier: None,
                    scope: None,
                    optional: false,
                    exclusions: Vec::new(),
                }],
                management: Vec::new(),
                relocation: None,
            }));
        }
        if mode == Mode::Spark && target.0 == g && target.1 == a {
            let relocated = models
                .get(&target.0, &target.1, &target.2, Vec::new())
                .await?;
            return Ok(Arc::new(Model {
                coord: asked,
                packaging: "pom".into(),
                repo: model.repo,
                dependencies: relocated.dependencies.clone(),
                management: relocated.management.clone(),
                relocation: None,
            }));
        }
        (g, a, v) = target;
    }
    Err(MavenError::Malformed(format!(
        "{g}:{a}:{v}: more than 5 relocations"
    )))
}

/// The jar a module contributes: its main artifact (or the classifier asked
/// for), unless it is a `pom` module or the dependency asks for a `pom`.
fn jar_of(model: &Model, p: &Pending) -> Option<Coord> {
    if p.kind == "pom" || model.packaging == "pom" {
        return None;
    }
    let (ext, classifier) = match p.kind.as_str() {
        "test-jar" => ("jar", Some("tests".to_owned())),
        "jar" | "bundle" | "maven-plugin" | "ejb" | "eclipse-plugin" | "orbit" => {
            ("jar", p.classifier.clone())
        }
        other => (other, p.classifier.clone()),
    };
    Some(Coord {
        classifier,
        ext: ext.to_owned(),
        ..model.coord.clone()
    })
}

/// A module's main jar (no classifier, a `.jar`).
fn plain(jar: &Coord) -> bool {
    jar.classifier.is_none() && jar.ext == "jar"
}

/// A dependency's scope through a module reached with `parent`: compile and
/// runtime are transitive (runtime wins), the others are not.
fn transitive_scope(parent: &str, dep: &Dep) -> Option<String> {
    match dep.scope.as_deref().unwrap_or("compile") {
        // `import` belongs in dependencyManagement; in dependencies Maven and Ivy
        // take it as compile.
        "compile" | "import" => Some(parent.to_owned()),
        "runtime" => Some("runtime".into()),
        _ => None,
    }
}

/// The modules that required one, nearest first: `b:1 <- a:1 (--packages)`.
pub(crate) fn shown_path(path: &[String]) -> String {
    if path.is_empty() {
        "--packages".to_owned()
    } else {
        let mut nearest_first: Vec<&str> = path.iter().map(String::as_str).rev().collect();
        nearest_first.push("--packages");
        nearest_first.join(" <- ")
    }
}

/// The tree as `mvn dependency:tree` draws it: chosen modules, and under their
/// requesters the versions that lost.
pub(crate) fn tree(graph: &Graph) -> Vec<String> {
    let mut children: BTreeMap<Option<usize>, Vec<Line>> = BTreeMap::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        children.entry(node.parent).or_default().push(Line::Node(i));
    }
    for (i, e) in graph.evicted.iter().enumerate() {
        children.entry(e.parent).or_default().push(Line::Evicted(i));
    }
    let mut out = Vec::new();
    fn walk(
        graph: &Graph,
        children: &BTreeMap<Option<usize>, Vec<Line>>,
        at: Option<usize>,
        prefix: &str,
        out: &mut Vec<String>,
    ) {
        let Some(lines) = children.get(&at) else {
            return;
        };
        for (n, line) in lines.iter().enumerate() {
            let last = n + 1 == lines.len();
            let branch = if at.is_none() {
                ""
            } else if last {
                "\\- "
            } else {
                "+- "
            };
            match line {
                Line::Node(i) => {
                    let node = &graph.nodes[*i];
                    let kind = node.jar.as_ref().map_or("pom", |j| j.ext.as_str());
                    out.push(format!(
                        "{prefix}{branch}{}:{kind}:{}",
                        node.coord, node.scope
                    ));
                    let deeper = if at.is_none() {
                        String::new()
                    } else if last {
                        format!("{prefix}   ")
                    } else {
                        format!("{prefix}|  ")
                    };
                    walk(graph, children, Some(*i), &deeper, out);
                }
                Line::Evicted(i) => {
                    let e = &graph.evicted[*i];
                    out.push(format!(
                        "{prefix}{branch}({} - omitted for conflict with {})",
                        e.requested, e.chosen
                    ));
                }
            }
        }
    }
    walk(graph, &children, None, "", &mut out);
    out
}

#[derive(Debug)]
enum Line {
    Node(usize),
    Evicted(usize),
}
