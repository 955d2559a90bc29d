//! The effective model of a module, as Maven builds it: the POM merged with its
//! parents (any depth; the child wins), properties interpolated (`project.*`,
//! `pom.*`, `parent.*`, the POM's own, nested, cycles refused), BOM imports
//! expanded (the POM's own and inherited entries win; between imports Maven keeps
//! the first, Ivy the last), and its own
//! dependencies completed from its dependencyManagement.

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use tokio::sync::OnceCell;

use super::coord::{Coord, Exclusion};
use super::pom::{self, RawDep, RawPom, Relocation};
use super::repo::Repos;
use super::{MavenError, Mode};

/// How deep parents and imports may nest.
const MAX_DEPTH: usize = 32;

/// A dependency of an effective model (or a managed one), interpolated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dep {
    pub group: String,
    pub artifact: String,
    /// A version or a range; `None` only in management entries without one.
    pub version: Option<String>,
    pub kind: String,
    pub classifier: Option<String>,
    pub scope: Option<String>,
    pub optional: bool,
    pub exclusions: Vec<Exclusion>,
}

impl Dep {
    /// What management entries are matched on.
    pub(crate) fn key(&self) -> (String, String, String, String) {
        (
            self.group.clone(),
            self.artifact.clone(),
            self.kind.clone(),
            self.classifier.clone().unwrap_or_default(),
        )
    }
}

/// A module's effective model.
#[derive(Debug)]
pub(crate) struct Model {
    pub coord: Coord,
    pub packaging: String,
    /// The repository its POM came from (its jar is fetched from there too).
    pub repo: usize,
    pub dependencies: Vec<Dep>,
    pub management: Vec<Dep>,
    pub relocation: Option<Relocation>,
}

type Slot = Arc<OnceCell<Result<Arc<Model>, MavenError>>>;

/// Effective models, each built once per run.
pub(crate) struct Models<'a> {
    pub repos: &'a Repos,
    /// Which resolver's rules apply where they differ (the order of BOM imports).
    mode: Mode,
    built: Mutex<HashMap<String, Slot>>,
    /// BOMs built for an import ([`Models::import`]).
    imported: Mutex<HashMap<String, Result<Arc<Model>, MavenError>>>,
}

impl<'a> Models<'a> {
    pub(crate) fn new(repos: &'a Repos, mode: Mode) -> Self {
        Models {
            repos,
            mode,
            built: Mutex::new(HashMap::new()),
            imported: Mutex::new(HashMap::new()),
        }
    }

