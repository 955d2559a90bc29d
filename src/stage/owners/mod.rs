//! Owner expiry for `stage serve`: a downloaded bundle is deleted once no pod in
//! its owner's namespace matches its owner labels any more, as in the original
//! server's `StagedResourcesCleaner`.
//!
//! Every `--owner-check-interval` the sweeper hands the stored bundles to
//! [`OwnerChecker::check`]. Bundles are grouped by owner (namespace and labels) and
//! each group costs one `GET /api/v1/namespaces/{ns}/pods?labelSelector=…&limit=1`
//! (following `continue` while a page comes back empty, as a filtered list may).
//! Pods in any phase count, completed ones included, until they are deleted.
//!
//! Which bundles are checked:
//! - only downloaded ones (never-downloaded bundles are `--unused-ttl`'s job);
//! - only once one check interval has passed since the first download (a grace
//!   against a pod list read just before the owner pod was created);
//! - not those whose owner has no labels (the selector would match every pod),
//!   whose `ownerType` is not `Pod`, or whose namespace or labels are not valid
//!   Kubernetes names: those are kept until `--max-ttl`, with one log line each.
//!
//! Conservative on errors: an unreadable token, a transport error or timeout, an
//! answer other than 200 (401, 403, 5xx, ...) or a body that is not a pod list
//! deletes nothing; it is logged (never the token) and counted.
//!
//! Where the API is: `--kube-api`, else `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`
//! in a pod; neither means owner checks are off. The token (`--kube-token-file`, by
//! default the service account's) is re-read before every check, since bound tokens
//! rotate. The API's certificate must chain to `--kube-ca-cert` (by default the
//! service account's `ca.crt`; only when that is absent, the bundled and system roots).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use tracing::{info, warn};

use self::eligibility::{eligibility, OwnerKey};
use self::kube::{in_cluster_api, KubeApi, QueryError};
use super::store::BundleMeta;
use crate::cli::ServeArgs;
use crate::env_vars as env;
use crate::util::fs::read_config_text;
use crate::util::redact::{error_chain, register_secret};

mod eligibility;
pub(crate) mod kube;

/// The service account token Kubernetes mounts in every pod.
pub(crate) const DEFAULT_TOKEN_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";
/// The cluster CA Kubernetes mounts next to the token.
pub(crate) const DEFAULT_CA_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
/// Pods-list requests in flight at once.
const PARALLEL_QUERIES: usize = 4;

