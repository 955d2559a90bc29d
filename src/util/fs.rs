//! Reading the small files users point us at (properties, pins, CA bundles, secrets,
//! tokens, TLS keys) and our own state files, safely: only regular files (after
//! symlinks, as Kubernetes mounts Secrets), opened without blocking, so a fifo or a
//! device at such a path is an error instead of a hang, and never more than a limit.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The most any configuration file may hold.
pub(crate) const CONFIG_LIMIT: u64 = 16 * 1024 * 1024;

/// The most a file from a mounted Kubernetes Secret may hold (a Secret's limit):
/// token files, keytabs, ticket caches.
pub(crate) const SECRET_LIMIT: u64 = 1024 * 1024;

/// Opens `path` for reading only if it is a regular file (after symlinks), without
/// blocking: a fifo, even one swapped in after an earlier check, is refused at once.
pub(crate) fn open_regular(path: &Path) -> io::Result<File> {
    // O_NONBLOCK: opening a fifo without a writer returns at once (then refused
    // below); it changes nothing for a regular file.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// Reads all of `path`, which must be a regular file of at most `limit` bytes.
pub(crate) fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = open_regular(path)?;
    let meta = file.metadata()?;
    let too_big = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {limit} bytes"),
        )
    };
    if meta.len() > limit {
        return Err(too_big());
    }
    let mut data = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut data)?;
    if data.len() as u64 > limit {
        return Err(too_big());
    }
    Ok(data)
}

/// Whether `error` is [`read_regular`]'s refusal of a file over its limit.
pub(crate) fn too_large(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::InvalidData
        && error
            .get_ref()
            .is_some_and(|e| e.to_string().starts_with("larger than "))
}

/// [`read_regular`] with [`CONFIG_LIMIT`], as UTF-8 text.
pub(crate) fn read_config_text(path: &Path) -> io::Result<String> {
    String::from_utf8(read_regular(path, CONFIG_LIMIT)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"12345").unwrap();
        assert_eq!(read_regular(&f, 5).unwrap(), b"12345");
        assert!(read_regular(&f, 4).is_err());
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        assert_eq!(read_regular(&link, 10).unwrap(), b"12345");
        assert!(read_regular(dir.path(), 10).is_err());
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Returns at once (no writer is ever coming).
        let err = read_regular(&fifo, 10).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        assert!(read_regular(Path::new("/dev/zero"), 10).is_err());
        assert!(read_regular(&dir.path().join("missing"), 10).is_err());
    }
}
