//! The mirror's disk: blobs named by their sha256 (read-only, published by
//! rename after an fsync), an index from source URI to blob with the origin's
//! validator, temp files for transfers in progress, and the least-recently-used
//! order that keeps the blobs under `--max-bytes`.
//!
//! ```text
//! <dir>/blobs/<sha256>            the bytes, mode 0444
//! <dir>/index/<sha256 of the URI> {"uri", "sha256", "size", "validator"}
//! <dir>/tmp/                      transfers in progress (emptied at start)
//! ```
//!
//! A blob being read is never evicted (and an unlinked file stays readable to
//! whoever has it open); the last use is kept as the blob's mtime, so the order
//! survives a restart.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use tracing::{debug, info, warn};

/// A blob's last use is written to its mtime at most this often.
const TOUCH_EVERY: Duration = Duration::from_secs(60);

/// What the mirror knows of a URI: the blob it had last, and the origin's
/// validator for it (ETag or Last-Modified) to revalidate with.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(super) struct IndexEntry {
    pub uri: String,
    pub sha256: String,
    pub size: u64,
    pub validator: Option<String>,
}

/// One blob in the LRU order.
#[derive(Debug)]
struct Blob {
    size: u64,
    /// Larger is more recent.
    used: u64,
    touched: SystemTime,
    readers: u32,
}

#[derive(Debug, Default)]
struct Lru {
    blobs: HashMap<String, Blob>,
    total: u64,
    /// Room promised to transfers in progress (their temp files fill it).
    reserved: u64,
    /// Bytes of the blobs being read (they cannot be evicted).
    pinned: u64,
    clock: u64,
}

/// The blob store.
pub(super) struct Store {
    blobs: PathBuf,
    index: PathBuf,
    tmp: PathBuf,
    max_bytes: u64,
    lru: Mutex<Lru>,
}

/// Room promised to a transfer in progress (its temp file never holds more),
/// given back when dropped (or turned into the blob's by [`Store::insert`]).
pub(super) struct Reservation {
    store: Option<Arc<Store>>,
    bytes: u64,
}

impl Reservation {
    /// No room promised, and none to be had (tests publish without one).
    #[cfg(test)]
    pub(super) fn none() -> Reservation {
        Reservation {
            store: None,
            bytes: 0,
        }
    }

    /// The bytes promised.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Promises `extra` bytes more, evicting the least recently used blobs
    /// nobody reads to make room; false (and nothing evicted) when they cannot
    /// fit under `--max-bytes` even so.
    pub(super) fn grow(&mut self, extra: u64) -> bool {
        let Some(store) = &self.store else {
            return false;
        };
        let mut lru = store.lru.lock().expect("lock");
        if lru.pinned + lru.reserved + extra > store.max_bytes {
            return false;
        }
        lru.reserved += extra;
        store.evict(&mut lru);
        self.bytes += extra;
        true
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let (Some(store), true) = (&self.store, self.bytes > 0) {
            store.lru.lock().expect("lock").reserved -= self.bytes;
        }
    }
}

/// An open blob, counted as read until dropped (it is not evicted meanwhile).
pub(super) struct Reading {
    pub file: File,
    pub size: u64,
    pub sha256: String,
    store: Arc<Store>,
}

impl Drop for Reading {
    fn drop(&mut self) {
        let mut lru = self.store.lru.lock().expect("lock");
        if let Some(blob) = lru.blobs.get_mut(&self.sha256) {
            blob.readers = blob.readers.saturating_sub(1);
            if blob.readers == 0 {
                let size = blob.size;
                lru.pinned -= size;
            }
        }
        self.store.evict(&mut lru);
    }
}

/// Bytes an unprivileged writer may still use on the file system of `dir`.
#[allow(clippy::useless_conversion)] // the field types differ between targets
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statvfs the call fills in.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    Some(u64::from(stat.f_bavail).saturating_mul(u64::from(stat.f_frsize)))
}

