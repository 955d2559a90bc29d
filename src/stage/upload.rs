//! `stage upload`: the staging server's client. Bundles local files into one flat
//! tar.gz, streams it to `POST /api/v0/resources` as the v0 clients do (multipart
//! parts [`api::PART_RESOURCES`] and [`api::PART_OWNER`]), and prints the resource id
//! and secret as JSON, or as a Kubernetes Secret manifest in the layout the
//! apache-spark-on-k8s init container reads (`/mnt/secrets/spark-init`).
//!
//! The bundle is never held whole: a blocking thread writes tar + gzip into a bounded
//! channel that is the request body, hashing as it goes. Every argument is checked
//! before any network traffic (exit 2). After the upload a `HEAD` with the secret
//! compares the server's sha256 of what it stored with the sha256 of what was sent.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use reqwest::header::{HeaderValue, AUTHORIZATION};
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tracing::{debug, error, info, warn};
use url::Url;

use super::api::{
    self, ErrorBody, ResourceOwner, SubmittedResource, BUNDLE_FILE_NAME, FILES_SECRET_KEY,
    JARS_SECRET_KEY, SECRET_MOUNT_PATH,
};
use super::names::{check_dns_label, check_dns_subdomain, check_label_key, is_label_value};
use crate::cli::{StageKind, UploadArgs};
use crate::cmd::exit::ExitCode;
use crate::env_vars as env;
use crate::net::{CaFile, HttpConfig};
use crate::source::http::HttpSource;
use crate::util::redact::{error_chain, register_secret, scrub};

/// The namespace of the owner when `--namespace` is not given.
pub(crate) const DEFAULT_NAMESPACE: &str = "default";

/// Time allowed to open a TCP/TLS connection to the server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes per body chunk handed to the HTTP client.
const CHUNK: usize = 64 * 1024;
/// Chunks buffered between the bundling thread and the HTTP client.
const CHANNEL_CHUNKS: usize = 8;

/// How a run ended badly: the exit code and what to tell the user.
#[derive(Debug)]
struct Failure {
    code: ExitCode,
    message: String,
}

impl Failure {
    fn new(code: ExitCode, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    fn usage(message: impl Into<String>) -> Failure {
        Failure::new(ExitCode::Config, message)
    }
}

/// One file of the bundle: where it is read from and its entry name.
#[derive(Debug, Clone)]
struct Member {
    path: PathBuf,
    name: String,
}

/// Everything checked before the first byte goes out.
#[derive(Debug)]
struct Plan {
    /// The server's base URL as given, without a trailing `/`.
    server: String,
    upload_url: Url,
    owner: ResourceOwner,
    /// One bundle, or two (jars, then files) with `--jars` and `--files`.
    bundles: Vec<BundlePlan>,
    ca_files: Vec<CaFile>,
}

/// The files of one bundle.
#[derive(Debug)]
struct BundlePlan {
    kind: StageKind,
    members: Vec<Member>,
    bytes: u64,
}

/// One bundle as uploaded.
struct Uploaded {
    kind: StageKind,
    submitted: SubmittedResource,
    bundled: Bundled,
    names: Vec<String>,
}

impl StageKind {
    fn name(self) -> &'static str {
        match self {
            StageKind::Jars => "jars",
            StageKind::Files => "files",
        }
    }
}

/// What the bundling thread produced.
struct Bundled {
    sha256: String,
    bytes: u64,
}

/// The JSON printed on stdout (field order as documented).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Printed<'a> {
    resource_id: &'a str,
    resource_secret: &'a str,
    server: &'a str,
    kind: &'a str,
    files: Vec<&'a str>,
    sha256: &'a str,
}

/// Runs `stage upload`; the exit code says how it went.
pub(crate) async fn run(args: &UploadArgs) -> ExitCode {
    match upload(args).await {
        Ok(text) => {
            let mut out = io::stdout().lock();
            if out
                .write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .is_err()
            {
                // The id and secret are lost; the bundle expires unused.
                return ExitCode::LocalIo;
            }
            ExitCode::Ok
        }
        Err(Failure { code, message }) => {
            error!("{message}");
            code
        }
    }
}

