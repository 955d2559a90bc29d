//! Who may upload (`--upload-auth`): nobody is asked (`none`, a warning at start),
//! a bearer token from a mounted Secret file (`token`), or the submitter's own
//! Kubernetes token, checked with a TokenReview and a SubjectAccessReview that it
//! may create pods in the namespace the upload names (`kubernetes`, see
//! [`super::review`]).
//!
//! An upload is authenticated before its body is read (a refused client spools
//! nothing) and, once the owner part names the namespace, authorized for it. A
//! refusal says what was missing (no token, an unknown token, not allowed in
//! namespace X, the API could not confirm) and never echoes the token; the
//! Kubernetes API failing or hanging is a refusal, never an allowance.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use axum::http::{header, HeaderMap, StatusCode};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tracing::warn;

use super::review::{ReviewedUser, Reviewer};

/// The most a token file may hold (a Secret holds at most 1 MiB).
const TOKEN_FILE_LIMIT: u64 = crate::util::fs::SECRET_LIMIT;

use crate::cli::UploadAuthMode;

/// Why `stage serve` cannot start with this authentication; names the flag.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AuthSetupError {
    #[error("uploads need authentication: give --upload-auth token with --upload-token-file FILE (bearer tokens, one per line), --upload-auth kubernetes (the submitters' own Kubernetes tokens), or --upload-auth none to accept uploads from anyone who can reach the server")]
    NotChosen,
    #[error("--upload-auth token needs --upload-token-file FILE (bearer tokens, one per line, e.g. a mounted Secret)")]
    NoTokenFile,
    #[error("--upload-token-file {path}: {why}")]
    TokenFile { path: PathBuf, why: String },
    #[error("--upload-auth kubernetes: {0}")]
    Kubernetes(String),
}

/// A refused upload: the answer's status and message, and the reason counted in
/// the metrics.
#[derive(Debug)]
pub(super) struct Refusal {
    pub status: StatusCode,
    pub message: String,
    pub reason: &'static str,
}

impl Refusal {
    fn new(status: StatusCode, reason: &'static str, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            message: message.into(),
            reason,
        }
    }
}

/// Who an authenticated upload comes from.
#[derive(Debug, Clone)]
pub(super) struct Caller {
    /// For logs and the bundle's record: `token 2 of FILE`, a Kubernetes user name.
    pub name: String,
    kube: Option<ReviewedUser>,
}

/// The tokens of the token file, re-read when the file changes.
struct Tokens {
    path: PathBuf,
    /// The file as last read (device, inode, size, mtime) and its tokens' sha256.
    loaded: Mutex<(FileStamp, Vec<[u8; 32]>)>,
}

/// Device, inode, size, mtime and ctime (which no one can set back).
type FileStamp = (u64, u64, u64, i64, i64, i64, i64);

fn stamp(path: &Path) -> std::io::Result<FileStamp> {
    let m = std::fs::metadata(path)?;
    Ok((
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ))
}

/// The sha256 of each token of a token file: one per line, blank lines and `#`
/// comments skipped.
fn read_tokens(path: &Path) -> Result<Vec<[u8; 32]>, String> {
    let bytes = crate::util::fs::read_regular(path, TOKEN_FILE_LIMIT).map_err(|e| e.to_string())?;
    let text = String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())?;
    let mut tokens: Vec<[u8; 32]> = Vec::new();
    for (line, token) in crate::stage::api::token_lines(&text) {
        if !crate::stage::api::token_header_safe(token) {
            warn!(
                "--upload-token-file {}: line {line} has characters an Authorization header cannot carry (only visible ASCII); no client can send it",
                path.display(),
            );
            continue;
        }
        tokens.push(Sha256::digest(token.as_bytes()).into());
    }
    if tokens.is_empty() {
        return Err(
            "holds no token (one per line; blank lines and # comments are skipped)".to_owned(),
        );
    }
    Ok(tokens)
}

