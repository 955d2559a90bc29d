//! Sources turn a URI (and an optional resume offset) into a stream of bytes.
//!
//! A source knows nothing of hashing, retries, progress, temp files or renames:
//! those live once, in the engine. Adding a source kind is one file here, one
//! `Scheme` variant and one arm in [`Sources::get`].

pub(crate) mod azure;
pub(crate) mod file;
pub(crate) mod gcs;
pub(crate) mod hdfs;
pub(crate) mod http;
pub(crate) mod mirror;
mod object;
pub(crate) mod oci;
pub(crate) mod s3;
pub(crate) mod staging;

use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::Stream;
use url::Url;

pub(crate) use crate::fault::{FaultKind, SourceError};

/// The URI schemes spark-localizer understands. Lookup is this enum and one `match`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Scheme {
    Http,
    Https,
    File,
    /// `s3://` and `s3a://` (Hadoop's spelling, which Spark users write).
    S3,
    /// `gs://` (Google Cloud Storage).
    Gcs,
    /// `abfss://`, `abfs://`, `wasbs://` and `wasb://` (Azure Blob Storage and ADLS Gen2).
    Azure,
    /// `hdfs://` and `viewfs://`.
    Hdfs,
    /// Already inside the image: never fetched, kept in the classpath in its place.
    Local,
    /// `staging://<resourceId>`: a bundle on the resource staging server (`--staging-uri`),
    /// fetched with the secret of its kind and unpacked flat into the jars or files dir.
    Staging,
    /// `oci://registry/repository[:tag|@digest][#file]`: layers of an OCI
    /// artifact, resolved to one artifact per layer before the plan.
    Oci,
}

impl Scheme {
    /// Every scheme accepted, as users write them.
    pub(crate) const SUPPORTED: &'static [&'static str] = &[
        "http", "https", "s3", "s3a", "gs", "abfss", "abfs", "wasbs", "wasb", "hdfs", "viewfs",
        "file", "local", "staging", "oci",
    ];

    /// Looks up a URI scheme (case-insensitive, as URL schemes are).
    pub(crate) fn parse(scheme: &str) -> Option<Scheme> {
        match scheme.to_ascii_lowercase().as_str() {
            "http" => Some(Scheme::Http),
            "https" => Some(Scheme::Https),
            "file" => Some(Scheme::File),
            "s3" | "s3a" => Some(Scheme::S3),
            "gs" => Some(Scheme::Gcs),
            "abfss" | "abfs" | "wasbs" | "wasb" => Some(Scheme::Azure),
            "hdfs" | "viewfs" => Some(Scheme::Hdfs),
            "local" => Some(Scheme::Local),
            "staging" => Some(Scheme::Staging),
            "oci" => Some(Scheme::Oci),
            _ => None,
        }
    }

    /// The supported schemes as one human list: `http, https, s3, s3a, hdfs, viewfs, file, local`.
    pub(crate) fn supported_list() -> String {
        Self::SUPPORTED.join(", ")
    }
}

/// What a source knows about an object before (or while) sending it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Meta {
    /// Total size of the object, when known.
    pub size: Option<u64>,
    /// A validator (ETag or Last-Modified) that identifies this version of the object;
    /// used with `If-Range` so a resume never splices two versions together.
    pub validator: Option<String>,
    /// Whether the source can serve byte ranges.
    pub ranges: bool,
}

/// A byte stream from a source.
pub(crate) type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, SourceError>> + Send>>;

/// An open transfer: metadata plus the body, starting at `offset`.
pub(crate) struct Body {
    pub meta: Meta,
    /// Where the body starts within the object. A resume request may be answered
    /// from 0 (the object changed or ranges are not served); the engine then restarts.
    pub offset: u64,
    pub stream: ByteStream,
}

/// A request to open an object, possibly resuming.
#[derive(Debug, Clone, Default)]
pub(crate) struct OpenRequest {
    /// Resume from this offset (0 = from the start).
    pub offset: u64,
    /// Stop before this offset (exclusive): one range of a parallel transfer.
    pub end: Option<u64>,
    /// The validator seen by the earlier attempt, sent as `If-Range`.
    pub validator: Option<String>,
}

