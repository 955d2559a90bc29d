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
use reqwest::StatusCode;
use serde::Deserialize;
use tracing::{info, warn};
use url::Url;

use super::api::OWNER_TYPE_POD;
use super::names::{check_dns_label, check_label_key, is_label_value};
use super::store::BundleMeta;
use crate::cli::ServeArgs;
use crate::env_vars as env;
use crate::net::tls;
use crate::util::fs::{read_config_text, read_regular, CONFIG_LIMIT};
use crate::util::redact::{error_chain, register_secret};

/// The service account token Kubernetes mounts in every pod.
pub(crate) const DEFAULT_TOKEN_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";
/// The cluster CA Kubernetes mounts next to the token.
pub(crate) const DEFAULT_CA_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// One pods-list request, answer included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// Largest pods-list answer read (one pod with `limit=1`).
const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// Empty pages followed through `continue` before the query counts as failed.
const MAX_PAGES: usize = 100;
/// Pods-list requests in flight at once.
const PARALLEL_QUERIES: usize = 4;

/// Why owner checks could not be set up (a configuration error, exit 2).
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

/// Why one owner query gave no answer; never grounds for a deletion.
#[derive(Debug, thiserror::Error)]
pub(crate) enum QueryError {
    #[error("cannot read the token file {path}")]
    Token {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the token file {path} is empty")]
    EmptyToken { path: PathBuf },
    #[error("the Kubernetes API is unreachable or did not answer in time")]
    Transport(#[source] reqwest::Error),
    #[error("the Kubernetes API answered {status}{hint}")]
    Status { status: StatusCode, hint: String },
    #[error("the Kubernetes API's answer is not a pod list")]
    Body(#[source] serde_json::Error),
    #[error("the Kubernetes API's answer is not a pod list (kind {kind:?}, apiVersion {api_version:?}); is --kube-api a Kubernetes API server?")]
    NotPodList {
        kind: String,
        api_version: Option<String>,
    },
    #[error("the Kubernetes API's answer is larger than {MAX_BODY_BYTES} bytes")]
    TooLarge,
    #[error("the Kubernetes API kept answering empty pages ({MAX_PAGES})")]
    TooManyPages,
}

/// Who owns a bundle, as a pods query: the namespace and the label equalities.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct OwnerKey {
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
}

impl OwnerKey {
    /// `k1=v1,k2=v2`, keys in order (the labels are valid, so nothing needs quoting).
    pub(crate) fn selector(&self) -> String {
        let pairs: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        pairs.join(",")
    }
}

/// Why a bundle is not owner-checked this time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Skip {
    NotDownloaded,
    InGrace,
    NoLabels,
    OtherOwnerType(String),
    Invalid(String),
}

impl Skip {
    /// Worth one log line per bundle (the others are routine).
    fn note(&self) -> Option<String> {
        match self {
            Skip::NotDownloaded | Skip::InGrace => None,
            Skip::NoLabels => Some(
                "its owner has no labels (that would match every pod): kept until --max-ttl"
                    .to_owned(),
            ),
            Skip::OtherOwnerType(t) => Some(format!(
                "its ownerType {t:?} is not {OWNER_TYPE_POD:?}: kept until --max-ttl"
            )),
            Skip::Invalid(why) => Some(format!("{why}: kept until --max-ttl")),
        }
    }
}

/// Whether `meta` is owner-checked at `now_ms`, and against which owner.
pub(crate) fn eligibility(
    meta: &BundleMeta,
    now_ms: u64,
    grace: Duration,
) -> Result<OwnerKey, Skip> {
    let Some(first) = meta.first_download_ms else {
        return Err(Skip::NotDownloaded);
    };
    let owner = &meta.owner;
    if !owner.owner_type.eq_ignore_ascii_case(OWNER_TYPE_POD) {
        return Err(Skip::OtherOwnerType(owner.owner_type.clone()));
    }
    if owner.labels.is_empty() {
        return Err(Skip::NoLabels);
    }
    if check_dns_label(&owner.namespace).is_err() {
        return Err(Skip::Invalid(format!(
            "its owner namespace {:?} is not a valid namespace name",
            owner.namespace
        )));
    }
    if let Some((k, v)) = owner
        .labels
        .iter()
        .find(|(k, v)| check_label_key(k).is_err() || !is_label_value(v))
    {
        return Err(Skip::Invalid(format!(
            "its owner label {k:?}={v:?} is not a valid Kubernetes label"
        )));
    }
    if now_ms.saturating_sub(first) < grace.as_millis() as u64 {
        return Err(Skip::InGrace);
    }
    Ok(OwnerKey {
        namespace: owner.namespace.clone(),
        labels: owner.labels.clone(),
    })
}

/// `{api}/api/v1/namespaces/{ns}/pods?labelSelector=…&limit=1[&continue=…]`; `api`
/// may carry a path prefix (a proxy).
pub(crate) fn pods_url(api: &Url, key: &OwnerKey, continue_token: Option<&str>) -> Url {
    let mut url = api.clone();
    url.set_query(None);
    url.set_fragment(None);
    if let Ok(mut segments) = url.path_segments_mut() {
        segments
            .pop_if_empty()
            .extend(["api", "v1", "namespaces", &key.namespace, "pods"]);
    }
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("labelSelector", &key.selector())
            .append_pair("limit", "1");
        if let Some(token) = continue_token {
            query.append_pair("continue", token);
        }
    }
    url
}

