//! Where staged bundles live: the [`Store`] trait and its local-directory backend.
//!
//! The server spools an upload into [`Store::spool_dir`], validates it, then hands
//! it to [`Store::commit`]; nothing is visible before the commit. The object-store
//! backend in `store_s3.rs` (`--store s3://bucket/prefix`, several replicas
//! behind one Service), implements the same trait: it spools locally,
//! uploads on commit, and answers [`Store::meta`] from the bucket.
//!
//! [`LocalStore`] layout under `--store DIR`:
//!
//! ```text
//! DIR/bundles/<id>/bundle.tar.gz   the bytes as uploaded
//! DIR/bundles/<id>/meta.json       BundleMeta (secret stored only as its sha256)
//! DIR/tmp/                         uploads in progress, commits and deletions; emptied at start
//! ```
//!
//! A commit builds `tmp/commit-<id>/` (both files written and fsynced) and renames
//! it to `bundles/<id>` in one step, so a crash leaves either the whole bundle or
//! nothing under `bundles/`. Deletion renames the directory back into `tmp/` first.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncSeekExt};
use tracing::{info, warn};

use super::api::{is_resource_id, ResourceOwner};

/// Version of `meta.json`.
pub(crate) const META_VERSION: u32 = 1;

/// A bundle's bytes, next to its [`META_FILE`] (in every store).
pub(super) const BUNDLE_FILE: &str = "bundle.tar.gz";
/// A bundle's [`BundleMeta`] as JSON.
pub(super) const META_FILE: &str = "meta.json";
const META_TMP: &str = "meta.json.tmp";

/// What is known about one committed bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BundleMeta {
    pub version: u32,
    pub id: String,
    /// Hex sha256 of the secret; the secret itself is never stored.
    pub secret_sha256: String,
    pub size: u64,
    /// Hex sha256 of the bundle's bytes.
    pub sha256: String,
    pub owner: ResourceOwner,
    /// Unix milliseconds.
    pub created_ms: u64,
    /// Unix milliseconds of the first download; `None` while the bundle is unused.
    pub first_download_ms: Option<u64>,
}

/// A bundle's bytes (or a range of them), streamed.
pub(crate) type BundleReader = Pin<Box<dyn AsyncRead + Send>>;

/// A place to keep bundles.
#[async_trait]
pub(crate) trait Store: Send + Sync {
    /// A local directory for uploads in progress (swept at start).
    fn spool_dir(&self) -> &Path;
    /// Makes the spooled file at `spooled` the bundle `meta.id`, atomically.
    async fn commit(&self, spooled: &Path, meta: &BundleMeta) -> io::Result<()>;
    /// The bundle's metadata, if it is stored.
    async fn meta(&self, id: &str) -> io::Result<Option<BundleMeta>>;
    /// Every stored bundle.
    async fn list(&self) -> io::Result<Vec<BundleMeta>>;
    /// `len` bytes of the bundle from `offset`; `None` if it is gone.
    async fn open(&self, id: &str, offset: u64, len: u64) -> io::Result<Option<BundleReader>>;
    /// Records the first download (a used bundle no longer expires as unused).
    async fn mark_downloaded(&self, id: &str, at_ms: u64) -> io::Result<()>;
    /// Removes the bundle; false if it was not there.
    async fn delete(&self, id: &str) -> io::Result<bool>;
    /// Releases what the store keeps on local disk for this process only, at
    /// shutdown (the S3 store's spool directory).
    fn close(&self) {}
}

/// Bundles in a local directory, indexed in memory (loaded at start). Its file
/// work runs in `block_in_place`, so it needs tokio's multi-thread runtime.
pub(crate) struct LocalStore {
    bundles: PathBuf,
    tmp: PathBuf,
    index: Mutex<HashMap<String, BundleMeta>>,
}