impl OpenRequest {
    /// The `Range` header value this request needs (`bytes=START-[LAST]`), if any.
    pub(crate) fn range_header(&self) -> Option<String> {
        if self.offset == 0 && self.end.is_none() {
            return None;
        }
        let last = self
            .end
            .map(|end| (end - 1).to_string())
            .unwrap_or_default();
        Some(format!("bytes={}-{last}", self.offset))
    }
}

/// What a probe (`check`, and size discovery before scheduling) found.
#[derive(Debug, Clone, Default)]
pub(crate) struct Probe {
    pub meta: Meta,
    /// Protocol status (e.g. `200 OK`).
    pub status: String,
    /// The final location after redirects (redacted), when it differs from the URI.
    pub redirected_to: Option<String>,
}

/// One source kind (HTTP, file, …). Implementations must be cheap to share.
#[async_trait]
pub(crate) trait Source: Send + Sync {
    /// Opens `uri` for reading from `req.offset`.
    async fn open(&self, uri: &Url, req: &OpenRequest) -> Result<Body, SourceError>;
    /// Learns size, range support and validator without transferring the body.
    async fn probe(&self, uri: &Url) -> Result<Probe, SourceError>;

    /// Whether large objects should be fetched as parallel ranges (network sources).
    fn parallel_ranges(&self) -> bool {
        false
    }

    /// Whether the strong ETag of an answer is the object's sha256, to be checked
    /// against the bytes (the staging server's bundles, the mirror's blobs).
    fn announces_sha256(&self) -> bool {
        false
    }

    /// Whether fetching `uri` sends credentials of this process (such artifacts
    /// never go through the mirror). True unless the source knows better.
    fn credentialed(&self, _uri: &Url) -> bool {
        true
    }

    /// Whether the object at `uri` is still the version `validator` names (the
    /// mirror's revalidation): headers only, never the body. By default a probe
    /// compared; HTTP asks a conditional request.
    async fn unchanged(&self, uri: &Url, validator: &str) -> Result<bool, SourceError> {
        let probe = self.probe(uri).await?;
        Ok(probe.meta.validator.as_deref() == Some(validator))
    }

    /// What this source picked for the plan, as `check` prints it under
    /// "credentials": one line each (indented), names and origins, never values.
    /// Nothing by default.
    fn describe(&self) -> Vec<String> {
        Vec::new()
    }

    /// What `check` learns by asking the source's servers, beyond each
    /// artifact's probe (e.g. which NameNode of a nameservice answers): lines
    /// as [`Source::describe`] gives them, each call within `limit`. Nothing by
    /// default.
    async fn inspect(&self, _limit: std::time::Duration) -> Vec<String> {
        Vec::new()
    }
}

/// One instance of every source, shared by all transfers (one connection pool per source).
#[derive(Clone)]
pub(crate) struct Sources {
    http: Arc<http::HttpSource>,
    file: Arc<file::FileSource>,
    s3: Arc<s3::S3Source>,
    gcs: Arc<gcs::GcsSource>,
    azure: Arc<azure::AzureSource>,
    hdfs: Arc<hdfs::HdfsSource>,
    staging: Arc<staging::StagingSource>,
    mirror: Option<Arc<mirror::MirrorSource>>,
    oci: Option<Arc<oci::OciSource>>,
}

impl Sources {
    pub(crate) fn new(
        http: http::HttpSource,
        s3: s3::S3Source,
        hdfs: hdfs::HdfsSource,
        staging: staging::StagingSource,
    ) -> Self {
        Sources {
            http: Arc::new(http),
            file: Arc::new(file::FileSource),
            s3: Arc::new(s3),
            gcs: Arc::new(gcs::GcsSource::default()),
            azure: Arc::new(azure::AzureSource::default()),
            hdfs: Arc::new(hdfs),
            staging: Arc::new(staging),
            mirror: None,
            oci: None,
        }
    }

