//! Bundles in an S3 bucket (`stage serve --store s3://bucket/prefix`, or `s3a://`),
//! so that several replicas behind one Service share state. The bucket is
//! configured as the S3 source configures one ([`crate::s3::settings`]:
//! `--s3-credentials-dir`, `AWS_*`, IRSA, Pod Identity, instance metadata).
//!
//! Layout, as in the local store:
//!
//! ```text
//! <prefix>/bundles/<id>/bundle.tar.gz   the bytes as uploaded
//! <prefix>/bundles/<id>/meta.json       BundleMeta, the same JSON as on disk
//! ```
//!
//! - Commit: the upload, spooled in a local directory of this process (see
//!   [`S3Store::open`]), goes up first (past [`SINGLE_PUT_MAX`] as a multipart upload
//!   streamed from the file, [`PARTS_IN_FLIGHT`] parts of [`PART_SIZE`] at a time), then
//!   `meta.json`. A bundle exists once its `meta.json` does. A `bundle.tar.gz`
//!   without one (a commit or a deletion cut short) is removed by [`Store::list`]
//!   after [`ORPHAN_BUNDLE_AGE`]; an unfinished multipart upload is the bucket's
//!   lifecycle rules' to clean (`AbortIncompleteMultipartUpload`).
//! - Reads: [`Store::meta`] reads `meta.json` from the bucket on every call, so a
//!   deletion by another replica is seen at once; [`Store::list`] lists the prefix
//!   and reads again only the `meta.json` files whose ETag changed since its last
//!   listing. [`Store::open`] is one ranged GET whose body is streamed through, so
//!   memory stays bounded whatever the number of downloads.
//! - First download: `meta.json` is rewritten with `If-Match` on the ETag it was
//!   read with, and read again when another replica wrote in between. Against a
//!   store without conditional writes it is a plain overwrite: two replicas marking
//!   at once both write the same field (harmless); one marking while another
//!   deletes may put back a `meta.json` without its bundle, which downloads answer
//!   404 for and [`Store::list`] removes after [`ORPHAN_META_AGE`].
//! - Delete: `meta.json` first (gone for every replica at once), then the bundle.
//! - Requests have time limits ([`OP_TIMEOUT`]; a download body that stays silent
//!   for [`READ_IDLE_TIMEOUT`] fails); object_store retries 5xx answers, throttling
//!   and dropped connections a few times, resuming a broken download where it stopped.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures_util::stream::{self, BoxStream};
use futures_util::{StreamExt, TryStreamExt};
use object_store::path::Path as Key;
use object_store::{
    GetOptions, GetRange, ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    RetryConfig, UpdateVersion, WriteMultipart,
};
use tokio::io::AsyncReadExt;
use tokio::sync::Semaphore;
use tracing::{debug, info, warn};
use url::Url;

use super::api::is_resource_id;
use super::store::{BundleMeta, BundleReader, Store, BUNDLE_FILE, META_FILE, META_VERSION};
use crate::env_vars as env;
use crate::net::{CaFile, HttpConfig};
use crate::s3::client::StoreBucket;
use crate::s3::settings::S3Settings;

/// Bundles up to this size go up in one PUT (held in memory while it runs).
pub(crate) const SINGLE_PUT_MAX: u64 = 8 << 20;
/// Parts of a multipart upload.
pub(crate) const PART_SIZE: usize = 8 << 20;
/// Parts of one upload in flight at once.
pub(crate) const PARTS_IN_FLIGHT: usize = 2;
/// Commits running at once (each holds up to `PART_SIZE * (PARTS_IN_FLIGHT + 1)`).
const COMMITS_AT_ONCE: usize = 4;
/// `meta.json` files read at once while listing.
const META_READS_AT_ONCE: usize = 16;
/// A bundle without `meta.json` older than this is left over from a commit or a
/// deletion that did not finish (a commit writes `meta.json` right after the bundle).
pub(crate) const ORPHAN_BUNDLE_AGE: Duration = Duration::from_secs(3600);
/// A `meta.json` without its bundle older than this was put back by a first-download
/// mark racing a deletion.
pub(crate) const ORPHAN_META_AGE: Duration = Duration::from_secs(300);
/// Time limit of a request other than a download or an upload.
pub(crate) const OP_TIMEOUT: Duration = Duration::from_secs(30);
/// A listing (all its pages and `meta.json` reads) gets this long.
const LIST_TIMEOUT: Duration = Duration::from_secs(120);
/// A download body that sends nothing for this long fails.
pub(crate) const READ_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// A commit gets [`OP_TIMEOUT`] plus this long per MiB of bundle.
const COMMIT_TIME_PER_MIB: Duration = Duration::from_secs(2);
/// Connections to the endpoint kept idle for reuse.
const POOL_SIZE: usize = 64;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The spool directory of process `<pid>` is `$TMPDIR/<SPOOL_PREFIX><pid>`.
const SPOOL_PREFIX: &str = "spark-localizer-stage-spool-";