async fn upload(args: &UploadArgs) -> Result<String, Failure> {
    let plan = plan(args)?;
    let mut uploaded = Vec::new();
    for bundle in &plan.bundles {
        match upload_one(&plan, bundle).await {
            Ok(u) => uploaded.push(u),
            Err(e) => {
                // The first bundle is of no use without the second: do not leave it behind.
                for u in &uploaded {
                    discard(&plan, u).await;
                }
                return Err(e);
            }
        }
    }
    Ok(match &args.secret_manifest {
        Some(name) => secret_manifest(name, args.namespace.as_deref(), &plan.server, &uploaded),
        None => {
            let mut out = String::new();
            for u in &uploaded {
                let printed = Printed {
                    resource_id: &u.submitted.resource_id,
                    resource_secret: &u.submitted.resource_secret,
                    server: &plan.server,
                    kind: u.kind.name(),
                    files: u.names.iter().map(String::as_str).collect(),
                    sha256: &u.bundled.sha256,
                };
                let json = serde_json::to_string(&printed)
                    .map_err(|e| Failure::new(ExitCode::Internal, format!("cannot print: {e}")))?;
                out.push_str(&json);
                out.push('\n');
            }
            out
        }
    })
}

/// Deletes an uploaded bundle (best effort).
async fn discard(plan: &Plan, u: &Uploaded) {
    let Ok(client) = client(plan) else { return };
    let Some(url) = resource_url(plan, &u.submitted.resource_id) else {
        return;
    };
    let Ok(mut auth) = HeaderValue::from_str(&u.submitted.resource_secret) else {
        return;
    };
    auth.set_sensitive(true);
    match client.delete(url).header(AUTHORIZATION, auth).send().await {
        Ok(r) if r.status().is_success() => info!(
            "deleted the {} bundle {} uploaded before the failure",
            u.kind.name(),
            u.submitted.resource_id
        ),
        _ => warn!(
            "could not delete the {} bundle {} uploaded before the failure; it expires unused",
            u.kind.name(),
            u.submitted.resource_id
        ),
    }
}

fn client(plan: &Plan) -> Result<reqwest::Client, Failure> {
    let http = HttpSource::new(&HttpConfig {
        ca_files: plan.ca_files.clone(),
        connect_timeout: CONNECT_TIMEOUT,
        pool_size: 1,
        headers: Vec::new(),
    })
    .map_err(|e| Failure::usage(error_chain(&e)))?;
    Ok(http.client().clone())
}

/// `<server>/api/v0/resources/<id>`.
fn resource_url(plan: &Plan, id: &str) -> Option<Url> {
    let mut url = plan.upload_url.clone();
    url.path_segments_mut().ok()?.push(id);
    Some(url)
}

async fn upload_one(plan: &Plan, bundle: &BundlePlan) -> Result<Uploaded, Failure> {
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

// ---- checks before any traffic ----

fn plan(args: &UploadArgs) -> Result<Plan, Failure> {
    let (server, upload_url) = server_url(&args.server)?;
    let namespace = args.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE);
    check_dns_label(namespace).map_err(|why| {
        Failure::usage(format!(
            "--namespace {:?} {why}",
            namespace.escape_debug().to_string()
        ))
    })?;
    if let Some(name) = &args.secret_manifest {
        check_dns_subdomain(name).map_err(|why| {
            Failure::usage(format!(
                "--secret-manifest {:?} {why} (a Kubernetes object name)",
                name.escape_debug().to_string()
            ))
        })?;
    }
    let labels = labels(&args.labels)?;
    let mut ca_files: Vec<CaFile> = args
        .ca_cert
        .iter()
        .map(|path| CaFile {
            path: path.clone(),
            origin: format!("--ca-cert or {}", env::STAGE_CA_CERT),
        })
        .collect();
    if let Some(path) = std::env::var_os(env::SSL_CERT_FILE).filter(|p| !p.is_empty()) {
        ca_files.push(CaFile {
            path: PathBuf::from(path),
            origin: env::SSL_CERT_FILE.to_owned(),
        });
    }
    let lists: Vec<(StageKind, &[PathBuf])> =
        if args.jars.is_empty() && args.files_bundle.is_empty() {
            vec![(args.kind, &args.files)]
        } else {
            [
                (StageKind::Jars, &args.jars),
                (StageKind::Files, &args.files_bundle),
            ]
            .into_iter()
            .filter(|(_, list)| !list.is_empty())
            .map(|(kind, list)| (kind, list.as_slice()))
            .collect()
        };
    let mut bundles = Vec::new();
    for (kind, paths) in lists {
        let mut members = Vec::with_capacity(paths.len());
        let mut seen: HashMap<String, PathBuf> = HashMap::new();
        let mut bytes = 0u64;
        for path in paths {
            let (member, len) = member(path)?;
            if let Some(first) = seen.insert(member.name.clone(), path.clone()) {
                return Err(Failure::usage(format!(
                    "{} and {} both have the name {:?}; entries are flat, so names must be unique",
                    first.display(),
                    path.display(),
                    member.name
                )));
            }
            bytes += len;
            members.push(member);
        }
        bundles.push(BundlePlan {
            kind,
            members,
            bytes,
        });
    }
    Ok(Plan {
        server,
        upload_url,
        owner: ResourceOwner {
            namespace: namespace.to_owned(),
            labels,
            owner_type: api::OWNER_TYPE_POD.to_owned(),
        },
        bundles,
        ca_files,
    })
}