/// Why owner checks could not be set up (a configuration error).
#[derive(Debug, thiserror::Error)]
pub(crate) enum OwnerSetupError {
    #[error("{var}={value:?} does not make a valid API server URL")]
    ServiceEnv {
        var: &'static str,
        value: String,
        #[source]
        source: url::ParseError,
    },
    #[error("cannot read the Kubernetes API token {path} ({origin}); mount the service account token (automountServiceAccountToken) or pass --kube-token-file")]
    TokenRead {
        path: PathBuf,
        origin: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read --kube-ca-cert {path}; check the path")]
    CaRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--kube-ca-cert {path} holds no PEM certificate")]
    CaEmpty { path: PathBuf },
    #[error("cannot set up TLS for the Kubernetes API")]
    Tls(#[source] rustls::Error),
    #[error("cannot build the Kubernetes API client")]
    Client(#[source] reqwest::Error),
}

/// What one round of owner checks found.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Bundles whose owner pods are gone, with the reason to log.
    pub gone: Vec<(BundleMeta, String)>,
    /// Owner queries sent.
    pub queries: u64,
    /// Owner queries that failed (nothing deleted for them).
    pub errors: u64,
}

/// Asks the Kubernetes API whether the owners of downloaded bundles still exist.
pub(crate) struct OwnerChecker {
    kube: KubeApi,
    token_file: Option<PathBuf>,
    interval: Duration,
    /// Bundles already logged as not owner-checked.
    noted: Mutex<HashSet<String>>,
}

impl OwnerChecker {
    /// The checker `args` ask for, or `None` (logged once) when no API is
    /// configured. Reads the token and CA once, so a bad path fails at start.
    pub(crate) fn from_args(
        args: &ServeArgs,
    ) -> Result<Option<Arc<OwnerChecker>>, OwnerSetupError> {
        let Some(ApiAccess {
            api,
            token_file,
            ca,
        }) = api_access(args)?
        else {
            info!("owner checks off: not in a cluster and no --kube-api; downloaded bundles are kept until --max-ttl");
            return Ok(None);
        };
        let checker = OwnerChecker {
            kube: KubeApi::new(api.clone(), ca.as_deref())?,
            token_file,
            interval: args.owner_check_interval,
            noted: Mutex::new(HashSet::new()),
        };
        let token = match &checker.token_file {
            Some(path) => format!("token file {}", path.display()),
            None => "no token".to_owned(),
        };
        let trust = match &ca {
            Some(path) => format!("CA {}", path.display()),
            None => "bundled and system roots".to_owned(),
        };
        info!(
            "owner checks every {} against {api} ({token}, {trust}): a downloaded bundle is deleted when no pod matches its owner",
            crate::util::duration::format_duration(checker.interval)
        );
        if api.scheme() == "http" && checker.token_file.is_some() {
            warn!("--kube-api {api} is plain http: the token is sent unencrypted");
        }
        Ok(Some(Arc::new(checker)))
    }

    /// How often [`OwnerChecker::check`] should run.
    pub(crate) fn interval(&self) -> Duration {
        self.interval
    }

    /// One round over `bundles` at `now_ms`: which owners are gone. Errors are
    /// logged (one line per round) and counted, never turned into deletions.
    pub(crate) async fn check(&self, bundles: Vec<BundleMeta>, now_ms: u64) -> Outcome {
        let groups = self.group_by_owner(bundles, now_ms);
        if groups.is_empty() {
            return Outcome::default();
        }
        match self.token().await {
            Ok(token) => self.query_owners(groups, token.as_deref()).await,
            Err(e) => {
                warn!("owner check skipped: {}; nothing deleted", error_chain(&e));
                Outcome {
                    errors: 1,
                    ..Outcome::default()
                }
            }
        }
    }

    /// The bundles to check, grouped by owner; the others are noted once each when
    /// worth a log line.
    fn group_by_owner(
        &self,
        bundles: Vec<BundleMeta>,
        now_ms: u64,
    ) -> BTreeMap<OwnerKey, Vec<BundleMeta>> {
        let mut groups: BTreeMap<OwnerKey, Vec<BundleMeta>> = BTreeMap::new();
        let mut noted = self.noted.lock().unwrap_or_else(PoisonError::into_inner);
        noted.retain(|id| bundles.iter().any(|m| &m.id == id));
        for meta in bundles {
            match eligibility(&meta, now_ms, self.interval) {
                Ok(key) => groups.entry(key).or_default().push(meta),
                Err(skip) => {
                    if let Some(note) = skip.note() {
                        if noted.insert(meta.id.clone()) {
                            warn!("bundle {} is not owner-checked: {note}", meta.id);
                        }
                    }
                }
            }
        }
        groups
    }

    /// One pods query per owner, a few at a time: the bundles whose owner is gone.
    async fn query_owners(
        &self,
        groups: BTreeMap<OwnerKey, Vec<BundleMeta>>,
        token: Option<&str>,
    ) -> Outcome {
        let mut outcome = Outcome::default();
        let mut answers = futures_util::stream::iter(groups)
            .map(|(key, metas)| async move {
                let found = self.kube.pods_exist(&key, token).await;
                (key, metas, found)
            })
            .buffer_unordered(PARALLEL_QUERIES);
        let mut first_error = None;
        while let Some((key, metas, found)) = answers.next().await {
            outcome.queries += 1;
            match found {
                Ok(true) => {}
                Ok(false) => {
                    let why = format!(
                        "owner pods gone: none in namespace {} matches {}",
                        key.namespace,
                        key.selector()
                    );
                    outcome
                        .gone
                        .extend(metas.into_iter().map(|m| (m, why.clone())));
                }
                Err(e) => {
                    outcome.errors += 1;
                    first_error.get_or_insert_with(|| {
                        format!(
                            "namespace {} selector {}: {}",
                            key.namespace,
                            key.selector(),
                            error_chain(&e)
                        )
                    });
                }
            }
        }
        if let Some(first) = first_error {
            warn!(
                "owner check: {} of {} queries failed; their bundles are kept (first: {first})",
                outcome.errors, outcome.queries
            );
        }
        outcome
    }

    /// The bearer token, re-read (it rotates); registered for redaction.
    async fn token(&self) -> Result<Option<String>, QueryError> {
        match &self.token_file {
            Some(path) => read_token(path).await.map(Some),
            None => Ok(None),
        }
    }
}

/// Where the Kubernetes API is and how `stage serve` reaches it: `--kube-api` or,
/// in a pod, the kubelet's variables; the service account's token and CA unless
/// given. `None` outside a cluster without `--kube-api`.
pub(crate) struct ApiAccess {
    pub api: url::Url,
    pub token_file: Option<PathBuf>,
    pub ca: Option<PathBuf>,
}

pub(crate) fn api_access(args: &ServeArgs) -> Result<Option<ApiAccess>, OwnerSetupError> {
    let host = std::env::var(env::KUBERNETES_SERVICE_HOST)
        .ok()
        .filter(|h| !h.trim().is_empty());
    let (api, in_cluster) = match (&args.kube_api, host) {
        (Some(api), _) => (api.clone(), false),
        (None, Some(host)) => {
            let port = std::env::var(env::KUBERNETES_SERVICE_PORT).ok();
            (in_cluster_api(&host, port.as_deref())?, true)
        }
        (None, None) => return Ok(None),
    };
    let token_file = match &args.kube_token_file {
        Some(path) => Some(check_token(path, "--kube-token-file")?),
        None if in_cluster || Path::new(DEFAULT_TOKEN_FILE).exists() => Some(check_token(
            Path::new(DEFAULT_TOKEN_FILE),
            "the in-pod default",
        )?),
        None => None,
    };
    let ca = match &args.kube_ca_cert {
        Some(path) => Some(path.clone()),
        None => Some(PathBuf::from(DEFAULT_CA_FILE)).filter(|p| p.exists()),
    };
    Ok(Some(ApiAccess {
        api,
        token_file,
        ca,
    }))
}

/// The service account's bearer token from `path`, re-read (it rotates),
/// trimmed and registered for redaction (owner checks and upload reviews).
pub(crate) async fn read_token(path: &Path) -> Result<String, QueryError> {
    let file = path.to_owned();
    let read = tokio::task::spawn_blocking(move || read_config_text(&file))
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)));
    let text = read.map_err(|source| QueryError::Token {
        path: path.to_owned(),
        source,
    })?;
    let token = text.trim();
    if token.is_empty() {
        return Err(QueryError::EmptyToken {
            path: path.to_owned(),
        });
    }
    register_secret(token);
    Ok(token.to_owned())
}

/// Fails early, naming the file, when the token cannot be read.
fn check_token(path: &Path, origin: &'static str) -> Result<PathBuf, OwnerSetupError> {
    read_config_text(path).map_err(|source| OwnerSetupError::TokenRead {
        path: path.to_owned(),
        origin,
        source,
    })?;
    Ok(path.to_owned())
}
