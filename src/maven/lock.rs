//! The lockfile `resolve` writes and `fetch --lock` reads: one line per jar in
//! the `sha256sum` form `--checksums` reads, `<sha256>  <url>#<name>` (the name
//! Spark gives `--packages` jars), each after a comment with its coordinate, the
//! path that pulled it in and its repository. Credentials are never written:
//! URLs lose their userinfo (give `fetch` the repository's credentials with
//! `--http-header-file`).

use std::fmt::Write as _;

use futures_util::StreamExt;
use sha1::Sha1;
use sha2::{Digest, Sha256};

use super::repo::{Http, TransportError};
use super::{MavenError, Request, Resolution, Resolved};

/// A jar as the lockfile pins it.
#[derive(Debug, Clone)]
pub(crate) struct Locked {
    pub jar: Resolved,
    pub sha256: [u8; 32],
    pub size: u64,
}

/// Downloads every jar (a few at once), checks it against the repository's
/// `.sha1` and computes its sha256.
pub(crate) async fn lock(
    resolution: Resolution,
    http: &Http,
    parallelism: usize,
) -> Result<Vec<Locked>, MavenError> {
    futures_util::stream::iter(resolution.jars)
        .map(|jar| async move {
            let (sha256, sha1, size) = digests(http, &jar.url).await?;
            if let Some(expected) = jar.sha1 {
                if expected != sha1 {
                    return Err(MavenError::Integrity(format!(
                        "{}: sha1 {} does not match the repository's .sha1 ({}); the jar is damaged or was replaced",
                        crate::util::redact::redact_url(jar.url.as_str()),
                        hex::encode(sha1),
                        hex::encode(expected)
                    )));
                }
            }
            Ok(Locked { jar, sha256, size })
        })
        .buffered(parallelism.max(1))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}

/// Streams `url` through sha256 and sha1.
async fn digests(http: &Http, url: &url::Url) -> Result<([u8; 32], [u8; 20], u64), MavenError> {
    let shown = crate::util::redact::redact_url(url.as_str());
    let fail = |why: String| MavenError::NotFound {
        what: format!("a download of the jar {shown}"),
        path: Vec::new(),
        misses: super::repo::Misses(vec![why]),
    };
    let _turn = http.per_origin.enter(url).await;
    let mut response = match http.open(url).await {
        Ok(Some(r)) => r,
        Ok(None) => return Err(fail("not found".into())),
        Err(TransportError::Unreachable(why) | TransportError::Status(why)) => {
            return Err(fail(why))
        }
        Err(TransportError::TooLarge(n)) => return Err(fail(format!("larger than {n} bytes"))),
    };
    let (mut sha256, mut sha1, mut size) = (Sha256::new(), Sha1::new(), 0u64);
    loop {
        match tokio::time::timeout(http.stall_timeout, response.chunk()).await {
            Err(_) => return Err(fail("the body stalled".into())),
            Ok(Err(e)) => return Err(fail(format!("reading the body: {e}"))),
            Ok(Ok(None)) => break,
            Ok(Ok(Some(chunk))) => {
                sha256.update(&chunk);
                sha1.update(&chunk);
                size += chunk.len() as u64;
            }
        }
    }
    Ok((sha256.finalize().into(), sha1.finalize().into(), size))
}

/// The URL as the lockfile holds it: without userinfo.
pub(crate) fn lock_url(url: &url::Url) -> String {
    let mut bare = url.clone();
    let _ = bare.set_username("");
    let _ = bare.set_password(None);
    bare.to_string()
}

/// The lockfile text.
pub(crate) fn render(request: &Request, repositories: &[String], locked: &[Locked]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# spark-localizer lockfile: the jars of --packages, pinned (fetch them with `spark-localizer fetch --lock FILE`)."
    );
    let packages: Vec<String> = request.packages.iter().map(ToString::to_string).collect();
    let _ = writeln!(out, "# packages: {}", packages.join(","));
    if !request.excludes.is_empty() {
        let excludes: Vec<String> = request.excludes.iter().map(ToString::to_string).collect();
        let _ = writeln!(out, "# excludes: {}", excludes.join(","));
    }
    let _ = writeln!(out, "# repositories: {}", repositories.join(" "));
    let _ = writeln!(
        out,
        "# resolution: {}",
        match request.mode {
            super::Mode::Spark => "spark",
            super::Mode::Maven => "maven",
        }
    );
    // Said, so that a lock of nothing (every package excluded, or relocated
    // to nothing) is told from an empty or truncated file.
    let _ = writeln!(out, "# jars: {}", locked.len());
    for l in locked {
        let via = super::resolve::shown_path(&l.jar.path);
        let _ = writeln!(
            out,
            "# {} ({} bytes) from {} via {via}",
            l.jar.coord, l.size, l.jar.repo
        );
        let _ = writeln!(
            out,
            "{}  {}#{}",
            hex::encode(l.sha256),
            lock_url(&l.jar.url),
            l.jar.coord.spark_name()
        );
    }
    out
}
