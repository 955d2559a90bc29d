//! Who published a `--packages` artifact (`--verify-signatures`): the detached OpenPGP
//! signature Maven repositories hold beside every file (`<file>.asc`, required on Maven
//! Central) checked against the keys the user trusts (`--trusted-keys`, armored or binary
//! key files or a project's `KEYS` file; `GROUP=FILE` limits a file's keys to one
//! groupId and its subgroups).
//!
//! For each jar the lock downloads, its POM and the jar are checked: the
//! POM's bytes and `.asc` here, the jar as it streams through the digests
//! ([`JarCheck`]: the bytes go through a bounded channel to a blocking verifier, never
//! held whole). A file is *signed* when a trusted key (for its group) made a good
//! signature over it while valid ([`crate::openpgp`]); otherwise it is *unverified*, with
//! why: no `.asc`, not a signature (an HTML page), a key not trusted, bytes other than the
//! signed ones, an expired or a revoked key.

use std::path::PathBuf;

use bytes::Bytes;
use url::Url;

use super::repo::{Http, Transport, TransportError};
use crate::openpgp::{self, Failure, TrustedKey, Verdict};

/// An `.asc` read at most (an armored signature is under 2 KiB; more is not one).
const MAX_ASC: usize = 64 << 10;

/// Why a file without an `.asc` is unverified.
const NO_ASC: &str = "no signature (no .asc beside it)";

/// Chunks of a jar in flight to its verifier.
const JAR_CHUNKS: usize = 8;

/// How signatures are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Off,
    /// Each unverified file said and counted.
    Warn,
    /// An unverified file fails the run (exit 4) before anything is published.
    Require,
}

/// One `--trusted-keys` file, read.
#[derive(Debug, Clone)]
pub(crate) struct KeyFile {
    /// The groupId its keys vouch for (and its subgroups); `None`: every artifact.
    pub group: Option<String>,
    pub path: PathBuf,
    pub keys: Vec<TrustedKey>,
}

/// The keys trusted to sign `--packages` artifacts, and what an unverified file does.
#[derive(Debug, Clone)]
pub(crate) struct Trust {
    pub mode: Mode,
    pub files: Vec<KeyFile>,
}

impl Trust {
    /// Reads each `[GROUP=]FILE`; the problems, one per file, name it.
    pub(crate) fn load(mode: Mode, specs: &[String]) -> Result<Trust, Vec<String>> {
        let mut files = Vec::new();
        let mut problems = Vec::new();
        for spec in specs {
            match key_file(spec) {
                Ok(file) => files.push(file),
                Err(why) => problems.push(format!("{spec}: {why}")),
            }
        }
        if mode != Mode::Off && specs.is_empty() {
            problems.push(
                "no keys to check signatures with: give --trusted-keys FILE (a project's KEYS file, or armored public keys)"
                    .to_owned(),
            );
        }
        if problems.is_empty() {
            Ok(Trust { mode, files })
        } else {
            Err(problems)
        }
    }

    /// The keys that may sign artifacts of `group`.
    fn keys_for(&self, group: &str) -> Vec<TrustedKey> {
        self.files
            .iter()
            .filter(|f| f.group.as_deref().is_none_or(|g| in_group(group, g)))
            .flat_map(|f| f.keys.iter().cloned())
            .collect()
    }
}

/// `group` is `of` or one of its subgroups (`org.apache.celeborn.client`).
fn in_group(group: &str, of: &str) -> bool {
    group == of
        || group
            .strip_prefix(of)
            .is_some_and(|rest| rest.starts_with('.'))
}