/// The base URL as shown (no trailing `/`) and the upload endpoint under it.
fn server_url(given: &str) -> Result<(String, Url), Failure> {
    let bad = |why: &str| Failure::usage(format!("--server {given:?}: {why}"));
    let url = Url::parse(given.trim()).map_err(|e| bad(&format!("not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad(
            "credentials in the URL are not supported (the server needs none for uploads)",
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("a query or fragment is not supported"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    let shown = given.trim().trim_end_matches('/').to_owned();
    let mut upload = url.clone();
    let base = url.path().trim_end_matches('/');
    upload.set_path(&format!("{base}{}", api::RESOURCES_PATH));
    Ok((shown, upload))
}

/// `--label KEY=VALUE` in Kubernetes label syntax; duplicates refused.
fn labels(given: &[String]) -> Result<BTreeMap<String, String>, Failure> {
    let mut labels = BTreeMap::new();
    for item in given {
        let bad = |why: &str| {
            Failure::usage(format!(
                "--label {:?}: {why}",
                item.escape_debug().to_string()
            ))
        };
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| bad("expected KEY=VALUE"))?;
        let (key, value) = (key.trim(), value.trim());
        check_label_key(key).map_err(|why| bad(&why))?;
        if !is_label_value(value) {
            return Err(bad(
                "the value must be at most 63 characters [A-Za-z0-9._-], starting and ending alphanumeric",
            ));
        }
        if labels
            .insert(key.to_owned(), value.to_owned())
            .is_some_and(|old| old != value)
        {
            return Err(bad("the key is given twice with different values"));
        }
    }
    Ok(labels)
}

/// Checks one FILES argument: a readable regular file whose name the archive rules
/// and the localizer accept. Returns it with its size.
fn member(path: &Path) -> Result<(Member, u64), Failure> {
    let bad = |why: &str| Failure::usage(format!("{}: {why}", path.display()));
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => bad("no such file"),
        _ => bad(&format!("cannot read: {e}")),
    })?;
    if meta.is_dir() {
        return Err(bad(
            "is a directory; stage upload takes regular files only (bundle a directory as a .tar.gz and upload that)",
        ));
    }
    if !meta.is_file() {
        return Err(bad("is not a regular file"));
    }
    let name = path
        .file_name()
        .ok_or_else(|| bad("has no file name"))?
        .to_str()
        .ok_or_else(|| bad("its name is not valid UTF-8"))?
        .to_owned();
    entry_name_ok(&name).map_err(|why| bad(&format!("its name {name:?} {why}")))?;
    crate::util::fs::open_regular(path).map_err(|e| bad(&format!("cannot open: {e}")))?;
    Ok((
        Member {
            path: path.to_owned(),
            name,
        },
        meta.len(),
    ))
}

/// The name rules of the localizer's destinations plus those of the archive
/// rules the server applies to entries (a Windows drive prefix).
fn entry_name_ok(name: &str) -> Result<(), &'static str> {
    crate::layout::check_name(name)?;
    let b = name.as_bytes();
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        return Err("looks like a Windows drive prefix, which the archive rules refuse");
    }
    Ok(())
}

// ---- the upload ----