impl Tokens {
    fn open(path: &Path) -> Result<Tokens, AuthSetupError> {
        let fail = |why: String| AuthSetupError::TokenFile {
            path: path.to_owned(),
            why,
        };
        let stamped = stamp(path).map_err(|e| fail(e.to_string()))?;
        let tokens = read_tokens(path).map_err(fail)?;
        Ok(Tokens {
            path: path.to_owned(),
            loaded: Mutex::new((stamped, tokens)),
        })
    }

    /// The index of the token `presented` is, comparing every known token in
    /// constant time; the file is re-read first when it changed (a rotated
    /// Secret). A file that became unreadable keeps the last good tokens.
    fn find(&self, presented: &str) -> Option<usize> {
        let Ok(mut loaded) = self.loaded.lock() else {
            return None;
        };
        match stamp(&self.path) {
            Err(e) => warn!(
                "--upload-token-file {}: {e}; keeping the {} token(s) read before",
                self.path.display(),
                loaded.1.len()
            ),
            Ok(now) if now != loaded.0 => {
                match read_tokens(&self.path) {
                    Ok(tokens) => {
                        tracing::info!(
                            "--upload-token-file {} changed: {} token(s) now",
                            self.path.display(),
                            tokens.len()
                        );
                        *loaded = (now, tokens);
                    }
                    Err(why) => warn!(
                        "--upload-token-file {} changed but cannot be used ({why}); keeping the {} token(s) read before",
                        self.path.display(),
                        loaded.1.len()
                    ),
                }
            }
            Ok(_) => {}
        }
        let hash = Sha256::digest(presented.as_bytes());
        let mut found = None;
        for (i, known) in loaded.1.iter().enumerate() {
            if bool::from(hash.as_slice().ct_eq(known)) {
                found = Some(i);
            }
        }
        found
    }
}

enum Mode {
    None,
    Token(Tokens),
    Kubernetes(Reviewer),
}

/// The server's upload authentication.
pub(super) struct UploadAuth {
    mode: Mode,
}

/// The bearer token of an `Authorization` header: `Ok(None)` when there is none,
/// `Err` when the header holds what cannot be one (not visible ASCII).
fn bearer(headers: &HeaderMap) -> Result<Option<&str>, ()> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value.to_str().map_err(|_| ())?.trim();
    let Some((scheme, token)) = value.split_once(' ') else {
        return Ok(None);
    };
    let token = token.trim();
    Ok((scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token))
}

impl UploadAuth {
    pub(super) fn new(
        mode: Option<UploadAuthMode>,
        token_file: Option<&Path>,
        reviewer: impl FnOnce() -> Result<Reviewer, String>,
    ) -> Result<UploadAuth, AuthSetupError> {
        let mode = match (mode, token_file) {
            (None, Some(_)) => UploadAuthMode::Token,
            (None, None) => return Err(AuthSetupError::NotChosen),
            (Some(mode), Some(file)) if mode != UploadAuthMode::Token => {
                warn!(
                    "--upload-token-file {} is not used with --upload-auth {}",
                    file.display(),
                    if mode == UploadAuthMode::None {
                        "none"
                    } else {
                        "kubernetes"
                    }
                );
                mode
            }
            (Some(mode), _) => mode,
        };
        let mode = match mode {
            UploadAuthMode::None => Mode::None,
            UploadAuthMode::Token => Mode::Token(Tokens::open(
                token_file.ok_or(AuthSetupError::NoTokenFile)?,
            )?),
            UploadAuthMode::Kubernetes => {
                Mode::Kubernetes(reviewer().map_err(AuthSetupError::Kubernetes)?)
            }
        };
        Ok(UploadAuth { mode })
    }

    /// For the start line.
    pub(super) fn describe(&self) -> String {
        match &self.mode {
            Mode::None => "uploads from anyone (--upload-auth none)".to_owned(),
            Mode::Token(t) => format!("uploads with a bearer token of {}", t.path.display()),
            Mode::Kubernetes(r) => format!(
                "uploads with the submitter's Kubernetes token, allowed to create pods in the upload's namespace ({})",
                r.describe()
            ),
        }
    }