/// The in-pod API server address from the kubelet's variables (IPv6 bracketed).
pub(crate) fn in_cluster_api(host: &str, port: Option<&str>) -> Result<Url, OwnerSetupError> {
    let port = port
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .unwrap_or("443");
    let host = host.trim();
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    Url::parse(&format!("https://{host}:{port}")).map_err(|source| OwnerSetupError::ServiceEnv {
        var: env::KUBERNETES_SERVICE_HOST,
        value: format!("{host}:{port}"),
        source,
    })
}

/// The part of a pod list that matters.
#[derive(Deserialize)]
struct PodList {
    kind: String,
    #[serde(rename = "apiVersion", default)]
    api_version: Option<String>,
    items: Vec<serde::de::IgnoredAny>,
    #[serde(default)]
    metadata: ListMeta,
}

impl PodList {
    /// A `kind: PodList` (`apiVersion: v1` when given) with an `items` array; anything
    /// else (a `Status`, another list, an HTML page) is an error, never "no pods".
    fn parse(body: &[u8]) -> Result<PodList, QueryError> {
        let list: PodList = serde_json::from_slice(body).map_err(QueryError::Body)?;
        let v1 = list.api_version.as_deref().is_none_or(|v| v == "v1");
        if list.kind != "PodList" || !v1 {
            // Shown in the log: at most a few dozen characters of them.
            let short = |s: &str| s.chars().take(64).collect::<String>();
            return Err(QueryError::NotPodList {
                kind: short(&list.kind),
                api_version: list.api_version.as_deref().map(short),
            });
        }
        Ok(list)
    }
}

#[derive(Deserialize, Default)]
struct ListMeta {
    #[serde(rename = "continue", default)]
    continue_token: Option<String>,
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
    client: reqwest::Client,
    api: Url,
    token_file: Option<PathBuf>,
    interval: Duration,
    /// Bundles already logged as not owner-checked.
    noted: Mutex<HashSet<String>>,
    /// The token last registered for redaction.
    last_token: Mutex<String>,
}

