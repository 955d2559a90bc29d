//! The prefetch's guesses from raw POMs, before their models are built. A
//! model waits for its whole line of parents, one round trip each; but most
//! dependencies' coordinates are known sooner: written out in full in the POM,
//! or managed by the first parent (Debian's and many projects' POMs give no
//! version and let the parent's `<dependencyManagement>` say it). Each time a
//! raw POM arrives, every POM whose known line of parents it extends is read
//! again as far as that line goes, and the dependencies (and imported BOMs)
//! whose coordinates are now plain are guessed. A guess only warms the cache:
//! the model built later decides, with the whole line.

use std::collections::{HashMap, HashSet};

use super::coord::{Coord, Exclusion};
use super::model::{interpolate, merge, properties};
use super::pom::RawPom;
use super::version::{Dynamic, Requirement};

/// A module version: group, artifact, version.
pub(super) type Gav = (String, String, String);

/// Parents looked at above a POM (a longer line is the model's to refuse).
const MAX_LINE: usize = 32;

/// The raw POMs read so far, and what links them.
#[derive(Default)]
pub(super) struct Lineages {
    raws: HashMap<Gav, RawPom>,
    /// What every path that led to each POM so far excludes.
    exclusions: HashMap<Gav, Vec<Exclusion>>,
    /// The POMs read so far that name each parent.
    children: HashMap<Gav, Vec<Gav>>,
    /// How long a line each POM was last read with (a line that did not grow
    /// guesses nothing new).
    read_with: HashMap<Gav, usize>,
}

impl Lineages {
    /// Takes the raw POM of `gav`; returns the POMs to read ahead now (with
    /// the exclusions of the path to each): its parent, and what it and the
    /// POMs below it guess with the line it completes.
    pub(super) fn arrived(
        &mut self,
        gav: Gav,
        raw: RawPom,
        exclusions: Vec<Exclusion>,
        excludes: &[Exclusion],
    ) -> Vec<(Gav, Vec<Exclusion>)> {
        let mut out = Vec::new();
        if let Some(parent) = parent_of(&raw) {
            out.push((parent.clone(), exclusions.clone()));
            self.children.entry(parent).or_default().push(gav.clone());
        }
        self.raws.insert(gav.clone(), raw);
        // The paths that reached it while it was read may have excluded less.
        let mut exclusions = exclusions;
        if let Some(known) = self.exclusions.get(&gav) {
            keep_common(&mut exclusions, known);
        }
        self.exclusions.insert(gav.clone(), exclusions);
        let mut visited = HashSet::new();
        let mut stack = vec![gav];
        while let Some(pom) = stack.pop() {
            if !visited.insert(pom.clone()) {
                continue;
            }
            out.extend(self.guess(&pom, excludes));
            if let Some(children) = self.children.get(&pom) {
                stack.extend(children.iter().cloned());
            }
        }
        out
    }

    /// `gav`, asked for already, is reached again by a path excluding
    /// `exclusions`: what it is known to exclude becomes what both paths
    /// exclude, and when that shrank, its dependencies are guessed again (the
    /// first path to a module may exclude what another path brings in). Each
    /// module's exclusions only shrink, so this ends.
    pub(super) fn reached(
        &mut self,
        gav: &Gav,
        exclusions: &[Exclusion],
        excludes: &[Exclusion],
    ) -> Vec<(Gav, Vec<Exclusion>)> {
        let Some(known) = self.exclusions.get_mut(gav) else {
            // Asked for, not read yet: this path is what it is known to exclude.
            self.exclusions.insert(gav.clone(), exclusions.to_vec());
            return Vec::new();
        };
        if !keep_common(known, exclusions) || !self.raws.contains_key(gav) {
            return Vec::new();
        }
        self.read_with.remove(gav);
        self.guess(gav, excludes)
    }

    /// The known line of `gav`'s parents (itself first), as far as it goes.
    fn line(&self, gav: &Gav) -> Vec<&RawPom> {
        let mut line = Vec::new();
        let mut at = gav.clone();
        while let Some(raw) = self.raws.get(&at) {
            line.push(raw);
            match parent_of(raw) {
                Some(parent) if line.len() < MAX_LINE && parent != *gav => at = parent,
                _ => break,
            }
        }
        line
    }