/// What `--store` names.
#[derive(Debug)]
pub(crate) enum StoreLocation {
    /// A local directory ([`super::store::LocalStore`]).
    Dir(PathBuf),
    /// A bucket and key prefix ([`S3Store`]).
    Bucket(BucketLocation),
}

/// `s3://bucket/prefix` (or `s3a://`), checked.
#[derive(Debug, Clone)]
pub(crate) struct BucketLocation {
    /// As given; it holds no credentials (those are refused).
    pub uri: Url,
    pub bucket: String,
    /// `<prefix>/bundles`.
    root: Key,
}

impl StoreLocation {
    /// A value with a URI scheme is a bucket (`s3://`, `s3a://`; other schemes are
    /// refused, naming the supported ones); anything else is a directory.
    pub(crate) fn parse(value: &Path) -> Result<StoreLocation, String> {
        let text = value.to_string_lossy();
        let Some((scheme, _)) = text.split_once("://").filter(|(s, _)| is_scheme(s)) else {
            return Ok(StoreLocation::Dir(value.to_path_buf()));
        };
        match scheme.to_ascii_lowercase().as_str() {
            "s3" | "s3a" => BucketLocation::parse(&text).map(StoreLocation::Bucket),
            other => Err(format!(
                "unsupported scheme '{other}' (supported: a directory, s3://bucket/prefix, s3a://bucket/prefix)"
            )),
        }
    }
}

fn is_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
}

impl BucketLocation {
    fn parse(text: &str) -> Result<BucketLocation, String> {
        let uri = Url::parse(text).map_err(|e| format!("not a URI: {e}"))?;
        let bucket = uri.host_str().unwrap_or_default().to_owned();
        if bucket.is_empty() {
            return Err("no bucket (write s3://bucket/prefix)".into());
        }
        if !uri.username().is_empty() || uri.password().is_some() {
            return Err(
                "holds credentials; give them with --s3-credentials-dir or AWS_* variables instead"
                    .into(),
            );
        }
        if uri.port().is_some() {
            return Err("has a port; the S3 endpoint is set with AWS_ENDPOINT_URL".into());
        }
        if uri.query().is_some() || uri.fragment().is_some() {
            return Err("has a query or fragment; write s3://bucket/prefix".into());
        }
        let prefix = uri.path().trim_matches('/');
        let base = if prefix.is_empty() {
            Key::default()
        } else {
            Key::from_url_path(prefix).map_err(|e| format!("not a usable key prefix: {e}"))?
        };
        Ok(BucketLocation {
            root: base.join("bundles"),
            bucket,
            uri,
        })
    }
}

/// Why an [`S3Store`] cannot be opened; the message names `--store`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OpenError {
    /// Flags, environment or files that cannot work (a configuration error).
    #[error("{0}")]
    Config(String),
    /// The bucket is unreachable or refuses us, or the spool directory failed (an unusable store).
    #[error("{0}")]
    Unusable(String),
}

/// A `meta.json` as last read.
struct Cached {
    e_tag: Option<String>,
    meta: BundleMeta,
}

/// Bundles in a bucket; see the module documentation.
pub(crate) struct S3Store {
    location: BucketLocation,
    bucket: StoreBucket,
    store: Arc<dyn ObjectStore>,
    spool: PathBuf,
    commits: Arc<Semaphore>,
    /// `meta.json` contents by id, for [`Store::list`]; keyed on the ETag.
    cache: Mutex<HashMap<String, Cached>>,
}

