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

use tracing::{info, warn};

use super::repo::{Http, TransportError};
use super::signatures::{self, Check, JarCheck, Mode, Trust};
use super::{MavenError, Request, Resolution, Resolved};

/// A jar as the lockfile pins it.
#[derive(Debug, Clone)]
pub(crate) struct Locked {
    pub jar: Resolved,
    pub sha256: [u8; 32],
    pub size: u64,
}

/// Downloads every jar (a few at once), checks it against the repository's
/// `.sha1` and computes its sha256; with `trust`, checks its POM's and its own
/// OpenPGP signatures ([`signatures`]): unverified files fail the lock under
/// `--verify-signatures require` (all named), are warned of under `warn`.
pub(crate) async fn lock(
    resolution: Resolution,
    http: &Http,
    parallelism: usize,
    trust: Option<&Trust>,
) -> Result<Vec<Locked>, MavenError> {
    let trust = trust.filter(|t| t.mode != Mode::Off);
    let locked: Vec<Locked> = futures_util::stream::iter(resolution.jars)
        .map(|jar| lock_one(jar, http, trust))
        .buffered(parallelism.max(1))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let Some(trust) = trust else {
        return Ok(locked);
    };
    let unverified: Vec<&str> = locked
        .iter()
        .filter_map(|l| match &l.jar.signature {
            Some(Check::Unverified(why)) => Some(why.as_str()),
            _ => None,
        })
        .collect();
    if unverified.is_empty() {
        info!(
            "signatures: the POM and jar of all {} jar(s) signed by trusted keys",
            locked.len()
        );
    } else if trust.mode == Mode::Require {
        return Err(MavenError::Integrity(format!(
            "{} of {} jar(s) not signed by a trusted key (--verify-signatures require): {}",
            unverified.len(),
            locked.len(),
            unverified.join("; ")
        )));
    } else {
        for why in &unverified {
            warn!("unverified (--verify-signatures warn): {why}");
        }
        warn!(
            "signatures: {} of {} jar(s) unverified (--verify-signatures warn)",
            unverified.len(),
            locked.len()
        );
    }
    Ok(locked)
}

/// One jar of [`lock`]: its digests, and its signatures' check with `trust`.
async fn lock_one(
    mut jar: Resolved,
    http: &Http,
    trust: Option<&Trust>,
) -> Result<Locked, MavenError> {
    let shown = crate::util::redact::redact_url(jar.url.as_str());
    let (sha256, sha1, size) = match trust {
        None => digests(http, &jar.url, None).await?,
        Some(trust) => {
            let unreachable = |what: &str, e: TransportError| MavenError::NotFound {
                what: format!("{what} of {shown}"),
                path: Vec::new(),
                misses: super::repo::Misses(vec![transport_why(e)]),
            };
            let asc = signatures::asc_of(http, &jar.url)
                .await
                .map_err(|e| unreachable("the signature", e))?;
            let mut check = JarCheck::start(trust, &jar.coord.group, &jar.url, asc);
            let digested = digests(http, &jar.url, Some(&mut check)).await?;
            let signed = check.finish().await;
            let pom =
                signatures::pom_url(&jar.url, jar.coord.classifier.as_deref(), &jar.coord.ext);
            let pom_signed = signatures::check_pom(http, trust, &jar.coord.group, &pom)
                .await
                .map_err(|e| unreachable("the POM", e))?;
            jar.signature = Some(match (pom_signed, signed) {
                (Ok(_), Ok(signer)) => Check::Signed(signer),
                (pom, jar) => Check::Unverified(
                    [pom.err(), jar.err()]
                        .into_iter()
                        .flatten()
                        .collect::<Vec<_>>()
                        .join("; "),
                ),
            });
            digested
        }
    };
    if let Some(expected) = jar.sha1 {
        if expected != sha1 {
            return Err(MavenError::Integrity(format!(
                "{shown}: sha1 {} does not match the repository's .sha1 ({}); the jar is damaged or was replaced",
                hex::encode(sha1),
                hex::encode(expected)
            )));
        }
    }
    Ok(Locked { jar, sha256, size })
}

fn transport_why(e: TransportError) -> String {
    match e {
        TransportError::Unreachable(why) | TransportError::Status(why) => why,
        TransportError::TooLarge(n) => format!("larger than {n} bytes"),
    }
}

/// Streams `url` through sha256 and sha1 (and `check`, a signature's verifier).
async fn digests(
    http: &Http,
    url: &url::Url,
    mut check: Option<&mut JarCheck>,
) -> Result<([u8; 32], [u8; 20], u64), MavenError> {
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
        Err(e) => return Err(fail(transport_why(e))),
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
                if let Some(check) = check.as_deref_mut() {
                    check.feed(&chunk).await;
                }
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

/// The jars a lockfile pins, as a resolution (for the SBOM of `fetch --lock`):
/// each entry's coordinate and path from the comment line before it
/// (`# g:a:v[:classifier] (N bytes) from REPO via A <- B <- --packages`), its URL
/// without the `#name`. An entry without such a comment is left out (the
/// artifact is then described by its URL alone); nothing here is trusted: the
/// lockfile's pins are checked elsewhere.
pub(crate) fn read(text: &str) -> Resolution {
    let mut jars = Vec::new();
    let mut comment: Option<&str> = None;
    let mut signature: Option<Check> = None;
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(signer) = line.strip_prefix(SIGNED_BY) {
            signature = Some(Check::Signed(signer_of(signer)));
            continue;
        }
        if let Some(why) = line.strip_prefix(UNVERIFIED) {
            signature = Some(Check::Unverified(why.to_owned()));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            comment = Some(rest);
            continue;
        }
        let said = comment.take();
        let signature = signature.take();
        let Some((_, entry)) = line.split_once("  ") else {
            continue;
        };
        let (Some(said), Ok(mut url)) = (said, url::Url::parse(entry.trim())) else {
            continue;
        };
        url.set_fragment(None);
        if let Some(mut jar) = entry_of(said, url) {
            jar.signature = signature;
            jars.push(jar);
        }
    }
    let repositories = text
        .lines()
        .find_map(|l| l.strip_prefix("# repositories: "))
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    Resolution {
        jars,
        evicted: Vec::new(),
        tree: Vec::new(),
        repositories,
    }
}

