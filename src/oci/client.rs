//! One registry client for resolution and blob transfers: Registry API v2 over
//! the shared HTTP client, the `WWW-Authenticate` flows (anonymous or basic
//! token, Basic), tokens cached per registry and repository, redirects followed
//! here so that credentials never leave the registry's own host.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine as _;
use reqwest::header::{self, HeaderMap, HeaderValue};
use reqwest::{Method, Response, StatusCode};
use sha2::{Digest as _, Sha256};
use url::Url;

use super::auth::{parse_challenge, AuthFile, Challenge, Credential};
use super::manifest::{self, Descriptor, Parsed};
use super::reference::Reference;
use crate::fault::{FaultKind, SourceError};
use crate::util::redact::{redact_url, register_secret};

/// Redirects followed before giving up.
const MAX_REDIRECTS: usize = 10;
/// The largest manifest read.
const MANIFEST_LIMIT: usize = 4 << 20;

/// Said when the registry refuses the credentials (or has none to use).
pub(crate) const AUTH_HINT: &str = "give the registry's credentials in a kubernetes.io/dockerconfigjson Secret mounted as --registry-auth (or DOCKER_CONFIG); `check` shows which credential is picked";

/// Makes a request's body (again for each time it is sent).
pub(crate) type Body<'a> = dyn Fn() -> reqwest::Body + Send + Sync + 'a;

/// A registry client shared by every reference and blob of a run.
pub(crate) struct Registry {
    client: reqwest::Client,
    auth: Option<AuthFile>,
    insecure: Vec<String>,
    /// `registry repo` → the Authorization that worked last.
    tokens: Mutex<HashMap<String, HeaderValue>>,
    /// `--stall-timeout`: how long an answer's headers (and a manifest's or
    /// token's body) may take; a blob's body is the engine's to time.
    stall: std::time::Duration,
}

/// A reference resolved: the manifest it names and the layers to fetch.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    /// The digest of the manifest the reference names (the index, for an index).
    pub digest: String,
    /// For an index: the digest of the manifest picked from it.
    pub picked: Option<String>,
    pub layers: Vec<Descriptor>,
}

