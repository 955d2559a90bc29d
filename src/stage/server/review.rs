//! The Kubernetes API's word on an upload's bearer token (`--upload-auth
//! kubernetes`): a TokenReview (who is it?) and a SubjectAccessReview (may that
//! user create pods in the upload's namespace?), sent with the server's own
//! service account token (RBAC: `create` on `tokenreviews` and
//! `subjectaccessreviews`, see `pod-templates/staging-server/rbac.yaml`).
//!
//! Each review is bounded in time; an error, a timeout or an answer that is not a
//! review is a [`ReviewError`], which the caller turns into a refusal.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use url::Url;

use crate::stage::owners::{self, ApiAccess};

/// One review, answer included.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest review answer read.
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// Why the API gave no verdict.
#[derive(Debug, thiserror::Error)]
pub(super) enum ReviewError {
    #[error("{0}")]
    Token(String),
    #[error(
        "the Kubernetes API did not answer within {}",
        crate::util::duration::format_duration(REVIEW_TIMEOUT)
    )]
    Timeout,
    #[error("the Kubernetes API is unreachable: {0}")]
    Transport(String),
    #[error("the Kubernetes API answered {status} to the {kind}{hint}")]
    Status {
        status: u16,
        kind: &'static str,
        hint: &'static str,
    },
    #[error("the Kubernetes API's answer is not a {0}")]
    Body(&'static str),
}

impl ReviewError {
    /// Without addresses or paths: what an uploader is told.
    pub(super) fn short(&self) -> &'static str {
        match self {
            ReviewError::Token(_) => "the server's own credentials are unusable",
            ReviewError::Timeout => "no answer in time",
            ReviewError::Transport(_) => "unreachable",
            ReviewError::Status { .. } => "an error answer",
            ReviewError::Body(_) => "an answer that is not a review",
        }
    }
}

/// A user as the TokenReview names it (what the SubjectAccessReview asks about).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct ReviewedUser {
    #[serde(rename = "username", default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

#[derive(Deserialize)]
struct Review<S> {
    kind: String,
    status: Option<S>,
}

#[derive(Deserialize)]
struct TokenStatus {
    #[serde(default)]
    authenticated: bool,
    #[serde(default)]
    user: Option<ReviewedUser>,
}

#[derive(Deserialize)]
struct AccessStatus {
    #[serde(default)]
    allowed: bool,
    #[serde(default)]
    denied: bool,
}

/// The reviews' client.
pub(super) struct Reviewer {
    client: reqwest::Client,
    api: Url,
    token_file: Option<PathBuf>,
}

impl Reviewer {
    /// From `stage serve`'s `--kube-api`, `--kube-token-file` and `--kube-ca-cert`
    /// (in a pod: the kubelet's variables and the service account).
    pub(super) fn from_args(args: &crate::cli::ServeArgs) -> Result<Reviewer, String> {
        let Some(ApiAccess {
            api,
            token_file,
            ca,
        }) = owners::api_access(args).map_err(|e| crate::util::redact::error_chain(&e))?
        else {
            return Err(
                "no Kubernetes API: run in a pod (KUBERNETES_SERVICE_HOST) or give --kube-api URL"
                    .to_owned(),
            );
        };
        let client = owners::kube::client(ca.as_deref())
            .map_err(|e| crate::util::redact::error_chain(&e))?;
        Ok(Reviewer {
            client,
            api,
            token_file,
        })
    }

    pub(super) fn describe(&self) -> String {
        format!("reviews by {}", self.api)
    }

    fn url(&self, group: &str, kind: &str) -> Url {
        let mut url = self.api.clone();
        url.set_query(None);
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().extend(["apis", group, "v1", kind]);
        }
        url
    }

    /// POSTs `body` and reads the answer as a `kind` review, within the timeout.
    async fn post<S: serde::de::DeserializeOwned>(
        &self,
        url: Url,
        kind: &'static str,
        body: serde_json::Value,
    ) -> Result<S, ReviewError> {
        let token = match &self.token_file {
            Some(path) => Some(
                owners::read_token(path)
                    .await
                    .map_err(|e| ReviewError::Token(crate::util::redact::error_chain(&e)))?,
            ),
            None => None,
        };
        let send = async {
            let mut request = self
                .client
                .post(url)
                .header(reqwest::header::ACCEPT, "application/json")
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_string());
            if let Some(token) = &token {
                request = request.bearer_auth(token);
            }
            let mut response = request
                .send()
                .await
                .map_err(|e| ReviewError::Transport(crate::util::redact::error_chain(&e)))?;
            let status = response.status();
            if !status.is_success() {
                return Err(ReviewError::Status {
                    status: status.as_u16(),
                    kind,
                    hint: match status.as_u16() {
                        401 => " (the server's own token was refused)",
                        403 => " (the server's service account may not create it: see the RBAC in docs/staging-server.md)",
                        _ => "",
                    },
                });
            }
            let mut answer = Vec::new();
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|e| ReviewError::Transport(crate::util::redact::error_chain(&e)))?
            {
                if answer.len() + chunk.len() > MAX_ANSWER_BYTES {
                    return Err(ReviewError::Body(kind));
                }
                answer.extend_from_slice(&chunk);
            }
            let review: Review<S> =
                serde_json::from_slice(&answer).map_err(|_| ReviewError::Body(kind))?;
            if review.kind != kind {
                return Err(ReviewError::Body(kind));
            }
            review.status.ok_or(ReviewError::Body(kind))
        };
        tokio::time::timeout(REVIEW_TIMEOUT, send)
            .await
            .unwrap_or(Err(ReviewError::Timeout))
    }

    /// The user `token` belongs to, or `None` when the API does not authenticate it.
    pub(super) async fn review_token(
        &self,
        token: &str,
    ) -> Result<Option<ReviewedUser>, ReviewError> {
        let body = serde_json::json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        });
        let status: TokenStatus = self
            .post(
                self.url("authentication.k8s.io", "tokenreviews"),
                "TokenReview",
                body,
            )
            .await?;
        Ok(match status {
            TokenStatus {
                authenticated: true,
                user: Some(user),
            } if !user.name.is_empty() => Some(user),
            _ => None,
        })
    }

    /// Whether `user` may create pods in `namespace`.
    pub(super) async fn may_create_pods(
        &self,
        user: &ReviewedUser,
        namespace: &str,
    ) -> Result<bool, ReviewError> {
        let body = serde_json::json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "resourceAttributes": {"namespace": namespace, "verb": "create", "resource": "pods"},
                "user": user.name,
                "uid": user.uid,
                "groups": user.groups,
                "extra": user.extra,
            },
        });
        let status: AccessStatus = self
            .post(
                self.url("authorization.k8s.io", "subjectaccessreviews"),
                "SubjectAccessReview",
                body,
            )
            .await?;
        Ok(status.allowed && !status.denied)
    }
}
