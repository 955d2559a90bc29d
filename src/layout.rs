//! Bytes on disk: temp files beside their final name, atomic publish, and the
//! state records that let a restarted run re-verify what it finds.
//!
//! Layout inside a destination directory:
//! - `<name>`: a published artifact (complete and verified);
//! - `.spark-localizer.<name>.<pid>.<n>.partial`: a transfer in progress;
//! - `.spark-localizer/<name>.json`: what was published as `<name>` (size, sha256,
//!   and a hash of the URI), written after the rename.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The longest destination name (bytes), leaving room for temp-file decorations.
pub(crate) const MAX_NAME: usize = 200;

/// Prefix reserved for spark-localizer's own temp and state files.
pub(crate) const RESERVED_PREFIX: &str = ".spark-localizer";

/// Default name of the `:`-joined classpath file (in the jars dir).
pub(crate) const CLASSPATH_FILE: &str = "classpath";
/// Default name of the POSIX-sh snippet (in the jars dir).
pub(crate) const ENV_FILE: &str = "spark-classpath.env";
/// Default name of the JSON report (in the jars dir).
pub(crate) const REPORT_FILE: &str = "spark-localizer-report.json";
/// Default name of the CycloneDX SBOM (in the jars dir).
pub(crate) const SBOM_FILE: &str = "spark-localizer-sbom.cdx.json";
/// What `resolve` appends to the lockfile's path to name its SBOM.
pub(crate) const LOCK_SBOM_SUFFIX: &str = ".cdx.json";
/// The outputs' default names: an artifact or a bundle's file may not take them.
pub(crate) const OUTPUT_NAMES: [&str; 4] = [CLASSPATH_FILE, ENV_FILE, REPORT_FILE, SBOM_FILE];
/// A destination name must be one plain path component.
pub(crate) fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("is empty");
    }
    if name == "." || name == ".." {
        return Err("would leave the destination directory");
    }
    if name.contains('/') || name.contains('\\') {
        return Err("contains a path separator");
    }
    if name.chars().any(char::is_control) {
        return Err("contains control characters");
    }
    // Temp and record names add ~40 bytes; file names stop at 255.
    if name.len() > MAX_NAME {
        return Err("is longer than 200 bytes");
    }
    if name.starts_with(RESERVED_PREFIX) {
        return Err("starts with .spark-localizer, which is reserved");
    }
    Ok(())
}

/// The name a file of a staging bundle takes in its destination directory:
/// bundles are flat (regular files at their top level, as `stage upload` makes
/// them), so the entry must be one plain component with a valid name.
pub(crate) fn bundle_file_name(relative: &Path) -> Result<&str, &'static str> {
    let mut parts = relative.components();
    let (Some(std::path::Component::Normal(first)), None) = (parts.next(), parts.next()) else {
        return Err("is inside a directory");
    };
    let name = first.to_str().ok_or("has a name that is not UTF-8")?;
    check_name(name)?;
    Ok(name)
}

const PARTIAL_SUFFIX: &str = ".partial";
/// A directory an archive is being unpacked into.
pub(crate) const UNPACK_SUFFIX: &str = ".unpack";
/// A directory being replaced by a newer unpack.
pub(crate) const OLD_SUFFIX: &str = ".old";
const STATE_DIR: &str = ".spark-localizer";

/// What was published under a name, so a later run can re-verify it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Record {
    /// sha256 of the URI without userinfo (see [`uri_digest`]).
    pub uri_sha256: String,
    pub size: u64,
    pub sha256: String,
}

/// sha256 of a URI without its userinfo, as kept in records: the emptyDir is
/// readable by the main container, so nothing there may help guess a password.
pub(crate) fn uri_digest(uri: &url::Url) -> String {
    let mut bare = uri.clone();
    let _ = bare.set_username("");
    let _ = bare.set_password(None);
    hex::encode(Sha256::digest(bare.as_str().as_bytes()))
}