    /// The effective model of `g:a:v`; `chain` is the parents and imports that
    /// led here (for cycles and messages).
    pub(crate) fn get(
        &'a self,
        group: &'a str,
        artifact: &'a str,
        version: &'a str,
        chain: Vec<String>,
    ) -> BoxFuture<'a, Result<Arc<Model>, MavenError>> {
        async move {
            let id = format!("{group}:{artifact}:{version}");
            check_chain(&chain, &id)?;
            let slot = {
                let mut built = self.built.lock().expect("lock");
                built.entry(id.clone()).or_default().clone()
            };
            let mut chain = chain;
            chain.push(id);
            slot.get_or_init(|| self.build(group, artifact, version, chain))
                .await
                .clone()
        }
        .boxed()
    }

    /// The effective model of a BOM that `chain`'s last module imports. Never
    /// waits for a build in progress elsewhere: two BOMs importing each other,
    /// built at once from both ends, would wait for each other for ever. A
    /// build already done is reused; else it is built here, along `chain`
    /// (where a cycle is found), and kept.
    fn import(
        &'a self,
        group: &'a str,
        artifact: &'a str,
        version: &'a str,
        chain: Vec<String>,
    ) -> BoxFuture<'a, Result<Arc<Model>, MavenError>> {
        async move {
            let id = format!("{group}:{artifact}:{version}");
            check_chain(&chain, &id)?;
            let done = {
                let built = self.built.lock().expect("lock");
                built.get(&id).and_then(|slot| slot.get().cloned())
            };
            if let Some(done) = done {
                return done;
            }
            if let Some(done) = self.imported.lock().expect("lock").get(&id).cloned() {
                return done;
            }
            let mut chain = chain;
            chain.push(id.clone());
            let done = self.build(group, artifact, version, chain).await;
            self.imported.lock().expect("lock").insert(id, done.clone());
            done
        }
        .boxed()
    }

    async fn build(
        &'a self,
        group: &str,
        artifact: &str,
        version: &str,
        chain: Vec<String>,
    ) -> Result<Arc<Model>, MavenError> {
        let coord = Coord::new(group, artifact, version).pom();
        // A missing POM of the module itself is named with the path that required
        // it (filled in by the caller); a missing parent with the module's chain.
        let (raw, repo) = self.raw(&coord, &chain[..chain.len() - 1]).await?;
        // The parents' raw POMs, nearest first.
        let mut lineage = vec![raw];
        while let Some(parent) = lineage.last().and_then(|p| p.parent.clone()) {
            let id = format!("{}:{}:{}", parent.group, parent.artifact, parent.version);
            if chain.contains(&id) || lineage.len() > MAX_DEPTH {
                return Err(MavenError::Malformed(format!(
                    "a cycle of parents: {} -> {id}",
                    chain.join(" -> ")
                )));
            }
            let pcoord = Coord::new(&parent.group, &parent.artifact, &parent.version).pom();
            let (praw, _) = self.raw(&pcoord, &chain).await?;
            lineage.push(praw);
        }
        let merged = merge(&lineage, group, version);
        let props = properties(&lineage, group, artifact, version);
        let interp = |s: &str| interpolate(s, &props, &coord);
        // The POM's own (and inherited) management first: an import never beats
        // it, whatever the order they are declared in.
        let mut management: Vec<Dep> = Vec::new();
        let mut imports = Vec::new();
        for raw in &merged.management {
            let dep = to_dep(raw, &interp)?;
            if dep.scope.as_deref() == Some("import") && dep.kind == "pom" {
                imports.push(dep);
            } else if !management.iter().any(|m| m.key() == dep.key()) {
                management.push(dep);
            }
        }
        let own = management.len();
        for dep in imports {
            let Some(v) = dep.version.clone() else {
                return Err(MavenError::Malformed(format!(
                    "{coord}: the imported BOM {}:{} has no version",
                    dep.group, dep.artifact
                )));
            };
            let bom = self
                .import(&dep.group, &dep.artifact, &v, chain.clone())
                .await?;
            for managed in &bom.management {
                match management.iter().position(|m| m.key() == managed.key()) {
                    None => management.push(managed.clone()),
                    // Between imports: Maven keeps the first, Ivy the last.
                    Some(at) if at >= own && self.mode == Mode::Spark => {
                        management[at] = managed.clone();
                    }
                    Some(_) => {}
                }
            }
        }
        let mut dependencies = Vec::new();
        for raw in &merged.dependencies {
            let mut dep = to_dep(raw, &interp)?;
            if let Some(managed) = management.iter().find(|m| m.key() == dep.key()) {
                if dep.version.is_none() {
                    dep.version = managed.version.clone();
                }
                if dep.scope.is_none() {
                    dep.scope = managed.scope.clone();
                }
                for e in &managed.exclusions {
                    if !dep.exclusions.contains(e) {
                        dep.exclusions.push(e.clone());
                    }
                }
            }
            if dep.version.is_none() {
                return Err(MavenError::Malformed(format!(
                    "{coord}: the dependency {}:{} has no version and none is managed",
                    dep.group, dep.artifact
                )));
            }
            dependencies.push(dep);
        }
        let relocation = lineage[0].relocation.clone().map(|r| Relocation {
            group: r.group.map(|g| interp(&g)).transpose().ok().flatten(),
            artifact: r.artifact.map(|a| interp(&a)).transpose().ok().flatten(),
            version: r.version.map(|v| interp(&v)).transpose().ok().flatten(),
        });
        Ok(Arc::new(Model {
            coord: Coord::new(group, artifact, version),
            packaging: merged
                .packaging
                .map(|p| interp(&p))
                .transpose()?
                .unwrap_or_else(|| "jar".into()),
            repo,
            dependencies,
            management,
            relocation,
        }))
    }

    /// The raw POM of `coord` and the repository it came from.
    async fn raw(&self, coord: &Coord, chain: &[String]) -> Result<(RawPom, usize), MavenError> {
        // Parents, imports and relocations come from POMs: each part becomes a
        // directory of the repository path.
        for (name, part) in [
            ("groupId", &coord.group),
            ("artifactId", &coord.artifact),
            ("version", &coord.version),
        ] {
            if !super::metadata::usable_part(part) {
                return Err(MavenError::Malformed(format!(
                    "{} names {name} '{}', which cannot be part of a repository path (a path separator, '..', whitespace or a URL delimiter)",
                    if chain.is_empty() { coord_text(coord) } else { chain.join(" -> ") },
                    part.escape_debug()
                )));
            }
        }
        let path = super::repo::file_path(self.repos, coord).await?;
        let found = match self.repos.first(&path, pom::MAX_POM).await? {
            Ok(found) => found,
            Err(misses) => {
                return Err(MavenError::NotFound {
                    what: format!("the POM of {}", coord_text(coord)),
                    path: chain.to_vec(),
                    misses,
                })
            }
        };
        let url = self.repos.list[found.repo].url(&path);
        let raw = pom::parse(&found.bytes).map_err(|why| {
            MavenError::Malformed(format!(
                "{}: {why}",
                crate::util::redact::redact_url(url.as_str())
            ))
        })?;
        Ok((raw, found.repo))
    }
}

