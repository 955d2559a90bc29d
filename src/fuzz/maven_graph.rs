//! The resolver's walk over graphs the input shapes: up to 24 modules, each
//! depending on others with exclusions (`*` patterns too), lattices and cycles
//! included, resolved in both modes from an in-memory repository. Invariants:
//! it ends (libFuzzer's timeout catches the exponential shapes that hung pods),
//! no file is asked for twice, and in `spark` mode the modules resolved are
//! exactly those a plain fixpoint of Ivy's rule (a module's dependency is left
//! out only when every caller excludes it) gives.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use url::Url;

use crate::maven::coord::{Coord, Exclusion};
use crate::maven::repo::{Repo, Transport, TransportError};
use crate::maven::{resolve, Mode, Request};

const REPO: &str = "http://fuzz.test/m2/";

/// One dependency edge: the module it asks for and the modules its
/// exclusions name (`None`: every artifact of the group, `*`).
struct Edge {
    to: usize,
    excludes: Vec<Option<usize>>,
}

/// Files by URL; every GET logged.
struct Mem {
    files: HashMap<String, Bytes>,
    log: Mutex<Vec<String>>,
}

#[async_trait]
impl Transport for Mem {
    async fn get(&self, url: &Url, _limit: usize) -> Result<Option<Bytes>, TransportError> {
        self.log.lock().expect("lock").push(url.to_string());
        Ok(self.files.get(url.as_str()).cloned())
    }
}

/// Module `i`'s group and artifact: two groups, so that `g*:*` patterns match
/// some and not others.
fn name(i: usize) -> (String, String) {
    (format!("g{}", i % 2), format!("m{i}"))
}

fn exclusion(target: Option<usize>, of_group: usize) -> Exclusion {
    match target {
        Some(t) => {
            let (group, artifact) = name(t);
            Exclusion { group, artifact }
        }
        None => Exclusion {
            group: format!("g{}", of_group % 2),
            artifact: "*".into(),
        },
    }
}

fn graph(data: &[u8]) -> (usize, Vec<Vec<Edge>>) {
    let mut bytes = data.iter().copied();
    let n = usize::from(bytes.next().unwrap_or(0) % 24) + 1;
    let mut edges: Vec<Vec<Edge>> = (0..n).map(|_| Vec::new()).collect();
    while let (Some(from), Some(to), Some(ex)) = (bytes.next(), bytes.next(), bytes.next()) {
        let (from, to) = (usize::from(from) % n, usize::from(to) % n);
        let excludes = match ex % 4 {
            0 => vec![],
            1 => vec![Some(usize::from(ex / 4) % n)],
            2 => vec![None],
            _ => vec![
                Some(usize::from(ex / 4) % n),
                Some(usize::from(ex / 16) % n),
            ],
        };
        if edges[from].iter().all(|e| e.to != to) && edges[from].len() < 8 {
            edges[from].push(Edge { to, excludes });
        }
    }
    (n, edges)
}

fn pom(i: usize, edges: &[Edge]) -> String {
    let (g, a) = name(i);
    let deps: String = edges
        .iter()
        .map(|e| {
            let (dg, da) = name(e.to);
            let exclusions: String = e
                .excludes
                .iter()
                .map(|x| {
                    let x = exclusion(*x, e.to);
                    format!(
                        "<exclusion><groupId>{}</groupId><artifactId>{}</artifactId></exclusion>",
                        x.group, x.artifact
                    )
                })
                .collect();
            format!("<dependency><groupId>{dg}</groupId><artifactId>{da}</artifactId><version>1</version><exclusions>{exclusions}</exclusions></dependency>")
        })
        .collect();
    format!("<project><groupId>{g}</groupId><artifactId>{a}</artifactId><version>1</version><dependencies>{deps}</dependencies></project>")
}

/// Ivy's rule as a plain fixpoint over the edges followed: an edge `c -> v`
/// is followed when `c` is resolved, the edge does not exclude `v` itself, and
/// some path of followed edges from the root reaches `c` without any edge on it
/// excluding `v`. The modules resolved from module 0.
fn oracle(edges: &[Vec<Edge>]) -> BTreeSet<usize> {
    let excluded_by = |e: &Edge, k: usize| {
        let (g, a) = name(k);
        e.excludes
            .iter()
            .any(|x| exclusion(*x, e.to).matches(&g, &a))
    };
    let mut followed: HashSet<(usize, usize)> = HashSet::new();
    loop {
        let allowed = |at: usize, k: usize| {
            let mut seen = HashSet::from([0usize]);
            let mut stack = vec![0usize];
            while let Some(u) = stack.pop() {
                if u == at {
                    return true;
                }
                for e in &edges[u] {
                    if followed.contains(&(u, e.to)) && !excluded_by(e, k) && seen.insert(e.to) {
                        stack.push(e.to);
                    }
                }
            }
            false
        };
        let resolved: BTreeSet<usize> = std::iter::once(0)
            .chain(followed.iter().map(|&(_, v)| v))
            .collect();
        let mut grown = followed.clone();
        for &c in &resolved {
            for e in &edges[c] {
                if !excluded_by(e, e.to) && allowed(c, e.to) {
                    grown.insert((c, e.to));
                }
            }
        }
        if grown == followed {
            return resolved;
        }
        followed = grown;
    }
}

pub fn maven_graph(data: &[u8]) {
    let (n, edges) = graph(data);
    let mut files = HashMap::new();
    for (i, out) in edges.iter().enumerate() {
        let (g, a) = name(i);
        let c = Coord::new(&g, &a, "1");
        files.insert(
            format!("{REPO}{}", c.pom().path()),
            Bytes::from(pom(i, out)),
        );
        files.insert(format!("{REPO}{}", c.path()), Bytes::from("jar"));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    for mode in [Mode::Spark, Mode::Maven] {
        let mem = Arc::new(Mem {
            files: files.clone(),
            log: Mutex::new(Vec::new()),
        });
        let (g, a) = name(0);
        let request = Request {
            packages: vec![Coord::new(&g, &a, "1")],
            repositories: vec![Repo::new(REPO).expect("repo")],
            excludes: Vec::new(),
            mode,
        };
        let resolution = runtime
            .block_on(resolve(&request, mem.clone()))
            .expect("every POM is there");
        let log = mem.log.lock().expect("lock");
        let distinct: HashSet<&String> = log.iter().collect();
        assert_eq!(distinct.len(), log.len(), "a file asked for twice: {log:?}");
        let got: BTreeSet<usize> = resolution
            .jars
            .iter()
            .map(|j| j.coord.artifact[1..].parse::<usize>().expect("m<i>"))
            .collect();
        assert!(got.iter().all(|&i| i < n));
        if mode == Mode::Spark {
            assert_eq!(got, oracle(&edges), "spark mode against Ivy's rule");
        }
    }
}

#[cfg(test)]
mod tests {
    /// Random graphs (a fixed seed), beyond the committed seeds: the walk
    /// agrees with the fixpoint on each.
    #[test]
    fn random_graphs_follow_ivys_rule() {
        let mut rng = fastrand::Rng::with_seed(34);
        for _ in 0..400 {
            let len = rng.usize(1..120);
            let data: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
            super::maven_graph(&data);
        }
    }
}