impl S3Store {
    /// Configures the bucket from `settings` (and `SSL_CERT_FILE` for extra trust
    /// roots), checks that its credentials work and that the prefix can be listed,
    /// and makes this process's spool directory (`$TMPDIR/spark-localizer-stage-spool-<pid>`,
    /// 0700, emptied; spool directories of processes that are gone are removed).
    pub(crate) async fn open(
        location: BucketLocation,
        settings: &S3Settings,
    ) -> Result<S3Store, OpenError> {
        let shown = crate::util::redact::redact_url(location.uri.as_str());
        let config = |why: String| OpenError::Config(format!("--store {shown}: {why}"));
        let mut ca_files = Vec::new();
        if let Some(path) = std::env::var_os(env::SSL_CERT_FILE).filter(|p| !p.is_empty()) {
            ca_files.push(CaFile {
                path: PathBuf::from(path),
                origin: env::SSL_CERT_FILE.to_owned(),
            });
        }
        let client = crate::net::client(&HttpConfig {
            ca_files,
            connect_timeout: CONNECT_TIMEOUT,
            pool_size: POOL_SIZE,
            headers: Vec::new(),
        })
        .map_err(|e| config(crate::util::redact::error_chain(&e)))?;
        let retry = RetryConfig {
            max_retries: 4,
            retry_timeout: OP_TIMEOUT,
            ..RetryConfig::default()
        };
        let bucket = StoreBucket::new(settings, &client, &location.bucket, &retry)
            .map_err(|problems| config(problems.join("; ")))?;
        let unusable =
            |e: crate::fault::SourceError| OpenError::Unusable(format!("--store {}", e.describe()));
        bucket
            .check_credentials(&location.uri)
            .await
            .map_err(unusable)?;
        let store = bucket.store();
        let root = &location.root;
        let probe = bounded(root, OP_TIMEOUT, store.list_with_delimiter(Some(root))).await;
        if let Err(e) = probe {
            return Err(unusable(bucket.explain(&location.uri, e)));
        }
        let spool = make_spool_dir().map_err(|e| {
            OpenError::Unusable(format!(
                "--store {shown}: cannot make the spool directory: {e}"
            ))
        })?;
        info!(
            "store {shown}: bucket '{}', {}; uploads spooled in {}",
            location.bucket,
            bucket.describe(),
            spool.display()
        );
        Ok(S3Store {
            location,
            bucket,
            store,
            spool,
            commits: Arc::new(Semaphore::new(COMMITS_AT_ONCE)),
            cache: Mutex::new(HashMap::new()),
        })
    }

    fn cache(&self) -> MutexGuard<'_, HashMap<String, Cached>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn key(&self, id: &str, file: &str) -> Key {
        self.location.root.clone().join(id).join(file)
    }

    /// An object_store error on `key` as an I/O error whose message says what it
    /// means (as `fetch` words S3 errors) and names the object.
    fn error(&self, key: &Key, err: object_store::Error) -> io::Error {
        let kind = match &err {
            object_store::Error::NotFound { .. } => io::ErrorKind::NotFound,
            object_store::Error::Generic { source, .. }
                if source.downcast_ref::<Elapsed>().is_some() =>
            {
                io::ErrorKind::TimedOut
            }
            _ => io::ErrorKind::Other,
        };
        let mut uri = self.location.uri.clone();
        uri.set_path(&format!("/{key}"));
        io::Error::new(kind, self.bucket.explain(&uri, err).describe())
    }

    /// `meta.json` of `id` and its ETag; `None` if there is none.
    async fn read_meta(&self, id: &str) -> io::Result<Option<(BundleMeta, Option<String>)>> {
        let key = self.key(id, META_FILE);
        let read = async {
            let got = self.store.get_opts(&key, GetOptions::default()).await?;
            let e_tag = got.meta.e_tag.clone();
            Ok::<_, object_store::Error>((got.bytes().await?, e_tag))
        };
        let (bytes, e_tag) = match bounded(&key, OP_TIMEOUT, read).await {
            Ok(read) => read,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.error(&key, e)),
        };
        let meta = parse_meta(&bytes, id)
            .map_err(|why| io::Error::new(io::ErrorKind::InvalidData, format!("{key}: {why}")))?;
        self.cache().insert(
            id.to_owned(),
            Cached {
                e_tag: e_tag.clone(),
                meta: meta.clone(),
            },
        );
        Ok(Some((meta, e_tag)))
    }

    async fn delete_key(&self, key: &Key) -> io::Result<()> {
        match bounded(key, OP_TIMEOUT, self.store.delete(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error(key, e)),
        }
    }

    /// The committed bundle's `meta.json`, from the cache when its ETag is unchanged.
    async fn listed_meta(&self, id: &str, listed: &ObjectMeta) -> Option<BundleMeta> {
        if listed.e_tag.is_some() {
            if let Some(c) = self.cache().get(id).filter(|c| c.e_tag == listed.e_tag) {
                return Some(c.meta.clone());
            }
        }
        match self.read_meta(id).await {
            Ok(found) => found.map(|(meta, _)| meta),
            Err(e) => {
                debug!("skipping bundle {id}: {e}");
                None
            }
        }
    }

    /// Removes what [`sort_listing`] found left over.
    async fn remove_orphans(&self, orphans: Vec<Key>) {
        for key in orphans {
            match self.delete_key(&key).await {
                Ok(()) => info!("removed {key}: left over from an unfinished commit or deletion"),
                Err(e) => warn!("cannot remove the leftover {key}: {e}"),
            }
        }
    }
}