fn is_sha256(name: &str) -> bool {
    name.len() == 64
        && name
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

impl Store {
    /// Opens (creating) `dir`: empties `tmp/`, learns the blobs and their last use,
    /// and evicts down to `max_bytes`.
    pub(super) fn open(dir: &Path, max_bytes: u64) -> io::Result<Store> {
        let mut store = Store {
            blobs: dir.join("blobs"),
            index: dir.join("index"),
            tmp: dir.join("tmp"),
            max_bytes,
            lru: Mutex::new(Lru::default()),
        };
        for d in [dir, &store.blobs, &store.index, &store.tmp] {
            fs::create_dir_all(d)?;
        }
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
        for entry in fs::read_dir(&store.tmp)? {
            let _ = fs::remove_file(entry?.path());
        }
        let mut found = Vec::new();
        for entry in fs::read_dir(&store.blobs)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let meta = entry.metadata()?;
            if !is_sha256(&name) || !meta.is_file() {
                warn!("mirror: removing {} (not a blob)", entry.path().display());
                let _ = fs::remove_file(entry.path());
                continue;
            }
            found.push((
                meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                name,
                meta.len(),
            ));
        }
        found.sort();
        // A --max-bytes the volume cannot hold would fail every transfer once the
        // disk fills up, with nothing evicted: keep to what fits.
        if let Some(free) = free_bytes(dir) {
            let held: u64 = found.iter().map(|(_, _, size)| size).sum();
            let room = (held + free) / 20 * 19;
            if room < store.max_bytes {
                warn!(
                    "mirror: --max-bytes {} is more than {} can hold ({held} bytes held, {free} free); keeping the blobs under {room} bytes",
                    store.max_bytes,
                    dir.display()
                );
                store.max_bytes = room;
            }
        }
        {
            let mut lru = store.lru.lock().expect("lock");
            for (touched, name, size) in found {
                lru.clock += 1;
                lru.total += size;
                let used = lru.clock;
                lru.blobs.insert(
                    name,
                    Blob {
                        size,
                        used,
                        touched,
                        readers: 0,
                    },
                );
            }
            store.evict(&mut lru);
            // Index entries of blobs no longer held are of no use.
            let mut forgotten = 0;
            for entry in fs::read_dir(&store.index)?.flatten() {
                let held = fs::read(entry.path())
                    .ok()
                    .and_then(|text| serde_json::from_slice::<IndexEntry>(&text).ok())
                    .is_some_and(|e| lru.blobs.contains_key(&e.sha256));
                if !held && fs::remove_file(entry.path()).is_ok() {
                    forgotten += 1;
                }
            }
            debug!("mirror: {forgotten} index entries without a blob removed");
            info!(
                "mirror store {}: {} blob(s), {} bytes (at most {})",
                dir.display(),
                lru.blobs.len(),
                lru.total,
                store.max_bytes
            );
        }
        Ok(store)
    }

    pub(super) fn tmp_dir(&self) -> &Path {
        &self.tmp
    }

    fn blob_path(&self, sha256: &str) -> PathBuf {
        self.blobs.join(sha256)
    }

    fn index_path(&self, uri: &str) -> PathBuf {
        use sha2::Digest;
        self.index
            .join(hex::encode(sha2::Sha256::digest(uri.as_bytes())))
    }

    /// Blobs held and their bytes.
    pub(super) fn usage(&self) -> (usize, u64) {
        let lru = self.lru.lock().expect("lock");
        (lru.blobs.len(), lru.total)
    }

    /// Opens the blob `sha256` for reading, if held and whole (a blob whose size
    /// changed on disk is dropped).
    pub(super) fn read(self: &Arc<Self>, sha256: &str) -> Option<Reading> {
        let mut lru = self.lru.lock().expect("lock");
        let size = lru.blobs.get(sha256)?.size;
        let file = File::open(self.blob_path(sha256));
        let file = match file {
            Ok(file) if file.metadata().is_ok_and(|m| m.len() == size) => file,
            _ => {
                warn!(
                    sha256,
                    "mirror: blob missing or of the wrong size on disk; dropped"
                );
                drop(lru);
                self.drop_blob(sha256);
                return None;
            }
        };
        lru.clock += 1;
        let clock = lru.clock;
        let blob = lru.blobs.get_mut(sha256).expect("present");
        blob.used = clock;
        blob.readers += 1;
        let first = blob.readers == 1;
        let now = SystemTime::now();
        if now.duration_since(blob.touched).unwrap_or_default() >= TOUCH_EVERY {
            blob.touched = now;
            let _ = file.set_modified(now);
        }
        if first {
            lru.pinned += size;
        }
        Some(Reading {
            file,
            size,
            sha256: sha256.to_owned(),
            store: self.clone(),
        })
    }

    /// What the mirror knows of `uri`, if it still holds that blob.
    pub(super) fn lookup(&self, uri: &str) -> Option<IndexEntry> {
        let text = fs::read(self.index_path(uri)).ok()?;
        let entry: IndexEntry = serde_json::from_slice(&text).ok()?;
        let held = self
            .lru
            .lock()
            .expect("lock")
            .blobs
            .contains_key(&entry.sha256);
        (entry.uri == uri && held).then_some(entry)
    }

    /// Publishes the verified temp file `temp` as blob `entry.sha256` (read-only,
    /// fsynced before the rename) and records `entry` for its URI; then evicts.
    /// The room promised to the transfer becomes the blob's; it stays promised
    /// when the blob was held already (the temp file lives on until its readers
    /// are done). A blob larger than the whole store is not kept.
    pub(super) fn insert(
        &self,
        temp: &Path,
        entry: &IndexEntry,
        room: &mut Reservation,
    ) -> io::Result<()> {
        if entry.size > self.max_bytes {
            debug!(uri = %entry.uri, "mirror: {} bytes is more than --max-bytes; not kept", entry.size);
            return Ok(());
        }
        let file = File::open(temp)?;
        file.sync_all()?;
        fs::set_permissions(temp, fs::Permissions::from_mode(0o444))?;
        let path = self.blob_path(&entry.sha256);
        let mut lru = self.lru.lock().expect("lock");
        if !lru.blobs.contains_key(&entry.sha256) {
            fs::rename(temp, &path)?;
            lru.reserved -= std::mem::take(&mut room.bytes);
            lru.total += entry.size;
            lru.clock += 1;
            let used = lru.clock;
            lru.blobs.insert(
                entry.sha256.clone(),
                Blob {
                    size: entry.size,
                    used,
                    touched: SystemTime::now(),
                    readers: 0,
                },
            );
        }
        self.evict(&mut lru);
        drop(lru);
        let json = serde_json::to_vec(entry).map_err(io::Error::other)?;
        crate::layout::write_atomic(&self.index_path(&entry.uri), &json, true)
    }

    /// An empty promise for a transfer about to fill a temp file, to
    /// [`Reservation::grow`] before each byte is written.
    pub(super) fn reservation(self: &Arc<Self>) -> Reservation {
        Reservation {
            store: Some(self.clone()),
            bytes: 0,
        }
    }

    /// The effective `--max-bytes` (lowered at start to what the volume holds).
    pub(super) fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Bytes promised to transfers in progress.
    pub(super) fn reserved(&self) -> u64 {
        self.lru.lock().expect("lock").reserved
    }

    /// Forgets the blob `sha256` (found damaged).
    pub(super) fn drop_blob(&self, sha256: &str) {
        let mut lru = self.lru.lock().expect("lock");
        if let Some(blob) = lru.blobs.remove(sha256) {
            lru.total -= blob.size;
            if blob.readers > 0 {
                lru.pinned -= blob.size;
            }
        }
        let _ = fs::remove_file(self.blob_path(sha256));
    }

    /// Removes the least recently used blobs nobody reads until the total fits.
    fn evict(&self, lru: &mut Lru) {
        while lru.total + lru.reserved > self.max_bytes {
            let victim = lru
                .blobs
                .iter()
                .filter(|(_, b)| b.readers == 0)
                .min_by_key(|(_, b)| b.used)
                .map(|(name, _)| name.clone());
            let Some(victim) = victim else {
                return;
            };
            let blob = lru.blobs.remove(&victim).expect("present");
            lru.total -= blob.size;
            debug!(sha256 = %victim, bytes = blob.size, "mirror: evicted");
            let _ = fs::remove_file(self.blob_path(&victim));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(store: &Store, dir: &Path, uri: &str, body: &[u8]) -> IndexEntry {
        use sha2::Digest;
        let temp = dir.join(format!("t{}", body.len()));
        fs::write(&temp, body).unwrap();
        let entry = IndexEntry {
            uri: uri.to_owned(),
            sha256: hex::encode(sha2::Sha256::digest(body)),
            size: body.len() as u64,
            validator: Some("\"v1\"".to_owned()),
        };
        store
            .insert(&temp, &entry, &mut Reservation::none())
            .unwrap();
        entry
    }

    #[test]
    fn least_recently_used_go_first_but_never_while_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(&dir.path().join("m"), 250).unwrap());
        let a = put(&store, dir.path(), "http://o/a", &[1; 100]);
        let b = put(&store, dir.path(), "http://o/b", &[2; 100]);
        let reading_a = store.read(&a.sha256).unwrap();
        // a was used last and is being read; c pushes the total over: b goes.
        let c = put(&store, dir.path(), "http://o/c", &[3; 100]);
        assert!(store.lookup("http://o/b").is_none());
        assert!(store.read(&b.sha256).is_none());
        assert_eq!(store.usage(), (2, 200));
        // d: a is still read, so c (older than a's read) goes.
        let d = put(&store, dir.path(), "http://o/d", &[4; 100]);
        assert!(store.read(&c.sha256).is_none());
        assert_eq!(store.usage().0, 2);
        drop(reading_a);
        assert_eq!(store.lookup("http://o/a"), Some(a.clone()));
        // A restart keeps what was there, and its order.
        drop(store);
        let store = Arc::new(Store::open(&dir.path().join("m"), 250).unwrap());
        assert_eq!(store.usage(), (2, 200));
        assert!(store.read(&d.sha256).is_some());
        let mode = fs::metadata(dir.path().join("m/blobs").join(&d.sha256))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o444);
    }

    #[test]
    fn a_transfer_gets_its_room_before_it_writes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(&dir.path().join("m"), 250).unwrap());
        put(&store, dir.path(), "http://o/a", &[1; 100]);
        let b = put(&store, dir.path(), "http://o/b", &[2; 100]);
        // 100 more bytes on their way: the least recently used blob goes now.
        let mut room = store.reservation();
        assert!(room.grow(100));
        assert_eq!(store.usage(), (1, 100));
        assert!(store.lookup("http://o/b").is_some());
        // Published, the promised room becomes the blob's: nothing else goes.
        let temp = dir.path().join("c");
        fs::write(&temp, [3; 100]).unwrap();
        let c = IndexEntry {
            uri: "http://o/c".to_owned(),
            sha256: hex::encode(<sha2::Sha256 as sha2::Digest>::digest([3u8; 100])),
            size: 100,
            validator: None,
        };
        store.insert(&temp, &c, &mut room).unwrap();
        assert_eq!(room.bytes(), 0);
        assert_eq!(store.usage(), (2, 200));
        assert!(store.read(&b.sha256).is_some());
        // A promise dropped unused is given back.
        let mut unused = store.reservation();
        assert!(unused.grow(50));
        drop(unused);
        assert_eq!(store.usage(), (2, 200));
        assert_eq!(store.reserved(), 0);
    }

    #[test]
    fn room_that_cannot_fit_is_refused_and_evicts_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(&dir.path().join("m"), 250).unwrap());
        let a = put(&store, dir.path(), "http://o/a", &[1; 100]);
        // More than the whole store.
        assert!(!store.reservation().grow(251));
        // Two transfers at once share the store: the second does not fit.
        let mut first = store.reservation();
        assert!(first.grow(200));
        assert_eq!(store.usage(), (0, 0), "a was evicted for it");
        let mut second = store.reservation();
        assert!(!second.grow(100));
        assert!(second.grow(50));
        assert!(!second.grow(1));
        drop(first);
        // A blob being read cannot be evicted: what is left is all there is.
        let b = put(&store, dir.path(), "http://o/b", &[2; 100]);
        let reading = store.read(&b.sha256).unwrap();
        assert!(!store.reservation().grow(101));
        assert!(store.read(&b.sha256).is_some(), "nothing evicted in vain");
        assert_eq!(store.lru.lock().unwrap().pinned, 100);
        drop(reading);
        assert_eq!(store.lru.lock().unwrap().pinned, 0);
        assert!(store.lookup(&a.uri).is_none());
    }

    #[test]
    fn a_blob_of_the_wrong_size_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(&dir.path().join("m"), 1000).unwrap());
        let a = put(&store, dir.path(), "http://o/a", &[1; 100]);
        let path = dir.path().join("m/blobs").join(&a.sha256);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        fs::write(&path, [1; 50]).unwrap();
        assert!(store.read(&a.sha256).is_none());
        assert!(store.lookup("http://o/a").is_none());
        assert!(!path.exists());
    }
}