impl OwnerChecker {
    /// The checker `args` ask for, or `None` (logged once) when no API is
    /// configured. Reads the token and CA once, so a bad path fails at start.
    pub(crate) fn from_args(
        args: &ServeArgs,
    ) -> Result<Option<Arc<OwnerChecker>>, OwnerSetupError> {
        let host = std::env::var(env::KUBERNETES_SERVICE_HOST)
            .ok()
            .filter(|h| !h.trim().is_empty());
        let (api, in_cluster) = match (&args.kube_api, host) {
            (Some(api), _) => (api.clone(), false),
            (None, Some(host)) => {
                let port = std::env::var(env::KUBERNETES_SERVICE_PORT).ok();
                (in_cluster_api(&host, port.as_deref())?, true)
            }
            (None, None) => {
                info!("owner checks off: not in a cluster and no --kube-api; downloaded bundles are kept until --max-ttl");
                return Ok(None);
            }
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
        let client = client(ca.as_deref())?;
        let checker = OwnerChecker {
            client,
            api: api.clone(),
            token_file,
            interval: args.owner_check_interval,
            noted: Mutex::new(HashSet::new()),
            last_token: Mutex::new(String::new()),
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
        let mut groups: BTreeMap<OwnerKey, Vec<BundleMeta>> = BTreeMap::new();
        {
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
        }
        let mut outcome = Outcome::default();
        if groups.is_empty() {
            return outcome;
        }
        let token = match self.token().await {
            Ok(token) => token,
            Err(e) => {
                warn!("owner check skipped: {}; nothing deleted", error_chain(&e));
                outcome.errors = 1;
                return outcome;
            }
        };
        let token = token.as_deref();
        let mut answers = futures_util::stream::iter(groups)
            .map(|(key, metas)| async move {
                let found = self.owner_pods_exist(&key, token).await;
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
        let Some(path) = &self.token_file else {
            return Ok(None);
        };
        let file = path.clone();
        let read = tokio::task::spawn_blocking(move || read_config_text(&file))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        let text = read.map_err(|source| QueryError::Token {
            path: path.clone(),
            source,
        })?;
        let token = text.trim();
        if token.is_empty() {
            return Err(QueryError::EmptyToken { path: path.clone() });
        }
        let mut last = self
            .last_token
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if *last != token {
            register_secret(token);
            token.clone_into(&mut last);
        }
        Ok(Some(token.to_owned()))
    }

    /// True when at least one pod in the key's namespace matches its labels.
    async fn owner_pods_exist(
        &self,
        key: &OwnerKey,
        token: Option<&str>,
    ) -> Result<bool, QueryError> {
        let mut continue_token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let url = pods_url(&self.api, key, continue_token.as_deref());
            let mut request = self
                .client
                .get(url)
                .header(reqwest::header::ACCEPT, "application/json");
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            let mut response = request.send().await.map_err(QueryError::Transport)?;
            let status = response.status();
            if status != StatusCode::OK {
                return Err(QueryError::Status {
                    status,
                    hint: status_hint(status, &key.namespace),
                });
            }
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(QueryError::Transport)? {
                if body.len() + chunk.len() > MAX_BODY_BYTES {
                    return Err(QueryError::TooLarge);
                }
                body.extend_from_slice(&chunk);
            }
            let list = PodList::parse(&body)?;
            if !list.items.is_empty() {
                return Ok(true);
            }
            match list.metadata.continue_token.filter(|t| !t.is_empty()) {
                Some(next) => continue_token = Some(next),
                None => return Ok(false),
            }
        }
        Err(QueryError::TooManyPages)
    }
}

/// What to do about a refused pods list.
fn status_hint(status: StatusCode, namespace: &str) -> String {
    match status {
        StatusCode::UNAUTHORIZED => {
            "; the token was refused (expired, or the wrong --kube-token-file)".to_owned()
        }
        StatusCode::FORBIDDEN => format!(
            "; the service account may not list pods in namespace {namespace}: grant get/list on pods (see the README's RBAC snippet)"
        ),
        StatusCode::NOT_FOUND => "; is --kube-api a Kubernetes API server?".to_owned(),
        _ => String::new(),
    }
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

/// A client trusting only `ca` when given (else the bundled and system roots);
/// no proxy, no redirects (the token stays with the API server).
fn client(ca: Option<&Path>) -> Result<reqwest::Client, OwnerSetupError> {
    let roots = match ca {
        Some(path) => {
            let pem =
                read_regular(path, CONFIG_LIMIT).map_err(|source| OwnerSetupError::CaRead {
                    path: path.to_owned(),
                    source,
                })?;
            let mut roots = rustls::RootCertStore::empty();
            if tls::add_pem_certificates(&mut roots, &pem) == 0 {
                return Err(OwnerSetupError::CaEmpty {
                    path: path.to_owned(),
                });
            }
            roots
        }
        None => tls::default_roots(),
    };
    let config = tls::client_config(roots).map_err(OwnerSetupError::Tls)?;
    reqwest::Client::builder()
        .use_preconfigured_tls(config)
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(REQUEST_TIMEOUT)
        .user_agent(concat!("spark-localizer/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(OwnerSetupError::Client)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::api::ResourceOwner;
    use crate::stage::store::META_VERSION;

    fn key(ns: &str, labels: &[(&str, &str)]) -> OwnerKey {
        OwnerKey {
            namespace: ns.to_owned(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn selector_and_url_encoding() {
        let api = Url::parse("https://10.96.0.1:443").unwrap();
        let k = key(
            "spark",
            &[("spark-role", "driver"), ("spark-app-selector", "app-1")],
        );
        assert_eq!(k.selector(), "spark-app-selector=app-1,spark-role=driver");
        assert_eq!(
            pods_url(&api, &k, None).as_str(),
            "https://10.96.0.1/api/v1/namespaces/spark/pods?labelSelector=spark-app-selector%3Dapp-1%2Cspark-role%3Ddriver&limit=1"
        );
        let prefixed = Url::parse("http://127.0.0.1:8001/k8s/clusters/c1/?x=y").unwrap();
        let k = key("ns", &[("example.com/app", "a_b.c"), ("empty", "")]);
        assert_eq!(
            pods_url(&prefixed, &k, Some("tok/+=")).as_str(),
            "http://127.0.0.1:8001/k8s/clusters/c1/api/v1/namespaces/ns/pods?labelSelector=empty%3D%2Cexample.com%2Fapp%3Da_b.c&limit=1&continue=tok%2F%2B%3D"
        );
    }

    #[test]
    fn in_cluster_addresses() {
        let cases = [
            ("10.96.0.1", Some("443"), "https://10.96.0.1/"),
            ("10.96.0.1", Some("6443"), "https://10.96.0.1:6443/"),
            ("fd00::1", Some("443"), "https://[fd00::1]/"),
            (
                "kubernetes.default.svc",
                None,
                "https://kubernetes.default.svc/",
            ),
        ];
        for (host, port, want) in cases {
            assert_eq!(in_cluster_api(host, port).unwrap().as_str(), want, "{host}");
        }
        assert!(in_cluster_api("10.0.0.1", Some("x")).is_err());
    }

    fn meta(owner: &str, first_download_ms: Option<u64>) -> BundleMeta {
        BundleMeta {
            version: META_VERSION,
            id: "0".repeat(32),
            secret_sha256: String::new(),
            size: 0,
            sha256: String::new(),
            owner: serde_json::from_str::<ResourceOwner>(owner).unwrap(),
            created_ms: 0,
            first_download_ms,
        }
    }

    #[test]
    fn who_is_checked() {
        let grace = Duration::from_secs(60);
        let pod = r#"{"namespace":"spark","labels":{"app":"a"},"ownerType":"Pod"}"#;
        assert_eq!(
            eligibility(&meta(pod, Some(1_000)), 61_000, grace),
            Ok(key("spark", &[("app", "a")]))
        );
        let cases = [
            (pod, None, 1_000_000, Skip::NotDownloaded),
            (pod, Some(1_000), 60_999, Skip::InGrace),
            (
                r#"{"namespace":"spark","labels":{}}"#,
                Some(0),
                1_000_000,
                Skip::NoLabels,
            ),
            (
                r#"{"namespace":"spark","labels":{"app":"a"},"ownerType":"Deployment"}"#,
                Some(0),
                1_000_000,
                Skip::OtherOwnerType("Deployment".into()),
            ),
        ];
        for (owner, first, now, want) in cases {
            assert_eq!(
                eligibility(&meta(owner, first), now, grace),
                Err(want),
                "{owner}"
            );
        }
        let lower = r#"{"namespace":"spark","labels":{"app":"a"},"ownerType":"pod"}"#;
        assert!(eligibility(&meta(lower, Some(0)), 1_000_000, grace).is_ok());
        for bad in [
            r#"{"namespace":"Spark","labels":{"app":"a"}}"#,
            r#"{"namespace":"spark","labels":{"app":"a,b=c"}}"#,
        ] {
            assert!(matches!(
                eligibility(&meta(bad, Some(0)), 1_000_000, grace),
                Err(Skip::Invalid(_))
            ));
        }
    }

    #[test]
    fn pod_list_answers() {
        let empty =
            PodList::parse(br#"{"kind":"PodList","metadata":{"resourceVersion":"1"},"items":[]}"#)
                .unwrap();
        assert!(empty.items.is_empty() && empty.metadata.continue_token.is_none());
        let paged =
            PodList::parse(br#"{"kind":"PodList","metadata":{"continue":"abc"},"items":[]}"#)
                .unwrap();
        assert_eq!(paged.metadata.continue_token.as_deref(), Some("abc"));
        let one = PodList::parse(
            br#"{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"p"}}]}"#,
        )
        .unwrap();
        assert_eq!(one.items.len(), 1);
        // Not a pod list: never read as "no pods".
        for bad in [
            r#"{"kind":"Status","code":500}"#,
            r#"{"kind":"PodList","items":null}"#,
            r#"{"kind":"PodList","metadata":{}}"#,
            r#"{"items":[]}"#,
            r#"{"kind":"ServiceList","apiVersion":"v1","metadata":{},"items":[]}"#,
            r#"{"kind":"PodList","apiVersion":"v2","items":[]}"#,
            r#"{"kind":null,"items":[]}"#,
            "<html>",
        ] {
            assert!(PodList::parse(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}