impl Drop for S3Store {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.spool);
    }
}

#[async_trait]
impl Store for S3Store {
    fn spool_dir(&self) -> &Path {
        &self.spool
    }

    async fn commit(&self, spooled: &Path, meta: &BundleMeta) -> io::Result<()> {
        // Opened before anything can be cancelled: the caller deletes the spooled
        // file when it goes away, and the upload runs to its end on its own task.
        let file = tokio::fs::File::open(spooled).await?;
        let permit = self
            .commits
            .clone()
            .acquire_owned()
            .await
            .map_err(io::Error::other)?;
        let bundle = self.key(&meta.id, BUNDLE_FILE);
        let meta_key = self.key(&meta.id, META_FILE);
        let json = serde_json::to_vec_pretty(meta).map_err(io::Error::other)?;
        let store = self.store.clone();
        let size = meta.size;
        let limit =
            OP_TIMEOUT + COMMIT_TIME_PER_MIB * u32::try_from(size >> 20).unwrap_or(u32::MAX);
        let task = tokio::spawn(async move {
            let _permit = permit;
            bounded(&bundle, limit, upload(store.as_ref(), &bundle, file, size))
                .await
                .map_err(|e| (bundle.clone(), e))?;
            let put = store.put(&meta_key, PutPayload::from(json));
            bounded(&meta_key, OP_TIMEOUT, put)
                .await
                .map_err(|e| (meta_key, e))
        });
        match task.await.map_err(io::Error::other)? {
            Ok(put) => {
                let _ = tokio::fs::remove_file(spooled).await;
                self.cache().insert(
                    meta.id.clone(),
                    Cached {
                        e_tag: put.e_tag,
                        meta: meta.clone(),
                    },
                );
                Ok(())
            }
            Err((key, e)) => Err(self.error(&key, e)),
        }
    }

    async fn meta(&self, id: &str) -> io::Result<Option<BundleMeta>> {
        Ok(self.read_meta(id).await?.map(|(meta, _)| meta))
    }

