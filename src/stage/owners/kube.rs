//! The Kubernetes API as the owner checks use it: where it is (in a pod, from the
//! kubelet's variables), a client trusting the cluster CA, and one pods query
//! (`GET /api/v1/namespaces/{ns}/pods?labelSelector=…&limit=1`, following
//! `continue` while a page comes back empty, as a filtered list may).

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::StatusCode;
use serde::Deserialize;
use url::Url;

use super::eligibility::OwnerKey;
use super::OwnerSetupError;
use crate::env_vars as env;
use crate::net::tls;
use crate::util::fs::{read_regular, CONFIG_LIMIT};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// One pods-list request, answer included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// Largest pods-list answer read (one pod with `limit=1`).
const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// Empty pages followed through `continue` before the query counts as failed.
const MAX_PAGES: usize = 100;

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

/// The API server at `url` and a client for it.
pub(super) struct KubeApi {
    client: reqwest::Client,
    url: Url,
}

impl KubeApi {
    /// The API at `url`, trusting only `ca` when given (else the bundled and system
    /// roots).
    pub(super) fn new(url: Url, ca: Option<&Path>) -> Result<KubeApi, OwnerSetupError> {
        Ok(KubeApi {
            client: client(ca)?,
            url,
        })
    }

    /// True when at least one pod in the key's namespace matches its labels.
    pub(super) async fn pods_exist(
        &self,
        key: &OwnerKey,
        token: Option<&str>,
    ) -> Result<bool, QueryError> {
        let mut continue_token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let url = pods_url(&self.url, key, continue_token.as_deref());
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

/// `{api}/api/v1/namespaces/{ns}/pods?labelSelector=…&limit=1[&continue=…]`; `api`
/// may carry a path prefix (a proxy).
pub(super) fn pods_url(api: &Url, key: &OwnerKey, continue_token: Option<&str>) -> Url {
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
pub(super) fn in_cluster_api(host: &str, port: Option<&str>) -> Result<Url, OwnerSetupError> {
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

/// What to do about a refused pods list.
fn status_hint(status: StatusCode, namespace: &str) -> String {
    match status {
        StatusCode::UNAUTHORIZED => {
            "; the token was refused (expired, or the wrong --kube-token-file)".to_owned()
        }
        StatusCode::FORBIDDEN => format!(
            "; the service account may not list pods in namespace {namespace}: grant get/list on pods (see the RBAC snippet in docs/staging-server.md)"
        ),
        StatusCode::NOT_FOUND => "; is --kube-api a Kubernetes API server?".to_owned(),
        _ => String::new(),
    }
}

/// A client trusting only `ca` when given (else the bundled and system roots);
/// no proxy, no redirects (the token stays with the API server).
pub(crate) fn client(ca: Option<&Path>) -> Result<reqwest::Client, OwnerSetupError> {
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