/// The line before an entry's comment naming who signed it (`resolve --verify-signatures`).
const SIGNED_BY: &str = "# signed by ";
/// The line before an entry's comment saying why its signatures are unverified
/// (`--verify-signatures warn`).
const UNVERIFIED: &str = "# unverified: ";

/// `FINGERPRINT (user id)` or `FINGERPRINT`.
fn signer_of(text: &str) -> signatures::Signer {
    let (fingerprint, user_id) = match text.split_once(" (") {
        Some((f, rest)) => (f, rest.strip_suffix(')').map(str::to_owned)),
        None => (text, None),
    };
    signatures::Signer {
        fingerprint: fingerprint.trim().to_owned(),
        user_id,
    }
}

/// One lockfile entry from its comment (`g:a:v[:c] (N bytes) from REPO via PATH`).
fn entry_of(comment: &str, url: url::Url) -> Option<Resolved> {
    let (coordinate, rest) = comment.split_once(" (")?;
    let coord = super::coord::Coord::parse_package(coordinate).ok()?;
    let (_, from) = rest.split_once(") from ")?;
    let (repo, via) = from.rsplit_once(" via ")?;
    // Nearest first, ending with `--packages`: the path is root first.
    let mut path: Vec<String> = via
        .split(" <- ")
        .filter(|m| *m != "--packages")
        .map(str::to_owned)
        .collect();
    path.reverse();
    Some(Resolved {
        coord,
        repo: repo.to_owned(),
        url,
        path,
        sha1: None,
        signature: None,
        checked_sha256: None,
    })
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
        match &l.jar.signature {
            Some(Check::Signed(signer)) => {
                let _ = writeln!(out, "{SIGNED_BY}{signer}");
            }
            Some(Check::Unverified(why)) => {
                let _ = writeln!(out, "{UNVERIFIED}{}", why.replace('\n', " "));
            }
            None => {}
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_gives_back_what_render_wrote() {
        let text = "\
# spark-localizer lockfile: the jars of --packages, pinned (fetch them with `spark-localizer fetch --lock FILE`).
# packages: org.eclipse.sisu:org.eclipse.sisu.plexus:0.3.4
# repositories: http://127.0.0.1:18090/
# resolution: spark
# jars: 3
# org.eclipse.sisu:org.eclipse.sisu.plexus:0.3.4 (203901 bytes) from http://127.0.0.1:18090/ via --packages
2b49db9d9de0fa6833af8a9d2fe6d694c45ca63a7c575337ede2e6e93613603c  http://127.0.0.1:18090/org/eclipse/sisu/org.eclipse.sisu.plexus/0.3.4/org.eclipse.sisu.plexus-0.3.4.jar#org.eclipse.sisu_org.eclipse.sisu.plexus-0.3.4.jar
# org.slf4j:slf4j-api:debian (42138 bytes) from http://127.0.0.1:18090/ via org.eclipse.sisu:org.eclipse.sisu.inject:debian <- org.eclipse.sisu:org.eclipse.sisu.plexus:0.3.4 <- --packages
56e282b3c99c142c52b43b19e70ccbce83114a9fe05fe798e703b8353d06eb5f  http://127.0.0.1:18090/org/slf4j/slf4j-api/debian/slf4j-api-debian.jar#org.slf4j_slf4j-api-debian.jar
# a hand-edited entry: no coordinate
56e282b3c99c142c52b43b19e70ccbce83114a9fe05fe798e703b8353d06eb5f  http://127.0.0.1:18090/x.jar#x.jar
";
        let r = read(text);
        assert_eq!(r.repositories, ["http://127.0.0.1:18090/"]);
        assert_eq!(r.jars.len(), 2);
        assert_eq!(
            r.jars[0].coord.to_string(),
            "org.eclipse.sisu:org.eclipse.sisu.plexus:0.3.4"
        );
        assert!(r.jars[0].path.is_empty());
        assert_eq!(
            r.jars[1].path,
            [
                "org.eclipse.sisu:org.eclipse.sisu.plexus:0.3.4",
                "org.eclipse.sisu:org.eclipse.sisu.inject:debian"
            ]
        );
        assert_eq!(
            r.jars[1].coord.spark_name(),
            "org.slf4j_slf4j-api-debian.jar"
        );
        assert_eq!(r.jars[1].url.fragment(), None);
    }
}