/// Streams the bundle to the server; returns its answer and what was sent.
async fn send(
    client: &reqwest::Client,
    plan: &Plan,
    bundle: &BundlePlan,
) -> Result<(SubmittedResource, Bundled), Failure> {
    let (tx, rx) = mpsc::channel::<io::Result<Bytes>>(CHANNEL_CHUNKS);
    let members = bundle.members.clone();
    let producer = tokio::task::spawn_blocking(move || write_bundle(&members, tx));
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    let owner = serde_json::to_string(&plan.owner)
        .map_err(|e| Failure::new(ExitCode::Internal, format!("cannot encode the owner: {e}")))?;
    let mime = |part: reqwest::multipart::Part, mime: &str| {
        part.mime_str(mime)
            .map_err(|e| Failure::new(ExitCode::Internal, format!("bad MIME type: {e}")))
    };
    let form = reqwest::multipart::Form::new()
        .part(
            api::PART_RESOURCES,
            mime(
                reqwest::multipart::Part::stream(reqwest::Body::wrap_stream(stream))
                    .file_name(BUNDLE_FILE_NAME),
                "application/octet-stream",
            )?,
        )
        .part(
            api::PART_OWNER,
            mime(reqwest::multipart::Part::text(owner), "application/json")?,
        );
    let sent = client
        .post(plan.upload_url.clone())
        .multipart(form)
        .send()
        .await;
    let answer = match sent {
        Ok(response) => {
            let status = response.status();
            let body = response.bytes().await;
            Ok((status, body))
        }
        Err(e) => Err(e),
    };
    // The request (and with it the channel's receiver) is gone: the producer ends.
    let produced = producer
        .await
        .map_err(|e| Failure::new(ExitCode::Internal, format!("the bundling thread: {e}")))?;
    let unreachable = |e: &reqwest::Error| {
        Failure::new(
            ExitCode::Fetch,
            format!(
                "cannot upload to the staging server {}: {}",
                plan.server,
                error_chain(e)
            ),
        )
    };
    let (status, body) = match answer {
        Ok(answer) => answer,
        Err(e) => {
            // A local read error explains a broken request better than the request error.
            if let Err(local) = produced {
                if local.kind() != io::ErrorKind::BrokenPipe {
                    return Err(local_failure(local));
                }
            }
            return Err(unreachable(&e));
        }
    };
    let body = match body {
        Ok(body) => body,
        Err(e) if status.is_success() => return Err(unreachable(&e)),
        Err(_) => Bytes::new(),
    };
    if !status.is_success() {
        if let Err(e) = produced {
            if e.kind() != io::ErrorKind::BrokenPipe {
                return Err(local_failure(e));
            }
        }
        let detail = match serde_json::from_slice::<ErrorBody>(&body) {
            Ok(ErrorBody { error }) => error,
            Err(_) => {
                let text = String::from_utf8_lossy(&body);
                let text: String = text.trim().chars().take(300).collect();
                if text.is_empty() {
                    "(no message)".to_owned()
                } else {
                    text
                }
            }
        };
        return Err(Failure::new(
            ExitCode::Fetch,
            format!(
                "the staging server {} refused the upload: {status}: {detail}",
                plan.server
            ),
        ));
    }
    let submitted: SubmittedResource = serde_json::from_slice(&body).map_err(|e| {
        Failure::new(
            ExitCode::Fetch,
            format!(
                "the staging server {} answered {status} without a resource id and secret ({e}); is it a staging server?",
                plan.server
            ),
        )
    })?;
    register_secret(&submitted.resource_secret);
    let bundled = produced.map_err(local_failure)?;
    if !api::is_resource_id(&submitted.resource_id) {
        // The original server's ids are not ours; accept anything path-safe.
        let safe = !submitted.resource_id.is_empty()
            && submitted
                .resource_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'));
        if !safe {
            return Err(Failure::new(
                ExitCode::Fetch,
                format!(
                    "the staging server {} answered an unusable resource id {:?}",
                    plan.server, submitted.resource_id
                ),
            ));
        }
    }
    Ok((submitted, bundled))
}

/// A local read failure while bundling.
fn local_failure(e: io::Error) -> Failure {
    Failure::new(ExitCode::LocalIo, scrub(&e.to_string()))
}