    async fn list(&self) -> io::Result<Vec<BundleMeta>> {
        let root = &self.location.root;
        let objects = bounded(
            root,
            LIST_TIMEOUT,
            self.store.list(Some(root)).try_collect::<Vec<_>>(),
        )
        .await
        .map_err(|e| self.error(root, e))?;
        let listing = sort_listing(root, objects, crate::util::time::now_ms());
        self.remove_orphans(listing.orphans).await;
        let ids: HashSet<String> = listing.bundles.iter().map(|(id, _)| id.clone()).collect();
        let read = stream::iter(listing.bundles)
            .map(|(id, meta)| async move { self.listed_meta(&id, &meta).await })
            .buffer_unordered(META_READS_AT_ONCE)
            .filter_map(|m| async move { m })
            .collect::<Vec<_>>();
        let metas = tokio::time::timeout(LIST_TIMEOUT, read)
            .await
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("listing {root} took longer than {LIST_TIMEOUT:?}"),
                )
            })?;
        self.cache().retain(|id, _| ids.contains(id));
        Ok(metas)
    }

    async fn open(&self, id: &str, offset: u64, len: u64) -> io::Result<Option<BundleReader>> {
        if len == 0 {
            return Ok(Some(Box::pin(tokio::io::empty())));
        }
        let key = self.key(id, BUNDLE_FILE);
        let options = GetOptions {
            range: Some(GetRange::Bounded(offset..offset.saturating_add(len))),
            ..GetOptions::default()
        };
        let got = match bounded(&key, OP_TIMEOUT, self.store.get_opts(&key, options)).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.error(&key, e)),
        };
        let shown = format!("{key}");
        let body = idle_limited(got.into_stream(), READ_IDLE_TIMEOUT).map_err(move |e| {
            let e = match e {
                Silence::Idle(after) => io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the object store sent nothing for {after:?}"),
                ),
                Silence::Failed(e) => io::Error::other(crate::util::redact::error_chain(&e)),
            };
            // The answer is cut short (its length was promised): say why here.
            warn!("download of {shown} cut short: {e}");
            e
        });
        Ok(Some(Box::pin(tokio_util::io::StreamReader::new(body))))
    }

    async fn mark_downloaded(&self, id: &str, at_ms: u64) -> io::Result<()> {
        let key = self.key(id, META_FILE);
        // Another replica writing in between makes the conditional write fail:
        // read again (it may have marked or deleted the bundle meanwhile).
        for _ in 0..3 {
            let Some((mut meta, e_tag)) = self.read_meta(id).await? else {
                return Ok(());
            };
            if meta.first_download_ms.is_some() {
                return Ok(());
            }
            meta.first_download_ms = Some(at_ms);
            let json = serde_json::to_vec_pretty(&meta).map_err(io::Error::other)?;
            let mode = match e_tag {
                Some(e_tag) => PutMode::Update(UpdateVersion {
                    e_tag: Some(e_tag),
                    version: None,
                }),
                None => PutMode::Overwrite,
            };
            let put = |mode| {
                let options = PutOptions {
                    mode,
                    ..PutOptions::default()
                };
                self.store
                    .put_opts(&key, PutPayload::from(json.clone()), options)
            };
            let written = match bounded(&key, OP_TIMEOUT, put(mode)).await {
                Err(object_store::Error::NotImplemented { .. }) => {
                    bounded(&key, OP_TIMEOUT, put(PutMode::Overwrite)).await
                }
                other => other,
            };
            match written {
                Ok(put) => {
                    self.cache().insert(
                        id.to_owned(),
                        Cached {
                            e_tag: put.e_tag,
                            meta,
                        },
                    );
                    return Ok(());
                }
                Err(object_store::Error::Precondition { .. }) => continue,
                Err(e) => return Err(self.error(&key, e)),
            }
        }
        Err(io::Error::other(format!(
            "{key}: changed by someone else at every attempt to record the first download"
        )))
    }

    async fn delete(&self, id: &str) -> io::Result<bool> {
        if self.read_meta(id).await?.is_none() {
            return Ok(false);
        }
        self.delete_key(&self.key(id, META_FILE)).await?;
        self.cache().remove(id);
        self.delete_key(&self.key(id, BUNDLE_FILE)).await?;
        Ok(true)
    }

    fn close(&self) {
        let _ = std::fs::remove_dir_all(&self.spool);
    }
}

/// Uploads `size` bytes of `file` as `key`: one PUT up to [`SINGLE_PUT_MAX`], else a
/// multipart upload read part by part (aborted on failure).
async fn upload(
    store: &dyn ObjectStore,
    key: &Key,
    mut file: tokio::fs::File,
    size: u64,
) -> object_store::Result<()> {
    let local = |e: io::Error| object_store::Error::Generic {
        store: "spool",
        source: Box::new(e),
    };
    if size <= SINGLE_PUT_MAX {
        let mut data = Vec::with_capacity(size as usize);
        file.read_to_end(&mut data).await.map_err(local)?;
        store.put(key, PutPayload::from(data)).await?;
        return Ok(());
    }
    let mut writer =
        WriteMultipart::new_with_chunk_size(store.put_multipart(key).await?, PART_SIZE);
    let sent: object_store::Result<()> = async {
        loop {
            let part = read_part(&mut file).await.map_err(local)?;
            if part.is_empty() {
                return Ok(());
            }
            writer.wait_for_capacity(PARTS_IN_FLIGHT).await?;
            writer.put(part);
        }
    }
    .await;
    match sent {
        Ok(()) => writer.finish().await.map(|_| ()),
        Err(e) => {
            if let Err(abort) = writer.abort().await {
                debug!("aborting the multipart upload of {key}: {abort}");
            }
            Err(e)
        }
    }
}