    pub(super) fn is_open(&self) -> bool {
        matches!(self.mode, Mode::None)
    }

    /// Who the upload comes from, before its body is read.
    pub(super) async fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, Refusal> {
        let anyone = || Caller {
            name: "anyone (--upload-auth none)".to_owned(),
            kube: None,
        };
        if let Mode::None = self.mode {
            return Ok(anyone());
        }
        let Ok(token) = bearer(headers) else {
            return Err(Refusal::new(
                StatusCode::UNAUTHORIZED,
                "unknown_token",
                "the Authorization header is not a usable bearer token (only visible ASCII)",
            ));
        };
        let Some(token) = token else {
            return Err(Refusal::new(
                StatusCode::UNAUTHORIZED,
                "no_token",
                "no upload token: send Authorization: Bearer <token> (stage upload --token-file FILE, or the kubeconfig's token)",
            ));
        };
        match &self.mode {
            Mode::None => Ok(anyone()),
            Mode::Token(tokens) => match tokens.find(token) {
                Some(i) => Ok(Caller {
                    name: format!("token {} of {}", i + 1, tokens.path.display()),
                    kube: None,
                }),
                None => Err(Refusal::new(
                    StatusCode::UNAUTHORIZED,
                    "unknown_token",
                    "unknown upload token: it is not in the server's --upload-token-file (rotated?)",
                )),
            },
            Mode::Kubernetes(reviewer) => match reviewer.review_token(token).await {
                Ok(Some(user)) => Ok(Caller {
                    name: user.name.clone(),
                    kube: Some(user),
                }),
                Ok(None) => Err(Refusal::new(
                    StatusCode::UNAUTHORIZED,
                    "unknown_token",
                    "the Kubernetes API does not accept this token (TokenReview: not authenticated): use a current token of your kubeconfig user or service account",
                )),
                Err(e) => Err(unavailable(&e)),
            },
        }
    }

    /// Whether `caller` may upload for pods of `namespace`.
    pub(super) async fn authorize(&self, caller: &Caller, namespace: &str) -> Result<(), Refusal> {
        let (Mode::Kubernetes(reviewer), Some(user)) = (&self.mode, &caller.kube) else {
            return Ok(());
        };
        match reviewer.may_create_pods(user, namespace).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(Refusal::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!(
                    "{} is not allowed to create pods in namespace {} (SubjectAccessReview): upload for a namespace you run Spark in",
                    caller.name.escape_debug(),
                    namespace.escape_debug()
                ),
            )),
            Err(e) => Err(unavailable(&e)),
        }
    }
}

fn unavailable(e: &super::review::ReviewError) -> Refusal {
    // The details (API address, files) go to the log, not to the uploader.
    warn!("upload refused: the Kubernetes API gave no verdict: {e}");
    Refusal::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "api_unavailable",
        format!(
            "the Kubernetes API could not confirm who may upload ({}); the upload is refused: try again (details in the server log)",
            e.short()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_and_compared_with_every_known_one() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), Ok(None));
        h.insert(header::AUTHORIZATION, "Bearer  abc ".parse().unwrap());
        assert_eq!(bearer(&h), Ok(Some("abc")));
        h.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer(&h), Ok(None));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(
            &path,
            "\u{feff}# submitters\none\n\n  two  \n\u{e9}t\u{e9}\n",
        )
        .unwrap();
        let tokens = Tokens::open(&path).unwrap();
        assert_eq!(tokens.find("one"), Some(0));
        assert_eq!(tokens.find("two"), Some(1));
        assert_eq!(tokens.find("three"), None);
        assert_eq!(tokens.find("# submitters"), None);
        std::fs::write(&path, "three\n").unwrap();
        // Re-read on change (the stamp includes the size, which changed).
        assert_eq!(tokens.find("three"), Some(0));
        assert_eq!(tokens.find("one"), None);
        std::fs::write(&path, "\n# none\n").unwrap();
        assert!(read_tokens(&path).unwrap_err().contains("holds no token"));
        assert_eq!(tokens.find("three"), Some(0), "kept the last good tokens");
    }
}