fn key_file(spec: &str) -> Result<KeyFile, String> {
    let (group, path) = match spec.split_once('=') {
        Some((group, path)) => {
            let group = group.trim();
            if group.is_empty()
                || !group
                    .chars()
                    .all(|c| c.is_alphanumeric() || "._-".contains(c))
            {
                return Err(format!(
                    "'{group}' is not a groupId: write GROUP=FILE (org.apache.celeborn=KEYS) or FILE"
                ));
            }
            (Some(group.to_owned()), path.trim())
        }
        None => (None, spec.trim()),
    };
    let path = PathBuf::from(path);
    let bytes = read_bounded(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let keys = openpgp::parse_keys(&bytes)?;
    Ok(KeyFile { group, path, keys })
}

/// A key file is small (Apache's largest KEYS files are under 1 MiB).
fn read_bounded(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    const MAX_KEYS_FILE: u64 = 16 << 20;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_KEYS_FILE + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_KEYS_FILE {
        return Err(std::io::Error::other(format!(
            "larger than {MAX_KEYS_FILE} bytes: not a key file"
        )));
    }
    Ok(bytes)
}

/// Who signed a file: the signing key's primary fingerprint and its user id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Signer {
    pub fingerprint: String,
    pub user_id: Option<String>,
}

impl std::fmt::Display for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.user_id {
            Some(uid) => write!(f, "{} ({uid})", self.fingerprint),
            None => write!(f, "{}", self.fingerprint),
        }
    }
}

/// What checking a jar's signatures (its POM's and its own) found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Check {
    /// Both signed by a trusted key; the jar's signer.
    Signed(Signer),
    /// Why not (each file's reason).
    Unverified(String),
}

/// The `.asc` of `url`: `Ok(None)` when the repository has none.
pub(crate) async fn asc_of(http: &Http, url: &Url) -> Result<Option<Bytes>, TransportError> {
    let mut asc = url.clone();
    asc.set_path(&format!("{}.asc", url.path()));
    match http.get(&asc, MAX_ASC).await {
        Err(TransportError::TooLarge(n)) => Ok(Some(Bytes::from(format!(
            "(more than {n} bytes: not a signature)"
        )))),
        other => other,
    }
}

/// The outcome of a verification, as a [`Check`] of `file`.
fn judged(file: &str, verdict: Result<Verdict, Failure>) -> Result<Signer, String> {
    match verdict {
        Ok(Verdict::Good {
            fingerprint,
            user_id,
            ..
        }) => Ok(Signer {
            fingerprint,
            user_id,
        }),
        Err(failure) => Err(format!("{file}: {failure}")),
    }
}

/// Checks the POM beside `jar_url` (`artifact-version.pom`; a classifier's jar shares
/// its module's POM) of a module of `group`.
pub(crate) async fn check_pom(
    http: &Http,
    trust: &Trust,
    group: &str,
    pom_url: &Url,
) -> Result<Result<Signer, String>, TransportError> {
    let shown = crate::util::redact::redact_url(pom_url.as_str());
    let Some(pom) = http.get(pom_url, super::pom::MAX_POM).await? else {
        return Ok(Err(format!("{shown}: not found")));
    };
    let Some(asc) = asc_of(http, pom_url).await? else {
        return Ok(Err(format!("{shown}: {NO_ASC}")));
    };
    let keys = trust.keys_for(group);
    let verdict = tokio::task::spawn_blocking(move || openpgp::verify(&keys, &pom, &asc))
        .await
        .unwrap_or_else(|e| Err(Failure::Malformed(format!("the check stopped: {e}"))));
    Ok(judged(&shown, verdict))
}

/// A jar's signature checked as its bytes stream by: [`JarCheck::feed`] each chunk,
/// then [`JarCheck::finish`].
pub(crate) struct JarCheck {
    shown: String,
    chunks: Option<tokio::sync::mpsc::Sender<Bytes>>,
    /// `None`: the jar has no `.asc`.
    verdict: Option<tokio::task::JoinHandle<Result<Verdict, Failure>>>,
}

impl JarCheck {
    /// Starts checking `asc` (the jar's `.asc`; `None`: it has none) with the keys for
    /// `group`.
    pub(crate) fn start(trust: &Trust, group: &str, url: &Url, asc: Option<Bytes>) -> JarCheck {
        let shown = crate::util::redact::redact_url(url.as_str());
        let Some(asc) = asc else {
            return JarCheck {
                shown,
                chunks: None,
                verdict: None,
            };
        };
        let keys = trust.keys_for(group);
        let (tx, rx) = tokio::sync::mpsc::channel(JAR_CHUNKS);
        let verdict = tokio::task::spawn_blocking(move || {
            let reader = ChannelReader {
                rx,
                current: Bytes::new(),
            };
            openpgp::verify_reader(&keys, reader, &asc)
        });
        JarCheck {
            shown,
            chunks: Some(tx),
            verdict: Some(verdict),
        }
    }