/// Where a fetched archive is kept (it is unpacked into `<dir>/<name>`).
pub(crate) fn archive_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(STATE_DIR).join("archives").join(name)
}

/// The marker naming the sha256 of the archive `<dir>/<name>` was unpacked from.
pub(crate) fn unpacked_marker(dir: &Path, name: &str) -> PathBuf {
    dir.join(STATE_DIR).join(format!("{name}.unpacked"))
}

fn record_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(STATE_DIR).join(format!("{name}.json"))
}

/// Reads the record of `name`, if there is a readable one.
pub(crate) fn read_record(dir: &Path, name: &str) -> Option<Record> {
    let text = crate::util::fs::read_regular(&record_path(dir, name), 1 << 20).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Writes the record of `name` (temp file + rename, so it is whole or absent),
/// fsynced first when `durable` (`--fsync`).
pub(crate) fn write_record(
    dir: &Path,
    name: &str,
    record: &Record,
    durable: bool,
) -> std::io::Result<()> {
    let json = serde_json::to_vec(record).expect("record serializes");
    write_atomic(&record_path(dir, name), &json, durable)
}

/// Writes `contents` to `path` atomically: a temp file with the reserved prefix
/// beside it (swept by the next run if this one is killed), fsync when `durable`
/// (`--fsync`; an emptyDir needs none: a restarted run re-verifies what it finds),
/// rename.
pub(crate) fn write_atomic(path: &Path, contents: &[u8], durable: bool) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(
        "{RESERVED_PREFIX}.{name}.{}.{n}{PARTIAL_SUFFIX}",
        pid()
    ));
    let result = (|| {
        // The directory usually exists (the run prepared it): created only when missing.
        let mut f = match std::fs::File::create(&tmp) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir)?;
                std::fs::File::create(&tmp)?
            }
            other => other?,
        };
        f.write_all(contents)?;
        if durable {
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// A fresh name beside `target` for a temp directory or a replaced one
/// (`suffix` is [`UNPACK_SUFFIX`] or [`OLD_SUFFIX`]); swept by the next run.
pub(crate) fn temp_beside(target: &Path, suffix: &str) -> PathBuf {
    let dir = target.parent().unwrap_or(Path::new("."));
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("{RESERVED_PREFIX}.{name}.{}.{n}{suffix}", pid()))
}

/// This process's id, asked of the kernel once (musl does not cache it).
fn pid() -> u32 {
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *PID.get_or_init(std::process::id)
}

/// Removes whatever `path` is (file, symlink or directory tree); absent is fine.
pub(crate) fn remove_any(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(md) if md.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Forgets `name`: removes its record (before its file is replaced or removed).
pub(crate) fn remove_record(dir: &Path, name: &str) {
    let _ = std::fs::remove_file(record_path(dir, name));
}

/// Takes the directory's lock (`.spark-localizer/lock`), creating `dir`. When
/// another spark-localizer holds it: waits until `deadline` if `wait`, else
/// returns `None` at once.
pub(crate) async fn lock_dir(
    dir: &Path,
    deadline: tokio::time::Instant,
    wait: bool,
) -> std::io::Result<Option<std::fs::File>> {
    let state = dir.join(STATE_DIR);
    std::fs::create_dir_all(&state)?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(state.join("lock"))?;
    let mut waiting = false;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(Some(file)),
            Err(std::fs::TryLockError::WouldBlock) if !wait => return Ok(None),
            Err(std::fs::TryLockError::WouldBlock) => {
                if !waiting {
                    tracing::info!(
                        "another spark-localizer is working in {}; waiting for it",
                        dir.display()
                    );
                    waiting = true;
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "another spark-localizer held the directory lock until the deadline",
                    ));
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
    }
}