/// After the upload: the server's sha256 of what it stored must be the sha256 of what
/// was sent. A server that does not say (the original one) is taken at its word.
async fn verify(
    client: &reqwest::Client,
    plan: &Plan,
    submitted: &SubmittedResource,
    bundled: &Bundled,
) -> Result<(), Failure> {
    let mut url = plan.upload_url.clone();
    url.path_segments_mut()
        .map(|mut s| {
            s.push(&submitted.resource_id);
        })
        .map_err(|()| Failure::new(ExitCode::Internal, "the server URL cannot have a path"))?;
    let mut auth = HeaderValue::from_str(&submitted.resource_secret).map_err(|_| {
        Failure::new(
            ExitCode::Fetch,
            "the staging server answered a secret that is not a valid header value",
        )
    })?;
    auth.set_sensitive(true);
    let response = match client
        .head(url.clone())
        .header(AUTHORIZATION, auth.clone())
        .send()
        .await
    {
        Ok(r) => r,
        Err(e) => {
            warn!(
                "cannot check the stored bundle's sha256: {}",
                error_chain(&e)
            );
            return Ok(());
        }
    };
    let stored = api::announced_sha256(response.headers());
    match stored {
        Some(stored) if stored != bundled.sha256 => {
            // Best effort: nobody should fetch a bundle that is not what was sent.
            let _ = client.delete(url).header(AUTHORIZATION, auth).send().await;
            Err(Failure::new(
                ExitCode::Integrity,
                format!(
                    "the staging server {} stored a bundle with sha256 {stored}, but {} was sent; the upload was deleted",
                    plan.server, bundled.sha256
                ),
            ))
        }
        Some(_) => {
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

// ---- the bundle ----

/// Writes the tar.gz of `members` into `tx` in chunks; returns its sha256 and size.
/// A failure is also sent down the channel so the request is aborted, not finished.
fn write_bundle(members: &[Member], tx: mpsc::Sender<io::Result<Bytes>>) -> io::Result<Bundled> {
    let mut sink = ChannelWriter {
        tx,
        buf: Vec::with_capacity(CHUNK),
        hasher: Sha256::new(),
        bytes: 0,
    };
    let result = tar_gz(members, &mut sink);
    match result {
        Ok(()) => {
            sink.send_buf()?;
            Ok(Bundled {
                sha256: hex::encode(sink.hasher.finalize()),
                bytes: sink.bytes,
            })
        }
        Err(e) => {
            if e.kind() != io::ErrorKind::BrokenPipe {
                let _ = sink.tx.blocking_send(Err(io::Error::other(e.to_string())));
            }
            Err(e)
        }
    }
}

fn tar_gz(members: &[Member], sink: &mut ChannelWriter) -> io::Result<()> {
    let gz = flate2::write::GzEncoder::new(sink, flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    for member in members {
        append(&mut tar, member)?;
    }
    tar.into_inner()?.finish()?;
    Ok(())
}

/// Appends one regular file under its name; refuses a file that changes meanwhile.
fn append<W: Write>(tar: &mut tar::Builder<W>, member: &Member) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let context = |what: &str, e: io::Error| {
        io::Error::new(e.kind(), format!("{}: {what}: {e}", member.path.display()))
    };
    let file =
        crate::util::fs::open_regular(&member.path).map_err(|e| context("cannot open", e))?;
    let meta = file.metadata().map_err(|e| context("cannot stat", e))?;
    let len = meta.len();
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(len);
    let exec = meta.permissions().mode() & 0o111 != 0;
    header.set_mode(if exec { 0o755 } else { 0o644 });
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    header.set_mtime(mtime);
    header.set_uid(0);
    header.set_gid(0);
    let mut reader = Exact {
        inner: (&file).take(len),
        left: len,
        path: &member.path,
    };
    tar.append_data(&mut header, &member.name, &mut reader)
        .map_err(|e| context("cannot bundle", e))?;
    let after = file.metadata().map_err(|e| context("cannot stat", e))?;
    if after.len() != len || after.modified().ok() != meta.modified().ok() {
        return Err(io::Error::other(format!(
            "{}: changed while it was being uploaded; upload it again",
            member.path.display()
        )));
    }
    Ok(())
}

/// Reads exactly `left` bytes; a file that ends early is an error, not a short entry.
struct Exact<'a, R> {
    inner: R,
    left: u64,
    path: &'a Path,
}

impl<R: Read> Read for Exact<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        let n = self.inner.read(buf)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "{}: shrank while it was being uploaded; upload it again",
                    self.path.display()
                ),
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// Hands the bundle to the HTTP body in chunks, hashing and counting it.
struct ChannelWriter {
    tx: mpsc::Sender<io::Result<Bytes>>,
    buf: Vec<u8>,
    hasher: Sha256,
    bytes: u64,
}

impl ChannelWriter {
    fn send_buf(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        self.hasher.update(&chunk);
        self.bytes += chunk.len() as u64;
        self.tx.blocking_send(Ok(Bytes::from(chunk))).map_err(|_| {
            io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the upload request ended before the bundle was sent",
            )
        })
    }
}