impl LocalStore {
    /// Opens (creating) the store at `root`: empties `tmp/`, loads every committed
    /// bundle and removes directories that are not one. Blocking.
    pub(crate) fn open(root: &Path) -> io::Result<LocalStore> {
        let bundles = root.join("bundles");
        let tmp = root.join("tmp");
        for dir in [root, &bundles, &tmp] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| with_path(e, dir))?;
        }
        let swept = empty_dir(&tmp)?;
        if swept > 0 {
            info!("removed {swept} leftover upload(s) from an earlier run");
        }
        let store = LocalStore {
            bundles,
            tmp,
            index: Mutex::new(HashMap::new()),
        };
        store.load()?;
        Ok(store)
    }

    fn index(&self) -> MutexGuard<'_, HashMap<String, BundleMeta>> {
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn load(&self) -> io::Result<()> {
        let entries = fs::read_dir(&self.bundles).map_err(|e| with_path(e, &self.bundles))?;
        let mut index = self.index();
        for entry in entries {
            let entry = entry.map_err(|e| with_path(e, &self.bundles))?;
            let dir = entry.path();
            match read_committed(&dir, &entry.file_name().to_string_lossy()) {
                Ok(meta) => {
                    index.insert(meta.id.clone(), meta);
                }
                Err(why) => {
                    warn!("removing {}: {why}", dir.display());
                    self.discard(&dir)?;
                }
            }
        }
        Ok(())
    }

    /// Moves `dir` into `tmp/` (so it is gone from `bundles/` at once), then removes it.
    fn discard(&self, dir: &Path) -> io::Result<()> {
        let name = dir.file_name().unwrap_or_default().to_string_lossy();
        let grave = self
            .tmp
            .join(format!("deleted-{name}-{:016x}", fastrand::u64(..)));
        fs::rename(dir, &grave).map_err(|e| with_path(e, dir))?;
        sync_dir(&self.bundles)?;
        if grave.is_dir() {
            fs::remove_dir_all(&grave).map_err(|e| with_path(e, &grave))
        } else {
            fs::remove_file(&grave).map_err(|e| with_path(e, &grave))
        }
    }

    fn bundle_dir(&self, id: &str) -> PathBuf {
        self.bundles.join(id)
    }

    fn commit_blocking(&self, spooled: &Path, meta: &BundleMeta) -> io::Result<()> {
        let stage = self.tmp.join(format!("commit-{}", meta.id));
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&stage)
            .map_err(|e| with_path(e, &stage))?;
        let result = (|| {
            let bundle = stage.join(BUNDLE_FILE);
            fs::rename(spooled, &bundle).map_err(|e| with_path(e, spooled))?;
            write_synced(&stage.join(META_FILE), &meta_json(meta)?)?;
            sync_dir(&stage)?;
            let target = self.bundle_dir(&meta.id);
            fs::rename(&stage, &target).map_err(|e| with_path(e, &target))?;
            sync_dir(&self.bundles)
        })();
        if result.is_err() {
            let _ = fs::remove_dir_all(&stage);
        }
        result
    }

    fn mark_blocking(&self, id: &str, at_ms: u64) -> io::Result<()> {
        let meta = {
            let mut index = self.index();
            let Some(meta) = index.get_mut(id) else {
                return Ok(());
            };
            if meta.first_download_ms.is_some() {
                return Ok(());
            }
            meta.first_download_ms = Some(at_ms);
            meta.clone()
        };
        let dir = self.bundle_dir(id);
        let tmp = dir.join(META_TMP);
        match write_synced(&tmp, &meta_json(&meta)?) {
            // Deleted meanwhile: nothing to record.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            other => other?,
        }
        fs::rename(&tmp, dir.join(META_FILE)).map_err(|e| with_path(e, &tmp))?;
        sync_dir(&dir)
    }

    fn delete_blocking(&self, id: &str) -> io::Result<bool> {
        if self.index().remove(id).is_none() {
            return Ok(false);
        }
        match self.discard(&self.bundle_dir(id)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            other => other.map(|()| true),
        }
    }
}

#[async_trait]
impl Store for LocalStore {
    fn spool_dir(&self) -> &Path {
        &self.tmp
    }

    async fn commit(&self, spooled: &Path, meta: &BundleMeta) -> io::Result<()> {
        tokio::task::block_in_place(|| self.commit_blocking(spooled, meta))?;
        self.index().insert(meta.id.clone(), meta.clone());
        Ok(())
    }

    async fn meta(&self, id: &str) -> io::Result<Option<BundleMeta>> {
        Ok(self.index().get(id).cloned())
    }

    async fn list(&self) -> io::Result<Vec<BundleMeta>> {
        Ok(self.index().values().cloned().collect())
    }

    async fn open(&self, id: &str, offset: u64, len: u64) -> io::Result<Option<BundleReader>> {
        if !self.index().contains_key(id) {
            return Ok(None);
        }
        let path = self.bundle_dir(id).join(BUNDLE_FILE);
        let mut file = match tokio::fs::File::open(&path).await {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(with_path(e, &path)),
        };
        if offset > 0 {
            file.seek(io::SeekFrom::Start(offset)).await?;
        }
        Ok(Some(Box::pin(file.take(len))))
    }

    async fn mark_downloaded(&self, id: &str, at_ms: u64) -> io::Result<()> {
        tokio::task::block_in_place(|| self.mark_blocking(id, at_ms))
    }

    async fn delete(&self, id: &str) -> io::Result<bool> {
        tokio::task::block_in_place(|| self.delete_blocking(id))
    }
}

