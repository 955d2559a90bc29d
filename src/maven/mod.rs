//! Maven coordinates resolved natively (`--packages`, `resolve`): Spark's
//! `spark.jars.packages` without Ivy. POMs are read from the repositories in
//! order ([`repo`]), built into effective models ([`model`]: parents,
//! properties, BOM imports), and walked into a graph ([`resolve`]) whose
//! conflicts are decided as Spark's Ivy does, or as Maven does. The result is a
//! list of jars with where they come from and why, which `resolve` writes as a
//! lockfile ([`lock`]) and `fetch` fetches.

pub(crate) mod coord;
pub(crate) mod ivy;
mod lineage;
pub(crate) mod lock;
pub(crate) mod metadata;
pub(crate) mod model;
pub(crate) mod pom;
mod prefetch;
mod reach;
pub(crate) mod repo;
pub(crate) mod resolve;
pub(crate) mod signatures;
pub(crate) mod version;

use std::sync::Arc;

use url::Url;

use self::coord::{Coord, Exclusion};
use self::repo::{Misses, Repo, Repos, Transport};

/// Maven Central, as Spark's default chain names it.
pub(crate) const MAVEN_CENTRAL: &str = "https://repo1.maven.org/maven2/";
/// The spark-packages repository of Spark's default chain.
pub(crate) const SPARK_PACKAGES: &str = "https://repos.spark-packages.org/";

/// Spark's own modules, which `--packages` never adds (Spark's `MavenUtils`
/// excludes `org.apache.spark:spark-<module>*` for these, and `*:scala-library`).
const SPARK_MODULES: &[&str] = &[
    "catalyst_",
    "core_",
    "graphx_",
    "kvstore_",
    "launcher_",
    "mllib_",
    "mllib-local_",
    "network-common_",
    "network-shuffle_",
    "repl_",
    "sketch_",
    "sql_",
    "streaming_",
    "tags_",
    "unsafe_",
];

/// How conflicting versions are decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// As Spark's `--packages` (Ivy's latest-revision conflict manager).
    Spark,
    /// As Maven (nearest wins).
    Maven,
}

/// Why a resolution failed.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum MavenError {
    /// No repository has a file (every repository's answer is given).
    #[error(
        "cannot find {what} (required by {}){}",
        resolve::shown_path(path),
        misses.tried()
    )]
    NotFound {
        what: String,
        path: Vec<String>,
        misses: Misses,
    },
    /// A POM or metadata file that cannot be used, a cycle, a range nothing satisfies.
    #[error("{0}")]
    Malformed(String),
    /// A file does not match the repository's checksum.
    #[error("{0}")]
    Integrity(String),
}

impl MavenError {
    /// The same error, naming the path that required the module.
    pub(crate) fn required_by(self, path: &[String]) -> MavenError {
        match self {
            MavenError::NotFound {
                what,
                path: inner,
                misses,
            } if inner.is_empty() => MavenError::NotFound {
                what,
                path: path.to_vec(),
                misses,
            },
            MavenError::Malformed(m) if !path.is_empty() => {
                MavenError::Malformed(format!("{m} (required by {})", resolve::shown_path(path)))
            }
            other => other,
        }
    }
}

/// What to resolve, and where.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub packages: Vec<Coord>,
    pub repositories: Vec<Repo>,
    pub excludes: Vec<Exclusion>,
    pub mode: Mode,
}

impl Request {
    /// The repositories as Spark chains them: Maven Central and spark-packages
    /// (or the Ivy settings' resolvers; none with `defaults` off), then the
    /// user's, in order.
    pub(crate) fn repositories(
        user: &[String],
        defaults: bool,
        ivy: Option<Vec<Repo>>,
    ) -> Result<Vec<Repo>, String> {
        let mut repos = Vec::new();
        match ivy {
            Some(from_settings) => repos.extend(from_settings),
            None if defaults => {
                repos.push(Repo::new(MAVEN_CENTRAL)?);
                repos.push(Repo::new(SPARK_PACKAGES)?);
            }
            None => {}
        }
        for url in user {
            repos.push(Repo::new(url)?);
        }
        Ok(repos)
    }

