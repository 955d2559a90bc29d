//! `stage upload`: the staging server's client. Bundles local files into one flat
//! tar.gz, streams it to `POST /api/v0/resources` as the v0 clients do (multipart
//! parts [`api::PART_RESOURCES`] and [`api::PART_OWNER`]), and returns what to print:
//! the resource id and secret as JSON, or as a Kubernetes Secret manifest in the
//! layout the apache-spark-on-k8s init container reads ([`api::SECRET_MOUNT_PATH`]).
//!
//! Every argument is checked before any network traffic ([`plan`]); the bundle is
//! never held whole ([`bundle`]). After the upload a `HEAD` with the secret compares
//! the server's sha256 of what it stored with the sha256 of what was sent.

use std::io;
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::StatusCode;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};
use url::Url;

use self::bundle::{write_bundle, Bundled, CHANNEL_CHUNKS};
use self::plan::{BundlePlan, Plan};
use super::api::{self, ErrorBody, ResourceOwner, SubmittedResource};
use crate::cli::{StageKind, UploadArgs};
use crate::net::{HttpConfig, HttpSetupError};
use crate::util::duration::format_duration;
use crate::util::redact::{error_chain, register_secret};

mod bundle;
mod plan;
mod report;
pub(crate) mod token;
mod watch;

use self::watch::{watched, Progress};