impl Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = CHUNK - self.buf.len();
        let n = data.len().min(room);
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() >= CHUNK {
            self.send_buf()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

// ---- the Secret manifest ----

/// A Kubernetes Secret holding each resource secret under the key the init container
/// reads, then (as YAML comments) the properties and the mount that go with them.
fn secret_manifest(
    name: &str,
    namespace: Option<&str>,
    server: &str,
    uploaded: &[Uploaded],
) -> String {
    let key_of = |kind: StageKind| match kind {
        StageKind::Jars => (JARS_SECRET_KEY, "Jars"),
        StageKind::Files => (FILES_SECRET_KEY, "Files"),
    };
    // JSON strings are YAML double-quoted scalars.
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned());
    let one_line = |s: &str| s.replace(['\n', '\r'], " ");
    let mut y = String::new();
    y.push_str("apiVersion: v1\nkind: Secret\nmetadata:\n");
    y.push_str(&format!("  name: {name}\n"));
    if let Some(ns) = namespace {
        y.push_str(&format!("  namespace: {ns}\n"));
    }
    y.push_str("type: Opaque\nstringData:\n");
    for u in uploaded {
        let (key, _) = key_of(u.kind);
        y.push_str(&format!(
            "  {key}: {}\n",
            quoted(&u.submitted.resource_secret)
        ));
    }
    for u in uploaded {
        y.push_str(&format!(
            "# Staged on {} as resource {} ({}): {} file(s), bundle sha256 {}:\n",
            one_line(server),
            u.submitted.resource_id,
            u.kind.name(),
            u.names.len(),
            u.bundled.sha256
        ));
        for f in &u.names {
            y.push_str(&format!("#   {}\n", one_line(f)));
        }
    }
    y.push_str(&format!(
        "# Spark properties for the driver and executors (spark-submit --conf or the pod template):\n\
         #   spark.kubernetes.resourceStagingServer.uri={server}\n\
         #   spark.kubernetes.resourceStagingServer.internal.uri={server}   (if pods reach it at another URL, put that here)\n",
        server = one_line(server),
    ));
    for u in uploaded {
        let (key, which) = key_of(u.kind);
        y.push_str(&format!(
            "#   spark.kubernetes.initcontainer.download{which}ResourceIdentifier={id}\n\
             #   spark.kubernetes.initcontainer.download{which}SecretLocation={SECRET_MOUNT_PATH}/{key}\n",
            id = u.submitted.resource_id,
        ));
    }
    y.push_str(&format!(
        "# Mount this Secret in the init container at {SECRET_MOUNT_PATH}:\n\
         #   volumes:      [{{ name: spark-init-secret, secret: {{ secretName: {name} }} }}]\n\
         #   volumeMounts: [{{ name: spark-init-secret, mountPath: {SECRET_MOUNT_PATH}, readOnly: true }}]\n"
    ));
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("app.jar");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = crate::util::fs::open_regular(&fifo).unwrap_err();
        assert!(err.to_string().contains("regular file"), "{err}");
        let file = dir.path().join("lib.jar");
        std::fs::write(&file, b"jar").unwrap();
        let mut text = String::new();
        crate::util::fs::open_regular(&file)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "jar");
    }

    #[test]
    fn server_urls() {
        let (shown, url) = server_url("http://h:10000/").unwrap();
        assert_eq!(shown, "http://h:10000");
        assert_eq!(url.as_str(), "http://h:10000/api/v0/resources");
        let (_, url) = server_url("https://h/staging/").unwrap();
        assert_eq!(url.as_str(), "https://h/staging/api/v0/resources");
        for bad in [
            "ftp://h",
            "http://u:p@h",
            "http://h/?a=b",
            "h:10000",
            "not a url",
        ] {
            let e = server_url(bad).unwrap_err();
            assert_eq!(e.code, ExitCode::Config, "{bad}");
            assert!(e.message.contains("--server"), "{}", e.message);
        }
    }

    #[test]
    fn label_syntax() {
        let ok = labels(&["a=b".into(), "example.com/app=x-1".into(), "e=".into()]).unwrap();
        assert_eq!(ok.len(), 3);
        assert_eq!(ok["example.com/app"], "x-1");
        for bad in ["noequals", "=v", "a=b c", "a=-x", "Bad_Prefix/x=y", "k=v,"] {
            assert!(labels(&[bad.to_owned()]).is_err(), "{bad}");
        }
        assert!(labels(&["a=b".into(), "a=c".into()]).is_err());
        assert!(labels(&["a=b".into(), "a=b".into()]).is_ok());
    }

    #[test]
    fn entry_names() {
        assert!(entry_name_ok("app.jar").is_ok());
        assert!(entry_name_ok("ünï code ☃.properties").is_ok());
        assert!(entry_name_ok("c:evil").is_err());
        assert!(entry_name_ok(".spark-localizer-x").is_err());
        assert!(entry_name_ok("a\nb").is_err());
        assert!(entry_name_ok(&"x".repeat(201)).is_err());
    }

    #[test]
    fn manifest_layout() {
        let uploaded = |kind, id: &str, secret: &str, names: &[&str]| Uploaded {
            kind,
            submitted: SubmittedResource {
                resource_id: id.into(),
                resource_secret: secret.into(),
            },
            bundled: Bundled {
                sha256: "ab".repeat(32),
                bytes: 10,
            },
            names: names.iter().map(|n| n.to_string()).collect(),
        };
        let files = uploaded(
            StageKind::Files,
            "0123456789abcdef0123456789abcdef",
            "-s3cr3t_value",
            &["a.txt"],
        );
        let y = secret_manifest("app-init", Some("spark"), "https://stage:10000", &[files]);
        assert!(y.starts_with("apiVersion: v1\nkind: Secret\nmetadata:\n  name: app-init\n  namespace: spark\ntype: Opaque\nstringData:\n  downloadSubmittedFilesSecret: \"-s3cr3t_value\"\n"), "{y}");
        assert!(y.contains(
            "#   spark.kubernetes.initcontainer.downloadFilesResourceIdentifier=0123456789abcdef0123456789abcdef\n"
        ));
        assert!(y.contains("#   spark.kubernetes.resourceStagingServer.uri=https://stage:10000\n"));
        assert!(y.contains("/mnt/secrets/spark-init/downloadSubmittedFilesSecret"));
        let jars = uploaded(StageKind::Jars, "1".repeat(32).as_str(), "j", &[]);
        let files = uploaded(StageKind::Files, "2".repeat(32).as_str(), "f", &["x"]);
        let both = secret_manifest("x", None, "http://s", &[jars, files]);
        assert!(!both.contains("namespace:"));
        assert!(both.contains("stringData:\n  downloadSubmittedJarsSecret: \"j\"\n  downloadSubmittedFilesSecret: \"f\"\n"), "{both}");
        assert!(both.contains(&format!(
            "downloadJarsResourceIdentifier={}\n",
            "1".repeat(32)
        )));
        assert!(both.contains(&format!(
            "downloadFilesResourceIdentifier={}\n",
            "2".repeat(32)
        )));
        assert_eq!(both.matches("apiVersion").count(), 1);
    }

    #[test]
    fn bundle_streams_flat_entries() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.jar");
        std::fs::write(&a, vec![7u8; 200_000]).unwrap();
        let b = dir.path().join("ü.txt");
        std::fs::write(&b, b"hi").unwrap();
        let members = vec![
            Member {
                path: a,
                name: "a.jar".into(),
            },
            Member {
                path: b,
                name: "ü.txt".into(),
            },
        ];
        let (tx, mut rx) = mpsc::channel(CHANNEL_CHUNKS);
        let writer = std::thread::spawn(move || write_bundle(&members, tx));
        let mut all = Vec::new();
        while let Some(chunk) = rx.blocking_recv() {
            all.extend_from_slice(&chunk.unwrap());
        }
        let bundled = writer.join().unwrap().unwrap();
        assert_eq!(bundled.bytes, all.len() as u64);
        assert_eq!(bundled.sha256, hex::encode(Sha256::digest(&all)));
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&all[..]));
        let got: Vec<(String, usize)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let mut e = e.unwrap();
                let name = e.path().unwrap().to_string_lossy().into_owned();
                let mut data = Vec::new();
                e.read_to_end(&mut data).unwrap();
                (name, data.len())
            })
            .collect();
        assert_eq!(
            got,
            vec![("a.jar".to_owned(), 200_000), ("ü.txt".to_owned(), 2)]
        );
    }
}