impl Registry {
    pub(crate) fn new(
        client: reqwest::Client,
        auth: Option<AuthFile>,
        insecure: Vec<String>,
        stall: std::time::Duration,
    ) -> Self {
        Registry {
            client,
            auth,
            stall,
            insecure: insecure
                .into_iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
            tokens: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `registry` is spoken to in plain HTTP (`--insecure-registry`).
    pub(crate) fn is_insecure(&self, registry: &str) -> bool {
        self.insecure.iter().any(|h| h == registry)
    }

    /// Which credential is used for `registry`, for `check`: never its value.
    pub(crate) fn auth_source(&self, registry: &str) -> String {
        match &self.auth {
            Some(file) => match file.lookup(registry) {
                Some(c) => format!(
                    "{} from {} ({})",
                    c.kind(),
                    file.path.display(),
                    file.origin
                ),
                None => format!(
                    "anonymous ({} has no entry for {registry}; it has: {})",
                    file.path.display(),
                    file.registries().collect::<Vec<_>>().join(", ")
                ),
            },
            None => "anonymous (no --registry-auth or DOCKER_CONFIG)".to_owned(),
        }
    }

    pub(super) fn url(&self, registry: &str, repo: &str, tail: &str) -> Result<Url, SourceError> {
        let scheme = if self.is_insecure(registry) {
            "http"
        } else {
            "https"
        };
        let host = api_host(registry);
        Url::parse(&format!("{scheme}://{host}/v2/{repo}/{tail}")).map_err(|e| {
            SourceError::new(FaultKind::Refused, format!("oci://{registry}/{repo}: {e}"))
        })
    }

    /// Resolves `r` to its manifest and layers: a digest reference is checked
    /// against the bytes; an index is narrowed by [`manifest::pick`].
    pub(crate) async fn resolve(&self, r: &Reference) -> Result<Resolved, SourceError> {
        let (body, kind, digest) = self.manifest(r, r.reference()).await?;
        let parsed = manifest::parse(&body, &kind).map_err(|why| malformed(r, &why))?;
        match parsed {
            Parsed::Manifest(layers) => Ok(Resolved {
                digest,
                picked: None,
                layers,
            }),
            Parsed::Index(entries) => {
                let entry = manifest::pick(&entries, manifest::running_platform())
                    .ok_or_else(|| malformed(r, "the index lists no manifest"))?;
                let (body, kind, picked) = self.manifest(r, &entry.digest).await?;
                match manifest::parse(&body, &kind).map_err(|why| malformed(r, &why))? {
                    Parsed::Manifest(layers) => Ok(Resolved {
                        digest,
                        picked: Some(picked),
                        layers,
                    }),
                    Parsed::Index(_) => Err(malformed(r, "the index names another index")),
                }
            }
        }
    }

    /// GETs a manifest by tag or digest: its body, media type and digest (the
    /// body's sha256, checked against a digest reference and the registry's
    /// `Docker-Content-Digest`).
    async fn manifest(
        &self,
        r: &Reference,
        reference: &str,
    ) -> Result<(Vec<u8>, String, String), SourceError> {
        let mut extra = HeaderMap::new();
        extra.insert(header::ACCEPT, HeaderValue::from_static(manifest::ACCEPT));
        let tail = format!("manifests/{reference}");
        let response = self
            .send(Method::GET, &r.registry, &r.repository, &tail, extra)
            .await?;
        let shown = format!("oci://{}/{}:{reference}", r.registry, r.repository)
            .replace(":sha256:", "@sha256:");
        if !response.status().is_success() {
            return Err(status_error(
                &shown,
                "manifest",
                &response,
                self.auth_file(),
            ));
        }
        if response
            .content_length()
            .is_some_and(|n| n > MANIFEST_LIMIT as u64)
        {
            return Err(malformed(r, "the manifest is larger than 4 MiB"));
        }
        let kind = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let announced = response
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let url = response.url().clone();
        let body = tokio::time::timeout(self.stall, response.bytes())
            .await
            .map_err(|_| self.stalled(url.as_str()))?
            .map_err(|e| transport_error(&shown, e))?;
        if body.len() > MANIFEST_LIMIT {
            return Err(malformed(r, "the manifest is larger than 4 MiB"));
        }
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(&body)));
        let expected = reference
            .starts_with("sha256:")
            .then(|| reference.to_owned())
            .or(announced.filter(|d| d.starts_with("sha256:")));
        if let Some(expected) = expected.filter(|e| *e != digest) {
            return Err(SourceError::new(
                FaultKind::Integrity,
                format!("{shown}: the manifest's bytes hash to {digest}, not {expected}"),
            ));
        }
        Ok((body.to_vec(), kind, digest))
    }

    /// GETs (or HEADs) blob `digest` of `repo`, `range` asked when given.
    pub(crate) async fn blob(
        &self,
        method: Method,
        registry: &str,
        repo: &str,
        digest: &str,
        extra: HeaderMap,
    ) -> Result<Response, SourceError> {
        self.send(method, registry, repo, &format!("blobs/{digest}"), extra)
            .await
    }

    /// No answer within `--stall-timeout` (retried, as a stalled transfer is).
    fn stalled(&self, url: &str) -> SourceError {
        SourceError::new(
            FaultKind::Transient,
            format!(
                "{}: no answer within {} (--stall-timeout)",
                redact_url(url),
                crate::util::duration::format_duration(self.stall)
            ),
        )
    }

    /// The auth file, for error messages.
    pub(crate) fn auth_file(&self) -> Option<&AuthFile> {
        self.auth.as_ref()
    }

    /// Sends a request to `registry`, answering a 401 challenge once, and
    /// following redirects (Authorization only to the registry's own host).
    async fn send(
        &self,
        method: Method,
        registry: &str,
        repo: &str,
        tail: &str,
        extra: HeaderMap,
    ) -> Result<Response, SourceError> {
        let url = self.url(registry, repo, tail)?;
        self.send_to(method, registry, repo, &url, extra, None)
            .await
    }