    /// The user's excludes plus Spark's own.
    fn all_excludes(&self) -> Vec<Exclusion> {
        let mut all = self.excludes.clone();
        all.push(Exclusion {
            group: "*".into(),
            artifact: "scala-library".into(),
        });
        for module in SPARK_MODULES {
            all.push(Exclusion {
                group: "org.apache.spark".into(),
                artifact: format!("spark-{module}*"),
            });
        }
        all
    }
}

/// One jar of the resolution.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    pub coord: Coord,
    /// The repository root it comes from (credentials masked).
    pub repo: String,
    /// Where to fetch it (with the repository's credentials, if any).
    pub url: Url,
    /// The modules that pulled it in, root first (empty for a package asked for).
    pub path: Vec<String>,
    /// The repository's `.sha1` of the jar, if it publishes one.
    pub sha1: Option<[u8; 20]>,
    /// What its OpenPGP signatures' check found (`--verify-signatures`), if checked.
    pub signature: Option<signatures::Check>,
    /// The sha256 of the bytes whose signature was checked (`fetch --packages
    /// --verify-signatures`): what the fetch must publish.
    pub checked_sha256: Option<[u8; 32]>,
}

/// The outcome of a resolution.
#[derive(Debug, Clone)]
pub(crate) struct Resolution {
    pub jars: Vec<Resolved>,
    /// `requested -> chosen (path)`, for the report.
    pub evicted: Vec<String>,
    /// `mvn dependency:tree`-style lines.
    pub tree: Vec<String>,
    /// The repositories, in order, as shown.
    pub repositories: Vec<String>,
}

/// Resolves `request` over `transport`.
pub(crate) async fn resolve(
    request: &Request,
    transport: Arc<dyn Transport>,
) -> Result<Resolution, MavenError> {
    let repos = Repos::new(request.repositories.clone(), transport);
    let models = model::Models::new(&repos, request.mode);
    let excludes = request.all_excludes();
    // POMs and jar checksums fetched ahead of the walk ([`prefetch`]) until the
    // resolution is done.
    let work = std::pin::pin!(resolve_with(request, &repos, &models, &excludes));
    let ahead = std::pin::pin!(prefetch::prefetch(&models, &request.packages, &excludes));
    match futures_util::future::select(work, ahead).await {
        futures_util::future::Either::Left((resolution, _)) => resolution,
        futures_util::future::Either::Right(((), work)) => work.await,
    }
}

async fn resolve_with(
    request: &Request,
    repos: &Repos,
    models: &model::Models<'_>,
    excludes: &[Exclusion],
) -> Result<Resolution, MavenError> {
    let graph = resolve::graph(models, &request.packages, excludes, request.mode).await?;
    let tree = resolve::tree(&graph);
    let with_jars: Vec<_> = graph
        .nodes
        .iter()
        .filter_map(|n| n.jar.clone().map(|jar| (n.repo, n.path.clone(), jar)))
        .filter(|(_, _, jar)| jar.ext == "jar")
        .collect();
    let repos_ref = repos;
    // All at once (each origin bounds its requests): most checksums were read
    // ahead, and a slow one must not hold the others back.
    let jars = futures_util::future::join_all(with_jars.into_iter().map(
        |(at, required_by, jar)| async move {
            let repo = &repos_ref.list[at];
            let path = repo::file_path(repos_ref, &jar).await?;
            Ok(Resolved {
                sha1: repos_ref.sha1_of(at, &path).await,
                url: repo.url(&path),
                repo: repo.shown(),
                coord: jar,
                path: required_by,
                signature: None,
                checked_sha256: None,
            })
        },
    ))
    .await
    .into_iter()
    .collect::<Result<Vec<_>, _>>()?;
    repos.warn_unverified();
    Ok(Resolution {
        jars,
        evicted: graph
            .evicted
            .iter()
            .map(|e| {
                format!(
                    "{} -> {} (required by {})",
                    e.requested,
                    e.chosen,
                    resolve::shown_path(&e.by)
                )
            })
            .collect(),
        tree,
        repositories: repos.list.iter().map(Repo::shown).collect(),
    })
}

#[cfg(test)]
mod tests;