/// `id` may be built along `chain` (the parents and imports that led to it):
/// not already on it, not too deep.
fn check_chain(chain: &[String], id: &str) -> Result<(), MavenError> {
    if chain.iter().any(|c| c == id) {
        return Err(MavenError::Malformed(format!(
            "a cycle of parents or imports: {} -> {id}",
            chain.join(" -> ")
        )));
    }
    if chain.len() > MAX_DEPTH {
        return Err(MavenError::Malformed(format!(
            "parents and imports nest more than {MAX_DEPTH} deep at {id}"
        )));
    }
    Ok(())
}

fn coord_text(c: &Coord) -> String {
    format!("{}:{}:{}", c.group, c.artifact, c.version)
}

/// The lineage (child first) merged as Maven's inheritance does: the child's
/// values win; management and dependencies are the child's, then each parent's
/// not already there (by group, artifact, type and classifier).
pub(crate) fn merge<P: Borrow<RawPom>>(lineage: &[P], group: &str, version: &str) -> RawPom {
    let child = lineage[0].borrow();
    let mut out = RawPom {
        group: Some(group.to_owned()),
        artifact: child.artifact.clone(),
        version: Some(version.to_owned()),
        packaging: child.packaging.clone(),
        ..RawPom::default()
    };
    // By key, not by a scan of what is kept: a lineage of POMs with thousands
    // of entries each would be quadratic.
    let mut managed = HashSet::new();
    let mut declared = HashSet::new();
    for pom in lineage {
        for dep in &pom.borrow().management {
            if managed.insert(dep.management_key()) {
                out.management.push(dep.clone());
            }
        }
        for dep in &pom.borrow().dependencies {
            if declared.insert(dep.management_key()) {
                out.dependencies.push(dep.clone());
            }
        }
    }
    out
}

/// The properties a POM's values may name: the lineage's own (the child's win),
/// then the model's `project.*`, `pom.*` and `parent.*` values.
pub(crate) fn properties<P: Borrow<RawPom>>(
    lineage: &[P],
    group: &str,
    artifact: &str,
    version: &str,
) -> HashMap<String, String> {
    let mut props = HashMap::new();
    for pom in lineage.iter().rev() {
        for (k, v) in &pom.borrow().properties {
            props.insert(k.clone(), v.clone());
        }
    }
    for prefix in ["project.", "pom.", ""] {
        props.insert(format!("{prefix}groupId"), group.to_owned());
        props.insert(format!("{prefix}artifactId"), artifact.to_owned());
        props.insert(format!("{prefix}version"), version.to_owned());
    }
    if let Some(parent) = &lineage[0].borrow().parent {
        for prefix in ["project.parent.", "parent.", "pom.parent."] {
            props.insert(format!("{prefix}groupId"), parent.group.clone());
            props.insert(format!("{prefix}artifactId"), parent.artifact.clone());
            props.insert(format!("{prefix}version"), parent.version.clone());
        }
    }
    if let Some(p) = &lineage[0].borrow().packaging {
        props.insert("project.packaging".into(), p.clone());
    }
    props
}

/// Substitutions one value may take in all: a POM whose properties name each
/// other many times over (`${a}${a}…` with `a` naming `b` the same way) would
/// otherwise take time exponential in its nesting even when it expands to little.
const MAX_SUBSTITUTIONS: usize = 4096;