    /// [`Registry::send`] to `url` (of `registry`'s API for `repo`), with the
    /// body `body` makes (made again for the answer to a challenge).
    pub(super) async fn send_to(
        &self,
        method: Method,
        registry: &str,
        repo: &str,
        url: &Url,
        extra: HeaderMap,
        body: Option<&Body<'_>>,
    ) -> Result<Response, SourceError> {
        let key = format!("{registry} {repo}");
        let cached = self.tokens.lock().expect("token cache").get(&key).cloned();
        let response = self
            .follow(method.clone(), url, &extra, cached.as_ref(), body)
            .await?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        let shown = format!("oci://{registry}/{repo}");
        let challenge = response
            .headers()
            .get(header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_challenge)
            .ok_or_else(|| {
                SourceError::new(
                    FaultKind::Auth,
                    format!("{shown}: the registry answered 401 without a challenge this client can answer (Bearer or Basic)"),
                )
                .with_hint(AUTH_HINT)
            })?;
        let authorization = self.authorize(registry, repo, &challenge, &method).await?;
        let response = self
            .follow(method, url, &extra, Some(&authorization), body)
            .await?;
        // Any answer but a refusal says the authorization works (a blob the
        // registry lacks is a 404 to a push's HEAD).
        if !matches!(
            response.status(),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
        ) {
            self.tokens
                .lock()
                .expect("token cache")
                .insert(key, authorization);
        }
        Ok(response)
    }

    /// The Authorization answering `challenge`: Basic with the registry's
    /// credential, or a token from the realm (anonymous, basic, or a refresh token).
    async fn authorize(
        &self,
        registry: &str,
        repo: &str,
        challenge: &Challenge,
        method: &Method,
    ) -> Result<HeaderValue, SourceError> {
        let credential = self.auth.as_ref().and_then(|f| f.lookup(registry));
        let shown = format!("oci://{registry}/{repo}");
        match challenge {
            Challenge::Basic => match credential {
                Some(Credential::Basic { username, password }) => Ok(basic(username, password)),
                _ => Err(SourceError::new(
                    FaultKind::Auth,
                    format!(
                        "{shown}: the registry asks for a user and password; {}",
                        self.auth_source(registry)
                    ),
                )
                .with_hint(AUTH_HINT)),
            },
            Challenge::Bearer {
                realm,
                service,
                scope,
            } => {
                // A registry that names no scope gets the one the request needs.
                let actions = if matches!(*method, Method::GET | Method::HEAD) {
                    "pull"
                } else {
                    "pull,push"
                };
                let scope = scope
                    .clone()
                    .unwrap_or_else(|| format!("repository:{repo}:{actions}"));
                self.token(&shown, realm, service.as_deref(), &scope, credential)
                    .await
            }
        }
    }