/// Reads a committed bundle directory named `name`; the error says why it is not one.
fn read_committed(dir: &Path, name: &str) -> Result<BundleMeta, String> {
    if !is_resource_id(name) || !dir.is_dir() {
        return Err("not a bundle directory".into());
    }
    let text =
        fs::read(dir.join(META_FILE)).map_err(|e| format!("no readable {META_FILE}: {e}"))?;
    let meta: BundleMeta =
        serde_json::from_slice(&text).map_err(|e| format!("{META_FILE} is not valid: {e}"))?;
    if meta.version != META_VERSION || meta.id != name {
        return Err(format!("{META_FILE} is for another version or id"));
    }
    let size = fs::metadata(dir.join(BUNDLE_FILE))
        .map_err(|e| format!("no readable {BUNDLE_FILE}: {e}"))?
        .len();
    if size != meta.size {
        return Err(format!(
            "{BUNDLE_FILE} has {size} bytes, {META_FILE} says {}",
            meta.size
        ));
    }
    // A metadata update that did not finish: the committed meta.json stands.
    let _ = fs::remove_file(dir.join(META_TMP));
    Ok(meta)
}

fn meta_json(meta: &BundleMeta) -> io::Result<Vec<u8>> {
    serde_json::to_vec_pretty(meta).map_err(io::Error::other)
}

/// Creates `path` (0600) with `data` and fsyncs it.
fn write_synced(path: &Path, data: &[u8]) -> io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| with_path(e, path))?;
    file.write_all(data).map_err(|e| with_path(e, path))?;
    file.sync_all().map_err(|e| with_path(e, path))
}

/// Makes a directory's entries (renames) durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| with_path(e, dir))
}

/// Removes everything inside `dir`; returns how many entries there were.
fn empty_dir(dir: &Path) -> io::Result<usize> {
    let mut removed = 0;
    for entry in fs::read_dir(dir).map_err(|e| with_path(e, dir))? {
        let path = entry.map_err(|e| with_path(e, dir))?.path();
        let result = if path.is_dir() && !path.is_symlink() {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        result.map_err(|e| with_path(e, &path))?;
        removed += 1;
    }
    Ok(removed)
}

/// The error with the path it concerns, keeping its kind.
fn with_path(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(id: &str, size: u64) -> BundleMeta {
        BundleMeta {
            version: META_VERSION,
            id: id.into(),
            secret_sha256: "00".repeat(32),
            size,
            sha256: "11".repeat(32),
            owner: ResourceOwner::parse(br#"{"namespace":"ns"}"#).unwrap(),
            created_ms: 1,
            first_download_ms: None,
        }
    }

    const ID: &str = "0123456789abcdef0123456789abcdef";

    #[tokio::test(flavor = "multi_thread")]
    async fn commit_reload_mark_delete() {
        let root = tempfile::tempdir().unwrap();
        let store = LocalStore::open(root.path()).unwrap();
        let spooled = store.spool_dir().join("upload-1");
        fs::write(&spooled, b"hello").unwrap();
        store.commit(&spooled, &meta(ID, 5)).await.unwrap();
        assert!(!spooled.exists());
        store.mark_downloaded(ID, 7).await.unwrap();
        // Leftovers of a crash: an upload in tmp/, a half-made dir in bundles/.
        fs::write(root.path().join("tmp/upload-2"), b"partial").unwrap();
        fs::create_dir(root.path().join("bundles/ffffffffffffffffffffffffffffffff")).unwrap();
        drop(store);

        let store = LocalStore::open(root.path()).unwrap();
        let listed = store.list().await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].first_download_ms, Some(7));
        assert_eq!(fs::read_dir(root.path().join("tmp")).unwrap().count(), 0);
        assert_eq!(
            fs::read_dir(root.path().join("bundles")).unwrap().count(),
            1
        );
        let mut reader = store.open(ID, 1, 3).await.unwrap().unwrap();
        let mut got = Vec::new();
        reader.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"ell");
        assert!(store.delete(ID).await.unwrap());
        assert!(!store.delete(ID).await.unwrap());
        assert!(store.open(ID, 0, 5).await.unwrap().is_none());
        assert_eq!(
            fs::read_dir(root.path().join("bundles")).unwrap().count(),
            0
        );
    }

    #[test]
    fn a_size_mismatch_is_not_committed() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(ID);
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join(BUNDLE_FILE), b"abc").unwrap();
        fs::write(dir.join(META_FILE), meta_json(&meta(ID, 4)).unwrap()).unwrap();
        let err = read_committed(&dir, ID).unwrap_err();
        assert!(err.contains("3 bytes"), "{err}");
    }
}