    /// What `gav`'s POM names in full with its known line: imported BOMs and
    /// the dependencies the walk would follow.
    fn guess(&mut self, gav: &Gav, excludes: &[Exclusion]) -> Vec<(Gav, Vec<Exclusion>)> {
        let line = self.line(gav);
        if line.is_empty() || self.read_with.get(gav) == Some(&line.len()) {
            return Vec::new();
        }
        let length = line.len();
        let (group, artifact, version) = gav;
        let merged = merge(&line, group, version);
        let props = properties(&line, group, artifact, version);
        let at = Coord::new(group, artifact, version);
        let plain = |s: &str| interpolate(s, &props, &at).ok().filter(|s| literal(s));
        let path = self.exclusions.get(gav).cloned().unwrap_or_default();
        let mut out = Vec::new();
        // The managed versions, by interpolated key.
        let mut managed = HashMap::new();
        for m in &merged.management {
            let (Some(g), Some(a)) = (plain(&m.group), plain(&m.artifact)) else {
                continue;
            };
            let v = m.version.as_deref().and_then(plain);
            if m.scope.as_deref() == Some("import") {
                if let Some(v) = v.clone().filter(|v| soft(v)) {
                    out.push(((g.clone(), a.clone(), v), path.clone()));
                }
            }
            let key = (g, a, m.kind.clone(), m.classifier.clone());
            managed.entry(key).or_insert((v, m.scope.clone()));
        }
        for d in &merged.dependencies {
            let (Some(g), Some(a)) = (plain(&d.group), plain(&d.artifact)) else {
                continue;
            };
            let key = (g, a, d.kind.clone(), d.classifier.clone());
            let (managed_version, managed_scope) = managed.get(&key).cloned().unwrap_or_default();
            let version = match &d.version {
                Some(v) => plain(v),
                None => managed_version,
            };
            let scope = d.scope.as_deref().or(managed_scope.as_deref());
            let followed = matches!(scope, None | Some("compile" | "runtime"))
                && d.optional.as_deref().map(str::trim) != Some("true")
                && !path
                    .iter()
                    .chain(excludes)
                    .any(|e| e.matches(&key.0, &key.1));
            let Some(version) = version.filter(|v| followed && soft(v)) else {
                continue;
            };
            let mut below = path.clone();
            below.extend(d.exclusions.iter().map(|(group, artifact)| Exclusion {
                group: group.clone(),
                artifact: artifact.clone(),
            }));
            out.push(((key.0, key.1, version), below));
        }
        self.read_with.insert(gav.clone(), length);
        out
    }
}

/// Keeps in `known` only what `other` excludes too (by a set: exclusion lists
/// can be long); whether that removed any.
fn keep_common(known: &mut Vec<Exclusion>, other: &[Exclusion]) -> bool {
    let other: HashSet<&Exclusion> = other.iter().collect();
    let before = known.len();
    known.retain(|e| other.contains(e));
    known.len() != before
}

/// The parent a raw POM names, when it names it in full.
fn parent_of(raw: &RawPom) -> Option<Gav> {
    let p = raw.parent.as_ref()?;
    (literal(&p.group) && literal(&p.artifact) && literal(&p.version) && soft(&p.version))
        .then(|| (p.group.clone(), p.artifact.clone(), p.version.clone()))
}

/// The jar of a raw POM's module (`path` of `g/a/v/a-v.jar`), unless its
/// packaging is `pom`, is not written out, or the version is a snapshot (whose
/// file name needs its metadata).
pub(super) fn jar_of(gav: &Gav, raw: &RawPom) -> Option<String> {
    let packaging = raw.packaging.as_deref().map_or("jar", str::trim);
    if packaging == "pom" || !literal(packaging) || gav.2.ends_with("-SNAPSHOT") {
        return None;
    }
    let mut jar = Coord::new(&gav.0, &gav.1, &gav.2);
    jar.ext = "jar".to_owned();
    Some(jar.path())
}

/// No `${…}` left, and usable in a path.
fn literal(s: &str) -> bool {
    !s.contains("${") && super::metadata::usable_part(s)
}