    /// Asks the token realm for a pull token.
    async fn token(
        &self,
        shown: &str,
        realm: &str,
        service: Option<&str>,
        scope: &str,
        credential: Option<&Credential>,
    ) -> Result<HeaderValue, SourceError> {
        let mut url = Url::parse(realm).map_err(|_| {
            SourceError::new(
                FaultKind::Refused,
                format!("{shown}: the registry's token realm '{realm}' is not a URL"),
            )
        })?;
        if url.scheme() != "https" && credential.is_some() {
            let host = match url.port() {
                Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
                None => url.host_str().unwrap_or_default().to_owned(),
            };
            if !self.is_insecure(&host) {
                return Err(SourceError::new(
                    FaultKind::Auth,
                    format!(
                        "{shown}: the registry's token realm {} is plain HTTP; credentials are not sent there unless its host is named with --insecure-registry {host}",
                        redact_url(realm)
                    ),
                ));
            }
        }
        let request = match credential {
            Some(Credential::Identity { token }) => {
                let mut form = vec![
                    ("grant_type", "refresh_token"),
                    ("refresh_token", token.as_str()),
                    ("client_id", "spark-localizer"),
                    ("scope", scope),
                ];
                if let Some(service) = service {
                    form.push(("service", service));
                }
                let body = url::form_urlencoded::Serializer::new(String::new())
                    .extend_pairs(form)
                    .finish();
                self.client
                    .post(url)
                    .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                    .body(body)
            }
            other => {
                {
                    let mut query = url.query_pairs_mut();
                    if let Some(service) = service {
                        query.append_pair("service", service);
                    }
                    query.append_pair("scope", scope);
                }
                let request = self.client.get(url);
                match other {
                    Some(Credential::Basic { username, password }) => {
                        request.header(header::AUTHORIZATION, basic(username, password))
                    }
                    _ => request,
                }
            }
        };
        let request = request
            .build()
            .map_err(|e| transport_error(&redact_url(realm), e))?;
        let answer = crate::net::trail::execute(&self.client, request);
        let response = tokio::time::timeout(self.stall, answer)
            .await
            .map_err(|_| self.stalled(realm))?
            .map_err(|e| transport_error(&redact_url(realm), e))?;
        if !response.status().is_success() {
            let realm = redact_url(realm);
            return Err(status_error(
                &format!("{shown}: token realm {realm}"),
                "token",
                &response,
                self.auth_file(),
            ));
        }
        #[derive(serde::Deserialize)]
        struct TokenAnswer {
            token: Option<String>,
            access_token: Option<String>,
        }
        let body = tokio::time::timeout(self.stall, response.bytes())
            .await
            .map_err(|_| self.stalled(realm))?
            .map_err(|e| transport_error(&redact_url(realm), e))?;
        let answer: TokenAnswer = serde_json::from_slice(&body).map_err(|_| {
            SourceError::new(
                FaultKind::Refused,
                format!("{shown}: the token realm answered something other than a token"),
            )
        })?;
        let token = answer
            .token
            .or(answer.access_token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                SourceError::new(
                    FaultKind::Refused,
                    format!("{shown}: the token realm answered no token"),
                )
            })?;
        register_secret(&token);
        let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            SourceError::new(
                FaultKind::Refused,
                format!("{shown}: the token realm answered an unusable token"),
            )
        })?;
        value.set_sensitive(true);
        Ok(value)
    }

    /// Sends and follows redirects; `authorization` goes only to the first
    /// URL's host and port (a blob redirect to object storage gets none).
    async fn follow(
        &self,
        method: Method,
        start: &Url,
        extra: &HeaderMap,
        authorization: Option<&HeaderValue>,
        body: Option<&Body<'_>>,
    ) -> Result<Response, SourceError> {
        let mut current = start.clone();
        for _ in 0..=MAX_REDIRECTS {
            let mut request = self
                .client
                .request(method.clone(), current.clone())
                .headers(extra.clone());
            let watch = crate::net::upload::Watch::new();
            if let Some(body) = body {
                request = request.body(watch.body(body()));
            }
            let same_host = current.host_str() == start.host_str()
                && current.port_or_known_default() == start.port_or_known_default();
            if let Some(value) = authorization.filter(|_| same_host) {
                request = request.header(header::AUTHORIZATION, value.clone());
            }
            let request = request
                .build()
                .map_err(|e| transport_error(start.as_str(), e))?;
            let answer = crate::net::trail::execute(&self.client, request);
            // `--stall-timeout` from when the request last moved: sent, or a
            // chunk of its body taken.
            let answer = watch
                .answer(self.stall, answer)
                .await
                .ok_or_else(|| self.stalled(current.as_str()))?;
            let response = answer.map_err(|e| transport_error(&redact_url(current.as_str()), e))?;
            if !response.status().is_redirection() || response.status() == StatusCode::NOT_MODIFIED
            {
                return Ok(response);
            }
            let next = response
                .headers()
                .get(header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .and_then(|l| current.join(l).ok())
                .filter(|u| matches!(u.scheme(), "http" | "https"))
                .ok_or_else(|| {
                    SourceError::new(
                        FaultKind::Refused,
                        format!(
                            "{} answered {} without a usable http(s) Location",
                            redact_url(current.as_str()),
                            response.status()
                        ),
                    )
                })?;
            tracing::debug!(
                "{} redirects to {}",
                redact_url(current.as_str()),
                redact_url(next.as_str())
            );
            current = next;
        }
        Err(SourceError::new(
            FaultKind::Refused,
            format!(
                "{}: more than {MAX_REDIRECTS} redirects",
                redact_url(start.as_str())
            ),
        ))
    }
}