/// Why `stage upload` failed; [`UploadError::kind`] says what sort of failure.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UploadError {
    /// A flag or file that cannot work, found before any traffic.
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    HttpSetup(#[from] HttpSetupError),
    #[error("cannot upload to the staging server {server}")]
    Unreachable {
        server: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("the staging server {server} {what} for {} (--stall-timeout); check that it is a staging server and not overloaded, or raise --stall-timeout", format_duration(*after))]
    Stalled {
        server: String,
        /// What it did not do: "took no data and sent no answer".
        what: &'static str,
        after: Duration,
    },
    #[error("the staging server {server} refused the upload: {status}: {detail}")]
    Refused {
        server: String,
        status: StatusCode,
        detail: String,
    },
    #[error("the staging server {server} answered {status} without a resource id and secret ({reason}); is it a staging server?")]
    NotStaging {
        server: String,
        status: StatusCode,
        reason: serde_json::Error,
    },
    #[error("the staging server {server} answered an unusable resource id {id:?}")]
    UnusableId { server: String, id: String },
    #[error("the staging server answered a secret that is not a valid header value")]
    UnusableSecret,
    #[error("the staging server {server} stored a bundle with sha256 {stored}, but {sent} was sent; the upload was deleted")]
    Mismatch {
        server: String,
        stored: String,
        sent: String,
    },
    /// A local file could not be read while bundling (the message names it).
    #[error(transparent)]
    Bundling(io::Error),
    #[error("the bundling thread")]
    BundlingThread(#[source] tokio::task::JoinError),
    #[error("cannot encode the owner")]
    EncodeOwner(#[source] serde_json::Error),
    #[error("bad MIME type")]
    Mime(#[source] reqwest::Error),
    #[error("cannot print")]
    Print(#[source] serde_json::Error),
}

/// What kind of failure an [`UploadError`] is, for the command layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UploadErrorKind {
    /// Flags, environment or files; nothing was sent.
    Usage,
    /// The server is unreachable, refused, or answered something unusable.
    Server,
    /// The server stored something other than what was sent.
    Integrity,
    /// A local file could not be read.
    LocalIo,
    /// A bug.
    Internal,
}

impl UploadError {
    /// What to do about it, where there is something to say (the same hints as
    /// `fetch` for TLS and proxies).
    pub(crate) fn hint(&self) -> Option<&'static str> {
        match self {
            UploadError::Unreachable { source, .. } => {
                crate::net::transport_hint(source, source.is_connect())
            }
            UploadError::Refused { status, .. } if status.as_u16() == 401 => Some(
                "the server asks for an upload token: give --token-file FILE (a token its --upload-token-file lists), or use a kubeconfig whose user the cluster accepts (--upload-auth kubernetes)",
            ),
            UploadError::Refused { status, .. } if status.as_u16() == 403 => Some(
                "upload for a namespace (--namespace) in which your Kubernetes user may create pods",
            ),
            UploadError::Refused { status, .. } if matches!(status.as_u16(), 429 | 507) => Some(
                "the server's store is at a quota: try again when bundles expire, or ask its operators to raise the quota",
            ),
            _ => None,
        }
    }

    /// What sort of failure this is.
    pub(crate) fn kind(&self) -> UploadErrorKind {
        match self {
            UploadError::Usage(_) | UploadError::HttpSetup(_) => UploadErrorKind::Usage,
            UploadError::Unreachable { .. }
            | UploadError::Stalled { .. }
            | UploadError::Refused { .. }
            | UploadError::NotStaging { .. }
            | UploadError::UnusableId { .. }
            | UploadError::UnusableSecret => UploadErrorKind::Server,
            UploadError::Mismatch { .. } => UploadErrorKind::Integrity,
            UploadError::Bundling(_) => UploadErrorKind::LocalIo,
            UploadError::BundlingThread(_)
            | UploadError::EncodeOwner(_)
            | UploadError::Mime(_)
            | UploadError::Print(_) => UploadErrorKind::Internal,
        }
    }
}

/// One bundle as uploaded.
struct Uploaded {
    kind: StageKind,
    submitted: SubmittedResource,
    bundled: Bundled,
    names: Vec<String>,
}

/// Runs `stage upload`: checks, uploads every bundle (deleting those already
/// uploaded when a later one fails) and returns the text to print on stdout.
pub(crate) async fn run(args: &UploadArgs) -> Result<String, UploadError> {
    let mut plan = plan::plan(args)?;
    let mut token = token::from_file(args.token_file.as_deref()).map_err(UploadError::Usage)?;
    // The kubeconfig's token (a cluster credential) goes only to a server that asks.
    if token.is_none() && asks_for_token(&plan).await? {
        token = token::from_kubeconfig_for(args.kubeconfig.as_deref(), args.context.as_deref())
            .await
            .map_err(UploadError::Usage)?;
    } else if token.is_none()
        && token::kubeconfig_named(args.kubeconfig.as_deref(), args.context.as_deref())
    {
        debug!("the staging server does not ask for an upload token: the kubeconfig is not used");
    }
    if let Some(token) = token {
        if plan.base.scheme() == "http" && token.from.starts_with("kubeconfig") {
            warn!(
                "sending the Kubernetes token of {} over plain http to {}: use https",
                token.from, plan.server
            );
        }
        info!("uploading with the bearer token of {}", token.from);
        plan.token = Some(token.value);
    }
    let mut uploaded = Vec::new();
    for bundle in &plan.bundles {
        match upload_one(&plan, bundle).await {
            Ok(done) => uploaded.push(done),
            Err(e) => {
                // The first bundle is of no use without the second: do not leave it behind.
                for earlier in &uploaded {
                    discard(&plan, earlier).await;
                }
                return Err(e);
            }
        }
    }
    match &args.secret_manifest {
        Some(name) => Ok(report::secret_manifest(
            name,
            args.namespace.as_deref(),
            &plan.server,
            &uploaded,
        )),
        None => report::json_lines(&plan.server, &uploaded),
    }
}

/// Whether the server wants an upload token: it answers an empty upload without
/// one with 401 (it authenticates before reading a body); anything else, or a
/// failed connection, is no. No answer within `--stall-timeout` is an error.
async fn asks_for_token(plan: &Plan) -> Result<bool, UploadError> {
    let Ok(client) = client(plan) else {
        return Ok(false);
    };
    let probe = client
        .post(api::resources_url(&plan.base))
        .header(
            reqwest::header::CONTENT_TYPE,
            "multipart/form-data; boundary=spark-localizer-probe",
        )
        .header(reqwest::header::CONTENT_LENGTH, 0)
        .body(Vec::new())
        .send();
    match tokio::time::timeout(plan.stall_timeout, probe).await {
        Ok(probe) => Ok(matches!(probe, Ok(answer) if answer.status() == StatusCode::UNAUTHORIZED)),
        Err(_) => Err(stalled(plan, "sent no answer to a request")),
    }
}

/// The server did not answer (or take data) within `--stall-timeout`.
fn stalled(plan: &Plan, what: &'static str) -> UploadError {
    UploadError::Stalled {
        server: plan.server.clone(),
        what,
        after: plan.stall_timeout,
    }
}

/// Deletes an uploaded bundle (best effort).
async fn discard(plan: &Plan, bundle: &Uploaded) {
    let Ok(client) = client(plan) else { return };
    let url = api::resource_url(&plan.base, &bundle.submitted.resource_id);
    let Ok(secret) = api::secret_header(&bundle.submitted.resource_secret) else {
        return;
    };
    let request = client.delete(url).header(api::HEADER_SECRET, secret).send();
    match tokio::time::timeout(plan.stall_timeout, request).await {
        Ok(Ok(r)) if r.status().is_success() => info!(
            "deleted the {} bundle {} uploaded before the failure",
            bundle.kind.name(),
            bundle.submitted.resource_id
        ),
        _ => warn!(
            "could not delete the {} bundle {} uploaded before the failure; it expires unused",
            bundle.kind.name(),
            bundle.submitted.resource_id
        ),
    }
}

fn client(plan: &Plan) -> Result<reqwest::Client, UploadError> {
    Ok(crate::net::client(&HttpConfig {
        ca_files: plan.ca_files.clone(),
        connect_timeout: plan.connect_timeout,
        pool_size: 1,
        headers: Vec::new(),
    })?)
}

async fn upload_one(plan: &Plan, bundle: &BundlePlan) -> Result<Uploaded, UploadError> {
    let client = client(plan)?;
    info!(
        "uploading {} file(s), {} bytes, as one tar.gz bundle of {} to {}",
        bundle.members.len(),
        bundle.bytes,
        bundle.kind.name(),
        plan.server
    );
    let started = Instant::now();
    let (submitted, bundled) = send(&client, plan, bundle).await?;
    let secs = started.elapsed().as_secs_f64();
    info!(
        "uploaded resource {}: bundle of {} bytes (sha256 {}) in {secs:.2}s, {:.1} MiB/s",
        submitted.resource_id,
        bundled.bytes,
        bundled.sha256,
        bundle.bytes as f64 / (1024.0 * 1024.0) / secs.max(0.001)
    );
    verify(&client, plan, &submitted, &bundled).await?;
    Ok(Uploaded {
        kind: bundle.kind,
        submitted,
        bundled,
        names: bundle.members.iter().map(|m| m.name.clone()).collect(),
    })
}

/// The server's answer to the POST: its status and body (the body may fail to arrive).
type Answer = (StatusCode, Result<Bytes, reqwest::Error>);

/// Streams the bundle to the server; returns its answer and what was sent.
async fn send(
    client: &reqwest::Client,
    plan: &Plan,
    bundle: &BundlePlan,
) -> Result<(SubmittedResource, Bundled), UploadError> {
    let (tx, rx) = mpsc::channel::<io::Result<Bytes>>(CHANNEL_CHUNKS);
    let members = bundle.members.clone();
    let producer = tokio::task::spawn_blocking(move || write_bundle(&members, tx));
    let progress = Progress::new();
    let form = upload_form(&plan.owner, rx, progress.clone())?;
    let answer = watched(
        post(
            client,
            api::resources_url(&plan.base),
            form,
            plan.token.as_deref(),
        ),
        &progress,
        plan.stall_timeout,
    )
    .await;
    let Some(answer) = answer else {
        // Not waited for: the connection's task may hold the body (and so keep the
        // producer blocked on a full channel) until the connection is dropped.
        drop(producer);
        return Err(stalled(plan, "took no data and sent no answer"));
    };
    // The request (and with it the channel's receiver) is gone: the producer ends.
    let produced = producer.await.map_err(UploadError::BundlingThread)?;
    let unreachable = |source| UploadError::Unreachable {
        server: plan.server.clone(),
        source,
    };
    let (status, body) = match answer {
        Ok(answer) => answer,
        Err(e) => return Err(local_or(produced, unreachable(e))),
    };
    let body = match body {
        Ok(body) => body,
        Err(e) if status.is_success() => return Err(unreachable(e)),
        Err(_) => Bytes::new(),
    };
    if !status.is_success() {
        let refused = UploadError::Refused {
            server: plan.server.clone(),
            status,
            detail: refusal_detail(&body),
        };
        return Err(local_or(produced, refused));
    }
    let submitted = submitted_resource(plan, status, &body)?;
    register_secret(&submitted.resource_secret);
    let bundled = produced.map_err(UploadError::Bundling)?;
    check_answered_id(plan, &submitted)?;
    Ok((submitted, bundled))
}

/// The multipart body: the owner JSON, then the bundle streamed from `chunks`
/// (each request for a chunk, and each chunk taken, is `progress`).
fn upload_form(
    owner: &ResourceOwner,
    chunks: mpsc::Receiver<io::Result<Bytes>>,
    progress: Progress,
) -> Result<reqwest::multipart::Form, UploadError> {
    use reqwest::multipart::{Form, Part};
    let stream = futures_util::stream::unfold((chunks, progress), |(mut rx, p)| async move {
        p.moved(0);
        match rx.recv().await {
            Some(item) => {
                p.moved(item.as_ref().map_or(0, Bytes::len));
                Some((item, (rx, p)))
            }
            None => {
                p.body_done();
                None
            }
        }
    });
    let owner = serde_json::to_string(owner).map_err(UploadError::EncodeOwner)?;
    let bundle = Part::stream(reqwest::Body::wrap_stream(stream))
        .file_name(api::BUNDLE_FILE_NAME)
        .mime_str("application/octet-stream")
        .map_err(UploadError::Mime)?;
    let owner = Part::text(owner)
        .mime_str("application/json")
        .map_err(UploadError::Mime)?;
    // The owner first: a server that checks who may upload for its namespace
    // refuses before the bundle is sent.
    Ok(Form::new()
        .part(api::PART_OWNER, owner)
        .part(api::PART_RESOURCES, bundle))
}

/// Sends the upload and reads the answer's body.
async fn post(
    client: &reqwest::Client,
    url: Url,
    form: reqwest::multipart::Form,
    token: Option<&str>,
) -> Result<Answer, reqwest::Error> {
    let mut request = client.post(url).multipart(form);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await?;
    let status = response.status();
    Ok((status, response.bytes().await))
}

/// A local read failure explains a broken or refused request better than the
/// request's own error; it wins unless it is only the request ending first.
fn local_or(produced: io::Result<Bundled>, otherwise: UploadError) -> UploadError {
    match produced {
        Err(local) if local.kind() != io::ErrorKind::BrokenPipe => UploadError::Bundling(local),
        _ => otherwise,
    }
}

/// What a refusal says: its [`ErrorBody`], else the start of its text.
fn refusal_detail(body: &[u8]) -> String {
    if let Ok(ErrorBody { error }) = serde_json::from_slice::<ErrorBody>(body) {
        return error;
    }
    let text = String::from_utf8_lossy(body);
    let text: String = text.trim().chars().take(300).collect();
    if text.is_empty() {
        "(no message)".to_owned()
    } else {
        text
    }
}

/// The [`SubmittedResource`] of a successful answer.
fn submitted_resource(
    plan: &Plan,
    status: StatusCode,
    body: &[u8],
) -> Result<SubmittedResource, UploadError> {
    serde_json::from_slice(body).map_err(|reason| UploadError::NotStaging {
        server: plan.server.clone(),
        status,
        reason,
    })
}

/// The id must be one the fetch side accepts: ours, or the original server's (any
/// URL-safe path segment).
fn check_answered_id(plan: &Plan, submitted: &SubmittedResource) -> Result<(), UploadError> {
    let id = &submitted.resource_id;
    if api::check_id(id).is_ok() {
        return Ok(());
    }
    Err(UploadError::UnusableId {
        server: plan.server.clone(),
        id: id.clone(),
    })
}

/// After the upload: the server's sha256 of what it stored must be the sha256 of what
/// was sent. A server that does not say (the original one) is taken at its word.
async fn verify(
    client: &reqwest::Client,
    plan: &Plan,
    submitted: &SubmittedResource,
    bundled: &Bundled,
) -> Result<(), UploadError> {
    let url = api::resource_url(&plan.base, &submitted.resource_id);
    let secret =
        api::secret_header(&submitted.resource_secret).map_err(|_| UploadError::UnusableSecret)?;
    let head = client
        .head(url.clone())
        .header(api::HEADER_SECRET, secret.clone())
        .send();
    let response = match tokio::time::timeout(plan.stall_timeout, head).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            warn!(
                "cannot check the stored bundle's sha256: {}",
                error_chain(&e)
            );
            return Ok(());
        }
        Err(_) => {
            warn!(
                "cannot check the stored bundle's sha256: no answer within {} (--stall-timeout)",
                format_duration(plan.stall_timeout)
            );
            return Ok(());
        }
    };
    match api::announced_sha256(response.headers()) {
        Some(stored) if stored != bundled.sha256 => {
            // Best effort: nobody should fetch a bundle that is not what was sent.
            let delete = client.delete(url).header(api::HEADER_SECRET, secret).send();
            let _ = tokio::time::timeout(plan.stall_timeout, delete).await;
            Err(UploadError::Mismatch {
                server: plan.server.clone(),
                stored,
                sent: bundled.sha256.clone(),
            })
        }
        stored @ Some(_) => {
            debug!("the server stored the bundle byte-exact (sha256 {stored:?})");
            Ok(())
        }
        None => {
            debug!(
                "HEAD answered {} without {}; the stored bundle is not checked",
                response.status(),
                api::HEADER_SHA256
            );
            Ok(())
        }
    }
}