/// Replaces every `${name}` in `value` (recursively); an unknown name is left as
/// written (Maven does the same; such a value then fails where it is used).
pub(crate) fn interpolate(
    value: &str,
    props: &HashMap<String, String>,
    at: &Coord,
) -> Result<String, MavenError> {
    fn expand(
        value: &str,
        props: &HashMap<String, String>,
        stack: &mut Vec<String>,
        at: &Coord,
        budget: &mut usize,
    ) -> Result<String, MavenError> {
        let mut out = String::with_capacity(value.len());
        let mut rest = value;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let Some(len) = rest[start + 2..].find('}') else {
                out.push_str(&rest[start..]);
                return Ok(out);
            };
            let name = &rest[start + 2..start + 2 + len];
            match props.get(name) {
                Some(v) => {
                    if stack.iter().any(|s| s == name) {
                        return Err(MavenError::Malformed(format!(
                            "{}: the property {name} refers to itself (${{{}}})",
                            coord_text(at),
                            stack.join("} -> ${")
                        )));
                    }
                    *budget = budget.saturating_sub(1);
                    if stack.len() > 32 || out.len() > 64 << 10 || *budget == 0 {
                        return Err(MavenError::Malformed(format!(
                            "{}: the property {} nests more than 32 deep, expands to more than 64 KiB or takes more than {MAX_SUBSTITUTIONS} substitutions",
                            coord_text(at),
                            used_as(stack, name)
                        )));
                    }
                    stack.push(name.to_owned());
                    out.push_str(&expand(v, props, stack, at, budget)?);
                    stack.pop();
                    // Checked after each substitution too: two names of a 60 KiB
                    // value are 120 KiB (QA found that way past the limit).
                    if out.len() > 64 << 10 {
                        return Err(MavenError::Malformed(format!(
                            "{}: a value naming ${{{}}} expands to more than 64 KiB",
                            coord_text(at),
                            stack.first().map_or(name, String::as_str)
                        )));
                    }
                }
                None => out.push_str(&rest[start..start + 3 + len]),
            }
            rest = &rest[start + 3 + len..];
        }
        out.push_str(rest);
        Ok(out)
    }
    let mut budget = MAX_SUBSTITUTIONS;
    expand(value, props, &mut Vec::new(), at, &mut budget)
}

/// The property the POM's value named (the outermost of `stack`, else `name`)
/// and, when the limit was met deeper, the chain that led to `name`.
fn used_as(stack: &[String], name: &str) -> String {
    match stack.split_first() {
        None => name.to_owned(),
        Some((outer, through)) => {
            let chain: Vec<String> = through
                .iter()
                .map(String::as_str)
                .chain([name])
                .map(|p| format!("${{{p}}}"))
                .collect();
            format!("{outer} (through {})", chain.join(" -> "))
        }
    }
}

fn to_dep(
    raw: &RawDep,
    interp: &dyn Fn(&str) -> Result<String, MavenError>,
) -> Result<Dep, MavenError> {
    let opt = |v: &Option<String>| v.as_deref().map(interp).transpose();
    let dep = Dep {
        group: interp(&raw.group)?,
        artifact: interp(&raw.artifact)?,
        version: opt(&raw.version)?,
        kind: opt(&raw.kind)?.unwrap_or_else(|| "jar".into()),
        classifier: opt(&raw.classifier)?,
        scope: opt(&raw.scope)?,
        optional: opt(&raw.optional)?.is_some_and(|o| o.trim() == "true"),
        exclusions: raw
            .exclusions
            .iter()
            .map(|(g, a)| -> Result<Exclusion, MavenError> {
                Ok(Exclusion {
                    group: interp(g)?,
                    artifact: interp(a)?,
                })
            })
            .collect::<Result<_, _>>()?,
    };
    let parts = [
        ("groupId", Some(&dep.group)),
        ("artifactId", Some(&dep.artifact)),
        ("type", Some(&dep.kind)),
        ("classifier", dep.classifier.as_ref()),
    ];
    for (name, value) in parts {
        if let Some(value) = value {
            super::coord::check_part(value).map_err(|why| {
                MavenError::Malformed(format!(
                    "a dependency's {name} '{}' {why}",
                    value.escape_debug()
                ))
            })?;
        }
    }
    Ok(dep)
}