/// Names that have a record in `dir` (artifacts an earlier run published), or an
/// unpack marker (an archive's tree, even when its record is gone).
pub(crate) fn recorded_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir.join(STATE_DIR)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let name = name
                .strip_suffix(".json")
                .or_else(|| name.strip_suffix(".unpacked"))?;
            // Only names an artifact could have; anything else is not ours to act on.
            check_name(name).ok()?;
            Some(name.to_owned())
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Removes partial files left by an earlier (killed) run. Returns how many.
pub(crate) fn sweep_partials(dir: &Path) -> std::io::Result<usize> {
    let state = dir.join(STATE_DIR);
    Ok(sweep_in(dir)? + sweep_in(&state)? + sweep_in(&state.join("archives"))?)
}

fn sweep_in(dir: &Path) -> std::io::Result<usize> {
    let mut removed = 0;
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(RESERVED_PREFIX) {
            continue;
        }
        if name.ends_with(PARTIAL_SUFFIX) {
            std::fs::remove_file(entry.path())?;
            removed += 1;
        } else if name.ends_with(UNPACK_SUFFIX) || name.ends_with(OLD_SUFFIX) {
            // An unpack or a replacement cut short.
            std::fs::remove_dir_all(entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Hashes a file (for re-verifying a file found from an earlier run).
pub(crate) fn hash_file(path: &Path) -> std::io::Result<(u64, [u8; 32])> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok((size, hasher.finalize().into()))
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A temp file beside its final path (`.spark-localizer.<name>.<random>.partial`,
/// created exclusively by the `tempfile` crate); removed on drop unless published.
pub(crate) struct TempFile(tempfile::TempPath);

impl TempFile {
    /// Creates a fresh temp file for `final_path`, readable and writable
    /// (parallel ranges are hashed back from it), with the mode a plain create
    /// would give (0666 less the umask: Spark may run as another user).
    pub(crate) fn create(final_path: &Path) -> std::io::Result<(TempFile, std::fs::File)> {
        use std::os::unix::fs::PermissionsExt;
        let dir = final_path.parent().unwrap_or(Path::new("."));
        let name = final_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let prefix = format!("{RESERVED_PREFIX}.{name}.");
        let create = || {
            tempfile::Builder::new()
                .prefix(&prefix)
                .suffix(PARTIAL_SUFFIX)
                .permissions(std::fs::Permissions::from_mode(0o666))
                .tempfile_in(dir)
        };
        // The directory usually exists (the run prepared it): created only when missing.
        let temp = match create() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir)?;
                create()?
            }
            other => other?,
        };
        let (file, path) = temp.into_parts();
        Ok((TempFile(path), file))
    }

    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }

    /// Renames the temp file onto `final_path` (atomic within the directory).
    pub(crate) fn publish(self, final_path: &Path) -> std::io::Result<()> {
        self.0.persist(final_path).map_err(|e| e.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_file_is_removed_unless_published() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a.jar");
        let (tmp, _f) = TempFile::create(&target).unwrap();
        let p = tmp.path().to_owned();
        assert!(p.exists());
        drop(tmp);
        assert!(!p.exists());
        let (tmp, _f) = TempFile::create(&target).unwrap();
        tmp.publish(&target).unwrap();
        assert!(target.exists());
    }

    #[test]
    fn sweep_removes_only_our_partials() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".spark-localizer.a.jar.1.0.partial"), b"x").unwrap();
        std::fs::write(dir.path().join("a.jar"), b"x").unwrap();
        std::fs::write(dir.path().join("b.partial"), b"x").unwrap();
        assert_eq!(sweep_partials(dir.path()).unwrap(), 1);
        assert!(dir.path().join("a.jar").exists());
        assert!(dir.path().join("b.partial").exists());
    }

    #[test]
    fn records_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let r = Record {
            uri_sha256: uri_digest(&"https://h/a.jar".parse().unwrap()),
            size: 3,
            sha256: "ab".into(),
        };
        write_record(dir.path(), "a.jar", &r, false).unwrap();
        assert_eq!(read_record(dir.path(), "a.jar"), Some(r));
        remove_record(dir.path(), "a.jar");
        assert_eq!(read_record(dir.path(), "a.jar"), None);
    }
}