/// A plain version (not a range, not a dynamic revision): the POM to fetch is known.
pub(super) fn soft(version: &str) -> bool {
    Dynamic::parse(version).is_none()
        && matches!(Requirement::parse(version), Ok(Requirement::Soft(_)))
        && super::metadata::usable_part(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pom(text: &str) -> RawPom {
        super::super::pom::parse(text.as_bytes()).unwrap()
    }

    fn gav(g: &str, a: &str, v: &str) -> Gav {
        (g.to_owned(), a.to_owned(), v.to_owned())
    }

    fn names(guessed: &[(Gav, Vec<Exclusion>)]) -> Vec<String> {
        let mut out: Vec<String> = guessed
            .iter()
            .map(|((g, a, v), _)| format!("{g}:{a}:{v}"))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn a_version_managed_by_the_parent_is_guessed_when_the_parent_arrives() {
        let mut lineages = Lineages::default();
        let child = pom(
            r#"<project><parent><groupId>g</groupId><artifactId>parent</artifactId><version>1</version></parent>
            <artifactId>child</artifactId>
            <dependencies>
              <dependency><groupId>g</groupId><artifactId>managed</artifactId></dependency>
              <dependency><groupId>g</groupId><artifactId>own</artifactId><version>${project.version}</version></dependency>
              <dependency><groupId>g</groupId><artifactId>tested</artifactId><version>2</version><scope>test</scope></dependency>
              <dependency><groupId>g</groupId><artifactId>unknown</artifactId></dependency>
            </dependencies></project>"#,
        );
        let first = lineages.arrived(gav("g", "child", "1"), child, Vec::new(), &[]);
        assert_eq!(names(&first), ["g:own:1", "g:parent:1"]);
        let parent = pom(
            r#"<project><groupId>g</groupId><artifactId>parent</artifactId><version>1</version>
            <properties><managed.version>3.1</managed.version></properties>
            <dependencyManagement><dependencies>
              <dependency><groupId>g</groupId><artifactId>managed</artifactId><version>${managed.version}</version></dependency>
              <dependency><groupId>g</groupId><artifactId>bom</artifactId><version>4</version><type>pom</type><scope>import</scope></dependency>
            </dependencies></dependencyManagement></project>"#,
        );
        let then = lineages.arrived(gav("g", "parent", "1"), parent, Vec::new(), &[]);
        // The parent's own import, the child's managed dependency (and again
        // the child's own, deduplicated by the prefetch); never the test one
        // or the one nobody manages.
        assert_eq!(
            names(&then),
            ["g:bom:4", "g:bom:4", "g:managed:3.1", "g:own:1"]
        );
        let excluded = Lineages::default().arrived(
            gav("g", "child2", "1"),
            pom(r#"<project><groupId>g</groupId><artifactId>child2</artifactId><version>1</version><dependencies>
              <dependency><groupId>x</groupId><artifactId>y</artifactId><version>1</version></dependency>
            </dependencies></project>"#),
            Vec::new(),
            &[Exclusion { group: "x".into(), artifact: "*".into() }],
        );
        assert!(excluded.is_empty(), "{:?}", names(&excluded));
    }

    #[test]
    fn a_module_reached_again_by_a_path_excluding_less_is_guessed_again() {
        let mut lineages = Lineages::default();
        let raw = pom(
            r#"<project><groupId>g</groupId><artifactId>m</artifactId><version>1</version><dependencies>
              <dependency><groupId>x</groupId><artifactId>y</artifactId><version>1</version></dependency>
              <dependency><groupId>x</groupId><artifactId>z</artifactId><version>1</version></dependency>
            </dependencies></project>"#,
        );
        let exclude = |a: &str| Exclusion {
            group: "x".into(),
            artifact: a.into(),
        };
        // Asked for by a path excluding x:y and x:z, then (before it is read)
        // by one excluding x:y only: read, it guesses x:z.
        assert!(lineages
            .reached(&gav("g", "m", "1"), &[exclude("y")], &[])
            .is_empty());
        let first = lineages.arrived(
            gav("g", "m", "1"),
            raw,
            vec![exclude("y"), exclude("z")],
            &[],
        );
        assert_eq!(names(&first), ["x:z:1"]);
        // A path excluding x:z, and one excluding x:y again: nothing new.
        assert!(
            lineages
                .reached(&gav("g", "m", "1"), &[exclude("z")], &[])
                .len()
                == 2
        );
        assert!(lineages
            .reached(&gav("g", "m", "1"), &[exclude("y")], &[])
            .is_empty());
    }

    #[test]
    fn a_cycle_of_parents_and_a_long_line_end() {
        let mut lineages = Lineages::default();
        let looped = |a: &str, p: &str| {
            pom(&format!(
                "<project><parent><groupId>g</groupId><artifactId>{p}</artifactId><version>1</version></parent><artifactId>{a}</artifactId></project>"
            ))
        };
        lineages.arrived(gav("g", "a", "1"), looped("a", "b"), Vec::new(), &[]);
        let out = lineages.arrived(gav("g", "b", "1"), looped("b", "a"), Vec::new(), &[]);
        assert_eq!(names(&out), ["g:a:1"]);
        for i in 0..200 {
            let raw = looped(&format!("m{i}"), &format!("m{}", i + 1));
            lineages.arrived(gav("g", &format!("m{i}"), "1"), raw, Vec::new(), &[]);
        }
        assert!(lineages.line(&gav("g", "m0", "1")).len() <= MAX_LINE);
    }

    #[test]
    fn the_jar_of_a_module_is_named_unless_it_is_a_pom_or_a_snapshot() {
        let jar = pom(
            "<project><groupId>g</groupId><artifactId>a</artifactId><version>1</version></project>",
        );
        assert_eq!(
            jar_of(&gav("g", "a", "1"), &jar).as_deref(),
            Some("g/a/1/a-1.jar")
        );
        assert_eq!(jar_of(&gav("g", "a", "1-SNAPSHOT"), &jar), None);
        let parent = pom("<project><groupId>g</groupId><artifactId>a</artifactId><version>1</version><packaging>pom</packaging></project>");
        assert_eq!(jar_of(&gav("g", "a", "1"), &parent), None);
    }
}