/// Up to [`PART_SIZE`] bytes of `file`; empty at its end.
async fn read_part(file: &mut tokio::fs::File) -> io::Result<Bytes> {
    let mut part = BytesMut::with_capacity(PART_SIZE);
    while part.len() < PART_SIZE {
        if file.read_buf(&mut part).await? == 0 {
            break;
        }
    }
    Ok(part.freeze())
}

/// A listing of `<prefix>/bundles/` sorted out.
#[derive(Debug, Default)]
struct Listing {
    /// Committed bundles: the id and its `meta.json` as listed.
    bundles: Vec<(String, ObjectMeta)>,
    /// Leftovers to remove.
    orphans: Vec<Key>,
}

/// Groups the objects under `root` by id: an id with both files is a bundle; a
/// bundle without `meta.json` past [`ORPHAN_BUNDLE_AGE`] and a `meta.json` without
/// bundle past [`ORPHAN_META_AGE`] are leftovers. Other objects are left alone.
fn sort_listing(root: &Key, objects: Vec<ObjectMeta>, now_ms: u64) -> Listing {
    let mut by_id: HashMap<String, (Option<ObjectMeta>, Option<ObjectMeta>)> = HashMap::new();
    for object in objects {
        let Some(parts) = object.location.prefix_match(root) else {
            continue;
        };
        let parts: Vec<String> = parts.map(|p| p.as_ref().to_owned()).collect();
        let [id, file] = parts.as_slice() else {
            continue;
        };
        if !is_resource_id(id) {
            continue;
        }
        let entry = by_id.entry(id.clone()).or_default();
        match file.as_str() {
            BUNDLE_FILE => entry.0 = Some(object),
            META_FILE => entry.1 = Some(object),
            _ => {}
        }
    }
    let older = |o: &ObjectMeta, age: Duration| {
        let modified = u64::try_from(o.last_modified.timestamp_millis()).unwrap_or(0);
        now_ms.saturating_sub(modified) >= age.as_millis() as u64
    };
    let mut listing = Listing::default();
    for (id, found) in by_id {
        match found {
            (Some(_), Some(meta)) => listing.bundles.push((id, meta)),
            (Some(bundle), None) if older(&bundle, ORPHAN_BUNDLE_AGE) => {
                listing.orphans.push(bundle.location)
            }
            (None, Some(meta)) if older(&meta, ORPHAN_META_AGE) => {
                listing.orphans.push(meta.location)
            }
            _ => {}
        }
    }
    listing
}

fn parse_meta(bytes: &[u8], id: &str) -> Result<BundleMeta, String> {
    let meta: BundleMeta =
        serde_json::from_slice(bytes).map_err(|e| format!("not valid {META_FILE}: {e}"))?;
    if meta.version != META_VERSION || meta.id != id {
        return Err(format!("{META_FILE} is for another version or id"));
    }
    Ok(meta)
}

/// The error of a request that took longer than its time limit.
#[derive(Debug, thiserror::Error)]
#[error("no answer within {0:?}")]
struct Elapsed(Duration);

/// `fut`, failing after `limit`.
async fn bounded<T>(
    key: &Key,
    limit: Duration,
    fut: impl std::future::Future<Output = object_store::Result<T>>,
) -> object_store::Result<T> {
    match tokio::time::timeout(limit, fut).await {
        Ok(result) => result,
        Err(_) => {
            debug!("{key}: no answer within {limit:?}");
            Err(object_store::Error::Generic {
                store: "S3",
                source: Box::new(Elapsed(limit)),
            })
        }
    }
}

/// Why a download body stopped.
enum Silence {
    Idle(Duration),
    Failed(object_store::Error),
}

/// `body`, failing (once, then ending) when no chunk arrives for `limit`.
fn idle_limited(
    body: BoxStream<'static, object_store::Result<Bytes>>,
    limit: Duration,
) -> impl futures_util::Stream<Item = Result<Bytes, Silence>> + Send {
    stream::unfold(Some(body), move |state| async move {
        let mut body = state?;
        match tokio::time::timeout(limit, body.next()).await {
            Ok(Some(Ok(chunk))) => Some((Ok(chunk), Some(body))),
            Ok(Some(Err(e))) => Some((Err(Silence::Failed(e)), None)),
            Ok(None) => None,
            Err(_) => Some((Err(Silence::Idle(limit)), None)),
        }
    })
}