    /// Serves `gs://` with `gcs` and `abfss://` / `wasbs://` with `azure`.
    pub(crate) fn with_object_stores(
        mut self,
        gcs: gcs::GcsSource,
        azure: azure::AzureSource,
    ) -> Self {
        self.gcs = Arc::new(gcs);
        self.azure = Arc::new(azure);
        self
    }

    /// Asks `mirror` first for every artifact fetched without credentials.
    pub(crate) fn with_mirror(mut self, mirror: mirror::MirrorSource) -> Self {
        self.mirror = Some(Arc::new(mirror));
        self
    }

    /// Fetches `oci://` layers with `oci` (set when the plan has any).
    pub(crate) fn with_oci(mut self, oci: oci::OciSource) -> Self {
        self.oci = Some(Arc::new(oci));
        self
    }

    /// The mirror, when one is configured.
    pub(crate) fn mirror(&self) -> Option<&Arc<mirror::MirrorSource>> {
        self.mirror.as_ref()
    }

    /// The mirror's source for an artifact at `uri` (pinned to `pin`), when it
    /// should be asked first: a mirror is configured and has not failed, the
    /// scheme is one it serves (HTTP(S), S3) and the artifact's own source sends no
    /// credentials for it.
    pub(crate) fn via_mirror(
        &self,
        scheme: Scheme,
        uri: &Url,
        pin: Option<&[u8; 32]>,
    ) -> Option<Arc<dyn Source>> {
        let mirror = self.mirror.as_ref()?;
        if !self.mirror_serves(scheme, uri) {
            return None;
        }
        mirror.route(pin)
    }

    /// Whether the mirror would serve an artifact at `uri` (HTTP(S) or S3,
    /// fetched without credentials), were it up.
    fn mirror_serves(&self, scheme: Scheme, uri: &Url) -> bool {
        matches!(scheme, Scheme::Http | Scheme::Https | Scheme::S3)
            && self
                .get(scheme)
                .is_some_and(|source| !source.credentialed(uri))
    }

    /// Why the mirror was not asked for an artifact it serves: it failed earlier
    /// in this run.
    pub(crate) fn mirror_skipped(&self, scheme: Scheme, uri: &Url) -> Option<String> {
        let down = self.mirror.as_ref()?.down()?;
        self.mirror_serves(scheme, uri)
            .then(|| format!("not asked: the mirror failed earlier in this run ({down})"))
    }

    /// What every source picked for the plan, as `check` prints it (see
    /// [`Source::describe`]).
    pub(crate) fn describe(&self) -> Vec<String> {
        let sources: [&dyn Source; 7] = [
            self.http.as_ref(),
            self.file.as_ref(),
            self.s3.as_ref(),
            self.gcs.as_ref(),
            self.azure.as_ref(),
            self.hdfs.as_ref(),
            self.staging.as_ref(),
        ];
        sources
            .iter()
            .flat_map(|source| source.describe())
            .chain(self.oci.iter().flat_map(|oci| oci.describe()))
            .collect()
    }

    /// Logs in where a source needs to before its first request (Kerberos for
    /// HDFS), so that `check` can show who it is; fetch logs in on first use.
    pub(crate) async fn login(&self) {
        self.hdfs.login().await;
    }

    /// What every source learns by asking its servers (see [`Source::inspect`]).
    pub(crate) async fn inspect(&self, limit: std::time::Duration) -> Vec<String> {
        // Only HDFS has anything to say so far.
        self.hdfs.inspect(limit).await
    }

    /// The source serving `scheme`; `None` for `local://`, which is never fetched.
    pub(crate) fn get(&self, scheme: Scheme) -> Option<Arc<dyn Source>> {
        match scheme {
            Scheme::Http | Scheme::Https => Some(self.http.clone()),
            Scheme::File => Some(self.file.clone()),
            Scheme::S3 => Some(self.s3.clone()),
            Scheme::Gcs => Some(self.gcs.clone()),
            Scheme::Azure => Some(self.azure.clone()),
            Scheme::Hdfs => Some(self.hdfs.clone()),
            Scheme::Staging => Some(self.staging.clone()),
            Scheme::Oci => self.oci.clone().map(|oci| oci as Arc<dyn Source>),
            Scheme::Local => None,
        }
    }
}