/// Where a registry's API is: Docker Hub's names lead to `registry-1.docker.io`,
/// as container runtimes map them; every other registry is its own host.
fn api_host(registry: &str) -> &str {
    match registry {
        "docker.io" | "index.docker.io" => "registry-1.docker.io",
        other => other,
    }
}

fn basic(username: &str, password: &str) -> HeaderValue {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
    register_secret(&token);
    let mut value = HeaderValue::from_str(&format!("Basic {token}")).expect("base64 is ascii");
    value.set_sensitive(true);
    value
}

fn malformed(r: &Reference, why: &str) -> SourceError {
    SourceError::new(FaultKind::Refused, format!("oci://{}: {why}", r.name()))
}

/// Maps a registry's final status to a fault with a hint.
pub(crate) fn status_error(
    shown: &str,
    what: &str,
    response: &Response,
    auth: Option<&AuthFile>,
) -> SourceError {
    let status = response.status();
    let message = format!("{shown}: HTTP {status}");
    match status.as_u16() {
        404 => SourceError::new(FaultKind::NotFound, format!("{message}: no such {what}"))
            .with_hint(
            "check the repository, tag or digest (`oras repo tags REGISTRY/REPO` lists the tags)",
        ),
        401 | 403 => {
            let message = match auth {
                Some(file) => format!(
                    "{message}: the registry refused the credentials from {} ({})",
                    file.path.display(),
                    file.origin
                ),
                None => format!("{message}: the registry refused anonymous access"),
            };
            SourceError::new(FaultKind::Auth, message).with_hint(AUTH_HINT)
        }
        408 | 429 | 500..=599 => {
            let mut error = SourceError::new(FaultKind::Transient, message);
            error.retry_after = response
                .headers()
                .get(header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse().ok())
                .map(Duration::from_secs);
            error
        }
        // What a TLS port answers a plain-HTTP request.
        400 if response.url().scheme() == "http" => SourceError::new(FaultKind::Refused, message)
            .with_hint("is the registry served over TLS? --insecure-registry speaks plain HTTP to it: leave its host out (and give --ca-cert for a private CA)"),
        _ => SourceError::new(FaultKind::Refused, message),
    }
}

/// Classifies a transport failure as the HTTP source does; a registry answering
/// plain HTTP gets the `--insecure-registry` hint.
pub(crate) fn transport_error(shown: &str, err: reqwest::Error) -> SourceError {
    let err = err.without_url();
    let kind = if crate::net::has_tls_cause(&err) {
        FaultKind::Tls
    } else if err.is_builder() || err.is_redirect() {
        FaultKind::Refused
    } else {
        FaultKind::Transient
    };
    let hint = if crate::net::is_plain_http_answer(&err) {
        Some("the registry answers in plain HTTP, not TLS: name it with --insecure-registry HOST:PORT")
    } else {
        crate::net::transport_hint(&err, err.is_connect())
    };
    let error = SourceError::new(kind, shown.to_owned()).with_source(err);
    match hint {
        Some(hint) => error.with_hint(hint),
        None => error,
    }
}

#[cfg(test)]
mod tests {
    use super::api_host;

    #[test]
    fn docker_hub_names_lead_to_its_api_host() {
        assert_eq!(api_host("docker.io"), "registry-1.docker.io");
        assert_eq!(api_host("index.docker.io"), "registry-1.docker.io");
        assert_eq!(api_host("ghcr.io"), "ghcr.io");
        assert_eq!(api_host("127.0.0.1:5000"), "127.0.0.1:5000");
    }
}