    /// The next chunk of the jar (dropped when the verifier needs no more).
    pub(crate) async fn feed(&mut self, chunk: &Bytes) {
        if let Some(tx) = &self.chunks {
            if tx.send(chunk.clone()).await.is_err() {
                self.chunks = None;
            }
        }
    }

    /// The jar's whole body was fed: the signer, or why not.
    pub(crate) async fn finish(mut self) -> Result<Signer, String> {
        // The end of the data: the verifier's reader sees the channel closed.
        self.chunks = None;
        let Some(verdict) = self.verdict.take() else {
            return Err(format!("{}: {NO_ASC}", self.shown));
        };
        let verdict = verdict
            .await
            .unwrap_or_else(|e| Err(Failure::Malformed(format!("the check stopped: {e}"))));
        judged(&self.shown, verdict)
    }
}

/// The jar's chunks as a `Read` for the blocking verifier.
struct ChannelReader {
    rx: tokio::sync::mpsc::Receiver<Bytes>,
    current: Bytes,
}

impl std::io::Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(chunk) => self.current = chunk,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current = self.current.slice(n..);
        Ok(n)
    }
}

/// The POM of the module whose jar is at `jar_url`: the same directory, the jar's file
/// name without its classifier and extension, `.pom`.
pub(crate) fn pom_url(jar_url: &Url, classifier: Option<&str>, ext: &str) -> Url {
    let mut pom = jar_url.clone();
    let path = jar_url.path();
    let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
    let base = file.strip_suffix(&format!(".{ext}")).unwrap_or(file);
    let base = match classifier {
        Some(c) if !c.is_empty() => base.strip_suffix(&format!("-{c}")).unwrap_or(base),
        _ => base,
    };
    pom.set_path(&format!("{dir}/{base}.pom"));
    pom
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jar_s_pom_is_beside_it_without_the_classifier() {
        let jar = Url::parse("https://r.example/m2/org/a/b/1.0/b-1.0-tests.jar").unwrap();
        assert_eq!(
            pom_url(&jar, Some("tests"), "jar").as_str(),
            "https://r.example/m2/org/a/b/1.0/b-1.0.pom"
        );
        let jar =
            Url::parse("https://u:p@r.example/m2/org/a/b/1.0-SNAPSHOT/b-1.0-20250101.120000-3.jar")
                .unwrap();
        assert_eq!(
            pom_url(&jar, None, "jar").path(),
            "/m2/org/a/b/1.0-SNAPSHOT/b-1.0-20250101.120000-3.pom"
        );
    }

    #[test]
    fn a_group_s_keys_vouch_for_it_and_its_subgroups_only() {
        assert!(in_group("org.apache.celeborn", "org.apache.celeborn"));
        assert!(in_group(
            "org.apache.celeborn.client",
            "org.apache.celeborn"
        ));
        assert!(!in_group("org.apache.celebornx", "org.apache.celeborn"));
        assert!(!in_group("org.apache", "org.apache.celeborn"));
    }

    #[test]
    fn key_files_are_named_in_their_problems() {
        let problems = Trust::load(Mode::Require, &["/nonexistent/KEYS".into()]).unwrap_err();
        assert!(
            problems[0].starts_with("/nonexistent/KEYS: cannot read"),
            "{problems:?}"
        );
        let problems = Trust::load(Mode::Warn, &[]).unwrap_err();
        assert!(problems[0].contains("--trusted-keys"), "{problems:?}");
        let problems = Trust::load(Mode::Require, &["a b=KEYS".into()]).unwrap_err();
        assert!(problems[0].contains("not a groupId"), "{problems:?}");
        let dir = tempfile::tempdir().unwrap();
        let html = dir.path().join("KEYS");
        std::fs::write(&html, "<html>404</html>").unwrap();
        let problems = Trust::load(Mode::Require, &[html.display().to_string()]).unwrap_err();
        assert!(
            problems[0].contains("no OpenPGP public key"),
            "{problems:?}"
        );
        assert!(Trust::load(Mode::Off, &[]).is_ok());
    }
}