/// Makes `$TMPDIR/<SPOOL_PREFIX><pid>` (0700, emptied) and removes those of
/// processes that are gone.
fn make_spool_dir() -> io::Result<PathBuf> {
    let tmp = std::env::temp_dir();
    let pid = std::process::id();
    if let Ok(entries) = std::fs::read_dir(&tmp) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(other) = name.to_str().and_then(|n| n.strip_prefix(SPOOL_PREFIX)) else {
                continue;
            };
            let gone = other
                .parse::<u32>()
                .is_ok_and(|p| p == pid || !Path::new(&format!("/proc/{p}")).exists());
            if gone {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    let spool = tmp.join(format!("{SPOOL_PREFIX}{pid}"));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&spool)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", spool.display())))?;
    Ok(spool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_locations() {
        for (value, want) in [
            ("/var/lib/staging", "dir"),
            ("relative/dir", "dir"),
            ("s3://bkt/some/prefix", "s3://bkt some/prefix/bundles"),
            ("s3a://bkt/", "s3a://bkt bundles"),
            ("S3://bkt", "s3://bkt bundles"),
            ("s3://bkt/a%20b/", "s3://bkt a b/bundles"),
        ] {
            let got = match StoreLocation::parse(Path::new(value)).unwrap() {
                StoreLocation::Dir(_) => "dir".to_owned(),
                StoreLocation::Bucket(b) => {
                    format!("{}://{} {}", b.uri.scheme(), b.bucket, b.root)
                }
            };
            assert_eq!(got, want, "{value}");
        }
        for (value, why) in [
            ("gs://bkt/p", "unsupported scheme 'gs'"),
            ("s3:///p", "no bucket"),
            ("s3://key:secret@bkt/p", "holds credentials"),
            ("s3://bkt:9000/p", "has a port"),
            ("s3://bkt/p?x=1", "query"),
            ("s3://bkt/a//b", "not a usable key prefix"),
        ] {
            let e = StoreLocation::parse(Path::new(value)).unwrap_err();
            assert!(e.contains(why), "{value}: {e}");
            assert!(!e.contains("secret"), "{e}");
        }
    }

    fn object(key: &str, age: Duration) -> ObjectMeta {
        let modified = NOW - age.as_millis() as u64;
        ObjectMeta {
            location: Key::parse(key).unwrap(),
            last_modified: (std::time::UNIX_EPOCH + Duration::from_millis(modified)).into(),
            size: 1,
            e_tag: Some("\"e\"".into()),
            version: None,
        }
    }

    const NOW: u64 = 1_800_000_000_000;
    const A: &str = "0123456789abcdef0123456789abcdef";
    const B: &str = "11111111111111111111111111111111";
    const C: &str = "22222222222222222222222222222222";
    const D: &str = "33333333333333333333333333333333";

    #[test]
    fn listing_finds_bundles_and_leftovers() {
        let root = Key::parse("p/bundles").unwrap();
        let fresh = Duration::from_secs(1);
        let old = ORPHAN_BUNDLE_AGE + fresh;
        let objects = vec![
            object(&format!("p/bundles/{A}/bundle.tar.gz"), old),
            object(&format!("p/bundles/{A}/meta.json"), old),
            // A commit in progress, and one that never finished.
            object(&format!("p/bundles/{B}/bundle.tar.gz"), fresh),
            object(&format!("p/bundles/{C}/bundle.tar.gz"), old),
            // A meta.json put back by a first-download mark racing a deletion.
            object(&format!("p/bundles/{D}/meta.json"), ORPHAN_META_AGE + fresh),
            // Not ours: left alone.
            object("p/bundles/not-an-id/bundle.tar.gz", old),
            object(&format!("p/bundles/{A}/other"), old),
            object("p/bundles/readme", old),
        ];
        let listing = sort_listing(&root, objects, NOW);
        let ids: Vec<&str> = listing.bundles.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, [A]);
        let mut orphans: Vec<String> = listing.orphans.iter().map(Key::to_string).collect();
        orphans.sort();
        assert_eq!(
            orphans,
            [
                format!("p/bundles/{C}/bundle.tar.gz"),
                format!("p/bundles/{D}/meta.json")
            ]
        );
    }
}
